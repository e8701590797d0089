//! Property tests of persistence in the core: random programs of writes, session closes and
//! expiries; the state rebuilt from a snapshot taken at a random point plus the logged
//! transactions after it must equal the live state, and so must an export/import round trip.

use bytes::Bytes;
use proptest::prelude::*;
use zkd_protocol::disk::snapshot::read_snapshot;
use zkd_protocol::disk::TxnEntry;
use zkd_protocol::*;

use crate::testing::harness::{op_inputs, tests_config, TEST_SESSIONS};
use crate::testing::session::open_test_session;
use crate::*;

#[derive(Clone, Debug)]
enum Op {
    Create {
        s: usize,
        path: usize,
        mode: i32,
        acl: bool,
        data: Option<Vec<u8>>,
    },
    Delete {
        s: usize,
        path: usize,
    },
    SetData {
        s: usize,
        path: usize,
        data: Option<Vec<u8>>,
    },
    SetAcl {
        s: usize,
        path: usize,
        acl: bool,
    },
    Multi {
        s: usize,
        a: usize,
        b: usize,
        mode: i32,
    },
    Close {
        s: usize,
    },
    Expire,
    Snapshot,
    /// A reset, `slice` nodes per transaction.
    Reset {
        slice: usize,
    },
}

const PATHS: [&str; 6] = ["/a", "/a/b", "/a/c", "/b", "/a/b/d", "/c"];

fn op() -> impl Strategy<Value = Op> {
    let (s, p, data) = op_inputs(PATHS.len());
    prop_oneof![
        4 => (s.clone(), p.clone(), 0i32..6, any::<bool>(), data.clone()).prop_map(|(s, path, mode, acl, data)| Op::Create { s, path, mode, acl, data }),
        2 => (s.clone(), p.clone()).prop_map(|(s, path)| Op::Delete { s, path }),
        2 => (s.clone(), p.clone(), data).prop_map(|(s, path, data)| Op::SetData { s, path, data }),
        1 => (s.clone(), p.clone(), any::<bool>()).prop_map(|(s, path, acl)| Op::SetAcl { s, path, acl }),
        2 => (s.clone(), p.clone(), p, 0i32..4).prop_map(|(s, a, b, mode)| Op::Multi { s, a, b, mode }),
        1 => s.prop_map(|s| Op::Close { s }),
        1 => Just(Op::Expire),
        1 => Just(Op::Snapshot),
        1 => (1usize..4).prop_map(|slice| Op::Reset { slice }),
    ]
}

fn acl(custom: bool) -> Vec<Acl> {
    if custom {
        vec![
            Acl::new(perms::ALL, "world", "anyone"),
            Acl::new(perms::READ, "digest", "u:smGaoVKd/cQkjm7b88GyorAUz20="),
        ]
    } else {
        Acl::open_unsafe()
    }
}

/// Node mode from 0..6: persistent, ephemeral, sequential, ephemeral sequential, container,
/// TTL.
fn create(path: &str, mode: i32, custom: bool, data: Option<Vec<u8>>) -> Create {
    let (op, flags, ttl) = match mode {
        4 => (OpCode::CreateContainer, 4, -1),
        5 => (OpCode::CreateTtl, 5, 60_000),
        m => (OpCode::Create2, m, -1),
    };
    Create {
        op,
        path: path.into(),
        data: data.map(Bytes::from),
        acl: acl(custom),
        flags,
        ttl,
    }
}

struct World {
    core: Core,
    conns: Vec<Option<ConnId>>,
    now: i64,
    /// Every record the core handed over, as a transaction log would hold them.
    log: Vec<(i64, Bytes)>,
    next_port: u16,
}

impl World {
    fn new() -> World {
        let log = Vec::new();
        let mut core = Core::new(tests_config(), 1_000);
        core.set_logging(true);
        let mut w = World {
            core,
            conns: vec![None; TEST_SESSIONS],
            now: 1_000,
            log,
            next_port: 4000,
        };
        for s in 0..TEST_SESSIONS {
            w.connect(s);
        }
        w
    }

    /// The records logged so far.
    fn log(&mut self) -> Vec<(i64, Bytes)> {
        self.log.extend(self.core.take_records());
        self.log.clone()
    }

    fn connect(&mut self, s: usize) {
        self.next_port += 1;
        let timeout = 4000 + 2000 * s as i32;
        let c = open_test_session(
            &mut self.core,
            self.next_port,
            timeout,
            self.now,
            &mut RecordingOutbox::counting(),
        )
        .0;
        self.conns[s] = Some(c);
    }

