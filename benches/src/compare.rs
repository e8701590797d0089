//! zkd and Apache ZooKeeper side by side: every item runs on both servers, alternating
//! which goes first, for several rounds; the table shows the medians and their ratio, and
//! the targets say whether zkd is as far ahead as it should be.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::comparison::{csv_field, Comparison, Row, TargetCheck};
use crate::herd::Mode;
use crate::progress::Progress;
use crate::report::{num, Table};
use crate::servers::{Placement, ServerProcess, ServerSpec};
use crate::throughput::Workload;
use crate::util::BenchResult;
use crate::{footprint, Figures, Item, Settings};

/// Which groups of items to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Group {
    Footprint,
    Throughput,
    Fanout,
    Herd,
    /// setData against servers that sync before acknowledging.
    Durable,
    /// The throughput floors (tokio and epoll) under getData and setData at the throughput
    /// shape, and the durable floor at the durable shapes, each measured in each server's
    /// turn; zkd / floor comes from zkd's throughput and durable rows.
    Floor,
}

pub struct Options {
    pub zkd: ServerSpec,
    pub zookeeper: ServerSpec,
    pub settings: Settings,
    pub groups: Vec<Group>,
    pub out_dir: PathBuf,
    /// Stop starting new items after this long.
    pub budget: Duration,
    /// A measurement during which other processes kept more cores than this busy (user
    /// mode, on average) is repeated, up to `attempts` runs in all.
    pub max_bystander_cores: f64,
    pub attempts: usize,
    pub progress: bool,
}

/// A bound on zkd's own median of `row` (not a ratio).
fn zkd_at_most(target: String, row: Option<&Row>, bound: f64, unit: &str) -> TargetCheck {
    let measured = row.map(Row::zkd_median).filter(|v| v.is_finite());
    TargetCheck {
        target,
        bound: format!("<= {} {unit} (zkd)", num(bound)),
        measured,
        met: measured.map(|m| m <= bound),
    }
}

/// Evaluates the targets from the task description against the measured ratios.
pub fn targets(c: &Comparison, s: &Settings) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    let le = |target: String, row: Option<&Row>, bound: f64| {
        TargetCheck::ratio(target, row, format!("<= {}", num(bound)), move |m| {
            m <= bound
        })
    };
    let fp = crate::FOOTPRINT;
    out.push(le(
        "start-up to first handshake".into(),
        c.find(fp, "start-up"),
        1.0 / 40.0,
    ));
    out.push(le("idle RSS".into(), c.find(fp, "idle RSS"), 1.0 / 10.0));
    for &n in &s.footprint.znodes {
        let name = crate::znode_figure(s.footprint.znode_size, n);
        out.push(le(name.clone(), c.find(fp, &name), 0.066));
    }
    out.push(le(
        format!("RSS per idle session at {} sessions", s.footprint.sessions),
        c.find(fp, "RSS per idle session"),
        1.0 / 5.0,
    ));
    if s.footprint.watches > 0 {
        // Absolute bounds on zkd's own figures (issue #22), not ratios.
        let watch = crate::watch_figure(s.footprint.watches);
        out.push(zkd_at_most(
            format!("{watch}, zkd"),
            c.find(fp, &watch),
            300.0,
            "B",
        ));
        out.push(zkd_at_most(
            format!("{}, zkd", crate::WATCH_RELEASE_FIGURE),
            c.find(fp, crate::WATCH_RELEASE_FIGURE),
            20.0,
            "MiB",
        ));
    }
    for w in [Workload::Get, Workload::Set] {
        let item = crate::throughput_item(w, s);
        out.push(le(
            format!("server CPU per op, {item}"),
            c.find(&item, "server CPU per op"),
            1.0 / 5.0,
        ));
    }
    for w in &s.tp.workloads {
        let item = crate::throughput_item(*w, s);
        out.push(TargetCheck::ratio(
            format!("ops/s, {item}"),
            c.find(&item, "ops/s"),
            ">= 3".into(),
            |m| m >= 3.0,
        ));
    }
    out.extend(no_regression(c, s));
    out.extend(scaling(c));
    out.extend(crate::durable::targets(c));
    out.extend(floor_targets(c, s));
    let w = s.fan.watchers.iter().copied().max().unwrap_or(0);
    let fan = crate::fanout_item(w);
    let last = "time until last";
    out.push(le(
        format!("fan-out to {w} watchers (last notified)"),
        c.find(&fan, last),
        1.0 / 4.0,
    ));
    // Against the floor measured in the same run (both columns of the floor row are the
    // floor, measured next to each server).
    let zkd_fan = c.find(&fan, last).map(Row::zkd_median);
    let floor = c.find(&crate::floor_item(w), last).map(Row::pooled_median);
    let measured = zkd_fan
        .zip(floor)
        .map(|(z, f)| z / f)
        .filter(|v| v.is_finite());
    out.push(TargetCheck {
        target: format!("fan-out to {w} watchers (last notified), zkd / floor"),
        bound: "<= 1.5 (floor)".into(),
        measured,
        met: measured.map(|m| m <= 1.5),
    });
    let herd_n = if s.herd.n.contains(&5000) {
        5000
    } else {
        s.herd.n.iter().copied().max().unwrap_or(0)
    };
    let item = crate::herd_item(Mode::Herd, herd_n);
    out.push(le(
        format!("{item}: time until all quiet"),
        c.find(&item, "time until all quiet"),
        1.0 / 5.0,
    ));
    for n in &s.herd.n {
        let item = crate::herd_item(Mode::Predecessor, *n);
        out.push(le(
            format!("{item}: time until next leader knows"),
            c.find(&item, "time until next leader knows"),
            1.0 / 2.0,
        ));
    }
    // Sessions: the descriptor limit, not the server, must be the cap.
    if let Some(row) = c.find(fp, "max concurrent sessions") {
        let opened = row.zkd.values.iter().copied().fold(f64::INFINITY, f64::min);
        let fd = c.fd_soft_limit as f64;
        let cap = fd.min(s.footprint.max_sessions as f64);
        let reached = opened.is_finite() && opened >= cap - 64.0;
        out.push(TargetCheck {
            target: "sessions accepted (zkd): capped by the fd limit".into(),
            bound: format!(">= fd cap {} - 64", num(cap)),
            measured: opened.is_finite().then_some(opened),
            met: opened.is_finite().then_some(reached),
        });
    }
    out
}

