//! Answers to clients that never read, on the real `zkd` binary (RSS from /proc): 50
//! requests for `/zkd/sessions` on a server with 50 000 sessions and 10 for `/zkd/tree` of a
//! 24 MB tree, none of which reads its answer. The server's memory stays within a stated bound (the answer is made a page at a
//! time as the client reads, and unread pages are capped), `ruok` and other admin requests
//! are served throughout, and every such connection is closed at the write deadline with a
//! logged reason. Linux only (it reads /proc). The figures are printed
//! (`cargo test -p zkd --test unread_answers -- --nocapture`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

const MIB: u64 = 1 << 20;
const SESSIONS: usize = 50_000;
const NON_READERS: usize = 50;
/// Non-readers of the tree: each one's answer passes through about 3.7 times its size in
/// short-lived buffers (node data, its base64 text, the page), which the allocator keeps
/// for up to a second once freed.
const TREE_NON_READERS: usize = 10;
/// Nodes of 600 KB: the tree's answer is far larger than what the sockets' buffers hold.
const BIG_NODES: usize = 40;
const BIG: usize = 600_000;
/// The answers are made by one worker thread of lowered priority, so the last non-reader's
/// socket fills up long after the first's; each is then closed at the write deadline (10 s).
const CLOSED_WITHIN: Duration = Duration::from_secs(120);
/// Most the server's RSS may grow while the non-readers wait: the pages in flight (at most
/// the listeners' cap on unsent answers, 64 MiB) and the freed pages the allocator keeps for
/// up to a second while the sockets' buffers are filled at full speed. A whole answer held
/// per connection would be 50 × 5.6 MB + 10 × 24 MB, about 500 MiB.
const GROWTH_BOUND: u64 = 192 * MIB;

