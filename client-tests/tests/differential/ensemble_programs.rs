//! Ensemble differential test: random programs of three sessions (writes, ephemerals,
//! watched reads, syncs) interleaved with faults (members stopped and started, the leader
//! stopped, the quorum lost and regained, a session's client gone), run on zkd
//! `--ensemble 3` and on three Apache ZooKeeper 3.8.0 servers started by the test kit, with
//! the members stopped and started through the same routes (`POST
//! /zkd/members/{id}/stop|start`). What clients can observe is compared, not timings.
//!
//! One ensemble per side serves the whole run; both sides run each program at the same time.
//! Program N works under its own root `/eN` (`~` below), which the harness creates; its
//! three sessions (4 s... see `fleet::SESSION_TIMEOUT_MS`, 3 s, with a 500 ms tick on both
//! sides) start on members 1, 2 and 3 and each creates an ephemeral `~/sK` first. Then 8–17
//! steps run one at a time; after each, every connected session syncs, so it has applied and
//! been notified of everything committed before the next step. A fault step waits until the
//! members settle (one leader and followers, or the one member left in read-only mode) and
//! brings every session back at once where a member serves it. At the end every stopped
//! member starts again and the final tree is read.
//!
//! Compared, per program:
//! * each step's outcome: error code; data, version and owning session of what reads return;
//!   the sorted children; the epoch of every zxid clients see (reply headers of writes,
//!   czxid and mzxid) relative to the epoch the program's root was created in; after each
//!   fault, the leader's id (or the read-only member) and for each session whether it came
//!   back, expired or waits;
//! * read-only behaviour, after each quorum loss: a new read-only session on the member left
//!   (what it reads, the answers to a create and a sync), the program's own (global)
//!   sessions not being served there, and whether the read-only session is taken by the
//!   members once the quorum is back;
//! * each session's watch events (type and path) in arrival order over the whole program;
//! * each session's fate (alive, or expired);
//! * the final tree after recovery (data, version, epochs, owner); on each side it must also
//!   hold every acknowledged write (the last acknowledged write of each node, no node an
//!   acknowledged delete or its owner's end removed), whatever the other side says.
//!
//! Normalised: session ids, absolute zxids (only epochs, relative to the program's first,
//! are compared), timings, which member a session lands on. A quorum loss lasts longer than
//! the session timeout on both sides (sessions survive it only because session time stands
//! still without a quorum); a session whose client goes away is given its timeout and a
//! margin before anything else happens, so its expiry (and its ephemerals' deletion) falls at
//! the same point of the program on both sides.
//!
//! Differences (explained, not counted as failures):
//! * E1 — local sessions. ZooKeeper 3.8 serves read-only clients only with
//!   `localSessionsEnabled=true`, which both sides run with (zkd's read-only members always
//!   behave that way). With it, ZooKeeper also starts every ordinary session as a *local*
//!   session, known only to the member it connected to, until its first ephemeral upgrades
//!   it: a local session that moves to another member (its member stopped) is told it
//!   expired. zkd's sessions made with a quorum are global from the start. The programs
//!   create an ephemeral in each session first, so both sides compare global sessions.
//! * E2 — lagging members. zkd can make a member lag (`POST /zkd/members/{id}/lag`);
//!   ZooKeeper cannot be told to, and no fault a client can cause on it has the same
//!   observable effect (a follower serving stale reads until a sync), so lag is not part of
//!   the compared fault schedule. The zkd-only tests cover it (`lagging_member`).
//!
//! Environment:
//! * `ZKD_ENSEMBLE_DIFF_PROGRAMS`: number of programs (default 12, about a minute);
//! * `ZKD_ENSEMBLE_DIFF_SEED`: seed (default fixed); program N of a seed is the same whatever
//!   the count, and `ZKD_ENSEMBLE_DIFF_FIRST=N` starts the run at program N, so a
//!   difference can be replayed alone;
//! * `ZKD_ENSEMBLE_DIFF_SHOW=1`: print every program with both sides' outcomes;
//! * `ZKD_ENSEMBLE_DIFF_VERSION=3.9`: zkd behaving as 3.9 against three ZooKeeper 3.9.3
//!   servers instead;
//! * `ZKD_ENSEMBLE_DIFF_ZK_LOG=info`: the ZooKeeper servers' log level (default `warn`).
//! * `ZKD_ENSEMBLE_DIFF_PROGRESS=1`: print a line per program (faults, time, verdict).

mod exec;
mod fleet;
mod gen;

use std::time::Instant;

use exec::{run_program, Observed};
use fleet::Fleet;
use zkd_testkit::oracle::{oracle_release, ZookeeperVersion};

const DEFAULT_PROGRAMS: u64 = 12;
const DEFAULT_SEED: u64 = 0x5eed_e45e_3b1e_0001;

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            let v = v.trim();
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
        }
        _ => default,
    }
}

