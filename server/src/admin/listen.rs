//! The accept loop of the two HTTP listeners (admin and AdminServer), bounded so that no
//! number of slow or idle HTTP clients can use up the process:
//!
//! - a connection must send a complete request head within [`HEADER_DEADLINE`] (also between
//!   two requests on a kept-alive connection), or it is closed, and the head may be at most
//!   [`MAX_HEAD`] bytes;
//! - a connection whose client reads nothing of an answer for
//!   [`super::outgoing::WRITE_DEADLINE`] is closed (see [`super::outgoing`]);
//! - each listener holds at most [`Limits::per_address`] connections from one address and
//!   [`Limits::total`] in all; one over either is answered 503 and closed at once;
//! - the listeners leave a reserve of file descriptors to the client port: when the process
//!   has fewer than [`fd_reserve`] descriptors left under its `RLIMIT_NOFILE`, new HTTP
//!   connections are answered 503 and closed, so ZooKeeper clients and `ruok` still connect.
//!
//! Refusals are logged as warnings, at most one line per kind (refused connection, closed at
//! the deadline, refused request, failed accept) per [`LOG_EVERY`], with the number of such
//! refusals since the last line.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

/// Longest wait for a complete request head (request line and headers).
pub(crate) const HEADER_DEADLINE: Duration = Duration::from_secs(10);
/// Largest request head (and read buffer) of one connection; a longer head is answered 431.
const MAX_HEAD: usize = 64 << 10;
/// Connections one address may hold on one listener.
const PER_ADDRESS: usize = 64;
/// Connections one listener may hold.
const TOTAL: usize = 256;
/// Least time between two log lines about refused connections or requests.
const LOG_EVERY: Duration = Duration::from_secs(5);
/// How long an accept that failed (no descriptor left, say) waits before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// How long open connections get to finish their answer when the server stops.
const DRAIN: Duration = Duration::from_secs(5);

/// Where a request came in; every request served by [`serve`] carries it as an extension.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnInfo {
    /// The listener's address as the client reached it.
    pub(crate) local: SocketAddr,
    pub(crate) peer: SocketAddr,
}

/// How many connections a listener holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) per_address: usize,
    pub(crate) total: usize,
}

impl Limits {
    /// The defaults, lowered when the descriptor limit is small: each HTTP listener takes at
    /// most an eighth of `RLIMIT_NOFILE`.
    pub(crate) fn for_process() -> Limits {
        let total = match fds::soft_limit() {
            Some(limit) => TOTAL.min((limit / 8).max(8)),
            None => TOTAL,
        };
        Limits {
            per_address: PER_ADDRESS.min(total),
            total,
        }
    }
}

/// Descriptors the HTTP listeners leave to the rest of the process: an eighth of the limit,
/// at least 64.
pub(crate) fn fd_reserve(limit: usize) -> usize {
    (limit / 8).max(64)
}

/// Serves `app` on `listener` until `shutdown`, within `limits`; `name` names the listener
/// in logs.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: CancellationToken,
    limits: Limits,
    name: &'static str,
) {
    let mut conns: JoinSet<()> = JoinSet::new();
    let mut by_task: HashMap<Id, IpAddr> = HashMap::new();
    let mut by_address: HashMap<IpAddr, usize> = HashMap::new();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            Some(done) = conns.join_next_with_id(), if !conns.is_empty() => {
                let id = match done {
                    Ok((id, ())) => id,
                    Err(e) => e.id(),
                };
                if let Some(ip) = by_task.remove(&id) {
                    if let Some(n) = by_address.get_mut(&ip) {
                        *n -= 1;
                        if *n == 0 {
                            by_address.remove(&ip);
                        }
                    }
                }
                continue;
            }
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                log_refusal(
                    Refusal::Accept,
                    None,
                    &format!("{name}: cannot accept a connection: {e}"),
                );
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let ip = peer.ip().to_canonical();
        let held = by_address.get(&ip).copied().unwrap_or(0);
        let refusal = if held >= limits.per_address {
            Some(format!(
                "{ip} already holds {held} connections to this listener (at most {})",
                limits.per_address
            ))
        } else if conns.len() >= limits.total {
            Some(format!(
                "this listener already holds {} connections (at most {})",
                conns.len(),
                limits.total
            ))
        } else {
            fds::short().map(|(open, limit)| {
                format!(
                    "the process has {open} of its {limit} file descriptors open; the last {} are \
                     kept for ZooKeeper clients",
                    fd_reserve(limit)
                )
            })
        };
        if let Some(reason) = refusal {
            log_refusal(
                Refusal::Connection,
                Some(peer),
                &format!("{name}: connection refused: {reason}"),
            );
            refuse(stream, &reason);
            continue;
        }
        let local = match stream.local_addr() {
            Ok(a) => a,
            Err(_) => continue,
        };
        let info = ConnInfo { local, peer };
        let handle = conns.spawn(serve_one(stream, info, app.clone(), shutdown.clone()));
        by_task.insert(handle.id(), ip);
        *by_address.entry(ip).or_insert(0) += 1;
    }
    // Stopping: each connection finishes the answer it is writing, then closes.
    let _ = tokio::time::timeout(DRAIN, async { while conns.join_next().await.is_some() {} }).await;
}

