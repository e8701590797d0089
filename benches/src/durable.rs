//! Durable writes: setData of 100 B against servers that acknowledge a write only once it is
//! on disk — zkd `--data-dir --fsync always` and ZooKeeper `forceSync=yes` (its default) —
//! plus zkd `--fsync batch` for reference, each with its data directory under the same base
//! directory (same disk) in the same run. While the writes run, separate reader sessions
//! each keep one getData in flight, on a thread and runtime of their own (as separate client
//! processes would be); their latencies show whether reads wait for the disk. One group of
//! readers reads the nodes being written (under zkd `always` such a read waits for the sync
//! of the write it would show), another a node nobody writes (answered at once by zkd).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::comparison::{Comparison, Row, TargetCheck};
use crate::progress::Progress;
use crate::report::num;
use crate::servers::{Placement, ServerSpec};
use crate::throughput::{self, Workload};
use crate::util::BenchResult;
use crate::{Better, Figure, Figures};

/// Sizes and durations of the durable runs.
#[derive(Debug, Clone)]
pub struct Params {
    /// (connections, writes in flight per connection).
    pub shapes: Vec<(usize, usize)>,
    /// Reader sessions, one getData in flight each, during every write run.
    pub readers: usize,
    pub value_size: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// Where the servers' directories (and data directories) go; `None`: the system's
    /// temporary directory.
    pub base: Option<PathBuf>,
}

impl Params {
    pub fn full() -> Params {
        Params {
            shapes: vec![(1, 1), (16, 8), (64, 8)],
            readers: 4,
            value_size: 100,
            warmup: Duration::from_secs(2),
            duration: Duration::from_secs(6),
            base: None,
        }
    }

    pub fn quick() -> Params {
        Params {
            shapes: vec![(1, 1), (4, 4)],
            readers: 2,
            warmup: Duration::from_millis(100),
            duration: Duration::from_millis(400),
            ..Params::full()
        }
    }

    /// The base directory the data directories go under.
    pub fn base_dir(&self) -> PathBuf {
        self.base.clone().unwrap_or_else(std::env::temp_dir)
    }
}

/// Parses `CxW` (connections x writes in flight).
pub fn parse_shape(s: &str) -> Result<(usize, usize), String> {
    let (c, w) = s
        .split_once('x')
        .ok_or_else(|| format!("shape {s:?}: expected CxW, e.g. 16x8"))?;
    let n = |v: &str| {
        v.trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("shape {s:?}: {v:?} is not a positive number"))
    };
    Ok((n(c)?, n(w)?))
}

/// The three servers of a durable run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Config {
    /// zkd `--fsync always` (the zkd column).
    ZkdAlways,
    /// ZooKeeper `forceSync=yes` (the ZooKeeper column).
    ZooKeeper,
    /// zkd `--fsync batch`, its own rows (the ZooKeeper column repeats ZooKeeper's).
    ZkdBatch,
}

impl Config {
    pub fn label(self) -> &'static str {
        match self {
            Config::ZkdAlways => "zkd --fsync always",
            Config::ZooKeeper => "zookeeper forceSync=yes",
            Config::ZkdBatch => "zkd --fsync batch",
        }
    }
}

/// `durable set 100B 16x8` (zkd `always` against ZooKeeper), or with `zkd-batch` appended
/// (zkd `batch` against the same ZooKeeper runs).
pub fn item(value_size: usize, shape: (usize, usize), batch: bool) -> String {
    let base = format!("durable set {value_size}B {}x{}", shape.0, shape.1);
    if batch {
        format!("{base} zkd-batch")
    } else {
        base
    }
}

/// The figure of the reads issued during the writes (each of a node being written: under
/// zkd `always` such a read waits for the sync of the write it would show).
pub const READ_P99: &str = "getData p99 during the writes";

/// The reads, during the writes, of a node no request writes (they depend on nothing
/// unsynced and are answered at once by zkd; ZooKeeper holds every read behind its pending
/// flushes).
pub const UNRELATED_P50: &str = "getData p50 of an unwritten node during the writes";
pub const UNRELATED_P99: &str = "getData p99 of an unwritten node during the writes";

