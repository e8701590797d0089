//! Notification fan-out: W sessions hold a data watch on one node; one setData; how long
//! until the last watcher has its NodeDataChanged. Repeated for several writes (watches are
//! re-armed between writes, outside the measurement).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use zkd_client_tests::raw::RawClient;
use zkd_protocol::{event_type, DeleteRequest, PathWatchRequest, Request, SetDataRequest};

use crate::pool::{self, Keepalive};
use crate::progress::Progress;
use crate::util::{call_ok, create, quantile_sorted, unique, BenchResult};

#[derive(Debug, Clone)]
pub struct Params {
    pub watchers: usize,
    /// Writes (each one fan-out) per run.
    pub writes: usize,
    pub settle: Duration,
    pub timeout: Duration,
}

/// One write's fan-out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// From sending setData until the last watcher received its notification.
    pub last: Duration,
    /// … until half of the watchers had theirs.
    pub median: Duration,
    /// … until the first watcher had its.
    pub first: Duration,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub watchers: usize,
    pub samples: Vec<Sample>,
}

struct Shared {
    base: Instant,
    arrived: Vec<AtomicU64>,
    counts: Vec<AtomicU64>,
    total: AtomicU64,
    errors: Mutex<Vec<String>>,
}

/// Runs the fan-out benchmark against `addr`.
pub async fn run(addr: SocketAddr, p: &Params, progress: &Progress) -> BenchResult<Outcome> {
    let admin = Arc::new(
        RawClient::connect(addr, pool::SESSION_TIMEOUT_MS)
            .await
            .map_err(|e| format!("connecting to {addr}: {e}"))?,
    );
    let path = unique("fanout");
    call_ok(
        &admin,
        &create(&path, Some(Bytes::from_static(b"0")), 0),
        p.timeout,
        "creating the watched node",
    )
    .await?;
    let keepalive = Keepalive::start();
    keepalive.add(&[admin.clone()]);
    let mut clients = Vec::new();
    let result = go(addr, p, &path, &admin, &keepalive, &mut clients, progress).await;
    pool::close_all(&clients, Duration::from_secs(30)).await;
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        admin.call(&Request::Delete(DeleteRequest { path, version: -1 })),
    )
    .await;
    pool::close_all(&[admin], Duration::from_secs(5)).await;
    result
}

