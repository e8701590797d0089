//! The one apply path, checked on random programs: the records the core logged, applied in
//! order to an empty [`Db`], give the live tree Stat for Stat; and a lagging member's copy,
//! which applies the same records later, ends equal to it.

use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use zkd_protocol::disk::TxnEntry;
use zkd_protocol::*;

use super::Db;
use crate::testing::harness::*;
use crate::*;

const PATHS: [&str; 6] = ["/a", "/a/b", "/a/b/c", "/d", "/d/e", "/a/f"];
const LAGGING: MemberId = 2;

#[derive(Clone, Debug)]
enum Op {
    /// Session, path, kind: 0-3 the create flags, 4 container, 5 TTL.
    Create(usize, usize, u8),
    Delete(usize, usize),
    SetData(usize, usize, u8),
    SetAcl(usize, usize, bool),
    /// Sub-ops: (kind 0 create, 1 delete, 2 setData, 3 check with a wrong version; path).
    Multi(usize, Vec<(u8, usize)>),
    /// Closes the session; a new one takes its place.
    Close(usize),
    /// Moves the clock (the reaper and TTL expiry run).
    Advance(u16),
}

fn op() -> impl Strategy<Value = Op> {
    let s = 0..3usize;
    let p = 0..PATHS.len();
    prop_oneof![
        4 => (s.clone(), p.clone(), 0..6u8).prop_map(|(s, p, k)| Op::Create(s, p, k)),
        2 => (s.clone(), p.clone()).prop_map(|(s, p)| Op::Delete(s, p)),
        2 => (s.clone(), p.clone(), any::<u8>()).prop_map(|(s, p, d)| Op::SetData(s, p, d)),
        1 => (s.clone(), p.clone(), any::<bool>()).prop_map(|(s, p, o)| Op::SetAcl(s, p, o)),
        2 => (s.clone(), proptest::collection::vec((0..4u8, p), 0..5))
            .prop_map(|(s, subs)| Op::Multi(s, subs)),
        1 => s.prop_map(Op::Close),
        1 => (0..3000u16).prop_map(Op::Advance),
    ]
}

fn create(path: &str, kind: u8) -> Create {
    let (op, flags, ttl) = match kind {
        4 => (OpCode::CreateContainer, 4, -1),
        5 => (OpCode::CreateTtl, 5, 500),
        f => (OpCode::Create2, i32::from(f), -1),
    };
    Create {
        op,
        path: path.into(),
        data: Some(Bytes::from_static(b"v")),
        acl: Acl::open_unsafe(),
        flags,
        ttl,
    }
}

fn request(op: &Op) -> Option<Request> {
    Some(match op {
        Op::Create(_, p, k) => Request::Create(create(PATHS[*p], *k)),
        Op::Delete(_, p) => delete(PATHS[*p], -1),
        Op::SetData(_, p, d) => Request::SetData(SetDataRequest {
            path: PATHS[*p].into(),
            data: Some(Bytes::copy_from_slice(&[*d])),
            version: -1,
        }),
        Op::SetAcl(_, p, open) => Request::SetAcl(SetAclRequest {
            path: PATHS[*p].into(),
            acl: if *open {
                Acl::open_unsafe()
            } else {
                vec![
                    Acl::new(perms::ALL, "digest", "u:x"),
                    Acl::new(perms::READ, "world", "anyone"),
                ]
            },
            version: -1,
        }),
        Op::Multi(_, subs) => Request::Multi(
            subs.iter()
                .map(|(k, p)| {
                    let path = PATHS[*p].to_string();
                    match k {
                        0 => MultiOp::Create(create(&path, 0)),
                        1 => MultiOp::Delete(DeleteRequest { path, version: -1 }),
                        2 => MultiOp::SetData(SetDataRequest {
                            path,
                            data: None,
                            version: -1,
                        }),
                        _ => MultiOp::Check(CheckVersionRequest { path, version: 7 }),
                    }
                })
                .collect(),
        ),
        Op::Close(_) => Request::CloseSession,
        Op::Advance(_) => return None,
    })
}

/// A node as compared: path, Stat, data and ACL.
type NodeState = (String, Stat, Option<Vec<u8>>, Vec<Acl>);

/// Every node, in path order.
fn nodes(db: &Db) -> Vec<NodeState> {
    let mut all: Vec<_> = db
        .tree
        .iter()
        .map(|(p, n)| (p, n.stat(), n.data.map(<[u8]>::to_vec), n.acl.to_vec()))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

fn empty_db() -> Db {
    Db::new(
        Arc::from(Acl::open_unsafe()),
        Arc::from(vec![Acl::new(perms::READ, "world", "anyone")]),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn logged_records_rebuild_the_live_tree_and_a_lagging_copy_catches_up(
        ops in proptest::collection::vec(op(), 1..80)
    ) {
        let mut h = Harness::new();
        h.core.set_logging(true);
        let mut conns: Vec<ConnId> = (0..3).map(|_| h.session_on(1, 30_000).0).collect();
        h.core.set_member_lag(LAGGING, Lag::Stalled, h.now, &mut h.out);
        for op in &ops {
            if let Op::Advance(ms) = op {
                h.now += i64::from(*ms);
                h.core.tick(h.now, &mut h.out);
                continue;
            }
            let s = match op {
                Op::Create(s, ..) | Op::Delete(s, _) | Op::SetData(s, ..) | Op::SetAcl(s, ..)
                | Op::Multi(s, _) | Op::Close(s) => *s,
                Op::Advance(_) => continue,
            };
            if let Some(req) = request(op) {
                h.call(conns[s], &req);
            }
            if matches!(op, Op::Close(_)) {
                conns[s] = h.session_on(1, 30_000).0;
            }
        }

        let records: Vec<Bytes> = h.core.take_records().into_iter().map(|(_, r)| r).collect();
        let mut db = empty_db();
        for r in &records {
            let entry = TxnEntry::decode(r.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let applied = db.apply(&entry.header, &entry.body, 0);
            prop_assert!(applied.problems.is_empty(), "{:?}: {:?}", entry, applied.problems);
        }
        prop_assert_eq!(db.zxid, h.core.last_zxid());
        prop_assert_eq!(nodes(&db), nodes(&h.core.db));

        // The stalled member applies the same records once it may (a tick may commit
        // something new, a reap or an expiry, which the member applies at the next).
        h.core.set_member_lag(LAGGING, Lag::Ms(1), h.now, &mut h.out);
        for _ in 0..5 {
            if h.core.member_zxid(LAGGING) == h.core.last_zxid() {
                break;
            }
            h.now += 10;
            h.core.tick(h.now, &mut h.out);
        }
        prop_assert_eq!(h.core.member_zxid(LAGGING), h.core.last_zxid());
        if let Err(e) = h.core.replica_matches_main(LAGGING) {
            return Err(TestCaseError::fail(e));
        }
    }
}
