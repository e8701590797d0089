//! The servers a benchmark talks to: a running one given by address (and optionally pid), or
//! one the bench spawns itself — the zkd release binary or Apache ZooKeeper (the release
//! `ZKD_ZOOKEEPER_VERSION` names) in a JVM — as a separate process whose pid is known, so its
//! CPU time and memory can be read.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use zkd_protocol::Request;
use zkd_testkit::oracle::{free_port, temp_dir, Launcher};
use zkd_testkit::raw::RawClient;

/// Where a benchmark sends its requests.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Short name for tables and progress lines (`zkd`, `zookeeper`, `external`).
    pub label: String,
    pub addr: SocketAddr,
    /// Process to read CPU time and RSS from; `None` = skip those figures.
    pub pid: Option<u32>,
}

/// Which implementation a spawned server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Zkd,
    ZooKeeper,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Zkd => "zkd",
            Kind::ZooKeeper => "zookeeper",
        }
    }
}

/// How to start a server process.
#[derive(Debug, Clone)]
pub enum ServerSpec {
    /// The zkd binary with extra flags (the bench adds `--port`).
    Zkd { bin: PathBuf, args: Vec<String> },
    /// Apache ZooKeeper, started by the test kit's launcher.
    ZooKeeper(Launcher),
}

/// Flags zkd is started with besides `--port`: quiet logs, the history off (the server
/// itself is measured; benches/history-cost.sh measures the history's cost), no per-address
/// connection cap
/// (all bench sessions come from 127.0.0.1; ZooKeeper runs with `maxClientCnxns=0` too), and
/// a server-wide cap on unwritten replies far above anything an item can queue.
///
/// ZooKeeper has no server-wide cap on unwritten replies. zkd's default (256 MiB) counts a
/// shared getChildren list once per connection it is queued on, so when 10 000 candidates
/// read a 10 000-child list (160 KB) at once and the bench reads more slowly than zkd
/// answers (a busy machine), the count passes 256 MiB although the list is held once, and
/// zkd drops candidates' connections ("candidate N: connection closed").
pub fn default_zkd_args() -> Vec<String> {
    [
        "--log",
        "warn",
        "--history-events",
        "0",
        "--max-client-cnxns",
        "0",
        "--max-total-outbound-bytes",
        BENCH_MAX_TOTAL_OUTBOUND,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// 16 GiB: ten times the most the largest herd item can have counted as queued at once
/// (10 000 sessions x one 160 KB children list).
pub const BENCH_MAX_TOTAL_OUTBOUND: &str = "17179869184";

/// JVM flags for ZooKeeper: the 1000 MiB heap cap of ZooKeeper's own `zkEnv.sh`
/// (`ZK_SERVER_HEAP`), everything else the JVM's defaults (G1, tiered JIT), as
/// `zkServer.sh start` would run it.
pub fn default_jvm_opts(heap_mb: u32) -> Vec<String> {
    vec![format!("-Xmx{heap_mb}m")]
}

/// The zkd release binary next to this executable (`target/release/zkd`), else `zkd` on PATH.
pub fn default_zkd_bin() -> PathBuf {
    if let Ok(me) = std::env::current_exe() {
        for dir in me.ancestors().skip(1).take(3) {
            let candidate = dir.join("zkd");
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    PathBuf::from("zkd")
}

/// `$JAVA_HOME/bin/java`, else `java` on PATH.
pub fn default_java() -> PathBuf {
    zkd_testkit::oracle::java()
}

impl ServerSpec {
    pub fn zkd(bin: PathBuf) -> ServerSpec {
        ServerSpec::Zkd {
            bin,
            args: default_zkd_args(),
        }
    }

    /// ZooKeeper with the given heap cap and extra JVM flags.
    pub fn zookeeper(heap_mb: u32, extra_jvm_opts: &[String]) -> ServerSpec {
        let mut opts = default_jvm_opts(heap_mb);
        opts.extend_from_slice(extra_jvm_opts);
        ServerSpec::ZooKeeper(Launcher::new().jvm_opts(opts).log_level("warn"))
    }

    /// The same server keeping its state on disk in `data/` of its directory, acknowledging
    /// a write only once it is synced: zkd with `--data-dir data --fsync POLICY`, ZooKeeper
    /// with `forceSync=yes` (its default; `policy` applies to zkd only).
    pub fn durable(&self, policy: &str) -> ServerSpec {
        match self {
            ServerSpec::Zkd { bin, args } => {
                let mut args = args.clone();
                args.extend(["--data-dir", "data", "--fsync", policy].map(String::from));
                ServerSpec::Zkd {
                    bin: bin.clone(),
                    args,
                }
            }
            ServerSpec::ZooKeeper(l) => {
                ServerSpec::ZooKeeper(l.clone().cfg(&[("forceSync", "yes")]))
            }
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            ServerSpec::Zkd { .. } => Kind::Zkd,
            ServerSpec::ZooKeeper(_) => Kind::ZooKeeper,
        }
    }

    /// The command line, for reports.
    pub fn describe(&self) -> String {
        match self {
            ServerSpec::Zkd { bin, args } => {
                format!("{} --port <free> {}", bin.display(), args.join(" "))
            }
            ServerSpec::ZooKeeper(launcher) => launcher.describe(),
        }
    }

    /// Starts the server on a free loopback port and waits until a session handshake
    /// succeeds; the time from spawning to that handshake is the start-up time.
    pub async fn start(&self, timeout: Duration) -> Result<ServerProcess, String> {
        self.start_with(&Placement::default(), timeout).await
    }

    /// [`ServerSpec::start`] pinned to a CPU set and/or with its directory (working
    /// directory, logs, data directory) under a given base.
    pub async fn start_with(
        &self,
        place: &Placement,
        timeout: Duration,
    ) -> Result<ServerProcess, String> {
        let mut last = String::new();
        for _ in 0..3 {
            match self.try_start(place, timeout).await {
                Ok(p) => return Ok(p),
                Err((retry, e)) if retry => last = e,
                Err((_, e)) => return Err(e),
            }
        }
        Err(format!(
            "{}: could not start after 3 attempts: {last}",
            self.kind().label()
        ))
    }

    async fn try_start(
        &self,
        place: &Placement,
        timeout: Duration,
    ) -> Result<ServerProcess, (bool, String)> {
        let fatal = |e: String| (false, e);
        let port = free_port().map_err(|e| fatal(format!("no free port: {e}")))?;
        let dir = match &place.base {
            Some(base) => crate::util::fresh_dir(base, "server"),
            None => temp_dir("zkd-bench"),
        }
        .map_err(|e| fatal(format!("no temporary directory: {e}")))?;
        let log_path = dir.join("server.log");
        let log = std::fs::File::create(&log_path).map_err(|e| fatal(e.to_string()))?;
        let log2 = log.try_clone().map_err(|e| fatal(e.to_string()))?;
        let mut cmd = match self {
            ServerSpec::Zkd { bin, args } => {
                let mut c = Command::new(bin);
                c.arg("--port").arg(port.to_string()).args(args);
                c
            }
            ServerSpec::ZooKeeper(launcher) => match launcher.command(&dir, port) {
                Ok(c) => c,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(fatal(e));
                }
            },
        };
        if let Some(cpus) = &place.cpus {
            cmd = crate::cpus::pinned(&cmd, cpus);
        }
        cmd.current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        kill_with_parent(&mut cmd);
        let started = Instant::now();
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(fatal(format!("cannot run {}: {e}", self.describe())));
            }
        };
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let mut proc = ServerProcess {
            kind: self.kind(),
            child,
            addr,
            dir,
            startup: Duration::ZERO,
        };
        let deadline = started + timeout;
        // Handshake attempts overlap: a server that is still starting may take a connection
        // and never answer it (ZooKeeper does, now and then), so while attempts hang a new one
        // starts every `STAGGER`; a refused attempt is retried 2 ms later. The first
        // handshake that succeeds ends the start-up.
        const STAGGER: Duration = Duration::from_millis(25);
        let mut attempts = FuturesUnordered::new();
        let mut last_attempt: Option<Instant> = None;
        loop {
            if let Ok(Some(status)) = proc.child.try_wait() {
                let log = proc.log_tail(20);
                let collision =
                    log.contains("Address already in use") || log.contains("BindException");
                return Err((
                    collision,
                    format!(
                        "{} exited during start-up ({status}):\n{log}",
                        self.kind().label()
                    ),
                ));
            }
            if Instant::now() >= deadline {
                let log = proc.log_tail(20);
                return Err((
                    false,
                    format!(
                        "{} accepted no session within {:?}:\n{log}",
                        self.kind().label(),
                        timeout
                    ),
                ));
            }
            let wait = if attempts.is_empty() {
                Duration::from_millis(2)
            } else {
                STAGGER
            };
            if last_attempt.is_none_or(|t| t.elapsed() >= wait) && attempts.len() < 64 {
                attempts.push(tokio::time::timeout(
                    Duration::from_secs(2),
                    RawClient::connect(addr, 30_000),
                ));
                last_attempt = Some(Instant::now());
            }
            tokio::select! {
                Some(Ok(Ok(client))) = attempts.next() => {
                    proc.startup = started.elapsed();
                    let _ = tokio::time::timeout(
                        Duration::from_secs(5),
                        client.call(&Request::CloseSession),
                    )
                    .await;
                    return Ok(proc);
                }
                _ = tokio::time::sleep(Duration::from_millis(2)) => {}
            }
        }
    }
}

/// Where a spawned server runs: on which CPUs (`None`: any) and under which directory
/// (`None`: the system's temporary directory). Its data directory, if it has one, is
/// `data/` inside its own directory there.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    pub cpus: Option<crate::cpus::CpuSet>,
    pub base: Option<PathBuf>,
}

/// A server process started by the bench; dropping it kills the process and removes its
/// temporary directory.
pub struct ServerProcess {
    pub kind: Kind,
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
    startup: Duration,
}

impl ServerProcess {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// From spawn to the first successful session handshake.
    pub fn startup(&self) -> Duration {
        self.startup
    }

    pub fn endpoint(&self) -> Endpoint {
        Endpoint {
            label: self.kind.label().to_string(),
            addr: self.addr,
            pid: Some(self.pid()),
        }
    }

    /// The last lines of the server's output and log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let mut text = String::new();
        for name in ["server.log", "zookeeper.log"] {
            text.push_str(&std::fs::read_to_string(self.dir.join(name)).unwrap_or_default());
        }
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The child gets SIGKILL when the bench dies, so no server outlives an interrupted run.
pub(crate) fn kill_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}
