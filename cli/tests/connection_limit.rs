//! The per-address connection limit of the `zkd` binary (`--max-client-cnxns`): a connection
//! over the limit is closed at once, and the server logs exactly one warning for it, naming
//! the address and the limit, so a client that sees its connection end can find out why.
//!
//! And the HTTP listeners' limits: 2 000 half-sent requests on each of the admin and
//! AdminServer listeners are all closed within the header deadline (those over a connection
//! cap at once) while ZooKeeper clients connect and `ruok` answers, also with the process
//! under a 1 024-descriptor limit (`prlimit`); `--admin-allow-host` admits the host it names.
//! With client connections holding most descriptors, the HTTP listeners refuse new
//! connections rather than take the last ones.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

mod common;

/// Opens a connection the server must refuse and waits until the server has closed it.
fn refused(addr: SocketAddr) {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut buf = [0u8; 16];
    match c.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("a connection over the limit is closed at once, got {other:?}"),
    }
}

#[test]
fn a_refused_connection_is_logged_once_with_address_and_limit() {
    let (mut child, _, addr) = common::start_zkd(
        &["--port", "0", "--log", "warn", "--max-client-cnxns", "2"],
        Stdio::piped(),
    );
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let refusal = |line: &str| line.contains("refusing connection");

    // Two connections are within the limit; the server accepts in order, so the third is
    // the first over it.
    let _a = TcpStream::connect(addr).expect("first connection");
    let _b = TcpStream::connect(addr).expect("second connection");
    refused(addr);
    let line = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a warning for the refused connection");
        if refusal(&line) {
            break line;
        }
    };
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("127.0.0.1"), "names the address: {line}");
    assert!(line.contains("limit=2"), "names the limit: {line}");
    assert!(
        line.contains("--max-client-cnxns"),
        "names the setting: {line}"
    );

    // A second refusal, then everything the server logged until it stops: one warning each.
    refused(addr);
    let _ = child.kill();
    let _ = child.wait();
    reader.join().expect("stderr reader");
    let more: Vec<String> = rx.try_iter().filter(|l| refusal(l)).collect();
    assert_eq!(
        more.len(),
        1,
        "one warning per refused connection: {more:?}"
    );
}

/// Half-sent requests opened on each HTTP listener.
const HALF_SENT: usize = 2000;
/// The HTTP listeners' deadline for a request head, and the slack allowed on top of it.
const HEADER_DEADLINE: Duration = Duration::from_secs(10);
const SLACK: Duration = Duration::from_secs(3);

/// `zkd` with both HTTP listeners (under `prlimit --nofile=N` when given), its stderr lines
/// on a channel, and the client, admin and AdminServer addresses.
struct Zkd {
    child: std::process::Child,
    log: mpsc::Receiver<String>,
    client: SocketAddr,
    admin: SocketAddr,
    commands: SocketAddr,
}

impl Drop for Zkd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_with_http(nofile: Option<u32>, extra: &[&str]) -> Zkd {
    let zkd = env!("CARGO_BIN_EXE_zkd");
    let mut cmd = match nofile {
        Some(n) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={n}")).arg(zkd);
            c
        }
        None => Command::new(zkd),
    };
    let mut child = cmd
        .args(["--port", "0", "--admin-port", "0", "--admin-server-port", "0"])
        .args(["--log", "warn"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run zkd (prlimit comes with util-linux, see scripts/install-test-deps.sh): {e}")
        });
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let client = common::listening_addr(&mut out);
    let admin = common::announced(&mut out, "zkd admin on ")
        .parse()
        .expect("admin address");
    let commands = common::announced(&mut out, "zkd admin server on ")
        .parse()
        .expect("AdminServer address");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, log) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    Zkd {
        child,
        log,
        client,
        admin,
        commands,
    }
}

/// One raw HTTP GET with the given Host; the status.
fn http_status(addr: SocketAddr, path: &str, host: &str) -> u16 {
    let mut s = zkd_testkit::http::send_get(addr, path, host, Duration::from_secs(30));
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
}

/// What the probes saw while the HTTP listeners were flooded.
#[derive(Default, Debug)]
struct Probes {
    ruok: usize,
    ruok_slowest: Duration,
    ruok_failures: Vec<String>,
    sessions: usize,
    session_failures: Vec<String>,
}