/// zkd `--ensemble 3` against three ZooKeeper 3.8.0 servers.
#[test]
fn zkd_ensemble_matches_three_zookeeper_servers() {
    let programs = env_number("ZKD_ENSEMBLE_DIFF_PROGRAMS", DEFAULT_PROGRAMS);
    let seed = env_number("ZKD_ENSEMBLE_DIFF_SEED", DEFAULT_SEED);
    let first = env_number("ZKD_ENSEMBLE_DIFF_FIRST", 1);
    let show = env_number("ZKD_ENSEMBLE_DIFF_SHOW", 0) != 0;
    let progress = env_number("ZKD_ENSEMBLE_DIFF_PROGRESS", 0) != 0;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let started = Instant::now();
    let version = match std::env::var("ZKD_ENSEMBLE_DIFF_VERSION").as_deref() {
        Ok("3.9") => ZookeeperVersion::V3_9,
        Ok("3.8") | Err(_) => ZookeeperVersion::V3_8,
        Ok(other) => panic!("ZKD_ENSEMBLE_DIFF_VERSION={other:?}: expected 3.8 or 3.9"),
    };
    let (mut zkd, mut zk) =
        rt.block_on(async { tokio::join!(Fleet::zkd(version), Fleet::zookeeper(version)) });
    eprintln!(
        "ensemble differential: zkd members {:?}, ZooKeeper {} members {:?}, started in \
         {:.1?}; programs {first}..{}, seed {seed:#x}",
        zkd.members,
        oracle_release(version),
        zk.members,
        started.elapsed(),
        first + programs - 1
    );
    let run_started = Instant::now();
    let mut differences = Vec::new();
    let mut faults = 0;
    for n in first..first + programs {
        let prog = gen::program(seed, n);
        faults += prog.faults();
        let program_started = Instant::now();
        let (a, b) = rt.block_on(async {
            tokio::join!(
                run_program(&mut zkd, &prog, n),
                run_program(&mut zk, &prog, n)
            )
        });
        let report = match (a, b) {
            (Ok(a), Ok(b)) => {
                if show {
                    eprintln!("program {n}:\n{prog}{}", side_by_side(&a, &b));
                }
                compare(&a, &b)
            }
            (a, b) => Some(format!(
                "a side failed to run the program: zkd {:?}, ZooKeeper {:?}",
                a.err(),
                b.err()
            )),
        };
        if progress {
            eprintln!(
                "ensemble differential: program {n}: {} faults, {:.1?}{}",
                prog.faults(),
                program_started.elapsed(),
                if report.is_some() { ", DIFFERS" } else { "" }
            );
        }
        if let Some(r) = report {
            eprintln!(
                "ensemble differential: program {n} differs (replay with \
                 ZKD_ENSEMBLE_DIFF_SEED={seed:#x} ZKD_ENSEMBLE_DIFF_FIRST={n} \
                 ZKD_ENSEMBLE_DIFF_PROGRAMS=1):\n{prog}{r}"
            );
            differences.push(n);
        }
    }
    eprintln!(
        "ensemble differential: {programs} programs ({faults} faults) in {:.1?}, seed {seed:#x}; \
         {} differing: {differences:?}",
        run_started.elapsed(),
        differences.len()
    );
    assert!(
        differences.is_empty(),
        "zkd's ensemble and ZooKeeper's differ in programs {differences:?} of seed {seed:#x} \
         (each is printed above with a replay command)"
    );
}

/// `None` when both sides observed the same and each kept its acknowledged writes;
/// otherwise both sides' observations, the differing ones marked.
fn compare(a: &Observed, b: &Observed) -> Option<String> {
    if a == b && a.lost.is_empty() {
        return None;
    }
    Some(side_by_side(a, b))
}

/// Both sides' observations, the differing ones marked.
fn side_by_side(a: &Observed, b: &Observed) -> String {
    let mut out = String::new();
    let mark = |x: &str, y: &str| if x == y { "  " } else { "!!" };
    out.push_str("outcomes (zkd | ZooKeeper):\n");
    let n = a.lines.len().max(b.lines.len());
    for i in 0..n {
        let x = a.lines.get(i).map_or("<none>", String::as_str);
        let y = b.lines.get(i).map_or("<none>", String::as_str);
        if x == y {
            out.push_str(&format!("   {x}\n"));
        } else {
            out.push_str(&format!("!! zkd:       {x}\n   ZooKeeper: {y}\n"));
        }
    }
    for s in 0..a.events.len().max(b.events.len()) {
        let x = a.events.get(s).map(|e| e.join(", ")).unwrap_or_default();
        let y = b.events.get(s).map(|e| e.join(", ")).unwrap_or_default();
        out.push_str(&format!(
            "{} s{s} events: zkd [{x}] | ZooKeeper [{y}]\n",
            mark(&x, &y)
        ));
    }
    let (x, y) = (a.fates.join(", "), b.fates.join(", "));
    out.push_str(&format!(
        "{} fates: zkd [{x}] | ZooKeeper [{y}]\n",
        mark(&x, &y)
    ));
    let (x, y) = (a.tree.join("; "), b.tree.join("; "));
    out.push_str(&format!(
        "{} final tree:\n   zkd:       {x}\n   ZooKeeper: {y}\n",
        mark(&x, &y)
    ));
    for (side, o) in [("zkd", a), ("ZooKeeper", b)] {
        for l in &o.lost {
            out.push_str(&format!("!! {side} lost an acknowledged write: {l}\n"));
        }
    }
    out
}