/// zkd / ZooKeeper ratios of the throughput items (64 sessions x 8 in flight) in the last
/// full side-by-side run before the second performance wave (medians of 3 rounds, quiet
/// machine): ops/s (higher is better), latency p50 and server CPU per op (lower is better).
const BEFORE_WAVE_2: [(Workload, f64, f64, f64); 4] = [
    (Workload::Get, 4.372, 0.2299, 0.1756),
    (Workload::Set, 8.842, 0.1123, 0.0961),
    (Workload::CreateDelete, 5.710, 0.1826, 0.1334),
    (Workload::Mixed, 4.463, 0.2274, 0.1792),
];

/// The ZooKeeper release [`BEFORE_WAVE_2`] was measured against: a ratio is compared with it
/// only when measured against the same release (3.9.3 does about 1.6 times 3.8.0's setData
/// on the same machine, which alone would move the ratio by more than the noise).
const BEFORE_WAVE_2_RELEASE: &str = "3.8.0";

/// How far a throughput ratio may move the wrong way before it counts as a regression
/// (run-to-run noise of the medians on two cores).
const NOISE: f64 = 0.10;

/// No regression: every throughput ratio of [`BEFORE_WAVE_2`] stays as good, within
/// [`NOISE`]. Only at the settings of that run (64 sessions x 8 in flight).
fn no_regression(c: &Comparison, s: &Settings) -> Vec<TargetCheck> {
    if (s.tp.sessions, s.tp.inflight) != (64, 8) {
        return Vec::new();
    }
    // A run read back from its CSV alone does not say its release: it is taken as compared.
    let release = c
        .zk_cmd
        .rsplit_once("(ZooKeeper ")
        .and_then(|(_, r)| r.strip_suffix(')'));
    let comparable = release.is_none_or(|r| r == BEFORE_WAVE_2_RELEASE);
    BEFORE_WAVE_2
        .iter()
        .filter(|(w, ..)| s.tp.workloads.contains(w))
        .flat_map(|&(w, ops, p50, cpu)| {
            [
                ("ops/s", ops, true),
                ("latency p50", p50, false),
                ("server CPU per op", cpu, false),
            ]
            .map(|(figure, before, higher)| {
                let item = crate::throughput_item(w, s);
                let row = c.find(&item, figure);
                let target = format!("no regression: {figure}, {item}");
                if !comparable {
                    return TargetCheck {
                        target,
                        bound: format!(
                            "not compared: the ratios before were measured against ZooKeeper \
                             {BEFORE_WAVE_2_RELEASE}, this run against {}; run with \
                             ZKD_ZOOKEEPER_VERSION=3.8",
                            release.unwrap_or("?")
                        ),
                        measured: row.map(Row::ratio).filter(|v| v.is_finite()),
                        met: None,
                    };
                }
                if higher {
                    let bound = before * (1.0 - NOISE);
                    let text = format!(">= {} (before: {})", num(bound), num(before));
                    TargetCheck::ratio(target, row, text, move |m| m >= bound)
                } else {
                    let bound = before * (1.0 + NOISE);
                    let text = format!("<= {} (before: {})", num(bound), num(before));
                    TargetCheck::ratio(target, row, text, move |m| m <= bound)
                }
            })
        })
        .collect()
}

