//! Differential test: random multi-session programs run against zkd and against a real Apache
//! ZooKeeper in lock-step; every reply and every watch event must agree. It runs twice: zkd
//! `--zookeeper-version 3.9` against ZooKeeper 3.9.3 (`zkd_matches_zookeeper_3_9`) and zkd
//! `--zookeeper-version 3.8` against ZooKeeper 3.8.0 (`zkd_matches_zookeeper_3_8`).
//!
//! One zkd and one ZooKeeper serve the whole run. Each program gets its own root (`/p<N>/r`,
//! `~` in scripts), created by a harness session (super user) just after the program's
//! sessions are opened and removed with everything below `/p<N>` afterwards; zxids are
//! compared as offsets from the root's creation. A program has 2–3 sessions, a prelude that
//! creates some of the usual parents, then 5–25 random steps over a small path space:
//! creates of every opcode and mode (containers and TTL nodes included, invalid flags, ttls
//! and paths too), deletes, setData with right/wrong/any versions, exists/getData/
//! getChildren(2) with and without watches, multi and multiRead with failing and misplaced
//! sub-ops, setACL and getACL (world, digest, auth, ip and invalid ACLs), addauth (also with
//! an unknown scheme), whoAmI, getAllChildrenNumber, getEphemerals, sync (also null and empty
//! paths), addWatch (persistent and persistent-recursive), checkWatches/removeWatches with
//! every WatcherType (Children, Data, Any, Persistent, PersistentRecursive), reads and
//! failing writes on the system nodes, closing sessions, dropping connections, and
//! reconnecting with the session id and password (credentials re-sent, watches re-registered
//! with setWatches, or setWatches2 when persistent watches are held, relativeZxid = last zxid
//! seen or 0), also of a closed session.
//!
//! Each step runs on server A, then a ping on every connected session of the program flushes
//! the notifications it caused (replies and events are FIFO per connection), then the same on
//! server B; the outcomes are compared before the next step.
//!
//! Compared exactly: error codes, xids, zxids (as offsets), version, cversion, aversion,
//! czxid/mzxid/pzxid (as offsets), dataLength, numChildren, data (null and empty differ),
//! ACLs, multi result types, sequential names, ephemeralOwner (as the owning session's
//! index), negotiated timeouts, ping replies, and per session the sequence of notifications
//! (type, state, path and header zxid — the change's zxid as an offset on 3.9, -1 on 3.8),
//! split by the reply they preceded. Normalised: session ids and passwords, ctime/mtime
//! (ignored), and the order of children, getEphemerals and whoAmI results (sorted: no server
//! promises an order).
//!
//! Against 3.9.3 nothing else is excepted: every difference fails the run, except D7 below,
//! whose programs are left out. Against 3.8.0 these deliberate differences (zkd follows the
//! newer behaviour, docs/protocol.md "Where 3.8 releases differ") are not counted as
//! failures:
//! * `exists` checks READ in zkd (3.8.4+), not in 3.8.0: an exists answered NOAUTH by zkd and
//!   OK by ZooKeeper is accepted (and when it asked for a watch, the program stops there:
//!   only ZooKeeper holds that watch);
//! * a `create2` sub-op (header 15) of an ordinary node in a multi: zkd answers a type-15
//!   result with a Stat, 3.8.0 a type-1 result — the Stat is dropped before comparing;
//! * several watch modes of one connection on one path (3.8.0 lets the last registration
//!   overwrite the others) and checkWatches/removeWatches on a path where the caller holds a
//!   persistent watch (3.8.0 does not tell the modes apart): a program stops before such a
//!   step;
//! * D4 below.
//!
//! Differences found by this test (`divergences` below replays those of 3.8.0):
//! * D1 (resolved) — a multiRead of write sub-ops only, refused with MARSHALLINGERROR: both
//!   releases append an empty multi body (the 9-byte terminator) to the error header; with a
//!   read sub-op among them, and for a write multi, the header comes alone. zkd does the same.
//! * D2, D3, D5 — create sub-ops of a multi: 3.8.0 derives the node kind from the flags
//!   whatever the header (header 21 with a non-TTL flag creates that kind and ignores the
//!   ttl; header 19 with a flag other than 4 creates that kind, not a container), and fails
//!   the whole multi for a TTL flag under header 1/15/19 only when it reaches that sub-op (an
//!   earlier failing sub-op yields the usual per-op results). zkd does the same when behaving
//!   as 3.8; as 3.9 it checks every create sub-op first (3.9.3 fails the multi with
//!   MARSHALLINGERROR whatever came before, and also for an unknown flag under header 1, 15
//!   or 19) and answers with a Stat for headers 15 and 19 whatever the flags.
//! * D4 — checkWatches: 3.8.0 answers OK when any connection has a watch in the table the
//!   WatcherType looks at (its containsWatcher ignores the caller; addWatch puts both
//!   persistent modes into both tables). zkd answers per connection, as 3.9.3 does
//!   (docs/protocol.md, "checkWatches and removeWatches"); accepted against 3.8.0 when another
//!   connected session of the program holds such a watch.
//! * D6 — the ZooKeeper installed from Debian (3.8.0-11+deb12u2) carries the CVE-2024-23944
//!   fix and drops notifications for nodes the watcher cannot READ (like 3.8.4+ and 3.9.3);
//!   zkd filters the same way. Half of the programs use ACLs that deny READ to some sessions,
//!   with watches of every kind, so the filtering is compared.
//! * D7 (open) — 3.9.3 decides the node made by a create sub-op whose header and flags
//!   disagree differently from 3.8.0 (header 19 with the ephemeral flag makes a node without
//!   an owner), and zkd does not follow it yet: the 3.9 run leaves these programs out
//!   (`ZKD_DIFF_STRICT=1` puts them back).
//!
//! Not compared: session expiry (timing), container/TTL reaping (both reapers are disabled for
//! the run, so no background deletion shifts a program's zxids), four-letter words, and
//! inputs that crash ZooKeeper 3.8 (opcode 21 with a non-TTL flag and a negative ttl).
//!
//! Environment:
//! * `ZKD_DIFF_CASES`: number of programs per release (default 2000, about 95 s each); e.g.
//!   `ZKD_DIFF_CASES=100000` for a long local run;
//! * `ZKD_DIFF_SEED`: seed of the program generator (default fixed, so CI is reproducible);
//! * `ZKD_DIFF_STRICT=0`: leave out the multi creates of D2, D3 and D5 (generated by default
//!   against 3.8.0; left out against 3.9.3 unless `ZKD_DIFF_STRICT=1`, see D7);
//! * `ZKD_DIFF_SHOW=N`: print the scripts (with outcomes) of the first N programs;
//! * `ZKD_DIFF_SERVERS`: `zkd,zookeeper` (default), or `zookeeper,zookeeper` / `zkd,zkd` to
//!   check the harness by comparing a server with itself.
//!
//! A failing program is shrunk to a minimal one and printed as a script, one line per step
//! with both servers' outcomes, followed by the first differing reply. If ZooKeeper is not
//! installed the test fails and names `scripts/install-test-deps.sh`.

