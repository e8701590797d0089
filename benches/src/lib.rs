//! zkd-bench: herd effect, throughput, fan-out and footprint of a ZooKeeper-protocol server,
//! zkd and Apache ZooKeeper side by side.
//!
//! Every benchmark talks the wire protocol through `zkd_testkit::raw::RawClient` to an
//! address, so it runs against any server; CPU time and memory come from `/proc/<pid>` when
//! the server's process id is known. Each benchmark checks what it measures (the right
//! leader, no lost or duplicate notification, every request answered without error) and
//! fails instead of reporting numbers from a broken run.

pub mod admin_stall;
pub mod changes;
pub mod compare;
pub mod comparison;
pub mod cpus;
pub mod durable;
pub mod ensemble_startup;
mod epoll;
pub mod fanout;
pub mod floor;
pub mod floor_disk;
mod floor_epoll;
pub mod floor_reply;
pub mod floor_run;
mod floor_tokio;
pub mod footprint;
pub mod herd;
pub mod plot;
pub mod pool;
pub mod proc;
pub mod progress;
pub mod report;
pub mod servers;
pub mod snapshot;
pub mod throughput;
pub mod util;
pub mod watchers;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::herd::{Failure, Mode};
use crate::progress::Progress;
use crate::throughput::Workload;
use crate::util::{median, BenchResult};

/// Sizes, counts and durations of every benchmark.
#[derive(Debug, Clone)]
pub struct Settings {
    pub herd: HerdSettings,
    pub tp: ThroughputSettings,
    pub fan: FanoutSettings,
    /// The `zkd-bench` binary that runs the fan-out floor as a child process of its own
    /// (`None`: on a thread of this process, sharing its descriptor limit).
    pub floor_bin: Option<PathBuf>,
    pub footprint: footprint::Params,
    /// Rounds of `compare` (each item runs once per round on each server).
    pub rounds: usize,
    /// The CPU set the server of the throughput items is pinned to (names the items).
    pub server_cpus: Option<cpus::CpuSet>,
    /// The CPU sets `--server-cpus` asked for: the throughput items run once per set.
    pub cpu_sets: Vec<cpus::CpuSet>,
    pub durable: durable::Params,
}

/// Leader election with every follower watching the parent (a herd) or its predecessor.
#[derive(Debug, Clone)]
pub struct HerdSettings {
    /// How the leader fails.
    pub failure: Failure,
    /// Followers per run.
    pub n: Vec<usize>,
    pub modes: Vec<Mode>,
    /// Leader failures per run in herd mode.
    pub failures: usize,
    /// Leader failures per run in predecessor mode (each costs two round trips, so many
    /// are cheap; the figure sits at the machine's wake-up noise and needs them).
    pub pred_failures: usize,
    pub settle: Duration,
    pub timeout: Duration,
}

/// The throughput workloads: sessions, requests in flight per session, value size, and the
/// warm-up and measured windows.
#[derive(Debug, Clone)]
pub struct ThroughputSettings {
    pub driver: throughput::Driver,
    pub workloads: Vec<Workload>,
    pub sessions: usize,
    pub inflight: usize,
    pub value_size: usize,
    pub warmup: Duration,
    pub duration: Duration,
}

/// One write notifying many watchers.
#[derive(Debug, Clone)]
pub struct FanoutSettings {
    /// Watchers per run.
    pub watchers: Vec<usize>,
    pub writes: usize,
    pub settle: Duration,
    pub timeout: Duration,
}

impl Settings {
    /// The full benchmark (tens of minutes for `compare`).
    pub fn full() -> Settings {
        Settings {
            herd: HerdSettings {
                failure: Failure::Delete,
                n: vec![10, 100, 1000, 5000, 10000],
                modes: vec![Mode::Herd, Mode::Predecessor],
                failures: 4,
                pred_failures: 16,
                settle: Duration::from_millis(100),
                timeout: Duration::from_secs(180),
            },
            tp: ThroughputSettings {
                driver: throughput::Driver::Lean,
                workloads: Workload::ALL.to_vec(),
                sessions: 64,
                inflight: 8,
                value_size: 1024,
                warmup: Duration::from_secs(3),
                duration: Duration::from_secs(8),
            },
            fan: FanoutSettings {
                watchers: vec![1000, 10000],
                writes: 5,
                settle: Duration::from_millis(100),
                timeout: Duration::from_secs(60),
            },
            floor_bin: None,
            footprint: footprint::Params {
                startups: 5,
                znodes: vec![100_000, 1_000_000],
                znode_size: 100,
                sessions: 19_000,
                max_sessions: 20_000,
                watches: 300_000,
                settle: Duration::from_secs(1),
                timer: None,
            },
            rounds: 3,
            server_cpus: None,
            cpu_sets: Vec::new(),
            durable: durable::Params::full(),
        }
    }

