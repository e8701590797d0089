//! `zkd-bench admin-stall`: whether reading the admin endpoints of a large server stalls its
//! clients. Builds a server state of many nodes and sessions (some connected, holding watches
//! and an ephemeral each; the rest detached but alive, with their ephemerals), then polls
//! every admin endpoint in turn while one client sends reads back to back. Per endpoint it
//! reports the longest reply that client saw while the endpoint was being polled, beside the
//! endpoint's own response time and size; a first row polls nothing, for comparison.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use zkd_protocol::{PathWatchRequest, Request};
use zkd_testkit::raw::RawClient;

use crate::progress::Progress;
use crate::util::{create, median, ms, BenchResult};

/// Sizes of one run.
#[derive(Debug, Clone)]
pub struct Params {
    /// Znodes created under `/bench` (besides the sessions' ephemerals).
    pub nodes: usize,
    /// Sessions in all; each owns one ephemeral node.
    pub sessions: usize,
    /// Of those, sessions that stay connected, each with a data watch on one node and a
    /// child watch on its parent.
    pub connected: usize,
    /// Polls of each endpoint.
    pub polls: usize,
    /// Session timeout asked for (the server must allow it), so detached sessions outlive
    /// the run.
    pub session_timeout_ms: i32,
    /// Poll only the endpoints whose name contains one of these (all when empty); the idle
    /// row is always measured.
    pub only: Vec<String>,
}

impl Params {
    pub fn full() -> Params {
        Params {
            nodes: 100_000,
            sessions: 20_000,
            connected: 5_000,
            polls: 5,
            session_timeout_ms: 600_000,
            only: Vec::new(),
        }
    }

    pub fn quick() -> Params {
        Params {
            nodes: 5_000,
            sessions: 500,
            connected: 200,
            polls: 2,
            ..Params::full()
        }
    }
}

/// One endpoint's figures.
#[derive(Debug, Clone)]
pub struct Row {
    pub endpoint: String,
    /// Median time to the complete answer (ms).
    pub response_ms: f64,
    /// Size of the largest answer (bytes).
    pub bytes: usize,
    /// HTTP status (or 0 for a four-letter word).
    pub status: u16,
    /// The longest reply the reading client saw while the endpoint was polled (ms).
    pub worst_stall_ms: f64,
    /// Replies the client got meanwhile.
    pub client_replies: usize,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub params: Params,
    pub rows: Vec<Row>,
}

/// Every AdminServer command (primary names).
const COMMANDS: [&str; 26] = [
    "configuration",
    "connection_stat_reset",
    "connections",
    "dirs",
    "dump",
    "environment",
    "get_trace_mask",
    "hash",
    "initial_configuration",
    "is_read_only",
    "last_snapshot",
    "leader",
    "monitor",
    "observer_connection_stat_reset",
    "observers",
    "ruok",
    "server_stats",
    "set_trace_mask?traceMask=306",
    "stat_reset",
    "stats",
    "system_properties",
    "voting_view",
    "watch_summary",
    "watches",
    "watches_by_path",
    "zabstate",
];

/// Four-letter words that list sessions, connections or watches.
const WORDS: [&str; 6] = ["cons", "dump", "wchc", "wchp", "wchs", "mntr"];

/// `/bench/pNNNN/nNNNNNNNN`: 1000 parents, leaves spread over them.
fn leaf(i: usize) -> String {
    format!("/bench/p{:04}/n{i:08}", i % 1000)
}

/// Sends `reqs` pipelined, `window` at a time; fails on the first error reply.
async fn pipelined(c: &RawClient, reqs: Vec<Request>, window: usize) -> BenchResult<()> {
    let mut pending = std::collections::VecDeque::new();
    for r in reqs {
        pending.push_back(c.send(&r).await.map_err(|e| e.to_string())?);
        if pending.len() >= window {
            check(pending.pop_front()).await?;
        }
    }
    while !pending.is_empty() {
        check(pending.pop_front()).await?;
    }
    Ok(())
}

async fn check(
    rx: Option<tokio::sync::oneshot::Receiver<zkd_testkit::raw::Reply>>,
) -> BenchResult<()> {
    let Some(rx) = rx else { return Ok(()) };
    let r = rx.await.map_err(|_| "connection lost".to_string())?;
    if r.err != 0 {
        return Err(format!("request failed with error {}", r.err));
    }
    Ok(())
}