/// More server CPUs never lower zkd's throughput: for get, set and mixed at each shape,
/// zkd's ops/s with each CPU set over its ops/s with the next smaller set (the pinned rows
/// found in `c`, sets in the order of their size).
fn scaling(c: &Comparison) -> Vec<TargetCheck> {
    use crate::cpus::CpuSet;
    use std::collections::BTreeMap;
    // (workload, shape) -> (CPUs, set, zkd's ops/s) per set.
    type Runs<'a> = BTreeMap<(usize, &'a str), Vec<(usize, CpuSet, f64)>>;
    let mut runs: Runs = BTreeMap::new();
    let order = |w: &str| ["get", "set", "mixed"].iter().position(|k| *k == w);
    for r in c.rows.iter().filter(|r| r.name == "ops/s") {
        let ["throughput", w, shape, cpus] = r.item.split(' ').collect::<Vec<_>>()[..] else {
            continue;
        };
        let (Some(k), Some(Ok(set))) = (order(w), cpus.strip_prefix("cpus=").map(CpuSet::parse))
        else {
            continue;
        };
        let key = (
            k,
            &r.item["throughput ".len() + w.len() + 1..][..shape.len()],
        );
        runs.entry(key)
            .or_default()
            .push((set.len(), set, r.zkd_median()));
    }
    let mut out = Vec::new();
    for ((k, shape), mut sets) in runs {
        sets.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        for pair in sets.windows(2) {
            let (fewer, more) = (&pair[0], &pair[1]);
            let measured = Some(more.2 / fewer.2).filter(|v| v.is_finite());
            out.push(TargetCheck {
                target: format!(
                    "zkd ops/s, {} {shape}: server CPUs {} / CPUs {}",
                    ["get", "set", "mixed"][k],
                    more.1,
                    fewer.1
                ),
                bound: ">= 1 (zkd)".into(),
                measured,
                met: measured.map(|m| m >= 1.0),
            });
        }
    }
    out
}

pub fn targets_table(checks: &[TargetCheck]) -> Table {
    let mut t = Table::new(&["target", "bound (zkd/ZK)", "measured", "met"]);
    for c in checks {
        t.row(vec![
            c.target.clone(),
            c.bound.clone(),
            c.measured.map_or("n/a".into(), num),
            match c.met {
                Some(true) => "yes".into(),
                Some(false) => "NO".into(),
                None if c.measured.is_some() => "not judged".into(),
                None => "not measured".into(),
            },
        ]);
    }
    t
}