    /// A smoke run: every code path, small sizes, seconds.
    pub fn quick() -> Settings {
        let full = Settings::full();
        Settings {
            herd: HerdSettings {
                n: vec![10, 40],
                failures: 3,
                pred_failures: 3,
                settle: Duration::from_millis(20),
                timeout: Duration::from_secs(20),
                ..full.herd
            },
            tp: ThroughputSettings {
                sessions: 4,
                inflight: 4,
                warmup: Duration::from_millis(100),
                duration: Duration::from_millis(400),
                ..full.tp
            },
            fan: FanoutSettings {
                watchers: vec![50],
                writes: 2,
                settle: Duration::from_millis(20),
                timeout: Duration::from_secs(20),
            },
            footprint: footprint::Params {
                startups: 2,
                znodes: vec![2000],
                znode_size: 100,
                sessions: 100,
                max_sessions: 300,
                watches: 5000,
                settle: Duration::from_millis(100),
                timer: None,
            },
            rounds: 1,
            durable: durable::Params::quick(),
            ..full
        }
    }
}

/// Whether a smaller or a larger value of a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    /// Informational (counts that should be equal, etc.).
    Neither,
}

/// One measured number.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// What was run, e.g. `herd N=1000 predecessor`, `throughput get 64x8`.
    pub item: String,
    /// What was measured, e.g. `time to quiet`.
    pub name: String,
    pub unit: &'static str,
    pub value: f64,
    pub better: Better,
    /// For plots: the series (`herd`, `predecessor`, a workload) and x value (N).
    pub series: Option<String>,
    pub x: Option<f64>,
    /// The single measurements `value` is the median of, when a comparison should pool
    /// them over its rounds (the median of all of them, not the median of round medians).
    pub samples: Vec<f64>,
}

impl Figure {
    pub fn new(item: &str, name: &str, unit: &'static str, value: f64, better: Better) -> Figure {
        Figure {
            item: item.to_string(),
            name: name.to_string(),
            unit,
            value,
            better,
            series: None,
            x: None,
            samples: Vec::new(),
        }
    }

    fn at(mut self, series: &str, x: Option<f64>) -> Figure {
        self.series = Some(series.to_string());
        self.x = x;
        self
    }
}

/// Figures of one item plus remarks that are not numbers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub figures: Vec<Figure>,
    pub notes: Vec<String>,
}

/// One figure: name, unit, value and which way is better.
type FigureRow<'a> = (&'a str, &'static str, f64, Better);

/// The median server CPU time of `samples` as a row, when every sample has one.
fn server_cpu_row<T>(
    name: &'static str,
    samples: &[T],
    cpu: impl Fn(&T) -> Option<Duration>,
) -> Option<FigureRow<'static>> {
    let ms: Option<Vec<f64>> = samples.iter().map(|x| cpu(x).map(util::ms)).collect();
    ms.map(|v| (name, "ms", median(&v), Better::Lower))
}

impl Figures {
    /// The figures of `item`, all in plot series `series` at `x`, one per row.
    fn series(item: &str, series: &str, x: Option<f64>, rows: &[FigureRow]) -> Figures {
        Figures {
            figures: rows
                .iter()
                .map(|&(name, unit, value, better)| {
                    Figure::new(item, name, unit, value, better).at(series, x)
                })
                .collect(),
            notes: Vec::new(),
        }
    }
}

pub fn herd_item(mode: Mode, n: usize) -> String {
    format!("herd N={n} {}", mode.label())
}