    fn call(&mut self, s: usize, req: Request) {
        if self.conns[s].is_none() {
            self.connect(s);
        }
        let Some(conn) = self.conns[s] else { return };
        let frame = req.to_frame(7);
        self.now += 10;
        self.core.request(
            conn,
            frame.slice(4..),
            self.now,
            &mut RecordingOutbox::counting(),
        );
    }

    fn step(&mut self, op: &Op) -> Option<(i64, Bytes, usize)> {
        match op.clone() {
            Op::Create {
                s,
                path,
                mode,
                acl,
                data,
            } => self.call(s, Request::Create(create(PATHS[path], mode, acl, data))),
            Op::Delete { s, path } => self.call(
                s,
                Request::Delete(DeleteRequest {
                    path: PATHS[path].into(),
                    version: -1,
                }),
            ),
            Op::SetData { s, path, data } => self.call(
                s,
                Request::SetData(SetDataRequest {
                    path: PATHS[path].into(),
                    data: data.map(Bytes::from),
                    version: -1,
                }),
            ),
            Op::SetAcl {
                s,
                path,
                acl: custom,
            } => self.call(
                s,
                Request::SetAcl(SetAclRequest {
                    path: PATHS[path].into(),
                    acl: acl(custom),
                    version: -1,
                }),
            ),
            Op::Multi { s, a, b, mode } => self.call(
                s,
                Request::Multi(vec![
                    MultiOp::Create(create(PATHS[a], mode, false, Some(b"m".to_vec()))),
                    MultiOp::Check(CheckVersionRequest {
                        path: PATHS[a].into(),
                        version: -1,
                    }),
                    MultiOp::Delete(DeleteRequest {
                        path: PATHS[b].into(),
                        version: -1,
                    }),
                ]),
            ),
            Op::Close { s } => {
                self.call(s, Request::CloseSession);
                self.conns[s] = None;
            }
            Op::Expire => {
                // Silence every session past its timeout, then tick: all expire.
                self.now += 30_000;
                self.core.tick(self.now, &mut RecordingOutbox::counting());
                self.conns = vec![None; TEST_SESSIONS];
            }
            Op::Reset { slice } => {
                let out = &mut RecordingOutbox::counting();
                while self.core.reset_slice(slice, self.now, out) > 0 {}
            }
            Op::Snapshot => {
                let (zxid, bytes) = self.core.export_snapshot();
                return Some((zxid, bytes, self.log().len()));
            }
        }
        None
    }
}

type NodeDump = (String, Option<Bytes>, Vec<Acl>, Stat, i64);

type Durable = (
    i64,
    Vec<NodeDump>,
    Vec<(i64, i64, Vec<String>)>,
    Vec<String>,
);

/// Everything durable, in a comparable form.
fn durable(core: &Core) -> Durable {
    let mut nodes: Vec<NodeDump> = core
        .db
        .tree
        .iter()
        .map(|(p, n)| {
            (
                p.to_string(),
                n.data_bytes(),
                n.acl.to_vec(),
                n.stat(),
                n.owner,
            )
        })
        .collect();
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    let mut sessions: Vec<(i64, i64, Vec<String>)> = core
        .sessions
        .iter()
        .map(|s| {
            let e = s.ephemerals.iter().map(|p| p.to_string()).collect();
            (s.id, s.timeout_ms, e)
        })
        .collect();
    sessions.sort();
    let reapable = core.db.reapable.iter().map(|p| p.to_string()).collect();
    (core.db.zxid, nodes, sessions, reapable)
}