async fn go(
    addr: SocketAddr,
    p: &Params,
    path: &str,
    admin: &RawClient,
    keepalive: &Keepalive,
    clients: &mut Vec<Arc<RawClient>>,
    progress: &Progress,
) -> BenchResult<Outcome> {
    match pool::connect_many(addr, p.watchers, pool::CONNECT_CONCURRENCY, progress).await {
        Ok(c) => *clients = c,
        Err((opened, e)) => {
            *clients = opened;
            return Err(format!(
                "opening {} sessions failed after {}: {e}",
                p.watchers,
                clients.len()
            ));
        }
    }
    keepalive.add(clients);
    let sh = Arc::new(Shared {
        base: Instant::now(),
        arrived: (0..p.watchers).map(|_| AtomicU64::new(0)).collect(),
        counts: (0..p.watchers).map(|_| AtomicU64::new(0)).collect(),
        total: AtomicU64::new(0),
        errors: Mutex::new(Vec::new()),
    });
    let mut tasks = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let Some(mut events) = c.events() else {
            return Err("notification stream already taken".into());
        };
        let sh = sh.clone();
        let want = path.to_string();
        tasks.push(tokio::spawn(async move {
            while let Some(ev) = events.recv().await {
                let at = sh.base.elapsed().as_nanos() as u64;
                sh.arrived[i].store(at, Ordering::SeqCst);
                sh.counts[i].fetch_add(1, Ordering::SeqCst);
                sh.total.fetch_add(1, Ordering::SeqCst);
                if ev.event_type != event_type::NODE_DATA_CHANGED || ev.path != want {
                    if let Ok(mut e) = sh.errors.lock() {
                        e.push(format!(
                            "watcher {i}: unexpected notification type {} for {:?}",
                            ev.event_type, ev.path
                        ));
                    }
                }
            }
        }));
    }
    struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            for t in &self.0 {
                t.abort();
            }
        }
    }
    let _tasks = AbortOnDrop(tasks);

    let mut samples = Vec::new();
    for round in 0..p.writes {
        // Arm a data watch on every session.
        let mut rxs = Vec::with_capacity(clients.len());
        for c in clients.iter() {
            let req = Request::GetData(PathWatchRequest {
                path: path.to_string(),
                watch: true,
            });
            rxs.push(c.send(&req).await.map_err(|e| format!("getData: {e}"))?);
        }
        for rx in rxs {
            let r = tokio::time::timeout(p.timeout, rx)
                .await
                .map_err(|_| "getData: no reply".to_string())?
                .map_err(|_| "getData: connection closed".to_string())?;
            if r.err != 0 {
                return Err(format!("getData: error {}", r.err));
            }
        }
        let _pause = keepalive.pause().await;
        let due = (p.watchers * (round + 1)) as u64;
        let t0 = sh.base.elapsed().as_nanos() as u64;
        let set = Request::SetData(SetDataRequest {
            path: path.to_string(),
            data: Some(Bytes::from(format!("{}", round + 1))),
            version: -1,
        });
        let set_rx = admin.send(&set).await.map_err(|e| format!("setData: {e}"))?;
        let start = Instant::now();
        while sh.total.load(Ordering::SeqCst) < due {
            if start.elapsed() > p.timeout {
                return Err(format!(
                    "write {}: only {} of {} watchers notified within {:?} (lost notification)",
                    round + 1,
                    sh.total.load(Ordering::SeqCst) - (due - p.watchers as u64),
                    p.watchers,
                    p.timeout
                ));
            }
            progress.tick(|| {
                format!(
                    "write {}: {}/{} notified",
                    round + 1,
                    sh.total.load(Ordering::SeqCst) - (due - p.watchers as u64),
                    p.watchers
                )
            });
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        let r = tokio::time::timeout(p.timeout, set_rx)
            .await
            .map_err(|_| "setData: no reply".to_string())?
            .map_err(|_| "setData: connection closed".to_string())?;
        if r.err != 0 {
            return Err(format!("setData: error {}", r.err));
        }
        tokio::time::sleep(p.settle).await;
        if let Some(e) = sh.errors.lock().ok().and_then(|e| e.first().cloned()) {
            return Err(e);
        }
        for (i, c) in sh.counts.iter().enumerate() {
            let n = c.load(Ordering::SeqCst);
            if n != (round + 1) as u64 {
                return Err(format!(
                    "write {}: watcher {i} has {n} notifications, expected {}",
                    round + 1,
                    round + 1
                ));
            }
        }
        let mut times: Vec<f64> = sh
            .arrived
            .iter()
            .map(|a| a.load(Ordering::SeqCst).saturating_sub(t0) as f64)
            .collect();
        times.sort_by(f64::total_cmp);
        let s = Sample {
            last: Duration::from_nanos(times.last().copied().unwrap_or(0.0) as u64),
            median: Duration::from_nanos(quantile_sorted(&times, 0.5) as u64),
            first: Duration::from_nanos(times.first().copied().unwrap_or(0.0) as u64),
        };
        progress.say(format!(
            "write {}/{}: first {:.3} ms, median {:.3} ms, last {:.3} ms",
            round + 1,
            p.writes,
            s.first.as_secs_f64() * 1e3,
            s.median.as_secs_f64() * 1e3,
            s.last.as_secs_f64() * 1e3
        ));
        samples.push(s);
    }
    Ok(Outcome {
        watchers: p.watchers,
        samples,
    })
}
