//! The history (docs/history.md) as the unmodified `zookeeper-client` crate makes it: a
//! session's life in order over `GET /zkd/history` and `zkd ctl history --session`, expiry by
//! the control plane and by the virtual clock, no data or secrets in it, the admin
//! listener's guards on its route, and its bound.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use zkd_client_tests::zk_rust::{ephemeral, persistent, within};
use zkd_server::{ClockMode, Config, HistoryFilter, Server};
use zookeeper_client as zk;

use crate::admin::{self, hex};

/// Node data, a digest password and the digest it yields: none may appear in the history.
const DATA: &[u8] = b"NODE-DATA-q81x";
const CREDENTIAL: &[u8] = b"flight:Wq7-secret-pw";
const PASSWORD: &str = "Wq7-secret-pw";
const DIGEST: &str = "sCSa12ujfzwsLH7ViFOXrU+G3zM=";

async fn client(server: &Server, timeout: Duration) -> zk::Client {
    within(
        "session establishment",
        zk::Client::connector()
            .with_session_timeout(timeout)
            .connect(&server.local_addr().to_string()),
    )
    .await
    .expect("connect")
}

/// `GET path` on the admin listener: the status and the JSON Lines as values.
async fn lines(admin: SocketAddr, path: &str) -> (u16, Vec<Value>, String) {
    let (status, body) = admin::raw(admin, "GET", path, &[&format!("Host: {admin}")]).await;
    let values = if status == 200 {
        body.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    } else {
        Vec::new()
    };
    (status, values, body)
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["kind"].as_str().unwrap()).collect()
}

/// The first event of `kind` for which `pick` holds, and its index.
fn find<'a>(events: &'a [Value], kind: &str, pick: impl Fn(&Value) -> bool) -> (usize, &'a Value) {
    events
        .iter()
        .enumerate()
        .find(|(_, e)| e["kind"] == kind && pick(e))
        .unwrap_or_else(|| panic!("no such {kind} event in {events:#?}"))
}