fn rebuild(snapshot: Option<&(i64, Bytes, usize)>, log: &[(i64, Bytes)]) -> Core {
    let mut core = Core::new(tests_config(), 1_000);
    let from = match snapshot {
        Some((zxid, bytes, from)) => {
            let image = read_snapshot(bytes.clone()).expect("own snapshot reads");
            core.import_snapshot(&image, *zxid, 1_000).expect("imports");
            *from
        }
        None => 0,
    };
    for (zxid, txn) in &log[from..] {
        let entry = TxnEntry::decode(txn.clone()).expect("own record decodes");
        assert_eq!(entry.header.zxid, *zxid);
        assert_eq!(core.replay(&entry, 1_000), Replayed::Applied, "{entry:?}");
    }
    core
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn snapshot_plus_log_rebuilds_the_state(ops in proptest::collection::vec(op(), 1..60)) {
        let mut w = World::new();
        let mut snapshots = Vec::new();
        for op in &ops {
            if let Some(s) = w.step(op) {
                snapshots.push(s);
            }
        }
        let log = w.log();
        // Every zxid used is logged exactly once, in order.
        let zxids: Vec<i64> = log.iter().map(|(z, _)| *z).collect();
        let expected: Vec<i64> = (1..=w.core.db.zxid).collect();
        prop_assert_eq!(zxids, expected);

        let live = durable(&w.core);
        prop_assert_eq!(&durable(&rebuild(None, &log)), &live);
        for s in &snapshots {
            prop_assert_eq!(&durable(&rebuild(Some(s), &log)), &live);
        }
        let (zxid, bytes) = w.core.export_snapshot();
        let image = read_snapshot(bytes.clone()).expect("reads");
        let mut copy = Core::new(tests_config(), 1_000);
        copy.import_snapshot(&image, zxid, 1_000).expect("imports");
        prop_assert_eq!(&durable(&copy), &live);
        // Export is deterministic.
        prop_assert_eq!(copy.export_snapshot().1, bytes);
    }
}

/// Finishes `job` one node per call.
fn finish(core: &mut Core, job: &mut SnapshotJob) -> Bytes {
    while core.snapshot_step(job, 1).expect("job is current") == SnapshotStep::More {}
    job.finish().expect("complete")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// A snapshot written one node at a time while writes, session closes and expiries
    /// change the tree between the nodes is byte for byte the snapshot of the state where
    /// it began, and with the log after it rebuilds the live state.
    #[test]
    fn sliced_snapshot_holds_the_state_where_it_began(
        before in proptest::collection::vec(op(), 0..40),
        during in proptest::collection::vec(
            (op(), prop_oneof![3 => Just(0usize), 1 => 1usize..3]),
            1..40,
        ),
    ) {
        let mut w = World::new();
        for op in &before {
            w.step(op);
        }
        let (zxid, at_once) = w.core.export_snapshot();
        let from = w.log().len();
        let mut job = w.core.begin_snapshot();
        prop_assert_eq!(job.zxid(), zxid);
        let mut sliced = None;
        for (op, steps) in &during {
            if !matches!(op, Op::Snapshot) {
                w.step(op);
            }
            for _ in 0..*steps {
                if sliced.is_none() && w.core.snapshot_step(&mut job, 1).unwrap() == SnapshotStep::Done {
                    sliced = job.finish();
                }
            }
        }
        let sliced = match sliced {
            Some(b) => b,
            None => finish(&mut w.core, &mut job),
        };
        prop_assert_eq!(&sliced, &at_once);
        prop_assert!(w.core.db.tree.cow.0.is_none(), "copies are dropped when the job ends");
        let log = w.log();
        let rebuilt = rebuild(Some(&(zxid, sliced, from)), &log);
        prop_assert_eq!(&durable(&rebuilt), &durable(&w.core));
    }
}

#[test]
fn walk_order_is_depth_first_with_siblings_by_name() {
    let mut paths = vec!["/b", "/a/c", "/", "/a", "/a-b", "/a/b/z", "/a/b", "/ab"];
    paths.sort_by(|a, b| crate::data::cow_slot::walk_order(a, b));
    assert_eq!(
        paths,
        ["/", "/a", "/a/b", "/a/b/z", "/a/c", "/a-b", "/ab", "/b"]
    );
}

#[test]
fn nodes_removed_and_recreated_before_the_walk_reaches_them() {
    let mut w = World::new();
    let make = |path: usize, data: &[u8]| Op::Create {
        s: 0,
        path,
        mode: 0,
        acl: false,
        data: Some(data.to_vec()),
    };
    for (path, data) in [(0, b"a"), (1, b"b"), (4, b"d"), (5, b"c")] {
        w.step(&make(path, data));
    }
    let (_, at_once) = w.core.export_snapshot();
    let mut job = w.core.begin_snapshot();
    // "/" and "/a" written; "/a/b" and "/a/b/d" still to come.
    w.core.snapshot_step(&mut job, 2).expect("current");
    for path in [4, 1] {
        w.step(&Op::Delete { s: 0, path });
    }
    w.step(&make(1, b"new b"));
    for path in [5, 0] {
        w.step(&Op::SetData {
            s: 1,
            path,
            data: None,
        });
    }
    assert_eq!(finish(&mut w.core, &mut job), at_once);
}

