//! AdminServer compatibility, differentially: the same client state is built on an embedded zkd
//! (admin listener on) behaving as 3.8 or 3.9 and on Apache ZooKeeper of that release (3.8.0,
//! 3.9.3) started with its AdminServer enabled, then
//! every command and alias is fetched from both and the JSON compared: the same keys, value
//! types and nesting, and the same `command`/`error` fields. Values differ (ports, times, ids)
//! and are compared only where they must agree.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use bytes::Bytes;
use serde_json::Value;
use zkd_protocol::{PathWatchRequest, Request};
use zkd_testkit::oracle::{four_letter_word, free_port, Launcher, ZookeeperVersion};
use zkd_testkit::raw::RawClient;
use zkd_testkit::target::zkd_with_admin;

/// Every command of a standalone 3.8 server, each alias, the commands 3.9 adds (unknown to
/// 3.8, refused for want of authentication by 3.9), and a name neither knows.
const NAMES: &[&str] = &[
    "configuration",
    "conf",
    "connection_stat_reset",
    "crst",
    "connections",
    "cons",
    "dirs",
    "dump",
    "environment",
    "env",
    "envi",
    "get_trace_mask",
    "gtmk",
    "hash",
    "initial_configuration",
    "icfg",
    "is_read_only",
    "isro",
    "last_snapshot",
    "lsnp",
    "leader",
    "lead",
    "monitor",
    "mntr",
    "observer_connection_stat_reset",
    "orst",
    "observers",
    "obsr",
    "ruok",
    "server_stats",
    "srvr",
    "set_trace_mask",
    "stmk",
    "stat_reset",
    "srst",
    "stats",
    "stat",
    "system_properties",
    "sysp",
    "voting_view",
    "watch_summary",
    "wchs",
    "watches",
    "wchc",
    "watches_by_path",
    "wchp",
    "zabstate",
    "snapshot",
    "snap",
    "restore",
    "rest",
    "no_such_command",
];

/// Fetches `path` and parses the body as JSON (or returns the text as a JSON string).
fn get(admin: SocketAddr, path: &str) -> (u16, Value) {
    let url = format!("http://{admin}{path}");
    let (status, text) =
        zkd_testkit::http::call(&url, "GET", None).unwrap_or_else(|e| panic!("{e}"));
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// The JSON type of a value, with integers and floats told apart.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Differences in keys, types and nesting between `ours` and `theirs` at `at`.
fn shape_diff(at: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    // Maps keyed by data (session ids, paths, expiry times) are compared by their values'
    // shapes, not their keys.
    let data_keyed = [
        "expiry_time_to_session_ids",
        "session_id_to_ephemeral_paths",
        "session_id_to_watched_paths",
        "path_to_session_ids",
    ];
    if kind(ours) != kind(theirs) {
        out.push(format!(
            "{at}: zkd {} vs ZooKeeper {}",
            kind(ours),
            kind(theirs)
        ));
        return;
    }
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            if data_keyed.iter().any(|k| at.ends_with(k)) {
                // ZooKeeper's expiry buckets can show a bucket just emptied by a touch.
                let filled = |m: &serde_json::Map<String, Value>| {
                    m.values()
                        .filter(|v| v.as_array().is_none_or(|a| !a.is_empty()))
                        .cloned()
                        .collect::<Vec<_>>()
                };
                let (a, b) = (filled(a), filled(b));
                if a.len() != b.len() {
                    out.push(format!("{at}: {} entries vs {}", a.len(), b.len()));
                }
                if let (Some(x), Some(y)) = (a.first(), b.first()) {
                    shape_diff(&format!("{at}.*"), x, y, out);
                }
                return;
            }
            for (k, v) in a {
                match b.get(k) {
                    Some(w) => shape_diff(&format!("{at}.{k}"), v, w, out),
                    None => out.push(format!("{at}.{k}: only zkd has it")),
                }
            }
            for k in b.keys() {
                if !a.contains_key(k) {
                    out.push(format!("{at}.{k}: only ZooKeeper has it"));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                out.push(format!("{at}: {} items vs {}", a.len(), b.len()));
            }
            if let (Some(x), Some(y)) = (a.first(), b.first()) {
                shape_diff(&format!("{at}[0]"), x, y, out);
            }
        }
        _ => {}
    }
}