/// A session that authenticates, writes, sets a watch, is notified of another client's
/// change and is expired by the control plane appears in the history in that order, with
/// each request's outcome; `zkd ctl history --session` prints the same life, one line per
/// event. A second session expired by moving the virtual clock is recorded as a timeout,
/// with its later request refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_sessions_life_shows_in_order_over_http_and_zkd_ctl() {
    let (server, admin) = zkd_testkit::target::zkd_with_admin(Config {
        clock: ClockMode::Manual,
        ..Config::default()
    })
    .await;
    let a = client(&server, Duration::from_secs(20)).await;
    let b = client(&server, Duration::from_secs(20)).await;
    let sid = a.session_id().0;
    within("addauth", a.auth("digest", CREDENTIAL))
        .await
        .expect("auth");
    a.create("/h", DATA, &persistent()).await.expect("create");
    a.create("/h/mine", DATA, &ephemeral())
        .await
        .expect("create");
    let (_, _, watcher) = a.get_and_watch_data("/h").await.expect("watch");
    b.set_data("/h", b"other", None).await.expect("setData");
    let event = within("the notification", watcher.changed()).await;
    assert_eq!(event.event_type, zk::EventType::NodeDataChanged);
    let missing = a.get_data("/nope").await;
    assert!(missing.is_err());
    let mut states = a.state_watcher();
    admin::on_session(admin, sid, "expire").await;
    // The client comes back with its session and is told it expired.
    within("the client to hear its session expired", async {
        while !states.changed().await.is_terminated() {}
    })
    .await;

    // Over HTTP, filtered by the session.
    let (status, life, _) = lines(admin, &format!("/zkd/history?session={}", hex(sid))).await;
    assert_eq!(status, 200);
    for e in &life {
        assert!(
            e["session"] == hex(sid).as_str() || e["kind"] == "conn_open",
            "{e} is not of session {}",
            hex(sid)
        );
    }
    let (open, _) = find(&life, "conn_open", |_| true);
    let (hs, handshake) = find(&life, "handshake", |_| true);
    assert_eq!(handshake["outcome"], "new");
    assert_eq!(handshake["session_asked"], "0x0");
    assert_eq!(handshake["timeout_ms"], 20_000);
    let (created, _) = find(&life, "session_created", |_| true);
    let (auth, auth_e) = find(&life, "request", |e| e["op"] == "auth");
    assert_eq!(auth_e["scheme"], "digest");
    let (create, create_e) = find(&life, "request", |e| e["opcode"] == 15 && e["path"] == "/h");
    assert_eq!(create_e["err_name"], "OK");
    assert_eq!(create_e["data_bytes"], DATA.len());
    let (get, get_e) = find(&life, "request", |e| {
        e["op"] == "getData" && e["path"] == "/h"
    });
    assert_eq!(
        (get_e["watch"].clone(), get_e["version"].clone()),
        (true.into(), 0.into())
    );
    let (watch, _) = find(&life, "watch_set", |e| {
        e["path"] == "/h" && e["watch"] == "data"
    });
    let (note, note_e) = find(&life, "notification", |e| e["path"] == "/h");
    assert_eq!(note_e["type"], "NodeDataChanged");
    let (nonode, nonode_e) = find(&life, "request", |e| e["path"] == "/nope");
    assert_eq!(
        (nonode_e["err"].clone(), nonode_e["err_name"].clone()),
        ((-101).into(), "NONODE".into())
    );
    let (expired, expired_e) = find(&life, "session_expired", |_| true);
    assert_eq!(expired_e["why"], "control");
    assert_eq!(expired_e["ephemerals"], serde_json::json!(["/h/mine"]));
    assert!(expired_e["zxid"].as_str().unwrap().starts_with("0x"));
    let (closed, closed_e) = find(&life, "conn_close", |_| true);
    assert_eq!(closed_e["why"], "expired");
    let (back, back_e) = find(&life, "handshake", |e| e["outcome"] == "expired");
    assert_eq!(back_e["session_asked"], hex(sid).as_str());
    let order = [
        open, hs, created, auth, create, get, watch, note, nonode, expired, closed, back,
    ];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "out of order: {order:?} in {:#?}",
        kinds(&life)
    );
    // The other client's write, which fired the notification, is in the whole history
    // between the watch and the notification, with the version it made.
    let (_, all, _) = lines(admin, "/zkd/history").await;
    let seq_of = |i: usize| life[i]["seq"].as_u64().unwrap();
    let (_, set_e) = find(&all, "request", |e| e["op"] == "setData");
    assert_ne!(set_e["session"], hex(sid).as_str());
    assert_eq!(set_e["version"], 1);
    let set_seq = set_e["seq"].as_u64().unwrap();
    assert!(seq_of(watch) < set_seq && set_seq < seq_of(note));

    // `zkd ctl history --session`: the same events, one line each, in the same order.
    let admin_text = admin.to_string();
    let hex_sid = hex(sid);
    let (code, text) = tokio::task::spawn_blocking(move || {
        admin::zkd_ctl(&admin_text, &["history", "--session", &hex_sid])
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{text}");
    let printed: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().nth(2).unwrap_or(""))
        .collect();
    assert_eq!(printed, kinds(&life), "{text}");
    assert!(
        text.contains("why=control") && text.contains("err_name=NONODE"),
        "{text}"
    );

    // Expiry by the virtual clock: a timeout, and a later request of that session is
    // refused with SESSIONEXPIRED (the client is told at its handshake).
    let c = client(&server, Duration::from_secs(4)).await;
    let csid = c.session_id().0;
    c.create("/h/c", b"", &ephemeral()).await.expect("create");
    admin::ok(admin, "POST", "/zkd/clock/advance?ms=5000", None).await;
    let (_, c_life, _) = lines(admin, &format!("/zkd/history?session={}", hex(csid))).await;
    let (_, c_exp) = find(&c_life, "session_expired", |_| true);
    assert_eq!(c_exp["why"], "timeout");
    assert_eq!(c_exp["ephemerals"], serde_json::json!(["/h/c"]));
    let (_, control, _) = lines(admin, "/zkd/history?kinds=control").await;
    assert!(control
        .iter()
        .any(|e| e["action"] == "clock_advance" && e["detail"] == "ms=5000"));
    assert!(control
        .iter()
        .any(|e| e["action"] == "expire" && e["session"] == hex(sid).as_str()));

    // The same events through the Rust API.
    let typed = server
        .history(&HistoryFilter {
            session: Some(sid),
            ..HistoryFilter::default()
        })
        .unwrap();
    assert_eq!(
        typed.iter().map(|e| e.kind()).collect::<Vec<_>>(),
        kinds(&life)
    );
}

