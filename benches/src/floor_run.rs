//! `zkd-bench floor --throughput`: zkd against the machine's floors, measured with the same
//! client in the same run. getData and setData of 1 KiB at each shape (connections × requests
//! in flight) on zkd, on the tokio floor ([`crate::floor_tokio`]) and on the epoll floor
//! ([`crate::floor_epoll`]), each a process of its own whose CPU time is read; then setData of
//! 100 B on zkd `--fsync always` against the durable floor ([`crate::floor_disk`]) at each
//! durable shape, the floor's group being the writes in flight, with zkd in memory and the
//! tokio floor at the same shapes and size (what bounds durable writes besides the disk). Rounds alternate which server
//! goes first; the tables show medians over the rounds and zkd / floor.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::durable;
use crate::floor::{FloorKind, FloorProcess};
use crate::floor_disk;
use crate::progress::Progress;
use crate::report::{num, Table};
use crate::servers::{Placement, ServerSpec};
use crate::throughput::{self, Outcome, Workload};
use crate::util::{median, BenchResult};

/// Sizes and durations of a run.
#[derive(Debug, Clone)]
pub struct Params {
    /// (connections, requests in flight per connection).
    pub shapes: Vec<(usize, usize)>,
    pub workloads: Vec<Workload>,
    pub value_size: usize,
    pub warmup: Duration,
    pub duration: Duration,
    pub rounds: usize,
    /// The durable comparison (its shapes, value size, base directory and durations).
    pub durable: durable::Params,
    /// The `zkd-bench` binary, re-executed for the floor servers.
    pub floor_bin: PathBuf,
}

impl Params {
    pub fn full(floor_bin: PathBuf) -> Params {
        Params {
            shapes: vec![(1, 1), (16, 8), (64, 8)],
            workloads: vec![Workload::Get, Workload::Set],
            value_size: 1024,
            warmup: Duration::from_secs(2),
            duration: Duration::from_secs(5),
            rounds: 3,
            durable: durable::Params::full(),
            floor_bin,
        }
    }

    pub fn quick(floor_bin: PathBuf) -> Params {
        Params {
            shapes: vec![(1, 1), (4, 4)],
            warmup: Duration::from_millis(100),
            duration: Duration::from_millis(400),
            rounds: 1,
            durable: durable::Params::quick(),
            ..Params::full(floor_bin)
        }
    }
}

/// The servers of the throughput comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Server {
    Zkd,
    Tokio,
    Epoll,
}

impl Server {
    const ALL: [Server; 3] = [Server::Zkd, Server::Tokio, Server::Epoll];

    pub fn label(self) -> &'static str {
        match self {
            Server::Zkd => "zkd",
            Server::Tokio => "tokio floor",
            Server::Epoll => "epoll floor",
        }
    }
}

/// Everything a run measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// (workload, shape, server) → one outcome per round.
    pub throughput: BTreeMap<(Workload, (usize, usize), Server), Vec<Outcome>>,
    /// (run, shape) → setData outcomes of the durable comparison, one per round.
    pub durable: BTreeMap<(DurableRun, (usize, usize)), Vec<Outcome>>,
    /// shape → durable floor outcomes, one per round.
    pub durable_floor: BTreeMap<(usize, usize), Vec<floor_disk::Outcome>>,
    pub errors: Vec<String>,
    pub rounds: usize,
    pub value_size: usize,
    pub durable_value_size: usize,
}

/// A started server of the throughput comparison, stopped on drop.
enum Running {
    Zkd(crate::servers::ServerProcess),
    Floor(FloorProcess),
}

impl Running {
    fn addr_pid(&self) -> (std::net::SocketAddr, u32) {
        match self {
            Running::Zkd(p) => (p.addr(), p.pid()),
            Running::Floor(p) => (p.addr(), p.pid()),
        }
    }
}

async fn start(server: Server, zkd: &ServerSpec, p: &Params) -> BenchResult<Running> {
    let kind = match server {
        Server::Zkd => return Ok(Running::Zkd(zkd.start(Duration::from_secs(60)).await?)),
        Server::Tokio => FloorKind::Tokio,
        Server::Epoll => FloorKind::Epoll,
    };
    // Spawned from this runtime thread, not a blocking-pool one: the child is killed when
    // the thread that spawned it ends (see `FloorProcess`), and an idle pool thread ends
    // after ten seconds. Waiting for its first line blocks this thread for milliseconds.
    FloorProcess::spawn_kind(&p.floor_bin, kind, p.value_size).map(Running::Floor)
}

