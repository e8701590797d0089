//! Closed-loop throughput: C sessions, each keeping W requests in flight (pipelined), for a
//! fixed time after a warm-up. Reports operations per second, latency percentiles and — when
//! the server's pid is known — server CPU time per operation from /proc/PID/stat.
//!
//! Two load generators:
//! * `lean` (default): one task per session owns its socket; it reads whatever replies have
//!   arrived, issues the next request of each finished slot, and writes all of them in one
//!   write — the way a pipelining client batches its outgoing queue. The bench shares the
//!   machine with the server, so a cheap client leaves the server the CPU it is measured on.
//! * `raw`: W tasks per session sharing one `RawClient` (a write per request, a oneshot per
//!   reply); several times more client CPU per operation.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkd_protocol::{
    from_bytes, ConnectRequest, ConnectResponse, CreateMode, CreateResponse, FrameCodec, Jute,
    PathWatchRequest, Reader, ReplyHeader, Request, SetDataRequest,
};
use zkd_testkit::raw::RawClient;

use crate::pool;
use crate::proc;
use crate::progress::Progress;
use crate::util::{call_ok, create, delete, quantile_sorted, session_with_node, BenchResult};

/// What each request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Workload {
    /// getData of a 1 KiB node.
    Get,
    /// setData of 1 KiB.
    Set,
    /// create an ephemeral-sequential node, then delete it (two operations).
    CreateDelete,
    /// 90 % getData, 10 % setData, 1 KiB.
    Mixed,
}

impl Workload {
    pub fn label(self) -> &'static str {
        match self {
            Workload::Get => "getData 1KiB",
            Workload::Set => "setData 1KiB",
            Workload::CreateDelete => "create+delete eph-seq",
            Workload::Mixed => "mixed 90/10 get/set",
        }
    }

    pub fn key(self) -> &'static str {
        match self {
            Workload::Get => "get",
            Workload::Set => "set",
            Workload::CreateDelete => "create-delete",
            Workload::Mixed => "mixed",
        }
    }

    pub const ALL: [Workload; 4] = [
        Workload::Get,
        Workload::Set,
        Workload::CreateDelete,
        Workload::Mixed,
    ];
}

/// Which load generator drives the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Driver {
    /// One task per session, replies read and requests written in batches.
    Lean,
    /// W tasks per session over `RawClient`.
    Raw,
}

/// One throughput run.
#[derive(Debug, Clone)]
pub struct Params {
    pub driver: Driver,
    pub sessions: usize,
    pub inflight: usize,
    pub workload: Workload,
    pub value_size: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// Extra sessions that each keep one getData of a data node in flight during the same
    /// window, timed apart from the workload (reads issued while writes are under way).
    /// Each reads one of the nodes being written.
    pub readers: usize,
    /// As many more reader sessions again, each reading a node no request writes (a read
    /// that depends on no write under way), timed apart from the others.
    pub unrelated_readers: bool,
}

impl Params {
    /// The workload for progress lines (`setData 1KiB`, or `set, 100 B values`).
    fn what(&self) -> String {
        if self.value_size == 1024 {
            self.workload.label().to_string()
        } else {
            format!("{}, {} B values", self.workload.key(), self.value_size)
        }
    }
}

/// The server's CPU time (user + system) during a run's window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerCpu {
    /// Per operation, µs.
    pub us_per_op: f64,
    /// Over wall time (1.0 = one core busy).
    pub cores: f64,
}

/// The figures of a run. An operation is one request and its reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub secs: f64,
    pub ops_per_sec: f64,
    /// Every operation's latency (`latency.ops` of them in `secs`).
    pub latency: Latencies,
    /// What the server's CPU did during the window; `None` without a pid.
    pub server_cpu: Option<ServerCpu>,
    /// The same for this bench process (the load generator shares the machine).
    pub client_cores: f64,
    /// The reader sessions' getData latencies (when `Params::readers` > 0).
    pub readers: Option<Latencies>,
    /// The getData latencies of the readers of a node nobody writes (with
    /// `Params::unrelated_readers`).
    pub unrelated_readers: Option<Latencies>,
}