/// ZooKeeper's per-namespace summaries (`<top-level znode>_read_per_namespace`, `…_write_…`)
/// are named after the paths a server has read and written; zkd does not track them. Keys
/// named `zkd_…` are zkd's own (docs/metrics.md); ZooKeeper has none of them.
fn untracked(key: &str) -> bool {
    let key = key.strip_prefix("zk_").unwrap_or(key);
    key.ends_with("_per_namespace") || key.starts_with("zkd_")
}

/// `body` without the [`untracked`] top-level keys.
fn untracked_removed(body: &Value) -> Value {
    match body {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !untracked(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        v => v.clone(),
    }
}

/// The keys of a `mntr` answer but the [`untracked`] ones, each line checked to be `zk_<key>\t<value>` and none repeated.
fn mntr_keys(text: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for line in text.lines() {
        let (k, v) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("mntr line without a tab: {line:?}"));
        assert!(k.starts_with("zk_") && !v.contains('\t'), "{line:?}");
        assert!(keys.insert(k.to_string()), "{k} printed twice");
        if untracked(k) {
            keys.remove(k);
        }
    }
    assert!(text.ends_with('\n'), "{text:?}");
    keys
}

/// The `key=value` lines of a `conf` answer, in order.
fn conf_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn create(path: &str, flags: i32) -> Request {
    zkd_testkit::raw::create(path, Some(Bytes::from_static(b"x")), flags)
}

/// One session with an ephemeral node, a data watch, an exist watch and a child watch.
async fn populate(addr: SocketAddr) -> RawClient {
    let c = RawClient::connect(addr, 10_000).await.expect("session");
    assert_eq!(c.call(&create("/app", 0)).await.expect("create").err, 0);
    assert_eq!(c.call(&create("/app/e", 1)).await.expect("create").err, 0);
    let watch = |path: &str| PathWatchRequest {
        path: path.to_string(),
        watch: true,
    };
    c.call(&Request::GetData(watch("/app")))
        .await
        .expect("getData");
    c.call(&Request::GetChildren(watch("/app")))
        .await
        .expect("getChildren");
    c.call(&Request::Exists(watch("/nope")))
        .await
        .expect("exists");
    c
}

