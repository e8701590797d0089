//! Closed-loop throughput: C sessions, each keeping W requests in flight (pipelined), for a
//! fixed time after a warm-up. Reports operations per second, latency percentiles and — when
//! the server's pid is known — server CPU time per operation from /proc/PID/stat.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zkd_client_tests::raw::RawClient;
use zkd_protocol::{
    CreateMode, CreateResponse, DeleteRequest, PathWatchRequest, Request, SetDataRequest,
};

use crate::pool;
use crate::proc;
use crate::progress::Progress;
use crate::util::{call_ok, create, quantile_sorted, unique, BenchResult};

/// What each request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
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

/// One throughput run.
#[derive(Debug, Clone)]
pub struct Params {
    pub sessions: usize,
    pub inflight: usize,
    pub workload: Workload,
    pub value_size: usize,
    pub warmup: Duration,
    pub duration: Duration,
}

/// The figures of a run. An operation is one request and its reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub workload: Workload,
    pub sessions: usize,
    pub inflight: usize,
    pub ops: u64,
    pub secs: f64,
    pub ops_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Server CPU (user + system) per operation, µs; `None` without a pid.
    pub server_cpu_us_per_op: Option<f64>,
    /// Server CPU time / wall time during the window (1.0 = one core busy).
    pub server_cores: Option<f64>,
    /// The same for this bench process (the load generator shares the machine).
    pub client_cores: f64,
}

const IDLE: u8 = 0;
const MEASURING: u8 = 1;
const STOP: u8 = 2;

