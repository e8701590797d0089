//! The herd detector, end to end: 500 sessions electing a leader by watching the election
//! parent's children all wake when the leader's node goes, re-read the parent, and the server
//! logs one herd warning and records the parent in `GET /zkd/herd`; the same election where
//! each session watches only its predecessor wakes one session and records no herd. The
//! record tells the two apart by the watches held: child watches on the parent, or
//! exists watches on the siblings. Also
//! `GET /metrics`, parsed with a Prometheus text-format parser.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use zkd_protocol::{DeleteRequest, PathWatchRequest, Request};
use zkd_testkit::raw::RawClient;

use crate::admin;

const PARTICIPANTS: usize = 501;

/// Log lines written by the servers of this test binary (its other tests' servers too).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        self.0
            .lock()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    }
}

fn capture_logs() -> Captured {
    static LOGS: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _ = tracing_subscriber::util::SubscriberInitExt::try_init(subscriber);
        logs
    })
    .clone()
}

fn create(path: &str, flags: i32) -> Request {
    zkd_testkit::raw::create(path, Some(Bytes::new()), flags)
}

fn watch(path: &str) -> PathWatchRequest {
    PathWatchRequest {
        path: path.to_string(),
        watch: true,
    }
}

async fn start() -> (zkd_server::Server, SocketAddr) {
    zkd_testkit::target::zkd_with_admin(zkd_server::Config {
        max_client_cnxns: 0,
        ..Default::default()
    })
    .await
}

/// Participants each create an ephemeral sequential node under `parent`; returns them with
/// their node names, in sequence order.
async fn join(addr: SocketAddr, parent: &str) -> Vec<(RawClient, String)> {
    let owner = RawClient::connect(addr, 30_000).await.expect("session");
    assert_eq!(owner.call(&create(parent, 0)).await.expect("create").err, 0);
    let mut out = Vec::new();
    for _ in 0..PARTICIPANTS {
        let c = RawClient::connect(addr, 30_000).await.expect("session");
        let r = c
            .call(&create(&format!("{parent}/n-"), 3))
            .await
            .expect("create");
        assert_eq!(r.err, 0);
        let name: zkd_protocol::CreateResponse = r.decode().expect("create response");
        out.push((c, name.path));
    }
    drop(owner);
    out
}