/// Fetches every name from one server; the commands that reset counters go last.
fn fetch_all(admin: SocketAddr) -> Vec<(String, u16, Value)> {
    let mut names: Vec<&str> = NAMES.to_vec();
    names.sort_by_key(|n| ["connection_stat_reset", "crst", "stat_reset", "srst"].contains(n));
    let mut out: Vec<(String, u16, Value)> = names
        .iter()
        .map(|n| {
            let (status, body) = get(admin, &format!("/commands/{n}"));
            (n.to_string(), status, body)
        })
        .collect();
    let (status, body) = get(admin, "/commands/set_trace_mask?traceMask=306");
    out.push(("set_trace_mask?traceMask=306".into(), status, body));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_match_zookeeper_3_9_admin_server() {
    commands_match_zookeeper_admin_server(ZookeeperVersion::V3_9).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_match_zookeeper_3_8_admin_server() {
    commands_match_zookeeper_admin_server(ZookeeperVersion::V3_8).await;
}

async fn commands_match_zookeeper_admin_server(version: ZookeeperVersion) {
    let admin_port = free_port().expect("free port");
    let oracle = Launcher::new()
        .version(version)
        .admin_server(admin_port)
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    let zk_admin = SocketAddr::from(([127, 0, 0, 1], admin_port));

    // Both servers keep a data directory, so `configuration`, `dirs` and `last_snapshot`
    // report real directories and snapshots on both sides.
    let data = tempfile::tempdir().expect("data directory");
    let (server, zkd_admin) = zkd_with_admin(zkd_server::Config {
        data_dir: Some(data.path().to_path_buf()),
        zookeeper_version: version,
        ..Default::default()
    })
    .await;

    let zk_client = populate(oracle.addr()).await;
    let zkd_client = populate(server.local_addr()).await;

    let theirs = tokio::task::spawn_blocking(move || fetch_all(zk_admin))
        .await
        .expect("fetch");
    let ours = tokio::task::spawn_blocking(move || fetch_all(zkd_admin))
        .await
        .expect("fetch");

    let mut diffs = Vec::new();
    for ((name, our_status, our_body), (_, their_status, their_body)) in ours.iter().zip(&theirs) {
        if our_status != their_status {
            diffs.push(format!("{name}: status {our_status} vs {their_status}"));
        }
        // Java system properties are the JVM's own; compare only that all values are text.
        if name == "system_properties" || name == "sysp" {
            let all_text = |v: &Value| {
                v.as_object()
                    .is_some_and(|m| m.iter().all(|(k, v)| v.is_string() || k == "error"))
            };
            if !all_text(our_body) || !all_text(their_body) {
                diffs.push(format!("{name}: values are not all strings"));
            }
            for k in ["command", "error"] {
                if our_body.get(k) != their_body.get(k) {
                    diffs.push(format!("{name}.{k} differs"));
                }
            }
            continue;
        }
        let (our_body, their_body) = (&untracked_removed(our_body), &untracked_removed(their_body));
        shape_diff(name, our_body, their_body, &mut diffs);
        for k in ["command", "error"] {
            if our_body.get(k) != their_body.get(k) {
                diffs.push(format!(
                    "{name}.{k}: zkd {:?} vs ZooKeeper {:?}",
                    our_body.get(k),
                    their_body.get(k)
                ));
            }
        }
    }
    assert!(diffs.is_empty(), "differences:\n{}", diffs.join("\n"));

    // Values that must agree: the session's ephemeral, its watches, the counts.
    let body = |list: &[(String, u16, Value)], name: &str| {
        list.iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, b)| b.clone())
            .unwrap_or(Value::Null)
    };
    // Both name the release: `srvr`'s version and `environment`'s zookeeper.version.
    let release = format!("{version}.");
    for (list, who) in [(&ours, "zkd"), (&theirs, "ZooKeeper")] {
        let srvr = body(list, "srvr")["version"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(srvr.starts_with(&release), "{who} srvr version {srvr}");
        let envi = body(list, "environment")["zookeeper.version"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(envi.starts_with(&release), "{who} environment {envi}");
    }
    let sid = zkd_client.session_id.to_string();
    assert_eq!(
        body(&ours, "dump")["session_id_to_ephemeral_paths"][&sid],
        serde_json::json!(["/app/e"])
    );
    assert_eq!(
        body(&ours, "watches")["session_id_to_watched_paths"][&sid],
        serde_json::json!(["/app", "/nope"])
    );
    for key in ["num_connections", "num_paths", "num_total_watches"] {
        assert_eq!(
            body(&ours, "wchs")[key],
            body(&theirs, "wchs")[key],
            "{key}"
        );
    }
    for key in [
        "ephemerals_count",
        "watch_count",
        "znode_count",
        "global_sessions",
    ] {
        assert_eq!(
            body(&ours, "mntr")[key],
            body(&theirs, "mntr")[key],
            "{key}"
        );
    }

    // The load at start and the snapshot written then are timed.
    let monitor = body(&ours, "monitor");
    assert_eq!(monitor["cnt_dbinittime"], 1, "{monitor}");
    assert_eq!(monitor["cnt_startup_txns_loaded"], 1, "{monitor}");
    assert!(metric(&monitor, "cnt_snapshottime") >= 1.0, "{monitor}");

    // The data directory and the newest snapshot, as ZooKeeper reports its own.
    let our_dir = std::path::absolute(data.path().join("version-2")).expect("absolute path");
    for (list, who) in [(&ours, "zkd"), (&theirs, "ZooKeeper")] {
        let conf = body(list, "configuration");
        let dir = conf["data_dir"].as_str().unwrap_or_default();
        assert!(dir.ends_with("/version-2"), "{who} data_dir {dir:?}");
        assert_eq!(conf["data_log_dir"], conf["data_dir"], "{who}");
        let snap = body(list, "last_snapshot");
        let zxid = snap["zxid"].as_str().unwrap_or_default();
        let zxid = i64::from_str_radix(zxid, 16).unwrap_or_else(|_| panic!("{who} zxid {snap}"));
        assert!(zxid >= 0, "{who} has a snapshot: {snap}");
        let file = std::path::Path::new(dir).join(format!("snapshot.{zxid:x}"));
        let mtime = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .unwrap_or_else(|e| panic!("{who}: {}: {e}", file.display()));
        let secs = mtime
            .duration_since(std::time::UNIX_EPOCH)
            .expect("mtime")
            .as_secs();
        assert_eq!(snap["timestamp"], serde_json::json!(secs), "{who}");
        assert!(
            body(list, "dirs")["datadir_size"].as_u64().unwrap_or(0) > 0,
            "{who} dirs"
        );
    }
    assert_eq!(
        body(&ours, "configuration")["data_dir"],
        serde_json::json!(our_dir.display().to_string())
    );

    // `conf` and `dirs` over the client port name the same directory and sizes as the
    // AdminServer forms, with the lines ZooKeeper prints.
    let (zk_addr, zkd_addr) = (oracle.addr(), server.local_addr());
    let words = |addr: SocketAddr| {
        let conf = four_letter_word(addr, "conf").expect("conf");
        let dirs = four_letter_word(addr, "dirs").expect("dirs");
        let mntr = four_letter_word(addr, "mntr").expect("mntr");
        (conf_lines(&conf), dirs, mntr)
    };
    let (their_conf, their_dirs, their_mntr) = tokio::task::spawn_blocking(move || words(zk_addr))
        .await
        .expect("words");
    let (our_conf, our_dirs, our_mntr) = tokio::task::spawn_blocking(move || words(zkd_addr))
        .await
        .expect("words");
    // `mntr` prints every `monitor` metric as `zk_<key>\t<value>` lines: the same keys as
    // ZooKeeper's, and on each side the same keys as that side's `monitor`.
    let (our_keys, their_keys) = (mntr_keys(&our_mntr), mntr_keys(&their_mntr));
    let only = |a: &BTreeSet<String>, b: &BTreeSet<String>| a.difference(b).cloned().collect();
    let (ours_only, theirs_only): (Vec<String>, Vec<String>) =
        (only(&our_keys, &their_keys), only(&their_keys, &our_keys));
    assert!(
        ours_only.is_empty() && theirs_only.is_empty(),
        "mntr keys only zkd prints: {ours_only:?}; only ZooKeeper prints: {theirs_only:?}"
    );
    assert!(our_keys.len() > 400, "{our_mntr}");
    for (list, keys, who) in [
        (&ours, &our_keys, "zkd"),
        (&theirs, &their_keys, "ZooKeeper"),
    ] {
        let monitor: BTreeSet<String> = body(list, "monitor")
            .as_object()
            .map(|m| {
                m.keys()
                    .filter(|k| *k != "command" && *k != "error" && !untracked(k))
            })
            .into_iter()
            .flatten()
            .map(|k| format!("zk_{k}"))
            .collect();
        assert_eq!(
            keys, &monitor,
            "{who}: mntr and monitor name the same metrics"
        );
    }
    let keys = |c: &[(String, String)]| c.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&our_conf), keys(&their_conf), "conf lines");
    for (conf, dirs, list, who) in [
        (&our_conf, &our_dirs, &ours, "zkd"),
        (&their_conf, &their_dirs, &theirs, "ZooKeeper"),
    ] {
        let line = |k: &str| {
            conf.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("{who} conf has no {k}: {conf:?}"))
        };
        let dir = body(list, "configuration")["data_dir"].clone();
        assert_eq!(serde_json::json!(line("dataDir")), dir, "{who} conf");
        assert_eq!(serde_json::json!(line("dataLogDir")), dir, "{who} conf");
        assert_eq!(line("secureClientPort"), "-1", "{who} conf");
        let size: u64 = line("dataDirSize").parse().expect("size");
        assert!(size > 0, "{who} dataDirSize {size}");
        let log_size: u64 = line("dataLogSize").parse().expect("size");
        assert!(log_size > 0, "{who} dataLogSize {log_size}");
        let sizes: Vec<(&str, u64)> = dirs
            .lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k, v.parse().expect("a size")))
            .collect();
        let keys: Vec<&str> = sizes.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["datadir_size", "logdir_size"], "{who} dirs: {dirs}");
        assert!(sizes.iter().all(|(_, v)| *v > 0), "{who} dirs: {dirs}");
    }
    let our_dir_text = our_dir.display().to_string();
    assert!(our_conf.contains(&("dataDir".to_string(), our_dir_text)));

    // The listing names every command, as links.
    let (_, list) = get(zkd_admin, "/commands");
    let (_, their_list) = get(zk_admin, "/commands");
    assert_eq!(list, their_list);
    drop(zk_client);
    drop(oracle);
}