/// One write run against a running server, as figures of `item`.
pub async fn measure(
    addr: std::net::SocketAddr,
    pid: Option<u32>,
    shape: (usize, usize),
    item: &str,
    p: &Params,
    progress: &Progress,
) -> BenchResult<Figures> {
    let tp = throughput::Params {
        driver: throughput::Driver::Lean,
        sessions: shape.0,
        inflight: shape.1,
        workload: Workload::Set,
        value_size: p.value_size,
        warmup: p.warmup,
        duration: p.duration,
        readers: p.readers,
        unrelated_readers: true,
    };
    let o = throughput::run(addr, pid, &tp, progress).await?;
    let mut f = vec![
        ("ops/s", "ops/s", o.ops_per_sec, Better::Higher),
        ("latency p50", "us", o.latency.p50_us, Better::Lower),
        ("latency p99", "us", o.latency.p99_us, Better::Lower),
    ];
    if let Some(c) = o.server_cpu.map(|c| c.us_per_op) {
        f.push(("server CPU per op", "us", c, Better::Lower));
    }
    if let Some(r) = &o.readers {
        f.push((
            "getData p50 during the writes",
            "us",
            r.p50_us,
            Better::Lower,
        ));
        f.push((READ_P99, "us", r.p99_us, Better::Lower));
        f.push((
            "getData ops/s during the writes",
            "ops/s",
            r.ops as f64 / o.secs,
            Better::Higher,
        ));
    }
    if let Some(r) = &o.unrelated_readers {
        f.push((UNRELATED_P50, "us", r.p50_us, Better::Lower));
        f.push((UNRELATED_P99, "us", r.p99_us, Better::Lower));
    }
    Ok(Figures {
        figures: f
            .into_iter()
            .map(|(name, unit, v, b)| Figure::new(item, name, unit, v, b))
            .collect(),
        notes: Vec::new(),
    })
}

/// One round: each of the three servers is started fresh (data directory under the base),
/// runs every shape, and is stopped; the order alternates with the round. Figures go into
/// `c` (zkd `always` and ZooKeeper side by side; zkd `batch` in rows of its own next to the
/// same ZooKeeper figures), failures into `c.errors`.
pub async fn round(
    zkd: &ServerSpec,
    zookeeper: &ServerSpec,
    p: &Params,
    round: usize,
    progress: &Progress,
    c: &mut Comparison,
) {
    let mut configs = [Config::ZkdAlways, Config::ZooKeeper, Config::ZkdBatch];
    configs.rotate_left(round % 3);
    let place = Placement {
        cpus: None,
        base: Some(p.base_dir()),
    };
    let mut zk_figs: Vec<((usize, usize), Figures)> = Vec::new();
    let mut batch_figs: Vec<((usize, usize), Figures)> = Vec::new();
    for config in configs {
        let spec = match config {
            Config::ZkdAlways => zkd.durable("always"),
            Config::ZooKeeper => zookeeper.durable("always"),
            Config::ZkdBatch => zkd.durable("batch"),
        };
        let what = format!("round {} durable {}", round + 1, config.label());
        let prog = progress.sub(format!("round {} {}", round + 1, config.label()));
        let server = match spec.start_with(&place, Duration::from_secs(60)).await {
            Ok(s) => s,
            Err(e) => {
                c.errors.push(format!("{what}: starting: {e}"));
                continue;
            }
        };
        for &shape in &p.shapes {
            let name = item(p.value_size, shape, config == Config::ZkdBatch);
            match measure(server.addr(), Some(server.pid()), shape, &name, p, &prog).await {
                Ok(figs) => match config {
                    Config::ZkdAlways => c.add(0, &figs, round),
                    Config::ZooKeeper => {
                        c.add(1, &figs, round);
                        zk_figs.push((shape, figs));
                    }
                    Config::ZkdBatch => batch_figs.push((shape, figs)),
                },
                Err(e) => c
                    .errors
                    .push(format!("{what} {}x{}: {e}", shape.0, shape.1)),
            }
        }
        drop(server);
    }
    // The batch rows: zkd `batch` against the same ZooKeeper figures.
    for (shape, figs) in batch_figs {
        c.add(0, &figs, round);
        if let Some((_, zk)) = zk_figs.iter().find(|(s, _)| *s == shape) {
            let mut zk = zk.clone();
            let name = item(p.value_size, shape, true);
            for f in &mut zk.figures {
                f.item = name.clone();
            }
            c.add(1, &zk, round);
        }
    }
}