/// Builds the state: nodes, then sessions with their ephemerals and watches.
async fn populate(
    addr: SocketAddr,
    p: &Params,
    progress: &Progress,
) -> BenchResult<Vec<RawClient>> {
    let owner = RawClient::connect(addr, 30_000)
        .await
        .map_err(|e| e.to_string())?;
    let value = Some(Bytes::from_static(b"value-of-sixteen"));
    let mut reqs = vec![create("/bench", None, 0), create("/eph", None, 0)];
    reqs.extend((0..1000.min(p.nodes)).map(|i| create(&format!("/bench/p{i:04}"), None, 0)));
    reqs.extend((0..p.nodes).map(|i| create(&leaf(i), value.clone(), 0)));
    progress.say(format!("creating {} nodes", reqs.len()));
    pipelined(&owner, reqs, 512).await?;
    drop(owner);

    progress.say(format!(
        "opening {} sessions ({} stay connected)",
        p.sessions, p.connected
    ));
    let nodes = p.nodes.max(1);
    let timeout = p.session_timeout_ms;
    let opened = stream::iter(0..p.sessions)
        .map(|i| async move {
            let c = RawClient::connect(addr, timeout)
                .await
                .map_err(|e| format!("session {i}: {e}"))?;
            let mut reqs = vec![create(&format!("/eph/s{i:06}"), None, 1)];
            if i < p.connected {
                let path = leaf(i % nodes);
                let parent = format!("/bench/p{:04}", (i % nodes) % 1000);
                let watch = |path: String| PathWatchRequest { path, watch: true };
                reqs.push(Request::Exists(watch(path)));
                reqs.push(Request::GetChildren(watch(parent)));
            }
            pipelined(&c, reqs, 4).await?;
            if i < p.connected {
                Ok(Some(c))
            } else {
                c.abort().await;
                Ok::<_, String>(None)
            }
        })
        .buffer_unordered(32);
    let mut connected = Vec::new();
    let mut done = 0usize;
    let mut opened = Box::pin(opened);
    while let Some(r) = opened.next().await {
        if let Some(c) = r? {
            connected.push(c);
        }
        done += 1;
        progress.tick(|| format!("sessions {done}/{}", p.sessions));
    }
    Ok(connected)
}

/// One GET on the admin listener (HTTP/1.1, connection closed after): status and body size.
fn http_get(admin: &str, path: &str) -> BenchResult<(u16, usize)> {
    let mut s = TcpStream::connect(admin).map_err(|e| format!("admin {admin}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .map_err(|e| format!("{path}: {e}"))?;
    let status = std::str::from_utf8(buf.get(9..12).unwrap_or_default())
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let header_end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(buf.len(), |i| i + 4);
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let body = &buf[header_end..];
    let size = if head.contains("transfer-encoding: chunked") {
        dechunked_len(body)
    } else {
        body.len()
    };
    Ok((status, size))
}

/// The length of a chunked body's content (without the chunk framing).
fn dechunked_len(mut body: &[u8]) -> usize {
    let mut total = 0;
    while let Some(eol) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        total += size;
        body = body.get(eol + 2 + size + 2..).unwrap_or_default();
    }
    total
}

/// One four-letter word on the client port: the answer's size.
fn four_letter(addr: SocketAddr, word: &str) -> BenchResult<(u16, usize)> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.write_all(word.as_bytes()).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .map_err(|e| format!("{word}: {e}"))?;
    Ok((0, buf.len()))
}

/// A reading client's replies: when each was sent and how long it took.
type Samples = Arc<Mutex<Vec<(Instant, f64)>>>;

/// Reads one node back to back until `stop`, recording every reply time.
fn start_reader(
    client: RawClient,
    samples: Samples,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<BenchResult<()>> {
    tokio::spawn(async move {
        let req = Request::GetData(PathWatchRequest {
            path: leaf(0),
            watch: false,
        });
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let t = Instant::now();
            let r = client.call(&req).await.map_err(|e| e.to_string())?;
            if r.err != 0 {
                return Err(format!("read failed with error {}", r.err));
            }
            if let Ok(mut s) = samples.lock() {
                s.push((t, ms(t.elapsed())));
            }
        }
        Ok(())
    })
}

/// The longest reply among those in flight at any time within `[from, to]`, and how many.
fn worst_between(samples: &Samples, from: Instant, to: Instant) -> (f64, usize) {
    let s = samples.lock().map(|s| s.clone()).unwrap_or_default();
    let hits: Vec<f64> = s
        .iter()
        .filter(|(t, d)| *t <= to && *t + Duration::from_secs_f64(d / 1e3) >= from)
        .map(|(_, d)| *d)
        .collect();
    (hits.iter().copied().fold(0.0, f64::max), hits.len())
}

