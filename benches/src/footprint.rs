//! Footprint: start-up time, idle memory, memory per znode, per idle session and per watch
//! (and how much of the watches' memory is given back once their session ends), and how many
//! concurrent sessions a server accepts.

use std::collections::VecDeque;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use zkd_protocol::{PathWatchRequest, Request, StatResponse};
use zkd_testkit::raw::{ClientError, RawClient};

use crate::pool::{self, Keepalive};
use crate::proc::{self, FdLimits};
use crate::progress::Progress;
use crate::servers::{ServerProcess, ServerSpec};
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
    /// Exists-watches on absent paths one session sets (0: the step is skipped).
    pub watches: usize,
    /// Wait before reading RSS after a step.
    pub settle: Duration,
    /// Times the start-ups in a fresh child process (`None`: in this process).
    pub timer: Option<StartupTimer>,
}

/// The `zkd-bench` binary re-executed with [`TIMER_COMMAND`] to time start-ups, and the
/// flags that describe the servers to it (`--zkd-bin`, `--zk-heap-mb`, ...).
///
/// Why a child process: spawning a server forks the spawning process, and a fork copies the
/// page tables of all its resident memory. After the session steps the bench holds ~140 MiB
/// (freed by the allocator, still resident), which made every later fork, and so every later
/// start-up figure, ~5 ms slower (3.8 ms before, 9–13 ms after, on zkd). A fresh child of a
/// few MiB spawns every server, in every round, from the same state.
#[derive(Debug, Clone, PartialEq)]
pub struct StartupTimer {
    pub bin: PathBuf,
    pub spawn_args: Vec<String>,
}

/// The hidden subcommand of `zkd-bench` that times start-ups for its parent.
pub const TIMER_COMMAND: &str = "startup-timer";

/// What the child prints per start-up, followed by the nanoseconds.
const STARTUP_LINE: &str = "start-up ns ";

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
    /// The watches step, when [`Params::watches`] is not 0.
    pub watches: Option<WatchRelease>,
}

/// One session setting exists-watches and then ending: the RSS growth per watch, and how the
/// RSS comes back down afterwards.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchRelease {
    pub growth: Growth,
    /// RSS [`RELEASE_WAIT`] after the watching session ended.
    pub rss_released: Option<u64>,
    /// How long after the session ended the RSS was first within [`RELEASE_MARGIN`] of the
    /// RSS before the watches (`None`: not within [`RELEASE_WATCH_FOR`]).
    pub back_within_margin: Option<Duration>,
}

impl WatchRelease {
    /// RSS still held [`RELEASE_WAIT`] after the session ended, above the RSS before the
    /// watches.
    pub fn held_after_release(&self) -> Option<f64> {
        Some(self.rss_released? as f64 - self.growth.rss_before? as f64)
    }
}

/// When the RSS after the watching session ended is read.
pub const RELEASE_WAIT: Duration = Duration::from_secs(5);
/// How close to the RSS before the watches counts as given back.
pub const RELEASE_MARGIN: u64 = 20 << 20;
/// How long the RSS is watched for coming back within [`RELEASE_MARGIN`].
pub const RELEASE_WATCH_FOR: Duration = Duration::from_secs(10);

fn per(before: Option<u64>, after: Option<u64>, n: usize) -> Option<f64> {
    let (b, a) = (before?, after?);
    Some((a as f64 - b as f64) / n.max(1) as f64)
}

fn rss(pid: Option<u32>) -> BenchResult<Option<u64>> {
    pid.map(proc::rss_bytes)
        .transpose()
        .map_err(|e| format!("reading RSS: {e}"))
}