mod exec;
mod normalize;
mod program;

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use zkd_testkit::oracle::{oracle_release, Launcher, Oracle, ZookeeperVersion};
use zkd_testkit::target::Target;

use exec::{run_program, Side, Verdict, SUPER_DIGEST};

const DEFAULT_CASES: u32 = 2000;
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

/// The runtime the differential runs drive both servers' clients on (and zkd on).
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
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

fn start_zookeeper(version: ZookeeperVersion) -> Server {
    // Unknown zoo.cfg keys become `zookeeper.<key>` system properties; the container/TTL
    // reaper of 3.8 reads a plain one (no `zookeeper.` prefix, so zoo.cfg cannot set it),
    // given on the oracle's command line.
    let oracle = Launcher::new()
        .version(version)
        .jvm_opt("-Dznode.container.checkIntervalMs=86400000")
        .cfg(&[("DigestAuthenticationProvider.superDigest", SUPER_DIGEST)])
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    Server::ZooKeeper(oracle)
}

async fn start_zkd(version: ZookeeperVersion) -> Server {
    let config = zkd_server::Config {
        zookeeper_version: version,
        super_digest: Some(SUPER_DIGEST.to_string()),
        // No background reaping during the run (see the module docs).
        reaper_interval: Duration::from_secs(86_400),
        max_client_cnxns: 0,
        ..Default::default()
    };
    Server::Zkd(Target::start_zkd_with(config).await)
}

