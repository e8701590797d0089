//! Leader election under repeated leader failure, two ways:
//!
//! * `herd`: every candidate watches the election node's children (getChildren with a
//!   watch) and re-reads them on every NodeChildrenChanged — each failure wakes everyone;
//! * `predecessor`: each candidate watches (exists with a watch) only the node just before
//!   its own and re-reads the children only when that node goes — each failure wakes one.
//!
//! Every candidate is a session holding an ephemeral-sequential node under a fresh election
//! node; the lowest sequence number leads. The leader then fails several times in a row
//! (deletes its node, or closes its session). Per failure the bench reports how long until the
//! next candidate knows it leads, how long until every candidate is quiet again, and how many
//! notifications, requests and server bytes the failure cost. It checks that exactly the
//! right candidate takes over and that every notification due arrives exactly once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use zkd_protocol::{event_type, CreateMode, CreateResponse, ErrorCode, PathWatchRequest, Request};
use zkd_testkit::raw::{Event, RawClient};

use crate::pool::{self, Keepalive, Totals};
use crate::progress::Progress;
use crate::util::{create, delete, ms, session_with_node, BenchResult};

/// How candidates watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Mode {
    /// Everyone watches the children of the election node.
    Herd,
    /// Each watches only its predecessor.
    Predecessor,
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::Herd => "herd",
            Mode::Predecessor => "predecessor",
        }
    }
}

/// How the leader fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Failure {
    /// The leader deletes its own node (its session stays).
    Delete,
    /// The leader closes its session (the server removes the ephemeral node).
    Close,
}

/// One herd run.
#[derive(Debug, Clone)]
pub struct Params {
    /// Number of candidate sessions.
    pub n: usize,
    pub mode: Mode,
    /// Leader failures in a row (at most n − 1).
    pub failures: usize,
    pub failure: Failure,
    /// After everything looks quiet, how long to keep watching for stray notifications.
    pub settle: Duration,
    /// Longest wait for one failure (or the set-up) to quiet down.
    pub timeout: Duration,
    /// Server process, for CPU time per failure.
    pub pid: Option<u32>,
}

/// What one leader failure cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailureStats {
    /// From the failure request until the next candidate learned that it leads.
    pub leader_known: Duration,
    /// From the failure request until the last reply or notification any candidate handled.
    pub quiet: Duration,
    /// Watch notifications the server sent (to all sessions).
    pub notifications: u64,
    /// Requests sent (the failure request and every candidate re-read / re-watch).
    pub requests: u64,
    /// Bytes the server sent (frames with their length prefix).
    pub bytes: u64,
    /// Server CPU time (user + system) from the failure until quiet (the settle time
    /// after it is not counted).
    pub server_cpu: Option<Duration>,
}

/// The result of a run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub n: usize,
    pub mode: Mode,
    /// Connecting, creating the nodes and arming the first watches.
    pub setup: Duration,
    pub failures: Vec<FailureStats>,
}

/// State the candidates and the coordinator share.
struct Shared {
    base: Instant,
    /// Nanoseconds since `base` of the last reply or notification a candidate handled.
    last_activity: AtomicU64,
    /// Candidates blocked waiting for a notification (or for the stop signal).
    waiting: AtomicUsize,
    /// Notifications handled by candidates, in total and per rank.
    handled: AtomicU64,
    handled_by: Vec<AtomicU64>,
    /// Children count each candidate saw in its latest read.
    seen_children: Vec<AtomicUsize>,
    /// (rank, ns since base) of every leadership claim, in order.
    claims: Mutex<Vec<(usize, u64)>>,
    errors: Mutex<Vec<String>>,
}

impl Shared {
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn touch(&self) {
        self.last_activity.fetch_max(self.now(), Ordering::SeqCst);
    }

    fn error(&self, msg: String) {
        if let Ok(mut e) = self.errors.lock() {
            e.push(msg);
        }
    }