#[test]
fn a_newer_snapshot_supersedes_an_unfinished_one() {
    let mut w = World::new();
    let mut old = w.core.begin_snapshot();
    let mut new = w.core.begin_snapshot();
    assert!(w.core.snapshot_step(&mut old, 1).is_err());
    let bytes = finish(&mut w.core, &mut new);
    assert_eq!(bytes, w.core.export_snapshot().1);
    let mut abandoned = w.core.begin_snapshot();
    w.core.snapshot_step(&mut abandoned, 1).expect("current");
    w.core.end_snapshot(&abandoned);
    assert!(w.core.db.tree.cow.0.is_none());
}

/// What reveals a record not yet stored is declared to wait for it, the rest leaves at once;
/// a record that cannot be stored stops the core.
#[test]
fn frames_revealing_unstored_records_wait_and_a_failed_store_stops_the_core() {
    use crate::testing::harness::*;
    let (mut h, [a, w]) = Harness::with_sessions::<2>();
    h.create(a, "/kept", 0);
    h.reply(w, &exists("/new", true));
    h.core.set_logging(true);
    // Sends `req` from `a` and gives when each frame the core queued may leave.
    let releases = |h: &mut Harness, req: &Request| {
        h.out.clear();
        h.xid += 1;
        let frame = req.to_frame(h.xid);
        h.core.request(a, frame.slice(4..), h.now, &mut h.out);
        std::mem::take(&mut h.out.releases)
    };
    use Release::{AfterRecords, Now};
    assert_eq!(releases(&mut h, &get_data("/kept", false)), [Now]);
    // The create's notification and reply reveal its record: both wait for it.
    let create = create_req(OpCode::Create2, "/new", 0);
    assert_eq!(releases(&mut h, &create), [AfterRecords, AfterRecords]);
    assert_eq!(h.out.frames.iter().map(|f| f.0).collect::<Vec<_>>(), [w, a]);
    assert_eq!(h.core.take_records().len(), 1);
    // Stored: what follows leaves at once again.
    assert_eq!(releases(&mut h, &get_data("/new", false)), [Now]);
    // A record that cannot be stored stops the core.
    assert_eq!(releases(&mut h, &delete("/new", -1)), [AfterRecords]);
    let zxid = h.core.take_records()[0].0;
    h.core.stop(format!("log write of 0x{zxid:x} failed"));
    let reason = h.core.stopped().map(str::to_string);
    assert!(
        reason.as_deref().unwrap_or("").contains("log write of 0x"),
        "{reason:?}"
    );
    // Every later call is refused without touching the state or the outbox.
    h.out.clear();
    assert!(h.call(a, &get_data("/kept", false)).is_empty());
    h.now += 100_000;
    h.core.tick(h.now, &mut h.out);
    assert!(h.out.frames.is_empty() && h.out.closed.is_empty());
    let addr: std::net::SocketAddr = "127.0.0.1:6000".parse().unwrap();
    assert_eq!(h.core.open_connection(addr, h.now), None);
    assert!(h.core.apply_fixture(&[], h.now).is_err());
}

/// A fuzzy snapshot can hold a parent from before a delete and lack the child the delete
/// removed: replaying that delete still moves the parent's pzxid on, as ZooKeeper's does.
#[test]
fn replaying_a_delete_of_a_child_already_gone_moves_the_parents_pzxid() {
    use zkd_protocol::disk::{CreateTxn, DeleteTxn, NewNode, TxnBody, TxnHeader};
    let entry = |zxid: i64, body: TxnBody| TxnEntry {
        header: TxnHeader {
            client_id: 0,
            cxid: 0,
            zxid,
            time: 1_000,
            txn_type: 0,
        },
        body,
    };
    let mut core = Core::new(tests_config(), 1_000);
    let create = TxnBody::Create(CreateTxn {
        node: NewNode {
            path: "/a".into(),
            data: None,
            acl: Acl::open_unsafe(),
        },
        ephemeral: false,
        parent_cversion: 1,
    });
    assert_eq!(core.replay(&entry(1, create), 1_000), Replayed::Applied);
    assert_eq!(core.db.tree.get("/").map(|n| n.pzxid), Some(1));
    let gone = TxnBody::Delete(DeleteTxn {
        path: "/gone".into(),
    });
    assert!(matches!(
        core.replay(&entry(2, gone), 1_000),
        Replayed::Inconsistent(_)
    ));
    assert_eq!(core.db.tree.get("/").map(|n| n.pzxid), Some(2));
    let a = TxnBody::Delete(DeleteTxn { path: "/a".into() });
    assert_eq!(core.replay(&entry(3, a), 1_000), Replayed::Applied);
    assert_eq!(core.db.tree.get("/").map(|n| n.pzxid), Some(3));
}