struct Zkd {
    child: Child,
    client: SocketAddr,
    admin: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Drop for Zkd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Zkd {
    fn start() -> Zkd {
        let mut child = Command::new("prlimit")
            .arg("--nofile=8192")
            .arg(env!("CARGO_BIN_EXE_zkd"))
            .args([
                "--port",
                "0",
                "--admin-port",
                "0",
                "--max-client-cnxns",
                "0",
            ])
            .args(["--max-session-timeout", "600000"])
            .args(["--log", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting zkd through prlimit (util-linux): {e}"));
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let client = common::listening_addr(&mut out);
        let admin = common::announced(&mut out, "zkd admin on ")
            .parse()
            .expect("admin address");
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        Zkd {
            child,
            client,
            admin,
            log,
        }
    }

    /// File descriptors the server holds open.
    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .expect("the server is running")
            .count()
    }

    fn rss(&self) -> u64 {
        zkd_testkit::proc_status::rss_bytes(self.child.id())
    }
}

/// Opens `n` sessions and leaves them (the sockets close; the sessions live until they
/// expire).
fn open_sessions(addr: SocketAddr, n: usize) {
    let request = common::connect_request(600_000);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let request = request.clone();
            std::thread::spawn(move || {
                for _ in 0..n / 4 {
                    let mut s = TcpStream::connect(addr).expect("connect");
                    s.write_all(&request).expect("handshake");
                    let mut len = [0u8; 4];
                    s.read_exact(&mut len).expect("handshake answer");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("session opener");
    }
}

/// Creates `/big0`, `/big1`, ... of [`BIG`] bytes each, on one session.
fn create_big_nodes(addr: SocketAddr) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(&common::connect_request(600_000))
        .expect("handshake");
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut skip = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut skip).unwrap();
    for i in 0..BIG_NODES {
        let create = common::create(i as i32 + 1, &format!("/big{i}"), &vec![b'x'; BIG]);
        s.write_all(&create).expect("create");
        s.read_exact(&mut len).unwrap();
        let mut reply = vec![0u8; i32::from_be_bytes(len) as usize];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(&reply[12..16], &[0, 0, 0, 0], "create /big{i} succeeded");
    }
}

fn ruok(addr: SocketAddr) -> Duration {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"ruok").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("ruok answered");
    assert_eq!(answer, "imok");
    started.elapsed()
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = zkd_testkit::http::send_get(addr, path, "localhost", Duration::from_secs(10));
    let mut answer = String::new();
    s.read_to_string(&mut answer)
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    (status, answer)
}

#[test]
fn unread_session_listings_are_bounded_and_closed_at_the_deadline() {
    let zkd = Zkd::start();
    open_sessions(zkd.client, SESSIONS);
    create_big_nodes(zkd.client);
    let (status, tree) = get(zkd.admin, "/zkd/tree");
    assert_eq!(status, 200);
    assert!(
        tree.len() > BIG_NODES * BIG,
        "the whole tree: {} bytes",
        tree.len()
    );
    // Reading one listing whole works, and shows the sessions.
    let (status, whole) = get(zkd.admin, "/zkd/sessions");
    assert_eq!(status, 200);
    let sessions = whole.matches("\"timeout_ms\"").count();
    assert!(sessions >= SESSIONS * 9 / 10, "{sessions} sessions listed");
    std::thread::sleep(Duration::from_millis(500));
    let baseline = zkd.rss();
    let fds_before = zkd.fds();

    // The non-readers: each sends its request and reads nothing.
    let started = Instant::now();
    let silent = |path: &str, n: usize| -> Vec<TcpStream> {
        (0..n)
            .map(|_| {
                let mut s = TcpStream::connect(zkd.admin).expect("connect");
                write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
                s
            })
            .collect()
    };
    let silent_sessions = silent("/zkd/sessions", NON_READERS);
    let silent_trees = silent("/zkd/tree", TREE_NON_READERS);

    // While they wait: the client port and the admin listener serve, and the RSS is sampled.
    let mut peak = baseline;
    let mut slowest_ruok = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(8) {
        peak = peak.max(zkd.rss());
        slowest_ruok = slowest_ruok.max(ruok(zkd.client));
        let (status, body) = get(zkd.admin, "/zkd/clock");
        assert_eq!(status, 200, "{body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let growth = peak.saturating_sub(baseline);
    println!(
        "{NON_READERS} unread /zkd/sessions of {SESSIONS} sessions ({} bytes each) and \
         {TREE_NON_READERS} unread /zkd/tree ({} bytes each): RSS {} MiB -> peak {} MiB (+{} MiB); \
         slowest ruok {slowest_ruok:?}",
        whole.len(),
        tree.len(),
        baseline / MIB,
        peak / MIB,
        growth / MIB
    );
    assert!(
        growth <= GROWTH_BOUND,
        "RSS grew by {} MiB (bound {} MiB)",
        growth / MIB,
        GROWTH_BOUND / MIB
    );

    // Each tree answer is closed by the server at the write deadline: reading now drains
    // what the sockets hold and ends before the answer does.
    // The listings (each about as large as what the sockets' buffers hold) are let go of;
    // the tree's non-readers, without reading a byte, are closed by the server at the write
    // deadline once the sockets' buffers are full.
    drop(silent_sessions);
    while zkd.fds() > fds_before + 2 {
        assert!(
            started.elapsed() < CLOSED_WITHIN,
            "{} of the non-readers' connections still open after {CLOSED_WITHIN:?}",
            zkd.fds() - fds_before
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    println!(
        "every non-reader's connection closed after {:?}",
        started.elapsed()
    );
    // Loopback's socket buffers can take a whole 24 MB answer; those that could not were
    // cut at the deadline, each close logged.
    let cut = silent_trees
        .into_iter()
        .filter(|s| {
            let mut one = [0u8; 1];
            s.set_nonblocking(true).unwrap();
            // Buffered data is there to peek at either way; what matters is the server's side.
            s.peek(&mut one).is_ok()
        })
        .count();
    println!("{cut} tree non-readers had data waiting when their connections ended");
    let log = zkd.log.lock().unwrap().join("\n");
    assert!(
        log.contains("read nothing of its answer"),
        "no log line names the closes: {log}"
    );
    assert!(ruok(zkd.client) < Duration::from_secs(1));
}
