//! Sessions: timeout negotiation, resume after a lost connection, close and expiry.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_timeout_negotiation() {
    let target = Target::start().await;
    let mut ids = BTreeSet::new();
    // Default tickTime 2000: bounds are 4 s and 40 s.
    for (requested, negotiated) in [(1, 4), (4, 4), (10, 10), (100, 40)] {
        let client = connect_with(
            &target,
            zk::Client::connector().with_session_timeout(Duration::from_secs(requested)),
        )
        .await;
        assert_eq!(
            client.session_timeout(),
            Duration::from_secs(negotiated),
            "requested {requested}s"
        );
        assert_eq!(client.state(), zk::SessionState::SyncConnected);
        assert_ne!(client.session_id().0, 0);
        assert!(ids.insert(client.session_id().0), "session id reused");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_resume_close_and_expiry() {
    let (target, observer, ns) = start("session").await;
    let e1 = ns.path("e1");
    let e2 = ns.path("e2");

    // A detached session survives the loss of its connection and can be resumed.
    let first = connect_detached(&target).await;
    assert_eq!(first.session_timeout(), SHORT_SESSION);
    first.create(&e1, b"", &ephemeral()).await.unwrap();
    let info = first.session().clone();
    let id = first.session_id();
    drop(first);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let resumed = zk::Client::connector()
        .with_session(info.clone())
        .with_session_timeout(SHORT_SESSION)
        .with_detached();
    let second = connect_with(&target, resumed).await;
    assert_eq!(second.session_id(), id, "same session after reconnecting");
    assert_eq!(
        second.list_ephemerals(&ns.root).await.unwrap(),
        vec![e1.clone()]
    );
    let (stat, _) = second.create(&e2, b"", &ephemeral()).await.unwrap();
    assert_eq!(stat.ephemeral_owner, id.0);

    // Then the session expires: both ephemerals vanish, in one transaction.
    let (_, _, dir_watch) = observer.get_and_watch_children(&ns.root).await.unwrap();
    let (_, e1_watch) = observer.check_and_watch_stat(&e1).await.unwrap();
    drop(second);
    let event = within("expiry of the detached session", e1_watch.changed()).await;
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (zk::EventType::NodeDeleted, e1.as_str())
    );
    let event = within("parent notification", dir_watch.changed()).await;
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (zk::EventType::NodeChildrenChanged, ns.root.as_str())
    );
    assert_eq!(observer.check_stat(&e2).await.unwrap(), None);
    let (_, root_stat) = observer.get_children(&ns.root).await.unwrap();
    assert_eq!((root_stat.num_children, root_stat.cversion), (0, 4));

    // An expired session cannot be resumed.
    assert_cannot_resume(&target, info).await;

    // A closed session is gone at once (well before its 40 s timeout), and cannot be resumed
    // either.
    let third = connect_long(&target).await;
    third.create(&e1, b"", &ephemeral()).await.unwrap();
    let info = third.session().clone();
    drop(third);
    eventually("ephemeral of a closed session to go", || async {
        observer.check_stat(&e1).await.unwrap().is_none()
    })
    .await;
    assert_cannot_resume(&target, info).await;
}
