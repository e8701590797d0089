//! Memory under hostile clients, measured on the real `zkd` binary (RSS from /proc):
//! * 2 000 connections that each claim the largest frame and then idle, with the server
//!   under an address-space limit: it stays up and its RSS grows by kilobytes per
//!   connection, not by the claimed megabytes;
//! * 30 clients pipelining 1 MB reads without reading the replies: RSS stays within the
//!   server-wide outbound cap (the connections holding the most are dropped, each logged),
//!   and returns near its baseline within seconds once they are gone.
//!
//! Linux only (it reads /proc and starts the server through `prlimit`). The figures are
//! printed (`cargo test -p zkd --test hostile_memory -- --nocapture`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

const MIB: u64 = 1 << 20;

/// The server under test; killed when dropped.
struct Zkd {
    child: Child,
    addr: SocketAddr,
    /// Log lines naming the server-wide outbound limit.
    evictions: Arc<AtomicUsize>,
}

impl Zkd {
    /// Starts `zkd` through `prlimit` with the given limits and extra flags.
    fn start(address_space: Option<u64>, flags: &[&str]) -> Zkd {
        let mut cmd = Command::new("prlimit");
        cmd.arg("--nofile=8192");
        if let Some(bytes) = address_space {
            cmd.arg(format!("--as={bytes}"));
        }
        cmd.arg(env!("CARGO_BIN_EXE_zkd"))
            .args(["--port", "0", "--max-client-cnxns", "0", "--log", "warn"])
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting zkd through prlimit (util-linux): {e}"));
        let stdout = child.stdout.take().expect("stdout");
        let addr = common::listening_addr(&mut BufReader::new(stdout));
        let evictions = Arc::new(AtomicUsize::new(0));
        let stderr = child.stderr.take().expect("stderr");
        let counter = evictions.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("server-wide outbound limit") {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                if line.contains("ERROR") || line.contains("panicked") {
                    eprintln!("zkd: {line}");
                }
            }
        });
        Zkd {
            child,
            addr,
            evictions,
        }
    }

    /// Resident set size in bytes.
    fn rss(&self) -> u64 {
        zkd_testkit::proc_status::rss_bytes(self.child.id())
    }

    fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().expect("try_wait") {
            panic!("zkd exited: {status}");
        }
    }
}

impl Drop for Zkd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn connect_request() -> Vec<u8> {
    common::connect_request(30_000)
}

fn get_data(xid: i32, path: &str) -> Vec<u8> {
    let path = path.to_string();
    let request =
        zkd_protocol::Request::GetData(zkd_protocol::PathWatchRequest { path, watch: false });
    request.to_frame(xid).to_vec()
}

fn read_frame(s: &mut TcpStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("frame length");
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("frame body");
    body
}

/// A connected session (ConnectResponse read).
fn session(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    s.write_all(&connect_request()).expect("ConnectRequest");
    assert_eq!(read_frame(&mut s).len(), 36, "ConnectResponse");
    s
}

/// Sends a request and returns the reply's error code.
fn call(s: &mut TcpStream, request: &[u8]) -> i32 {
    s.write_all(request).expect("request");
    let reply = read_frame(s);
    i32::from_be_bytes(reply[12..16].try_into().expect("err"))
}

/// Polls until `cond` holds or `limit` passes; returns whether it held.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