/// Latency percentiles of a set of operations.
#[derive(Debug, Clone, PartialEq)]
pub struct Latencies {
    pub ops: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Latencies {
    fn of(lat: &[u32]) -> Latencies {
        let mut sorted: Vec<f64> = lat.iter().map(|&v| f64::from(v)).collect();
        sorted.sort_by(f64::total_cmp);
        Latencies {
            ops: sorted.len() as u64,
            p50_us: quantile_sorted(&sorted, 0.5),
            p99_us: quantile_sorted(&sorted, 0.99),
            p999_us: quantile_sorted(&sorted, 0.999),
            max_us: sorted.last().copied().unwrap_or(0.0),
        }
    }
}

const IDLE: u8 = 0;
const MEASURING: u8 = 1;
const STOP: u8 = 2;

struct WorkerResult {
    latencies_us: Vec<u32>,
    errors: u64,
    first_error: Option<String>,
}

impl WorkerResult {
    fn with_capacity(latencies: usize) -> WorkerResult {
        WorkerResult {
            latencies_us: Vec::with_capacity(latencies),
            errors: 0,
            first_error: None,
        }
    }
}

/// Runs one workload against `addr`; `pid` is the server process for CPU figures.
pub async fn run(
    addr: SocketAddr,
    pid: Option<u32>,
    p: &Params,
    progress: &Progress,
) -> BenchResult<Outcome> {
    if p.sessions == 0 || p.inflight == 0 {
        return Err("throughput needs at least one session and one request in flight".into());
    }
    let limit = Duration::from_secs(30);
    let prefix = format!("tp-{}", p.workload.key());
    let (admin, parent) = session_with_node(addr, &prefix, None, limit, "the parent").await?;
    let value = Bytes::from(vec![b'v'; p.value_size]);
    let nodes: Vec<String> = (0..p.sessions).map(|i| format!("{parent}/n-{i}")).collect();
    // The node the unrelated readers read; no request writes it.
    let quiet = format!("{parent}/quiet");
    let mut rxs = Vec::new();
    for n in nodes.iter().chain(std::iter::once(&quiet)) {
        rxs.push(
            admin
                .send(&create(n, Some(value.clone()), 0))
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    for rx in rxs {
        let r = rx
            .await
            .map_err(|_| "create: connection closed".to_string())?;
        if r.err != 0 {
            return Err(format!("creating the data nodes: error {}", r.err));
        }
    }
    let phase = Arc::new(AtomicU8::new(IDLE));
    let mut tasks = Vec::new();
    let mut clients = Vec::new();
    match p.driver {
        Driver::Raw => {
            clients = pool::connect_many(addr, p.sessions, pool::CONNECT_CONCURRENCY, progress)
                .await
                .map_err(|(_, e)| format!("opening {} sessions: {e}", p.sessions))?;
            for (i, c) in clients.iter().enumerate() {
                for w in 0..p.inflight {
                    tasks.push(tokio::spawn(worker(
                        c.clone(),
                        nodes[i].clone(),
                        parent.clone(),
                        value.clone(),
                        p.workload,
                        (i * p.inflight + w) as u64,
                        phase.clone(),
                    )));
                }
            }
        }
        Driver::Lean => {
            let mut streams = Vec::new();
            for _ in 0..p.sessions {
                streams.push(
                    handshake(addr)
                        .await
                        .map_err(|e| format!("handshake: {e}"))?,
                );
            }
            for (i, stream) in streams.into_iter().enumerate() {
                let slot = Slot {
                    node: nodes[i].clone(),
                    parent: parent.clone(),
                    value: value.clone(),
                    workload: p.workload,
                };
                tasks.push(tokio::spawn(lean_session(
                    stream,
                    slot,
                    p.inflight,
                    i as u64 + 1,
                    phase.clone(),
                )));
            }
        }
    }
    let readers = if p.readers > 0 {
        let slots = (0..p.readers)
            .map(|i| Slot {
                node: nodes[i % nodes.len()].clone(),
                parent: parent.clone(),
                value: value.clone(),
                workload: Workload::Get,
            })
            .collect();
        Some(spawn_readers(addr, slots, p.sessions as u64, phase.clone()).await?)
    } else {
        None
    };
    let unrelated = if p.readers > 0 && p.unrelated_readers {
        let slots = (0..p.readers)
            .map(|_| Slot {
                node: quiet.clone(),
                parent: parent.clone(),
                value: value.clone(),
                workload: Workload::Get,
            })
            .collect();
        let seed = (p.sessions + p.readers) as u64;
        Some(spawn_readers(addr, slots, seed, phase.clone()).await?)
    } else {
        None
    };
    progress.say(format!(
        "{}: {} sessions x {} in flight, warm-up {:?}, measuring {:?}",
        p.what(),
        p.sessions,
        p.inflight,
        p.warmup,
        p.duration
    ));
    tokio::time::sleep(p.warmup).await;
    let cpu0 = pid
        .map(proc::CpuSample::take)
        .transpose()
        .map_err(|e| e.to_string())?;
    let me0 = proc::CpuSample::take(std::process::id()).ok();
    let t0 = Instant::now();
    phase.store(MEASURING, Ordering::SeqCst);
    tokio::time::sleep(p.duration).await;
    phase.store(STOP, Ordering::SeqCst);
    let secs = t0.elapsed().as_secs_f64();
    let cpu1 = pid
        .map(proc::CpuSample::take)
        .transpose()
        .map_err(|e| e.to_string())?;
    let me1 = proc::CpuSample::take(std::process::id()).ok();

    let mut lat: Vec<u32> = Vec::new();
    let mut read_lat: Vec<u32> = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    let mut results = Vec::new();
    for t in tasks {
        match tokio::time::timeout(limit, t).await {
            Ok(Ok(r)) => results.push((false, r)),
            Ok(Err(e)) => return Err(format!("worker failed: {e}")),
            Err(_) => return Err("a worker did not stop within 30 s".into()),
        }
    }
    if let Some(done) = readers {
        match tokio::time::timeout(limit, done).await {
            Ok(Ok(Ok(rs))) => results.extend(rs.into_iter().map(|r| (true, r))),
            Ok(Ok(Err(e))) => return Err(e),
            Ok(Err(_)) => return Err("the reader thread failed".into()),
            Err(_) => return Err("the readers did not stop within 30 s".into()),
        }
    }
    let mut unrelated_lat: Vec<u32> = Vec::new();
    if let Some(done) = unrelated {
        match tokio::time::timeout(limit, done).await {
            Ok(Ok(Ok(rs))) => {
                for r in rs {
                    unrelated_lat.extend_from_slice(&r.latencies_us);
                    errors += r.errors;
                    if first_error.is_none() {
                        first_error = r.first_error;
                    }
                }
            }
            Ok(Ok(Err(e))) => return Err(e),
            Ok(Err(_)) => return Err("the reader thread failed".into()),
            Err(_) => return Err("the readers did not stop within 30 s".into()),
        }
    }
    for (reader, r) in results {
        let into = if reader { &mut read_lat } else { &mut lat };
        into.extend_from_slice(&r.latencies_us);
        errors += r.errors;
        if first_error.is_none() {
            first_error = r.first_error;
        }
    }
    pool::close_all(&clients, limit).await;
    drop(clients);
    // Remove the data nodes (ephemerals went with their sessions).
    let mut rxs = Vec::new();
    for n in nodes.iter().chain(std::iter::once(&quiet)) {
        if let Ok(rx) = admin.send(&delete(n.clone())).await {
            rxs.push(rx);
        }
    }
    for rx in rxs {
        let _ = rx.await;
    }
    let _ = call_ok(&admin, &delete(parent), limit, "deleting the parent").await;
    let _ = admin.close().await;
    if errors > 0 {
        return Err(format!(
            "{errors} requests failed: {}",
            first_error.unwrap_or_default()
        ));
    }

    let latency = Latencies::of(&lat);
    let ops = latency.ops;
    let server_cpu = cpu0.zip(cpu1).map(|(a, b)| a.until(&b));
    let out = Outcome {
        secs,
        ops_per_sec: ops as f64 / secs,
        latency,
        server_cpu: server_cpu.map(|c| ServerCpu {
            us_per_op: c * 1e6 / ops.max(1) as f64,
            cores: c / secs,
        }),
        client_cores: me0.zip(me1).map_or(f64::NAN, |(a, b)| a.until(&b)) / secs,
        readers: (p.readers > 0).then(|| Latencies::of(&read_lat)),
        unrelated_readers: (p.readers > 0 && p.unrelated_readers)
            .then(|| Latencies::of(&unrelated_lat)),
    };
    progress.say(format!(
        "{}: {:.0} ops/s, p50 {:.0} us, p99 {:.0} us, p99.9 {:.0} us, server CPU {} us/op",
        p.what(),
        out.ops_per_sec,
        out.latency.p50_us,
        out.latency.p99_us,
        out.latency.p999_us,
        out.server_cpu
            .map_or("n/a".to_string(), |c| format!("{:.1}", c.us_per_op))
    ));
    if let Some(r) = &out.readers {
        progress.say(format!(
            "{} reader sessions meanwhile: {} getData, p50 {:.0} us, p99 {:.0} us",
            p.readers, r.ops, r.p50_us, r.p99_us
        ));
    }
    if let Some(r) = &out.unrelated_readers {
        progress.say(format!(
            "{} reader sessions of a node nobody writes: {} getData, p50 {:.0} us, p99 {:.0} us",
            p.readers, r.ops, r.p50_us, r.p99_us
        ));
    }
    Ok(out)
}

/// Starts the reader sessions (one getData in flight each) on a thread and runtime of their
/// own, so that their latencies are the server's and not the wait for this process's runtime,
/// which is busy with the writers' replies: like separate client processes. Returns once
/// every reader has its session; the receiver gives their results after `phase` says stop.
async fn spawn_readers(
    addr: SocketAddr,
    slots: Vec<Slot>,
    first_seed: u64,
    phase: Arc<AtomicU8>,
) -> BenchResult<tokio::sync::oneshot::Receiver<BenchResult<Vec<WorkerResult>>>> {
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<BenchResult<()>>();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let body = move || {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready_tx.send(Err(format!("reader runtime: {e}")));
                return;
            }
        };
        rt.block_on(async move {
            let mut sessions = Vec::new();
            for (i, slot) in slots.into_iter().enumerate() {
                match handshake(addr).await {
                    Ok(stream) => sessions.push(tokio::spawn(lean_session(
                        stream,
                        slot,
                        1,
                        first_seed + i as u64 + 1,
                        phase.clone(),
                    ))),
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("reader handshake: {e}")));
                        return;
                    }
                }
            }
            let _ = ready_tx.send(Ok(()));
            let mut out = Vec::new();
            for s in sessions {
                match s.await {
                    Ok(r) => out.push(r),
                    Err(e) => {
                        let _ = done_tx.send(Err(format!("reader failed: {e}")));
                        return;
                    }
                }
            }
            let _ = done_tx.send(Ok(out));
        });
    };
    std::thread::Builder::new()
        .name("bench-readers".into())
        .spawn(body)
        .map_err(|e| format!("reader thread: {e}"))?;
    ready_rx
        .await
        .map_err(|_| "the reader thread stopped".to_string())??;
    Ok(done_rx)
}

