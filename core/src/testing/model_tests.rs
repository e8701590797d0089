//! Property tests of the core: random multi-session programs checked against a small
//! reference model of the tree, and arbitrary request bytes that must never panic or break
//! the tree's invariants.

use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use zkd_protocol::*;

use crate::testing::harness::{op_inputs, tests_config, TEST_SESSIONS};
use crate::testing::session::open_test_session;
use crate::*;

/// The reference model: path → node.
#[derive(Clone, Debug)]
struct MNode {
    data: Option<Vec<u8>>,
    version: i32,
    creates: i32,
    owner: Option<usize>,
    children: usize,
}

#[derive(Clone, Debug)]
enum Op {
    Create {
        s: usize,
        path: usize,
        mode: i32,
        data: Option<Vec<u8>>,
    },
    Delete {
        s: usize,
        path: usize,
        version: Option<i32>,
    },
    SetData {
        s: usize,
        path: usize,
        version: Option<i32>,
        data: Option<Vec<u8>>,
    },
    Exists {
        s: usize,
        path: usize,
    },
    Children {
        s: usize,
        path: usize,
    },
    Close {
        s: usize,
    },
}

const PATHS: [&str; 6] = ["/a", "/a/b", "/a/c", "/b", "/a/b/d", "/a/"];

fn op() -> impl Strategy<Value = Op> {
    let (s, p, data) = op_inputs(PATHS.len());
    let version = proptest::option::of(-1i32..3);
    prop_oneof![
        3 => (s.clone(), p.clone(), 0i32..4, data.clone()).prop_map(|(s, path, mode, data)| Op::Create { s, path, mode, data }),
        2 => (s.clone(), p.clone(), version.clone()).prop_map(|(s, path, version)| Op::Delete { s, path, version }),
        2 => (s.clone(), p.clone(), version, data).prop_map(|(s, path, version, data)| Op::SetData { s, path, version, data }),
        1 => (s.clone(), p.clone()).prop_map(|(s, path)| Op::Exists { s, path }),
        1 => (s.clone(), p).prop_map(|(s, path)| Op::Children { s, path }),
        1 => s.prop_map(|s| Op::Close { s }),
    ]
}

fn parent(p: &str) -> String {
    let i = p.rfind('/').unwrap_or(0);
    if i == 0 {
        "/".into()
    } else {
        p[..i].to_string()
    }
}

struct World {
    core: Core,
    conns: Vec<Option<ConnId>>,
    model: BTreeMap<String, MNode>,
    zxid: i64,
}

impl World {
    fn new() -> World {
        let mut core = Core::new(tests_config(), 1_000);
        let mut sink = RecordingOutbox::new();
        let mut conns = Vec::new();
        for i in 0..TEST_SESSIONS {
            let port = 4000 + i as u16;
            let (conn, _) = open_test_session(&mut core, port, 30000, 1_000, &mut sink);
            conns.push(Some(conn));
        }
        let mut model = BTreeMap::new();
        model.insert(
            "/".to_string(),
            MNode {
                data: Some(vec![]),
                version: 0,
                creates: 0,
                owner: None,
                children: 1,
            },
        );
        World {
            core,
            conns,
            model,
            zxid: TEST_SESSIONS as i64,
        }
    }

    fn call(&mut self, s: usize, req: Request) -> Option<(i64, i32, Bytes)> {
        let conn = self.conns[s]?;
        let mut sink = RecordingOutbox::new();
        let frame = req.to_frame(1);
        self.core.request(conn, frame.slice(4..), 2_000, &mut sink);
        let (_, reply) = sink.frames.into_iter().filter(|(c, _)| *c == conn).last()?;
        let mut r = Reader::new(reply.slice(4..));
        let h = ReplyHeader::read(&mut r).ok()?;
        Some((h.zxid, h.err, r.rest()))
    }