/// Times `samples` start-ups of `spec` (spawn until the first successful handshake); the
/// server of the last start-up is returned still running (idle, its one session closed).
pub async fn startup(
    spec: &ServerSpec,
    samples: usize,
    progress: &Progress,
) -> BenchResult<(Vec<Duration>, ServerProcess)> {
    let mut out = Vec::new();
    loop {
        let server = spec.start(Duration::from_secs(60)).await?;
        out.push(server.startup());
        progress.say(format!(
            "start-up {}/{samples}: {:.1} ms",
            out.len(),
            server.startup().as_secs_f64() * 1e3
        ));
        if out.len() >= samples.max(1) {
            return Ok((out, server));
        }
    }
}

/// The child's side of [`StartupTimer`]: times `samples` start-ups of `spec` and prints one
/// [`STARTUP_LINE`] per start-up; the servers are stopped again.
pub async fn time_startups_for_parent(spec: &ServerSpec, samples: usize) -> BenchResult<()> {
    let (times, server) = startup(spec, samples, &Progress::silent()).await?;
    drop(server);
    let mut out = std::io::stdout().lock();
    for t in times {
        writeln!(out, "{STARTUP_LINE}{}", t.as_nanos()).map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}

/// Times `samples` start-ups of `spec` in a fresh child process run by `timer`.
async fn startup_in_child(
    timer: &StartupTimer,
    spec: &ServerSpec,
    samples: usize,
    progress: &Progress,
) -> BenchResult<Vec<Duration>> {
    let mut cmd = Command::new(&timer.bin);
    cmd.arg(TIMER_COMMAND)
        .arg("--server")
        .arg(spec.kind().label())
        .arg("--samples")
        .arg(samples.to_string())
        .args(&timer.spawn_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::servers::kill_with_parent(&mut cmd);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .map_err(|e| format!("start-up timer: {e}"))?
        .map_err(|e| format!("cannot run {}: {e}", timer.bin.display()))?;
    if !out.status.success() {
        return Err(format!(
            "start-up timer failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let times = parse_startup_lines(&text)?;
    if times.len() != samples.max(1) {
        return Err(format!(
            "start-up timer printed {} start-ups, {} expected",
            times.len(),
            samples.max(1)
        ));
    }
    for (i, t) in times.iter().enumerate() {
        progress.say(format!(
            "start-up {}/{}: {:.1} ms",
            i + 1,
            times.len(),
            t.as_secs_f64() * 1e3
        ));
    }
    Ok(times)
}

/// The start-ups of the timer child's output.
fn parse_startup_lines(text: &str) -> BenchResult<Vec<Duration>> {
    text.lines()
        .filter_map(|l| l.strip_prefix(STARTUP_LINE))
        .map(|n| {
            n.trim()
                .parse::<u64>()
                .map(Duration::from_nanos)
                .map_err(|e| format!("start-up timer line {n:?}: {e}"))
        })
        .collect()
}

/// RSS of a freshly started, idle server (after one handshake and `settle`).
pub async fn idle_rss(pid: u32, settle: Duration) -> BenchResult<u64> {
    tokio::time::sleep(settle).await;
    proc::rss_bytes(pid).map_err(|e| format!("reading RSS: {e}"))
}

/// Sessions that create the znodes side by side (a server may serve one session's requests
/// strictly one after another), with [`CREATES_IN_FLIGHT`] requests in flight in all.
pub const CREATE_SESSIONS: usize = 8;
/// Create requests in flight over all [`CREATE_SESSIONS`] together.
pub const CREATES_IN_FLIGHT: usize = 1000;

/// Grows one tree of znodes of `size` bytes through `counts` (ascending) and measures the
/// RSS growth from the empty tree to each count, read `settle` after its last create (so
/// 100 000 and then 1 000 000 on one server give the same figures as two fresh servers, for
/// the time of the larger alone). Creates go over [`CREATE_SESSIONS`] sessions, keeping
/// [`CREATES_IN_FLIGHT`] in flight; the parent's `numChildren` is checked at every count.
/// With `cleanup` the nodes are deleted again.
pub async fn znodes(
    addr: SocketAddr,
    pid: Option<u32>,
    counts: &[usize],
    size: usize,
    settle: Duration,
    cleanup: bool,
    progress: &Progress,
) -> BenchResult<Vec<Growth>> {
    let limit = Duration::from_secs(60);
    let (admin, parent) = session_with_node(addr, "znodes", None, limit, "the parent").await?;
    // The session that made the parent creates too, so none sits idle long enough to expire.
    let mut creators = vec![admin];
    for _ in 1..CREATE_SESSIONS {
        creators.push(
            RawClient::connect(addr, pool::SESSION_TIMEOUT_MS)
                .await
                .map_err(|e| format!("connecting to {addr}: {e}"))?,
        );
    }
    let before = rss(pid)?;
    let data = Bytes::from(vec![b'z'; size]);
    let path = |i: usize| format!("{parent}/z-{i:07}");
    let mut out = Vec::new();
    let (mut made, mut create_secs) = (0, 0.0);
    for &count in counts {
        let t0 = Instant::now();
        spread(&creators, made..count, limit, "create", 0, progress, |i| {
            create(&path(i), Some(data.clone()), 0)
        })
        .await?;
        create_secs += t0.elapsed().as_secs_f64();
        made = made.max(count);
        let stat = call_ok(
            &creators[0],
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
        if stat.stat.num_children as usize != made {
            return Err(format!(
                "{} children after {made} creates",
                stat.stat.num_children
            ));
        }
        tokio::time::sleep(settle).await;
        let after = rss(pid)?;
        progress.say(format!(
            "{count} znodes of {size} B created in {create_secs:.2} s{}",
            per(before, after, count).map_or(String::new(), |b| format!(", {b:.0} B RSS each"))
        ));
        out.push(Growth {
            count,
            secs: create_secs,
            rss_before: before,
            rss_after: after,
        });
    }
    if cleanup {
        spread(&creators, 0..made, limit, "delete", 0, progress, |i| {
            delete(path(i))
        })
        .await?;
        let _ = call_ok(&creators[0], &delete(parent), limit, "delete").await;
    }
    for c in creators {
        let _ = c.close().await;
    }
    Ok(out)
}

/// Sends `request(i)` for every `i` of `range`, dealt round-robin over `clients`, each
/// session keeping its share of [`CREATES_IN_FLIGHT`] in flight; every reply must be OK.
async fn spread(
    clients: &[RawClient],
    range: std::ops::Range<usize>,
    limit: Duration,
    what: &str,
    expect_err: i32,
    progress: &Progress,
    request: impl Fn(usize) -> Request,
) -> BenchResult<()> {
    let k = clients.len().max(1);
    let window = (CREATES_IN_FLIGHT / k).max(1);
    let done = AtomicUsize::new(0);
    let (done, request) = (&done, &request);
    let runs = clients.iter().enumerate().map(|(j, c)| {
        let reqs = range.clone().skip(j).step_by(k).map(request);
        pipeline(c, reqs, window, limit, what, expect_err, done, progress)
    });
    futures_util::future::try_join_all(runs).await.map(|_| ())
}

/// Sends `reqs` on one session keeping `window` in flight; every reply must carry
/// `expect_err` (0: OK).
#[allow(clippy::too_many_arguments)]
async fn pipeline(
    client: &RawClient,
    reqs: impl Iterator<Item = Request>,
    window: usize,
    limit: Duration,
    what: &str,
    expect_err: i32,
    done: &AtomicUsize,
    progress: &Progress,
) -> BenchResult<()> {
    let mut inflight = VecDeque::with_capacity(window);
    let check = |r: Result<Result<zkd_testkit::raw::Reply, _>, _>| -> BenchResult<()> {
        let reply = r
            .map_err(|_| format!("{what}: no reply within {limit:?}"))?
            .map_err(|_| format!("{what}: connection closed"))?;
        if reply.err != expect_err {
            return Err(format!("{what}: error {}", reply.err));
        }
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        progress.tick(|| format!("{what}: {n} done"));
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

/// Opens `n` idle sessions and measures the RSS growth (read `settle` after the last
/// handshake, then every session must answer a ping); then, on the same server, keeps
/// opening sessions until a handshake fails or `bound` are open, and checks that all of
/// them still answer.
pub async fn sessions(
    addr: SocketAddr,
    pid: Option<u32>,
    n: usize,
    bound: usize,
    settle: Duration,
    progress: &Progress,
) -> BenchResult<(Growth, MaxSessionsOutcome)> {
    let fd = proc::raise_nofile_limit();
    let before = rss(pid)?;
    let keepalive = Keepalive::start();
    let t0 = Instant::now();
    let mut clients = pool::connect_many(addr, n, pool::CONNECT_CONCURRENCY, progress)
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
    if alive != n {
        keepalive.clear();
        pool::close_all(&clients, Duration::from_secs(30)).await;
        return Err(format!("only {alive} of {n} idle sessions answered a ping"));
    }
    progress.say(format!(
        "{n} idle sessions opened in {open_secs:.2} s{}",
        per(before, after, n).map_or(String::new(), |b| format!(", {b:.0} B RSS each"))
    ));
    let growth = Growth {
        count: n,
        secs: open_secs,
        rss_before: before,
        rss_after: after,
    };

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
    let max = MaxSessionsOutcome {
        opened: alive.min(opened),
        bound,
        stopped_by,
        fd,
        server_fd_limit,
        server_fds_open,
    };
    Ok((growth, max))
}

/// ZooKeeper's NONODE error code: the reply to an exists on an absent path.
const NONODE: i32 = -101;

/// One session sets `n` exists-watches on distinct absent paths (pipelined, [`CREATES_IN_FLIGHT`]
/// in flight) and the RSS growth is read `settle` later; then the session is closed and the
/// RSS is read every 100 ms for [`RELEASE_WATCH_FOR`]: when it first comes within
/// [`RELEASE_MARGIN`] of the RSS before the watches, and what it is at [`RELEASE_WAIT`].
pub async fn watches(
    addr: SocketAddr,
    pid: Option<u32>,
    n: usize,
    settle: Duration,
    progress: &Progress,
) -> BenchResult<WatchRelease> {
    let limit = Duration::from_secs(60);
    let client = RawClient::connect(addr, pool::SESSION_TIMEOUT_MS)
        .await
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    tokio::time::sleep(settle).await;
    let before = rss(pid)?;
    let t0 = Instant::now();
    spread(
        std::slice::from_ref(&client),
        0..n,
        limit,
        "exists-watch",
        NONODE,
        progress,
        |i| {
            Request::Exists(PathWatchRequest {
                path: format!("/absent-watched/w-{i:07}"),
                watch: true,
            })
        },
    )
    .await?;
    let secs = t0.elapsed().as_secs_f64();
    tokio::time::sleep(settle).await;
    let after = rss(pid)?;
    progress.say(format!(
        "{n} exists-watches set in {secs:.2} s{}",
        per(before, after, n).map_or(String::new(), |b| format!(", {b:.0} B RSS each"))
    ));
    client
        .close()
        .await
        .map_err(|e| format!("closing the watching session: {e}"))?;
    let ended = Instant::now();
    let (mut back, mut released) = (None, None);
    // Without the server's pid there is no RSS to watch.
    while pid.is_some() && ended.elapsed() < RELEASE_WATCH_FOR.max(RELEASE_WAIT) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = rss(pid)?;
        if let (None, Some(b), Some(r)) = (back, before, now) {
            if r <= b + RELEASE_MARGIN {
                back = Some(ended.elapsed());
            }
        }
        if released.is_none() && ended.elapsed() >= RELEASE_WAIT {
            released = now;
        }
        if back.is_some() && released.is_some() {
            break;
        }
    }
    let mib = |v: u64| v as f64 / (1 << 20) as f64;
    progress.say(format!(
        "watching session ended: RSS {} MiB after {:.0} s ({} MiB before the watches), within {} MiB of it after {}",
        released.map_or("n/a".into(), |r| format!("{:.1}", mib(r))),
        RELEASE_WAIT.as_secs_f64(),
        before.map_or("n/a".into(), |b| format!("{:.1}", mib(b))),
        RELEASE_MARGIN >> 20,
        back.map_or(format!("more than {:.0} s", RELEASE_WATCH_FOR.as_secs_f64()), |d| {
            format!("{:.1} s", d.as_secs_f64())
        }),
    ));
    Ok(WatchRelease {
        growth: Growth {
            count: n,
            secs,
            rss_before: before,
            rss_after: after,
        },
        rss_released: released,
        back_within_margin: back,
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
    let counts = ascending(&p.znodes);
    let znodes = znodes(addr, pid, &counts, p.znode_size, p.settle, true, progress).await?;
    let (sessions, max_sessions) =
        sessions(addr, pid, p.sessions, p.max_sessions, p.settle, progress).await?;
    let watches = match p.watches {
        0 => None,
        n => Some(watches(addr, pid, n, p.settle, progress).await?),
    };
    Ok(Outcome {
        startup: Vec::new(),
        idle_rss,
        znodes,
        sessions,
        max_sessions,
        watches,
    })
}

/// Everything against fresh servers of `spec`: the start-ups (in a fresh child process when
/// `p.timer` names one), then the last start-up's server (or, with a timer, one more fresh
/// server), idle, gives the idle RSS and then grows the tree through every size; a second fresh server takes the
/// idle sessions and then the concurrent-sessions probe; a third the watches. No step
/// follows one that could leave something behind on the same server.
pub async fn run_spawned(
    spec: &ServerSpec,
    p: &Params,
    progress: &Progress,
) -> BenchResult<Outcome> {
    let (startup, server) = match &p.timer {
        Some(timer) => {
            let times = startup_in_child(timer, spec, p.startups, progress).await?;
            (times, spec.start(Duration::from_secs(60)).await?)
        }
        None => startup(spec, p.startups, progress).await?,
    };
    let idle = idle_rss(server.pid(), p.settle).await?;
    progress.say(format!(
        "idle RSS {:.1} MiB",
        idle as f64 / (1 << 20) as f64
    ));
    let pid = Some(server.pid());
    let counts = ascending(&p.znodes);
    let znodes = znodes(
        server.addr(),
        pid,
        &counts,
        p.znode_size,
        p.settle,
        false,
        progress,
    )
    .await?;
    drop(server);

    let server = spec.start(Duration::from_secs(60)).await?;
    tokio::time::sleep(p.settle).await;
    let (sessions, max_sessions) = sessions(
        server.addr(),
        Some(server.pid()),
        p.sessions,
        p.max_sessions,
        p.settle,
        progress,
    )
    .await?;
    drop(server);

    let watches = match p.watches {
        0 => None,
        n => {
            let server = spec.start(Duration::from_secs(60)).await?;
            let w = watches(server.addr(), Some(server.pid()), n, p.settle, progress).await?;
            drop(server);
            Some(w)
        }
    };
    Ok(Outcome {
        startup,
        idle_rss: Some(idle),
        znodes,
        sessions,
        max_sessions,
        watches,
    })
}

/// Tree sizes in ascending order, without repeats.
fn ascending(counts: &[usize]) -> Vec<usize> {
    let mut v = counts.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_lines_are_read_and_others_ignored() {
        let text = "noise\nstart-up ns 3800000\nstart-up ns 12\n";
        assert_eq!(
            parse_startup_lines(text),
            Ok(vec![
                Duration::from_nanos(3_800_000),
                Duration::from_nanos(12)
            ])
        );
        assert!(parse_startup_lines("start-up ns x\n").is_err());
    }
}