/// Runs the comparison: every round, each server in turn (the order rotating with the
/// round) runs every shape and workload; then the durable comparison.
pub async fn run(zkd: &ServerSpec, p: &Params, progress: &Progress) -> Report {
    let mut r = Report {
        rounds: p.rounds,
        value_size: p.value_size,
        durable_value_size: p.durable.value_size,
        ..Report::default()
    };
    for round in 0..p.rounds {
        let mut order = Server::ALL;
        order.rotate_left(round % Server::ALL.len());
        for server in order {
            let prog = progress.sub(format!(
                "round {}/{} {}",
                round + 1,
                p.rounds,
                server.label()
            ));
            let running = match start(server, zkd, p).await {
                Ok(s) => s,
                Err(e) => {
                    r.errors
                        .push(format!("round {} {}: {e}", round + 1, server.label()));
                    continue;
                }
            };
            let (addr, pid) = running.addr_pid();
            for &shape in &p.shapes {
                for &w in &p.workloads {
                    let tp = throughput::Params {
                        driver: throughput::Driver::Lean,
                        sessions: shape.0,
                        inflight: shape.1,
                        workload: w,
                        value_size: p.value_size,
                        warmup: p.warmup,
                        duration: p.duration,
                        readers: 0,
                        unrelated_readers: false,
                    };
                    match throughput::run(addr, Some(pid), &tp, &prog).await {
                        Ok(o) => r.throughput.entry((w, shape, server)).or_default().push(o),
                        Err(e) => r.errors.push(format!(
                            "round {} {} {} {}x{}: {e}",
                            round + 1,
                            server.label(),
                            w.key(),
                            shape.0,
                            shape.1
                        )),
                    }
                }
            }
            drop(running);
        }
        durable_round(zkd, p, round, progress, &mut r).await;
    }
    r
}

/// What the durable comparison measures at each shape, setData of the durable value size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DurableRun {
    /// zkd `--fsync always`.
    ZkdAlways,
    /// zkd without a data directory (the same writes, nothing on disk).
    ZkdMemory,
    /// The tokio floor (the network part of the durable floor).
    TokioFloor,
}

impl DurableRun {
    const ALL: [DurableRun; 3] = [
        DurableRun::ZkdAlways,
        DurableRun::ZkdMemory,
        DurableRun::TokioFloor,
    ];

    fn label(self) -> &'static str {
        match self {
            DurableRun::ZkdAlways => "zkd --fsync always",
            DurableRun::ZkdMemory => "zkd in memory",
            DurableRun::TokioFloor => "tokio floor",
        }
    }
}

/// The durable comparison of one round: zkd `--fsync always`, zkd in memory, the tokio floor
/// and the disk floor at every durable shape (the order rotating with the round).
async fn durable_round(
    zkd: &ServerSpec,
    p: &Params,
    round: usize,
    progress: &Progress,
    r: &mut Report,
) {
    let d = &p.durable;
    let prog = progress.sub(format!("round {}/{} durable", round + 1, p.rounds));
    let mut order: Vec<Option<DurableRun>> = DurableRun::ALL
        .into_iter()
        .map(Some)
        .chain([None])
        .collect();
    let n = order.len();
    order.rotate_left(round % n);
    for run in order {
        match run {
            Some(run) => durable_server(zkd, p, run, round, &prog, r).await,
            None => disk_floor(d, round, &prog, r).await,
        }
    }
}

/// One server of the durable comparison at every durable shape.
async fn durable_server(
    zkd: &ServerSpec,
    p: &Params,
    run: DurableRun,
    round: usize,
    prog: &Progress,
    r: &mut Report,
) {
    let d = &p.durable;
    let what = format!("round {} durable {}", round + 1, run.label());
    let place = Placement {
        cpus: None,
        base: Some(d.base_dir()),
    };
    let running = match run {
        DurableRun::ZkdAlways => zkd
            .durable("always")
            .start_with(&place, Duration::from_secs(60))
            .await
            .map(Running::Zkd),
        DurableRun::ZkdMemory => zkd.start(Duration::from_secs(60)).await.map(Running::Zkd),
        // From this runtime thread: see `FloorProcess` on which thread a child dies with.
        DurableRun::TokioFloor => {
            FloorProcess::spawn_kind(&p.floor_bin, FloorKind::Tokio, d.value_size)
                .map(Running::Floor)
        }
    };
    let running = match running {
        Ok(s) => s,
        Err(e) => {
            r.errors.push(format!("{what}: {e}"));
            return;
        }
    };
    let (addr, pid) = running.addr_pid();
    for &shape in &d.shapes {
        let tp = throughput::Params {
            driver: throughput::Driver::Lean,
            sessions: shape.0,
            inflight: shape.1,
            workload: Workload::Set,
            value_size: d.value_size,
            warmup: d.warmup,
            duration: d.duration,
            readers: 0,
            unrelated_readers: false,
        };
        match throughput::run(addr, Some(pid), &tp, prog).await {
            Ok(o) => r.durable.entry((run, shape)).or_default().push(o),
            Err(e) => r
                .errors
                .push(format!("{what} {}x{}: {e}", shape.0, shape.1)),
        }
    }
}

