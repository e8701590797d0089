//! Listing, sync, getEphemerals, getAllChildrenNumber and whoAmI.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_sync_ephemerals_counts_and_whoami() {
    let (target, a, b, ns) = start_pair("misc").await;
    let dir = ns.path("d");
    a.create(&dir, b"dir", &persistent()).await.unwrap();
    a.create(&format!("{dir}/sub"), b"", &persistent())
        .await
        .unwrap();
    for path in ["e1", "e1x", "sub/e2"] {
        a.create(&format!("{dir}/{path}"), b"", &ephemeral())
            .await
            .unwrap();
    }
    b.create(&format!("{dir}/e1b"), b"", &ephemeral())
        .await
        .unwrap();

    // getChildren2 returns the same Stat as getData.
    let (mut children, stat) = a.get_children(&dir).await.unwrap();
    children.sort();
    assert_eq!(children, ["e1", "e1b", "e1x", "sub"]);
    assert_eq!(a.get_data(&dir).await.unwrap(), (b"dir".to_vec(), stat));
    let (leaf_children, leaf) = a.get_children(&format!("{dir}/e1")).await.unwrap();
    assert!(leaf_children.is_empty());
    assert_eq!(
        (leaf.num_children, leaf.ephemeral_owner),
        (0, a.session_id().0)
    );

    // sync (on existing and missing paths; sync does not check existence).
    a.sync(&dir).await.unwrap();
    a.sync(&ns.path("missing")).await.unwrap();

    // getEphemerals: the caller's own, filtered by plain string prefix.
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let mine: Vec<String> = ["e1", "e1x", "sub/e2"]
        .iter()
        .map(|p| format!("{dir}/{p}"))
        .collect();
    assert_eq!(sorted(a.list_ephemerals("/").await.unwrap()), mine);
    assert_eq!(sorted(a.list_ephemerals(&dir).await.unwrap()), mine);
    assert_eq!(
        sorted(a.list_ephemerals(&format!("{dir}/e1")).await.unwrap()),
        mine[..2]
    );
    assert_eq!(
        a.list_ephemerals(&format!("{dir}/sub/e2")).await.unwrap(),
        [format!("{dir}/sub/e2")]
    );
    assert_eq!(
        a.list_ephemerals(&ns.path("nothing")).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        b.list_ephemerals("/").await.unwrap(),
        [format!("{dir}/e1b")]
    );

    // getAllChildrenNumber counts all descendants.
    assert_eq!(a.count_descendants_number(&dir).await.unwrap(), 5);
    assert_eq!(a.count_descendants_number(&ns.root).await.unwrap(), 6);
    assert_eq!(
        a.count_descendants_number(&format!("{dir}/sub/e2"))
            .await
            .unwrap(),
        0
    );

    // whoAmI: the connection's ip identity, plus digest users after addauth.
    let who = |users: Vec<zk::AuthUser>| {
        let mut v: Vec<(String, String)> = users
            .iter()
            .map(|u| (u.scheme().to_string(), u.user().to_string()))
            .collect();
        v.sort();
        v
    };
    let ip = ("ip".to_string(), target.addr().ip().to_string());
    assert_eq!(who(a.list_auth_users().await.unwrap()), vec![ip.clone()]);
    a.auth("digest", b"user:pass").await.unwrap();
    assert_eq!(
        who(a.list_auth_users().await.unwrap()),
        [("digest".to_string(), "user".to_string()), ip.clone()]
    );
    assert_eq!(who(b.list_auth_users().await.unwrap()), [ip]);

    // The system nodes exist and the config node is readable.
    assert!(a.check_stat("/zookeeper").await.unwrap().is_some());
    a.get_config().await.unwrap();
}

/// A list long enough for the server to keep it encoded (40 children) read after deletes,
/// a few at a time and then more than the server notes before it drops the list, and after
/// a create: each read lists exactly the children left, and its Stat is getData's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_child_list_read_after_deletes_lists_what_is_left() {
    let (target, a, b, ns) = start_pair("long-list").await;
    let dir = ns.path("d");
    a.create(&dir, b"", &persistent()).await.unwrap();
    let mut left: Vec<String> = (0..40).map(|i| format!("c-{i:02}")).collect();
    for name in &left {
        a.create(&format!("{dir}/{name}"), b"", &persistent())
            .await
            .unwrap();
    }
    let check = |left: Vec<String>| {
        let (a, b, dir) = (&a, &b, &dir);
        async move {
            for client in [a, b] {
                let (mut children, stat) = client.get_children(dir).await.unwrap();
                children.sort();
                assert_eq!(children, left);
                assert_eq!(client.get_data(dir).await.unwrap().1, stat);
            }
        }
    };
    check(left.clone()).await;
    // Three deletes (the lowest, one inside, the last), then nine more, then a create.
    for batch in [vec![0, 16, 37], (20..29).collect::<Vec<usize>>()] {
        let gone: Vec<String> = batch.iter().map(|&i| format!("c-{i:02}")).collect();
        for name in &gone {
            b.delete(&format!("{dir}/{name}"), None).await.unwrap();
        }
        left.retain(|n| !gone.contains(n));
        check(left.clone()).await;
    }
    a.create(&format!("{dir}/c-00"), b"", &persistent())
        .await
        .unwrap();
    left.insert(0, "c-00".to_string());
    check(left).await;
    drop(target);
}