/// Node data, a digest password and the digest it yields appear nowhere in the history:
/// not over HTTP, not in `zkd ctl history` (lines or JSON), not in `Server::history_jsonl`.
#[tokio::test(flavor = "multi_thread")]
async fn the_history_holds_no_data_passwords_or_digests() {
    let (server, admin) = zkd_testkit::target::zkd_with_admin(Config::default()).await;
    let a = client(&server, Duration::from_secs(20)).await;
    within("addauth", a.auth("digest", CREDENTIAL))
        .await
        .expect("auth");
    let acl = zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all());
    a.create("/secret", DATA, &acl).await.expect("create");
    a.set_data("/secret", DATA, None).await.expect("setData");
    assert_eq!(a.get_data("/secret").await.expect("getData").0, DATA);
    let _ = a.get_acl("/secret").await.expect("getACL");
    let mut multi = a.new_multi_writer();
    multi.add_create("/secret/m", DATA, &persistent()).unwrap();
    multi.add_set_data("/secret", DATA, None).unwrap();
    multi.commit().await.expect("multi");
    // A second connection authenticates too.
    let b = client(&server, Duration::from_secs(20)).await;
    within("addauth", b.auth("digest", CREDENTIAL))
        .await
        .expect("auth");
    b.get_data("/secret").await.expect("getData");

    let (_, events, http) = lines(admin, "/zkd/history").await;
    assert!(events.len() > 10, "{http}");
    assert!(
        http.contains("\"data_bytes\":14"),
        "sizes are recorded: {http}"
    );
    let admin_text = admin.to_string();
    let (ctl_lines, ctl_json) = tokio::task::spawn_blocking(move || {
        (
            admin::zkd_ctl(&admin_text, &["history"]).1,
            admin::zkd_ctl(&admin_text, &["--json", "history"]).1,
        )
    })
    .await
    .unwrap();
    let rust = server.history_jsonl().unwrap();
    let data = String::from_utf8_lossy(DATA).into_owned();
    let credential = String::from_utf8_lossy(CREDENTIAL).into_owned();
    for (name, text) in [
        ("GET /zkd/history", &http),
        ("zkd ctl history", &ctl_lines),
        ("zkd ctl --json history", &ctl_json),
        ("Server::history_jsonl", &rust),
    ] {
        assert!(text.contains("digest"), "{name} names the scheme: {text}");
        for secret in [data.as_str(), credential.as_str(), PASSWORD, DIGEST] {
            assert!(!text.contains(secret), "{name} holds {secret:?}: {text}");
        }
    }
}