#[test]
fn idle_connections_claiming_the_largest_frame_cost_no_claimed_memory() {
    const CONNECTIONS: u64 = 2000;
    // Far less than the 2 000 MiB the claims add up to; enough for the server itself.
    const ADDRESS_SPACE: u64 = 1024 * MIB;
    let mut zkd = Zkd::start(Some(ADDRESS_SPACE), &[]);
    let baseline = zkd.rss();
    let claim = 0x000F_FFFFi32.to_be_bytes(); // the default largest frame, 1 048 575
    let mut idle = Vec::new();
    for i in 0..CONNECTIONS {
        let mut s = TcpStream::connect(zkd.addr).unwrap_or_else(|e| panic!("connection {i}: {e}"));
        // Half claim it as their first frame, half right after a handshake.
        if i % 2 == 1 {
            s.set_read_timeout(Some(Duration::from_secs(30)))
                .expect("timeout");
            s.write_all(&connect_request()).expect("ConnectRequest");
            read_frame(&mut s);
        }
        s.write_all(&claim).expect("claim");
        idle.push(s);
    }
    // Every claim has reached the server once a session opened after them is served.
    let mut probe = session(zkd.addr);
    assert_eq!(call(&mut probe, &get_data(1, "/")), 0);
    std::thread::sleep(Duration::from_millis(300));
    zkd.assert_alive();
    let grown = zkd.rss().saturating_sub(baseline);
    eprintln!(
        "idle claims: {CONNECTIONS} connections claiming 1 MiB each under a {} MiB address-space \
         limit: RSS {} KiB -> +{} KiB ({} bytes per connection)",
        ADDRESS_SPACE / MIB,
        baseline / 1024,
        grown / 1024,
        grown / CONNECTIONS
    );
    assert!(
        grown < CONNECTIONS * 32 * 1024,
        "RSS grew by {grown} bytes for {CONNECTIONS} idle connections"
    );
    // Still serving.
    assert_eq!(call(&mut probe, &common::create(2, "/still-here", b"x")), 0);
    drop(idle);
    zkd.assert_alive();
}

#[test]
fn clients_that_never_read_are_bounded_by_the_server_wide_cap() {
    const CLIENTS: usize = 30;
    // 50 MB of replies each: within the per-connection limit (64 MiB), 1.5 GB in all.
    const READS: i32 = 50;
    const TOTAL_CAP: u64 = 128 * MIB;
    let mut zkd = Zkd::start(
        None,
        &["--max-total-outbound-bytes", &TOTAL_CAP.to_string()],
    );
    let mut owner = session(zkd.addr);
    let data = vec![b'm'; 1_000_000];
    assert_eq!(call(&mut owner, &common::create(1, "/big", &data)), 0);
    assert_eq!(call(&mut owner, &get_data(2, "/big")), 0);
    std::thread::sleep(Duration::from_millis(300));
    let baseline = zkd.rss();

    let mut pipeline = Vec::new();
    for xid in 1..=READS {
        pipeline.extend(get_data(xid, "/big"));
    }
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let mut s = session(zkd.addr);
        s.write_all(&pipeline).expect("pipelined reads");
        clients.push(s);
    }
    // Watch RSS while the replies pile up and the cap is enforced.
    let mut peak = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        peak = peak.max(zkd.rss());
        std::thread::sleep(Duration::from_millis(20));
    }
    zkd.assert_alive();
    let evicted = zkd.evictions.load(Ordering::Relaxed);
    // Still serving the well-behaved client.
    assert_eq!(call(&mut owner, &get_data(3, "/big")), 0);

    drop(clients);
    let near = baseline + 32 * MIB;
    let t0 = Instant::now();
    let settled = wait_until(Duration::from_secs(10), || zkd.rss() <= near);
    let after = zkd.rss();
    eprintln!(
        "non-reading clients: {CLIENTS} x {READS} pipelined 1 MB reads, cap {} MiB: baseline \
         {} MiB, peak {} MiB (+{} MiB), {evicted} connections dropped by the cap; after they \
         left: {} MiB ({} in {:.1} s)",
        TOTAL_CAP / MIB,
        baseline / MIB,
        peak / MIB,
        peak.saturating_sub(baseline) / MIB,
        after / MIB,
        if settled { "settled" } else { "NOT settled" },
        t0.elapsed().as_secs_f64()
    );
    assert!(evicted > 0, "the server-wide cap was never enforced");
    // Beyond the cap: replies made while the dropped connections' queues are still being
    // freed by their tasks (at most about one connection's worth), and allocator slack.
    assert!(
        peak <= baseline + TOTAL_CAP + 96 * MIB,
        "peak RSS {peak} exceeds baseline {baseline} + cap {TOTAL_CAP} + 96 MiB"
    );
    assert!(
        settled,
        "RSS {after} did not return near the baseline {baseline} within 10 s"
    );
    zkd.assert_alive();
}