/// zkd `--zookeeper-version 3.9` against ZooKeeper 3.9.3.
#[test]
fn zkd_matches_zookeeper_3_9() {
    differential_run(ZookeeperVersion::V3_9);
}

/// zkd `--zookeeper-version 3.8` against ZooKeeper 3.8.0.
#[test]
fn zkd_matches_zookeeper_3_8() {
    differential_run(ZookeeperVersion::V3_8);
}

fn differential_run(version: ZookeeperVersion) {
    let cases: u32 = env_number("ZKD_DIFF_CASES", DEFAULT_CASES);
    let seed: u64 = env_number("ZKD_DIFF_SEED", DEFAULT_SEED);
    let show: u64 = env_number("ZKD_DIFF_SHOW", 0);
    // D7 (below): against 3.9.3 the multi creates whose header and flags disagree are left
    // out unless asked for.
    let strict_default = u8::from(version == ZookeeperVersion::V3_8);
    let strict = env_number::<u8>("ZKD_DIFF_STRICT", strict_default) != 0;
    let servers = std::env::var("ZKD_DIFF_SERVERS").unwrap_or_else(|_| "zkd,zookeeper".into());
    let kinds: Vec<&str> = servers.split(',').map(str::trim).collect();
    assert!(
        kinds.len() == 2 && kinds.iter().all(|k| matches!(*k, "zkd" | "zookeeper")),
        "ZKD_DIFF_SERVERS={servers:?}: expected two of `zkd`, `zookeeper`, comma-separated"
    );

    let rt = runtime();
    let started = Instant::now();
    let mut held = Vec::new();
    for kind in &kinds {
        held.push(match *kind {
            "zookeeper" => start_zookeeper(version),
            _ => rt.block_on(start_zkd(version)),
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
        Side::new(names[0], held[0].addr(), version),
        Side::new(names[1], held[1].addr(), version),
    ];
    let zkd_is_a = kinds[0] == "zkd" && kinds[1] == "zookeeper";
    eprintln!(
        "differential ({}): {} at {} vs {} at {}, started in {:?}; {cases} programs, seed {seed:#x}",
        oracle_release(version),
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
    let known = RefCell::new(std::collections::BTreeMap::<&'static str, u64>::new());
    let run_started = Instant::now();
    let result = runner.run(&program::program(strict), |prog| {
        let n = counter.get() + 1;
        counter.set(n);
        let area = format!("/p{n}");
        let report = rt
            .block_on(run_program(
                sides.each_ref(),
                zkd_is_a,
                version,
                &prog,
                &area,
                false,
            ))
            .map_err(|e| {
                harness_error.borrow_mut().get_or_insert(e.clone());
                TestCaseError::fail(format!("harness error: {e}"))
            })?;
        steps_run.set(steps_run.get() + report.records.len() as u64);
        {
            let mut known = known.borrow_mut();
            for note in report.records.iter().filter_map(|r| r.note) {
                *known.entry(note).or_insert(0u64) += 1;
            }
            if let Verdict::Stopped { why, .. } = report.verdict {
                *known.entry(why).or_insert(0u64) += 1;
            }
        }
        if n <= show {
            eprintln!("{}", report.script(&prog));
        }
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
    for (why, n) in known.borrow().iter() {
        eprintln!("differential: known difference met {n} times: {why}");
    }
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, minimal)) => {
            if let Some(e) = harness_error.borrow().as_ref() {
                eprintln!("differential: first harness error: {e}");
            }
            let n = counter.get() + 1;
            let replay = rt.block_on(run_program(
                sides.each_ref(),
                zkd_is_a,
                version,
                &minimal,
                &format!("/p{n}"),
                false,
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

/// The minimal programs of the differences between zkd and this ZooKeeper found so far, run
/// on both servers past the first difference and printed:
/// `cargo test -p zkd-client-tests --test differential programs::divergences -- --ignored --nocapture`.
#[test]
#[ignore]
fn divergences() {
    use program::*;
    use zkd_protocol::OpCode;
    let rt = runtime();
    let zk = start_zookeeper(ZookeeperVersion::V3_8);
    let zkd = rt.block_on(start_zkd(ZookeeperVersion::V3_8));
    let sides = [
        Side::new("zkd", zkd.addr(), ZookeeperVersion::V3_8),
        Side::new("zookeeper", zk.addr(), ZookeeperVersion::V3_8),
    ];
    let s1 = |op| Step { session: 0, op };
    let s2 = |op| Step { session: 1, op };
    let sub_create = |path, op, flags, ttl| {
        SubOp::Write(Write::Create {
            path,
            data: Data::X,
            acl: AclSpec::Open,
            kind: CreateKind { op, flags, ttl },
        })
    };
    let create = |path, acl| {
        Op::Write(Write::Create {
            path,
            data: Data::X,
            acl,
            kind: CreateKind {
                op: OpCode::Create,
                flags: 0,
                ttl: -1,
            },
        })
    };
    let cases: Vec<(&str, bool, Vec<Step>)> =
        vec![
        (
            "D1 (resolved): a multiRead of a write sub-op is refused with MARSHALLINGERROR \
             followed by an empty multi body, on both servers",
            true,
            vec![s1(Op::MultiRead(vec![SubOp::Check {
                path: "/a",
                version: Ver::Any,
            }]))],
        ),
        (
            "D2: in a multi, a createTTL (header 21) sub-op with a non-TTL flag: 3.8.0 ignores \
             the ttl and creates the node the flag names",
            true,
            vec![
                s1(Op::Multi(vec![sub_create("/a", OpCode::CreateTtl, 0, 0)])),
                s1(Op::Multi(vec![sub_create("/b", OpCode::CreateTtl, 1, 1000)])),
                s1(Op::Multi(vec![sub_create("/c", OpCode::CreateTtl, 4, 0)])),
            ],
        ),
        (
            "D3: in a multi, a createContainer (header 19) sub-op with flags other than 4: \
             3.8.0 creates the node the flag names (docs/protocol.md, multi), zkd a container",
            true,
            vec![
                s1(Op::Multi(vec![sub_create(
                    "/a",
                    OpCode::CreateContainer,
                    0,
                    -1,
                )])),
                s1(Op::Multi(vec![sub_create(
                    "/b",
                    OpCode::CreateContainer,
                    1,
                    -1,
                )])),
                s1(Op::GetData {
                    path: "/b",
                    watch: false,
                }),
            ],
        ),
        (
            "D4: checkWatches when only another connection watches the path: 3.8.0 answers OK",
            false,
            vec![
                s2(Op::Exists {
                    path: "/a",
                    watch: true,
                }),
                s1(Op::CheckWatches {
                    path: "/a",
                    watcher_type: 2,
                }),
            ],
        ),
        (
            "D5: a TTL flag under header 1/15/19 in a multi: 3.8.0 fails the whole multi with \
             MARSHALLINGERROR only if no earlier sub-op failed",
            true,
            vec![s1(Op::Multi(vec![
                sub_create("/x/y", OpCode::Create, 0, -1),
                sub_create("/b", OpCode::Create, 5, -1),
            ]))],
        ),
        (
            "D6 (resolved): the watcher lacks READ on the node: both servers drop the event",
            true,
            vec![
                s1(Op::Exists {
                    path: "/a",
                    watch: true,
                }),
                s2(create("/a", AclSpec::DigestUser)),
            ],
        ),
        (
            "K1 (deliberate): exists on a node the caller cannot read: zkd checks READ \
             (3.8.4+), 3.8.0 does not",
            true,
            vec![
                s1(create("/a", AclSpec::NoRead)),
                s2(Op::Exists {
                    path: "/a",
                    watch: false,
                }),
                s2(Op::GetData {
                    path: "/a",
                    watch: false,
                }),
            ],
        ),
    ];
    for (i, (title, acl_variety, steps)) in cases.into_iter().enumerate() {
        let prog = Program {
            sessions: 2,
            acl_variety,
            steps,
        };
        let area = format!("/divergence{i}");
        let report = rt
            .block_on(run_program(
                sides.each_ref(),
                true,
                ZookeeperVersion::V3_8,
                &prog,
                &area,
                true,
            ))
            .unwrap_or_else(|e| panic!("{e}"));
        println!("{title}\n{}", report.script(&prog));
    }
}
