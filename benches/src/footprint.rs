//! Footprint: start-up time, idle memory, memory per znode and per idle session, and how
//! many concurrent sessions a server accepts.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zkd_protocol::{PathWatchRequest, Request, StatResponse};
use zkd_testkit::raw::{ClientError, RawClient};

use crate::pool::{self, Keepalive};
use crate::proc::{self, FdLimits};
use crate::progress::Progress;
use crate::servers::ServerSpec;
use crate::util::{call_ok, create, delete, session_with_node, BenchResult};

#[derive(Debug, Clone)]
pub struct Params {
    /// Start-ups to time (spawned servers only).
    pub startups: usize,
    /// Tree sizes to measure, each on a fresh server.
    pub znodes: Vec<usize>,
    pub znode_size: usize,
    pub sessions: usize,
    /// Upper bound for the concurrent-sessions probe.
    pub max_sessions: usize,
    /// Wait before reading RSS after a step.
    pub settle: Duration,
}

/// Adding `count` things (znodes, idle sessions): how long it took and the server's RSS
/// before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct Growth {
    pub count: usize,
    /// Wall time of adding them (the pipelined creates, the handshakes).
    pub secs: f64,
    pub rss_before: Option<u64>,
    pub rss_after: Option<u64>,
}

impl Growth {
    /// RSS growth per thing added, where both RSS figures are known.
    pub fn per_item(&self) -> Option<f64> {
        per(self.rss_before, self.rss_after, self.count)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct MaxSessionsOutcome {
    /// Sessions open at the same time (each answered a ping at the end).
    pub opened: usize,
    pub bound: usize,
    /// Why opening stopped: `bound reached` or the error of the first failed handshake.
    pub stopped_by: String,
    /// This process's descriptor limits.
    pub fd: FdLimits,
    /// The server's descriptor limit and how many it had open at the peak.
    pub server_fd_limit: Option<u64>,
    pub server_fds_open: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub startup: Vec<Duration>,
    pub idle_rss: Option<u64>,
    /// One per tree size of [`Params::znodes`].
    pub znodes: Vec<Growth>,
    pub sessions: Growth,
    pub max_sessions: MaxSessionsOutcome,
}

fn per(before: Option<u64>, after: Option<u64>, n: usize) -> Option<f64> {
    let (b, a) = (before?, after?);
    Some((a as f64 - b as f64) / n.max(1) as f64)
}

fn rss(pid: Option<u32>) -> BenchResult<Option<u64>> {
    pid.map(proc::rss_bytes)
        .transpose()
        .map_err(|e| format!("reading RSS: {e}"))
}

/// Times `samples` start-ups of `spec` (spawn until the first successful handshake).
pub async fn startup(
    spec: &ServerSpec,
    samples: usize,
    progress: &Progress,
) -> BenchResult<Vec<Duration>> {
    let mut out = Vec::new();
    for i in 0..samples {
        let server = spec.start(Duration::from_secs(60)).await?;
        out.push(server.startup());
        progress.say(format!(
            "start-up {}/{samples}: {:.1} ms",
            i + 1,
            server.startup().as_secs_f64() * 1e3
        ));
        drop(server);
    }
    Ok(out)
}

/// RSS of a freshly started, idle server (after one handshake and `settle`).
pub async fn idle_rss(pid: u32, settle: Duration) -> BenchResult<u64> {
    tokio::time::sleep(settle).await;
    proc::rss_bytes(pid).map_err(|e| format!("reading RSS: {e}"))
}

/// Creates `count` znodes of `size` bytes (pipelined, 1000 in flight) and measures the RSS
/// growth. With `cleanup` the nodes are deleted again.
pub async fn znodes(
    addr: SocketAddr,
    pid: Option<u32>,
    count: usize,
    size: usize,
    settle: Duration,
    cleanup: bool,
    progress: &Progress,
) -> BenchResult<Growth> {
    let limit = Duration::from_secs(60);
    let (admin, parent) = session_with_node(addr, "znodes", None, limit, "the parent").await?;
    let before = rss(pid)?;
    let data = Bytes::from(vec![b'z'; size]);
    let t0 = Instant::now();
    let paths = (0..count).map(|i| format!("{parent}/z-{i:07}"));
    let reqs = paths.clone().map(|p| create(&p, Some(data.clone()), 0));
    pipeline(&admin, reqs, 1000, limit, "create", progress).await?;
    let create_secs = t0.elapsed().as_secs_f64();
    let stat = call_ok(
        &admin,
        &Request::Exists(PathWatchRequest {
            path: parent.clone(),
            watch: false,
        }),
        limit,
        "exists",
    )
    .await?
    .decode::<StatResponse>()
    .map_err(|e| format!("exists reply: {e}"))?;
    if stat.stat.num_children as usize != count {
        return Err(format!(
            "{} children after {count} creates",
            stat.stat.num_children
        ));
    }
    tokio::time::sleep(settle).await;
    let after = rss(pid)?;
    progress.say(format!(
        "{count} znodes of {size} B created in {create_secs:.2} s{}",
        per(before, after, count).map_or(String::new(), |b| format!(", {b:.0} B RSS each"))
    ));
    if cleanup {
        pipeline(&admin, paths.map(delete), 1000, limit, "delete", progress).await?;
        let _ = call_ok(&admin, &delete(parent), limit, "delete").await;
    }
    let _ = admin.close().await;
    Ok(Growth {
        count,
        secs: create_secs,
        rss_before: before,
        rss_after: after,
    })
}

/// Sends `reqs` on one session keeping `window` in flight; every reply must be OK.
async fn pipeline(
    client: &RawClient,
    reqs: impl Iterator<Item = Request>,
    window: usize,
    limit: Duration,
    what: &str,
    progress: &Progress,
) -> BenchResult<()> {
    let mut inflight = VecDeque::with_capacity(window);
    let mut done = 0usize;
    let mut check = |r: Result<Result<zkd_testkit::raw::Reply, _>, _>| -> BenchResult<()> {
        let reply = r
            .map_err(|_| format!("{what}: no reply within {limit:?}"))?
            .map_err(|_| format!("{what}: connection closed"))?;
        if reply.err != 0 {
            return Err(format!("{what}: error {}", reply.err));
        }
        done += 1;
        progress.tick(|| format!("{what}: {done} done"));
        Ok(())
    };
    for req in reqs {
        if inflight.len() >= window {
            let rx = inflight.pop_front().expect("window is not empty");
            check(tokio::time::timeout(limit, rx).await)?;
        }
        inflight.push_back(
            client
                .send(&req)
                .await
                .map_err(|e| format!("{what}: {e}"))?,
        );
    }
    while let Some(rx) = inflight.pop_front() {
        check(tokio::time::timeout(limit, rx).await)?;
    }
    Ok(())
}

/// Opens `n` idle sessions and measures the RSS growth.
pub async fn idle_sessions(
    addr: SocketAddr,
    pid: Option<u32>,
    n: usize,
    settle: Duration,
    progress: &Progress,
) -> BenchResult<Growth> {
    let before = rss(pid)?;
    let keepalive = Keepalive::start();
    let t0 = Instant::now();
    let clients = pool::connect_many(addr, n, pool::CONNECT_CONCURRENCY, progress)
        .await
        .map_err(|(_, e)| format!("opening {n} sessions: {e}"))?;
    let open_secs = t0.elapsed().as_secs_f64();
    keepalive.add(&clients);
    tokio::time::sleep(settle).await;
    let after = rss(pid)?;
    let alive = {
        let _p = keepalive.pause().await;
        pool::ping_all(&clients, Duration::from_secs(30)).await
    };
    keepalive.clear();
    pool::close_all(&clients, Duration::from_secs(30)).await;
    if alive != n {
        return Err(format!("only {alive} of {n} idle sessions answered a ping"));
    }
    progress.say(format!(
        "{n} idle sessions opened in {open_secs:.2} s{}",
        per(before, after, n).map_or(String::new(), |b| format!(", {b:.0} B RSS each"))
    ));
    Ok(Growth {
        count: n,
        secs: open_secs,
        rss_before: before,
        rss_after: after,
    })
}

/// Opens sessions until a handshake fails or `bound` are open, then checks that all of
/// them still answer.
pub async fn max_sessions(
    addr: SocketAddr,
    pid: Option<u32>,
    bound: usize,
    progress: &Progress,
) -> BenchResult<MaxSessionsOutcome> {
    let fd = proc::raise_nofile_limit();
    let keepalive = Keepalive::start();
    let mut clients: Vec<Arc<RawClient>> = Vec::new();
    let mut stopped_by = "bound reached".to_string();
    // In chunks, so that the keepalive covers sessions opened early.
    while clients.len() < bound {
        let chunk = (bound - clients.len()).min(1000);
        let r = pool::connect_many_within(
            addr,
            chunk,
            pool::CONNECT_CONCURRENCY,
            Duration::from_secs(5),
            &Progress::silent(),
        )
        .await;
        let (more, err) = match r {
            Ok(c) => (c, None),
            Err((c, e)) => (c, Some(e)),
        };
        keepalive.add(&more);
        clients.extend(more);
        progress.tick(|| format!("{} sessions open", clients.len()));
        if let Some(e) = err {
            stopped_by = describe_connect_error(&e);
            break;
        }
    }
    let server_fds_open = pid.and_then(proc::open_fds_of);
    let server_fd_limit = pid.and_then(proc::process_nofile_limit);
    let opened = clients.len();
    let alive = {
        let _p = keepalive.pause().await;
        pool::ping_all(&clients, Duration::from_secs(60)).await
    };
    keepalive.clear();
    pool::close_all(&clients, Duration::from_secs(60)).await;
    drop(clients);
    progress.say(format!(
        "{opened} concurrent sessions ({alive} answered a ping); stopped by: {stopped_by}"
    ));
    Ok(MaxSessionsOutcome {
        opened: alive.min(opened),
        bound,
        stopped_by,
        fd,
        server_fd_limit,
        server_fds_open,
    })
}

fn describe_connect_error(e: &ClientError) -> String {
    match e {
        ClientError::Io(io) if io.raw_os_error() == Some(libc::EMFILE) => {
            "bench process out of file descriptors (EMFILE)".into()
        }
        ClientError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            "handshake timed out (server not accepting)".into()
        }
        ClientError::Io(io) => format!("i/o error: {io}"),
        ClientError::Closed => "server closed the connection during the handshake".into(),
        ClientError::Rejected => "server rejected the session".into(),
    }
}

/// Everything against a server the bench does not manage (no start-up figure).
pub async fn run_external(
    addr: SocketAddr,
    pid: Option<u32>,
    p: &Params,
    progress: &Progress,
) -> BenchResult<Outcome> {
    let idle_rss = rss(pid)?;
    let mut outs = Vec::new();
    for &n in &p.znodes {
        outs.push(znodes(addr, pid, n, p.znode_size, p.settle, true, progress).await?);
    }
    let sessions = idle_sessions(addr, pid, p.sessions, p.settle, progress).await?;
    let max_sessions = max_sessions(addr, pid, p.max_sessions, progress).await?;
    Ok(Outcome {
        startup: Vec::new(),
        idle_rss,
        znodes: outs,
        sessions,
        max_sessions,
    })
}

/// Everything against fresh servers of `spec`: one per measurement, so that one step's
/// leftovers do not skew the next.
pub async fn run_spawned(
    spec: &ServerSpec,
    p: &Params,
    progress: &Progress,
) -> BenchResult<Outcome> {
    let limit = Duration::from_secs(60);
    let startup = startup(spec, p.startups, progress).await?;

    let server = spec.start(limit).await?;
    let idle = idle_rss(server.pid(), p.settle).await?;
    progress.say(format!(
        "idle RSS {:.1} MiB",
        idle as f64 / (1 << 20) as f64
    ));
    drop(server);
    let mut outs = Vec::new();
    for &n in &p.znodes {
        let server = spec.start(limit).await?;
        tokio::time::sleep(p.settle).await;
        let pid = Some(server.pid());
        outs.push(
            znodes(
                server.addr(),
                pid,
                n,
                p.znode_size,
                p.settle,
                false,
                progress,
            )
            .await?,
        );
        drop(server);
    }

    let server = spec.start(limit).await?;
    tokio::time::sleep(p.settle).await;
    let sessions = idle_sessions(
        server.addr(),
        Some(server.pid()),
        p.sessions,
        p.settle,
        progress,
    )
    .await?;
    drop(server);

    let server = spec.start(limit).await?;
    let max_sessions =
        max_sessions(server.addr(), Some(server.pid()), p.max_sessions, progress).await?;
    drop(server);
    Ok(Outcome {
        startup,
        idle_rss: Some(idle),
        znodes: outs,
        sessions,
        max_sessions,
    })
}
