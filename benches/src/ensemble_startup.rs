//! Start-up of a three-member ensemble: zkd's simulated ensemble (`zkd --ensemble N`, one
//! process) against N Apache ZooKeeper 3.8 JVMs with `server.N` lines (the testkit
//! launcher's ensemble), from spawning until every member's client port listens, and until
//! every member serves (`srvr` reports its mode), reported as ratios.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use zkd_testkit::oracle::ensemble::serving_mode;
use zkd_testkit::oracle::{temp_dir, Launcher};

use crate::report::Table;
use crate::util::median;

/// One start of an ensemble.
#[derive(Debug, Clone, Copy)]
pub struct Startup {
    /// From spawning until every member's client port accepts connections.
    pub listening: Duration,
    /// From spawning until every member serves requests.
    pub serving: Duration,
    /// Resident memory of all the ensemble's processes together once serving.
    pub rss_bytes: u64,
}

/// Kills the processes when dropped.
struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

/// Polls until every address accepts a connection, then until every member serves; a
/// process that exits fails the wait.
fn wait(
    started: Instant,
    addrs: &[SocketAddr],
    procs: &mut Processes,
    timeout: Duration,
) -> Result<Startup, String> {
    let deadline = started + timeout;
    let mut listening = None;
    loop {
        for c in &mut procs.0 {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(format!("a member exited during start-up ({status})"));
            }
        }
        if listening.is_none()
            && addrs
                .iter()
                .all(|a| TcpStream::connect_timeout(a, Duration::from_millis(200)).is_ok())
        {
            listening = Some(started.elapsed());
        }
        if let Some(listening) = listening {
            if addrs.iter().all(|a| serving_mode(*a).is_some()) {
                let serving = started.elapsed();
                let rss_bytes = procs
                    .0
                    .iter()
                    .map(|c| crate::proc::rss_bytes(c.id()).unwrap_or(0))
                    .sum();
                return Ok(Startup {
                    listening,
                    serving,
                    rss_bytes,
                });
            }
        }
        if Instant::now() >= deadline {
            return Err(format!("the ensemble did not serve within {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Starts an `n`-member Apache ZooKeeper ensemble and measures it.
pub fn zookeeper(launcher: &Launcher, n: u64, timeout: Duration) -> Result<Startup, String> {
    let dir = temp_dir("zkd-bench-ensemble").map_err(|e| format!("temporary dir: {e}"))?;
    let result = (|| {
        let plan = launcher.ensemble_commands(&dir, n)?;
        let addrs: Vec<SocketAddr> = plan.iter().map(|(m, _)| m.addr).collect();
        let mut procs = Processes(Vec::new());
        let started = Instant::now();
        for (_, mut cmd) in plan {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
            crate::servers::kill_with_parent(&mut cmd);
            procs
                .0
                .push(cmd.spawn().map_err(|e| format!("cannot run java: {e}"))?);
        }
        wait(started, &addrs, &mut procs, timeout)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Starts `zkd --ensemble n --port 0` and measures it.
pub fn zkd(bin: &Path, n: u64, timeout: Duration) -> Result<Startup, String> {
    let mut cmd = Command::new(bin);
    cmd.args(["--ensemble", &n.to_string(), "--port", "0", "--log", "warn"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::servers::kill_with_parent(&mut cmd);
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut procs = Processes(vec![child]);
    let mut addrs = Vec::new();
    if let Some(out) = stdout {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(a) = line.strip_prefix("zkd listening on ") {
                addrs.push(a.parse().map_err(|e| format!("address {a:?}: {e}"))?);
                if addrs.len() as u64 == n {
                    break;
                }
            }
        }
    }
    if addrs.len() as u64 != n {
        let mut err = String::new();
        if let Some(e) = stderr {
            let _ = std::io::Read::read_to_string(&mut BufReader::new(e), &mut err);
        }
        return Err(format!(
            "zkd printed {} of {n} listening lines: {}",
            addrs.len(),
            err.trim()
        ));
    }
    wait(started, &addrs, &mut procs, timeout)
}

/// Medians of `rounds` alternating starts, as a table with the ratios.
pub fn run(bin: &Path, launcher: &Launcher, n: u64, rounds: usize) -> Result<String, String> {
    let timeout = Duration::from_secs(60);
    let (mut zk, mut ours) = (Vec::new(), Vec::new());
    let mut zkd_error = None;
    for round in 0..rounds {
        zk.push(zookeeper(launcher, n, timeout)?);
        match zkd(bin, n, timeout) {
            Ok(s) => ours.push(s),
            Err(e) => zkd_error = Some(e),
        }
        eprintln!("ensemble start-up: round {} of {rounds} done", round + 1);
    }
    let ms = |v: &[Startup], f: fn(&Startup) -> Duration| {
        median(
            &v.iter()
                .map(|s| f(s).as_secs_f64() * 1e3)
                .collect::<Vec<_>>(),
        )
    };
    let mib = |v: &[Startup]| {
        median(
            &v.iter()
                .map(|s| s.rss_bytes as f64 / 1048576.0)
                .collect::<Vec<_>>(),
        )
    };
    let mut t = Table::new(&[
        "ensemble of 3",
        "all ports listen (ms)",
        "all serve (ms)",
        "RSS (MiB)",
    ]);
    let zk_row = [ms(&zk, |s| s.listening), ms(&zk, |s| s.serving), mib(&zk)];
    t.row(vec![
        format!("Apache ZooKeeper ({n} JVMs)"),
        format!("{:.0}", zk_row[0]),
        format!("{:.0}", zk_row[1]),
        format!("{:.1}", zk_row[2]),
    ]);
    if ours.is_empty() {
        let why = zkd_error.unwrap_or_default();
        return Ok(format!("{}\nzkd: not measured ({why})\n", t.render()));
    }
    let ours_row = [
        ms(&ours, |s| s.listening),
        ms(&ours, |s| s.serving),
        mib(&ours),
    ];
    t.row(vec![
        "zkd --ensemble (1 process)".into(),
        format!("{:.1}", ours_row[0]),
        format!("{:.1}", ours_row[1]),
        format!("{:.1}", ours_row[2]),
    ]);
    t.row(vec![
        "ZooKeeper / zkd".into(),
        format!("{:.0}x", zk_row[0] / ours_row[0].max(0.001)),
        format!("{:.0}x", zk_row[1] / ours_row[1].max(0.001)),
        format!("{:.0}x", zk_row[2] / ours_row[2].max(0.001)),
    ]);
    Ok(format!(
        "{}\n(medians of {rounds} rounds, started alternately)\n",
        t.render()
    ))
}
