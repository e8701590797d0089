//! Differential test: random multi-session programs run against zkd and against a real Apache
//! ZooKeeper 3.8 in lock-step; every reply and every watch event must agree.
//!
//! One zkd and one ZooKeeper serve the whole run. Each program gets its own root (`/p<N>`,
//! created by a harness session just after the program's sessions are opened), and zxids are
//! compared as offsets from that root's creation. Programs use 2–3 sessions and 5–25 steps
//! over a small path space: creates of every opcode and mode (containers and TTL nodes
//! included), deletes, setData with right/wrong/any versions, exists/getData/getChildren(2)
//! with and without watches, multi and multiRead with failing and misplaced sub-ops, setACL
//! and getACL (world, digest, auth, ip and invalid ACLs), addauth, getAllChildrenNumber,
//! getEphemerals, sync, addWatch, checkWatches/removeWatches, closing sessions, dropping
//! connections and reconnecting with the session id and password plus setWatches2 carrying
//! the watches the session holds.
//!
//! Compared exactly: error codes, xids, zxids (as offsets), version, cversion, aversion,
//! pzxid/czxid/mzxid (as offsets), dataLength, numChildren, data (null and empty differ),
//! ACLs, multi result types, sequential names, ephemeralOwner (as the owning session's index),
//! and per session the sequence of notifications (type, state, path), split by the reply they
//! preceded. Normalised: session ids and passwords, ctime/mtime (ignored), and the order of
//! children and getEphemerals results (sorted: neither server promises an order).
//!
//! Deliberate differences between zkd and ZooKeeper 3.8.0 (zkd follows the newer behaviour
//! PROTOCOL.md Appendix A recommends); the test does not count them as failures:
//! * notification header zxid: 3.8.0 sends -1, zkd the zxid of the change — not compared;
//! * `exists` checks READ in zkd (3.8.4+), not in 3.8.0: an exists answered NOAUTH by zkd and
//!   OK by ZooKeeper is accepted; with a watch the watch state then differs, so the program
//!   stops there;
//! * a `create2` sub-op (header 15) of an ordinary node in a multi: zkd answers a type-15
//!   result with a Stat, 3.8.0 a type-1 result — the Stat is dropped before comparing;
//! * several watch modes of one connection on one path (3.8.0 lets the last registration
//!   overwrite the others) and checkWatches/removeWatches on a path with a persistent watch
//!   (3.8.0 does not tell the modes apart): a program stops before such a step;
//! * WatcherType 4/5 in checkWatches/removeWatches (3.8.0: MARSHALLINGERROR): never generated;
//! * order of children: compared sorted.
//!
//! Not compared: session expiry (timing), container/TTL reaping (both reapers are disabled for
//! the run, so a program's zxids cannot be shifted by a background deletion), four-letter
//! words, and inputs that crash ZooKeeper 3.8 (opcode 21 with a non-TTL flag and a negative
//! ttl).
//!
//! Environment:
//! * `ZKD_DIFF_CASES`: number of programs (default 1500); e.g. `ZKD_DIFF_CASES=100000` for a
//!   long local run;
//! * `ZKD_DIFF_SEED`: seed of the program generator (default fixed, so CI is reproducible);
//! * `ZKD_DIFF_SERVERS`: `zkd,zookeeper` (default), or `zookeeper,zookeeper` / `zkd,zkd` to
//!   check the harness by comparing a server with itself.
//!
//! A failing program is shrunk to a minimal one and printed as a script, one line per step
//! with both servers' outcomes, followed by the first differing reply.

#[path = "differential/exec.rs"]
mod exec;
#[path = "differential/normalize.rs"]
mod normalize;
#[path = "differential/program.rs"]
mod program;

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use zkd_client_tests::oracle::Oracle;
use zkd_client_tests::target::Target;

use exec::{run_program, Side, Verdict, SUPER_DIGEST};

const DEFAULT_CASES: u32 = 1500;
const DEFAULT_SEED: u64 = 0x5eed_d1ff_0000_0001;

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        _ => default,
    }
}

fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let v = seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    out
}

/// A server of the run and whatever keeps it alive.
enum Server {
    Zkd(Target),
    ZooKeeper(Oracle),
}

impl Server {
    fn addr(&self) -> std::net::SocketAddr {
        match self {
            Server::Zkd(t) => t.addr(),
            Server::ZooKeeper(o) => o.addr(),
        }
    }
}

fn start_zookeeper() -> Server {
    // The container/TTL reaper of 3.8 reads a plain JVM system property (no `zookeeper.`
    // prefix, so zoo.cfg cannot set it); JAVA_TOOL_OPTIONS reaches the oracle's JVM.
    let mut opts = std::env::var("JAVA_TOOL_OPTIONS").unwrap_or_default();
    if !opts.contains("znode.container.checkIntervalMs") {
        opts.push_str(" -Dznode.container.checkIntervalMs=86400000");
        std::env::set_var("JAVA_TOOL_OPTIONS", opts.trim());
    }
    // Unknown zoo.cfg keys become `zookeeper.<key>` system properties.
    let oracle = Oracle::start_with(&[("DigestAuthenticationProvider.superDigest", SUPER_DIGEST)])
        .unwrap_or_else(|e| panic!("{e}"));
    Server::ZooKeeper(oracle)
}

