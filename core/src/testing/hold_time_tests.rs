//! The hold-time property test: programs drive the core directly, each step (a request, a
//! control operation, a slice of a snapshot) is timed as the server's lock would hold it, and
//! its time is compared with its own size (request bytes, the bytes it queued for every
//! connection or returned, the nodes it added or removed). A step that costs more than
//! `RATIO` times the median cost per unit of a small calibration program run first (and more
//! than `FLOOR`, so that timer granularity cannot fail it) is super-linear somewhere, and
//! fails the test with the step's figures. A step's time is the thread's CPU time where Linux
//! reports it (`/proc/thread-self/schedstat`), so that another process preempting the test
//! does not count; the calibration's median uses the wall clock (a median of many small
//! steps is not moved by a few preempted ones). The programs: wide parents whose child lists
//! are cached then emptied by a big multi and single deletes, deep paths under recursive
//! watches, many watches on one path, big multis of every write, a reset and snapshots of a
//! big tree, and seeded random programs. The scale is `ZKD_HOLD_TIME_SCALE` (1 by default,
//! sized for CI; larger multiplies the widths).

use std::time::{Duration, Instant};

use bytes::Bytes;
use zkd_protocol::*;

use super::harness::*;
use crate::*;

/// How many times the median cost per unit a step may cost.
const RATIO: f64 = 100.0;
/// Steps shorter than this always pass.
const FLOOR: Duration = Duration::from_millis(20);
/// What one node added or removed counts for, in bytes.
const NODE_UNITS: u64 = 100;
/// What every step counts for besides its bytes (its fixed overhead), in bytes.
const FIXED_UNITS: u64 = 200;