/// The herd figures measured once per failure, by name: how to read one failure's value.
fn per_failure(name: &str) -> Option<fn(&herd::FailureStats) -> Option<f64>> {
    match name {
        "time until next leader knows" => Some(|f| Some(util::ms(f.leader_known))),
        "time until all quiet" => Some(|f| Some(util::ms(f.quiet))),
        "server CPU per failure" => Some(|f| f.server_cpu.map(util::ms)),
        _ => None,
    }
}

/// One herd run as figures (medians over the failures; the per-failure times and CPU carry
/// every failure as samples, so `compare` takes the median over all failures of all rounds).
async fn herd_figures(mode: Mode, n: usize, at: At<'_>) -> BenchResult<Figures> {
    let s = at.s;
    let p = herd::Params {
        n,
        mode,
        failures: match mode {
            Mode::Herd => s.herd.failures,
            Mode::Predecessor => s.herd.pred_failures,
        }
        .min(n - 1),
        failure: s.herd.failure,
        settle: s.herd.settle,
        timeout: s.herd.timeout,
        pid: at.pid,
    };
    let out = herd::run(at.addr, &p, at.progress).await?;
    let item = herd_item(mode, n);
    let med = |f: &dyn Fn(&herd::FailureStats) -> f64| {
        median(&out.failures.iter().map(f).collect::<Vec<_>>())
    };
    let mut rows = vec![
        (
            "time until next leader knows",
            "ms",
            med(&|f| util::ms(f.leader_known)),
            Better::Lower,
        ),
        (
            "time until all quiet",
            "ms",
            med(&|f| util::ms(f.quiet)),
            Better::Lower,
        ),
        (
            "notifications per failure",
            "",
            med(&|f| f.notifications as f64),
            Better::Neither,
        ),
        (
            "requests per failure",
            "",
            med(&|f| f.requests as f64),
            Better::Neither,
        ),
        (
            "server bytes per failure",
            "B",
            med(&|f| f.bytes as f64),
            Better::Lower,
        ),
        ("set-up time", "s", out.setup.as_secs_f64(), Better::Lower),
    ];
    rows.extend(server_cpu_row(
        "server CPU per failure",
        &out.failures,
        |f| f.server_cpu,
    ));
    let mut figs = Figures::series(&item, mode.label(), Some(n as f64), &rows);
    for fig in &mut figs.figures {
        if let Some(of) = per_failure(&fig.name) {
            fig.samples = out.failures.iter().filter_map(of).collect();
        }
    }
    Ok(figs)
}

/// One measured item: a throughput workload, a fan-out size or a herd run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    Throughput(Workload),
    Fanout(usize),
    /// The fan-out floor ([`floor`]); it runs in each server's turn, without the server.
    Floor(usize),
    /// A throughput floor ([`floor_tokio`] or [`floor_epoll`]) under a throughput workload
    /// at the settings' shape; it runs in each server's turn, without the server.
    ThroughputFloor(floor::FloorKind, Workload),
    Herd(Mode, usize),
}

impl Item {
    /// The throughput workloads of the settings.
    pub fn throughput(s: &Settings) -> Vec<Item> {
        s.tp.workloads
            .iter()
            .map(|w| Item::Throughput(*w))
            .collect()
    }

    /// The fan-out sizes of the settings, each followed by its floor.
    pub fn fanout(s: &Settings) -> Vec<Item> {
        s.fan
            .watchers
            .iter()
            .flat_map(|w| [Item::Fanout(*w), Item::Floor(*w)])
            .collect()
    }

    /// The throughput floors under getData and setData (those of the settings' workloads).
    pub fn throughput_floors(s: &Settings) -> Vec<Item> {
        let kinds = [floor::FloorKind::Tokio, floor::FloorKind::Epoll];
        [Workload::Get, Workload::Set]
            .into_iter()
            .filter(|w| s.tp.workloads.contains(w))
            .flat_map(|w| kinds.map(|k| Item::ThroughputFloor(k, w)))
            .collect()
    }

    /// Every herd size in every mode of the settings.
    pub fn herd(s: &Settings) -> Vec<Item> {
        let modes = |n: usize| s.herd.modes.iter().map(move |m| Item::Herd(*m, n));
        s.herd.n.iter().flat_map(|n| modes(*n)).collect()
    }