/// `ruok` every 100 ms and a new ZooKeeper session every second, until `stop`.
async fn probe(client: SocketAddr, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Probes {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut p = Probes::default();
    let mut next_session = 0u32;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let began = std::time::Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(5), async {
            let mut s = tokio::net::TcpStream::connect(client).await?;
            s.write_all(b"ruok").await?;
            let mut out = String::new();
            s.read_to_string(&mut out).await?;
            Ok::<_, std::io::Error>(out)
        })
        .await;
        match answer {
            Ok(Ok(text)) if text == "imok" => {
                p.ruok += 1;
                p.ruok_slowest = p.ruok_slowest.max(began.elapsed());
            }
            other => p.ruok_failures.push(format!("{other:?}")),
        }
        if next_session == 0 {
            next_session = 10;
            let session = tokio::time::timeout(
                Duration::from_secs(5),
                zkd_testkit::raw::RawClient::connect(client, 10_000),
            )
            .await;
            match session {
                Ok(Ok(c)) => {
                    p.sessions += 1;
                    let _ = c.close().await;
                }
                other => p
                    .session_failures
                    .push(format!("{:?}", other.map(|r| r.err()))),
            }
        }
        next_session -= 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    p
}

/// Opens `HALF_SENT` connections to `addr` from 50 loopback addresses, three in four with a
/// request head cut short and one in four with nothing sent, and waits for each to be closed;
/// returns when each was opened and how long it stayed open (`None`: still open after the
/// deadline and its slack).
async fn half_sent(addr: SocketAddr) -> Vec<(std::time::Instant, Option<Duration>)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut waits = tokio::task::JoinSet::new();
    for i in 0..HALF_SENT {
        // From 50 loopback addresses, so the per-address cap is not the only one in play.
        let from = SocketAddr::from(([127, 0, 0, 2 + (i % 50) as u8], 0));
        let mut s = loop {
            let connected = async {
                let socket = tokio::net::TcpSocket::new_v4()?;
                socket.bind(from)?;
                socket.connect(addr).await
            };
            match connected.await {
                Ok(s) => break s,
                // Out of descriptors here, or the listener's queue full: try again.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        let opened = std::time::Instant::now();
        if i % 4 != 0 {
            let _ = s
                .write_all(b"GET /zkd/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ")
                .await;
        }
        waits.spawn(async move {
            let mut buf = [0u8; 512];
            let closed = tokio::time::timeout(HEADER_DEADLINE + SLACK, async {
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
            })
            .await;
            (opened, closed.ok().map(|()| opened.elapsed()))
        });
    }
    let mut out = Vec::with_capacity(HALF_SENT);
    while let Some(w) = waits.join_next().await {
        out.push(w.expect("reader"));
    }
    out
}

fn flood(nofile: Option<u32>) {
    let zkd = start_with_http(nofile, &["--admin-allow-host", "zk.test"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (admin_waits, commands_waits, probes) = rt.block_on(async {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The probes run on a thread of their own, so they time the server, not this runtime
        // busy opening connections.
        let prober = std::thread::spawn({
            let (client, stop) = (zkd.client, stop.clone());
            move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("probe runtime")
                    .block_on(probe(client, stop))
            }
        });
        let admin = tokio::spawn(half_sent(zkd.admin));
        let commands = tokio::spawn(half_sent(zkd.commands));
        let admin = admin.await.expect("admin flood");
        let commands = commands.await.expect("AdminServer flood");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (admin, commands, prober.join().expect("probes"))
    });
    let label = nofile.map_or("no descriptor limit".to_string(), |n| {
        format!("prlimit --nofile={n}")
    });
    for (name, waits) in [("admin", &admin_waits), ("AdminServer", &commands_waits)] {
        let open = waits.iter().filter(|(_, w)| w.is_none()).count();
        let at_once = waits
            .iter()
            .filter(|(_, w)| w.is_some_and(|d| d < Duration::from_secs(1)))
            .count();
        // Held by the server until the deadline (closed in its last second or after), and the
        // most of those open at one time (the opening may outlast one deadline).
        let held: Vec<(std::time::Instant, Duration)> = waits
            .iter()
            .filter_map(|(at, w)| w.map(|d| (*at, d)))
            .filter(|(_, d)| *d >= HEADER_DEADLINE - Duration::from_secs(1))
            .collect();
        let at_most_together = held
            .iter()
            .map(|(t, _)| held.iter().filter(|(u, d)| u <= t && *t < *u + *d).count())
            .max()
            .unwrap_or(0);
        let slowest = waits
            .iter()
            .filter_map(|(_, w)| *w)
            .max()
            .unwrap_or_default();
        println!(
            "{label}: {name} listener: {} half-sent requests, {at_once} closed within 1 s, \
             {} held until the deadline (at most {at_most_together} at one time), slowest \
             closed after {:.1} s, {open} still open",
            waits.len(),
            held.len(),
            slowest.as_secs_f64()
        );
        assert_eq!(waits.len(), HALF_SENT);
        // Each listener holds at most 256 connections, and an eighth of the descriptors
        // (give or take the few whose closing this side sees after the next is taken).
        let cap = nofile.map_or(256, |n| (n as usize / 8).min(256));
        assert!(
            at_most_together <= cap + 8,
            "{name}: {at_most_together} connections held at one time, at most {cap}"
        );
        assert_eq!(
            open, 0,
            "{name}: every half-sent request is closed within {HEADER_DEADLINE:?} (+{SLACK:?})"
        );
    }
    println!(
        "{label}: meanwhile {} ruok answered (slowest {} ms), {} sessions established",
        probes.ruok,
        probes.ruok_slowest.as_millis(),
        probes.sessions
    );
    assert!(
        probes.ruok_failures.is_empty(),
        "ruok failed: {:?}",
        probes.ruok_failures
    );
    assert!(
        probes.session_failures.is_empty(),
        "a client could not connect: {:?}",
        probes.session_failures
    );
    assert!(probes.ruok > 0 && probes.sessions > 0, "{probes:?}");

    // The listeners serve again, with the Host rules: the named host is admitted, others not.
    assert_eq!(http_status(zkd.admin, "/zkd/sessions", "127.0.0.1"), 200);
    assert_eq!(http_status(zkd.admin, "/zkd/sessions", "zk.test"), 200);
    assert_eq!(http_status(zkd.admin, "/zkd/sessions", "evil.example"), 403);
    assert_eq!(
        http_status(zkd.commands, "/commands/ruok", "zk.test:8080"),
        200
    );
    assert_eq!(
        http_status(zkd.commands, "/commands/ruok", "evil.example"),
        403
    );
    // The refusals and the closed connections were logged.
    let log: Vec<String> = zkd.log.try_iter().collect();
    assert!(
        log.iter().any(|l| l.contains("connection refused")),
        "a refused connection is logged: {log:?}"
    );
    assert!(
        log.iter().any(|l| l.contains("no complete request head")),
        "a connection closed at the deadline is logged: {log:?}"
    );
}

#[test]
fn half_sent_http_requests_are_closed_while_clients_connect() {
    flood(None);
}

#[test]
fn half_sent_http_requests_under_a_1024_descriptor_limit() {
    flood(Some(1024));
}

#[test]
fn a_bad_admin_allow_host_is_a_start_up_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_zkd"))
        .args(["--port", "0", "--admin-port", "0"])
        .args(["--admin-allow-host", "http://evil.example/"])
        .output()
        .expect("zkd runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"http://evil.example/\""), "{err}");
}

/// With most descriptors taken by client connections, the HTTP listeners refuse new
/// connections (503, naming the descriptors) instead of taking the last ones, and `ruok`
/// still answers.
#[test]
fn the_http_listeners_leave_descriptors_to_clients() {
    use std::io::Write;
    // 256 descriptors: the HTTP listeners stop at 256 - 64 open.
    let zkd = start_with_http(Some(256), &["--max-client-cnxns", "0"]);
    let clients: Vec<TcpStream> = (0..180)
        .map(|_| TcpStream::connect(zkd.client).expect("client connection"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut answers = Vec::new();
    for _ in 0..20 {
        let mut s = TcpStream::connect(zkd.admin).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let _ = s.write_all(b"GET /zkd/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answers.push(answer);
    }
    assert!(
        answers
            .iter()
            .all(|a| a.starts_with("HTTP/1.1 503") && a.contains("file descriptors")),
        "{answers:?}"
    );
    let ruok = zkd_testkit::oracle::four_letter_word(zkd.client, "ruok").expect("ruok");
    assert_eq!(ruok, "imok");
    drop(clients);
    // The descriptors are back: the listener serves again.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(http_status(zkd.admin, "/zkd/sessions", "127.0.0.1"), 200);
}