fn scale() -> usize {
    std::env::var("ZKD_HOLD_TIME_SCALE")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// One timed step.
#[derive(Debug)]
struct StepCost {
    what: String,
    units: u64,
    held: Duration,
    wall: Duration,
}

/// A harness whose every step is timed.
struct Meter {
    h: Harness,
    conn: ConnId,
    steps: Vec<StepCost>,
    /// The calibration's median cost per unit, in ns (0 while calibrating).
    reference: f64,
}

/// The thread's CPU time so far, in ns, where the system reports it (updated at scheduler
/// ticks, so a few ms coarse; [`FLOOR`] is well above that).
fn cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The median cost per unit (ns, wall clock) of a small mixed program: single and multi
/// creates, reads with watches, changes and deletes on narrow parents.
fn calibrate() -> f64 {
    let mut m = Meter::new_uncalibrated();
    for p in 0..5 {
        let parent = format!("/c{p}");
        m.must(&create_req(OpCode::Create, &parent, 0));
        for i in 0..100 {
            m.must(&create_req(OpCode::Create, &child(&parent, i), 0));
        }
        let ops = (100..150).map(|i| create_op(child(&parent, i))).collect();
        m.must(&Request::Multi(ops));
        m.must(&children(&parent, true));
        for i in 0..150 {
            m.must(&get_data(&child(&parent, i), true));
            m.must(&set_data(&child(&parent, i), -1));
            m.must(&exists(&child(&parent, i), true));
        }
        for i in 0..150 {
            m.must(&delete(&child(&parent, i), -1));
        }
    }
    let mut per_unit: Vec<f64> = m
        .steps
        .iter()
        .map(|s| s.wall.as_nanos() as f64 / s.units as f64)
        .collect();
    per_unit.sort_by(f64::total_cmp);
    per_unit[per_unit.len() / 2]
}

fn queued_bytes(out: &RecordingOutbox) -> u64 {
    out.frames.iter().map(|(_, f)| f.len() as u64).sum()
}

impl Meter {
    fn new() -> Meter {
        let reference = calibrate();
        Meter {
            reference,
            ..Meter::new_uncalibrated()
        }
    }

    fn new_uncalibrated() -> Meter {
        let mut h = Harness::new();
        let (conn, _, _) = h.session(30_000);
        Meter {
            h,
            conn,
            steps: Vec::new(),
            reference: 0.0,
        }
    }

    /// Counts `units` more for the last step (what it returned rather than queued).
    fn add_units(&mut self, units: u64) {
        if let Some(s) = self.steps.last_mut() {
            s.units += units;
        }
    }

    /// Runs `f` as one step of `input` bytes, named `what`, and records its cost.
    fn step<R>(&mut self, what: &str, input: u64, f: impl FnOnce(&mut Harness) -> R) -> R {
        self.h.out.clear();
        let nodes = self.h.core.node_count();
        let cpu = cpu_ns();
        let started = Instant::now();
        let r = f(&mut self.h);
        let wall = started.elapsed();
        let held = match (cpu, cpu_ns()) {
            (Some(a), Some(b)) => Duration::from_nanos(b.saturating_sub(a)),
            _ => wall,
        };
        let changed = self.h.core.node_count().abs_diff(nodes) as u64;
        let units = FIXED_UNITS + input + queued_bytes(&self.h.out) + changed * NODE_UNITS;
        self.h.out.clear();
        self.steps.push(StepCost {
            what: what.to_string(),
            units,
            held,
            wall,
        });
        r
    }

    /// Sends `req` on `conn` as one step; returns the error code of its reply (0 when none).
    fn request_on(&mut self, conn: ConnId, req: &Request) -> i32 {
        self.h.xid += 1;
        let frame = req.to_frame(self.h.xid).slice(4..);
        let what = format!("{:?} {}", req.op(), first_path(req));
        let len = frame.len() as u64;
        self.step(&what, len, |h| {
            h.core.request(conn, frame, h.now, &mut h.out);
            h.out
                .frames
                .iter()
                .rev()
                .find(|(c, _)| *c == conn)
                .map_or(0, |(_, f)| Decoded::parse(f).err)
        })
    }

    fn request(&mut self, req: &Request) -> i32 {
        self.request_on(self.conn, req)
    }

    fn must(&mut self, req: &Request) {
        let err = self.request(req);
        assert_eq!(err, 0, "{req:?}");
    }

    /// A new session, opened and handshaken outside the measured steps.
    fn session(&mut self) -> ConnId {
        self.h.session(30_000).0
    }

    /// Fails naming every step that cost more than [`RATIO`] times the calibration's
    /// median per unit (and more than [`FLOOR`]).
    fn check(&self, program: &str) {
        let median = self.reference;
        assert!(median > 0.0, "{program}: not calibrated");
        let ratio = |s: &StepCost| s.held.as_nanos() as f64 / s.units as f64 / median;
        let worst = self
            .steps
            .iter()
            .max_by(|a, b| ratio(a).total_cmp(&ratio(b)))
            .expect("steps");
        let bad: Vec<String> = self
            .steps
            .iter()
            .filter(|s| s.held > FLOOR && ratio(s) > RATIO)
            .take(5)
            .map(|s| {
                format!(
                    "{}: {:?} for {} units ({:.0}x the calibration's {median:.1} ns per unit)",
                    s.what,
                    s.held,
                    s.units,
                    ratio(s)
                )
            })
            .collect();
        let longest = self.steps.iter().max_by_key(|s| s.held).expect("steps");
        eprintln!(
            "{program}: {} steps; calibration {median:.1} ns per unit; worst per unit {} \
             {:?} for {} units ({:.1}x); longest {} {:?} for {} units ({:.1}x)",
            self.steps.len(),
            worst.what,
            worst.held,
            worst.units,
            ratio(worst),
            longest.what,
            longest.held,
            longest.units,
            ratio(longest),
        );
        assert!(
            bad.is_empty(),
            "{program}: steps super-linear in their own size:\n{}",
            bad.join("\n")
        );
    }
}

fn first_path(req: &Request) -> String {
    match req {
        Request::Multi(ops) | Request::MultiRead(ops) => match ops.first() {
            Some(MultiOp::Create(c)) => format!("({} ops, first {})", ops.len(), c.path),
            Some(MultiOp::Delete(d)) => format!("({} ops, first {})", ops.len(), d.path),
            Some(MultiOp::SetData(d)) => format!("({} ops, first {})", ops.len(), d.path),
            _ => format!("({} ops)", ops.len()),
        },
        Request::Create(c) => c.path.clone(),
        Request::Delete(d) => d.path.clone(),
        Request::SetData(d) => d.path.clone(),
        Request::GetData(p) | Request::GetChildren(p) | Request::GetChildren2(p) => p.path.clone(),
        Request::Exists(p) => p.path.clone(),
        Request::AddWatch(a) => a.path.clone(),
        _ => String::new(),
    }
}

fn create_op(path: String) -> MultiOp {
    MultiOp::Create(Create {
        op: OpCode::Create,
        path,
        data: Some(Bytes::from_static(b"v")),
        acl: Acl::open_unsafe(),
        flags: 0,
        ttl: -1,
    })
}

fn delete_op(path: String) -> MultiOp {
    MultiOp::Delete(DeleteRequest { path, version: -1 })
}

fn set_op(path: String) -> MultiOp {
    MultiOp::SetData(SetDataRequest {
        path,
        data: Some(Bytes::from_static(b"changed")),
        version: -1,
    })
}

fn child(parent: &str, i: usize) -> String {
    format!("{parent}/item-{i:08}")
}

/// Creates `n` children under `parent` (which it creates) in multis of 1 000.
fn wide(m: &mut Meter, parent: &str, n: usize) {
    m.must(&create_req(OpCode::Create, parent, 0));
    for start in (0..n).step_by(1000) {
        let ops = (start..n.min(start + 1000))
            .map(|i| create_op(child(parent, i)))
            .collect();
        m.must(&Request::Multi(ops));
    }
}

/// A meter on a tree with `n` children under `parent`, whose list a client has read (so
/// the children cache holds it).
fn cached_wide(parent: &str, n: usize) -> Meter {
    let mut m = Meter::new();
    wide(&mut m, parent, n);
    assert_eq!(m.request(&children(parent, true)), 0);
    m
}

/// A parent with many children whose list a client read (cached), then one multi of many
/// deletes, single deletes, and the list read again between them. While the children cache
/// copies a cached list on every delete of a child, the multi costs the list's length per
/// delete and this test fails (about 660x the calibration at 50 000 children).
#[test]
fn wide_cached_parent_emptied_by_a_big_multi_and_single_deletes() {
    let n = 50_000 * scale();
    let mut m = cached_wide("/w", n);
    // The multi deletes from the end of the list, where finding an entry costs the most.
    let ops = (0..1_000)
        .map(|i| delete_op(child("/w", n - 1 - i)))
        .collect();
    m.must(&Request::Multi(ops));
    assert_eq!(m.request(&children("/w", false)), 0);
    for i in 0..200 {
        m.must(&delete(&child("/w", n - 1_001 - i), -1));
        if i % 100 == 0 {
            assert_eq!(m.request(&children("/w", false)), 0);
        }
    }
    m.check("wide cached parent");
}

/// The same tree reset (every node deleted in one step) after its list was cached, and
/// snapshotted in slices before. Fails, like the test above, while every delete copies a
/// cached list (the reset then costs the list's length per child).
#[test]
fn reset_and_snapshot_of_a_big_tree_with_a_cached_list() {
    let n = 20_000 * scale();
    let mut m = Meter::new();
    wide(&mut m, "/r", n);
    wide(&mut m, "/s", n / 10);
    assert_eq!(m.request(&children("/r", true)), 0);
    let mut job = m.h.core.begin_snapshot();
    loop {
        let step = m.step("snapshot slice of 1000 nodes", 0, |h| {
            h.core.snapshot_step(&mut job, 1000)
        });
        let written = job.nodes_written();
        m.add_units(1000 * NODE_UNITS);
        if step.expect("snapshot step") == crate::SnapshotStep::Done {
            assert!(written as usize > n);
            break;
        }
    }
    let (zxid, bytes) = m.step("export_snapshot", 0, |h| h.core.export_snapshot());
    assert!(zxid > 0 && !bytes.is_empty());
    m.add_units(bytes.len() as u64);
    let deleted = m.step("reset", 0, |h| h.core.reset(false, h.now, &mut h.out));
    assert!(deleted > n);
    m.check("reset and snapshot");
}

/// Deep paths with persistent-recursive watches on their ancestors, from many sessions;
/// creates, changes and deletes at the bottom notify them all.
#[test]
fn deep_paths_under_recursive_watches() {
    let mut m = Meter::new();
    let mut path = String::new();
    let mut levels = Vec::new();
    for i in 0..200 {
        path.push_str(&format!("/d{i}"));
        m.must(&create_req(OpCode::Create, &path, 0));
        levels.push(path.clone());
    }
    let watchers: Vec<ConnId> = (0..50 * scale()).map(|_| m.session()).collect();
    for (k, &w) in watchers.iter().enumerate() {
        for level in levels.iter().step_by(20 + k % 7) {
            let add = Request::AddWatch(AddWatchRequest {
                path: level.clone(),
                mode: 1,
            });
            assert_eq!(m.request_on(w, &add), 0);
        }
    }
    for i in 0..200 {
        let leaf = format!("{path}/leaf{i}");
        m.must(&create_req(OpCode::Create, &leaf, 0));
        m.must(&set_data(&leaf, -1));
        m.must(&delete(&leaf, -1));
    }
    m.check("deep recursive watches");
}

/// Thousands of sessions watching one node; one change notifies them all.
#[test]
fn many_watches_on_one_path() {
    let mut m = Meter::new();
    m.must(&create_req(OpCode::Create, "/hot", 0));
    let watchers: Vec<ConnId> = (0..2_000 * scale()).map(|_| m.session()).collect();
    for round in 0..5 {
        for &w in &watchers {
            assert_eq!(m.request_on(w, &get_data("/hot", true)), 0);
            if round == 0 {
                assert_eq!(m.request_on(w, &children("/hot", true)), 0);
            }
        }
        m.must(&set_data("/hot", -1));
    }
    m.must(&create_req(OpCode::Create, "/hot/child", 0));
    m.check("many watches on one path");
}

/// Big multis of every write, on a cached wide parent and elsewhere.
#[test]
fn big_multis_of_every_write() {
    let n = 10_000 * scale();
    let mut m = cached_wide("/m", n);
    for start in (0..n).step_by(5_000) {
        let ops = (start..n.min(start + 5_000))
            .map(|i| set_op(child("/m", i)))
            .collect();
        m.must(&Request::Multi(ops));
    }
    // A multi that fails at its last op rolls every earlier op back.
    let mut ops: Vec<MultiOp> = (0..5_000).map(|i| delete_op(child("/m", i))).collect();
    ops.push(delete_op("/m/absent".into()));
    m.request(&Request::Multi(ops));
    assert_eq!(m.request(&exists(&child("/m", 0), false)), 0, "rolled back");
    let reads = (0..5_000)
        .map(|i| MultiOp::GetData(path_watch(&child("/m", i), false)))
        .collect();
    assert_eq!(m.request(&Request::MultiRead(reads)), 0);
    for start in (0..n).step_by(5_000) {
        let ops = (start..n.min(start + 5_000))
            .map(|i| delete_op(child("/m", i)))
            .collect();
        m.must(&Request::Multi(ops));
        assert_eq!(m.request(&children("/m", true)), 0);
    }
    m.check("big multis");
}

/// Seeded random programs over a few wide parents: creates, deletes, reads of lists and
/// data with watches, changes, small multis, from several sessions.
#[test]
fn random_programs() {
    for seed in 1..=3u64 {
        let mut m = Meter::new();
        let sessions: Vec<ConnId> = (0..8).map(|_| m.session()).collect();
        let parents = ["/p0", "/p1", "/p2"];
        for p in parents {
            wide(&mut m, p, 3_000 * scale());
        }
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut next = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        for _ in 0..3_000 {
            let conn = sessions[next(sessions.len())];
            let parent = parents[next(parents.len())];
            let node = child(parent, next(4_000 * scale()));
            let req = match next(8) {
                0 => create_req(OpCode::Create, &node, 0),
                1 | 2 => delete(&node, -1),
                3 => children(parent, next(2) == 0),
                4 => get_data(&node, true),
                5 => set_data(&node, -1),
                6 => exists(&node, true),
                _ => Request::Multi(
                    (0..1 + next(50))
                        .map(|_| delete_op(child(parent, next(4_000 * scale()))))
                        .collect(),
                ),
            };
            m.request_on(conn, &req);
        }
        m.check(&format!("random program {seed}"));
    }
}
