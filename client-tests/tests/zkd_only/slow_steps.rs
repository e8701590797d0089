//! The `zkd` binary's guards around long steps: the slow-step warning (a WARN line naming the
//! request and its hold time, and `mntr`'s `zk_zkd_slow_steps`) and SIGTERM/SIGINT stopping
//! the process within the shutdown grace period while a step holds the core's lock (a stall
//! the control plane asks for), without losing an acknowledged write.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zkd_client_tests::zkd_process::{start_with_admin, Running};
use zkd_protocol::{Create, MultiOp, OpCode, Request};
use zkd_testkit::oracle::four_letter_word;
use zkd_testkit::raw::{self, RawClient};

/// The process, killed if a test fails before it ends.
/// Starts the binary with `args`, its stderr going to `log`; returns the client and admin
/// addresses it prints.
fn start(args: &[&str], log: &Path) -> (Running, SocketAddr, SocketAddr) {
    let log = std::fs::File::create(log).expect("log file");
    start_with_admin(args, Stdio::from(log))
}

fn slow_steps(addr: SocketAddr) -> u64 {
    let mntr = four_letter_word(addr, "mntr").expect("mntr");
    mntr.lines()
        .find_map(|l| l.strip_prefix("zk_zkd_slow_steps\t"))
        .unwrap_or_else(|| panic!("no zk_zkd_slow_steps in {mntr}"))
        .parse()
        .expect("a count")
}

fn stall(admin: SocketAddr, ms: u64) {
    let url = format!("http://{admin}/zkd/stall?ms={ms}");
    let answer = ureq::post(&url).send_empty().expect("stall");
    assert_eq!(answer.status(), 200);
}

