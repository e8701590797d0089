//! The work of each step, counted: programs with wide parents whose child lists are cached,
//! many single deletes, big multis of deletes (one that commits, one that rolls back),
//! getAllChildrenNumber and a reset done in slices. Each step's count of elements copied or
//! visited (`data::work`) must stay within a constant times the bytes of its request and of
//! every frame it sends.

use bytes::Bytes;
use proptest::prelude::*;
use zkd_protocol::*;

use crate::data::work;
use crate::testing::harness::*;
use crate::ConnId;

/// Work allowed per byte of a step's input and output.
const PER_BYTE: u64 = 8;
/// Work any step may do whatever its size (a lookup, a reply header).
const FIXED: u64 = 64;

/// Takes the records the core handed over and gives their bytes (as a data directory would
/// keep them).
fn logged(h: &mut Harness) -> u64 {
    h.core
        .take_records()
        .iter()
        .map(|(_, r)| r.len() as u64)
        .sum()
}

/// Runs one step; gives the work it did and its output: the bytes of the frames it sent (all
/// of them are then forgotten) and of the transaction it logged.
fn measured(h: &mut Harness, step: impl FnOnce(&mut Harness)) -> (u64, u64) {
    h.out.clear();
    logged(h);
    work::take();
    step(h);
    let done = work::take();
    let sent: u64 = h.out.frames.iter().map(|(_, f)| f.len() as u64).sum();
    h.out.clear();
    (done, sent + logged(h))
}

/// Sends `req` from `conn` as one step; fails when its work is out of bounds. `once` is work
/// one step may do beyond the bound, once: the copy of a changed node a snapshot in
/// progress keeps (the first change of the wide parent copies its data).
fn bounded_request(
    h: &mut Harness,
    once: &mut u64,
    conn: ConnId,
    req: &Request,
    what: &str,
) -> u64 {
    h.xid += 1;
    let frame = req.to_frame(h.xid);
    let input = frame.len() as u64;
    let (done, sent) = measured(h, |h| {
        h.core.request(conn, frame.slice(4..), h.now, &mut h.out);
    });
    let mut bound = FIXED + PER_BYTE * (input + sent);
    if done > bound {
        bound += std::mem::take(once);
    }
    assert!(
        done <= bound,
        "{what}: {done} elements of work for {input} bytes in and {sent} out"
    );
    sent
}

fn all_children_number(path: &str) -> Request {
    Request::GetAllChildrenNumber(PathRequest { path: path.into() })
}

fn delete_op(path: String) -> MultiOp {
    MultiOp::Delete(DeleteRequest { path, version: -1 })
}

/// What one program does.
#[derive(Debug, Clone)]
struct Program {
    /// Children of the wide parent.
    width: usize,
    /// Single deletes, each after a fresh listing when `relist` says so.
    singles: usize,
    relist: bool,
    /// Deletes in the multi that commits.
    multi: usize,
    /// Nodes per reset slice.
    slice: usize,
    /// A recursive watch on `/` (every delete then sends an event).
    watch_all: bool,
    /// A snapshot in progress during the deletes (the tree keeps old versions for it).
    snapshot: bool,
}

fn program() -> impl Strategy<Value = Program> {
    (
        2000usize..3000,
        20usize..60,
        any::<bool>(),
        300usize..800,
        1usize..64,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(width, singles, relist, multi, slice, watch_all, snapshot)| Program {
                width,
                singles,
                relist,
                multi,
                slice,
                watch_all,
                snapshot,
            },
        )
}

fn run(p: &Program) {
    let (mut h, [a, w]) = Harness::with_sessions();
    if p.watch_all {
        let req = Request::AddWatch(AddWatchRequest {
            path: "/".into(),
            mode: add_watch_mode::PERSISTENT_RECURSIVE,
        });
        assert_eq!(h.reply(w, &req).err, 0);
    }
    // The parent's data is big next to a delete's request.
    let wide = Request::Create(Create {
        op: OpCode::Create,
        path: "/wide".into(),
        data: Some(vec![7u8; 4000].into()),
        acl: Acl::open_unsafe(),
        flags: 0,
        ttl: -1,
    });
    assert_eq!(h.reply(a, &wide).err, 0);
    h.create(a, "/deep", 0);
    let child = |i: usize| format!("/wide/item-{i:06}");
    for i in 0..p.width {
        h.create(a, &child(i), 0);
    }
    let mut deep = String::from("/deep");
    for i in 0..50 {
        deep.push_str(&format!("/d{i}"));
        h.create(a, &deep, 0);
        h.create(a, &format!("{deep}-leaf"), 0);
    }
    h.out.clear();
    h.core.set_logging(true);
    let _job = p.snapshot.then(|| h.core.begin_snapshot());
    let mut once = if p.snapshot { 4000 } else { 0 };
    let list = children("/wide", false);
    // The consumer's pattern: list (the list is cached), then delete one item.
    let mut next = 0;
    for _ in 0..p.singles {
        if p.relist || next == 0 {
            bounded_request(&mut h, &mut once, a, &list, "getChildren");
        }
        bounded_request(&mut h, &mut once, a, &delete(&child(next), -1), "delete");
        next += 1;
    }
    bounded_request(&mut h, &mut once, a, &list, "getChildren");
    let ops: Vec<MultiOp> = (next..next + p.multi)
        .map(|i| delete_op(child(i)))
        .collect();
    next += p.multi;
    // One that fails at its last op: everything before it is put back.
    let mut failing = ops.clone();
    failing.push(delete_op("/wide/absent".into()));
    bounded_request(
        &mut h,
        &mut once,
        a,
        &Request::Multi(failing),
        "failed multi",
    );
    bounded_request(&mut h, &mut once, a, &list, "getChildren");
    bounded_request(
        &mut h,
        &mut once,
        a,
        &Request::Multi(ops),
        "multi of deletes",
    );
    let left = p.width - next;
    assert_eq!(
        h.reply(a, &all_children_number("/wide"))
            .decode::<AllChildrenNumberResponse>()
            .total as usize,
        left
    );
    bounded_request(
        &mut h,
        &mut once,
        a,
        &all_children_number("/"),
        "getAllChildrenNumber /",
    );
    bounded_request(
        &mut h,
        &mut once,
        a,
        &all_children_number("/wide"),
        "getAllChildrenNumber",
    );
    bounded_request(&mut h, &mut once, a, &list, "getChildren");
    // Reset, a slice at a time; each slice's output is the nodes it deletes (their paths
    // are logged, their events sent).
    let mut deleted = 0;
    loop {
        let mut n = 0;
        let (done, out) = measured(&mut h, |h| {
            n = h.core.reset_slice(p.slice, h.now, &mut h.out);
        });
        assert!(n <= p.slice);
        assert!(
            done <= FIXED + PER_BYTE * out,
            "reset slice of {n}: {done} elements of work, {out} bytes sent and logged"
        );
        if n == 0 {
            break;
        }
        deleted += n;
    }
    assert_eq!(deleted, left + 2 + 2 * 50, "every node but /zookeeper's");
    let kids: Children2Response = h.reply(a, &children("/", false)).decode();
    assert_eq!(kids.children, ["zookeeper"]);
    h.core.check_invariants().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn every_step_is_bounded_by_its_input_and_output(p in program()) {
        run(&p);
    }
}