/// Runs the item against a server at `addr` whose admin listener is at `admin` (the server
/// must answer every four-letter word and allow `params.session_timeout_ms`).
pub async fn run(
    addr: SocketAddr,
    admin: &str,
    params: &Params,
    progress: &Progress,
) -> BenchResult<Outcome> {
    let clients = populate(addr, params, progress).await?;
    let session = clients
        .first()
        .map(|c| format!("0x{:x}", c.session_id))
        .unwrap_or_else(|| "0x1".into());
    let mut endpoints: Vec<String> = vec!["(nothing)".into()];
    endpoints.extend(COMMANDS.iter().map(|c| format!("/commands/{c}")));
    endpoints.extend(
        [
            "/metrics",
            "/zkd/herd",
            "/zkd/overview",
            "/zkd/sessions",
            &format!("/zkd/sessions/{session}/watches"),
            "/zkd/node?path=/",
            "/zkd/node?path=/bench&limit=1000",
            "/zkd/node?path=/eph&limit=1000",
            "/zkd/node?path=/bench/p0000/n00000000",
            "/zkd/tree",
            "/zkd/faults",
            "/zkd/clock",
            "/",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    endpoints.extend(WORDS.iter().map(|w| format!("4lw {w}")));
    endpoints.retain(|e| {
        e == "(nothing)" || params.only.is_empty() || params.only.iter().any(|o| e.contains(o))
    });

    let reader = RawClient::connect(addr, 30_000)
        .await
        .map_err(|e| e.to_string())?;
    let samples: Samples = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let task = start_reader(reader, samples.clone(), stop.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut rows = Vec::new();
    for e in endpoints {
        progress.say(format!("polling {e}"));
        let (admin_s, polls) = (admin.to_string(), params.polls);
        let e2 = e.clone();
        let from = Instant::now();
        let polled = tokio::task::spawn_blocking(move || {
            let mut times = Vec::new();
            let mut biggest = (0u16, 0usize);
            for _ in 0..polls {
                let t = Instant::now();
                let r = if e2 == "(nothing)" {
                    std::thread::sleep(Duration::from_millis(200));
                    (0, 0)
                } else if let Some(w) = e2.strip_prefix("4lw ") {
                    four_letter(addr, w)?
                } else {
                    http_get(&admin_s, &e2)?
                };
                times.push(ms(t.elapsed()));
                if r.1 >= biggest.1 {
                    biggest = r;
                }
            }
            Ok::<_, String>((times, biggest))
        })
        .await
        .map_err(|e| e.to_string())??;
        // Let the read in flight at the end complete before looking.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (worst, replies) = worst_between(&samples, from, Instant::now());
        let (times, (status, bytes)) = polled;
        let answered = if e.starts_with("4lw ") {
            bytes > 0
        } else {
            status == 200 || e == "(nothing)"
        };
        if !answered {
            return Err(format!("{e} answered status {status} with {bytes} bytes"));
        }
        rows.push(Row {
            endpoint: e,
            response_ms: median(&times),
            bytes,
            status,
            worst_stall_ms: worst,
            client_replies: replies,
        });
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    task.await.map_err(|e| e.to_string())??;
    drop(clients);
    Ok(Outcome {
        params: params.clone(),
        rows,
    })
}

/// The table of a run, worst stall first after the idle row.
pub fn report(o: &Outcome) -> String {
    let p = &o.params;
    let mut s = format!(
        "admin endpoints on a server with {} nodes under /bench, {} sessions ({} connected, \
         each with a data and a child watch) and {} ephemerals; {} polls per endpoint while \
         one client reads back to back\n\n\
         | endpoint | status | answer (bytes) | answer time (ms, median) | client's longest reply meanwhile (ms) | client replies meanwhile |\n\
         |---|---|---|---|---|---|\n",
        p.nodes, p.sessions, p.connected, p.sessions, p.polls
    );
    let mut rows = o.rows.clone();
    if rows.len() > 1 {
        rows[1..].sort_by(|a, b| b.worst_stall_ms.total_cmp(&a.worst_stall_ms));
    }
    for r in &rows {
        let status = if r.status == 0 {
            "-".to_string()
        } else {
            r.status.to_string()
        };
        s.push_str(&format!(
            "| `{}` | {status} | {} | {:.1} | {:.2} | {} |\n",
            r.endpoint, r.bytes, r.response_ms, r.worst_stall_ms, r.client_replies
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_chunked_body_is_measured_without_its_framing() {
        assert_eq!(
            super::dechunked_len(b"5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n"),
            8
        );
        assert_eq!(super::dechunked_len(b"0\r\n\r\n"), 0);
    }
}
