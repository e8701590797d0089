//! Unmodified third-party clients against the server under test: the Java client with Curator
//! recipes, kazoo (Python), the C client's `cli_mt`, and ZooKeeper's own `zkCli.sh`.
//!
//! Each test starts a target (see `zkd_testkit::target`: embedded zkd by default,
//! `ZKD_TEST_TARGET=zookeeper` for a real ZooKeeper, `ZKD_TEST_ADDR=host:port` for a running
//! server) and runs `client-tests/run-suite.sh NAME ADDR`, which prints one `PASS`/`FAIL` line per
//! check. A missing client or library (exit status 3) fails the test: install them with
//! `scripts/install-test-deps.sh`.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zkd_testkit::oracle::member_control::MemberControl;
use zkd_testkit::target::Target;

/// Upper bound for one suite, including the Java compile; run-suite.sh has its own, shorter limit.
const SUITE_LIMIT: Duration = Duration::from_secs(420);

struct SuiteRun {
    status: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
    elapsed: Duration,
}

/// Runs the suite script to completion (or the time limit) on a blocking thread, with
/// `envs` added to its environment.
fn run_suite_blocking(name: &str, addr: &str, envs: &[(&str, String)]) -> SuiteRun {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("run-suite.sh");
    let started = Instant::now();
    let mut child = Command::new("bash")
        .arg(&script)
        .arg(name)
        .arg(addr)
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));

    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });

    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code(),
            Ok(None) if started.elapsed() > SUITE_LIMIT => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok().and_then(|s| s.code());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("waiting for the {name} suite: {e}"),
        }
    };
    // The readers end when every holder of the pipes has exited; a killed suite can leave
    // grandchildren holding them, so do not wait for the readers forever.
    let join = |h: std::thread::JoinHandle<String>| {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !h.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if h.is_finished() {
            h.join().unwrap_or_default()
        } else {
            String::from("<output unavailable: pipe still held open>")
        }
    };
    SuiteRun {
        status,
        stdout: join(out_reader),
        stderr: join(err_reader),
        timed_out,
        elapsed: started.elapsed(),
    }
}

async fn run_suite(name: &'static str) {
    let target = Target::start().await;
    let addr = target.connect_string();
    eprintln!(
        "running the {name} suite against {:?} at {addr}",
        target.kind()
    );

    check_suite(name, &addr, Vec::new()).await;
    if let Some(server) = target.zkd() {
        no_findings(name, server);
    }
    drop(target);
}

/// The recipe checks (docs/history.md) find nothing in what a suite did: its elections,
/// locks, barriers and watches are the client libraries' own recipes, used as intended.
fn no_findings(name: &str, server: &zkd_server::Server) {
    let summary = server.history_summary().expect("the history's summary");
    assert_eq!(
        summary.dropped, 0,
        "the {name} suite's history lost its oldest events: the checks would not see them"
    );
    let jsonl = server.history_jsonl().expect("the history");
    let events: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let found = zkd_server::recipe_checks::check_all(&events);
    assert!(
        found.is_empty(),
        "the recipe checks found, in the {name} suite's {} events: {found:#?}",
        events.len()
    );
}

/// Runs suite `name` against `addr` on a blocking thread (so an embedded server keeps serving
/// on the runtime) and fails the test unless every check passed.
async fn check_suite(name: &'static str, addr: &str, envs: Vec<(&'static str, String)>) {
    let run = {
        let addr = addr.to_string();
        tokio::task::spawn_blocking(move || run_suite_blocking(name, &addr, &envs))
            .await
            .expect("suite runner thread panicked")
    };

    println!("{}", run.stdout);
    if !run.stderr.trim().is_empty() {
        println!("--- stderr of the {name} suite ---\n{}", run.stderr);
    }
    println!("{name} suite finished in {:.1}s", run.elapsed.as_secs_f64());

    if run.timed_out {
        panic!("the {name} suite did not finish within {SUITE_LIMIT:?}");
    }
    if run.status == Some(3) {
        // run-suite.sh prints `missing dependency: <what>; run scripts/install-test-deps.sh`
        let line = run
            .stdout
            .lines()
            .find(|l| l.starts_with("missing dependency:"))
            .unwrap_or("missing dependency; run scripts/install-test-deps.sh");
        panic!("the {name} suite cannot run: {line}");
    }
    let summary = run
        .stdout
        .lines()
        .rev()
        .find(|l| l.ends_with(" failed") && l.contains(" passed, "))
        .unwrap_or("<no summary line>");
    let failures: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL "))
        .collect();
    assert!(
        run.status == Some(0) && failures.is_empty() && summary.ends_with(" 0 failed"),
        "the {name} suite against {addr} failed (exit status {:?}, {summary}):\n{}",
        run.status,
        failures.join("\n")
    );
}

/// What an ensemble suite needs besides three voting members.
#[derive(Clone, Copy)]
enum Setup {
    /// Read-only mode and local sessions on, and this many observers after the voters.
    ReadOnly { observers: u64 },
    /// Reconfiguration on and the superuser `super:secret`.
    Reconfig,
    /// Cuts between members, with a 500 ms tick and `syncLimit=2` (a cut-off member notices
    /// within a second): on ZooKeeper, each member in a network namespace of its own (root
    /// only); on zkd, with ZooKeeper's failover timing.
    Partition,
}