/// `GET /zkd/history` passes the admin listener's guards: a foreign Host and a cross-site
/// browser request are refused as on the other routes; a program on loopback is served.
#[tokio::test(flavor = "multi_thread")]
async fn the_history_route_refuses_foreign_hosts_and_cross_site_requests() {
    let (_server, admin) = zkd_testkit::target::zkd_with_admin(Config::default()).await;
    let host = format!("Host: {admin}");
    for headers in [
        vec!["Host: evil.example".to_string()],
        vec![host.clone(), "Sec-Fetch-Site: cross-site".into()],
        vec![host.clone(), "Origin: http://evil.example".into()],
    ] {
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        let (status, body) = admin::raw(admin, "GET", "/zkd/history", &h).await;
        assert_eq!(status, 403, "{headers:?}: {body}");
        assert!(!body.contains("\"seq\""), "{body}");
    }
    // The checks, the saved timeline and the live page pass the same guards.
    for route in ["/zkd/history/checks", "/zkd/history/timeline", "/timeline"] {
        let (status, body) = admin::raw(admin, "GET", route, &["Host: evil.example"]).await;
        assert_eq!(status, 403, "{route}: {body}");
        let cross = [host.as_str(), "Sec-Fetch-Site: cross-site"];
        let (status, body) = admin::raw(admin, "GET", route, &cross).await;
        assert_eq!(status, 403, "{route}: {body}");
        let (status, body) = admin::raw(admin, "GET", route, &[&host]).await;
        assert_eq!(status, 200, "{route}: {body}");
    }
    // An overflowing, negative or unknown parameter is refused with a sentence.
    for query in [
        "after_seq=99999999999999999999999",
        "after_seq=-1",
        "limit=5",
    ] {
        for route in ["/zkd/history/checks", "/zkd/history/timeline"] {
            let path = format!("{route}?{query}");
            let (status, body) = admin::raw(admin, "GET", &path, &[&host]).await;
            assert_eq!(status, 400, "{path}: {body}");
        }
    }
    let (status, _) = admin::raw(admin, "GET", "/zkd/history", &[&host]).await;
    assert_eq!(status, 200);
    let (status, body) = admin::raw(admin, "GET", "/zkd/history?limit=0", &[&host]).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = admin::raw(admin, "GET", "/zkd/history?session=xyz", &[&host]).await;
    assert_eq!(status, 400, "{body}");
}

/// A history bounded to 40 events keeps the newest 40 and counts the others as dropped, by
/// work done (requests made), not by time; paging with `after_seq` reads it in order.
#[tokio::test(flavor = "multi_thread")]
async fn a_full_history_drops_the_oldest_events_and_counts_them() {
    let (server, admin) = zkd_testkit::target::zkd_with_admin(Config {
        history_events: 40,
        ..Config::default()
    })
    .await;
    let a = client(&server, Duration::from_secs(20)).await;
    a.create("/n", b"", &persistent()).await.expect("create");
    for i in 0..100 {
        a.set_data("/n", format!("{i}").as_bytes(), None)
            .await
            .expect("setData");
    }
    let summary = admin::ok(admin, "GET", "/zkd/history?format=json", None).await;
    assert_eq!(summary["events"], 40, "{summary}");
    let last = summary["last_seq"].as_u64().unwrap();
    // conn_open, handshake, session_created, the create and 100 setData requests at least.
    assert!(last >= 104, "{summary}");
    assert_eq!(summary["dropped"].as_u64().unwrap(), last - 40, "{summary}");
    assert_eq!(
        summary["first_seq"].as_u64().unwrap(),
        last - 39,
        "{summary}"
    );

    // Two pages of 25 and 15 (or more, if the client's pings were recorded meanwhile).
    let (_, first, _) = lines(admin, "/zkd/history?limit=25").await;
    assert_eq!(first.len(), 25);
    let after = first[24]["seq"].as_u64().unwrap();
    let (_, rest, _) = lines(admin, &format!("/zkd/history?after_seq={after}")).await;
    assert!(rest.len() >= 15);
    let seqs: Vec<u64> = first
        .iter()
        .chain(&rest)
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let (_, _, raw) = lines(admin, "/zkd/history?limit=1").await;
    assert!(!raw.is_empty());
    assert_eq!(server.history_summary().unwrap().dropped, last - 40);
}

