//! The test control plane driven over the admin HTTP listener, observed through the
//! unmodified `zookeeper-client` crate.

use std::time::{Duration, Instant};

use serde_json::json;
use zkd_client_tests::zk_rust::{ephemeral, persistent, within};
use zkd_server::{ClockMode, Config, Server};
use zkd_server::{FaultAction, FaultRule, PauseClock, PauseOptions};
use zookeeper_client as zk;

use crate::admin::{self, hex};

async fn start(config: Config) -> Server {
    zkd_testkit::target::zkd_with_admin(config).await.0
}

async fn client(server: &Server, timeout: Duration) -> zk::Client {
    within(
        "session establishment",
        zk::Client::connector()
            .with_session_timeout(timeout)
            .with_fail_eagerly()
            .connect(&server.local_addr().to_string()),
    )
    .await
    .expect("connect")
}

/// A server with an admin listener and a session on it with `timeout`.
async fn with_client(timeout: Duration) -> (Server, std::net::SocketAddr, zk::Client) {
    configured_with_client(Config::default(), timeout).await
}

/// Like [`with_client`], the server configured with `config` (and an admin listener).
async fn configured_with_client(
    config: Config,
    timeout: Duration,
) -> (Server, std::net::SocketAddr, zk::Client) {
    let server = start(config).await;
    let admin = server.admin_addr().unwrap();
    let c = client(&server, timeout).await;
    (server, admin, c)
}

/// Opens a session with `timeout` and walks away from it: the connection is gone, the
/// session stays until it expires. Returns its id.
async fn abandoned_session(server: &Server, timeout: Duration) -> i64 {
    let detached = zk::Client::connector()
        .with_session_timeout(timeout)
        .with_detached()
        .connect(&server.local_addr().to_string())
        .await
        .unwrap();
    let sid = detached.session_id().0;
    drop(detached);
    sid
}

/// Waits until the client reports `want`, skipping other states.
async fn reach(states: &mut zk::StateWatcher, want: zk::SessionState) {
    within(&format!("session state {want:?}"), async {
        loop {
            let s = states.changed().await;
            if s == want {
                return;
            }
            assert!(
                !s.is_terminated(),
                "reached {s:?} while waiting for {want:?}"
            );
        }
    })
    .await
}

/// The client address the server lists for a session.
async fn peer_of(admin: std::net::SocketAddr, sid: i64) -> Option<String> {
    let list = admin::ok(admin, "GET", "/zkd/sessions", None).await;
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == hex(sid).as_str())
        .and_then(|s| s["peer"].as_str().map(str::to_string))
}