/// The superuser's digest (`super:secret`) the reconfig suites authenticate with.
const SUPER_DIGEST: &str = "super:lK75jTNcA+U9vtVEw5vB51mj/w4=";

/// Runs an ensemble suite against three voting members set up as `setup` says, whose members
/// it stops and starts through `POST /zkd/members/{id}/stop|start`: zkd's (its admin
/// listener), or with `ZKD_TEST_TARGET=zookeeper` Apache ZooKeeper JVMs (a small endpoint
/// here kills and restarts them) with the same settings: `readonlymode.enabled` and local
/// sessions (without them a 3.8 read-only member serves no client at all: docs/protocol.md,
/// "Ensemble members and read-only mode"), or `reconfigEnabled=true` and the superuser's
/// digest as a system property.
async fn run_ensemble_suite(name: &'static str, setup: Setup) {
    if std::env::var("ZKD_TEST_TARGET").as_deref() == Ok("zookeeper") {
        let ensemble = tokio::task::spawn_blocking(move || {
            let launcher = zkd_testkit::oracle::Launcher::new();
            match setup {
                Setup::ReadOnly { observers } => launcher
                    .jvm_opts(vec!["-Dreadonlymode.enabled=true".into()])
                    .cfg(&[
                        ("localSessionsEnabled", "true"),
                        ("localSessionsUpgradingEnabled", "true"),
                    ])
                    .start_ensemble_with_observers(3, observers),
                Setup::Reconfig => launcher
                    .jvm_opt(&format!(
                        "-Dzookeeper.DigestAuthenticationProvider.superDigest={SUPER_DIGEST}"
                    ))
                    .cfg(&[("reconfigEnabled", "true")])
                    .start_ensemble(3),
                Setup::Partition => launcher
                    .jvm_opt("-Dzookeeper.cnxTimeout=1000")
                    .cfg(&[("tickTime", "500"), ("syncLimit", "2")])
                    .start_netns_ensemble("zkdsuite", 3),
            }
        })
        .await
        .expect("launcher thread")
        .unwrap_or_else(|e| panic!("{e}"));
        let hosts = ensemble.connect_string();
        let ensemble = std::sync::Arc::new(std::sync::Mutex::new(ensemble));
        let control = MemberControl::start(ensemble.clone());
        check_suite(name, &hosts, vec![("ZKD_CONTROL_URL", control.url())]).await;
        return;
    }
    let config = match setup {
        Setup::ReadOnly { observers } => zkd_server::Config {
            ensemble: Some(
                zkd_server::EnsembleConfig::numbered(3 + observers, 0)
                    .and_then(|e| e.with_observers(observers))
                    .expect("the members"),
            ),
            ..zkd_server::Config::default()
        },
        Setup::Reconfig => zkd_server::Config {
            ensemble: Some(zkd_server::EnsembleConfig::numbered(3, 0).expect("the members")),
            reconfig_enabled: true,
            super_digest: Some(SUPER_DIGEST.into()),
            ..zkd_server::Config::default()
        },
        Setup::Partition => {
            let mut members = zkd_server::EnsembleConfig::numbered(3, 0).expect("the members");
            // As the ZooKeeper side: a cut-off member notices after syncLimit ticks.
            members.election_timing = zkd_server::ElectionTiming::ZooKeeper;
            members.sync_limit = 2;
            zkd_server::Config {
                ensemble: Some(members),
                tick_time: std::time::Duration::from_millis(500),
                ..zkd_server::Config::default()
            }
        }
    };
    let config = zkd_testkit::target::whole_history(config);
    let (server, admin) = zkd_testkit::target::zkd_with_admin(config).await;
    let control = vec![("ZKD_CONTROL_URL", format!("http://{admin}"))];
    check_suite(name, &server.connect_string(), control).await;
    no_findings(name, &server);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn java_client_and_curator_suite() {
    run_suite("java").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kazoo_suite() {
    run_suite("python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn c_client_cli_mt_suite() {
    run_suite("c").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn zkcli_suite() {
    run_suite("cli").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_ensemble_failover_suite() {
    run_ensemble_suite("java-ensemble", Setup::ReadOnly { observers: 0 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kazoo_ensemble_failover_and_read_only_suite() {
    run_ensemble_suite("python-ensemble", Setup::ReadOnly { observers: 0 }).await;
}

/// kazoo's reconfig removes and adds back a member, with ZooKeeper's refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kazoo_ensemble_reconfig_suite() {
    run_ensemble_suite("python-reconfig", Setup::Reconfig).await;
}

/// Curator's reconfig removes the leader and adds it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_ensemble_reconfig_suite() {
    run_ensemble_suite("java-reconfig", Setup::Reconfig).await;
}

/// Curator's LeaderLatch keeps at most one leader while the leader's member is cut off and
/// healed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_ensemble_partition_suite() {
    run_ensemble_suite("java-partition", Setup::Partition).await;
}

/// kazoo's election keeps at most one leader while the leader's member is cut off and
/// healed; a lock holder on a cut-off member loses its connection before the lock moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kazoo_ensemble_partition_suite() {
    run_ensemble_suite("python-partition", Setup::Partition).await;
}

/// An observer serves a kazoo client, moves its session, and counts for nothing in the quorum.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kazoo_ensemble_observer_suite() {
    run_ensemble_suite("python-observer", Setup::ReadOnly { observers: 1 }).await;
}
