//! Quick runs of every benchmark against an embedded zkd: the numbers are not looked at,
//! the checks the benchmarks make are (right leader after each failure, no lost or duplicate
//! notification, every request answered without error).

use std::time::{Duration, Instant};

use zkd_bench::herd::{self, Failure, Mode};
use zkd_bench::progress::Progress;
use zkd_bench::throughput::Workload;
use zkd_bench::{fanout, footprint, Settings};
use zkd_testkit::target::Target;

/// An embedded zkd without the per-address connection cap (every bench session comes from
/// 127.0.0.1).
async fn zkd() -> Target {
    Target::start_zkd_with(zkd_server::Config {
        max_client_cnxns: 0,
        ..zkd_server::Config::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_runs_of_every_benchmark_check_out() {
    let started = Instant::now();
    let target = zkd().await;
    let addr = target.addr();
    let s = Settings::quick();
    let quiet = Progress::silent();

    for mode in [Mode::Herd, Mode::Predecessor] {
        for failure in [Failure::Delete, Failure::Close] {
            let p = herd::Params {
                n: 30,
                mode,
                failures: 4,
                failure,
                settle: Duration::from_millis(20),
                timeout: Duration::from_secs(10),
                pid: None,
            };
            let out = herd::run(addr, &p, &quiet)
                .await
                .unwrap_or_else(|e| panic!("herd {mode:?} {failure:?}: {e}"));
            assert_eq!(out.failures.len(), 4);
            for (k, f) in out.failures.iter().enumerate() {
                let survivors = (30 - k - 1) as u64;
                // In herd mode the failing leader's own child watch fires too (ZooKeeper does
                // the same, also when the session is closed).
                let due = match mode {
                    Mode::Predecessor => 1,
                    Mode::Herd => survivors + 1,
                };
                assert_eq!(f.notifications, due, "{mode:?} {failure:?} failure {k}");
                assert!(f.quiet >= f.leader_known);
                assert!(f.bytes > 0);
            }
        }
    }

    for w in Workload::ALL {
        let figs = zkd_bench::Item::Throughput(w)
            .figures(addr, None, &s, &quiet)
            .await
            .unwrap_or_else(|e| panic!("throughput {w:?}: {e}"));
        let ops = figs.figures.iter().find(|f| f.name == "ops/s").unwrap();
        assert!(ops.value > 0.0, "{w:?}: no operations completed");
    }

    let out = fanout::run(
        addr,
        &fanout::Params {
            watchers: 100,
            writes: 3,
            settle: Duration::from_millis(20),
            timeout: Duration::from_secs(10),
            pid: None,
        },
        &quiet,
    )
    .await
    .unwrap_or_else(|e| panic!("fanout: {e}"));
    assert_eq!(out.samples.len(), 3);
    assert!(out
        .samples
        .iter()
        .all(|s| s.first <= s.median && s.median <= s.last));

    // Embedded: no process of its own, so no start-up or RSS figures.
    let fp = footprint::run_external(addr, None, &s.footprint, &quiet)
        .await
        .unwrap_or_else(|e| panic!("footprint: {e}"));
    let counts: Vec<usize> = fp.znodes.iter().map(|z| z.count).collect();
    assert_eq!(counts, s.footprint.znodes);
    assert_eq!(fp.sessions.count, s.footprint.sessions);
    assert_eq!(fp.max_sessions.opened, s.footprint.max_sessions);
    assert!(fp.znodes.iter().all(|z| z.per_item().is_none()));
    let watches = fp.watches.expect("the watches step ran");
    assert_eq!(watches.growth.count, s.footprint.watches);

    assert!(
        started.elapsed() < Duration::from_secs(30),
        "smoke run took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn herd_rejects_impossible_parameters() {
    let target = zkd().await;
    let p = herd::Params {
        n: 3,
        mode: Mode::Herd,
        failures: 3,
        failure: Failure::Delete,
        settle: Duration::from_millis(10),
        timeout: Duration::from_secs(5),
        pid: None,
    };
    assert!(herd::run(target.addr(), &p, &Progress::silent())
        .await
        .is_err());
}

/// A small admin-stall run against an embedded zkd with its admin listener: every endpoint
/// answers (the item fails on any other status) and every one is timed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_stall_polls_every_endpoint() {
    use zkd_bench::admin_stall::{self, Params};
    let params = Params {
        nodes: 300,
        sessions: 40,
        connected: 10,
        polls: 1,
        ..Params::quick()
    };
    let server = zkd_server::Server::start(zkd_server::Config {
        port: 0,
        admin_port: Some(0),
        max_client_cnxns: 0,
        max_session_timeout: Some(Duration::from_millis(params.session_timeout_ms as u64)),
        four_letter_whitelist: zkd_server::FourLetterWhitelist::parse("*").unwrap(),
        ..zkd_server::Config::default()
    })
    .await
    .expect("embedded zkd");
    let admin = server.admin_addr().expect("admin address").to_string();
    let out = admin_stall::run(server.local_addr(), &admin, &params, &Progress::silent())
        .await
        .unwrap_or_else(|e| panic!("admin-stall: {e}"));
    assert!(out.rows.len() > 40, "{} rows", out.rows.len());
    let tree = out.rows.iter().find(|r| r.endpoint == "/zkd/tree").unwrap();
    assert!(tree.bytes > 300 * 40, "the tree export holds the nodes");
    assert!(admin_stall::report(&out).contains("`/commands/dump`"));
}

/// The fan-out floor runs in a child process of its own (this crate's binary, re-executed):
/// its figures come back with the child's CPU time per write (read from the child's pid,
/// which an in-process floor does not have), and the child is gone afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floor_runs_in_a_child_process() {
    let bin = std::path::PathBuf::from(env!("CARGO_BIN_EXE_zkd-bench"));
    let server = zkd_bench::floor::FloorProcess::spawn(&bin).expect("floor child");
    let (addr, pid) = (server.addr(), server.pid());
    assert_ne!(pid, std::process::id());
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    drop(server);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the floor child {pid} is reaped on drop"
    );

    let s = Settings {
        floor_bin: Some(bin),
        ..Settings::quick()
    };
    let figs = zkd_bench::Item::Floor(200)
        .figures(addr, None, &s, &Progress::silent())
        .await
        .unwrap_or_else(|e| panic!("floor: {e}"));
    let names: Vec<&str> = figs.figures.iter().map(|f| f.name.as_str()).collect();
    assert!(
        names.contains(&"time until last watcher notified"),
        "{names:?}"
    );
    assert!(names.contains(&"server CPU per write"), "{names:?}");
    assert!(figs.figures.iter().all(|f| f.item == "floor W=200"));
}

/// The durable item's write run with reader sessions beside it: both sides complete
/// requests and the readers' latencies come back as their own figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_run_times_reads_during_the_writes() {
    use zkd_bench::durable;
    let target = zkd().await;
    let p = durable::Params::quick();
    let item = durable::item(p.value_size, (2, 2), false);
    let figs = durable::measure(target.addr(), None, (2, 2), &item, &p, &Progress::silent())
        .await
        .unwrap_or_else(|e| panic!("durable: {e}"));
    let value = |name: &str| {
        figs.figures
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no figure {name:?}"))
            .value
    };
    assert!(value("ops/s") > 0.0);
    assert!(value("getData ops/s during the writes") > 0.0);
    assert!(value(durable::READ_P99) >= value("getData p50 during the writes"));
    assert!(figs
        .figures
        .iter()
        .all(|f| f.item == "durable set 100B 2x2"));
}

/// `--server-cpus` naming a CPU the host lacks is refused with a sentence and exit status 2
/// before anything starts; a pinned command runs on exactly the CPUs it was given.
#[test]
fn server_cpus_are_checked_and_applied() {
    use std::process::Command;
    use zkd_bench::cpus::{self, CpuSet};
    let out = Command::new(env!("CARGO_BIN_EXE_zkd-bench"))
        .args([
            "throughput",
            "--quick",
            "--server-cpus",
            "0",
            "--server-cpus",
            "4096",
        ])
        .output()
        .expect("run zkd-bench");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("this host has no CPU 4096"), "{err}");

    let mut sleep = Command::new("sleep");
    sleep.arg("30");
    let mut child = cpus::pinned(&sleep, &CpuSet::parse("0").unwrap())
        .spawn()
        .expect("taskset (util-linux) runs");
    let status = format!("/proc/{}/status", child.id());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let allowed = loop {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        // Before taskset has exec'd sleep the process may still be taskset itself.
        if text.contains("Name:\tsleep") {
            break text
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string());
        }
        assert!(std::time::Instant::now() < deadline, "sleep never started");
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(allowed.as_deref(), Some("0"));
}