struct WorkerResult {
    latencies_us: Vec<u32>,
    errors: u64,
    first_error: Option<String>,
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
    let admin = RawClient::connect(addr, pool::SESSION_TIMEOUT_MS)
        .await
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let parent = unique(&format!("tp-{}", p.workload.key()));
    let value = Bytes::from(vec![b'v'; p.value_size]);
    call_ok(&admin, &create(&parent, None, 0), limit, "creating the parent").await?;
    let nodes: Vec<String> = (0..p.sessions).map(|i| format!("{parent}/n-{i}")).collect();
    let mut rxs = Vec::new();
    for n in &nodes {
        rxs.push(
            admin
                .send(&create(n, Some(value.clone()), 0))
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    for rx in rxs {
        let r = rx.await.map_err(|_| "create: connection closed".to_string())?;
        if r.err != 0 {
            return Err(format!("creating the data nodes: error {}", r.err));
        }
    }
    let clients = pool::connect_many(addr, p.sessions, pool::CONNECT_CONCURRENCY, progress)
        .await
        .map_err(|(_, e)| format!("opening {} sessions: {e}", p.sessions))?;

    let phase = Arc::new(AtomicU8::new(IDLE));
    let mut tasks = Vec::new();
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
    progress.say(format!(
        "{}: {} sessions x {} in flight, warm-up {:?}, measuring {:?}",
        p.workload.label(),
        p.sessions,
        p.inflight,
        p.warmup,
        p.duration
    ));
    tokio::time::sleep(p.warmup).await;
    let cpu0 = pid.map(proc::cpu_seconds).transpose().map_err(|e| e.to_string())?;
    let me0 = proc::cpu_seconds(std::process::id()).unwrap_or(0.0);
    let t0 = Instant::now();
    phase.store(MEASURING, Ordering::SeqCst);
    tokio::time::sleep(p.duration).await;
    phase.store(STOP, Ordering::SeqCst);
    let secs = t0.elapsed().as_secs_f64();
    let cpu1 = pid.map(proc::cpu_seconds).transpose().map_err(|e| e.to_string())?;
    let me1 = proc::cpu_seconds(std::process::id()).unwrap_or(0.0);

    let mut lat: Vec<u32> = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    for t in tasks {
        match tokio::time::timeout(limit, t).await {
            Ok(Ok(r)) => {
                lat.extend_from_slice(&r.latencies_us);
                errors += r.errors;
                if first_error.is_none() {
                    first_error = r.first_error;
                }
            }
            Ok(Err(e)) => return Err(format!("worker failed: {e}")),
            Err(_) => return Err("a worker did not stop within 30 s".into()),
        }
    }
    pool::close_all(&clients, limit).await;
    drop(clients);
    // Remove the data nodes (ephemerals went with their sessions).
    let mut rxs = Vec::new();
    for n in &nodes {
        if let Ok(rx) = admin
            .send(&Request::Delete(DeleteRequest {
                path: n.clone(),
                version: -1,
            }))
            .await
        {
            rxs.push(rx);
        }
    }
    for rx in rxs {
        let _ = rx.await;
    }
    let _ = call_ok(
        &admin,
        &Request::Delete(DeleteRequest {
            path: parent,
            version: -1,
        }),
        limit,
        "deleting the parent",
    )
    .await;
    let _ = admin.close().await;
    if errors > 0 {
        return Err(format!(
            "{errors} requests failed: {}",
            first_error.unwrap_or_default()
        ));
    }

    let ops = lat.len() as u64;
    let mut sorted: Vec<f64> = lat.iter().map(|&v| f64::from(v)).collect();
    sorted.sort_by(f64::total_cmp);
    let server_cpu = cpu0.zip(cpu1).map(|(a, b)| b - a);
    let out = Outcome {
        workload: p.workload,
        sessions: p.sessions,
        inflight: p.inflight,
        ops,
        secs,
        ops_per_sec: ops as f64 / secs,
        p50_us: quantile_sorted(&sorted, 0.5),
        p99_us: quantile_sorted(&sorted, 0.99),
        p999_us: quantile_sorted(&sorted, 0.999),
        max_us: sorted.last().copied().unwrap_or(0.0),
        server_cpu_us_per_op: server_cpu.map(|c| c * 1e6 / ops.max(1) as f64),
        server_cores: server_cpu.map(|c| c / secs),
        client_cores: (me1 - me0) / secs,
    };
    progress.say(format!(
        "{}: {:.0} ops/s, p50 {:.0} us, p99 {:.0} us, p99.9 {:.0} us, server CPU {} us/op",
        p.workload.label(),
        out.ops_per_sec,
        out.p50_us,
        out.p99_us,
        out.p999_us,
        out.server_cpu_us_per_op
            .map_or("n/a".to_string(), |c| format!("{c:.1}"))
    ));
    Ok(out)
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
    let mut res = WorkerResult {
        latencies_us: Vec::with_capacity(16 * 1024),
        errors: 0,
        first_error: None,
    };
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let get = Request::GetData(PathWatchRequest {
        path: node.clone(),
        watch: false,
    });
    let set = Request::SetData(SetDataRequest {
        path: node.clone(),
        data: Some(value.clone()),
        version: -1,
    });
    let eph = create(
        &format!("{parent}/e-"),
        None,
        CreateMode::EphemeralSequential.flags(),
    );
    loop {
        let state = phase.load(Ordering::Relaxed);
        if state == STOP {
            return res;
        }
        let req = match workload {
            Workload::Get => &get,
            Workload::Set => &set,
            Workload::CreateDelete => &eph,
            Workload::Mixed => {
                // xorshift64
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                if rng % 10 == 0 {
                    &set
                } else {
                    &get
                }
            }
        };
        let Some(reply) = timed(&client, req, &phase, &mut res).await else {
            return res;
        };
        if workload == Workload::CreateDelete && reply.err == 0 {
            let Ok(created) = reply.decode::<CreateResponse>() else {
                res.errors += 1;
                res.first_error.get_or_insert("undecodable create reply".into());
                return res;
            };
            let del = Request::Delete(DeleteRequest {
                path: created.path,
                version: -1,
            });
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
) -> Option<zkd_client_tests::raw::Reply> {
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