/// The program with every feature on, whatever the random ones draw.
#[test]
fn the_widest_program_is_bounded() {
    run(&Program {
        width: 3000,
        singles: 40,
        relist: true,
        multi: 800,
        slice: 2,
        watch_all: true,
        snapshot: true,
    });
}

/// A member told to lag starts its replica from the tree without copying node records: the
/// chunks of records are shared, and a later write copies only the chunk it changes, once.
#[test]
fn a_member_set_to_lag_shares_the_tree_and_a_write_copies_one_chunk() {
    use crate::data::tree_slab::CHUNK;
    use crate::Lag;

    let mut h = Harness::new();
    let (a, _, _) = h.session_on(1, 30000);
    let nodes = 4 * CHUNK;
    for i in 0..nodes {
        h.create(a, &format!("/n{i:05}"), 0);
    }
    h.out.clear();
    work::take();
    h.core.set_member_lag(2, Lag::Stalled, h.now, &mut h.out);
    let done = work::take();
    assert!(
        done <= FIXED,
        "setting a lag copied {done} elements of a tree of {nodes} nodes"
    );
    let set = |i: usize| {
        Request::SetData(SetDataRequest {
            path: format!("/n{i:05}"),
            data: Some(Bytes::from_static(b"new")),
            version: -1,
        })
    };
    // The first change to a shared chunk copies it (at most CHUNK records); the next change
    // to the same chunk copies nothing more.
    let write = |h: &mut Harness, i: usize| {
        h.xid += 1;
        let frame = set(i).to_frame(h.xid);
        measured(h, |h| {
            h.core.request(a, frame.slice(4..), h.now, &mut h.out);
        })
        .0
    };
    let first = write(&mut h, 0);
    let second = write(&mut h, 1);
    assert!(
        first >= CHUNK as u64 && first <= second + CHUNK as u64,
        "first write {first}, second {second}"
    );
    assert!(second <= FIXED, "the second write copied again: {second}");
    h.core.check_invariants().unwrap();
}

/// A snapshot step does at most a constant times its budget of work, however wide a parent:
/// the children of a parent with many are gathered over many steps. The file is still the
/// state where the job began although children are deleted (the one the walk was about to
/// visit among them), created and changed between the steps.
#[test]
fn a_snapshot_step_is_bounded_by_its_budget_on_a_wide_parent() {
    use crate::durability::snapshot_cow::Step;

    let (mut h, [a, _]) = Harness::with_sessions();
    h.create(a, "/wide", 0);
    let width = 3000;
    let child = |i: usize| format!("/wide/c{i:05}");
    for i in 0..width {
        h.create(a, &child(i), 0);
    }
    h.out.clear();
    let (_, at_once) = h.core.export_snapshot();
    let mut job = h.core.begin_snapshot();
    let budget = 16;
    let mut step = 0;
    let mut next_new = width;
    loop {
        work::take();
        let r = h.core.snapshot_step(&mut job, budget).unwrap();
        let done = work::take();
        assert!(
            done <= 4 * budget as u64 + FIXED,
            "step {step}: {done} elements of work for a budget of {budget}"
        );
        if r == Step::Done {
            break;
        }
        // Delete the child the walk visits next (new children go first in the list it
        // follows, so they are not visited), add one, and change some.
        let cursor = h.core.db.tree.cow.0.as_ref().and_then(|c| c.gather_at());
        if let Some(i) = cursor.filter(|_| step % 2 == 0) {
            let name = h.core.db.tree.child_at(i).0.to_string();
            assert_eq!(h.reply(a, &delete(&format!("/wide/{name}"), -1)).err, 0);
            h.create(a, &child(next_new), 0);
            next_new += 1;
        }
        if step % 5 == 0 {
            let req = Request::SetData(SetDataRequest {
                path: child(step % width),
                data: Some(Bytes::from_static(b"changed")),
                version: -1,
            });
            h.reply(a, &req);
        }
        h.out.clear();
        step += 1;
    }
    assert!(step > width / budget, "the walk took {step} steps");
    assert!(
        next_new - width > 50,
        "the walk's next child was deleted {} times",
        next_new - width
    );
    assert_eq!(job.finish().expect("complete"), at_once);
}