    /// Its name in tables and progress lines.
    pub fn label(&self, s: &Settings) -> String {
        match *self {
            Item::Throughput(w) => throughput_item(w, s),
            Item::Fanout(w) => fanout_item(w),
            Item::Floor(w) => floor_item(w),
            Item::ThroughputFloor(k, w) => throughput_floor_item(k, w, s),
            Item::Herd(m, n) => herd_item(m, n),
        }
    }

    /// Runs it against `addr` (`pid`: the server process, for CPU and RSS figures).
    pub async fn figures(
        self,
        addr: SocketAddr,
        pid: Option<u32>,
        s: &Settings,
        progress: &Progress,
    ) -> BenchResult<Figures> {
        let at = At {
            addr,
            pid,
            s,
            progress,
        };
        match self {
            Item::Throughput(w) => throughput_figures(w, at).await,
            Item::Fanout(w) => fanout_figures(w, at).await,
            Item::Floor(w) => floor_figures(w, at).await,
            Item::ThroughputFloor(k, w) => throughput_floor_figures(k, w, at).await,
            Item::Herd(m, n) => herd_figures(m, n, at).await,
        }
    }
}

/// Where and how one item runs: the server (`pid` for CPU and RSS figures), the settings,
/// the progress line.
#[derive(Clone, Copy)]
struct At<'a> {
    addr: SocketAddr,
    pid: Option<u32>,
    s: &'a Settings,
    progress: &'a Progress,
}

/// `throughput get 64x8`, or `throughput get 64x8 cpus=0,1` when the server is pinned.
pub fn throughput_item(w: Workload, s: &Settings) -> String {
    let base = format!("throughput {} {}x{}", w.key(), s.tp.sessions, s.tp.inflight);
    match &s.server_cpus {
        Some(cpus) => format!("{base} cpus={cpus}"),
        None => base,
    }
}

/// The plot series of a throughput item: the workload, with the server's CPU set if pinned.
fn throughput_series(w: Workload, s: &Settings) -> String {
    match &s.server_cpus {
        Some(cpus) => format!("{} cpus={cpus}", w.key()),
        None => w.key().to_string(),
    }
}

/// One throughput run as figures.
async fn throughput_figures(w: Workload, at: At<'_>) -> BenchResult<Figures> {
    let s = at.s;
    let p = throughput::Params {
        driver: s.tp.driver,
        sessions: s.tp.sessions,
        inflight: s.tp.inflight,
        workload: w,
        value_size: s.tp.value_size,
        warmup: s.tp.warmup,
        duration: s.tp.duration,
        readers: 0,
        unrelated_readers: false,
    };
    let o = throughput::run(at.addr, at.pid, &p, at.progress).await?;
    let item = throughput_item(w, s);
    let mut rows = vec![
        ("ops/s", "ops/s", o.ops_per_sec, Better::Higher),
        ("latency p50", "us", o.latency.p50_us, Better::Lower),
        ("latency p99", "us", o.latency.p99_us, Better::Lower),
        ("latency p99.9", "us", o.latency.p999_us, Better::Lower),
    ];
    if let Some(c) = o.server_cpu {
        rows.push(("server CPU per op", "us", c.us_per_op, Better::Lower));
        rows.push(("server CPU (cores)", "", c.cores, Better::Neither));
    }
    rows.push((
        "bench client CPU (cores)",
        "",
        o.client_cores,
        Better::Neither,
    ));
    Ok(Figures::series(
        &item,
        &throughput_series(w, s),
        None,
        &rows,
    ))
}

/// `floor tokio get 64x8`: a throughput floor's item.
pub fn throughput_floor_item(kind: floor::FloorKind, w: Workload, s: &Settings) -> String {
    format!(
        "floor {} {} {}x{}",
        kind.key(),
        w.key(),
        s.tp.sessions,
        s.tp.inflight
    )
}

