//! Group membership with ephemeral nodes: joins, a close, an explicit leave and an expiry, seen by an observer.

use super::*;

/// An observer's report: reads are the sorted member names and the group's Stat.
type Obs = Watched<(Vec<String>, zk::Stat)>;

async fn observer(client: zk::Client, path: String, tx: mpsc::UnboundedSender<Obs>) {
    loop {
        match client.get_and_watch_children(&path).await {
            Ok((mut members, stat, watcher)) => {
                members.sort();
                let _ = tx.send(Watched::Read((members, stat)));
                send_event(&tx, watcher.changed().await);
            }
            Err(zk::Error::NoNode) => return,
            Err(e) => {
                let _ = tx.send(Watched::Failed(e.to_string()));
                return;
            }
        }
    }
}

/// The observer's next view shows `members` at `cversion`.
async fn expect_view(
    rx: &mut mpsc::UnboundedReceiver<Obs>,
    members: &[&str],
    cversion: i32,
    what: &str,
) -> zk::Stat {
    let (got, stat) = expect_read(rx, what).await;
    assert_eq!(got, members, "{what}");
    assert_eq!(
        (stat.cversion, stat.num_children),
        (cversion, members.len() as i32),
        "{what}"
    );
    stat
}

/// The group's children changed (`what`), and the observer's next view (`view`) shows
/// `members` at `cversion`.
async fn expect_change(
    rx: &mut mpsc::UnboundedReceiver<Obs>,
    group: &str,
    members: &[&str],
    cversion: i32,
    what: &str,
    view: &str,
) -> zk::Stat {
    expect_watched_event(rx, zk::EventType::NodeChildrenChanged, group, what).await;
    expect_view(rx, members, cversion, view).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_membership() {
    let (target, admin, ns) = start("members").await;
    let group = mkdir(&admin, &ns, "members").await;

    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(observer(connect(&target).await, group.clone(), tx));
    let mut pzxid = expect_view(&mut rx, &[], 0, "empty group").await.pzxid;

    // Four members join one by one; m1 has a long session timeout (its close must not be
    // mistaken for an expiry), m3 is detached so that it can expire later.
    let names = ["m0", "m1", "m2", "m3"];
    let mut members = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let member = match i {
            1 => connect_long(&target).await,
            3 => connect_detached(&target).await,
            _ => connect(&target).await,
        };
        let (path, host) = (format!("{group}/{name}"), format!("host-{i}:2181"));
        let (stat, _) = member
            .create(&path, host.as_bytes(), &ephemeral())
            .await
            .unwrap();
        assert_eq!(stat.ephemeral_owner, member.session_id().0);
        let view = expect_change(
            &mut rx,
            &group,
            &names[..=i],
            i as i32 + 1,
            "join",
            "after a join",
        )
        .await;
        assert_eq!(
            view.pzxid, stat.czxid,
            "pzxid is the zxid of the last child change"
        );
        pzxid = view.pzxid;
        members.push(Some(member));
    }
    for (i, member) in members.iter().enumerate() {
        let (data, stat) = admin
            .get_data(&format!("{group}/{}", names[i]))
            .await
            .unwrap();
        assert_eq!(data, format!("host-{i}:2181").into_bytes());
        assert_eq!(
            stat.ephemeral_owner,
            member.as_ref().unwrap().session_id().0
        );
    }

    // m1 closes its session: its node goes at once, not after the session timeout (40 s, far
    // longer than the wait for the event).
    drop(members[1].take());
    let view = expect_change(
        &mut rx,
        &group,
        &["m0", "m2", "m3"],
        5,
        "m1 leaves",
        "after m1 closed",
    )
    .await;
    assert!(view.pzxid > pzxid);
    pzxid = view.pzxid;

    // m2 leaves explicitly but keeps its session.
    members[2]
        .as_ref()
        .unwrap()
        .delete(&format!("{group}/m2"), Some(0))
        .await
        .unwrap();
    let view = expect_change(
        &mut rx,
        &group,
        &["m0", "m3"],
        6,
        "m2 leaves",
        "after m2 deleted its node",
    )
    .await;
    assert!(view.pzxid > pzxid);

    // m3 disappears without closing: the server must expire it.
    let m3_session = members[3].as_ref().unwrap().session().clone();
    drop(members[3].take());
    expect_change(
        &mut rx,
        &group,
        &["m0"],
        7,
        "m3 expires",
        "after m3 expired",
    )
    .await;
    // Its node went because the session expired, not because the connection dropped.
    assert_cannot_resume(&target, m3_session).await;

    drop(members[0].take());
    expect_change(&mut rx, &group, &[], 8, "m0 leaves", "after everyone left").await;

    admin.delete(&group, Some(0)).await.unwrap();
    expect_watched_event(&mut rx, zk::EventType::NodeDeleted, &group, "group removed").await;
    assert_eq!(
        members[2]
            .as_ref()
            .unwrap()
            .check_stat(&group)
            .await
            .unwrap(),
        None
    );
}
