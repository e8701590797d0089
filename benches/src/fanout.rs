//! Notification fan-out: W sessions hold a data watch on one node; one setData; how long
//! until the last watcher has its NodeDataChanged. Repeated for several writes (watches are
//! re-armed between writes, outside the measurement). The watchers are read by one thread
//! through epoll ([`crate::watchers`]), and the write is sent from that thread, so the clock
//! starts right before the write leaves and stops when each notification is read.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use zkd_protocol::{Request, SetDataRequest};

use crate::proc;
use crate::progress::Progress;
use crate::util::{delete, ms, quantile_sorted, session_with_node, BenchResult};
use crate::watchers::Watchers;

#[derive(Debug, Clone)]
pub struct Params {
    pub watchers: usize,
    /// Writes (each one fan-out) per run.
    pub writes: usize,
    pub settle: Duration,
    pub timeout: Duration,
    /// Server process, for CPU time per write.
    pub pid: Option<u32>,
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
    /// Server CPU time (user + system) from the write until all notifications were read.
    pub server_cpu: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub watchers: usize,
    pub samples: Vec<Sample>,
}

/// Runs the fan-out benchmark against `addr`.
pub async fn run(addr: SocketAddr, p: &Params, progress: &Progress) -> BenchResult<Outcome> {
    let data = Some(Bytes::from_static(b"0"));
    let (admin, path) =
        session_with_node(addr, "fanout", data, p.timeout, "the watched node").await?;
    let result = match Watchers::connect(addr, p.watchers, progress).await {
        Ok(w) => {
            let (p2, path2) = (p.clone(), path.clone());
            let prog = progress.sub("");
            tokio::task::spawn_blocking(move || rounds(&mut Some(w), &p2, &path2, &prog))
                .await
                .map_err(|e| format!("fan-out thread: {e}"))
                .and_then(|r| r)
        }
        Err(e) => Err(e),
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), admin.call(&delete(path))).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), admin.close()).await;
    result.map(|samples| Outcome {
        watchers: p.watchers,
        samples,
    })
}

/// The writes, on a plain thread; closes the sessions at the end.
fn rounds(
    w: &mut Option<Watchers>,
    p: &Params,
    path: &str,
    progress: &Progress,
) -> BenchResult<Vec<Sample>> {
    let watchers = w.as_mut().ok_or("no watchers")?;
    let result = (|| {
        let mut samples = Vec::new();
        for round in 0..p.writes {
            watchers.arm(path, p.timeout)?;
            let cpu0 = p.pid.and_then(|pid| proc::CpuSample::take(pid).ok());
            let set = Request::SetData(SetDataRequest {
                path: path.to_string(),
                data: Some(Bytes::from(format!("{}", round + 1))),
                version: -1,
            });
            let mut cpu1 = None;
            let (t0, arrivals) = watchers
                .fire(&set, (round + 1) as u64, p.timeout, p.settle, || {
                    cpu1 = p.pid.and_then(|pid| proc::CpuSample::take(pid).ok());
                })
                .map_err(|e| format!("write {}: {e}", round + 1))?;
            let mut times: Vec<f64> = arrivals
                .iter()
                .map(|a| a.saturating_duration_since(t0).as_secs_f64())
                .collect();
            times.sort_by(f64::total_cmp);
            let s = Sample {
                last: Duration::from_secs_f64(times.last().copied().unwrap_or(0.0)),
                median: Duration::from_secs_f64(quantile_sorted(&times, 0.5)),
                first: Duration::from_secs_f64(times.first().copied().unwrap_or(0.0)),
                server_cpu: proc::CpuSample::between(cpu0, cpu1),
            };
            let (first, median, last) = (ms(s.first), ms(s.median), ms(s.last));
            let text = format!("first {first:.3} ms, median {median:.3} ms, last {last:.3} ms");
            progress.step("write", round, p.writes, text);
            samples.push(s);
        }
        Ok(samples)
    })();
    if let Some(w) = w.take() {
        w.close(Duration::from_secs(30));
    }
    result
}