/// The targets of the durable rows found in `c`: zkd `always` against ZooKeeper
/// `forceSync=yes`, ≥ 2× at 16 connections and more, ≥ 1× below; reads during the writes
/// of a node nobody writes p99 ≤ 1 ms on zkd (a read of a node being written waits for the
/// sync of what it shows, so it has no such target).
pub fn targets(c: &Comparison) -> Vec<TargetCheck> {
    let mut items: Vec<((usize, usize), &str)> = c
        .rows
        .iter()
        .filter_map(|r| match r.item.split(' ').collect::<Vec<_>>()[..] {
            ["durable", "set", _, shape] => parse_shape(shape).ok().map(|s| (s, r.item.as_str())),
            _ => None,
        })
        .collect();
    items.sort();
    items.dedup();
    let mut out = Vec::new();
    for (shape, name) in items {
        let bound = if shape.0 >= 16 { 2.0 } else { 1.0 };
        let row = c.find(name, "ops/s");
        let measured = row.map(Row::ratio).filter(|v| v.is_finite());
        out.push(TargetCheck {
            target: format!("ops/s, {name}, zkd always / ZooKeeper forceSync=yes"),
            bound: format!(">= {}", num(bound)),
            measured,
            met: measured.map(|m| m >= bound),
        });
        let read = c.find(name, UNRELATED_P99).map(Row::zkd_median);
        let read = read.filter(|v| v.is_finite());
        out.push(TargetCheck {
            target: format!("{UNRELATED_P99}, {name}, zkd"),
            bound: "<= 1000 us (zkd)".into(),
            measured: read,
            met: read.map(|m| m <= 1000.0),
        });
    }
    out
}

/// The file system the data directories are on (mount point, type, device), for reports.
pub fn filesystem_of(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && dir.starts_with(f[1])).then(|| (f[1].len(), f[0], f[1], f[2]))
        })
        .max_by_key(|m| m.0)
        .map_or("unknown".into(), |(_, dev, at, ty)| {
            format!("{ty} on {dev} mounted at {at}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse() {
        assert_eq!(parse_shape("16x8"), Ok((16, 8)));
        assert!(parse_shape("16").is_err());
        assert!(parse_shape("0x8").is_err());
        assert_eq!(item(100, (1, 1), false), "durable set 100B 1x1");
        assert_eq!(item(100, (64, 8), true), "durable set 100B 64x8 zkd-batch");
    }

    #[test]
    fn targets_of_the_durable_rows() {
        let csv = "item,figure,unit,server,round,value\n\
            durable set 100B 16x8,ops/s,ops/s,zkd,1,150000\n\
            durable set 100B 16x8,ops/s,ops/s,zookeeper,1,70000\n\
            durable set 100B 16x8,getData p99 during the writes,us,zkd,1,5000\n\
            durable set 100B 16x8,getData p99 of an unwritten node during the writes,us,zkd,1,800\n\
            durable set 100B 1x1,ops/s,ops/s,zkd,1,2000\n\
            durable set 100B 1x1,ops/s,ops/s,zookeeper,1,2400\n";
        let c = crate::comparison::from_csv(csv).unwrap();
        let t = targets(&c);
        let met: Vec<Option<bool>> = t.iter().map(|t| t.met).collect();
        // 1x1: 0.83 < 1, no read figure; 16x8: 2.14 >= 2, 800 us <= 1 ms.
        assert_eq!(met, [Some(false), None, Some(true), Some(true)]);
    }
}