    fn first_error(&self) -> Option<String> {
        self.errors.lock().ok().and_then(|e| e.first().cloned())
    }
}

/// The part of a children list a candidate needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    pub count: usize,
    /// Lowest sequence number.
    pub min: Option<u64>,
    /// Highest sequence number below `own`.
    pub pred: Option<u64>,
    pub has_own: bool,
}

/// Scans a getChildren reply body (vector of names) without building strings: the
/// sequence number is the 10-digit suffix of each name.
pub fn scan_children(body: &[u8], own: u64) -> Option<View> {
    let mut pos = 0;
    let int = |pos: &mut usize| -> Option<i32> {
        let b = body.get(*pos..*pos + 4)?;
        *pos += 4;
        Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let n = int(&mut pos)?;
    let mut v = View {
        count: n.max(0) as usize,
        min: None,
        pred: None,
        has_own: false,
    };
    for _ in 0..n.max(0) {
        let len = int(&mut pos)?;
        let len = usize::try_from(len).ok()?;
        let name = body.get(pos..pos + len)?;
        pos += len;
        let Some(seq) = sequence_of(name) else {
            continue;
        };
        v.min = Some(v.min.map_or(seq, |m| m.min(seq)));
        if seq == own {
            v.has_own = true;
        } else if seq < own {
            v.pred = Some(v.pred.map_or(seq, |p| p.max(seq)));
        }
    }
    Some(v)
}

/// The sequence number a sequential node's name ends with.
pub fn sequence_of(name: &[u8]) -> Option<u64> {
    let digits = name.get(name.len().checked_sub(10)?..)?;
    let mut v = 0u64;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(d - b'0');
    }
    Some(v)
}

struct Candidate {
    rank: usize,
    seq: u64,
    path: String,
    client: Arc<RawClient>,
}

/// Runs the election benchmark against `addr`.
pub async fn run(addr: SocketAddr, p: &Params, progress: &Progress) -> BenchResult<Outcome> {
    if p.n < 2 {
        return Err("herd needs at least 2 candidates".into());
    }
    if p.failures >= p.n {
        return Err(format!(
            "{} failures need more than {} candidates",
            p.failures, p.n
        ));
    }
    let (admin, parent) =
        session_with_node(addr, "herd", None, p.timeout, "the election node").await?;
    let admin = Arc::new(admin);
    let keepalive = Keepalive::start();
    keepalive.add(std::slice::from_ref(&admin));
    let mut run = Run {
        clients: Vec::new(),
        closed: 0,
        stops: Vec::new(),
        tasks: Vec::new(),
    };
    let result = run.go(addr, p, &parent, &keepalive, progress).await;
    // Tear down whatever happened: stop the candidates, close their sessions, remove the node.
    for t in &run.tasks {
        t.abort();
    }
    // Sessions the leaders closed themselves are gone: a request on them would get no reply.
    pool::close_all(&run.clients[run.closed..], Duration::from_secs(30)).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), admin.call(&delete(parent))).await;
    pool::close_all(&[admin], Duration::from_secs(5)).await;
    result
}