/// Serves one connection: HTTP/1.1 with keep-alive and the header deadline.
async fn serve_one(stream: TcpStream, info: ConnInfo, app: Router, shutdown: CancellationToken) {
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(info);
        tower::ServiceExt::oneshot(app.clone(), req)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_DEADLINE)
        .max_buf_size(MAX_HEAD);
    let stream = super::outgoing::Deadlined::new(stream);
    let stalled = stream.stalled.clone();
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        if e.is_timeout() {
            log_refusal(
                Refusal::Deadline,
                Some(info.peer),
                &format!(
                    "HTTP connection closed: no complete request head within {} s",
                    HEADER_DEADLINE.as_secs()
                ),
            );
        } else if stalled.load(std::sync::atomic::Ordering::Relaxed) {
            log_refusal(
                Refusal::Stalled,
                Some(info.peer),
                &format!(
                    "HTTP connection closed: the client read nothing of its answer for {} s",
                    super::outgoing::WRITE_DEADLINE.as_secs()
                ),
            );
        } else {
            tracing::debug!(peer = %info.peer, error = %e, "HTTP connection ended");
        }
    }
}

/// Answers 503 with `reason` (if the socket takes it at once) and closes.
fn refuse(stream: TcpStream, reason: &str) {
    let body =
        serde_json::json!({ "error": format!("too many connections: {reason}") }).to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

/// What was refused; each kind is logged on its own schedule.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refusal {
    /// An accept that failed (no descriptor left, say).
    Accept,
    /// A connection over a cap or inside the descriptor reserve.
    Connection,
    /// A connection closed at the header deadline.
    Deadline,
    /// A request the guard refused.
    Request,
    /// A connection closed at the write deadline (its client read nothing of an answer).
    Stalled,
}

/// Per kind of refusal: refusals since the last log line, and when that line was written.
static REFUSALS: [Mutex<(u64, Option<Instant>)>; 5] = [
    Mutex::new((0, None)),
    Mutex::new((0, None)),
    Mutex::new((0, None)),
    Mutex::new((0, None)),
    Mutex::new((0, None)),
];

/// Logs a refused connection or request, at most one line per kind per [`LOG_EVERY`].
pub(crate) fn log_refusal(kind: Refusal, peer: Option<SocketAddr>, what: &str) {
    let Ok(mut r) = REFUSALS[kind as usize].lock() else {
        return;
    };
    r.0 += 1;
    if r.1.is_some_and(|at| at.elapsed() < LOG_EVERY) {
        return;
    }
    let count = std::mem::take(&mut r.0);
    r.1 = Some(Instant::now());
    drop(r);
    match peer {
        Some(peer) => tracing::warn!(%peer, refusals_since_last_line = count, "{what}"),
        None => tracing::warn!(refusals_since_last_line = count, "{what}"),
    }
}

/// The process's file descriptors: how many are open, against the soft limit.
mod fds {
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// How long a count of open descriptors is reused.
    const RECOUNT: Duration = Duration::from_millis(20);

    static LAST: Mutex<Option<(Instant, usize)>> = Mutex::new(None);

    /// The soft `RLIMIT_NOFILE`, when there is one.
    #[cfg(target_os = "linux")]
    pub(super) fn soft_limit() -> Option<usize> {
        rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .and_then(|n| usize::try_from(n).ok())
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn soft_limit() -> Option<usize> {
        None
    }

    /// Descriptors open now (counted at most every [`RECOUNT`]).
    fn open() -> Option<usize> {
        let mut last = LAST.lock().ok()?;
        if let Some((at, n)) = *last {
            if at.elapsed() < RECOUNT {
                return Some(n);
            }
        }
        let n = std::fs::read_dir("/proc/self/fd").ok()?.count();
        *last = Some((Instant::now(), n));
        Some(n)
    }

    /// `(open, limit)` when the process is inside the reserve the HTTP listeners leave.
    pub(super) fn short() -> Option<(usize, usize)> {
        let limit = soft_limit()?;
        let open = open()?;
        (open + super::fd_reserve(limit) >= limit).then_some((open, limit))
    }
}
