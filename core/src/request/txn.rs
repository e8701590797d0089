//! Write transactions decided: the checks of every write op in the real server's order, each
//! producing the transaction record it performs, which [`crate::db::Db::apply`] then applies.
//! A multi's sub-ops are checked against what the sub-ops before them would change, so a
//! multi that fails changes nothing. Also the server's own transactions: closing a session
//! and the reaper's deletes.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use zkd_protocol::disk::{
    txn_type, CheckVersionTxn, CloseSessionTxn, CreateContainerTxn, CreateTtlTxn, CreateTxn,
    DeleteTxn, NewNode, SetAclTxn, SetDataTxn, TxnBody, TxnHeader,
};
use zkd_protocol::{perms, Acl, CreateMode, ErrorCode, Id, OpCode};

use crate::data::tree::{self, AclList, NodeKind, CONTAINER_OWNER, MAX_TTL, TTL_MARKER};
use crate::{auth::acl, data::path, Core, Now, Outbox};

/// What the checks of a write read of a node.
#[derive(Clone)]
pub(crate) struct Facts {
    version: i32,
    acl: AclList,
    owner: i64,
    children: usize,
    child_creates: i32,
}

/// The nodes that the sub-ops of a multi decided so far would change, as they would be
/// after them (`None`: gone). The checks of a later sub-op read here first, then the tree.
/// A single write leaves it empty.
#[derive(Default)]
pub(crate) struct Pending {
    /// Whether a multi is being decided (a single write notes nothing).
    multi: bool,
    nodes: HashMap<String, Option<Facts>>,
}

impl Pending {
    /// For the sub-ops of one multi.
    pub(crate) fn multi() -> Pending {
        Pending {
            multi: true,
            nodes: HashMap::new(),
        }
    }

    /// The node at `p` will be as `facts` says once the sub-ops decided so far are applied.
    fn note(&mut self, p: &str, facts: Option<Facts>) {
        if self.multi {
            self.nodes.insert(path::canonical(p).to_string(), facts);
        }
    }
}

/// A decided operation: its record type and body.
pub(crate) type Decided = (i32, TxnBody);

/// What a decided create says besides its record.
pub(crate) struct Created {
    /// Container or TTL node (their multi result carries a Stat).
    pub extended: bool,
}

/// The path a create record makes (its node's); empty for any other record.
pub(crate) fn created_path(body: TxnBody) -> String {
    match body {
        TxnBody::Create(c) => c.node.path,
        TxnBody::CreateContainer(c) => c.node.path,
        TxnBody::CreateTtl(c) => c.node.path,
        _ => String::new(),
    }
}

type OpResult<T> = Result<T, ErrorCode>;

fn check_version(expected: i32, actual: i32) -> OpResult<()> {
    if expected != -1 && expected != actual {
        Err(ErrorCode::BadVersion)
    } else {
        Ok(())
    }
}

/// The header of a transaction of `session` (0 for the server's own) and its request xid.
pub(crate) fn header(session: i64, cxid: i32, zxid: i64, wall: i64, txn_type: i32) -> TxnHeader {
    TxnHeader {
        client_id: session,
        cxid,
        zxid,
        time: wall,
        txn_type,
    }
}

impl Core {
    /// A node as the checks see it: as pending sub-ops of a multi left it, else the tree's.
    fn facts(&self, pending: &Pending, p: &str) -> Option<Facts> {
        let p = path::canonical(p);
        if let Some(f) = pending.nodes.get(p) {
            return f.clone();
        }
        self.db.tree.get(p).map(|n| Facts {
            version: n.version,
            acl: n.acl.clone(),
            owner: n.owner,
            children: n.num_children(),
            child_creates: n.child_creates,
        })
    }

    fn intern_acl(&self, acl: Vec<Acl>) -> AclList {
        if *acl == *self.open_acl {
            self.open_acl.clone()
        } else {
            Arc::from(acl)
        }
    }