struct Run {
    /// By rank.
    clients: Vec<Arc<RawClient>>,
    /// Ranks below this closed their sessions.
    closed: usize,
    stops: Vec<Option<oneshot::Sender<()>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Run {
    // Failure k concerns rank k in several parallel vectors.
    #[allow(clippy::needless_range_loop)]
    async fn go(
        &mut self,
        addr: SocketAddr,
        p: &Params,
        parent: &str,
        keepalive: &Keepalive,
        progress: &Progress,
    ) -> BenchResult<Outcome> {
        let t_setup = Instant::now();
        let clients = match pool::connect_many(addr, p.n, pool::CONNECT_CONCURRENCY, progress).await
        {
            Ok(c) => c,
            Err((opened, e)) => {
                self.clients = opened;
                return Err(format!(
                    "opening {} sessions failed after {}: {e}",
                    p.n,
                    self.clients.len()
                ));
            }
        };
        keepalive.add(&clients);
        self.clients = clients.clone();

        // Every candidate creates its node (pipelined across sessions).
        progress.say(format!("creating {} candidate nodes", p.n));
        let prefix = format!("{parent}/c-");
        let mut pending = Vec::with_capacity(p.n);
        for c in &clients {
            let req = create(&prefix, None, CreateMode::EphemeralSequential.flags());
            pending.push(c.send(&req).await.map_err(|e| format!("create: {e}"))?);
        }
        let mut cands = Vec::with_capacity(p.n);
        for (c, rx) in clients.iter().zip(pending) {
            let reply = tokio::time::timeout(p.timeout, rx)
                .await
                .map_err(|_| "create: no reply".to_string())?
                .map_err(|_| "create: connection closed".to_string())?;
            if reply.err != 0 {
                return Err(format!("create: error code {}", reply.err));
            }
            let path = reply
                .decode::<CreateResponse>()
                .map_err(|e| format!("create reply: {e}"))?
                .path;
            let seq = sequence_of(path.as_bytes())
                .ok_or_else(|| format!("created node {path:?} has no sequence number"))?;
            cands.push(Candidate {
                rank: 0,
                seq,
                path,
                client: c.clone(),
            });
        }
        cands.sort_by_key(|c| c.seq);
        for (i, c) in cands.iter_mut().enumerate() {
            c.rank = i;
        }
        self.clients = cands.iter().map(|c| c.client.clone()).collect();

        let shared = Arc::new(Shared {
            base: Instant::now(),
            last_activity: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
            handled: AtomicU64::new(0),
            handled_by: (0..p.n).map(|_| AtomicU64::new(0)).collect(),
            seen_children: (0..p.n).map(|_| AtomicUsize::new(0)).collect(),
            claims: Mutex::new(Vec::new()),
            errors: Mutex::new(Vec::new()),
        });
        let parent: Arc<str> = parent.into();
        let mut paths = Vec::with_capacity(p.n);
        for c in cands {
            let Some(events) = c.client.events() else {
                return Err("notification stream already taken".into());
            };
            let (stop_tx, stop_rx) = oneshot::channel();
            self.stops.push(Some(stop_tx));
            paths.push(c.path.clone());
            self.tasks.push(tokio::spawn(candidate(
                c,
                parent.clone(),
                p.mode,
                p.timeout,
                shared.clone(),
                events,
                stop_rx,
            )));
        }

        // Set-up is done when every candidate has read the children and armed its watch.
        progress.say("arming watches");
        {
            let _pause = keepalive.pause().await;
            let base = Totals::of(&self.clients);
            wait_quiet(&shared, &self.clients, p.n, 0, base.events, 0, p, progress).await?;
            let extra = Totals::of(&self.clients).events - base.events;
            if extra != 0 {
                return Err(format!(
                    "{extra} notifications during set-up, none expected"
                ));
            }
        }
        let claims = take_claims(&shared);
        if claims.iter().map(|c| c.0).collect::<Vec<_>>() != [0] {
            return Err(format!(
                "after set-up the leaders are ranks {:?}, expected exactly [0]",
                claims.iter().map(|c| c.0).collect::<Vec<_>>()
            ));
        }
        let setup = t_setup.elapsed();
        progress.say(format!("set-up took {:.2} s", setup.as_secs_f64()));

        let mut failures = Vec::new();
        let mut last_sweep: Option<Instant> = None;
        for k in 0..p.failures {
            let _pause = keepalive.pause().await;
            // Every live session has been heard from recently: none can expire in the window.
            // (Between failures the keepalive task pings too.)
            if last_sweep.is_none_or(|t| t.elapsed() > pool::KEEPALIVE_EVERY) {
                pool::ping_all(&self.clients[k..], Duration::from_secs(30)).await;
                last_sweep = Some(Instant::now());
            }

            // The leader stops acting as a candidate, then fails.
            if let Some(stop) = self.stops[k].take() {
                let _ = stop.send(());
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.tasks[k]).await;
            let alive = p.n - k - 1;
            let survivors = &self.clients[k + 1..];
            let before_all = Totals::of(&self.clients);
            let before_survivors = Totals::of(survivors);
            let handled_before: Vec<u64> = shared
                .handled_by
                .iter()
                .map(|h| h.load(Ordering::SeqCst))
                .collect();
            shared.handled.store(0, Ordering::SeqCst);
            let cpu0 = p.pid.and_then(|pid| crate::proc::CpuSample::take(pid).ok());
            let t0 = shared.now();
            shared.last_activity.store(t0, Ordering::SeqCst);
            let leader = &self.clients[k];
            let req = match p.failure {
                Failure::Delete => delete(paths[k].clone()),
                Failure::Close => Request::CloseSession,
            };
            let fail_rx = leader
                .send(&req)
                .await
                .map_err(|e| format!("failure request: {e}"))?;
            if p.failure == Failure::Close {
                self.closed = k + 1;
            }

            let (due_handled, due_delivered) = match p.mode {
                Mode::Herd => (alive as u64, alive as u64),
                Mode::Predecessor => (1, 1),
            };
            let cpu1 = wait_quiet(
                &shared,
                survivors,
                alive,
                due_handled,
                before_survivors.events,
                due_delivered,
                p,
                progress,
            )
            .await
            .map_err(|e| format!("failure {}: {e}", k + 1))?;
            let reply = tokio::time::timeout(p.timeout, fail_rx)
                .await
                .map_err(|_| format!("failure {}: no reply to the failure request", k + 1))?
                .map_err(|_| format!("failure {}: connection closed before the reply", k + 1))?;
            if reply.err != 0 {
                return Err(format!(
                    "failure {}: the failure request got error {}",
                    k + 1,
                    reply.err
                ));
            }
            let quiet_at = shared.last_activity.load(Ordering::SeqCst);
            let delta = Totals::of(&self.clients).minus(before_all);

            // Exactly the next candidate leads; each due notification arrived exactly once.
            let claims = take_claims(&shared);
            let ranks: Vec<usize> = claims.iter().map(|c| c.0).collect();
            if ranks != [k + 1] {
                return Err(format!(
                    "failure {}: new leaders are ranks {ranks:?}, expected exactly [{}]",
                    k + 1,
                    k + 1
                ));
            }
            for r in k + 1..p.n {
                let got = shared.handled_by[r].load(Ordering::SeqCst) - handled_before[r];
                let due = match p.mode {
                    Mode::Herd => 1,
                    Mode::Predecessor => u64::from(r == k + 1),
                };
                if got != due {
                    return Err(format!(
                        "failure {}: candidate of rank {r} handled {got} notifications, expected {due}",
                        k + 1
                    ));
                }
            }
            let want_children = p.n - k - 1;
            let check_ranks = match p.mode {
                Mode::Herd => k + 1..p.n,
                Mode::Predecessor => k + 1..k + 2,
            };
            for r in check_ranks {
                let seen = shared.seen_children[r].load(Ordering::SeqCst);
                if seen != want_children {
                    return Err(format!(
                        "failure {}: candidate of rank {r} read {seen} children after the notification, expected {want_children}",
                        k + 1
                    ));
                }
            }
            let stats = FailureStats {
                leader_known: Duration::from_nanos(claims[0].1.saturating_sub(t0)),
                quiet: Duration::from_nanos(quiet_at.saturating_sub(t0)),
                notifications: delta.events,
                requests: delta.requests,
                bytes: delta.bytes,
                server_cpu: crate::proc::CpuSample::between(cpu0, cpu1),
            };
            let (known, quiet) = (ms(stats.leader_known), ms(stats.quiet));
            let text = format!(
                "leader known {known:.3} ms, quiet {quiet:.3} ms, {} notifications, {} requests, {} bytes",
                stats.notifications, stats.requests, stats.bytes
            );
            progress.step("failure", k, p.failures, text);
            failures.push(stats);
        }
        for s in self.stops.iter_mut() {
            if let Some(s) = s.take() {
                let _ = s.send(());
            }
        }
        Ok(Outcome {
            n: p.n,
            mode: p.mode,
            setup,
            failures,
        })
    }
}

fn take_claims(shared: &Shared) -> Vec<(usize, u64)> {
    shared
        .claims
        .lock()
        .map(|mut c| std::mem::take(&mut *c))
        .unwrap_or_default()
}

/// Waits until `alive` candidates are all idle, they have handled `due_handled`
/// notifications and `clients` have received `due_delivered` beyond `events_before`, and
/// then nothing more happens for the settle time.
#[allow(clippy::too_many_arguments)]
async fn wait_quiet(
    shared: &Shared,
    clients: &[Arc<RawClient>],
    alive: usize,
    due_handled: u64,
    events_before: u64,
    due_delivered: u64,
    p: &Params,
    progress: &Progress,
) -> BenchResult<Option<crate::proc::CpuSample>> {
    let start = Instant::now();
    let delivered = || Totals::of(clients).events - events_before;
    loop {
        if let Some(e) = shared.first_error() {
            return Err(e);
        }
        let waiting = shared.waiting.load(Ordering::SeqCst);
        let handled = shared.handled.load(Ordering::SeqCst);
        if waiting == alive && handled >= due_handled && delivered() >= due_delivered {
            // The server's CPU time as of quiet, before the settle time is waited out.
            let cpu = p.pid.and_then(|pid| crate::proc::CpuSample::take(pid).ok());
            let seen = (
                shared.last_activity.load(Ordering::SeqCst),
                handled,
                delivered(),
            );
            tokio::time::sleep(p.settle).await;
            let now = (
                shared.last_activity.load(Ordering::SeqCst),
                shared.handled.load(Ordering::SeqCst),
                delivered(),
            );
            if now == seen && shared.waiting.load(Ordering::SeqCst) == alive {
                if handled != due_handled || now.2 != due_delivered {
                    return Err(format!(
                        "{handled} notifications handled and {} delivered, expected {due_handled} and {due_delivered}",
                        now.2
                    ));
                }
                return Ok(cpu);
            }
            continue;
        }
        if start.elapsed() > p.timeout {
            return Err(format!(
                "not quiet within {:?}: {waiting}/{alive} candidates idle, {handled}/{due_handled} notifications handled, {}/{due_delivered} delivered (lost notification?)",
                p.timeout,
                delivered()
            ));
        }
        progress.tick(|| {
            format!(
                "waiting: {waiting}/{alive} idle, {handled}/{due_handled} notifications handled"
            )
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// One candidate's election loop.
async fn candidate(
    c: Candidate,
    parent: Arc<str>,
    mode: Mode,
    limit: Duration,
    sh: Arc<Shared>,
    mut events: mpsc::UnboundedReceiver<Event>,
    mut stop: oneshot::Receiver<()>,
) {
    let Candidate {
        rank, seq, client, ..
    } = c;
    let mut claimed = false;
    let call = |req: Request| {
        let client = client.clone();
        let sh = sh.clone();
        async move {
            let r = tokio::time::timeout(limit, client.call(&req)).await;
            sh.touch();
            match r {
                Ok(Ok(reply)) => Some(reply),
                Ok(Err(e)) => {
                    sh.error(format!("candidate {rank}: {e}"));
                    None
                }
                Err(_) => {
                    sh.error(format!("candidate {rank}: no reply within {limit:?}"));
                    None
                }
            }
        }
    };
    loop {
        let list = Request::GetChildren(PathWatchRequest {
            path: parent.to_string(),
            watch: mode == Mode::Herd,
        });
        let Some(reply) = call(list).await else {
            return;
        };
        if reply.err != 0 {
            sh.error(format!("candidate {rank}: getChildren error {}", reply.err));
            return;
        }
        let Some(view) = scan_children(&reply.body, seq) else {
            sh.error(format!("candidate {rank}: undecodable children list"));
            return;
        };
        if !view.has_own {
            sh.error(format!(
                "candidate {rank}: its own node is missing from the children"
            ));
            return;
        }
        sh.seen_children[rank].store(view.count, Ordering::SeqCst);
        let leads = view.min == Some(seq);
        if leads && !claimed {
            claimed = true;
            let at = sh.now();
            if let Ok(mut c) = sh.claims.lock() {
                c.push((rank, at));
            }
            sh.touch();
        }
        let expect = match mode {
            Mode::Herd => Some((event_type::NODE_CHILDREN_CHANGED, parent.to_string())),
            Mode::Predecessor if leads => None,
            Mode::Predecessor => {
                let Some(pred) = view.pred else {
                    sh.error(format!(
                        "candidate {rank}: no predecessor but not the lowest"
                    ));
                    return;
                };
                let pred_path = format!("{parent}/c-{pred:010}");
                let exists = Request::Exists(PathWatchRequest {
                    path: pred_path.clone(),
                    watch: true,
                });
                let Some(reply) = call(exists).await else {
                    return;
                };
                if reply.err == ErrorCode::NoNode.code() {
                    // Gone between the two reads: look again.
                    continue;
                }
                if reply.err != 0 {
                    sh.error(format!("candidate {rank}: exists error {}", reply.err));
                    return;
                }
                Some((event_type::NODE_DELETED, pred_path))
            }
        };
        sh.waiting.fetch_add(1, Ordering::SeqCst);
        let event = match expect {
            // The leader has nothing to watch: it waits to be told to fail.
            None => {
                let _ = (&mut stop).await;
                sh.waiting.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            Some(_) => tokio::select! {
                biased;
                _ = &mut stop => {
                    sh.waiting.fetch_sub(1, Ordering::SeqCst);
                    return;
                }
                ev = events.recv() => ev,
            },
        };
        sh.waiting.fetch_sub(1, Ordering::SeqCst);
        sh.handled_by[rank].fetch_add(1, Ordering::SeqCst);
        sh.handled.fetch_add(1, Ordering::SeqCst);
        sh.touch();
        let Some(event) = event else {
            sh.error(format!("candidate {rank}: connection closed"));
            return;
        };
        if let Some((ty, path)) = expect {
            if event.event_type != ty || event.path != path {
                sh.error(format!(
                    "candidate {rank}: unexpected notification type {} for {:?} (expected type {ty} for {path:?})",
                    event.event_type, event.path
                ));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use zkd_protocol::{ChildrenResponse, Jute};

    #[test]
    fn scans_a_children_list() {
        let names = ["c-0000000007", "c-0000000003", "c-0000000010", "other"];
        let mut b = BytesMut::new();
        ChildrenResponse {
            children: names.iter().map(|s| s.to_string()).collect(),
        }
        .write(&mut b);
        let v = scan_children(&b, 10).unwrap();
        assert_eq!(
            v,
            View {
                count: 4,
                min: Some(3),
                pred: Some(7),
                has_own: true
            }
        );
        let v = scan_children(&b, 3).unwrap();
        assert_eq!(v.pred, None);
        assert_eq!(v.min, Some(3));
        assert!(scan_children(&b[..10], 3).is_none());
    }

    #[test]
    fn sequence_suffix() {
        assert_eq!(sequence_of(b"c-0000000042"), Some(42));
        assert_eq!(sequence_of(b"/a/b/c-0000000000"), Some(0));
        assert_eq!(sequence_of(b"short"), None);
        assert_eq!(sequence_of(b"c-00000x0042"), None);
    }
}
