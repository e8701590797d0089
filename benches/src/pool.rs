//! Many sessions at once: bounded-concurrency connects, ping sweeps that keep idle sessions
//! alive, counter snapshots, and a bulk close.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::{self, StreamExt};
use tokio::task::JoinHandle;
use zkd_protocol::Request;
use zkd_testkit::raw::{ClientError, RawClient};

use crate::progress::Progress;

/// Session timeout every bench session asks for (the servers cap it at 20 ticks = 40 s).
pub const SESSION_TIMEOUT_MS: i32 = 40_000;
/// How often idle sessions are pinged.
pub const KEEPALIVE_EVERY: Duration = Duration::from_secs(8);
/// Concurrent handshakes while opening many sessions (below the JVM's default listen
/// backlog of 50, so that no SYN is dropped and retried a second later).
pub const CONNECT_CONCURRENCY: usize = 32;

/// Opens `n` sessions, `concurrency` handshakes at a time. Stops at the first failure and
/// returns what was opened with the error.
pub async fn connect_many(
    addr: SocketAddr,
    n: usize,
    concurrency: usize,
    progress: &Progress,
) -> Result<Vec<Arc<RawClient>>, (Vec<Arc<RawClient>>, ClientError)> {
    connect_many_within(addr, n, concurrency, Duration::from_secs(20), progress).await
}

/// [`connect_many`] with a bound on each handshake.
pub async fn connect_many_within(
    addr: SocketAddr,
    n: usize,
    concurrency: usize,
    handshake: Duration,
    progress: &Progress,
) -> Result<Vec<Arc<RawClient>>, (Vec<Arc<RawClient>>, ClientError)> {
    let mut out = Vec::with_capacity(n);
    let mut results = stream::iter(0..n)
        .map(|_| async move {
            match tokio::time::timeout(handshake, RawClient::connect(addr, SESSION_TIMEOUT_MS))
                .await
            {
                Ok(r) => r,
                Err(_) => Err(ClientError::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("handshake timed out after {handshake:?}"),
                ))),
            }
        })
        .buffer_unordered(concurrency.max(1));
    let mut err = None;
    while let Some(r) = results.next().await {
        match r {
            Ok(c) => {
                out.push(Arc::new(c));
                progress.tick(|| format!("connected {}/{n}", out.len()));
            }
            Err(e) => {
                if err.is_none() {
                    err = Some(e);
                }
                break;
            }
        }
    }
    drop(results);
    match err {
        None => Ok(out),
        Some(e) => Err((out, e)),
    }
}

/// Pings every session once (pipelined) and waits for the replies, at most `limit`.
pub async fn ping_all(clients: &[Arc<RawClient>], limit: Duration) -> usize {
    let mut rxs = Vec::with_capacity(clients.len());
    for c in clients {
        if let Ok(rx) = c.send(&Request::Ping).await {
            rxs.push(rx);
        }
    }
    let mut ok = 0;
    let _ = tokio::time::timeout(limit, async {
        for rx in rxs {
            if rx.await.is_ok() {
                ok += 1;
            }
        }
    })
    .await;
    ok
}

/// Sends closeSession on every session (pipelined) and waits, at most `limit`, for replies.
pub async fn close_all(clients: &[Arc<RawClient>], limit: Duration) {
    let mut rxs = Vec::with_capacity(clients.len());
    for c in clients {
        if let Ok(rx) = c.send(&Request::CloseSession).await {
            rxs.push(rx);
        }
    }
    let _ = tokio::time::timeout(limit, async {
        for rx in rxs {
            let _ = rx.await;
        }
    })
    .await;
}

/// Sums of the per-connection counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub requests: u64,
    pub bytes: u64,
    pub frames: u64,
    pub events: u64,
}

impl Totals {
    pub fn of(clients: &[Arc<RawClient>]) -> Totals {
        let mut t = Totals::default();
        for c in clients {
            let k = c.counters();
            t.requests += k.requests_sent.load(Ordering::Relaxed);
            t.bytes += k.bytes_received.load(Ordering::Relaxed);
            t.frames += k.frames_received.load(Ordering::Relaxed);
            t.events += k.events_received.load(Ordering::Relaxed);
        }
        t
    }

    pub fn minus(self, earlier: Totals) -> Totals {
        Totals {
            requests: self.requests - earlier.requests,
            bytes: self.bytes - earlier.bytes,
            frames: self.frames - earlier.frames,
            events: self.events - earlier.events,
        }
    }
}

/// Pings a changing set of sessions every [`KEEPALIVE_EVERY`] unless paused: measurements
/// hold [`Keepalive::pause`] so that no ping falls into a measured window.
pub struct Keepalive {
    clients: Arc<Mutex<Vec<Arc<RawClient>>>>,
    gate: Arc<tokio::sync::Mutex<()>>,
    task: JoinHandle<()>,
}

impl Keepalive {
    pub fn start() -> Keepalive {
        let clients: Arc<Mutex<Vec<Arc<RawClient>>>> = Arc::default();
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        let task = tokio::spawn({
            let clients = clients.clone();
            let gate = gate.clone();
            async move {
                loop {
                    tokio::time::sleep(KEEPALIVE_EVERY).await;
                    let _g = gate.lock().await;
                    let snapshot: Vec<_> = clients.lock().map(|c| c.clone()).unwrap_or_default();
                    ping_all(&snapshot, Duration::from_secs(20)).await;
                }
            }
        });
        Keepalive {
            clients,
            gate,
            task,
        }
    }

    /// Adds sessions to keep alive.
    pub fn add(&self, more: &[Arc<RawClient>]) {
        if let Ok(mut c) = self.clients.lock() {
            c.extend(more.iter().cloned());
        }
    }

    /// Forgets every session.
    pub fn clear(&self) {
        if let Ok(mut c) = self.clients.lock() {
            c.clear();
        }
    }

    /// Stops pinging while the guard lives.
    pub async fn pause(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.gate.lock().await
    }
}

impl Drop for Keepalive {
    fn drop(&mut self) {
        self.task.abort();
    }
}