/// Opens a session on a socket of our own (for the lean driver).
pub async fn handshake(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let req = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout: pool::SESSION_TIMEOUT_MS,
        session_id: 0,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: Some(false),
    };
    stream
        .write_all(&zkd_protocol::frame::record_frame(&req))
        .await?;
    let codec = FrameCodec { max: 1 << 20 };
    let mut buf = BytesMut::with_capacity(64);
    let frame = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match codec.next_frame(&mut buf) {
                Ok(Some(f)) => return Ok(f),
                Ok(None) => {}
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            }
            if stream.read_buf(&mut buf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    })
    .await
    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let resp: ConnectResponse =
        from_bytes(frame).map_err(|e| std::io::Error::other(e.to_string()))?;
    if resp.session_id == 0 {
        return Err(std::io::Error::other("session rejected"));
    }
    Ok(stream)
}

/// What one lean session works on.
struct Slot {
    node: String,
    parent: String,
    value: Bytes,
    workload: Workload,
}

/// The requests a session sends on its node: read it, write it, create an ephemeral
/// sequential sibling.
struct Requests {
    get: Request,
    set: Request,
    create: Request,
}

impl Requests {
    fn new(node: &str, parent: &str, value: &Bytes) -> Requests {
        Requests {
            get: Request::GetData(PathWatchRequest {
                path: node.to_string(),
                watch: false,
            }),
            set: Request::SetData(SetDataRequest {
                path: node.to_string(),
                data: Some(value.clone()),
                version: -1,
            }),
            create: create(
                &format!("{parent}/e-"),
                None,
                CreateMode::EphemeralSequential.flags(),
            ),
        }
    }