/// A `monitor` metric as a number (0 when absent or not a number).
fn metric(m: &Value, key: &str) -> f64 {
    m[key].as_f64().unwrap_or(0.0)
}

/// The metrics zkd fills move with what they count: connections asked for and refused,
/// sessions resumed and expired, failed authentication, bytes received, reply sizes, the
/// watchers each kind of event notified, and the read and update latency summaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filled_monitor_metrics_move_with_what_they_count() {
    let (server, admin) = zkd_with_admin(zkd_server::Config {
        max_client_cnxns: 4,
        clock: zkd_server::ClockMode::Manual,
        ..Default::default()
    })
    .await;
    let addr = server.local_addr();
    let monitor = || async move {
        tokio::task::spawn_blocking(move || get(admin, "/commands/monitor").1)
            .await
            .expect("monitor")
    };
    let before = monitor().await;
    assert_eq!(before["last_client_response_size"], -1, "{before}");

    let writer = RawClient::connect(addr, 10_000).await.expect("session");
    let watcher = RawClient::connect(addr, 10_000).await.expect("session");
    assert_eq!(writer.call(&create("/w", 0)).await.expect("create").err, 0);
    let watch = |path: &str| PathWatchRequest {
        path: path.to_string(),
        watch: true,
    };
    for req in [
        Request::Exists(watch("/w/x")),
        Request::GetData(watch("/w")),
        Request::GetChildren(watch("/w")),
    ] {
        watcher.call(&req).await.expect("watch");
    }
    // NodeCreated and NodeChildrenChanged, then NodeDataChanged, then NodeDeleted: one
    // watcher each.
    assert_eq!(
        writer.call(&create("/w/x", 0)).await.expect("create").err,
        0
    );
    let set = Request::SetData(zkd_protocol::SetDataRequest {
        path: "/w".into(),
        data: Some(Bytes::from_static(b"y")),
        version: -1,
    });
    assert_eq!(writer.call(&set).await.expect("set").err, 0);
    watcher
        .call(&Request::GetData(watch("/w/x")))
        .await
        .expect("watch");
    let delete = Request::Delete(zkd_protocol::DeleteRequest {
        path: "/w/x".into(),
        version: -1,
    });
    assert_eq!(writer.call(&delete).await.expect("delete").err, 0);

    // An addauth with a scheme the server does not know fails.
    let stranger = RawClient::connect(addr, 10_000).await.expect("session");
    let auth = Request::Auth(zkd_protocol::AuthPacket {
        auth_type: 0,
        scheme: "kerberos".into(),
        auth: Bytes::from_static(b"x"),
    });
    let failed = stranger.call(&auth).await.map(|r| r.err).unwrap_or(-115);
    assert_eq!(failed, -115, "AUTHFAILED");
    // The writer's session resumed on a new connection.
    let resumed = RawClient::resume(addr, writer.session_id, writer.passwd.clone(), 10_000, 0)
        .await
        .expect("resume");
    // More sockets from this address than the limit of 4 allows.
    let mut sockets = Vec::new();
    for _ in 0..6 {
        sockets.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
    }
    let during = monitor().await;
    // Every session ends by its timeout on the manual clock.
    tokio::task::spawn_blocking(move || {
        let url = format!("http://{admin}/zkd/clock/advance?ms=60000");
        let (status, body) = zkd_testkit::http::call(&url, "POST", None)
            .unwrap_or_else(|e| panic!("advance the clock: {e}"));
        assert!(
            (200..300).contains(&status),
            "advance the clock: {status} {body}"
        );
    })
    .await
    .expect("advance");
    let after = monitor().await;

    let moved = |m: &Value, key: &str| metric(m, key) - metric(&before, key);
    for key in [
        "cnt_node_created_watch_count",
        "cnt_node_deleted_watch_count",
        "cnt_node_changed_watch_count",
        "cnt_node_children_watch_count",
        "max_node_created_watch_count",
        "avg_node_children_watch_count",
        "auth_failed_count",
        "connection_revalidate_count",
    ] {
        assert_eq!(moved(&during, key), 1.0, "{key}: {during}");
    }
    assert!(
        moved(&during, "connection_request_count") >= 9.0,
        "{during}"
    );
    assert!(moved(&during, "connection_rejected") >= 1.0, "{during}");
    assert!(moved(&during, "bytes_received_count") > 100.0, "{during}");
    assert!(moved(&during, "cnt_readlatency") >= 4.0, "{during}");
    assert!(moved(&during, "cnt_updatelatency") >= 4.0, "{during}");
    assert!(
        metric(&during, "max_client_response_size") >= 16.0,
        "{during}"
    );
    assert!(
        metric(&during, "min_client_response_size") > 0.0,
        "{during}"
    );
    assert!(
        metric(&during, "last_client_response_size") > 0.0,
        "{during}"
    );
    assert_eq!(moved(&during, "stale_sessions_expired"), 0.0);
    assert!(moved(&after, "stale_sessions_expired") >= 3.0, "{after}");
    drop((writer, watcher, stranger, resumed, sockets));
    server.shutdown().await;
}
