//! Configuration publish / subscribe: subscribers re-read and re-watch a node and see every version in order.

use super::*;

#[derive(Debug)]
enum Sub {
    Seen { data: Vec<u8>, stat: zk::Stat },
    Event { event: zk::EventType, path: String },
    Gone,
    Failed(String),
}

async fn subscriber(client: zk::Client, path: String, tx: mpsc::UnboundedSender<Sub>) {
    loop {
        match client.get_and_watch_data(&path).await {
            Ok((data, stat, watcher)) => {
                let _ = tx.send(Sub::Seen { data, stat });
                let event = watcher.changed().await;
                let _ = tx.send(Sub::Event {
                    event: event.event_type,
                    path: event.path,
                });
            }
            Err(zk::Error::NoNode) => {
                let _ = tx.send(Sub::Gone);
                return;
            }
            Err(e) => {
                let _ = tx.send(Sub::Failed(e.to_string()));
                return;
            }
        }
    }
}

async fn expect_seen(rx: &mut mpsc::UnboundedReceiver<Sub>, what: &str) -> (Vec<u8>, zk::Stat) {
    match recv(rx, what).await {
        Sub::Seen { data, stat } => (data, stat),
        Sub::Failed(error) => panic!("{what}: subscriber failed: {error}"),
        other => panic!("{what}: expected a read, got {other:?}"),
    }
}

async fn expect_sub_event(
    rx: &mut mpsc::UnboundedReceiver<Sub>,
    event: zk::EventType,
    path: &str,
    what: &str,
) {
    match recv(rx, what).await {
        Sub::Event {
            event: got,
            path: got_path,
        } => {
            assert_eq!((got, got_path.as_str()), (event, path), "{what}");
        }
        Sub::Failed(error) => panic!("{what}: subscriber failed: {error}"),
        other => panic!("{what}: expected {event:?}, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_publish_subscribe() {
    const SUBSCRIBERS: usize = 3;
    let (target, publisher, ns) = start("config").await;
    let path = ns.path("config");
    let (created, _) = publisher.create(&path, b"v0", &persistent()).await.unwrap();
    assert_eq!((created.version, created.data_length), (0, 2));

    let mut subs = Vec::new();
    for _ in 0..SUBSCRIBERS {
        let (tx, mut rx) = mpsc::unbounded_channel();
        tokio::spawn(subscriber(connect(&target).await, path.clone(), tx));
        let (data, stat) = expect_seen(&mut rx, "initial read").await;
        assert_eq!((data.as_slice(), stat), (&b"v0"[..], created));
        subs.push(rx);
    }

    // Lock step: every subscriber sees every version, in order.
    let mut last = created;
    for version in 1..=5 {
        let data = format!("v{version}");
        let stat = publisher
            .set_data(&path, data.as_bytes(), Some(version - 1))
            .await
            .unwrap();
        assert_eq!(stat.version, version);
        assert_eq!(
            (stat.czxid, stat.ctime, stat.pzxid),
            (created.czxid, created.ctime, created.pzxid)
        );
        assert!(
            stat.mzxid > last.mzxid && stat.mtime >= last.mtime,
            "{stat:?} after {last:?}"
        );
        assert_eq!(stat.data_length, data.len() as i32);
        for rx in subs.iter_mut() {
            expect_sub_event(rx, zk::EventType::NodeDataChanged, &path, "data change").await;
            let (seen, seen_stat) = expect_seen(rx, "re-read after the event").await;
            assert_eq!((seen, seen_stat), (data.clone().into_bytes(), stat));
        }
        last = stat;
    }
    assert_eq!(
        publisher.set_data(&path, b"stale", Some(3)).await,
        Err(zk::Error::BadVersion),
        "a publisher with a stale version must be refused"
    );

    // Burst: subscribers may skip versions but must end on the latest, never going backwards.
    let final_version = 25;
    for version in 6..=final_version {
        publisher
            .set_data(&path, format!("v{version}").as_bytes(), Some(version - 1))
            .await
            .unwrap();
    }
    for rx in subs.iter_mut() {
        let mut seen_version = 5;
        let mut last_mzxid = last.mzxid;
        while seen_version < final_version {
            expect_sub_event(rx, zk::EventType::NodeDataChanged, &path, "burst change").await;
            let (data, stat) = expect_seen(rx, "burst re-read").await;
            assert!(
                stat.version > seen_version,
                "version went from {seen_version} to {}",
                stat.version
            );
            assert!(stat.mzxid > last_mzxid);
            assert_eq!(data, format!("v{}", stat.version).into_bytes());
            seen_version = stat.version;
            last_mzxid = stat.mzxid;
        }
        assert_quiet(rx, "after the latest version").await;
    }

    // Removing the configuration ends every subscription.
    publisher.delete(&path, Some(final_version)).await.unwrap();
    for rx in subs.iter_mut() {
        expect_sub_event(rx, zk::EventType::NodeDeleted, &path, "deletion").await;
        assert!(matches!(recv(rx, "end of subscription").await, Sub::Gone));
    }
}
