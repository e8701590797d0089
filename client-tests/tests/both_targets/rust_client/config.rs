//! Configuration publish / subscribe: subscribers re-read and re-watch a node and see every version in order.

use super::*;

/// A subscriber's report: reads are the node's data and Stat.
type Sub = Watched<(Vec<u8>, zk::Stat)>;

async fn subscriber(client: zk::Client, path: String, tx: mpsc::UnboundedSender<Sub>) {
    loop {
        match client.get_and_watch_data(&path).await {
            Ok((data, stat, watcher)) => {
                let _ = tx.send(Watched::Read((data, stat)));
                send_event(&tx, watcher.changed().await);
            }
            Err(zk::Error::NoNode) => {
                let _ = tx.send(Watched::Gone);
                return;
            }
            Err(e) => {
                let _ = tx.send(Watched::Failed(e.to_string()));
                return;
            }
        }
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
        let (data, stat) = expect_read(&mut rx, "initial read").await;
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
            expect_watched_event(rx, zk::EventType::NodeDataChanged, &path, "data change").await;
            let (seen, seen_stat) = expect_read(rx, "re-read after the event").await;
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
            expect_watched_event(rx, zk::EventType::NodeDataChanged, &path, "burst change").await;
            let (data, stat) = expect_read(rx, "burst re-read").await;
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
        expect_watched_event(rx, zk::EventType::NodeDeleted, &path, "deletion").await;
        assert!(matches!(
            recv(rx, "end of subscription").await,
            Watched::Gone
        ));
    }
}
