//! `zkd-bench`: herd effect, throughput, fan-out and footprint of ZooKeeper-protocol servers,
//! and `compare`, which runs all of them on zkd and on Apache ZooKeeper (3.9.3, or 3.8.0 with
//! `ZKD_ZOOKEEPER_VERSION=3.8`) side by side.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use zkd_bench::compare::{self, Group};
use zkd_bench::cpus::CpuSet;
use zkd_bench::herd::{Failure, Mode};
use zkd_bench::progress::Progress;
use zkd_bench::servers::{self, Endpoint, ServerProcess, ServerSpec};
use zkd_bench::throughput::Workload;
use zkd_bench::util::BenchResult;
use zkd_bench::{footprint, proc, Figure, Item, Settings};

/// Benchmarks for ZooKeeper-protocol servers: zkd and Apache ZooKeeper side by side.
#[derive(Parser, Debug)]
#[command(name = "zkd-bench", version, about)]
struct Cli {
    /// Small sizes and short windows: a smoke run of every code path in seconds.
    #[arg(long, global = true)]
    quick: bool,

    /// No progress lines on stderr.
    #[arg(long, global = true)]
    quiet: bool,

    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Leader election under repeated leader failure: everyone watching the children (herd)
    /// vs each watching its predecessor.
    Herd {
        #[command(flatten)]
        target: TargetArgs,
        /// Candidate counts [default: 10,100,1000,5000,10000; quick: 10,40].
        #[arg(long, value_delimiter = ',')]
        n: Vec<usize>,
        /// Watch modes [default: herd,predecessor].
        #[arg(long, value_enum, value_delimiter = ',')]
        mode: Vec<Mode>,
        /// Leader failures per run [default: 4 in herd mode, 16 in predecessor mode; quick: 3].
        #[arg(long)]
        failures: Option<usize>,
        /// How the leader fails.
        #[arg(long, value_enum, default_value = "delete")]
        fail: Failure,
    },
    /// Pipelined throughput: sessions x requests in flight, per workload.
    Throughput {
        #[command(flatten)]
        target: TargetArgs,
        /// Workloads [default: all].
        #[arg(long, value_enum, value_delimiter = ',')]
        workload: Vec<Workload>,
        /// Sessions [default: 64; quick: 4].
        #[arg(long)]
        sessions: Option<usize>,
        /// Requests in flight per session [default: 8; quick: 4].
        #[arg(long)]
        inflight: Option<usize>,
        /// Warm-up seconds [default: 3].
        #[arg(long)]
        warmup: Option<f64>,
        /// Measured seconds [default: 8].
        #[arg(long)]
        duration: Option<f64>,
        /// Load generator.
        #[arg(long, value_enum, default_value = "lean")]
        driver: zkd_bench::throughput::Driver,
        #[command(flatten)]
        cpus: ServerCpus,
    },
    /// Durable writes: setData of 100 B against zkd `--data-dir --fsync always`, ZooKeeper
    /// `forceSync=yes` and zkd `--fsync batch`, data directories on the same disk, with
    /// reads from other sessions timed during the writes.
    Durable {
        #[command(flatten)]
        spawn: SpawnArgs,
        #[command(flatten)]
        durable: DurableArgs,
        /// Rounds, each starting every server once [default: 1].
        #[arg(long, default_value_t = 1)]
        rounds: usize,
    },
    /// Notification fan-out: W watchers on one node, one write.
    Fanout {
        #[command(flatten)]
        target: TargetArgs,
        /// Watcher counts [default: 1000,10000; quick: 50].
        #[arg(long, value_delimiter = ',')]
        watchers: Vec<usize>,
        /// Writes per run [default: 5; quick: 2].
        #[arg(long)]
        writes: Option<usize>,
    },
    /// The machine's floors, measured with the same clients as zkd. Without --throughput:
    /// the fan-out floor, a bare one-thread server that writes the same notification frame to
    /// W watching sockets, one write each. With --throughput: zkd against two bare servers
    /// that answer getData and setData with fixed, correct replies and keep no tree (one on
    /// tokio with zkd's framing and flush policy, one on a single epoll thread), and zkd
    /// `--fsync always` against the durable floor (one file, a group of log entries per
    /// fdatasync).
    Floor {
        /// Watcher counts [default: 1000,10000; quick: 50].
        #[arg(long, value_delimiter = ',')]
        watchers: Vec<usize>,
        /// Writes per run [default: 5; quick: 2].
        #[arg(long)]
        writes: Option<usize>,
        /// The throughput, latency and durable-write floors instead of the fan-out floor.
        #[arg(long)]
        throughput: bool,
        /// With --throughput: connections x requests in flight [default: 1x1,16x8,64x8;
        /// quick: 1x1,4x4].
        #[arg(long, value_delimiter = ',', value_parser = zkd_bench::durable::parse_shape)]
        shapes: Vec<(usize, usize)>,
        /// With --throughput: rounds, the servers' order rotating [default: 3; quick: 1].
        #[arg(long)]
        rounds: Option<usize>,
        /// With --throughput: measured seconds per run [default: 5].
        #[arg(long)]
        duration: Option<f64>,
        /// With --throughput: skip the durable comparison.
        #[arg(long)]
        no_durable: bool,
        #[command(flatten)]
        spawn: SpawnArgs,
        #[command(flatten)]
        durable: DurableArgs,
    },
    /// A floor's bare server alone, as a child process of `floor` and `compare` (prints
    /// its address, serves until standard input closes).
    #[command(name = "floor-server", hide = true)]
    FloorServer {
        #[arg(long, value_enum, default_value = "fanout")]
        kind: zkd_bench::floor::FloorKind,
        /// Bytes of the value a throughput floor's getData returns.
        #[arg(long, default_value_t = 1024)]
        value_size: usize,
    },
    /// Times server start-ups for `footprint` and `compare` from a fresh process of its own
    /// (prints one line per start-up).
    #[command(name = "startup-timer", hide = true)]
    StartupTimer {
        #[arg(long, value_enum)]
        server: ServerChoice,
        #[arg(long)]
        samples: usize,
        #[command(flatten)]
        spawn: SpawnArgs,
    },
    /// Start-up time, idle RSS, RSS per znode and per idle session, max concurrent sessions.
    Footprint {
        #[command(flatten)]
        target: TargetArgs,
        /// Tree sizes to create, each on a fresh server [default: 100000,1000000].
        #[arg(long, value_delimiter = ',')]
        znodes: Vec<usize>,
        /// Idle sessions to open [default: 19000].
        #[arg(long)]
        sessions: Option<usize>,
        /// Bound of the concurrent-sessions probe [default: 20000].
        #[arg(long)]
        max_sessions: Option<usize>,
        /// Exists-watches one session sets, 0 to skip the step [default: 300000].
        #[arg(long)]
        watches: Option<usize>,
    },
    /// Persistence at scale: snapshot an N-node tree under read load (longest stall), then
    /// start zkd and Apache ZooKeeper from that snapshot (time, peak RSS).
    Snapshot {
        /// Nodes in the tree [default: 1000000; quick: 20000].
        #[arg(long)]
        nodes: Option<usize>,
        /// The zkd binary [default: next to zkd-bench, else on PATH].
        #[arg(long)]
        zkd_bin: Option<PathBuf>,
        /// ZooKeeper's heap in MiB.
        #[arg(long, default_value_t = 2000)]
        zk_heap_mb: u32,
        /// Scratch directory (the data directories are removed afterwards).
        #[arg(long)]
        work: Option<PathBuf>,
    },
    /// Start-up of a three-member ensemble until every client port listens and every member
    /// serves: `zkd --ensemble 3` against three Apache ZooKeeper JVMs, as a ratio.
    EnsembleStartup {
        #[command(flatten)]
        spawn: SpawnArgs,
        /// Members of each ensemble.
        #[arg(long, default_value_t = 3)]
        members: u64,
        /// Rounds, each starting both once [default: 5; quick: 1].
        #[arg(long)]
        rounds: Option<usize>,
    },
    /// Admin endpoints on a large server (nodes, sessions, watches): each endpoint's answer
    /// time and the longest reply a reading client sees while it is polled.
    AdminStall {
        /// Nodes under /bench [default: 100000; quick: 5000].
        #[arg(long)]
        nodes: Option<usize>,
        /// Sessions, each owning an ephemeral [default: 20000; quick: 500].
        #[arg(long)]
        sessions: Option<usize>,
        /// Sessions that stay connected with two watches each [default: 5000; quick: 200].
        #[arg(long)]
        connected: Option<usize>,
        /// Polls per endpoint [default: 5; quick: 2].
        #[arg(long)]
        polls: Option<usize>,
        /// Poll only endpoints whose name contains this (repeatable) [default: all].
        #[arg(long)]
        only: Vec<String>,
        /// The zkd binary [default: next to zkd-bench, else on PATH].
        #[arg(long)]
        zkd_bin: Option<PathBuf>,
    },
    /// Redraws the plots and the tables of a comparison from its compare.csv.
    Replot {
        /// compare.csv written by `compare`.
        #[arg(long, default_value = "bench-results/compare.csv")]
        csv: PathBuf,
        /// Where the plots and tables go [default: the csv's directory].
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Every figure of zkd in two comparisons made on one machine, before and after a
    /// change, with ZooKeeper's own change beside it; names zkd's figures worse by more
    /// than the threshold.
    Changes {
        /// compare.csv of the run before the change.
        #[arg(long)]
        before: PathBuf,
        /// compare.csv of the run after it.
        #[arg(long)]
        after: PathBuf,
        /// The share by which a figure counts as worse.
        #[arg(long, default_value_t = 0.10)]
        threshold: f64,
    },
    /// Runs everything on zkd and on Apache ZooKeeper, alternately, and writes the
    /// table and plots.
    Compare {
        #[command(flatten)]
        spawn: SpawnArgs,
        /// Rounds [default: 3; quick: 1].
        #[arg(long)]
        rounds: Option<usize>,
        /// Groups to run [default: all].
        #[arg(long, value_enum, value_delimiter = ',')]
        only: Vec<Group>,
        /// Herd candidate counts [default: 10,100,1000,5000,10000].
        #[arg(long, value_delimiter = ',')]
        herd_n: Vec<usize>,
        /// Fan-out watcher counts [default: 1000,10000].
        #[arg(long, value_delimiter = ',')]
        watchers: Vec<usize>,
        /// Where the results go.
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
        /// Start no new item after this many minutes.
        #[arg(long, default_value_t = 90)]
        budget_minutes: u64,
        /// Repeat a measurement during which other processes kept more than this many
        /// cores busy (the machine may be shared).
        #[arg(long, default_value_t = 0.25)]
        max_bystander_cores: f64,
        /// Runs of one measurement at most (see --max-bystander-cores).
        #[arg(long, default_value_t = 3)]
        attempts: usize,
        #[command(flatten)]
        cpus: ServerCpus,
        #[command(flatten)]
        durable: DurableArgs,
    },
}

/// `--server-cpus`: the CPU sets the server is pinned to.
#[derive(Args, Debug)]
struct ServerCpus {
    /// Pin the server to this CPU set, in taskset's syntax (`0`, `0,1`, `0-3`), and run the
    /// load generator on the other CPUs (on all when none are left). Repeat the flag, or
    /// separate sets by `;`, to run the throughput items once per set (not with --addr).
    #[arg(long = "server-cpus", value_name = "LIST")]
    server_cpus: Vec<String>,
}

/// The durable-write runs' sizes and where their data directories go.
#[derive(Args, Debug)]
struct DurableArgs {
    /// Connections x writes in flight per connection [default: 1x1,16x8,64x8; quick: 1x1,4x4].
    #[arg(long = "durable-shapes", value_delimiter = ',', value_parser = zkd_bench::durable::parse_shape)]
    durable_shapes: Vec<(usize, usize)>,
    /// Reader sessions (one getData in flight each) during every write run [default: 4;
    /// quick: 2].
    #[arg(long = "durable-readers")]
    durable_readers: Option<usize>,
    /// Directory the servers' data directories go under (the disk measured) [default: the
    /// system's temporary directory].
    #[arg(long = "durable-dir")]
    durable_dir: Option<PathBuf>,
}

impl DurableArgs {
    fn apply(self, p: &mut zkd_bench::durable::Params) {
        set_if_given(&mut p.shapes, self.durable_shapes);
        p.readers = self.durable_readers.unwrap_or(p.readers);
        if self.durable_dir.is_some() {
            p.base = self.durable_dir;
        }
    }
}

/// Which server a single command measures.
#[derive(Args, Debug)]
struct TargetArgs {
    /// A running server to measure instead of spawning one.
    #[arg(long)]
    addr: Option<SocketAddr>,
    /// Process id of the server at --addr, for CPU and RSS figures.
    #[arg(long, requires = "addr")]
    pid: Option<u32>,
    /// Server to spawn when no --addr is given.
    #[arg(long, value_enum, default_value = "zkd")]
    server: ServerChoice,
    #[command(flatten)]
    spawn: SpawnArgs,
}

#[derive(Args, Debug)]
struct SpawnArgs {
    /// zkd binary [default: `zkd` next to this executable, i.e. target/release/zkd].
    #[arg(long)]
    zkd_bin: Option<PathBuf>,
    /// ZooKeeper's maximum heap in MiB (-Xmx), as ZK_SERVER_HEAP in zkEnv.sh.
    #[arg(long, default_value_t = 1000)]
    zk_heap_mb: u32,
    /// Extra JVM flag for ZooKeeper (repeatable), e.g. --zk-jvm-opt=-XX:+UseParallelGC.
    #[arg(long = "zk-jvm-opt", allow_hyphen_values = true)]
    zk_jvm_opts: Vec<String>,
}

impl SpawnArgs {
    fn zkd(&self) -> ServerSpec {
        ServerSpec::zkd(
            self.zkd_bin
                .clone()
                .unwrap_or_else(servers::default_zkd_bin),
        )
    }