async fn start_zkd() -> Server {
    let config = zkd_server::Config {
        super_digest: Some(SUPER_DIGEST.to_string()),
        // No background reaping during the run (see the module docs).
        reaper_interval: Duration::from_secs(86_400),
        max_client_cnxns: 0,
        ..Default::default()
    };
    Server::Zkd(Target::start_zkd_with(config).await)
}

#[test]
fn zkd_matches_zookeeper() {
    let cases: u32 = env_number("ZKD_DIFF_CASES", DEFAULT_CASES);
    let seed: u64 = env_number("ZKD_DIFF_SEED", DEFAULT_SEED);
    let servers = std::env::var("ZKD_DIFF_SERVERS").unwrap_or_else(|_| "zkd,zookeeper".into());
    let kinds: Vec<&str> = servers.split(',').map(str::trim).collect();
    assert!(
        kinds.len() == 2 && kinds.iter().all(|k| matches!(*k, "zkd" | "zookeeper")),
        "ZKD_DIFF_SERVERS={servers:?}: expected two of `zkd`, `zookeeper`, comma-separated"
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let started = Instant::now();
    let mut held = Vec::new();
    for kind in &kinds {
        held.push(match *kind {
            "zookeeper" => start_zookeeper(),
            _ => rt.block_on(start_zkd()),
        });
    }
    let names: Vec<&'static str> = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| match (*k, kinds[0] == kinds[1], i) {
            ("zkd", false, _) => "zkd",
            ("zookeeper", false, _) => "zookeeper",
            ("zkd", true, 0) => "zkd#1",
            ("zkd", true, _) => "zkd#2",
            (_, true, 0) => "zk#1",
            _ => "zk#2",
        })
        .collect();
    let sides = [
        Side::new(names[0], held[0].addr()),
        Side::new(names[1], held[1].addr()),
    ];
    let zkd_is_a = kinds[0] == "zkd" && kinds[1] == "zookeeper";
    eprintln!(
        "differential: {} at {} vs {} at {}, started in {:?}; {cases} programs, seed {seed:#x}",
        names[0],
        sides[0].addr,
        names[1],
        sides[1].addr,
        started.elapsed()
    );

    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2000,
        max_shrink_time: 300_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed)),
    );
    let counter = Cell::new(0u64);
    let steps_run = Cell::new(0u64);
    let stopped = Cell::new(0u64);
    let harness_error = RefCell::new(None::<String>);
    let run_started = Instant::now();
    let result = runner.run(&program::program(), |prog| {
        let n = counter.get() + 1;
        counter.set(n);
        let root = format!("/p{n}");
        let report = rt
            .block_on(run_program([&sides[0], &sides[1]], zkd_is_a, &prog, &root))
            .map_err(|e| {
                harness_error.borrow_mut().get_or_insert(e.clone());
                TestCaseError::fail(format!("harness error: {e}"))
            })?;
        steps_run.set(steps_run.get() + report.records.len() as u64);
        match report.verdict {
            Verdict::Differs { .. } => Err(TestCaseError::fail(
                report.difference(&prog).unwrap_or_default(),
            )),
            Verdict::Stopped { .. } => {
                stopped.set(stopped.get() + 1);
                Ok(())
            }
            Verdict::Agreed => Ok(()),
        }
    });
    let elapsed = run_started.elapsed();
    eprintln!(
        "differential: {} program runs ({} steps compared, {} stopped at a known difference) in {:.1?}",
        counter.get(),
        steps_run.get(),
        stopped.get(),
        elapsed
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, minimal)) => {
            if let Some(e) = harness_error.borrow().as_ref() {
                eprintln!("differential: first harness error: {e}");
            }
            let n = counter.get() + 1;
            let replay = rt.block_on(run_program(
                [&sides[0], &sides[1]],
                zkd_is_a,
                &minimal,
                &format!("/p{n}"),
            ));
            let script = match &replay {
                Ok(report) => report.script(&minimal),
                Err(e) => format!("{minimal}(replay failed: {e})\n"),
            };
            panic!(
                "{} and {} differ (seed {seed:#x}; reproduce with ZKD_DIFF_SEED={seed} \
                 ZKD_DIFF_CASES={cases}).\n\nMinimal program:\n{script}\nFirst difference:\n{}",
                names[0],
                names[1],
                reason.message()
            );
        }
        Err(TestError::Abort(why)) => panic!("differential run aborted: {why}"),
    }
}