/// A throughput floor in a child process (the binary the settings name), measured with the
/// throughput client as zkd's throughput item is (the server of `at` is not used).
async fn throughput_floor_figures(
    kind: floor::FloorKind,
    w: Workload,
    at: At<'_>,
) -> BenchResult<Figures> {
    let s = at.s;
    let bin = s
        .floor_bin
        .clone()
        .ok_or("the throughput floors run as child processes of the zkd-bench binary")?;
    let size = s.tp.value_size;
    // From this runtime thread: see `floor::FloorProcess` on which thread a child dies with.
    let server = floor::FloorProcess::spawn_kind(&bin, kind, size)?;
    let floor_at = At {
        addr: server.addr(),
        pid: Some(server.pid()),
        ..at
    };
    let mut f = throughput_figures(w, floor_at).await?;
    drop(server);
    let item = throughput_floor_item(kind, w, s);
    for fig in &mut f.figures {
        fig.item = item.clone();
        fig.series = Some(format!("floor {}", kind.key()));
    }
    Ok(f)
}

pub fn fanout_item(w: usize) -> String {
    format!("fanout W={w}")
}

/// One fan-out run as figures (medians over the writes).
async fn fanout_figures(watchers: usize, at: At<'_>) -> BenchResult<Figures> {
    let o = fanout::run(at.addr, &fanout_params(watchers, at.pid, at.s), at.progress).await?;
    Ok(fan_figures(&fanout_item(watchers), "fanout", &o))
}

pub fn floor_item(w: usize) -> String {
    format!("floor W={w}")
}

/// The fan-out floor ([`floor`]) for `watchers`, measured with the fan-out client (the
/// server of `at` is not used): in a child process when the settings name the binary (its
/// CPU time per write is then measured too), else on a thread of this process.
async fn floor_figures(watchers: usize, at: At<'_>) -> BenchResult<Figures> {
    let o = match at.s.floor_bin.clone() {
        Some(bin) => {
            // From this runtime thread: see `floor::FloorProcess` on which thread a child
            // dies with.
            let server = floor::FloorProcess::spawn(&bin)?;
            let p = fanout_params(watchers, Some(server.pid()), at.s);
            let o = fanout::run(server.addr(), &p, at.progress).await;
            drop(server);
            o?
        }
        None => {
            let server = floor::FloorServer::start()?;
            let p = fanout_params(watchers, None, at.s);
            let o = fanout::run(server.addr(), &p, at.progress).await;
            drop(server);
            o?
        }
    };
    Ok(fan_figures(&floor_item(watchers), "floor", &o))
}

/// The floor alone, for `zkd-bench floor`.
pub async fn floor_only(
    watchers: usize,
    s: &Settings,
    progress: &Progress,
) -> BenchResult<Figures> {
    let at = At {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        pid: None,
        s,
        progress,
    };
    floor_figures(watchers, at).await
}

fn fanout_params(watchers: usize, pid: Option<u32>, s: &Settings) -> fanout::Params {
    fanout::Params {
        watchers,
        writes: s.fan.writes,
        settle: s.fan.settle,
        timeout: s.fan.timeout,
        pid,
    }
}

/// Medians over the writes of one fan-out run, as figures of `item` in plot series `series`.
fn fan_figures(item: &str, series: &str, o: &fanout::Outcome) -> Figures {
    let med =
        |f: &dyn Fn(&fanout::Sample) -> f64| median(&o.samples.iter().map(f).collect::<Vec<_>>());
    let last = med(&|s| util::ms(s.last));
    let half = med(&|s| util::ms(s.median));
    let first = med(&|s| util::ms(s.first));
    let mut rows = vec![
        (
            "time until last watcher notified",
            "ms",
            last,
            Better::Lower,
        ),
        ("time until half notified", "ms", half, Better::Lower),
        ("time until first notified", "ms", first, Better::Lower),
    ];
    rows.extend(server_cpu_row("server CPU per write", &o.samples, |s| {
        s.server_cpu
    }));
    Figures::series(item, series, Some(o.watchers as f64), &rows)
}

pub const FOOTPRINT: &str = "footprint";

/// Name of the RSS-per-znode figure of one tree size.
pub fn znode_figure(size: usize, count: usize) -> String {
    format!("RSS per znode ({size} B data, {count} znodes)")
}

