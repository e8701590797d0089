//! Container and TTL nodes are removed by zkd's reaper (every second by default; ZooKeeper's
//! default is every minute), observed through the unmodified `zookeeper-client` crate.

use std::time::{Duration, Instant};

use zkd_client_tests::zk_rust::{connect, persistent, within};
use zkd_testkit::target::Target;
use zookeeper_client as zk;

/// Polls until `path` no longer exists, returning how long that took.
async fn wait_gone(client: &zk::Client, path: &str) -> Duration {
    let start = Instant::now();
    within("reaping", async {
        while client.check_stat(path).await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread")]
async fn used_containers_are_reaped_and_fire_events() {
    let target = Target::start_zkd().await;
    let client = connect(&target).await;
    let watcher_client = connect(&target).await;
    let mut watcher = watcher_client
        .watch("/jobs", zk::AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let container = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
    let (stat, _) = client.create("/jobs", b"", &container).await.unwrap();
    assert_eq!(stat.ephemeral_owner, 0, "containers report no owner");
    client.create("/fresh", b"", &container).await.unwrap();
    client.create("/jobs/1", b"", &persistent()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        client.check_stat("/jobs").await.unwrap().is_some(),
        "a container with a child stays"
    );
    client.delete("/jobs/1", None).await.unwrap();
    wait_gone(&client, "/jobs").await;
    let mut seen = Vec::new();
    while seen
        .last()
        .map(|e: &zk::WatchedEvent| (e.event_type, e.path.as_str()))
        != Some((zk::EventType::NodeDeleted, "/jobs"))
    {
        seen.push(within("reaper's NodeDeleted", watcher.changed()).await);
    }
    let kinds: Vec<_> = seen
        .iter()
        .map(|e| (e.event_type, e.path.clone()))
        .collect();
    assert_eq!(
        kinds,
        [
            (zk::EventType::NodeCreated, "/jobs".to_string()),
            (zk::EventType::NodeCreated, "/jobs/1".to_string()),
            (zk::EventType::NodeDeleted, "/jobs/1".to_string()),
            (zk::EventType::NodeDeleted, "/jobs".to_string()),
        ]
    );
    assert!(
        client.check_stat("/fresh").await.unwrap().is_some(),
        "a never-used container stays"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ttl_nodes_expire_from_their_last_change() {
    let target = Target::start_zkd().await;
    let client = connect(&target).await;
    let ttl = persistent().with_ttl(Duration::from_millis(800));
    client.create("/short", b"", &ttl).await.unwrap();
    client.create("/kept", b"", &ttl).await.unwrap();
    client
        .create("/kept/child", b"", &persistent())
        .await
        .unwrap();
    client.create("/touched", b"", &ttl).await.unwrap();
    // setData moves mtime, so it extends the node's life.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        client.set_data("/touched", b"again", None).await.unwrap();
    }
    assert!(
        client.check_stat("/short").await.unwrap().is_none(),
        "expired TTL node is gone"
    );
    assert!(
        client.check_stat("/touched").await.unwrap().is_some(),
        "recently written node stays"
    );
    assert!(
        client.check_stat("/kept").await.unwrap().is_some(),
        "a TTL node with children stays"
    );
    wait_gone(&client, "/touched").await;
    client.delete("/kept/child", None).await.unwrap();
    wait_gone(&client, "/kept").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ttl_nodes_can_be_disabled() {
    let config = zkd_server::Config {
        ttl_enabled: false,
        ..Default::default()
    };
    let target = Target::start_zkd_with(config).await;
    let client = connect(&target).await;
    let ttl = persistent().with_ttl(Duration::from_secs(5));
    assert_eq!(
        client.create("/t", b"", &ttl).await.map(|_| ()),
        Err(zk::Error::Unimplemented)
    );
}