/// A test that panics while a history guard is alive leaves the history of its window (what
/// happened after the guard was made) and its timeline in files; one that does not panic
/// leaves nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_panicking_test_leaves_its_history_and_its_timeline() {
    let server = Server::start(Config::default()).await.expect("zkd");
    let a = client(&server, Duration::from_secs(20)).await;
    a.create("/before", b"", &persistent())
        .await
        .expect("create");
    let dir = std::env::temp_dir().join(format!("zkd-history-guard-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    let quiet = server.history_guard("a passing test").in_dir(&dir);
    drop(quiet);
    assert!(!dir.exists(), "a test that passed wrote its history");

    let guard = server.history_guard("a failing test").in_dir(&dir);
    a.create("/during", b"", &ephemeral())
        .await
        .expect("create");
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _guard = guard;
        panic!("the test failed");
    }));
    assert!(panicked.is_err());
    let jsonl = std::fs::read_to_string(dir.join("a_failing_test.history.jsonl")).expect("jsonl");
    assert!(jsonl.contains("\"path\":\"/during\""), "{jsonl}");
    assert!(
        !jsonl.contains("/before"),
        "only the test's window: {jsonl}"
    );
    let html = std::fs::read_to_string(dir.join("a_failing_test.history.html")).expect("html");
    assert!(
        html.contains("id=\"zkd-history\"") && html.contains("/during"),
        "{html}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a simulated ensemble: stopping the member a session is connected to ends its
/// connection (`member_stopped`), and the session's move to another member is a `resumed`
/// handshake naming the connection and member it came from; a partition and its heal are
/// recorded, and each event names its member.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_moving_between_members_is_recorded_with_where_it_came_from() {
    let server = Server::start(Config {
        port: 0,
        ensemble: Some(zkd_server::EnsembleConfig::numbered(3, 0).expect("an ensemble")),
        admin_port: Some(0),
        ..Config::default()
    })
    .await
    .expect("ensemble starts");
    let admin = server.admin_addr().unwrap();
    let hosts: Vec<String> = server
        .members()
        .unwrap()
        .iter()
        .map(|m| m.client_addr.to_string())
        .collect();
    let c = within(
        "session establishment",
        zk::Client::connector()
            .with_session_timeout(Duration::from_secs(30))
            .connect(&hosts.join(",")),
    )
    .await
    .expect("connect");
    let sid = c.session_id().0;
    c.create("/moved", b"", &ephemeral()).await.expect("create");
    let (_, life, _) = lines(admin, &format!("/zkd/history?session={}", hex(sid))).await;
    let (_, first) = find(&life, "handshake", |e| e["outcome"] == "new");
    let from_member = first["member"].as_u64().expect("a member");
    let from_conn = first["conn"].as_u64().unwrap();

    let mut states = c.state_watcher();
    server
        .stop_member(from_member)
        .await
        .expect("stop its member");
    within("the client to reconnect elsewhere", async {
        while states.changed().await != zk::SessionState::SyncConnected {}
    })
    .await;
    assert!(c.check_stat("/moved").await.unwrap().is_some());

    let (_, life, _) = lines(admin, &format!("/zkd/history?session={}", hex(sid))).await;
    let (closed, closed_e) = find(&life, "conn_close", |e| e["conn"] == from_conn);
    assert_eq!(closed_e["why"], "member_stopped");
    assert_eq!(closed_e["member"], from_member);
    let (moved, moved_e) = find(&life, "handshake", |e| e["outcome"] == "resumed");
    assert_eq!(moved_e["from_conn"], from_conn);
    assert_eq!(moved_e["from_member"], from_member);
    assert_ne!(moved_e["member"], from_member);
    assert!(closed < moved);

    let (_, all, _) = lines(admin, "/zkd/history?kinds=member_stopped,member_started").await;
    assert_eq!(kinds(&all), ["member_stopped"]);
    assert_eq!(all[0]["member"], from_member);
    server
        .start_member(from_member)
        .await
        .expect("start it again");
    server.partition(&[&[1], &[2, 3]]).expect("partition");
    server.heal().expect("heal");
    let (_, all, _) = lines(
        admin,
        "/zkd/history?kinds=member_stopped,member_started,partition,heal",
    )
    .await;
    assert_eq!(
        kinds(&all),
        ["member_stopped", "member_started", "partition", "heal"]
    );
    assert_eq!(all[2]["groups"], "1/2,3");
}