/// The disk floor at every durable shape.
async fn disk_floor(d: &durable::Params, round: usize, prog: &Progress, r: &mut Report) {
    for &shape in &d.shapes {
        let (base, size, warmup, duration) = (d.base_dir(), d.value_size, d.warmup, d.duration);
        let group = shape.0 * shape.1;
        let out = tokio::task::spawn_blocking(move || {
            floor_disk::run(&base, size, group, warmup, duration)
        })
        .await
        .map_err(|e| format!("disk floor: {e}"))
        .and_then(|o| o);
        match out {
            Ok(o) => {
                prog.say(format!(
                    "durable floor, {group} entries of {} B per sync: {:.0} ops/s, round p50 {:.0} us",
                    o.entry_len, o.ops_per_sec, o.round_p50_us
                ));
                r.durable_floor.entry(shape).or_default().push(o);
            }
            Err(e) => r.errors.push(format!(
                "round {} durable floor {}x{}: {e}",
                round + 1,
                shape.0,
                shape.1
            )),
        }
    }
}

/// How one figure is read off a throughput outcome.
type Pick = fn(&Outcome) -> f64;

/// The figures of one throughput outcome, by name.
const FIGURES: [(&str, Pick); 4] = [
    ("ops/s", |o| o.ops_per_sec),
    ("latency p50 (us)", |o| o.latency.p50_us),
    ("latency p99 (us)", |o| o.latency.p99_us),
    ("server CPU per op (us)", |o| {
        o.server_cpu.map_or(f64::NAN, |c| c.us_per_op)
    }),
];

impl Report {
    /// The median of figure `f` over the rounds of one cell.
    fn med(&self, w: Workload, shape: (usize, usize), s: Server, f: fn(&Outcome) -> f64) -> f64 {
        self.throughput
            .get(&(w, shape, s))
            .map_or(f64::NAN, |v| median(&v.iter().map(f).collect::<Vec<_>>()))
    }

    /// zkd / tokio floor of figure `f`.
    pub fn ratio(&self, w: Workload, shape: (usize, usize), f: usize) -> f64 {
        let get = FIGURES[f].1;
        self.med(w, shape, Server::Zkd, get) / self.med(w, shape, Server::Tokio, get)
    }

    fn shapes(&self) -> Vec<(usize, usize)> {
        let mut v: Vec<_> = self.throughput.keys().map(|k| k.1).collect();
        v.sort();
        v.dedup();
        v
    }

    fn workloads(&self) -> Vec<Workload> {
        let mut v: Vec<_> = self.throughput.keys().map(|k| k.0).collect();
        v.sort();
        v.dedup();
        v
    }

    /// The throughput table: every figure of every cell on the three servers, and zkd over
    /// each floor.
    pub fn throughput_table(&self) -> Table {
        let mut t = Table::new(&[
            "workload",
            "shape",
            "figure",
            "zkd",
            "tokio floor",
            "epoll floor",
            "zkd/tokio",
            "zkd/epoll",
            "tokio/epoll",
        ]);
        for w in self.workloads() {
            for shape in self.shapes() {
                for (name, f) in FIGURES {
                    let [z, t1, e] = Server::ALL.map(|s| self.med(w, shape, s, f));
                    t.row(vec![
                        w.label().into(),
                        format!("{}x{}", shape.0, shape.1),
                        name.into(),
                        num(z),
                        num(t1),
                        num(e),
                        num(z / t1),
                        num(z / e),
                        num(t1 / e),
                    ]);
                }
            }
        }
        t
    }

    /// The median of figure `f` of one durable run at `shape`.
    fn durable_med(&self, run: DurableRun, shape: (usize, usize), f: Pick) -> f64 {
        self.durable
            .get(&(run, shape))
            .map_or(f64::NAN, |v| median(&v.iter().map(f).collect::<Vec<_>>()))
    }