/// Waits until the herd record has no open re-read window and returns it.
async fn settled_record(admin: SocketAddr) -> serde_json::Value {
    for _ in 0..100 {
        let r = admin::ok(admin, "GET", "/zkd/herd", None).await;
        let open = r["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["window_open"] == true));
        if !open {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the herd window never closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn herd_election_is_detected_and_predecessor_election_is_not() {
    let logs = capture_logs();

    // Herd: everyone watches the parent's children.
    let (server, admin) = start().await;
    let members = join(server.local_addr(), "/herd-election").await;
    // The leader (smallest node) sees it leads and watches nothing; the other 500 watch the
    // parent's children.
    let mut events = Vec::new();
    for (i, (c, _)) in members.iter().enumerate() {
        let r = c
            .call(&Request::GetChildren(PathWatchRequest {
                path: "/herd-election".into(),
                watch: i > 0,
            }))
            .await
            .expect("getChildren");
        assert_eq!(r.err, 0);
        events.push(c.events().expect("event stream"));
    }
    let (leader, leader_node) = &members[0];
    let r = leader
        .call(&Request::Delete(DeleteRequest {
            path: leader_node.clone(),
            version: -1,
        }))
        .await
        .expect("delete");
    assert_eq!(r.err, 0);
    // Every follower is woken and re-reads the children, as the herd recipe does.
    for ((c, _), ev) in members.iter().zip(events.iter_mut()).skip(1) {
        let e = tokio::time::timeout(Duration::from_secs(30), ev.recv())
            .await
            .expect("notification in time")
            .expect("notification");
        assert_eq!(e.path, "/herd-election");
        c.call(&Request::GetChildren(watch("/herd-election")))
            .await
            .expect("re-read");
    }
    let record = settled_record(admin).await;
    assert_eq!(record["herd_events"], 1, "{record}");
    assert_eq!(record["top_paths"][0]["path"], "/herd-election", "{record}");
    assert_eq!(record["top_paths"][0]["max_fanout"], 500, "{record}");
    assert_eq!(
        record["top_paths"][0]["held"]["child_watches"], 500,
        "the followers watch the children again: {record}"
    );
    // Held per kind: the herd recipe holds child watches on the parent and no exists/data
    // watch on the siblings.
    assert_eq!(
        record["top_paths"][0]["held"]["data_watches_on_children"], 0,
        "{record}"
    );
    let event = &record["events"][0];
    assert_eq!(event["path"], "/herd-election");
    assert_eq!(event["event"], "NodeChildrenChanged");
    assert_eq!(event["sessions_woken"], 500);
    assert_eq!(event["rereads"], 500);
    let log = logs.text();
    let warn: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("herd:") && l.contains("/herd-election"))
        .collect();
    assert_eq!(warn.len(), 1, "{log}");
    assert!(
        warn[0].contains("NodeChildrenChanged on /herd-election woke 500 sessions, 500 of them re-read /herd-election")
            && warn[0].contains("predecessor"),
        "{}",
        warn[0]
    );

    // Metrics: parse the exposition with a Prometheus text-format parser.
    let text = tokio::task::spawn_blocking(move || {
        let mut r = ureq::get(&format!("http://{admin}/metrics"))
            .call()
            .expect("GET /metrics");
        r.body_mut().read_to_string().expect("body")
    })
    .await
    .expect("scrape");
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("a valid Prometheus exposition");
    let value = |name: &str| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name)
            .map(|s| s.value.clone())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    assert!(matches!(value("ephemerals_count"), prometheus_parse::Value::Gauge(v) if v == 500.0));
    // OpenMetrics names a counter's family without `_total`, so a text-format parser reads
    // its `_total` sample untyped.
    let count = |name: &str| match value(name) {
        prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
        other => panic!("{name} is {other:?}"),
    };
    assert_eq!(count("zkd_herd_warnings_total"), 1.0);
    assert!(count("zkd_notifications_sent_total") >= 500.0);
    assert!(
        text.contains("# TYPE zkd_herd_warnings counter\n"),
        "{text}"
    );
    assert!(matches!(
        value("zkd_watchers_notified_per_change"),
        prometheus_parse::Value::Histogram(_)
    ));
    assert!(matches!(
        value("readlatency"),
        prometheus_parse::Value::Histogram(_)
    ));
    for name in [
        "znode_count",
        "watch_count",
        "approximate_data_size",
        "num_alive_connections",
        "packets_received_total",
        "packets_sent_total",
    ] {
        value(name);
    }
    drop(members);
    drop(server);

    // Predecessor: each watches only the node just before its own.
    let (server, admin) = start().await;
    let members = join(server.local_addr(), "/fair-election").await;
    for pair in members.windows(2) {
        let r = pair[1]
            .0
            .call(&Request::Exists(watch(&pair[0].1)))
            .await
            .expect("exists");
        assert_eq!(r.err, 0);
    }
    let mut next = members[1].0.events().expect("event stream");
    let (leader, leader_node) = &members[0];
    leader
        .call(&Request::Delete(DeleteRequest {
            path: leader_node.clone(),
            version: -1,
        }))
        .await
        .expect("delete");
    let e = tokio::time::timeout(Duration::from_secs(30), next.recv())
        .await
        .expect("notification in time")
        .expect("notification");
    assert_eq!(&e.path, leader_node);
    let record = settled_record(admin).await;
    assert_eq!(record["herd_events"], 0, "{record}");
    assert_eq!(record["top_paths"][0]["max_fanout"], 1, "{record}");
    // The predecessor recipe holds exists watches on siblings and no child watch: the fired
    // path (the old leader's node) has 499 watched siblings left (one watch fired with it).
    let top = &record["top_paths"][0];
    assert_eq!(top["path"], leader_node.as_str(), "{record}");
    assert_eq!(top["fired"]["data_watches"], 1, "{record}");
    assert_eq!(top["held"]["child_watches"], 0, "{record}");
    assert_eq!(top["held"]["data_watches_on_siblings"], 499, "{record}");
    assert!(
        !logs.text().contains("/fair-election"),
        "no herd warning for the predecessor election: {}",
        logs.text()
    );
}