    /// The request of `Get`, `Set` or `Create` (the create for anything else).
    fn of(&self, op: Op) -> &Request {
        match op {
            Op::Get => &self.get,
            Op::Set => &self.set,
            _ => &self.create,
        }
    }
}

impl Workload {
    /// The next request kind: the workload's own, or for `Mixed` a set one time in ten
    /// (xorshift64 on `rng`).
    fn next_op(self, rng: &mut u64) -> Op {
        match self {
            Workload::Get => Op::Get,
            Workload::Set => Op::Set,
            Workload::CreateDelete => Op::Create,
            Workload::Mixed => {
                *rng ^= *rng << 13;
                *rng ^= *rng >> 7;
                *rng ^= *rng << 17;
                if rng.is_multiple_of(10) {
                    Op::Set
                } else {
                    Op::Get
                }
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Get,
    Set,
    Create,
    Delete,
    Close,
}

/// One session of the lean driver: keeps `inflight` requests outstanding; per batch of
/// replies read, one write of the follow-up requests.
async fn lean_session(
    mut stream: TcpStream,
    slot: Slot,
    inflight: usize,
    seed: u64,
    phase: Arc<AtomicU8>,
) -> WorkerResult {
    let mut res = WorkerResult::with_capacity(64 * 1024);
    let reqs = Requests::new(&slot.node, &slot.parent, &slot.value);
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut xid = 0i32;
    let mut out = BytesMut::with_capacity(16 * 1024);
    let mut inbuf = BytesMut::with_capacity(64 * 1024);
    let mut pending: VecDeque<(Instant, Op)> = VecDeque::with_capacity(inflight + 1);
    let mut issue = |out: &mut BytesMut, op: Op, path: Option<String>| {
        xid += 1;
        match op {
            Op::Get | Op::Set | Op::Create => reqs.of(op).write_frame(xid, out),
            Op::Delete => delete(path.unwrap_or_default()).write_frame(xid, out),
            Op::Close => Request::CloseSession.write_frame(xid, out),
        }
    };
    let mut next = || slot.workload.next_op(&mut rng);
    let now = Instant::now();
    for _ in 0..inflight {
        let op = next();
        issue(&mut out, op, None);
        pending.push_back((now, op));
    }
    let codec = FrameCodec { max: 1 << 24 };
    let mut closing = false;
    let fail = |res: &mut WorkerResult, e: String| {
        res.errors += 1;
        res.first_error.get_or_insert(e);
    };
    loop {
        if !out.is_empty() {
            if let Err(e) = stream.write_all(&out).await {
                fail(&mut res, format!("write: {e}"));
                return res;
            }
            out.clear();
        }
        if pending.is_empty() {
            return res;
        }
        match tokio::time::timeout(Duration::from_secs(30), stream.read_buf(&mut inbuf)).await {
            Ok(Ok(0)) if closing => return res,
            Ok(Ok(0)) => {
                fail(&mut res, "connection closed".into());
                return res;
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                fail(&mut res, format!("read: {e}"));
                return res;
            }
            Err(_) => {
                fail(&mut res, "no reply within 30 s".into());
                return res;
            }
        }
        let now = Instant::now();
        let measuring = phase.load(Ordering::Relaxed);
        loop {
            let frame = match codec.next_frame(&mut inbuf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    fail(&mut res, e.to_string());
                    return res;
                }
            };
            let mut r = Reader::new(frame);
            let Ok(h) = ReplyHeader::read(&mut r) else {
                fail(&mut res, "undecodable reply header".into());
                return res;
            };
            if h.xid == -1 {
                continue;
            }
            let Some((sent, op)) = pending.pop_front() else {
                fail(&mut res, format!("unexpected reply xid {}", h.xid));
                return res;
            };
            if op == Op::Close {
                continue;
            }
            if measuring == MEASURING {
                let us = (now - sent).as_micros().min(u128::from(u32::MAX)) as u32;
                res.latencies_us.push(us);
            }
            if h.err != 0 {
                fail(&mut res, format!("error {} on a request", h.err));
            }
            if measuring == STOP {
                // Let the slot drain; close the session once the last reply is in.
                if pending.is_empty() && !closing {
                    closing = true;
                    issue(&mut out, Op::Close, None);
                    pending.push_back((now, Op::Close));
                }
                continue;
            }
            let (op, path) = match op {
                Op::Create if h.err == 0 => match CreateResponse::read(&mut r) {
                    Ok(c) => (Op::Delete, Some(c.path)),
                    Err(e) => {
                        fail(&mut res, format!("create reply: {e}"));
                        return res;
                    }
                },
                _ => (next(), None),
            };
            issue(&mut out, op, path);
            pending.push_back((now, op));
        }
    }
}

/// One pipelined slot: issues the workload's requests back to back; records latencies that
/// complete while measuring.
async fn worker(
    client: Arc<RawClient>,
    node: String,
    parent: String,
    value: Bytes,
    workload: Workload,
    seed: u64,
    phase: Arc<AtomicU8>,
) -> WorkerResult {
    let mut res = WorkerResult::with_capacity(16 * 1024);
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let reqs = Requests::new(&node, &parent, &value);
    loop {
        let state = phase.load(Ordering::Relaxed);
        if state == STOP {
            return res;
        }
        let req = reqs.of(workload.next_op(&mut rng));
        let Some(reply) = timed(&client, req, &phase, &mut res).await else {
            return res;
        };
        if workload == Workload::CreateDelete && reply.err == 0 {
            let Ok(created) = reply.decode::<CreateResponse>() else {
                res.errors += 1;
                res.first_error
                    .get_or_insert("undecodable create reply".into());
                return res;
            };
            let del = delete(created.path);
            if timed(&client, &del, &phase, &mut res).await.is_none() {
                return res;
            }
        }
    }
}

/// Sends one request and waits for its reply, recording the latency if measuring.
async fn timed(
    client: &RawClient,
    req: &Request,
    phase: &AtomicU8,
    res: &mut WorkerResult,
) -> Option<zkd_testkit::raw::Reply> {
    let t = Instant::now();
    let reply = match client.send(req).await {
        Ok(rx) => match tokio::time::timeout(Duration::from_secs(30), rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => {
                res.errors += 1;
                res.first_error.get_or_insert("connection closed".into());
                return None;
            }
            Err(_) => {
                res.errors += 1;
                res.first_error.get_or_insert("no reply within 30 s".into());
                return None;
            }
        },
        Err(e) => {
            res.errors += 1;
            res.first_error.get_or_insert(e.to_string());
            return None;
        }
    };
    let us = t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
    if phase.load(Ordering::Relaxed) == MEASURING {
        res.latencies_us.push(us);
    }
    if reply.err != 0 {
        res.errors += 1;
        res.first_error
            .get_or_insert(format!("{:?} got error {}", req.op(), reply.err));
    }
    Some(reply)
}