    /// Applies `op` to both the core and the model and compares the outcome.
    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op.clone() {
            Op::Create {
                s,
                path,
                mode,
                data,
            } => {
                let req = Request::Create(Create {
                    op: OpCode::Create,
                    path: PATHS[path].into(),
                    data: data.clone().map(Bytes::from),
                    acl: Acl::open_unsafe(),
                    flags: mode,
                    ttl: -1,
                });
                let Some((zxid, err, body)) = self.call(s, req) else {
                    return Ok(());
                };
                self.zxid += 1;
                prop_assert_eq!(
                    zxid,
                    self.zxid,
                    "writes take the next zxid even when they fail"
                );
                let raw = PATHS[path];
                let par = parent(raw);
                let expected = match self.model.get(&par) {
                    None => Err(ErrorCode::NoNode),
                    Some(_) if raw.ends_with('/') && mode & 2 == 0 => Err(ErrorCode::BadArguments),
                    Some(pn) => {
                        let full = if mode & 2 != 0 {
                            format!("{raw}{:010}", pn.creates)
                        } else {
                            raw.to_string()
                        };
                        if self.model.contains_key(&full) {
                            Err(ErrorCode::NodeExists)
                        } else if pn.owner.is_some() {
                            Err(ErrorCode::NoChildrenForEphemerals)
                        } else {
                            Ok(full)
                        }
                    }
                };
                match expected {
                    Err(e) => prop_assert_eq!(err, e.code(), "create {} mode {}", raw, mode),
                    Ok(full) => {
                        prop_assert_eq!(err, 0, "create {} mode {}", raw, mode);
                        let got: CreateResponse = from_bytes(body).unwrap();
                        prop_assert_eq!(&got.path, &full);
                        let pn = self.model.get_mut(&par).unwrap();
                        pn.creates += 1;
                        pn.children += 1;
                        let owner = (mode & 1 != 0).then_some(s);
                        self.model.insert(
                            full,
                            MNode {
                                data,
                                version: 0,
                                creates: 0,
                                owner,
                                children: 0,
                            },
                        );
                    }
                }
            }
            Op::Delete { s, path, version } => {
                let p = PATHS[path];
                let Some((_, err, _)) = self.call(
                    s,
                    Request::Delete(DeleteRequest {
                        path: p.into(),
                        version: version.unwrap_or(-1),
                    }),
                ) else {
                    return Ok(());
                };
                self.zxid += 1;
                let expected = match self.model.get(p) {
                    _ if !self.model.contains_key(&parent(p)) => Err(ErrorCode::NoNode),
                    None => Err(ErrorCode::NoNode),
                    Some(n) if version.is_some_and(|v| v != -1 && v != n.version) => {
                        Err(ErrorCode::BadVersion)
                    }
                    Some(n) if n.children > 0 => Err(ErrorCode::NotEmpty),
                    Some(_) => Ok(()),
                };
                match expected {
                    Err(e) => prop_assert_eq!(err, e.code(), "delete {}", p),
                    Ok(()) => {
                        prop_assert_eq!(err, 0, "delete {}", p);
                        self.model.remove(p);
                        self.model.get_mut(&parent(p)).unwrap().children -= 1;
                    }
                }
            }
            Op::SetData {
                s,
                path,
                version,
                data,
            } => {
                let p = PATHS[path];
                let req = Request::SetData(SetDataRequest {
                    path: p.into(),
                    data: data.clone().map(Bytes::from),
                    version: version.unwrap_or(-1),
                });
                let Some((_, err, body)) = self.call(s, req) else {
                    return Ok(());
                };
                self.zxid += 1;
                let expected = match self.model.get(p) {
                    _ if p.ends_with('/') => Err(ErrorCode::BadArguments),
                    None => Err(ErrorCode::NoNode),
                    Some(n) if version.is_some_and(|v| v != -1 && v != n.version) => {
                        Err(ErrorCode::BadVersion)
                    }
                    Some(_) => Ok(()),
                };
                match expected {
                    Err(e) => prop_assert_eq!(err, e.code(), "setData {}", p),
                    Ok(()) => {
                        prop_assert_eq!(err, 0);
                        let n = self.model.get_mut(p).unwrap();
                        n.version += 1;
                        n.data = data;
                        let stat = from_bytes::<StatResponse>(body).unwrap().stat;
                        prop_assert_eq!(stat.version, n.version);
                        prop_assert_eq!(stat.mzxid, self.zxid);
                    }
                }
            }
            Op::Exists { s, path } | Op::Children { s, path } => {
                let p = PATHS[path];
                let children = matches!(op, Op::Children { .. });
                let req = if children {
                    Request::GetChildren2(PathWatchRequest {
                        path: p.into(),
                        watch: true,
                    })
                } else {
                    Request::GetData(PathWatchRequest {
                        path: p.into(),
                        watch: true,
                    })
                };
                let Some((zxid, err, body)) = self.call(s, req) else {
                    return Ok(());
                };
                prop_assert_eq!(zxid, self.zxid, "reads carry the last zxid");
                match self.model.get(p) {
                    None => prop_assert_eq!(err, ErrorCode::NoNode.code()),
                    Some(n) => {
                        prop_assert_eq!(err, 0);
                        let stat = if children {
                            let r: Children2Response = from_bytes(body).unwrap();
                            prop_assert_eq!(r.children.len(), n.children);
                            r.stat
                        } else {
                            let r: GetDataResponse = from_bytes(body).unwrap();
                            prop_assert_eq!(r.data.map(|d| d.to_vec()), n.data.clone());
                            r.stat
                        };
                        prop_assert_eq!(stat.version, n.version);
                        prop_assert_eq!(stat.num_children as usize, n.children);
                        prop_assert_eq!(stat.cversion, 2 * n.creates - n.children as i32);
                    }
                }
            }
            Op::Close { s } => {
                if self.call(s, Request::CloseSession).is_none() {
                    return Ok(());
                }
                self.zxid += 1;
                self.conns[s] = None;
                let gone: Vec<String> = self
                    .model
                    .iter()
                    .filter(|(_, n)| n.owner == Some(s))
                    .map(|(p, _)| p.clone())
                    .collect();
                for p in gone {
                    self.model.remove(&p);
                    self.model.get_mut(&parent(&p)).unwrap().children -= 1;
                }
            }
        }
        prop_assert_eq!(self.core.last_zxid(), self.zxid);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn core_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        let mut w = World::new();
        for op in &ops {
            w.step(op)?;
            prop_assert_eq!(w.core.check_invariants(), Ok(()), "after {:?}", op);
        }
        // The whole tree agrees at the end, ephemerals of closed sessions included.
        for (path, n) in &w.model {
            let node = w.core.db.tree.get(path);
            prop_assert!(node.is_some(), "{} missing", path);
            prop_assert_eq!(node.unwrap().num_children(), n.children);
        }
        prop_assert_eq!(w.core.db.tree.len(), w.model.len() + 3, "model has no /zookeeper subtree");
    }

    #[test]
    fn arbitrary_requests_never_panic(frames in proptest::collection::vec((any::<i32>(), -12i32..110, proptest::collection::vec(any::<u8>(), 0..64)), 1..30)) {
        let mut w = World::new();
        let conn = w.conns[0].unwrap();
        let mut sink = RecordingOutbox::new();
        for (xid, op, body) in frames {
            let mut payload = Vec::new();
            payload.extend_from_slice(&xid.to_be_bytes());
            payload.extend_from_slice(&op.to_be_bytes());
            payload.extend_from_slice(&body);
            w.core.request(conn, Bytes::from(payload), 3_000, &mut sink);
            prop_assert_eq!(w.core.check_invariants(), Ok(()));
        }
        // Every node's parent lists it, and every listed child exists.
        let paths: Vec<String> = w.core.db.tree.nodes_for_tests();
        for p in &paths {
            if p != "/" {
                let par = parent(p);
                let listed = w.core.db.tree.children(&par);
                prop_assert!(listed.is_some_and(|c| c.contains(&path::name(p))), "{} not listed in {}", p, par);
            }
        }
    }
}
