//! `zkd-bench floor --throughput`: zkd against the machine's floors, measured with the same
//! client in the same run. getData and setData of 1 KiB at each shape (connections × requests
//! in flight) on zkd, on the tokio floor ([`crate::floor_tokio`]) and on the epoll floor
//! ([`crate::floor_epoll`]), each a process of its own whose CPU time is read; then setData of
//! 100 B on zkd `--fsync always` against the durable floor ([`crate::floor_disk`]) at each
//! durable shape, the floor's group being the writes in flight. Rounds alternate which server
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
    /// shape → zkd `--fsync always` outcomes, one per round.
    pub durable_zkd: BTreeMap<(usize, usize), Vec<Outcome>>,
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
    let (bin, size) = (p.floor_bin.clone(), p.value_size);
    tokio::task::spawn_blocking(move || FloorProcess::spawn_kind(&bin, kind, size))
        .await
        .map_err(|e| format!("floor: {e}"))?
        .map(Running::Floor)
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

/// zkd `--fsync always` and the durable floor, one after the other (which first alternates).
async fn durable_round(
    zkd: &ServerSpec,
    p: &Params,
    round: usize,
    progress: &Progress,
    r: &mut Report,
) {
    let d = &p.durable;
    let prog = progress.sub(format!("round {}/{} durable", round + 1, p.rounds));
    let first = round.is_multiple_of(2);
    for zkd_turn in [first, !first] {
        if zkd_turn {
            let place = Placement {
                cpus: None,
                base: Some(d.base_dir()),
            };
            let server = match zkd
                .durable("always")
                .start_with(&place, Duration::from_secs(60))
                .await
            {
                Ok(s) => s,
                Err(e) => {
                    r.errors
                        .push(format!("round {} durable zkd: {e}", round + 1));
                    continue;
                }
            };
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
                match throughput::run(server.addr(), Some(server.pid()), &tp, &prog).await {
                    Ok(o) => r.durable_zkd.entry(shape).or_default().push(o),
                    Err(e) => r.errors.push(format!(
                        "round {} durable zkd {}x{}: {e}",
                        round + 1,
                        shape.0,
                        shape.1
                    )),
                }
            }
        } else {
            for &shape in &d.shapes {
                let (base, size, warmup, duration) =
                    (d.base_dir(), d.value_size, d.warmup, d.duration);
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
        o.server_cpu_us_per_op.unwrap_or(f64::NAN)
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

    /// The durable table: zkd `--fsync always` against the floor at each shape.
    pub fn durable_table(&self) -> Table {
        let mut t = Table::new(&[
            "shape",
            "zkd always ops/s",
            "floor ops/s",
            "zkd/floor",
            "floor group",
            "floor entry (B)",
            "floor write+sync p50 (us)",
            "floor write+sync p99 (us)",
            "zkd p50 (us)",
            "zkd CPU per op (us)",
        ]);
        for (shape, floors) in &self.durable_floor {
            let fm = |f: fn(&floor_disk::Outcome) -> f64| {
                median(&floors.iter().map(f).collect::<Vec<_>>())
            };
            let zm = |f: fn(&Outcome) -> f64| {
                self.durable_zkd
                    .get(shape)
                    .map_or(f64::NAN, |v| median(&v.iter().map(f).collect::<Vec<_>>()))
            };
            let (z, fl) = (zm(|o| o.ops_per_sec), fm(|o| o.ops_per_sec));
            t.row(vec![
                format!("{}x{}", shape.0, shape.1),
                num(z),
                num(fl),
                num(z / fl),
                (shape.0 * shape.1).to_string(),
                num(fm(|o| o.entry_len as f64)),
                num(fm(|o| o.round_p50_us)),
                num(fm(|o| o.round_p99_us)),
                num(zm(|o| o.latency.p50_us)),
                num(zm(|o| o.server_cpu_us_per_op.unwrap_or(f64::NAN))),
            ]);
        }
        t
    }

    /// zkd / durable floor ops/s at `shape`.
    pub fn durable_ratio(&self, shape: (usize, usize)) -> f64 {
        let z = self.durable_zkd.get(&shape).map_or(f64::NAN, |v| {
            median(&v.iter().map(|o| o.ops_per_sec).collect::<Vec<_>>())
        });
        let f = self.durable_floor.get(&shape).map_or(f64::NAN, |v| {
            median(&v.iter().map(|o| o.ops_per_sec).collect::<Vec<_>>())
        });
        z / f
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
        if !self.durable_floor.is_empty() || !self.durable_zkd.is_empty() {
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