/// Name of the RSS-per-watch figure.
pub fn watch_figure(count: usize) -> String {
    format!("RSS per watch ({count} exists-watches, one session)")
}

/// RSS above its value before the watches, [`footprint::RELEASE_WAIT`] after their session
/// ended.
pub const WATCH_RELEASE_FIGURE: &str = "RSS still held 5 s after the watching session ended";

/// Time after the watching session ended until the RSS was within
/// [`footprint::RELEASE_MARGIN`] of its value before the watches.
pub const WATCH_RELEASE_TIME_FIGURE: &str =
    "time until RSS within 20 MiB of its value before the watches";

/// Footprint figures; start-up and RSS only where known.
pub fn footprint_figures(o: &footprint::Outcome, s: &Settings) -> Figures {
    let lower = |name: &str, unit: &'static str, value: f64| {
        Figure::new(FOOTPRINT, name, unit, value, Better::Lower)
    };
    let mut f = Vec::new();
    if !o.startup.is_empty() {
        let v: Vec<f64> = o.startup.iter().map(|d| util::ms(*d)).collect();
        f.push(lower("start-up to first handshake", "ms", median(&v)));
    }
    if let Some(r) = o.idle_rss {
        f.push(lower("idle RSS", "MiB", r as f64 / (1 << 20) as f64));
    }
    for z in &o.znodes {
        if let Some(b) = z.per_item() {
            f.push(lower(
                &znode_figure(s.footprint.znode_size, z.count),
                "B",
                b,
            ));
        }
        f.push(lower(
            &format!(
                "create {} znodes ({} sessions, {} in flight)",
                z.count,
                footprint::CREATE_SESSIONS,
                footprint::CREATES_IN_FLIGHT
            ),
            "s",
            z.secs,
        ));
    }
    if let Some(b) = o.sessions.per_item() {
        f.push(lower("RSS per idle session", "B", b));
    }
    f.push(lower(
        &format!("open {} sessions", o.sessions.count),
        "s",
        o.sessions.secs,
    ));
    f.push(Figure::new(
        FOOTPRINT,
        "max concurrent sessions",
        "",
        o.max_sessions.opened as f64,
        Better::Higher,
    ));
    if let Some(w) = &o.watches {
        if let Some(b) = w.growth.per_item() {
            f.push(lower(&watch_figure(w.growth.count), "B", b));
        }
        f.push(lower(
            &format!("set {} exists-watches (one session)", w.growth.count),
            "s",
            w.growth.secs,
        ));
        if let Some(held) = w.held_after_release() {
            f.push(lower(WATCH_RELEASE_FIGURE, "MiB", held / (1 << 20) as f64));
        }
        if let Some(d) = w.back_within_margin {
            f.push(lower(WATCH_RELEASE_TIME_FIGURE, "s", d.as_secs_f64()));
        }
    }
    let m = &o.max_sessions;
    let mut notes = vec![format!(
        "max sessions: {} open (bound {}), stopped by: {}; bench fd limit soft {} (raised from {}) hard {}; server fd limit {}, server fds open at the peak {}",
        m.opened,
        m.bound,
        m.stopped_by,
        m.fd.soft,
        m.fd.soft_before,
        m.fd.hard,
        m.server_fd_limit.map_or("n/a".into(), |v| v.to_string()),
        m.server_fds_open.map_or("n/a".into(), |v| v.to_string()),
    )];
    if let Some(w) = o
        .watches
        .as_ref()
        .filter(|w| w.back_within_margin.is_none())
    {
        notes.push(format!(
            "watches: RSS not back within {} MiB of its value before the {} watches within {} s of the session ending",
            footprint::RELEASE_MARGIN >> 20,
            w.growth.count,
            footprint::RELEASE_WATCH_FOR.as_secs()
        ));
    }
    Figures { figures: f, notes }
}

/// Renders figures of one server as a table.
pub fn figures_table(figs: &[Figure]) -> report::Table {
    let mut t = report::Table::new(&["item", "figure", "value", "unit"]);
    for f in figs {
        t.row(vec![
            f.item.clone(),
            f.name.clone(),
            report::num(f.value),
            f.unit.to_string(),
        ]);
    }
    t
}