/// With a data directory, a snapshot is recorded with its zxid, size and duration, and its
/// event reads the same through `Server::history` as over HTTP.
#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_is_recorded_with_its_zxid_size_and_duration() {
    let dir = tempfile::tempdir().unwrap();
    let (server, admin) = zkd_testkit::target::zkd_with_admin(Config {
        data_dir: Some(dir.path().to_path_buf()),
        ..Config::default()
    })
    .await;
    let a = client(&server, Duration::from_secs(20)).await;
    a.create("/s", DATA, &persistent()).await.expect("create");
    let info = server.snapshot().await.expect("snapshot");
    let (_, snaps, _) = lines(admin, "/zkd/history?kinds=snapshot").await;
    let last = snaps.last().expect("a snapshot event");
    assert_eq!(last["zxid"], hex(info.zxid).as_str());
    assert_eq!(last["bytes"], info.bytes);
    assert!(last["duration_ms"].as_u64().is_some() && last["longest_hold_ms"].as_u64().is_some());
    let typed = server
        .history(&HistoryFilter {
            kinds: Some(vec!["snapshot".into()]),
            ..HistoryFilter::default()
        })
        .unwrap();
    let typed_line: Value = serde_json::from_str(&typed.last().expect("typed").to_json()).unwrap();
    assert_eq!(&typed_line, last);
}

/// Warnings and the quorum are in the history: a herd (every watcher of a parent re-reading
/// it after one change) as a `warning` naming the path, and an ensemble losing and regaining
/// its quorum as `quorum` events.
#[tokio::test(flavor = "multi_thread")]
async fn herd_warnings_and_quorum_changes_are_recorded() {
    let server = Server::start(Config {
        port: 0,
        herd_warn: 3,
        ensemble: Some(zkd_server::EnsembleConfig::numbered(3, 0).expect("an ensemble")),
        ..Config::default()
    })
    .await
    .expect("zkd");
    let writer = client(&server, Duration::from_secs(20)).await;
    writer
        .create("/herd", b"", &persistent())
        .await
        .expect("create");
    let mut watchers = Vec::new();
    for _ in 0..4 {
        let c = client(&server, Duration::from_secs(20)).await;
        let (_, _, w) = c.get_and_watch_children("/herd").await.expect("watch");
        watchers.push((c, w));
    }
    writer
        .create("/herd/a", b"", &persistent())
        .await
        .expect("create");
    for (c, w) in watchers {
        within("the children notification", w.changed()).await;
        c.list_children("/herd").await.expect("re-read");
    }
    // The detector's window closes on a tick after it ends.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let herd = loop {
        let found = server
            .history(&HistoryFilter {
                kinds: Some(vec!["warning".into()]),
                ..HistoryFilter::default()
            })
            .expect("history");
        if let Some(e) = found.first() {
            break e.to_json();
        }
        assert!(std::time::Instant::now() < deadline, "no herd warning");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        herd.contains("\"what\":\"herd\"") && herd.contains("on /herd woke 4"),
        "{herd}"
    );

    let members = server.members().expect("members");
    let others: Vec<u64> = members
        .iter()
        .filter(|m| m.mode != zkd_server::MemberMode::Leader)
        .map(|m| m.id)
        .collect();
    server.stop_member(others[0]).await.expect("stop");
    server.stop_member(others[1]).await.expect("stop");
    server.start_member(others[1]).await.expect("start");
    let quorum: Vec<String> = server
        .history(&HistoryFilter {
            kinds: Some(vec!["quorum".into()]),
            ..HistoryFilter::default()
        })
        .expect("history")
        .iter()
        .map(|e| e.to_json())
        .collect();
    assert_eq!(quorum.len(), 2, "{quorum:?}");
    assert!(quorum[0].contains("\"has_quorum\":false"), "{quorum:?}");
    assert!(quorum[1].contains("\"has_quorum\":true"), "{quorum:?}");
}