/// Runs the comparison and writes the table, the raw values and the plots to `out_dir`.
pub async fn run(o: &Options) -> Comparison {
    let started = Instant::now();
    let s = &o.settings;
    let prog = Progress::new("compare", o.progress);
    let mut c = Comparison {
        zkd_cmd: o.zkd.describe(),
        zk_cmd: o.zookeeper.describe(),
        rounds: s.rounds,
        fd_soft_limit: crate::proc::raise_nofile_limit().soft,
        ..Comparison::default()
    };
    let specs = [&o.zkd, &o.zookeeper];
    let names = ["zkd", "zookeeper"];
    let over_budget = |c: &mut Comparison, what: &str| {
        let over = started.elapsed() > o.budget;
        if over {
            c.errors.push(format!(
                "time budget {:?} used up; skipped {what}",
                o.budget
            ));
        }
        over
    };

    // The progress line and the error prefix of one item on one server in one round.
    let labels = |round: usize, label: &str, k: usize| {
        let p = prog.sub(format!(
            "round {}/{} {label} {}",
            round + 1,
            s.rounds,
            names[k]
        ));
        (p, format!("round {} {label} {}", round + 1, names[k]))
    };

    if o.groups.contains(&Group::Footprint) {
        let t0 = Instant::now();
        for round in 0..s.rounds {
            for &k in order(round, 0).iter() {
                if over_budget(&mut c, "footprint") {
                    break;
                }
                let (p, what) = labels(round, "footprint", k);
                let result = undisturbed(o, &mut c, &p, &what, &[], || async {
                    footprint::run_spawned(specs[k], &s.footprint, &p)
                        .await
                        .map(|out| crate::footprint_figures(&out, s))
                })
                .await;
                match result {
                    Ok(figs) => c.add(k, &figs, round),
                    Err(e) => c.errors.push(format!("{what}: {e}")),
                }
            }
        }
        c.timings.push(("footprint".into(), t0.elapsed()));
    }

    let mut items = Vec::new();
    // With CPU sets the throughput items run once per set, pinned, below.
    if o.groups.contains(&Group::Throughput) && s.cpu_sets.is_empty() {
        items.extend(Item::throughput(s));
    }
    if o.groups.contains(&Group::Fanout) {
        items.extend(Item::fanout(s));
    }
    if o.groups.contains(&Group::Floor) {
        items.extend(Item::throughput_floors(s));
    }
    if o.groups.contains(&Group::Herd) {
        items.extend(Item::herd(s));
    }
    if o.groups.contains(&Group::Throughput) && !s.cpu_sets.is_empty() {
        // Round by round, every set in turn (the first set of a round alternating), each
        // with freshly started servers: a machine that gets slower or faster during the run
        // then weighs on every set alike instead of on whichever set ran last.
        let mut noted = vec![false; s.cpu_sets.len()];
        'rounds: for round in 0..s.rounds {
            for j in set_order(round, s.cpu_sets.len()) {
                let set = &s.cpu_sets[j];
                let (load, text) = set.load_cpus();
                if let Err(e) = crate::cpus::pin_self(&load) {
                    c.errors.push(e);
                    break 'rounds;
                }
                if !std::mem::replace(&mut noted[j], true) {
                    c.notes.push(format!("server on CPUs {set}: {text}"));
                }
                prog.say(format!(
                    "round {}/{}: server pinned to CPUs {set}, {text}",
                    round + 1,
                    s.rounds
                ));
                let pinned = Settings {
                    server_cpus: Some(set.clone()),
                    ..s.clone()
                };
                let place = Placement {
                    cpus: Some(set.clone()),
                    base: None,
                };
                let items = Item::throughput(&pinned);
                let run = Run {
                    o,
                    prog: &prog,
                    started,
                    s: &pinned,
                    place: &place,
                };
                run.rounds(&mut c, &items, round..round + 1).await;
            }
        }
        if let Err(e) = crate::cpus::pin_self(&crate::cpus::CpuSet::online()) {
            c.errors.push(e);
        }
    }
    let run = Run {
        o,
        prog: &prog,
        started,
        s,
        place: &Placement::default(),
    };
    run.items(&mut c, &items).await;
    if o.groups.contains(&Group::Durable) {
        let t0 = Instant::now();
        let base = s.durable.base_dir();
        c.notes.push(format!(
            "durable: zkd with --data-dir data --fsync always (rows ending zkd-batch: --fsync batch), ZooKeeper with forceSync=yes; data directories under {} ({}); {} reader session(s) during each write run",
            base.display(),
            crate::durable::filesystem_of(&base),
            s.durable.readers
        ));
        for round in 0..s.rounds {
            if run.over_budget(&mut c, "durable") {
                break;
            }
            crate::durable::round(&o.zkd, &o.zookeeper, &s.durable, round, &prog, &mut c).await;
        }
        c.timings.push(("durable".into(), t0.elapsed()));
    }
    if o.groups.contains(&Group::Floor) {
        let t0 = Instant::now();
        for round in 0..s.rounds {
            if run.over_budget(&mut c, "the durable floor") {
                break;
            }
            disk_floor_round(&s.durable, round, &prog, &mut c).await;
        }
        c.time("floor", t0.elapsed());
    }
    c.elapsed = started.elapsed();
    c
}

/// How one batch of items runs: the comparison's options, its start, the settings and
/// where the servers run.
struct Run<'a> {
    o: &'a Options,
    prog: &'a Progress,
    started: Instant,
    s: &'a Settings,
    place: &'a Placement,
}

impl Run<'_> {
    /// Whether the time budget is used up (then notes that `what` was skipped).
    fn over_budget(&self, c: &mut Comparison, what: &str) -> bool {
        let over = self.started.elapsed() > self.o.budget;
        if over {
            c.errors.push(format!(
                "time budget {:?} used up; skipped {what}",
                self.o.budget
            ));
        }
        over
    }

    /// Runs `items` on both servers for every round, alternating which goes first, against
    /// one long-lived server per implementation (restarted if it dies).
    async fn items(&self, c: &mut Comparison, items: &[Item]) {
        self.rounds(c, items, 0..self.s.rounds).await;
    }

    /// [`Run::items`] for the rounds in `rounds` only, on servers started for them.
    async fn rounds(&self, c: &mut Comparison, items: &[Item], rounds: std::ops::Range<usize>) {
        if items.is_empty() {
            return;
        }
        let (o, s) = (self.o, self.s);
        let specs = [&o.zkd, &o.zookeeper];
        let names = ["zkd", "zookeeper"];
        let mut servers: [Option<ServerProcess>; 2] = [None, None];
        'rounds: for round in rounds {
            for (i, item) in items.iter().enumerate() {
                for &k in order(round, i).iter() {
                    if self.over_budget(c, "the remaining items") {
                        break 'rounds;
                    }
                    let t0 = Instant::now();
                    if !servers[k].as_mut().is_some_and(|p| p.alive()) {
                        if let Some(dead) = servers[k].take() {
                            c.errors.push(format!(
                                "{} died; restarting. Log tail:\n{}",
                                names[k],
                                dead.log_tail(20)
                            ));
                        }
                        match specs[k]
                            .start_with(self.place, Duration::from_secs(60))
                            .await
                        {
                            Ok(p) => servers[k] = Some(p),
                            Err(e) => {
                                c.errors.push(format!("starting {}: {e}", names[k]));
                                continue;
                            }
                        }
                    }
                    let Some(server) = servers[k].as_ref() else {
                        continue;
                    };
                    let (addr, pid) = (server.addr(), Some(server.pid()));
                    let label = item.label(s);
                    // The other server idles meanwhile, on the same CPUs: wait until it is
                    // quiet (a JVM goes on compiling and collecting for a while after a run)
                    // and count what it does during the measurement as a bystander's work.
                    if let Some(other) = servers[1 - k].as_ref() {
                        if let Some(busy) = settle(other.pid()).await {
                            c.notes.push(format!(
                                "round {} {label} {}: {} still used {busy:.2} cores {}s after its last item; measured anyway",
                                round + 1,
                                names[k],
                                names[1 - k],
                                SETTLE_LIMIT.as_secs()
                            ));
                        }
                    }
                    let ours = [server.pid()];
                    let p = self.prog.sub(format!(
                        "round {}/{} {label} {}",
                        round + 1,
                        s.rounds,
                        names[k]
                    ));
                    let what = format!("round {} {label} {}", round + 1, names[k]);
                    let result =
                        undisturbed(o, c, &p, &what, &ours, || item.figures(addr, pid, s, &p))
                            .await;
                    match result {
                        Ok(figs) => c.add(k, &figs, round),
                        Err(e) => c.errors.push(format!("{what}: {e}")),
                    }
                    c.time(group_of(item), t0.elapsed());
                }
            }
        }
    }
}