    fn zookeeper(&self) -> ServerSpec {
        ServerSpec::zookeeper(self.zk_heap_mb, &self.zk_jvm_opts)
    }

    fn spec(&self, server: ServerChoice) -> ServerSpec {
        match server {
            ServerChoice::Zkd => self.zkd(),
            ServerChoice::Zookeeper => self.zookeeper(),
        }
    }

    /// These flags as arguments again, for the start-up timer child process.
    fn to_args(&self) -> Vec<String> {
        let mut args = vec!["--zk-heap-mb".to_string(), self.zk_heap_mb.to_string()];
        if let Some(bin) = &self.zkd_bin {
            args.push("--zkd-bin".into());
            args.push(bin.display().to_string());
        }
        args.extend(self.zk_jvm_opts.iter().map(|o| format!("--zk-jvm-opt={o}")));
        args
    }

    /// Start-ups timed by this binary re-executed in a fresh process.
    fn timer(&self) -> Option<footprint::StartupTimer> {
        std::env::current_exe()
            .ok()
            .map(|bin| footprint::StartupTimer {
                bin,
                spawn_args: self.to_args(),
            })
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ServerChoice {
    Zkd,
    Zookeeper,
}

/// The server of a single command; a spawned one lives as long as this value.
struct Target {
    endpoint: Endpoint,
    _process: Option<ServerProcess>,
}

impl TargetArgs {
    fn spec(&self) -> ServerSpec {
        self.spawn.spec(self.server)
    }

    async fn resolve(&self, progress: &Progress) -> BenchResult<Target> {
        if let Some(addr) = self.addr {
            return Ok(Target {
                endpoint: Endpoint {
                    label: "external".into(),
                    addr,
                    pid: self.pid,
                },
                _process: None,
            });
        }
        let spec = self.spec();
        progress.say(format!("starting {}", spec.describe()));
        let p = spec.start(Duration::from_secs(60)).await?;
        progress.say(format!(
            "{} pid {} on {} (first handshake after {:.1} ms)",
            p.kind.label(),
            p.pid(),
            p.addr(),
            p.startup().as_secs_f64() * 1e3
        ));
        Ok(Target {
            endpoint: p.endpoint(),
            _process: Some(p),
        })
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let cpu_flags = match &cli.cmd {
        Cmd::Throughput { cpus, .. } | Cmd::Compare { cpus, .. } => cpus.server_cpus.as_slice(),
        _ => &[],
    };
    if let Err(e) = zkd_bench::cpus::parse_flag_values(cpu_flags) {
        eprintln!("zkd-bench: {e}");
        return ExitCode::from(2);
    }
    if let Cmd::Throughput { target, cpus, .. } = &cli.cmd {
        if target.addr.is_some() && !cpus.server_cpus.is_empty() {
            eprintln!("zkd-bench: --server-cpus starts its own pinned server; it cannot be combined with --addr");
            return ExitCode::from(2);
        }
    }
    let fd = proc::raise_nofile_limit();
    if let Cmd::FloorServer { kind, value_size } = cli.cmd {
        return match zkd_bench::floor::serve_for_parent(kind, value_size) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("zkd-bench floor-server: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("zkd-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Cmd::StartupTimer {
        server,
        samples,
        spawn,
    } = &cli.cmd
    {
        let spec = spawn.spec(*server);
        return match runtime.block_on(footprint::time_startups_for_parent(&spec, *samples)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("zkd-bench startup-timer: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match runtime.block_on(run(cli, fd)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zkd-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli, fd: proc::FdLimits) -> BenchResult<()> {
    let mut s = if cli.quick {
        Settings::quick()
    } else {
        Settings::full()
    };
    // The fan-out floor runs in a child process: this binary, re-executed.
    s.floor_bin = std::env::current_exe().ok();
    let progress = Progress::new("zkd-bench", !cli.quiet);
    let mut figs: Vec<Figure> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    match cli.cmd {
        Cmd::Herd {
            target,
            n,
            mode,
            failures,
            fail,
        } => {
            set_if_given(&mut s.herd.n, n);
            set_if_given(&mut s.herd.modes, mode);
            if let Some(f) = failures {
                s.herd.failures = f;
                s.herd.pred_failures = f;
            }
            s.herd.failure = fail;
            figs.extend(run_items(&target, Item::herd(&s), &s, &progress).await?);
        }
        Cmd::Throughput {
            target,
            workload,
            sessions,
            inflight,
            warmup,
            duration,
            driver,
            cpus,
        } => {
            s.tp.driver = driver;
            set_if_given(&mut s.tp.workloads, workload);
            s.tp.sessions = sessions.unwrap_or(s.tp.sessions);
            s.tp.inflight = inflight.unwrap_or(s.tp.inflight);
            if let Some(w) = warmup {
                s.tp.warmup = Duration::from_secs_f64(w);
            }
            if let Some(d) = duration {
                s.tp.duration = Duration::from_secs_f64(d);
            }
            let sets = zkd_bench::cpus::parse_flag_values(&cpus.server_cpus)?;
            if sets.is_empty() {
                figs.extend(run_items(&target, Item::throughput(&s), &s, &progress).await?);
            } else {
                let (f, n) = pinned_throughput(&target, &sets, &s, &progress).await?;
                figs.extend(f);
                notes.extend(n);
            }
        }
        Cmd::Durable {
            spawn,
            durable,
            rounds,
        } => {
            durable.apply(&mut s.durable);
            let p = &s.durable;
            let (zkd, zk) = (spawn.zkd(), spawn.zookeeper());
            let base = p.base_dir();
            let mut c = zkd_bench::comparison::Comparison {
                rounds: rounds.max(1),
                ..Default::default()
            };
            for round in 0..rounds.max(1) {
                zkd_bench::durable::round(&zkd, &zk, p, round, &progress, &mut c).await;
            }
            println!(
                "durable setData of {} B, medians over {} round(s); ratio = zkd / ZooKeeper\n\
                 zkd:       {} (rows ending zkd-batch: --fsync batch)\n\
                 ZooKeeper: {} with forceSync=yes\n\
                 data directories under {} ({}); {} reader session(s) during each write run\n",
                p.value_size,
                c.rounds,
                zkd.durable("always").describe(),
                zk.describe(),
                base.display(),
                zkd_bench::durable::filesystem_of(&base),
                p.readers,
            );
            println!(
                "getData rows: \"during the writes\" read the nodes being written (with zkd \
                 always such a read waits for the sync of the write it shows); \"of an \
                 unwritten node\" read, from as many sessions, a node nobody writes\n"
            );
            print!(
                "{}\n{}",
                c.table().render(),
                compare::targets_table(&zkd_bench::durable::targets(&c)).render()
            );
            if !c.errors.is_empty() {
                return Err(format!(
                    "{} run(s) failed:\n  {}",
                    c.errors.len(),
                    c.errors.join("\n  ")
                ));
            }
            return Ok(());
        }
        Cmd::Fanout {
            target,
            watchers,
            writes,
        } => {
            set_if_given(&mut s.fan.watchers, watchers);
            s.fan.writes = writes.unwrap_or(s.fan.writes);
            figs.extend(run_items(&target, Item::fanout(&s), &s, &progress).await?);
        }
        Cmd::Floor {
            throughput: true,
            shapes,
            rounds,
            duration,
            no_durable,
            spawn,
            durable,
            ..
        } => {
            let bin = std::env::current_exe().map_err(|e| format!("this executable: {e}"))?;
            let mut p = if cli.quick {
                zkd_bench::floor_run::Params::quick(bin)
            } else {
                zkd_bench::floor_run::Params::full(bin)
            };
            set_if_given(&mut p.shapes, shapes);
            durable.apply(&mut p.durable);
            if no_durable {
                p.durable.shapes.clear();
            }
            p.rounds = rounds.unwrap_or(p.rounds).max(1);
            if let Some(d) = duration {
                p.duration = Duration::from_secs_f64(d);
            }
            let zkd = spawn.zkd();
            println!("zkd: {}", zkd.describe());
            println!(
                "durable: zkd {}; data directories and the floor's file under {} ({})",
                zkd.durable("always").describe(),
                p.durable.base_dir().display(),
                zkd_bench::durable::filesystem_of(&p.durable.base_dir())
            );
            println!("load average at the start: {}", loadavg());
            let report = zkd_bench::floor_run::run(&zkd, &p, &progress).await;
            print!("{}", report.render());
            println!("load average at the end: {}", loadavg());
            if !report.errors.is_empty() {
                return Err(format!("{} run(s) failed", report.errors.len()));
            }
            return Ok(());
        }
        Cmd::Floor {
            watchers, writes, ..
        } => {
            if !watchers.is_empty() {
                s.fan.watchers = watchers;
            }
            s.fan.writes = writes.unwrap_or(s.fan.writes);
            for &w in &s.fan.watchers {
                let p = progress.sub(zkd_bench::floor_item(w));
                figs.extend(zkd_bench::floor_only(w, &s, &p).await?.figures);
            }
        }
        Cmd::Footprint {
            target,
            znodes,
            sessions,
            max_sessions,
            watches,
        } => {
            let fp = &mut s.footprint;
            fp.watches = watches.unwrap_or(fp.watches);
            if !znodes.is_empty() {
                fp.znodes = znodes;
            }
            fp.sessions = sessions.unwrap_or(fp.sessions);
            fp.max_sessions = max_sessions.unwrap_or(fp.max_sessions);
            fp.timer = target.spawn.timer();
            let p = progress.sub("footprint");
            let out = if let Some(addr) = target.addr {
                footprint::run_external(addr, target.pid, &s.footprint, &p).await?
            } else {
                let spec = target.spec();
                p.say(format!("spawning fresh servers: {}", spec.describe()));
                footprint::run_spawned(&spec, &s.footprint, &p).await?
            };
            let f = zkd_bench::footprint_figures(&out, &s);
            figs.extend(f.figures);
            notes.extend(f.notes);
        }
        Cmd::FloorServer { .. } | Cmd::StartupTimer { .. } => {
            return Err("this subcommand runs only as a child process".into())
        }
        Cmd::Snapshot {
            nodes,
            zkd_bin,
            zk_heap_mb,
            work,
        } => {
            let nodes = nodes.unwrap_or(if cli.quick { 20_000 } else { 1_000_000 });
            let bin = zkd_bin.unwrap_or_else(servers::default_zkd_bin);
            let work = work.unwrap_or_else(std::env::temp_dir);
            let p = progress.sub("snapshot");
            let f = zkd_bench::snapshot::run(&bin, zk_heap_mb, nodes, &work, &p).await?;
            println!("{}", zkd_bench::snapshot::report(&f));
            return Ok(());
        }
        Cmd::EnsembleStartup {
            spawn,
            members,
            rounds,
        } => {
            let rounds = rounds.unwrap_or(if cli.quick { 1 } else { 5 });
            let bin = spawn
                .zkd_bin
                .clone()
                .unwrap_or_else(servers::default_zkd_bin);
            let mut opts = servers::default_jvm_opts(spawn.zk_heap_mb);
            opts.extend_from_slice(&spawn.zk_jvm_opts);
            let launcher = zkd_testkit::oracle::Launcher::new()
                .jvm_opts(opts)
                .log_level("warn");
            let report = tokio::task::spawn_blocking(move || {
                zkd_bench::ensemble_startup::run(&bin, &launcher, members, rounds)
            })
            .await
            .map_err(|e| e.to_string())??;
            println!("{report}");
            return Ok(());
        }
        Cmd::AdminStall {
            nodes,
            sessions,
            connected,
            polls,
            only,
            zkd_bin,
        } => {
            use zkd_bench::admin_stall::{self, Params};
            let d = if cli.quick {
                Params::quick()
            } else {
                Params::full()
            };
            let params = Params {
                nodes: nodes.unwrap_or(d.nodes),
                sessions: sessions.unwrap_or(d.sessions),
                connected: connected.unwrap_or(d.connected),
                polls: polls.unwrap_or(d.polls).max(1),
                only,
                ..d
            };
            let bin = zkd_bin.unwrap_or_else(servers::default_zkd_bin);
            let timeout = params.session_timeout_ms.to_string();
            let args: Vec<String> = [
                "--admin-port",
                "0",
                "--4lw-whitelist",
                "*",
                "--max-session-timeout",
                &timeout,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let (mut child, addr, admin) = zkd_bench::snapshot::start_zkd(&bin, &args)?;
            let p = progress.sub("admin-stall");
            let out = match admin {
                Some(admin) => admin_stall::run(addr, &admin, &params, &p).await,
                None => Err("zkd printed no admin address".into()),
            };
            let _ = child.kill();
            let _ = child.wait();
            println!("{}", admin_stall::report(&out?));
            return Ok(());
        }
        Cmd::Changes {
            before,
            after,
            threshold,
        } => {
            let read = |p: &PathBuf| {
                std::fs::read_to_string(p)
                    .map_err(|e| format!("reading {}: {e}", p.display()))
                    .and_then(|t| zkd_bench::comparison::from_csv(&t))
            };
            let c = zkd_bench::changes::changes(&read(&before)?, &read(&after)?);
            print!("{}", zkd_bench::changes::report(&c, threshold));
            return Ok(());
        }
        Cmd::Replot { csv, out } => {
            let text = std::fs::read_to_string(&csv)
                .map_err(|e| format!("reading {}: {e}", csv.display()))?;
            let mut c = zkd_bench::comparison::from_csv(&text)?;
            c.fd_soft_limit = fd.soft;
            let dir = out.unwrap_or_else(|| {
                csv.parent()
                    .map_or_else(|| PathBuf::from("."), PathBuf::from)
            });
            let mut ns: Vec<usize> = c
                .rows
                .iter()
                .filter(|r| r.item.starts_with("herd "))
                .filter_map(|r| r.x.map(|x| x as usize))
                .collect();
            ns.sort_unstable();
            ns.dedup();
            set_if_given(&mut s.herd.n, ns);
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("creating {}: {e}", dir.display()))?;
            for w in zkd_bench::plot::write_plots(&c, &dir)? {
                eprintln!("wrote {}", w.display());
            }
            print!(
                "{}\n{}",
                c.table().render(),
                compare::targets_table(&compare::targets(&c, &s)).render()
            );
            return Ok(());
        }
        Cmd::Compare {
            spawn,
            rounds,
            only,
            herd_n,
            watchers,
            out,
            budget_minutes,
            max_bystander_cores,
            attempts,
            cpus,
            durable,
        } => {
            s.cpu_sets = zkd_bench::cpus::parse_flag_values(&cpus.server_cpus)?;
            if !s.cpu_sets.is_empty() {
                zkd_bench::cpus::taskset_available()?;
            }
            durable.apply(&mut s.durable);
            if let Some(r) = rounds {
                s.rounds = r.max(1);
            }
            set_if_given(&mut s.herd.n, herd_n);
            set_if_given(&mut s.fan.watchers, watchers);
            s.footprint.timer = spawn.timer();
            let groups = if only.is_empty() {
                vec![
                    Group::Footprint,
                    Group::Throughput,
                    Group::Fanout,
                    Group::Herd,
                    Group::Durable,
                    Group::Floor,
                ]
            } else {
                only
            };
            let opts = compare::Options {
                zkd: spawn.zkd(),
                zookeeper: spawn.zookeeper(),
                settings: s.clone(),
                groups,
                out_dir: out.clone(),
                budget: Duration::from_secs(budget_minutes * 60),
                max_bystander_cores,
                attempts: attempts.max(1),
                progress: !cli.quiet,
            };
            let load_before = loadavg();
            let c = compare::run(&opts).await;
            let machine = format!(
                "{}\n  load average at the start: {load_before}",
                machine_description(&fd)
            );
            let written = compare::write_outputs(&c, &s, &machine, &out)?;
            print!("{}", compare::render_text(&c, &s, &machine));
            for w in written {
                eprintln!("wrote {}", w.display());
            }
            if !c.errors.is_empty() {
                return Err(format!(
                    "{} item(s) failed (see ERRORS above)",
                    c.errors.len()
                ));
            }
            return Ok(());
        }
    }
    print!("{}", zkd_bench::figures_table(&figs).render());
    for n in notes {
        println!("note: {n}");
    }
    Ok(())
}

/// The 1, 5 and 15 minute load averages.
/// Replaces `setting` with what the command line gave, if it gave anything.
fn set_if_given<T>(setting: &mut Vec<T>, given: Vec<T>) {
    if !given.is_empty() {
        *setting = given;
    }
}

/// Runs `items` one after another against the target; their figures in order. An item that
/// fails does not stop the others: the figures measured are printed, then the failures, and
/// the command exits non-zero.
async fn run_items(
    target: &TargetArgs,
    items: Vec<Item>,
    s: &Settings,
    progress: &Progress,
) -> BenchResult<Vec<Figure>> {
    let t = target.resolve(progress).await?;
    let mut figs = Vec::new();
    let mut failed = Vec::new();
    for item in items {
        let p = progress.sub(item.label(s));
        let (addr, pid) = (t.endpoint.addr, t.endpoint.pid);
        match item.figures(addr, pid, s, &p).await {
            Ok(f) => figs.extend(f.figures),
            Err(e) => {
                p.say(format!("failed: {e}"));
                failed.push(format!("{}: {e}", item.label(s)));
            }
        }
    }
    if failed.is_empty() {
        return Ok(figs);
    }
    if !figs.is_empty() {
        print!("{}", zkd_bench::figures_table(&figs).render());
    }
    Err(format!(
        "{} item(s) failed:\n  {}",
        failed.len(),
        failed.join("\n  ")
    ))
}

/// The throughput items once per CPU set: a fresh server pinned to the set, this process
/// (the load generator) moved to the other CPUs; afterwards back on every CPU.
async fn pinned_throughput(
    target: &TargetArgs,
    sets: &[CpuSet],
    s: &Settings,
    progress: &Progress,
) -> BenchResult<(Vec<Figure>, Vec<String>)> {
    zkd_bench::cpus::taskset_available()?;
    let (mut figs, mut notes) = (Vec::new(), Vec::new());
    let spec = target.spec();
    for set in sets {
        let (load, text) = set.load_cpus();
        zkd_bench::cpus::pin_self(&load)?;
        notes.push(format!("server on CPUs {set}: {text}"));
        progress.say(format!(
            "starting {} on CPUs {set}; {text}",
            spec.describe()
        ));
        let place = servers::Placement {
            cpus: Some(set.clone()),
            base: None,
        };
        let server = spec.start_with(&place, Duration::from_secs(60)).await?;
        let pinned = Settings {
            server_cpus: Some(set.clone()),
            ..s.clone()
        };
        for item in Item::throughput(&pinned) {
            let p = progress.sub(item.label(&pinned));
            let f = item
                .figures(server.addr(), Some(server.pid()), &pinned, &p)
                .await
                .map_err(|e| format!("{}: {e}", item.label(&pinned)))?;
            figs.extend(f.figures);
        }
    }
    zkd_bench::cpus::pin_self(&CpuSet::online())?;
    Ok((figs, notes))
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// nproc, CPU model, memory, kernel, JVM version and descriptor limits, for the report.
fn machine_description(fd: &proc::FdLimits) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown".to_string(), |s| s.trim().to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib =
        proc::parse_status_kb(&meminfo, "MemTotal:").map_or(0.0, |kb| kb as f64 / (1 << 20) as f64);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let load = loadavg();
    let java = std::process::Command::new(servers::default_java())
        .arg("-version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .take(2)
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_else(|e| format!("unavailable: {e}"));
    format!(
        "  nproc: {}\n  CPU: {model}\n  memory: {mem_gib:.1} GiB\n  kernel: {kernel}\n  JVM: {java}\n  load average at the end: {}\n  RLIMIT_NOFILE: soft {} (raised from {}), hard {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load,
        fd.soft,
        fd.soft_before,
        fd.hard
    )
}