/// A multi of `n` creates under `/slow`: linear work, but plenty for a 1 ms threshold.
fn big_multi(n: usize) -> Request {
    let ops = (0..n)
        .map(|i| {
            MultiOp::Create(Create {
                op: OpCode::Create,
                path: format!("/slow/n{i:06}"),
                data: None,
                acl: zkd_protocol::Acl::open_unsafe(),
                flags: 0,
                ttl: -1,
            })
        })
        .collect();
    Request::Multi(ops)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_over_the_threshold_is_logged_with_its_request_and_counted_in_mntr() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("stderr.log");
    let (_zkd, addr, admin) = start(&["--slow-step-warn-ms", "1"], &log);
    let c = RawClient::connect(addr, 10_000).await.expect("connect");
    let r = c
        .call(&raw::create("/slow", None, 0))
        .await
        .expect("create");
    assert_eq!(r.err, 0);
    let before = tokio::task::spawn_blocking(move || slow_steps(addr))
        .await
        .expect("mntr");
    let r = c.call(&big_multi(10_000)).await.expect("multi");
    assert_eq!(r.err, 0);
    let after = tokio::task::spawn_blocking(move || slow_steps(addr))
        .await
        .expect("mntr");
    assert!(after > before, "zk_zkd_slow_steps {before} -> {after}");
    let text = std::fs::read_to_string(&log).expect("log");
    let line = text
        .lines()
        .find(|l| l.contains("slow step: request Multi (first path /slow/n000000)"))
        .unwrap_or_else(|| panic!("no slow-step warning of the multi in:\n{text}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("held the core lock for"), "{line}");
    // The history has the same warning, after the request it names.
    let history = get_text(admin, "/zkd/history?kinds=warning").await;
    assert!(
        history.lines().any(|l| l.contains("\"what\":\"slow_step\"")
            && l.contains("request Multi (first path /slow/n000000)")),
        "{history}"
    );

    // A stall of the control plane is a step too, named as such.
    let before = after;
    tokio::task::spawn_blocking(move || stall(admin, 100))
        .await
        .expect("stall");
    // The stall answers once the lock is held; mntr waits for it to end.
    let after = tokio::task::spawn_blocking(move || slow_steps(addr))
        .await
        .expect("mntr");
    // At least the stall (with a 1 ms threshold, another step of a loaded machine may count
    // too; the log line below names the stall).
    assert!(after > before, "zk_zkd_slow_steps {before} -> {after}");
    // The same count in /metrics (or more, for the same reason).
    let metrics = get_text(admin, "/metrics").await;
    let total: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("zkd_slow_steps_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no zkd_slow_steps_total in {metrics}"));
    assert!(total >= after, "zkd_slow_steps_total {total} < {after}");
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(
        text.contains("slow step: a stall the control plane asked for"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_threshold_leaves_ordinary_steps_uncounted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("stderr.log");
    let (_zkd, addr, admin) = start(&[], &log);
    let c = RawClient::connect(addr, 10_000).await.expect("connect");
    c.call(&raw::create("/slow", None, 0))
        .await
        .expect("create");
    let r = c.call(&big_multi(2_000)).await.expect("multi");
    assert_eq!(r.err, 0);
    let n = tokio::task::spawn_blocking(move || {
        stall(admin, 1_200);
        slow_steps(addr)
    })
    .await
    .expect("mntr");
    // Only the stall is over the default 1 s.
    assert_eq!(n, 1);
}

/// Sends `signal` while a 30 s stall holds the core's lock: the process must end within the
/// 5 s grace period (plus slack), with status 3 and its sentence, and a restart on the same
/// data directory must find the write acknowledged before.
fn stops_while_stuck(signal: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let log = dir.path().join("stderr.log");
    let data_arg = data.to_str().expect("utf-8 path");
    let (mut zkd, addr, admin) = start(&["--data-dir", data_arg, "--fsync", "always"], &log);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let c = RawClient::connect(addr, 10_000).await.expect("connect");
        let r = c
            .call(&raw::create("/kept", Some("v".into()), 0))
            .await
            .expect("create");
        assert_eq!(r.err, 0);
    });
    stall(admin, 30_000);
    // The core is held: a word that needs it gets no answer.
    assert!(four_letter_word(addr, "srvr").map_or(true, |s| s.is_empty()));
    let pid = zkd.0.id().to_string();
    let sent = Instant::now();
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let status = loop {
        if let Some(s) = zkd.0.try_wait().expect("wait") {
            break s;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(9),
            "still running {:?} after SIG{signal}",
            sent.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = sent.elapsed();
    let text = std::fs::read_to_string(&log).expect("log");
    assert_eq!(status.code(), Some(3), "after {took:?}: {text}");
    assert!(
        took >= Duration::from_secs(4),
        "ended after {took:?}, before the grace period: {text}"
    );
    assert!(
        text.contains("the graceful shutdown did not finish within 5 s"),
        "{text}"
    );

    // Nothing acknowledged was lost.
    let (_again, addr, _) = start(&["--data-dir", data_arg], &log);
    rt.block_on(async {
        let c = RawClient::connect(addr, 10_000).await.expect("connect");
        let r = c
            .call(&Request::GetData(zkd_protocol::PathWatchRequest {
                path: "/kept".into(),
                watch: false,
            }))
            .await
            .expect("getData");
        assert_eq!(r.err, 0, "the acknowledged node is gone");
    });
}

#[test]
fn sigterm_stops_the_server_within_the_grace_period_while_a_step_holds_the_core() {
    stops_while_stuck("TERM");
}

#[test]
fn sigint_stops_the_server_within_the_grace_period_while_a_step_holds_the_core() {
    stops_while_stuck("INT");
}

/// A connection accepted while a step holds the core and that sends nothing is closed when
/// the handshake timeout (10 s) has passed since it was accepted, not given a second timeout
/// once the core is free again.
#[test]
fn a_silent_connection_accepted_during_a_long_step_gets_one_handshake_timeout() {
    use std::io::Read;
    let dir = tempfile::tempdir().expect("temp dir");
    let (_zkd, addr, admin) = start(&[], &dir.path().join("stderr.log"));
    stall(admin, 14_000);
    let mut silent = std::net::TcpStream::connect(addr).expect("connect");
    let opened = Instant::now();
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    let read = silent.read(&mut byte);
    let took = opened.elapsed();
    assert!(matches!(read, Ok(0) | Err(_)), "nothing is sent: {read:?}");
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(13),
        "closed after {took:?}"
    );
}

/// The body of a GET of `path` on the admin listener (a blocking client, off the runtime).
async fn get_text(admin: std::net::SocketAddr, path: &'static str) -> String {
    tokio::task::spawn_blocking(move || {
        ureq::get(&format!("http://{admin}{path}"))
            .call()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .into_body()
            .read_to_string()
            .unwrap_or_else(|e| panic!("GET {path}: the body: {e}"))
    })
    .await
    .expect("the GET's task")
}