/// `floor disk set 100B 64x8`: the durable floor's item at one durable shape.
pub fn disk_floor_item(value_size: usize, shape: (usize, usize)) -> String {
    format!("floor disk set {value_size}B {}x{}", shape.0, shape.1)
}

/// The durable floor ([`crate::floor_disk`]) at every durable shape, twice (once in each
/// server's column, as the other floors are measured in each server's turn).
async fn disk_floor_round(
    p: &crate::durable::Params,
    round: usize,
    prog: &Progress,
    c: &mut Comparison,
) {
    for &shape in &p.shapes {
        for column in [0, 1] {
            let (base, size, warmup, duration) = (p.base_dir(), p.value_size, p.warmup, p.duration);
            let group = shape.0 * shape.1;
            let out = tokio::task::spawn_blocking(move || {
                crate::floor_disk::run(&base, size, group, warmup, duration)
            })
            .await
            .map_err(|e| e.to_string())
            .and_then(|o| o);
            let item = disk_floor_item(p.value_size, shape);
            match out {
                Ok(o) => {
                    prog.say(format!(
                        "round {} {item}: {:.0} ops/s ({} B entries), write+sync p50 {:.0} us",
                        round + 1,
                        o.ops_per_sec,
                        o.entry_len,
                        o.round_p50_us
                    ));
                    let rows = [
                        ("ops/s", "ops/s", o.ops_per_sec, crate::Better::Higher),
                        ("write+sync p50", "us", o.round_p50_us, crate::Better::Lower),
                        ("write+sync p99", "us", o.round_p99_us, crate::Better::Lower),
                    ];
                    let figs = Figures {
                        figures: rows
                            .into_iter()
                            .map(|(n, u, v, b)| crate::Figure::new(&item, n, u, v, b))
                            .collect(),
                        notes: Vec::new(),
                    };
                    c.add(column, &figs, round);
                }
                Err(e) => c.errors.push(format!("round {} {item}: {e}", round + 1)),
            }
        }
    }
}

/// zkd's median of `zkd_row` over the median of every value of `floor_row` (both columns
/// are the floor).
fn over_floor(zkd_row: Option<&Row>, floor_row: Option<&Row>) -> Option<f64> {
    let zkd = zkd_row.map(Row::zkd_median)?;
    let floor = floor_row.map(Row::pooled_median)?;
    Some(zkd / floor).filter(|v| v.is_finite())
}

/// The target that zkd's ops/s on `zkd_item` reach at least `bound` times the floor's on
/// `floor_row` (`what` names the two).
fn floor_check(
    c: &Comparison,
    zkd_item: &str,
    floor_row: &Row,
    what: &str,
    bound: f64,
) -> TargetCheck {
    let measured = over_floor(c.find(zkd_item, "ops/s"), Some(floor_row));
    TargetCheck {
        target: format!("ops/s, {zkd_item}, {what}"),
        bound: format!(">= {bound} (floor)"),
        measured,
        met: measured.map(|m| m >= bound),
    }
}