    /// The disk floor's median of `f` at `shape`.
    fn disk_med(&self, shape: (usize, usize), f: fn(&floor_disk::Outcome) -> f64) -> f64 {
        self.durable_floor
            .get(&shape)
            .map_or(f64::NAN, |v| median(&v.iter().map(f).collect::<Vec<_>>()))
    }

    /// The durable table: zkd `--fsync always` against the disk floor at each shape, and
    /// what bounds it besides the disk (zkd in memory, the tokio floor).
    pub fn durable_table(&self) -> Table {
        let mut t = Table::new(&[
            "shape",
            "zkd always ops/s",
            "disk floor ops/s",
            "zkd always / disk floor",
            "zkd in memory ops/s",
            "tokio floor ops/s",
            "zkd always / min(disk, tokio floor)",
            "disk floor: entries per sync, entry B, write+sync p50 / p99 us",
            "zkd always p50 us",
            "zkd always CPU per op us",
            "zkd in memory CPU per op us",
        ]);
        let cpu: Pick = |o| o.server_cpu.map_or(f64::NAN, |c| c.us_per_op);
        for &shape in self.durable_floor.keys() {
            let ops = |run| self.durable_med(run, shape, |o| o.ops_per_sec);
            let always = ops(DurableRun::ZkdAlways);
            let disk = self.disk_med(shape, |o| o.ops_per_sec);
            let net = ops(DurableRun::TokioFloor);
            t.row(vec![
                format!("{}x{}", shape.0, shape.1),
                num(always),
                num(disk),
                num(always / disk),
                num(ops(DurableRun::ZkdMemory)),
                num(net),
                num(always / disk.min(net)),
                format!(
                    "{}, {}, {} / {}",
                    shape.0 * shape.1,
                    num(self.disk_med(shape, |o| o.entry_len as f64)),
                    num(self.disk_med(shape, |o| o.round_p50_us)),
                    num(self.disk_med(shape, |o| o.round_p99_us))
                ),
                num(self.durable_med(DurableRun::ZkdAlways, shape, |o| o.latency.p50_us)),
                num(self.durable_med(DurableRun::ZkdAlways, shape, cpu)),
                num(self.durable_med(DurableRun::ZkdMemory, shape, cpu)),
            ]);
        }
        t
    }

    /// zkd `--fsync always` / disk floor ops/s at `shape`.
    pub fn durable_ratio(&self, shape: (usize, usize)) -> f64 {
        self.durable_med(DurableRun::ZkdAlways, shape, |o| o.ops_per_sec)
            / self.disk_med(shape, |o| o.ops_per_sec)
    }

    /// The goals: get and set ops/s at 64×8 ≥ 0.8 of the tokio floor, p50 at 1×1 within
    /// 20 % of it, durable set at 64×8 ≥ 0.7 of the durable floor (those measured).
    pub fn goals(&self) -> Table {
        let mut t = Table::new(&["goal", "bound", "measured", "met"]);
        let mut row = |goal: String, bound: &str, m: f64, met: bool| {
            if m.is_finite() {
                let met = if met { "yes" } else { "NO" };
                t.row(vec![goal, bound.into(), num(m), met.into()]);
            }
        };
        for w in [Workload::Get, Workload::Set] {
            let m = self.ratio(w, (64, 8), 0);
            row(
                format!("{} 64x8 ops/s, zkd / tokio floor", w.key()),
                ">= 0.8",
                m,
                m >= 0.8,
            );
        }
        for w in [Workload::Get, Workload::Set] {
            let m = self.ratio(w, (1, 1), 1);
            row(
                format!("{} 1x1 latency p50, zkd / tokio floor", w.key()),
                "<= 1.2",
                m,
                m <= 1.2,
            );
        }
        let m = self.durable_ratio((64, 8));
        row(
            "durable set 64x8 ops/s, zkd always / durable floor".into(),
            ">= 0.7",
            m,
            m >= 0.7,
        );
        t
    }

    /// The whole report as text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "zkd against the floors: medians over {} round(s); getData/setData of {} B, durable setData of {} B\n",
            self.rounds, self.value_size, self.durable_value_size
        );
        let _ = writeln!(out, "{}", self.throughput_table().render());
        if !self.durable_floor.is_empty() {
            let _ = writeln!(out, "{}", self.durable_table().render());
        }
        let _ = writeln!(out, "goals:\n{}", self.goals().render());
        if !self.errors.is_empty() {
            let _ = writeln!(out, "ERRORS:");
            for e in &self.errors {
                let _ = writeln!(out, "  {e}");
            }
        }
        out
    }
}