    /// create, create2, createContainer and createTTL (also as multi sub-ops).
    pub(crate) fn decide_create(
        &self,
        pending: &mut Pending,
        session: i64,
        ids: &[Id],
        c: zkd_protocol::Create,
        in_multi: bool,
    ) -> OpResult<(Decided, Created)> {
        let mode = CreateMode::from_flags(c.flags).ok_or(ErrorCode::BadArguments)?;
        if c.op == OpCode::CreateTtl {
            if !mode.is_ttl() {
                return Err(ErrorCode::BadArguments);
            }
            if !self.cfg.ttl_enabled {
                return Err(ErrorCode::Unimplemented);
            }
            if c.ttl < 1 || c.ttl > MAX_TTL {
                return Err(ErrorCode::BadArguments);
            }
        } else if mode.is_ttl() {
            return Err(if self.cfg.ttl_enabled {
                ErrorCode::BadArguments
            } else {
                ErrorCode::Unimplemented
            });
        }
        let container =
            c.op == OpCode::CreateContainer || (in_multi && mode == CreateMode::Container);
        let parent_path = match path::parent(&c.path) {
            Some(p) if !c.path.contains('\0') => path::canonical(p),
            _ => return Err(ErrorCode::BadArguments),
        };
        // The open ACL (the usual one) comes out of the fix-up as it went in: no copy.
        let fixed = if c.acl[..] == self.open_acl[..] {
            None
        } else {
            Some(acl::fixup_with(&c.acl, ids, &self.cfg.auth).map_err(|_| ErrorCode::InvalidAcl)?)
        };
        let parent = self.facts(pending, parent_path).ok_or(ErrorCode::NoNode)?;
        if !acl::allowed(&parent.acl, perms::CREATE, ids) {
            return Err(ErrorCode::NoAuth);
        }
        let full = if mode.is_sequential() {
            // Sized once: `format!` would start from an empty string and grow it.
            let mut full = String::with_capacity(c.path.len() + 11);
            full.push_str(&c.path);
            let _ = write!(full, "{:010}", parent.child_creates);
            full
        } else {
            c.path.clone()
        };
        if !path::is_valid(&full) {
            return Err(ErrorCode::BadArguments);
        }
        if self.facts(pending, &full).is_some() {
            return Err(ErrorCode::NodeExists);
        }
        if let NodeKind::Ephemeral(_) = tree::kind_of(parent.owner) {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let owner = if container {
            CONTAINER_OWNER
        } else if c.op == OpCode::CreateTtl {
            TTL_MARKER | c.ttl
        } else if mode.is_ephemeral() {
            session
        } else {
            0
        };
        let parent_cversion = parent.child_creates.wrapping_add(1);
        if pending.multi {
            let after = Facts {
                children: parent.children + 1,
                child_creates: parent_cversion,
                ..parent
            };
            pending.note(parent_path, Some(after));
            let acl = match &fixed {
                None => self.open_acl.clone(),
                Some(fixed) => self.intern_acl(fixed.clone()),
            };
            let new = Facts {
                version: 0,
                acl,
                owner,
                children: 0,
                child_creates: 0,
            };
            pending.note(&full, Some(new));
        }
        let created = Created {
            extended: container || c.op == OpCode::CreateTtl,
        };
        let create2 = c.op == OpCode::Create2;
        let node = NewNode {
            path: full,
            data: c.data,
            acl: fixed.unwrap_or(c.acl),
        };
        Ok((
            create_record(node, owner, parent_cversion, create2),
            created,
        ))
    }

    /// delete (also as a multi sub-op).
    pub(crate) fn decide_delete(
        &self,
        pending: &mut Pending,
        ids: &[Id],
        path: String,
        version: i32,
    ) -> OpResult<Decided> {
        let p = path.as_str();
        let parent_path = match path::parent(p) {
            Some(pp) if !p.contains('\0') && !path::is_system(p) => path::canonical(pp),
            _ => return Err(ErrorCode::BadArguments),
        };
        let parent = self.facts(pending, parent_path).ok_or(ErrorCode::NoNode)?;
        if !acl::allowed(&parent.acl, perms::DELETE, ids) {
            return Err(ErrorCode::NoAuth);
        }
        let node = self.facts(pending, p).ok_or(ErrorCode::NoNode)?;
        check_version(version, node.version)?;
        if node.children > 0 {
            return Err(ErrorCode::NotEmpty);
        }
        if pending.multi {
            let after = Facts {
                children: parent.children.saturating_sub(1),
                ..parent
            };
            pending.note(parent_path, Some(after));
            pending.note(p, None);
        }
        let body = TxnBody::Delete(DeleteTxn { path });
        Ok((txn_type::DELETE, body))
    }

    /// The node at `p` as the multi so far left it, checked in ZooKeeper's order: a valid
    /// path, an existing node, `perm` for `ids`, and `version` (-1 = any) its data version.
    fn versioned_node(
        &self,
        pending: &Pending,
        ids: &[Id],
        p: &str,
        perm: i32,
        version: i32,
    ) -> OpResult<Facts> {
        if !path::is_valid(p) {
            return Err(ErrorCode::BadArguments);
        }
        let node = self.facts(pending, p).ok_or(ErrorCode::NoNode)?;
        if !acl::allowed(&node.acl, perm, ids) {
            return Err(ErrorCode::NoAuth);
        }
        check_version(version, node.version)?;
        Ok(node)
    }

    /// setData (also as a multi sub-op).
    pub(crate) fn decide_set_data(
        &self,
        pending: &mut Pending,
        ids: &[Id],
        path: String,
        data: Option<bytes::Bytes>,
        version: i32,
    ) -> OpResult<Decided> {
        let p = path.as_str();
        let node = self.versioned_node(pending, ids, p, perms::WRITE, version)?;
        let next = node.version.wrapping_add(1);
        pending.note(
            p,
            Some(Facts {
                version: next,
                ..node
            }),
        );
        let body = TxnBody::SetData(SetDataTxn {
            path,
            data,
            version: next,
        });
        Ok((txn_type::SET_DATA, body))
    }

    /// setACL.
    pub(crate) fn decide_set_acl(
        &self,
        ids: &[Id],
        p: &str,
        acl: &[Acl],
        version: i32,
    ) -> OpResult<Decided> {
        if !path::is_valid(p) {
            return Err(ErrorCode::BadArguments);
        }
        let acl = acl::fixup_with(acl, ids, &self.cfg.auth).map_err(|_| ErrorCode::InvalidAcl)?;
        let node = self.db.tree.get(p).ok_or(ErrorCode::NoNode)?;
        if !acl::allowed(node.acl, perms::ADMIN, ids) {
            return Err(ErrorCode::NoAuth);
        }
        check_version(version, node.aversion)?;
        let body = TxnBody::SetAcl(SetAclTxn {
            path: p.into(),
            acl,
            version: node.aversion.wrapping_add(1),
        });
        Ok((txn_type::SET_ACL, body))
    }

    /// check (multi sub-op only).
    pub(crate) fn decide_check(
        &self,
        pending: &Pending,
        ids: &[Id],
        p: &str,
        version: i32,
    ) -> OpResult<Decided> {
        self.versioned_node(pending, ids, p, perms::READ, version)?;
        let body = TxnBody::Check(CheckVersionTxn {
            path: p.into(),
            version,
        });
        Ok((txn_type::CHECK, body))
    }

    /// Closes a session (explicit close or expiry): one zxid for all its ephemerals, deleted
    /// in the order ZooKeeper deletes them.
    pub(crate) fn kill_session(
        &mut self,
        sid: i64,
        why: crate::SessionEnd,
        now: Now,
        out: &mut dyn Outbox,
    ) -> i64 {
        let conn = self.sessions.get(sid).and_then(|s| s.conn);
        if self.local_sessions.remove(&sid).is_some() {
            // A local session ends without a transaction (it has no ephemerals: its first
            // one would have made it global).
            self.sessions.remove(sid);
            out.fact(crate::Fact::SessionEnded {
                session: sid,
                conn,
                why,
                zxid: None,
                ephemerals: &[],
            });
            return self.db.zxid;
        }
        let zxid = self.next_zxid();
        let mut paths = Vec::new();
        if let Some(session) = self.sessions.remove(sid) {
            let mut owned: Vec<(&str, i64)> = session
                .ephemerals
                .iter()
                .filter_map(|p| {
                    let n = self.db.tree.get(p)?;
                    (n.owner == sid).then_some((&**p, n.czxid))
                })
                .collect();
            java_hash_set_order(&mut owned);
            paths = owned.into_iter().map(|(p, _)| p.to_string()).collect();
        }
        out.fact(crate::Fact::SessionEnded {
            session: sid,
            conn,
            why,
            zxid: Some(zxid),
            ephemerals: &paths,
        });
        let h = header(sid, 0, zxid, now.wall, txn_type::CLOSE_SESSION);
        let body = TxnBody::CloseSession(Some(CloseSessionTxn { paths }));
        self.commit(&h, &body, now, out);
        zxid
    }

    /// Deletes empty containers that have had a child and expired empty TTL nodes, each in
    /// a transaction of its own.
    pub(crate) fn reap(&mut self, now: Now, out: &mut dyn Outbox) {
        for p in &self.db.reapable {
            let is_ttl = self
                .db
                .tree
                .get(p)
                .is_some_and(|n| matches!(n.kind(), NodeKind::Ttl(_)));
            if is_ttl && !self.db.ttl_touched.contains_key(p) {
                self.db.ttl_touched.insert(p.clone(), now.mono);
            }
        }
        let due: Vec<String> = self
            .db
            .reapable
            .iter()
            .filter(|p| {
                self.db.tree.get(p).is_some_and(|n| {
                    n.num_children() == 0
                        && match n.kind() {
                            NodeKind::Container => n.child_creates != 0,
                            NodeKind::Ttl(ttl) => self
                                .db
                                .ttl_touched
                                .get(*p)
                                .is_some_and(|t| now.mono - t > ttl),
                            _ => false,
                        }
                })
            })
            .map(|p| p.to_string())
            .collect();
        for p in due {
            let zxid = self.next_zxid();
            tracing::debug!(path = %p, "reaping");
            let h = header(0, 0, zxid, now.wall, txn_type::DELETE_CONTAINER);
            let body = TxnBody::Delete(DeleteTxn { path: p });
            self.commit(&h, &body, now, out);
        }
        let tree = &self.db.tree;
        self.db.reapable.retain(|p| tree.get(p).is_some());
        let reapable = &self.db.reapable;
        self.db.ttl_touched.retain(|p, _| reapable.contains(p));
    }
}

/// The record of a create of `node` owned by `owner` (a session, or the container or TTL
/// marker) that leaves its parent's create count at `parent_cversion`; `create2` keeps the
/// request's type for an ordinary node.
pub(crate) fn create_record(
    node: NewNode,
    owner: i64,
    parent_cversion: i32,
    create2: bool,
) -> Decided {
    match tree::kind_of(owner) {
        NodeKind::Container => (
            txn_type::CREATE_CONTAINER,
            TxnBody::CreateContainer(CreateContainerTxn {
                node,
                parent_cversion,
            }),
        ),
        NodeKind::Ttl(ttl) => (
            txn_type::CREATE_TTL,
            TxnBody::CreateTtl(CreateTtlTxn {
                node,
                parent_cversion,
                ttl,
            }),
        ),
        kind => (
            if create2 {
                txn_type::CREATE2
            } else {
                txn_type::CREATE
            },
            TxnBody::Create(CreateTxn {
                node,
                ephemeral: matches!(kind, NodeKind::Ephemeral(_)),
                parent_cversion,
            }),
        ),
    }
}

/// Sorts a closed session's ephemerals (path, czxid) into the order ZooKeeper deletes them,
/// and so notifies their watchers: it copies the session's `java.util.HashSet` of paths into
/// a set sized for their count and walks it bucket by bucket. A path's bucket is its
/// `String.hashCode`, spread as `HashMap` does, masked by the table size; within a bucket of
/// the copy, paths keep the original set's order (its own buckets, at least 16 of them, then
/// insertion, which is creation).
pub(crate) fn java_hash_set_order(paths: &mut [(&str, i64)]) {
    fn spread(s: &str) -> u32 {
        let h = s
            .encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
        let h = h as u32;
        h ^ (h >> 16)
    }
    let n = paths.len();
    // The copy: HashMap's tableSizeFor((int) (n / 0.75 + 1)).
    let copy = ((n as f64 / 0.75 + 1.0) as usize)
        .next_power_of_two()
        .max(1);
    // The original grew from 16, doubling past three quarters full.
    let mut original = 16usize;
    while n > original * 3 / 4 {
        original *= 2;
    }
    paths.sort_by_cached_key(|&(p, czxid)| {
        let h = spread(p) as usize;
        (h & (copy - 1), h & (original - 1), czxid)
    });
}