/// The floor targets: zkd's get and set ops/s at the throughput shape ≥ 0.8 of the tokio
/// floor's, zkd `--fsync always` at 64×8 ≥ 0.7 of the durable floor's (where measured).
pub fn floor_targets(c: &Comparison, s: &Settings) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for w in [Workload::Get, Workload::Set] {
        let zkd_item = crate::throughput_item(w, s);
        let floor_item = crate::throughput_floor_item(crate::floor::FloorKind::Tokio, w, s);
        let Some(floor_row) = c.find(&floor_item, "ops/s") else {
            continue;
        };
        out.push(floor_check(
            c,
            &zkd_item,
            floor_row,
            "zkd / tokio floor",
            0.8,
        ));
    }
    let shape = (64, 8);
    let floor_item = disk_floor_item(s.durable.value_size, shape);
    if let Some(floor_row) = c.find(&floor_item, "ops/s") {
        let zkd_item = crate::durable::item(s.durable.value_size, shape, false);
        let check = floor_check(c, &zkd_item, floor_row, "zkd always / durable floor", 0.7);
        out.push(check);
    }
    out
}

/// How long [`settle`] waits at most.
const SETTLE_LIMIT: Duration = Duration::from_secs(20);
/// A server using less CPU than this (in cores, over [`SETTLE_WINDOW`]) is idle.
const SETTLE_CORES: f64 = 0.05;
const SETTLE_WINDOW: Duration = Duration::from_millis(300);

/// Waits until process `pid` keeps less than [`SETTLE_CORES`] busy over a
/// [`SETTLE_WINDOW`], for at most [`SETTLE_LIMIT`]; `Some(cores)` if it never did (or `None`
/// at once when its CPU time cannot be read).
async fn settle(pid: u32) -> Option<f64> {
    use crate::proc::CpuSample;
    let t0 = Instant::now();
    let mut before = CpuSample::take(pid).ok()?;
    loop {
        tokio::time::sleep(SETTLE_WINDOW).await;
        let now = CpuSample::take(pid).ok()?;
        let cores = before.until(&now) / SETTLE_WINDOW.as_secs_f64();
        if cores < SETTLE_CORES {
            return None;
        }
        if t0.elapsed() >= SETTLE_LIMIT {
            return Some(cores);
        }
        before = now;
    }
}

/// Runs `measure` until no other process on the machine kept more than
/// `o.max_bystander_cores` busy meanwhile (at most `o.attempts` times); notes the repeats.
async fn undisturbed<F, Fut>(
    o: &Options,
    c: &mut Comparison,
    progress: &Progress,
    what: &str,
    ours: &[u32],
    mut measure: F,
) -> BenchResult<Figures>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = BenchResult<Figures>>,
{
    let mut attempt = 1;
    loop {
        let watch = crate::proc::Bystanders::start(ours);
        let result = measure().await;
        let busy = watch.map_or(0.0, |w| w.cores(ours));
        if busy <= o.max_bystander_cores || attempt >= o.attempts || result.is_err() {
            if busy > o.max_bystander_cores {
                c.notes.push(format!(
                    "{what}: other processes kept {busy:.2} cores busy in all {attempt} attempts; last result kept"
                ));
            } else if attempt > 1 {
                c.notes.push(format!(
                    "{what}: repeated {} time(s) because other processes were busy",
                    attempt - 1
                ));
            }
            return result;
        }
        progress.say(format!(
            "other processes kept {busy:.2} cores busy during the measurement; repeating"
        ));
        attempt += 1;
    }
}

/// The group an item belongs to, for the time spent per group.
fn group_of(item: &Item) -> &'static str {
    match item {
        Item::Throughput(_) => "throughput",
        Item::Fanout(_) | Item::Floor(_) => "fanout",
        Item::ThroughputFloor(..) => "floor",
        Item::Herd(..) => "herd",
    }
}

/// The order the CPU sets run in, in `round`: as given in even rounds, reversed in odd ones.
fn set_order(round: usize, sets: usize) -> Vec<usize> {
    if round.is_multiple_of(2) {
        (0..sets).collect()
    } else {
        (0..sets).rev().collect()
    }
}

/// Which server goes first: alternates with the round and the item.
fn order(round: usize, item: usize) -> [usize; 2] {
    if (round + item).is_multiple_of(2) {
        [0, 1]
    } else {
        [1, 0]
    }
}

/// Writes `compare.txt`, `compare.csv` and the SVG plots into `dir`.
pub fn write_outputs(
    c: &Comparison,
    s: &Settings,
    machine: &str,
    dir: &Path,
) -> BenchResult<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let txt = dir.join("compare.txt");
    std::fs::write(&txt, render_text(c, s, machine))
        .map_err(|e| format!("{}: {e}", txt.display()))?;
    written.push(txt);

    let mut csv = String::from("item,figure,unit,server,round,value\n");
    for r in &c.rows {
        let sides = [
            ("zkd", &r.zkd.values, &r.zkd.rounds),
            ("zookeeper", &r.zookeeper.values, &r.zookeeper.rounds),
        ];
        for (server, vals, rounds) in sides {
            for (v, round) in vals.iter().zip(rounds) {
                let _ = writeln!(
                    csv,
                    "{},{},{},{server},{round},{v}",
                    csv_field(&r.item),
                    csv_field(&r.name),
                    csv_field(&r.unit),
                );
            }
        }
    }
    let path = dir.join("compare.csv");
    std::fs::write(&path, csv).map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path);

    let md = render_markdown(c, s);
    let path = dir.join("compare.md");
    std::fs::write(&path, md).map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path);
    written.extend(crate::plot::write_plots(c, dir)?);
    Ok(written)
}

