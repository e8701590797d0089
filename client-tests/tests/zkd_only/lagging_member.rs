//! A lagging member of a three-member ensemble, seen by the unmodified `zookeeper-client`
//! crate: a read written without sync() gets the stale value through it, the same read after
//! sync() the new one; a watch set through it fires when it catches up; a write through it
//! is answered after it applied it; and the lag is set over HTTP as well as in Rust.

use std::net::SocketAddr;
use std::time::Duration;

use zkd_client_tests::zk_rust;
use zkd_client_tests::zk_rust::{persistent, within};
use zkd_server::Lag;
use zkd_server::{ClockMode, Config, EnsembleConfig, Server};
use zookeeper_client as zk;

use crate::admin;
use crate::ensemble::member_addr;

const LAGGING: u64 = 2;

async fn ensemble(clock: ClockMode) -> Server {
    Server::start(Config {
        port: 0,
        admin_port: Some(0),
        clock,
        ensemble: Some(EnsembleConfig::numbered(3, 0).expect("three members")),
        ..Default::default()
    })
    .await
    .expect("a three-member ensemble")
}

async fn client(addr: SocketAddr) -> zk::Client {
    within(
        "session establishment",
        zk::Client::connector()
            .with_fail_eagerly()
            .connect(&addr.to_string()),
    )
    .await
    .expect("connect")
}

/// An ensemble with a writer on member 1 and a reader on the lagging member, and
/// `/config` = "v1".
async fn with_config(clock: ClockMode) -> (Server, zk::Client, zk::Client) {
    let server = ensemble(clock).await;
    let writer = client(member_addr(&server, 1)).await;
    let reader = client(member_addr(&server, LAGGING)).await;
    writer
        .create("/config", b"v1", &persistent())
        .await
        .expect("create");
    (server, writer, reader)
}

async fn read(client: &zk::Client, path: &str) -> Vec<u8> {
    within("getData", client.get_data(path))
        .await
        .expect("getData")
        .0
}

/// The code under test: a service reads its configuration after another process changed
/// it, either directly or, as ZooKeeper asks of readers that need the latest value, after
/// sync().
async fn read_config(client: &zk::Client, with_sync: bool) -> Vec<u8> {
    if with_sync {
        within("sync", client.sync("/config")).await.expect("sync");
    }
    read(client, "/config").await
}

#[tokio::test]
async fn without_sync_a_lagging_member_serves_the_stale_value_with_sync_the_new_one() {
    for lag in [Lag::Ms(3_600_000), Lag::Txns(1000)] {
        for with_sync in [false, true] {
            let (server, writer, reader) = with_config(ClockMode::Real).await;
            server.set_member_lag(LAGGING, lag).expect("lag");
            writer.set_data("/config", b"v2", None).await.expect("set");
            let seen = read_config(&reader, with_sync).await;
            let want: &[u8] = if with_sync { b"v2" } else { b"v1" };
            assert_eq!(seen, want, "{lag:?}, sync: {with_sync}");
            // A member in lockstep answers the newest value either way.
            let other = client(member_addr(&server, 3)).await;
            assert_eq!(read_config(&other, false).await, b"v2");
            server.shutdown().await;
        }
    }
}

#[tokio::test]
async fn a_watch_through_the_lagging_member_fires_when_it_catches_up() {
    let (server, writer, reader) = with_config(ClockMode::Manual).await;
    server.set_member_lag(LAGGING, Lag::Ms(5_000)).expect("lag");
    let (data, _, watcher) = reader.get_and_watch_data("/config").await.expect("watch");
    assert_eq!(data, b"v1");
    writer.set_data("/config", b"v2", None).await.expect("set");
    let mut event = Box::pin(watcher.changed());
    assert!(
        tokio::time::timeout(zk_rust::QUIET, &mut event)
            .await
            .is_err(),
        "the watch fired before the member applied the change"
    );
    assert_eq!(read(&reader, "/config").await, b"v1");
    server
        .advance_clock(Duration::from_millis(4_999))
        .expect("advance");
    assert_eq!(read(&reader, "/config").await, b"v1");
    server
        .advance_clock(Duration::from_millis(1))
        .expect("advance");
    let e = within("the watch event", event).await;
    assert_eq!(e.event_type, zk::EventType::NodeDataChanged);
    assert_eq!(e.path, "/config");
    assert_eq!(read(&reader, "/config").await, b"v2");
    server.shutdown().await;
}

#[tokio::test]
async fn a_write_through_a_lagging_member_is_answered_once_it_applied_it() {
    let (server, _writer, reader) = with_config(ClockMode::Manual).await;
    server.set_member_lag(LAGGING, Lag::Ms(2_000)).expect("lag");
    let write = reader.set_data("/config", b"mine", None);
    let read_after = reader.get_data("/config");
    let mut both = Box::pin(async { (write.await, read_after.await) });
    assert!(
        tokio::time::timeout(zk_rust::QUIET, &mut both)
            .await
            .is_err(),
        "answered before the member applied the write"
    );
    server
        .advance_clock(Duration::from_secs(2))
        .expect("advance");
    let (w, r) = within("the write and the read after it", both).await;
    w.expect("setData");
    assert_eq!(r.expect("getData").0, b"mine", "read-your-writes");
    server.shutdown().await;
}

#[tokio::test]
async fn lag_over_http() {
    let (server, writer, reader) = with_config(ClockMode::Real).await;
    let http = server.admin_addr().expect("admin");
    let body = admin::ok(http, "POST", "/zkd/members/2/lag?stall=true", None).await;
    assert_eq!(body["lag"], "stall", "{body}");
    writer.set_data("/config", b"v2", None).await.expect("set");
    assert_eq!(read(&reader, "/config").await, b"v1");
    let list = admin::ok(http, "GET", "/zkd/members", None).await;
    let m2 = list["members"]
        .as_array()
        .and_then(|a| a.iter().find(|m| m["id"] == 2))
        .cloned()
        .expect("member 2");
    assert_eq!(m2["lag"], "stall", "{list}");
    // The member's own reports show the zxid it has applied, as a follower's do.
    let addr = member_addr(&server, LAGGING);
    let srvr = tokio::task::spawn_blocking(move || {
        zkd_testkit::oracle::four_letter_word(addr, "srvr").expect("srvr")
    })
    .await
    .expect("srvr task");
    assert!(
        srvr.contains(&format!("Zxid: {}", m2["zxid"].as_str().unwrap_or("?"))),
        "{srvr}"
    );
    let body = admin::ok(http, "POST", "/zkd/members/2/lag?txns=0", None).await;
    assert_eq!(body["lag"], "lockstep", "{body}");
    assert_eq!(read(&reader, "/config").await, b"v2");
    for (path, status) in [
        ("/zkd/members/9/lag?ms=5", 404),
        ("/zkd/members/2/lag?ms=-5", 400),
        ("/zkd/members/2/lag?ms=5&txns=2", 400),
        ("/zkd/members/2/lag", 400),
        ("/zkd/members/2/lag?stall=maybe", 400),
    ] {
        admin::refused(http, "POST", path, status).await;
    }
    server.shutdown().await;
}

/// kazoo, unmodified: the stale read without sync() and the new value with it, a watch
/// through the lagging member, and a client that has seen newer state refused by a member
/// that is behind it until the member catches up (`client-tests/python/lag_checks.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_through_a_lagging_member() {
    let server = ensemble(ClockMode::Real).await;
    crate::python_checks::run_on_ensemble(&server, "lag_checks.py", 600, " passed, 0 failed").await;
    server.shutdown().await;
}