/// Waits until session `sid` is connected again from a new client address (the client
/// noticed the lost connection and reconnected with the same session), and until the
/// client has read the server's answer to that reconnect: the server lists the new
/// connection as soon as it accepts the handshake, which can be before the client
/// reads the reply and calls itself connected.
async fn reconnected(admin: std::net::SocketAddr, c: &zk::Client, sid: i64, old_peer: &str) {
    within("the client to reconnect its session", async {
        loop {
            if peer_of(admin, sid).await.is_some_and(|p| p != old_peer)
                && c.state() == zk::SessionState::SyncConnected
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// Waits until the client's session ends in a terminal state; returns it.
async fn terminal(states: &mut zk::StateWatcher) -> zk::SessionState {
    within("a terminal session state", async {
        loop {
            let s = states.changed().await;
            if s.is_terminated() {
                return s;
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_listener_is_off_unless_asked_and_loopback_by_default() {
    let plain = zkd_testkit::target::Target::start_zkd_with(Config::default()).await;
    assert_eq!(plain.zkd().expect("an embedded zkd").admin_addr(), None);
    let with = start(Config::default()).await;
    let addr = with.admin_addr().expect("admin address");
    assert!(addr.ip().is_loopback(), "{addr}");
    assert_ne!(addr.port(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_are_listed_and_expire_ends_one() {
    let (server, admin, owner) = with_client(Duration::from_secs(30)).await;
    let observer = client(&server, Duration::from_secs(30)).await;
    owner.create("/e", b"", &ephemeral()).await.unwrap();
    observer.create("/p", b"", &persistent()).await.unwrap();
    let (_, _, watch) = observer.get_and_watch_data("/e").await.unwrap();
    let mut owner_state = owner.state_watcher();

    let list = admin::ok(admin, "GET", "/zkd/sessions", None).await;
    let sessions = list["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{list}");
    let sid = hex(owner.session_id().0);
    let row = sessions.iter().find(|s| s["id"] == sid.as_str()).unwrap();
    assert_eq!(row["timeout_ms"], 30000);
    assert_eq!(row["ephemerals"], 1);
    assert!(row["peer"].as_str().unwrap().starts_with("127.0.0.1:"));
    let watcher_row = sessions.iter().find(|s| s["id"] != sid.as_str()).unwrap();
    assert_eq!(watcher_row["watches"], 1, "{watcher_row}");

    admin::ok(admin, "POST", &format!("/zkd/sessions/{sid}/expire"), None).await;
    let event = within(
        "NodeDeleted for the expired session's ephemeral",
        watch.changed(),
    )
    .await;
    assert_eq!(event.event_type, zk::EventType::NodeDeleted);
    let state = within("the owner sees its session expire", async {
        loop {
            let s = owner_state.changed().await;
            if s.is_terminated() {
                return s;
            }
        }
    })
    .await;
    assert_eq!(state, zk::SessionState::Expired);
    assert!(observer.check_stat("/e").await.unwrap().is_none());
    let list = admin::ok(admin, "GET", "/zkd/sessions", None).await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_json_errors_and_the_server_keeps_serving() {
    let server = start(Config::default()).await;
    let admin = server.admin_addr().unwrap();
    let text = admin::refused(admin, "POST", "/zkd/sessions/0x77/expire", 404).await;
    assert_eq!(text, "no session 0x77");
    let text = admin::refused(admin, "POST", "/zkd/sessions/xyz/expire", 400).await;
    assert!(text.contains("not a hexadecimal"), "{text}");
    let text = admin::refused(admin, "GET", "/no/such/route", 404).await;
    assert!(text.contains("/no/such/route"), "{text}");
    let c = client(&server, Duration::from_secs(10)).await;
    c.create("/still", b"", &persistent()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn disconnect_closes_only_the_connection() {
    let (server, admin, c) = with_client(Duration::from_secs(30)).await;
    c.create("/mine", b"", &ephemeral()).await.unwrap();
    let sid = c.session_id().0;
    let old_peer = peer_of(admin, sid).await.unwrap();
    admin::on_session(admin, sid, "disconnect").await;
    reconnected(admin, &c, sid, &old_peer).await;
    assert_eq!(c.state(), zk::SessionState::SyncConnected);
    assert_eq!(c.session_id().0, sid, "same session after reconnecting");
    assert!(
        c.check_stat("/mine").await.unwrap().is_some(),
        "ephemeral kept"
    );
    // A session without a connection cannot be disconnected: 409.
    let gone = abandoned_session(&server, Duration::from_secs(30)).await;
    let a = within("the detached session to lose its connection", async {
        loop {
            let a = admin::call(
                admin,
                "POST",
                &format!("/zkd/sessions/{}/disconnect", hex(gone)),
                None,
            )
            .await;
            if a.status != 200 {
                return a;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(a.status, 409, "{}", a.body);
    assert!(admin::error_text(&a).contains("has no connection"));
}

#[tokio::test(flavor = "multi_thread")]
async fn drop_after_applies_the_create_and_loses_the_reply() {
    let (_server, admin, c) = with_client(Duration::from_secs(30)).await;
    let added = admin::call(
        admin,
        "POST",
        "/zkd/faults",
        Some(r#"{"action": "drop-after", "opcode": "create", "path": "/job", "count": 1}"#),
    )
    .await;
    assert_eq!(added.status, 201, "{}", added.body);
    let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let got = c.create("/job", b"x", &opts).await;
    assert_eq!(got.err(), Some(zk::Error::ConnectionLoss));
    // The client reconnects by itself; the create was applied.
    let (data, _) = within("the node after reconnecting", async {
        loop {
            match c.get_data("/job").await {
                Ok(found) => return found,
                Err(zk::Error::ConnectionLoss) => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(e) => panic!("get_data /job: {e}"),
            }
        }
    })
    .await;
    assert_eq!(data, b"x");
    let list = admin::ok(admin, "GET", "/zkd/faults", None).await;
    assert_eq!(list["faults"][0]["fired"], 1);
    assert_eq!(list["faults"][0]["remaining"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn error_and_delay_faults_reach_the_client() {
    let (_server, admin, c) = with_client(Duration::from_secs(30)).await;
    c.create("/d", b"", &persistent()).await.unwrap();
    admin::ok(
        admin,
        "POST",
        "/zkd/faults",
        Some(r#"{"action": "error", "code": "NONODE", "opcode": "getData", "count": 1}"#),
    )
    .await;
    assert_eq!(c.get_data("/d").await.err(), Some(zk::Error::NoNode));
    assert!(c.get_data("/d").await.is_ok(), "the rule is spent");
    admin::ok(
        admin,
        "POST",
        "/zkd/faults",
        Some(r#"{"action": "delay", "ms": 400, "path": "/d", "count": 1}"#),
    )
    .await;
    let started = Instant::now();
    c.get_data("/d").await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    let cleared = admin::ok(admin, "DELETE", "/zkd/faults", None).await;
    assert_eq!(cleared["removed"], 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn manual_clock_expires_sessions_and_reaps_ttl_nodes_without_waiting() {
    let (server, admin, c) = configured_with_client(
        Config {
            clock: ClockMode::Manual,
            max_session_timeout: Some(Duration::from_secs(60)),
            ..Config::default()
        },
        Duration::from_secs(30),
    )
    .await;
    let watcher = client(&server, Duration::from_secs(60)).await;
    c.create("/e", b"", &ephemeral()).await.unwrap();
    let ttl = persistent().with_ttl(Duration::from_secs(10));
    // The create is a clock-visible write; the TTL counts from it.
    watcher.create("/ttl", b"", &ttl).await.unwrap();
    let mut states = c.state_watcher();
    assert_eq!(
        admin::ok(admin, "GET", "/zkd/clock", None).await["mode"],
        "manual"
    );

    let moved = admin::ok(admin, "POST", "/zkd/clock/advance?ms=29000", None).await;
    assert_eq!(moved["elapsed_ms"], 29000);
    assert!(
        watcher.check_stat("/e").await.unwrap().is_some(),
        "not yet expired"
    );
    // Pings keep the watcher's 60 s session alive at the current virtual time; only 29 s
    // passed, so the 10 s TTL node is already due.
    let reaped = within("the TTL node to be reaped", async {
        loop {
            if watcher.check_stat("/ttl").await.unwrap().is_none() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(reaped);

    admin::ok(admin, "POST", "/zkd/clock/advance?ms=2000", None).await; // 31 s in all
    assert_eq!(terminal(&mut states).await, zk::SessionState::Expired);
    assert!(watcher.check_stat("/e").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn reset_leaves_only_zookeeper_and_sessions_keep_working() {
    let (server, admin, c) = with_client(Duration::from_secs(30)).await;
    c.create("/a", b"", &persistent()).await.unwrap();
    c.create("/a/b", b"", &persistent()).await.unwrap();
    c.create("/e", b"", &ephemeral()).await.unwrap();
    let answer = admin::ok(admin, "POST", "/zkd/reset", None).await;
    assert_eq!(answer["deleted_nodes"], 3);
    let (children, _) = c.get_children("/").await.unwrap();
    assert_eq!(children, ["zookeeper"]);
    c.create("/a", b"again", &persistent()).await.unwrap();
    let list = admin::ok(admin, "GET", "/zkd/sessions", None).await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);

    let mut states = c.state_watcher();
    admin::ok(admin, "POST", "/zkd/reset?sessions=expire", None).await;
    assert_eq!(terminal(&mut states).await, zk::SessionState::Expired);
    let fresh = client(&server, Duration::from_secs(30)).await;
    assert_eq!(fresh.get_children("/").await.unwrap().0, ["zookeeper"]);
}

/// A 4 s session through a pause longer than its timeout: the client loses its connection;
/// with the session clock running the session is gone on resume, with it frozen it survives.
#[tokio::test(flavor = "multi_thread")]
async fn pause_costs_the_connection_and_with_the_clock_running_the_session() {
    let (server, admin, c) = with_client(Duration::from_secs(4)).await;
    let sid = hex(c.session_id().0);
    let mut states = c.state_watcher();
    admin::ok(admin, "POST", "/zkd/pause", None).await;
    reach(&mut states, zk::SessionState::Disconnected).await;
    // Stay paused until the session is overdue on the server's session clock.
    within("the session to become overdue", async {
        loop {
            let list = admin::ok(admin, "GET", "/zkd/sessions", None).await;
            let row = list["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["id"] == sid.as_str())
                .cloned()
                .expect("the session is listed during the pause");
            if row["last_heard_ms_ago"].as_i64().unwrap() > 6500 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    admin::ok(admin, "POST", "/zkd/resume", None).await;
    let list = admin::ok(admin, "GET", "/zkd/sessions", None).await;
    assert!(
        !list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == sid.as_str()),
        "expired on resume: {list}"
    );
    assert_eq!(terminal(&mut states).await, zk::SessionState::Expired);

    // With the clock frozen, the same pause costs nothing: a session whose client is gone
    // (so nothing touches it) is still there right after the resume.
    let sid = abandoned_session(&server, Duration::from_secs(4)).await;
    admin::ok(admin, "POST", "/zkd/pause?clock=freeze", None).await;
    let before = admin::ok(admin, "GET", "/zkd/clock", None).await;
    tokio::time::sleep(Duration::from_millis(6500)).await;
    let after = admin::ok(admin, "GET", "/zkd/clock", None).await;
    assert_eq!(after["paused"], true);
    assert_eq!(
        before["elapsed_ms"], after["elapsed_ms"],
        "the session clock stood still"
    );
    admin::ok(admin, "POST", "/zkd/resume", None).await;
    let list = admin::ok(admin, "GET", "/zkd/sessions", None).await;
    assert!(
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == hex(sid).as_str()),
        "{list}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_with_the_documented_status() {
    let server = start(Config::default()).await;
    let admin = server.admin_addr().unwrap();
    let cases: &[(&str, &str, Option<&str>, u16, &str)] = &[
        (
            "POST",
            "/zkd/sessions/0x99/disconnect",
            None,
            404,
            "no session 0x99",
        ),
        (
            "POST",
            "/zkd/sessions/0xZZ/expire",
            None,
            400,
            "not a hexadecimal",
        ),
        (
            "POST",
            "/zkd/faults",
            Some(r#"{"action": "explode"}"#),
            400,
            "unknown fault action",
        ),
        (
            "POST",
            "/zkd/faults",
            Some(r#"{"action": "delay", "ms": -5}"#),
            400,
            "non-negative",
        ),
        (
            "POST",
            "/zkd/faults",
            Some(r#"{"action": "error", "code": 12345}"#),
            400,
            "not a ZooKeeper error code",
        ),
        (
            "POST",
            "/zkd/faults",
            Some(r#"{"action": "error""#),
            400,
            "malformed JSON",
        ),
        (
            "POST",
            "/zkd/faults",
            Some(r#"{"action": "delay", "ms": 5, "colour": 1}"#),
            400,
            "unknown field",
        ),
        ("POST", "/zkd/pause?ms=-5", None, 400, "non-negative"),
        ("POST", "/zkd/pause?ms=abc", None, 400, "non-negative"),
        (
            "POST",
            "/zkd/clock/advance?ms=10",
            None,
            409,
            "--clock manual",
        ),
        ("POST", "/zkd/resume", None, 409, "not paused"),
        ("POST", "/zkd/reset?sessions=maybe", None, 400, "expected"),
        ("DELETE", "/zkd/faults/77", None, 404, "no fault rule 77"),
        ("GET", "/zkd/nothing", None, 404, "no such admin route"),
    ];
    for (method, path, body, status, text) in cases {
        let a = admin::call(admin, method, path, *body).await;
        assert_eq!(a.status, *status, "{method} {path}: {}", a.body);
        let msg = admin::error_text(&a);
        assert!(
            msg.contains(text),
            "{method} {path}: {msg:?} lacks {text:?}"
        );
    }
    let c = client(&server, Duration::from_secs(10)).await;
    c.create("/alive", b"", &persistent()).await.unwrap();
    assert_eq!(
        admin::ok(admin, "GET", "/zkd/faults", None).await,
        json!({ "faults": [] })
    );
}

/// ZooKeeper's test controller URL form on the admin listener.
#[tokio::test(flavor = "multi_thread")]
async fn zookeeper_controller_commands() {
    let server = start(Config::default()).await;
    let admin = server.admin_addr().unwrap();
    let get = |path: &'static str| async move {
        let url = format!("http://{admin}{path}");
        tokio::task::spawn_blocking(move || {
            zkd_testkit::http::call(&url, "GET", None).unwrap_or_else(|e| panic!("{e}"))
        })
        .await
        .unwrap()
    };
    assert_eq!(
        get("/command/ping").await,
        (200, "command/ping\n".to_string())
    );
    assert_eq!(get("/command/NOSUCH").await.0, 400);
    assert_eq!(get("/command/ADDDELAY/notanumber").await.0, 400);

    let c = client(&server, Duration::from_secs(30)).await;
    c.create("/n", b"", &persistent()).await.unwrap();
    assert_eq!(get("/command/FAILREQUESTS/1").await.0, 200);
    assert_eq!(
        c.get_data("/n").await.err(),
        Some(zk::Error::UnexpectedErrorCode(-100))
    );
    assert!(c.get_data("/n").await.is_ok());

    let mut states = c.state_watcher();
    let old_peer = peer_of(admin, c.session_id().0).await.unwrap();
    let url: &'static str =
        Box::leak(format!("/command/CLOSECONNECTION/{}", c.session_id().0).into_boxed_str());
    assert_eq!(get(url).await.0, 200);
    reconnected(admin, &c, c.session_id().0, &old_peer).await;

    assert_eq!(get("/command/REJECTCONNECTIONS").await.0, 200);
    let addr = server.local_addr().to_string();
    let refused = zk::Client::connector()
        .with_connection_timeout(Duration::from_millis(500))
        .with_session_timeout(Duration::from_secs(4))
        .connect(&addr);
    assert!(tokio::time::timeout(Duration::from_secs(2), refused)
        .await
        .map_or(true, |r| r.is_err()));
    assert_eq!(get("/command/RESET").await.0, 200);
    let _ok = client(&server, Duration::from_secs(30)).await;

    let url: &'static str =
        Box::leak(format!("/command/expiresession/0x{:x}", c.session_id().0).into_boxed_str());
    assert_eq!(get(url).await.0, 200);
    assert_eq!(terminal(&mut states).await, zk::SessionState::Expired);
}

/// The same operations on the embedded handle, without HTTP.
#[tokio::test(flavor = "multi_thread")]
async fn embedded_handle_controls_the_server() {
    let server = Server::start(Config {
        port: 0,
        clock: ClockMode::Manual,
        ..Config::default()
    })
    .await
    .unwrap();
    let c = client(&server, Duration::from_secs(30)).await;
    let sid = c.session_id().0;
    c.create("/e", b"", &ephemeral()).await.unwrap();
    let sessions = server.sessions().unwrap();
    assert_eq!((sessions[0].id, sessions[0].ephemerals), (sid, 1));

    server
        .add_fault(FaultRule {
            action: FaultAction::Error(-101),
            opcode: Some(4),
            path_prefix: None,
            session: Some(sid),
            count: Some(1),
        })
        .unwrap();
    assert_eq!(c.get_data("/e").await.err(), Some(zk::Error::NoNode));
    assert_eq!(server.faults().unwrap()[0].fired, 1);
    assert_eq!(server.clear_faults().unwrap(), 1);

    let mut states = c.state_watcher();
    let old_peer = server.sessions().unwrap()[0].peer;
    server.disconnect_session(sid).unwrap();
    within("the client to reconnect", async {
        while server.sessions().unwrap()[0]
            .peer
            .is_none_or(|p| Some(p) == old_peer)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;

    server
        .pause(PauseOptions {
            duration: Some(Duration::from_millis(300)),
            clock: PauseClock::Runs,
        })
        .unwrap();
    assert!(server.clock().paused);
    c.create("/after-pause", b"", &persistent()).await.unwrap();
    assert!(!server.clock().paused, "a timed pause ends by itself");

    assert_eq!(server.reset(false).unwrap(), 2);
    server.advance_clock(Duration::from_secs(45)).unwrap();
    assert_eq!(terminal(&mut states).await, zk::SessionState::Expired);
    assert!(server.sessions().unwrap().is_empty());
    assert_eq!(
        server.expire_session(sid).unwrap_err().to_string(),
        format!("no session {}", hex(sid))
    );
}

/// With a data directory, a reset is logged like any write: the tree stays reset after a
/// restart that replays the transaction log.
#[tokio::test(flavor = "multi_thread")]
async fn reset_is_durable_with_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config {
        data_dir: Some(dir.path().to_path_buf()),
        ..Config::default()
    };
    let server = start(config()).await;
    let c = client(&server, Duration::from_secs(30)).await;
    c.create("/a", b"", &persistent()).await.unwrap();
    c.create("/a/b", b"", &persistent()).await.unwrap();
    admin::ok(server.admin_addr().unwrap(), "POST", "/zkd/reset", None).await;
    c.create("/after", b"", &persistent()).await.unwrap();
    drop(c);
    // Dropped, not shut down: no final snapshot, so the restart replays the log.
    drop(server);

    let server = start(config()).await;
    let c = client(&server, Duration::from_secs(30)).await;
    let (mut children, _) = c.get_children("/").await.unwrap();
    children.sort();
    assert_eq!(children, ["after", "zookeeper"]);
}

/// The request latency `mntr`, `monitor`, `cons` and `/metrics` report is measured: a read
/// held up by a pause shows as the largest latency everywhere, and `srst` forgets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_latency_is_measured_and_reset() {
    let (_server, admin, c) = with_client(Duration::from_secs(30)).await;
    c.create("/lat", b"x", &persistent()).await.unwrap();
    let monitor = admin::ok(admin, "GET", "/commands/monitor", None).await;
    assert!(monitor["avg_latency"].as_f64().unwrap() > 0.0, "{monitor}");

    admin::ok(admin, "POST", "/zkd/pause", None).await;
    let read = tokio::spawn(async move {
        c.get_data("/lat").await.unwrap();
        c
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    admin::ok(admin, "POST", "/zkd/resume", None).await;
    let _c = within("the paused read", read).await.unwrap();

    // The read waited at least most of the pause (bounds generous enough for any machine).
    let monitor = admin::ok(admin, "GET", "/commands/monitor", None).await;
    let max = monitor["max_latency"].as_i64().unwrap();
    assert!((100..60_000).contains(&max), "{monitor}");
    assert!(monitor["min_latency"].as_i64().unwrap() < max, "{monitor}");
    let conns = admin::ok(admin, "GET", "/commands/connections", None).await;
    let conn = &conns["connections"][0];
    assert_eq!(conn["max_latency"].as_i64(), Some(max), "{conns}");
    assert!(conn["last_latency"].as_i64().unwrap() <= max, "{conns}");
    let metrics = tokio::task::spawn_blocking(move || {
        let mut r = ureq::get(&format!("http://{admin}/metrics"))
            .call()
            .unwrap();
        r.body_mut().read_to_string().unwrap()
    })
    .await
    .unwrap();
    assert!(
        metrics.contains(&format!("\nmax_latency {max}\n")),
        "{metrics}"
    );

    admin::ok(admin, "GET", "/commands/stat_reset", None).await;
    let monitor = admin::ok(admin, "GET", "/commands/monitor", None).await;
    assert!(monitor["max_latency"].as_i64().unwrap() < 100, "{monitor}");
}

/// Every route of the admin listener with a method it takes (and one route nobody serves).
const ADMIN_ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/zkd/overview"),
    ("GET", "/zkd/node?path=/"),
    ("GET", "/zkd/sessions"),
    ("GET", "/zkd/sessions/0x1/watches"),
    ("POST", "/zkd/sessions/0x1/expire"),
    ("POST", "/zkd/sessions/0x1/disconnect"),
    ("POST", "/zkd/pause"),
    ("POST", "/zkd/resume"),
    ("GET", "/zkd/faults"),
    ("POST", "/zkd/faults"),
    ("DELETE", "/zkd/faults"),
    ("DELETE", "/zkd/faults/1"),
    ("POST", "/zkd/reset?sessions=expire"),
    ("GET", "/zkd/clock"),
    ("POST", "/zkd/clock/advance?ms=1000"),
    ("GET", "/zkd/tree"),
    ("POST", "/zkd/snapshot"),
    ("GET", "/zkd/herd"),
    ("GET", "/zkd/history"),
    ("GET", "/zkd/members"),
    ("POST", "/zkd/members/1/stop"),
    ("POST", "/zkd/members/1/start"),
    ("POST", "/zkd/members/1/lag?ms=10"),
    ("GET", "/metrics"),
    ("GET", "/commands"),
    ("GET", "/commands/ruok"),
    ("GET", "/commands/stat_reset"),
    ("GET", "/command/ping"),
    ("GET", "/command/shutdown"),
    ("POST", "/command/reset"),
    ("GET", "/no/such/route"),
];

/// Every route of the AdminServer listener.
const COMMAND_ROUTES: &[&str] = &["/commands", "/commands/ruok", "/commands/monitor", "/nope"];

/// DNS rebinding: a request naming another host (a web page's own name pointed at this
/// machine) is refused on every route of both HTTP listeners, and changes nothing; loopback
/// names, the listener's address and the hosts named in `admin_allow_hosts` are served.
#[tokio::test(flavor = "multi_thread")]
async fn foreign_hosts_are_refused_on_every_route() {
    let (server, admin, c) = configured_with_client(
        Config {
            admin_server_port: Some(0),
            admin_allow_hosts: vec!["zk.test".into()],
            ..Config::default()
        },
        Duration::from_secs(30),
    )
    .await;
    let commands = server.admin_server_addr().unwrap();
    c.create("/keep", b"data", &persistent()).await.unwrap();
    c.create("/mine", b"", &ephemeral()).await.unwrap();

    let port = admin.port();
    let foreign = [
        "evil.example".to_string(),
        format!("evil.example:{port}"),
        "127.0.0.1.evil.example".to_string(),
        "localhost.evil.example".to_string(),
        "zk2.test".to_string(),
        // The port is parsed strictly: nothing may follow its digits.
        "localhost:1.evil.example".to_string(),
        "127.0.0.1:1x".to_string(),
        "[::1]:80.evil.example".to_string(),
    ];
    for host in &foreign {
        let host_line = format!("Host: {host}");
        for (method, path) in ADMIN_ROUTES {
            let (status, body) = admin::raw(admin, method, path, &[&host_line]).await;
            assert_eq!(status, 403, "{method} {path} with {host_line}: {body}");
            assert!(
                body.contains("is not this server") || body.contains("is not a host name"),
                "{method} {path}: {body}"
            );
        }
        for path in COMMAND_ROUTES {
            let (status, body) = admin::raw(commands, "GET", path, &[&host_line]).await;
            assert_eq!(status, 403, "AdminServer {path} with {host_line}: {body}");
        }
    }

    // Nothing changed: the node, the session and its ephemeral are there, no fault rule.
    assert_eq!(c.get_data("/keep").await.unwrap().0, b"data");
    assert!(c.check_stat("/mine").await.unwrap().is_some());
    let faults = admin::ok(admin, "GET", "/zkd/faults", None).await;
    assert_eq!(faults["faults"], json!([]));
    let clock = admin::ok(admin, "GET", "/zkd/clock", None).await;
    assert_eq!(clock["paused"], json!(false));

    for host in [
        "localhost".to_string(),
        format!("localhost:{port}"),
        format!("LocalHost.:{port}"),
        format!("127.0.0.1:{port}"),
        "127.0.0.2".to_string(),
        format!("[::1]:{port}"),
        "zk.test".to_string(),
        format!("ZK.test.:{port}"),
    ] {
        let host_line = format!("Host: {host}");
        let (status, body) = admin::raw(admin, "GET", "/zkd/clock", &[&host_line]).await;
        assert_eq!(status, 200, "{host_line}: {body}");
        let (status, body) = admin::raw(commands, "GET", "/commands/ruok", &[&host_line]).await;
        assert_eq!(status, 200, "AdminServer with {host_line}: {body}");
    }
    // A request without Host (HTTP/1.0 from a program) names no other host.
    let (status, _) = admin::raw(admin, "GET", "/zkd/clock", &[]).await;
    assert_eq!(status, 200);
}

/// A browser's request from another origin, or one that only a browser sends, is refused
/// before it reaches a route: a foreign Origin, cross-site fetch metadata, a state-changing
/// request from a browser without Origin, and any browser request to the test controller.
/// The same requests from this listener's own page, or from a program, are served.
#[tokio::test(flavor = "multi_thread")]
async fn cross_site_browser_requests_change_nothing() {
    let (_server, admin, c) = with_client(Duration::from_secs(30)).await;
    c.create("/keep", b"data", &persistent()).await.unwrap();
    let host = format!("Host: {admin}");
    let browser = "User-Agent: Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0";
    let form = "Content-Type: text/plain";
    let refused: &[(&str, &str, &[&str])] = &[
        (
            "POST",
            "/zkd/reset?sessions=expire",
            &[&host, browser, form, "Origin: http://127.0.0.1:1"],
        ),
        (
            "POST",
            "/zkd/reset?sessions=expire",
            &[&host, browser, form, "Origin: null"],
        ),
        (
            "POST",
            "/zkd/reset?sessions=expire",
            &[&host, browser, form],
        ),
        (
            "POST",
            "/zkd/reset",
            &[
                &host,
                "Sec-Fetch-Site: same-site",
                "Sec-Fetch-Mode: no-cors",
            ],
        ),
        ("POST", "/zkd/pause", &[&host, "Sec-Fetch-Site: cross-site"]),
        (
            "GET",
            "/zkd/tree",
            &[&host, "Sec-Fetch-Site: same-site", "Sec-Fetch-Mode: cors"],
        ),
        (
            "GET",
            "/zkd/sessions",
            &[&host, "Origin: http://evil.example"],
        ),
        ("GET", "/command/shutdown", &[&host, browser]),
        (
            "GET",
            "/command/shutdown",
            &[&host, "Sec-Fetch-Dest: image"],
        ),
        (
            "GET",
            "/command/failrequests",
            &[&host, "Referer: http://127.0.0.1:1/"],
        ),
        (
            "POST",
            "/command/noresponse",
            &[&host, &format!("Origin: http://{admin}")],
        ),
    ];
    for (method, path, headers) in refused {
        let (status, body) = admin::raw(admin, method, path, headers).await;
        assert_eq!(status, 403, "{method} {path} {headers:?}: {body}");
    }
    assert_eq!(c.get_data("/keep").await.unwrap().0, b"data");
    assert_eq!(
        admin::ok(admin, "GET", "/zkd/faults", None).await["faults"],
        json!([])
    );

    // The web view's own requests and a program's are served; a link from elsewhere opens
    // the page.
    let own = format!("Origin: http://{admin}");
    let served: &[(&str, &str, &[&str])] = &[
        (
            "GET",
            "/zkd/sessions",
            &[&host, browser, "Sec-Fetch-Site: same-origin"],
        ),
        (
            "GET",
            "/",
            &[
                &host,
                browser,
                "Sec-Fetch-Site: cross-site",
                "Sec-Fetch-Mode: navigate",
                "Sec-Fetch-Dest: document",
            ],
        ),
        (
            "POST",
            "/zkd/reset",
            &[&host, browser, &own, "Sec-Fetch-Site: same-origin"],
        ),
    ];
    for (method, path, headers) in served {
        let (status, body) = admin::raw(admin, method, path, headers).await;
        assert_eq!(status, 200, "{method} {path} {headers:?}: {body}");
    }
    assert!(
        c.check_stat("/keep").await.unwrap().is_none(),
        "the page's reset worked"
    );
    let (status, body) = admin::raw(
        admin,
        "GET",
        "/command/ping",
        &[
            &host,
            "User-Agent: Jetty/9.4.57.v20241219",
            "Accept-Encoding: gzip",
        ],
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "command/ping\n"));
}

/// The AdminServer listener changes nothing: the commands that reset counters or set the
/// trace mask are refused there (403, with the command and a sentence), and still run on the
/// admin listener.
#[tokio::test(flavor = "multi_thread")]
async fn the_admin_server_listener_refuses_the_commands_that_change_state() {
    let (server, admin, c) = configured_with_client(
        Config {
            admin_server_port: Some(0),
            ..Config::default()
        },
        Duration::from_secs(30),
    )
    .await;
    let commands = server.admin_server_addr().unwrap();
    c.create("/n", b"", &persistent()).await.unwrap();
    let received = |v: &serde_json::Value| v["server_stats"]["packets_received"].as_i64().unwrap();
    let before = received(&admin::ok(commands, "GET", "/commands/srvr", None).await);
    assert!(before > 0);
    let mask = admin::ok(commands, "GET", "/commands/gtmk", None).await["tracemask"].clone();
    for name in [
        "stat_reset",
        "srst",
        "connection_stat_reset",
        "crst",
        "set_trace_mask?traceMask=1",
        "stmk?traceMask=1",
    ] {
        let a = admin::call(commands, "GET", &format!("/commands/{name}"), None).await;
        assert_eq!(a.status, 403, "{name}: {}", a.body);
        assert!(
            admin::error_text(&a).contains("changes nothing"),
            "{}",
            a.body
        );
        assert!(a.body["command"].is_string(), "{}", a.body);
    }
    let after = received(&admin::ok(commands, "GET", "/commands/srvr", None).await);
    assert!(after >= before, "counters kept: {before} then {after}");
    assert_eq!(
        admin::ok(commands, "GET", "/commands/gtmk", None).await["tracemask"],
        mask
    );
    // The admin listener still runs them, as ZooKeeper's AdminServer does.
    admin::ok(admin, "GET", "/commands/stat_reset", None).await;
    let reset = received(&admin::ok(commands, "GET", "/commands/srvr", None).await);
    assert!(
        reset < after,
        "srst on the admin listener reset the counters: {after} then {reset}"
    );
    let set = admin::ok(admin, "GET", "/commands/set_trace_mask?traceMask=1", None).await;
    assert_eq!(set["tracemask"], json!(1));
}

/// ZooKeeper's own test-controller client (`CommandClient` from the ZooKeeper 3.8 jars, over
/// Jetty's HttpClient: a plain GET to `localhost:PORT`) drives the admin listener: a program
/// passes the checks that keep browsers off the controller.
#[tokio::test(flavor = "multi_thread")]
async fn zookeepers_own_command_client_drives_the_controller() {
    let (_server, admin, c) = with_client(Duration::from_secs(30)).await;
    c.create("/n", b"", &persistent()).await.unwrap();
    let mut states = c.state_watcher();
    let expire = format!("EXPIRESESSION/{}", c.session_id().0);
    let jars = std::env::var("ZKD_ZOOKEEPER_JARS").unwrap_or_else(|_| "/usr/share/java".into());
    let classpath = [
        "zookeeper.jar",
        "jetty9-client.jar",
        "jetty9-http.jar",
        "jetty9-io.jar",
        "jetty9-util.jar",
        "slf4j-api.jar",
        "slf4j-nop.jar",
    ]
    .map(|j| format!("{jars}/{j}"))
    .join(":");
    let source = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/java-controller/Controller.java"
    );
    let args = [
        "PING".to_string(),
        "FAILREQUESTS/1".into(),
        "ADDDELAY/notanumber".into(),
        expire.clone(),
    ];
    let out = tokio::task::spawn_blocking({
        let args = args.clone();
        move || {
            std::process::Command::new("java")
                .args(["-cp", &classpath, source, &admin.port().to_string()])
                .args(&args)
                .output()
                .unwrap_or_else(|e| {
                    panic!("cannot run java (scripts/install-test-deps.sh installs it): {e}")
                })
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "PING true".to_string(),
            "FAILREQUESTS/1 true".into(),
            "ADDDELAY/notanumber false".into(),
            format!("{expire} true"),
        ]
    );
    assert_eq!(terminal(&mut states).await, zk::SessionState::Expired);
    let faults = admin::ok(admin, "GET", "/zkd/faults", None).await;
    assert_eq!(faults["faults"][0]["count"], json!(1), "{faults}");
}