/// The tables as Markdown, with the run's size and what it noted: what BENCHMARKS.md is
/// written from.
pub fn render_markdown(c: &Comparison, s: &Settings) -> String {
    let mut out = format!(
        "zkd vs Apache ZooKeeper: medians over {} round(s), ratio = zkd / ZooKeeper; {}\n\nZooKeeper: `{}`\n\n{}\n## Targets\n\n{}",
        c.rounds,
        timing_line(c),
        c.zk_cmd,
        c.table().markdown(),
        targets_table(&targets(c, s)).markdown()
    );
    for (title, lines) in [("Notes", &c.notes), ("Errors", &c.errors)] {
        if !lines.is_empty() {
            let _ = writeln!(out, "\n## {title}\n");
            for l in lines {
                let _ = writeln!(out, "* {}", l.replace('\n', " / "));
            }
        }
    }
    out
}

/// `elapsed: N s (group N s, ...)`.
fn timing_line(c: &Comparison) -> String {
    let groups: Vec<String> = c
        .timings
        .iter()
        .map(|(g, t)| format!("{g} {:.0} s", t.as_secs_f64()))
        .collect();
    format!(
        "elapsed: {:.0} s ({})",
        c.elapsed.as_secs_f64(),
        groups.join(", ")
    )
}

/// The full text report.
pub fn render_text(c: &Comparison, s: &Settings, machine: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "zkd vs Apache ZooKeeper (the release is on the ZooKeeper line below) — medians over {} \
         round(s); ratio = zkd / ZooKeeper",
        c.rounds
    );
    let _ = writeln!(out, "{}", timing_line(c));
    let _ = writeln!(out, "\nmachine:\n{machine}");
    let _ = writeln!(out, "zkd:       {}", c.zkd_cmd);
    let _ = writeln!(out, "ZooKeeper: {}", c.zk_cmd);
    let _ = writeln!(out, "\n{}", c.table().render());
    let _ = writeln!(out, "targets:\n{}", targets_table(&targets(c, s)).render());
    if !c.notes.is_empty() {
        let _ = writeln!(out, "notes:");
        for n in &c.notes {
            let _ = writeln!(out, "  {n}");
        }
    }
    if !c.errors.is_empty() {
        let _ = writeln!(out, "\nERRORS:");
        for e in &c.errors {
            let _ = writeln!(out, "  {e}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparison::from_csv;

    fn check<'a>(checks: &'a [TargetCheck], target: &str) -> &'a TargetCheck {
        checks
            .iter()
            .find(|c| c.target == target)
            .unwrap_or_else(|| panic!("no target {target:?}"))
    }

    #[test]
    fn cpu_sets_take_turns_round_by_round() {
        assert_eq!(set_order(0, 2), [0, 1]);
        assert_eq!(set_order(1, 2), [1, 0]);
        assert_eq!(set_order(2, 3), [0, 1, 2]);
        assert_eq!(set_order(3, 3), [2, 1, 0]);
        assert!(set_order(1, 0).is_empty());
    }

    /// Pinned throughput rows are compared set by set, smaller set first, from the rows
    /// alone (so `replot` checks them too).
    #[test]
    fn scaling_targets_from_pinned_rows() {
        let csv = "item,figure,unit,server,round,value\n\
            throughput get 64x8 cpus=0,ops/s,ops/s,zkd,1,100000\n\
            throughput get 64x8 cpus=0,ops/s,ops/s,zookeeper,1,50000\n\
            \"throughput get 64x8 cpus=0,1\",ops/s,ops/s,zkd,1,90000\n\
            throughput set 64x8 cpus=0-3,ops/s,ops/s,zkd,1,80000\n\
            \"throughput set 64x8 cpus=0,1\",ops/s,ops/s,zkd,1,40000\n";
        let c = from_csv(csv).unwrap();
        let checks = targets(&c, &Settings::full());
        let get = check(&checks, "zkd ops/s, get 64x8: server CPUs 0,1 / CPUs 0");
        assert_eq!((get.measured, get.met), (Some(0.9), Some(false)));
        let set = check(&checks, "zkd ops/s, set 64x8: server CPUs 0-3 / CPUs 0,1");
        assert_eq!((set.measured, set.met), (Some(2.0), Some(true)));
        assert!(!checks
            .iter()
            .any(|c| c.target.contains("mixed 64x8: server")));
    }

    /// zkd over the throughput and durable floors: zkd's own rows over the median of every
    /// floor value (both columns), against 0.8 and 0.7.
    #[test]
    fn floor_targets_from_the_floor_rows() {
        let csv = "item,figure,unit,server,round,value\n\
            throughput get 64x8,ops/s,ops/s,zkd,1,400000\n\
            throughput get 64x8,ops/s,ops/s,zookeeper,1,100000\n\
            floor tokio get 64x8,ops/s,ops/s,zkd,1,480000\n\
            floor tokio get 64x8,ops/s,ops/s,zookeeper,1,520000\n\
            floor epoll get 64x8,ops/s,ops/s,zkd,1,900000\n\
            throughput set 64x8,ops/s,ops/s,zkd,1,300000\n\
            floor tokio set 64x8,ops/s,ops/s,zkd,1,500000\n\
            floor tokio set 64x8,ops/s,ops/s,zookeeper,1,500000\n\
            durable set 100B 64x8,ops/s,ops/s,zkd,1,350000\n\
            durable set 100B 64x8,ops/s,ops/s,zookeeper,1,140000\n\
            floor disk set 100B 64x8,ops/s,ops/s,zkd,1,400000\n\
            floor disk set 100B 64x8,ops/s,ops/s,zookeeper,1,600000\n";
        let c = from_csv(csv).unwrap();
        let checks = targets(&c, &Settings::full());
        let get = check(&checks, "ops/s, throughput get 64x8, zkd / tokio floor");
        assert_eq!((get.measured, get.met), (Some(0.8), Some(true)));
        let set = check(&checks, "ops/s, throughput set 64x8, zkd / tokio floor");
        assert_eq!((set.measured, set.met), (Some(0.6), Some(false)));
        let disk = check(
            &checks,
            "ops/s, durable set 100B 64x8, zkd always / durable floor",
        );
        assert_eq!((disk.measured, disk.met), (Some(0.7), Some(true)));
    }

    /// The floor ratio comes from the floor measured next to both servers, and the
    /// no-regression rows compare with the ratios from before, within the noise allowance.
    #[test]
    fn floor_and_no_regression_targets() {
        let csv = "item,figure,unit,server,round,value\n\
            fanout W=10000,time until last watcher notified,ms,zkd,1,90\n\
            fanout W=10000,time until last watcher notified,ms,zookeeper,1,150\n\
            floor W=10000,time until last watcher notified,ms,zkd,1,50\n\
            floor W=10000,time until last watcher notified,ms,zookeeper,1,70\n\
            throughput get 64x8,ops/s,ops/s,zkd,1,400000\n\
            throughput get 64x8,ops/s,ops/s,zookeeper,1,100000\n\
            throughput set 64x8,server CPU per op,us,zkd,1,2\n\
            throughput set 64x8,server CPU per op,us,zookeeper,1,10\n";
        let c = from_csv(csv).unwrap();
        let checks = targets(&c, &Settings::full());

        let floor = check(
            &checks,
            "fan-out to 10000 watchers (last notified), zkd / floor",
        );
        assert_eq!(
            floor.measured,
            Some(1.5),
            "90 ms over the floor's median 60 ms"
        );
        assert_eq!(floor.met, Some(true));
        let fan = check(&checks, "fan-out to 10000 watchers (last notified)");
        assert_eq!(fan.met, Some(false), "0.6 of ZooKeeper");

        // 4.0 against 4.372 before: within 10 %.
        let ops = check(&checks, "no regression: ops/s, throughput get 64x8");
        assert_eq!((ops.measured, ops.met), (Some(4.0), Some(true)));
        // 0.2 against 0.0961 before: a regression.
        let cpu = check(
            &checks,
            "no regression: server CPU per op, throughput set 64x8",
        );
        assert_eq!(cpu.met, Some(false));
        let unmeasured = check(&checks, "no regression: latency p50, throughput mixed 64x8");
        assert_eq!((unmeasured.measured, unmeasured.met), (None, None));

        // Against another release than the one before, nothing is judged.
        let mut other = from_csv(csv).unwrap();
        other.zk_cmd = "java -cp <...> zoo.cfg (ZooKeeper 3.9.3)".into();
        let checks = targets(&other, &Settings::full());
        let ops = check(&checks, "no regression: ops/s, throughput get 64x8");
        assert_eq!((ops.measured, ops.met), (Some(4.0), None));
        assert!(ops.bound.contains("ZooKeeper 3.8.0"), "{}", ops.bound);
        other.zk_cmd = "java -cp <...> zoo.cfg (ZooKeeper 3.8.0)".into();
        let checks = targets(&other, &Settings::full());
        let cpu = check(
            &checks,
            "no regression: server CPU per op, throughput set 64x8",
        );
        assert_eq!(cpu.met, Some(false));
        assert!(checks
            .iter()
            .any(|c| c.target == "RSS per idle session at 19000 sessions"));
    }
}
