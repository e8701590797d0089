//! Watches: one-shot watches, events before replies, persistent and recursive watches.

use super::*;

/// The next events of `w` are `expected`, in this order.
async fn expect_in_order(
    w: &mut zk::PersistentWatcher,
    kind: &str,
    expected: &[(zk::EventType, &String)],
) {
    for (i, (event_type, path)) in expected.iter().enumerate() {
        let event = within(&format!("{kind} watch event"), w.changed()).await;
        assert_eq!(
            (event.event_type, &event.path),
            (*event_type, *path),
            "{kind} event #{i}"
        );
    }
}

/// The one-shot watch `w` (an `exists`, `data` or `child` watch) fires with `kind` on
/// `path`, the session connected.
async fn fires(w: zk::OneshotWatcher, kind: zk::EventType, path: &str, watch: &str) {
    let event = within(&format!("{kind:?} ({watch} watch)"), w.changed()).await;
    assert_eq!((event.event_type, event.path.as_str()), (kind, path));
    assert_eq!(event.session_state, zk::SessionState::SyncConnected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oneshot_watches() {
    let (_target, writer, watcher, ns) = start_pair("watches").await;
    let n = ns.path("n");

    // exists-watch on a missing node fires NodeCreated.
    let (stat, w) = watcher.check_and_watch_stat(&n).await.unwrap();
    assert_eq!(stat, None);
    writer.create(&n, b"", &persistent()).await.unwrap();
    fires(w, zk::EventType::NodeCreated, &n, "exists").await;

    // exists-watch on an existing node: NodeDataChanged, then NodeDeleted on a fresh one.
    let (_, w) = watcher.check_and_watch_stat(&n).await.unwrap();
    writer.set_data(&n, b"1", None).await.unwrap();
    fires(w, zk::EventType::NodeDataChanged, &n, "exists").await;

    // Data watch: setACL, sync, reads and failed writes do not fire it.
    let (_, _, w) = watcher.get_and_watch_data(&n).await.unwrap();
    writer
        .set_acl(&n, &zk::Acls::anyone_all(), None)
        .await
        .unwrap();
    writer.sync(&n).await.unwrap();
    writer.get_data(&n).await.unwrap();
    assert_eq!(
        writer.set_data(&n, b"x", Some(9)).await,
        Err(zk::Error::BadVersion)
    );
    assert_eq!(
        writer.create(&n, b"", &persistent()).await,
        Err(zk::Error::NodeExists)
    );
    let w = match tokio::time::timeout(QUIET, w.changed()).await {
        Ok(event) => panic!("watch fired without a data change: {event:?}"),
        Err(_) => watcher.get_and_watch_data(&n).await.unwrap().2,
    };
    writer.set_data(&n, b"2", None).await.unwrap();
    fires(w, zk::EventType::NodeDataChanged, &n, "data").await;

    // Child watch: child create and delete fire NodeChildrenChanged on the parent, a child's
    // data change does not.
    let child = format!("{n}/c");
    let (_, _, w) = watcher.get_and_watch_children(&n).await.unwrap();
    writer.create(&child, b"", &persistent()).await.unwrap();
    fires(w, zk::EventType::NodeChildrenChanged, &n, "child").await;
    let (_, w) = watcher.list_and_watch_children(&n).await.unwrap();
    writer.set_data(&child, b"x", None).await.unwrap();
    writer.set_data(&n, b"x", None).await.unwrap();
    let w = match tokio::time::timeout(QUIET, w.changed()).await {
        Ok(event) => panic!("child watch fired without a child change: {event:?}"),
        Err(_) => watcher.list_and_watch_children(&n).await.unwrap().1,
    };
    writer.delete(&child, None).await.unwrap();
    fires(w, zk::EventType::NodeChildrenChanged, &n, "child").await;

    // Deleting the node fires NodeDeleted on its exists, data and child watches alike.
    let (_, exists_w) = watcher.check_and_watch_stat(&n).await.unwrap();
    let (_, _, data_w) = watcher.get_and_watch_data(&n).await.unwrap();
    let (_, child_w) = watcher.list_and_watch_children(&n).await.unwrap();
    writer.delete(&n, None).await.unwrap();
    fires(exists_w, zk::EventType::NodeDeleted, &n, "exists").await;
    fires(data_w, zk::EventType::NodeDeleted, &n, "data").await;
    fires(child_w, zk::EventType::NodeDeleted, &n, "child").await;

    // Reads with a watch on a missing node fail without leaving a watch behind.
    assert_eq!(
        watcher.get_and_watch_data(&n).await.err(),
        Some(zk::Error::NoNode)
    );
    assert_eq!(
        watcher.get_and_watch_children(&n).await.err(),
        Some(zk::Error::NoNode)
    );
}

/// A notification reaches the client before the reply to the write that caused it (same
/// connection), and before the reply to any later request of the watching connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_events_precede_replies() {
    let (_target, a, b, ns) = start_pair("ordering").await;
    let n = ns.path("n");
    a.create(&n, b"0", &persistent()).await.unwrap();

    for round in 1..=5 {
        let (_, _, w) = a.get_and_watch_data(&n).await.unwrap();
        a.set_data(&n, round.to_string().as_bytes(), None)
            .await
            .unwrap();
        let event = w
            .changed()
            .now_or_never()
            .expect("event must arrive before the reply of its own write");
        assert_eq!(event.event_type, zk::EventType::NodeDataChanged);

        let (_, _, w) = a.get_and_watch_data(&n).await.unwrap();
        let (_, _, child_w) = a.get_and_watch_children(&ns.root).await.unwrap();
        b.set_data(&n, format!("b{round}").as_bytes(), None)
            .await
            .unwrap();
        b.create(&ns.path(&format!("c{round}")), b"", &persistent())
            .await
            .unwrap();
        let (data, _) = a.get_data(&n).await.unwrap();
        assert_eq!(data, format!("b{round}").into_bytes());
        let event = w
            .changed()
            .now_or_never()
            .expect("event must arrive before a later read reply");
        assert_eq!(event.event_type, zk::EventType::NodeDataChanged);
        let event = child_w
            .changed()
            .now_or_never()
            .expect("child event must arrive before a later read reply");
        assert_eq!(
            (event.event_type, event.path),
            (zk::EventType::NodeChildrenChanged, ns.root.clone())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_and_recursive_watches() {
    let (target, writer, watcher, ns) = start_pair("persistent").await;
    let recursive_watcher = connect(&target).await;
    let p = ns.path("p");
    let child = format!("{p}/c");
    let grandchild = format!("{child}/g");

    // Both registered before the node exists.
    let mut pw = add_watch(&watcher, &p, zk::AddWatchMode::Persistent).await;
    let mut rw = add_watch(
        &recursive_watcher,
        &p,
        zk::AddWatchMode::PersistentRecursive,
    )
    .await;

    writer.create(&p, b"", &persistent()).await.unwrap();
    writer.create(&child, b"", &persistent()).await.unwrap();
    writer.set_data(&child, b"1", None).await.unwrap();
    writer
        .create(&grandchild, b"", &persistent())
        .await
        .unwrap();
    writer.set_data(&grandchild, b"1", None).await.unwrap();
    writer.set_data(&p, b"1", None).await.unwrap();
    writer.delete(&grandchild, None).await.unwrap();
    writer.delete(&child, None).await.unwrap();
    writer.delete(&p, None).await.unwrap();
    // Persistent watches survive the deletion of their node.
    writer.create(&p, b"", &persistent()).await.unwrap();
    writer.set_data(&p, b"2", None).await.unwrap();

    use zk::EventType::*;
    let expected_persistent = [
        (NodeCreated, &p),
        (NodeChildrenChanged, &p),
        (NodeDataChanged, &p),
        (NodeChildrenChanged, &p),
        (NodeDeleted, &p),
        (NodeCreated, &p),
        (NodeDataChanged, &p),
    ];
    expect_in_order(&mut pw, "persistent", &expected_persistent).await;
    let expected_recursive = [
        (NodeCreated, &p),
        (NodeCreated, &child),
        (NodeDataChanged, &child),
        (NodeCreated, &grandchild),
        (NodeDataChanged, &grandchild),
        (NodeDataChanged, &p),
        (NodeDeleted, &grandchild),
        (NodeDeleted, &child),
        (NodeDeleted, &p),
        (NodeCreated, &p),
        (NodeDataChanged, &p),
    ];
    expect_in_order(&mut rw, "recursive", &expected_recursive).await;
    if let Ok(event) = tokio::time::timeout(QUIET, pw.changed()).await {
        panic!("extra persistent event {event:?}");
    }
    if let Ok(event) = tokio::time::timeout(QUIET, rw.changed()).await {
        panic!("extra recursive event {event:?}");
    }
}
