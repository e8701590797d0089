//! Write transactions: the checks of every write op in the real server's order, their effects on the tree, and commit/rollback (a failed multi leaves no trace).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use bytes::Bytes;
use zkd_protocol::{event_type, perms, Acl, CreateMode, ErrorCode, Id, OpCode, Stat};

use crate::data::tree::{self, AclList, Node, NodeKind, CONTAINER_OWNER, MAX_TTL, TTL_MARKER};
use crate::{auth::acl, data::path, Core, Now, Outbox};

/// One write transaction: a zxid, a timestamp, and what it changed.
pub struct Txn {
    pub zxid: i64,
    /// Wall time: the ctime/mtime written.
    pub time: i64,
    /// Session-clock time: when TTL nodes count as modified.
    pub mono: i64,
    /// Watch events in op order, each with the ACL that decides who may receive it.
    events: Vec<(i32, String, AclList)>,
    created: Vec<(String, i64)>,
    deleted: Vec<(String, i64)>,
    /// Nodes whose ACL changed (no watch event marks them).
    acl_changed: Vec<String>,
    /// Pre-transaction copies of touched nodes, kept only when the txn may roll back (multi).
    saved: Option<HashMap<String, Option<Node>>>,
    /// Whether `events` are kept: false when nothing could use them (no watch is set, no
    /// member lags behind, no TTL node is tracked), so a write copies no path for them.
    announce: bool,
}

/// What a successful create reports.
pub struct Created {
    pub path: String,
    pub stat: Stat,
    /// Container or TTL node (their multi result carries a Stat).
    pub extended: bool,
}

type OpResult<T> = Result<T, ErrorCode>;

fn check_version(expected: i32, actual: i32) -> OpResult<()> {
    if expected != -1 && expected != actual {
        Err(ErrorCode::BadVersion)
    } else {
        Ok(())
    }
}

impl Txn {
    pub fn new(zxid: i64, now: Now, undoable: bool) -> Txn {
        Txn {
            zxid,
            time: now.wall,
            mono: now.mono,
            events: Vec::new(),
            created: Vec::new(),
            deleted: Vec::new(),
            acl_changed: Vec::new(),
            saved: undoable.then(HashMap::new),
            announce: true,
        }
    }

    /// Records a watch event (when anything could use it).
    pub(crate) fn event(&mut self, event: i32, p: &str, acl: AclList) {
        if self.announce {
            self.events.push((event, p.to_string(), acl));
        }
    }

    /// Every path whose node this transaction changed, in op order, repeats included:
    /// created and deleted nodes with their parents, and nodes whose data or ACL changed.
    pub fn touched(&self) -> impl Iterator<Item = &str> {
        fn with_parent(entry: &(String, i64)) -> [Option<&str>; 2] {
            let p = entry.0.as_str();
            [Some(p), path::parent(p).map(path::canonical)]
        }
        self.created
            .iter()
            .chain(&self.deleted)
            .flat_map(with_parent)
            .flatten()
            .chain(
                self.events
                    .iter()
                    .filter(|(e, _, _)| *e == event_type::NODE_DATA_CHANGED)
                    .map(|(_, p, _)| p.as_str()),
            )
            .chain(self.acl_changed.iter().map(String::as_str))
    }

    /// The watch events in op order, each with the ACL that decides who may receive it.
    pub fn events(&self) -> &[(i32, String, AclList)] {
        &self.events
    }

    pub(crate) fn save(&mut self, tree: &tree::Tree, p: &str) {
        let p = path::canonical(p);
        if let Some(saved) = &mut self.saved {
            if !saved.contains_key(p) {
                saved.insert(p.to_string(), tree.get(p).map(|n| n.to_node()));
            }
        }
    }
}

impl Core {
    /// A transaction for one write request, keeping its watch events only when anything
    /// could use them.
    pub(crate) fn write_txn(&self, zxid: i64, now: Now) -> Txn {
        let mut txn = Txn::new(zxid, now, false);
        txn.announce = !self.watches.is_empty() || self.lagging() || !self.ttl_touched.is_empty();
        txn
    }

    fn intern_acl(&self, acl: Vec<Acl>) -> tree::AclList {
        if *acl == *self.open_acl {
            self.open_acl.clone()
        } else {
            Arc::from(acl)
        }
    }

    /// create, create2, createContainer and createTTL (also as multi sub-ops).
    pub(crate) fn txn_create(
        &mut self,
        txn: &mut Txn,
        session: i64,
        ids: &[Id],
        c: &zkd_protocol::Create,
        in_multi: bool,
    ) -> OpResult<Created> {
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
            Some(p) if !c.path.contains('\0') => p,
            _ => return Err(ErrorCode::BadArguments),
        };
        // The open ACL (the usual one) comes out of the fix-up as it went in: no copy.
        let acl = if c.acl[..] == self.open_acl[..] {
            self.open_acl.clone()
        } else {
            let fixed =
                acl::fixup_with(&c.acl, ids, &self.cfg.auth).map_err(|_| ErrorCode::InvalidAcl)?;
            self.intern_acl(fixed)
        };
        let parent_at = self.tree.locate(parent_path).ok_or(ErrorCode::NoNode)?;
        let parent = self.tree.at(&parent_at).ok_or(ErrorCode::NoNode)?;
        if !acl::allowed(parent.acl, perms::CREATE, ids) {
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
        let at = self.tree.locate_child(&parent_at, &full);
        if self.tree.at(&at).is_some() {
            return Err(ErrorCode::NodeExists);
        }
        if let NodeKind::Ephemeral(_) = parent.kind() {
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
        let parent_acl = parent.acl.clone();
        let parent_path = path::canonical(parent_path);
        txn.save(&self.tree, parent_path);
        txn.save(&self.tree, &full);
        let node = Node::new(c.data.clone(), acl.clone(), txn.zxid, txn.time, owner);
        let stat = node.stat();
        self.tree.insert_located(at, &full, node, txn.zxid);
        self.log_created(&full, c.op == OpCode::Create2);
        txn.created.push((full.clone(), owner));
        // Who may see the events: READ on the new node for NodeCreated, READ on the parent
        // for its NodeChildrenChanged.
        txn.event(event_type::NODE_CREATED, &full, acl);
        txn.event(event_type::NODE_CHILDREN_CHANGED, parent_path, parent_acl);
        Ok(Created {
            path: full,
            stat,
            extended: container || c.op == OpCode::CreateTtl,
        })
    }

    /// delete (also as a multi sub-op).
    pub(crate) fn txn_delete(
        &mut self,
        txn: &mut Txn,
        ids: &[Id],
        p: &str,
        version: i32,
    ) -> OpResult<()> {
        let parent_path = match path::parent(p) {
            Some(pp) if !p.contains('\0') && !path::is_system(p) => pp,
            _ => return Err(ErrorCode::BadArguments),
        };
        let parent_at = self.tree.locate(parent_path).ok_or(ErrorCode::NoNode)?;
        let parent = self.tree.at(&parent_at).ok_or(ErrorCode::NoNode)?;
        if !acl::allowed(parent.acl, perms::DELETE, ids) {
            return Err(ErrorCode::NoAuth);
        }
        let at = self.tree.locate_child(&parent_at, p);
        let node = self.tree.at(&at).ok_or(ErrorCode::NoNode)?;
        check_version(version, node.version)?;
        if node.num_children() > 0 {
            return Err(ErrorCode::NotEmpty);
        }
        self.delete_located(txn, p, path::canonical(parent_path), Some(at));
        self.log_deleted(p);
        Ok(())
    }

    /// Removes a childless node and records the events; shared by delete, session close and
    /// the reaper.
    pub(crate) fn delete_node(&mut self, txn: &mut Txn, p: &str, parent_path: &str) {
        self.delete_located(txn, p, parent_path, None);
    }

    /// [`Core::delete_node`], given the lookup of `p` when the caller already made it.
    fn delete_located(
        &mut self,
        txn: &mut Txn,
        p: &str,
        parent_path: &str,
        at: Option<tree::Located>,
    ) {
        txn.save(&self.tree, parent_path);
        txn.save(&self.tree, p);
        let removed = match at {
            Some(at) => self.tree.remove_located(at, p, txn.zxid),
            None => self.tree.remove(p, txn.zxid),
        };
        if let Some((node, acl)) = removed {
            txn.deleted.push((p.to_string(), node.owner));
            // NodeDeleted is filtered by the deleted node's ACL, the parent's
            // NodeChildrenChanged by the parent's.
            txn.event(event_type::NODE_DELETED, p, acl);
            let parent = match &at {
                Some(at) => self.tree.parent_at(at),
                None => self.tree.get(parent_path),
            };
            let parent_acl = parent.map_or_else(|| self.open_acl.clone(), |n| n.acl.clone());
            txn.event(event_type::NODE_CHILDREN_CHANGED, parent_path, parent_acl);
        }
    }

    /// setData (also as a multi sub-op).
    pub(crate) fn txn_set_data(
        &mut self,
        txn: &mut Txn,
        ids: &[Id],
        p: &str,
        data: &Option<Bytes>,
        version: i32,
    ) -> OpResult<Stat> {
        if !path::is_valid(p) {
            return Err(ErrorCode::BadArguments);
        }
        let at = self.tree.locate(p).ok_or(ErrorCode::NoNode)?;
        let node = self.tree.at(&at).ok_or(ErrorCode::NoNode)?;
        if !acl::allowed(node.acl, perms::WRITE, ids) {
            return Err(ErrorCode::NoAuth);
        }
        check_version(version, node.version)?;
        txn.save(&self.tree, p);
        // The tree copies the data into its own allocation (a slice of the received frame
        // would keep the connection's whole read buffer alive).
        let node = self
            .tree
            .set_data_then(&at, p, data.as_deref(), |m| {
                m.version = m.version.wrapping_add(1);
                m.mzxid = txn.zxid;
                m.mtime = txn.time;
            })
            .ok_or(ErrorCode::NoNode)?;
        let stat = node.stat();
        let acl = node.acl.clone();
        txn.event(event_type::NODE_DATA_CHANGED, p, acl);
        self.log_changed(p, false);
        Ok(stat)
    }

    /// setACL.
    pub(crate) fn txn_set_acl(
        &mut self,
        txn: &mut Txn,
        ids: &[Id],
        p: &str,
        acl: &[Acl],
        version: i32,
    ) -> OpResult<Stat> {
        if !path::is_valid(p) {
            return Err(ErrorCode::BadArguments);
        }
        let acl = acl::fixup_with(acl, ids, &self.cfg.auth).map_err(|_| ErrorCode::InvalidAcl)?;
        let node = self.tree.get(p).ok_or(ErrorCode::NoNode)?;
        if !acl::allowed(node.acl, perms::ADMIN, ids) {
            return Err(ErrorCode::NoAuth);
        }
        check_version(version, node.aversion)?;
        txn.save(&self.tree, p);
        let acl = self.intern_acl(acl);
        let meta = self.tree.set_acl(p, &acl).ok_or(ErrorCode::NoNode)?;
        meta.aversion = meta.aversion.wrapping_add(1);
        let stat = self.tree.stat(p).ok_or(ErrorCode::NoNode)?;
        txn.acl_changed.push(p.to_string());
        self.log_changed(p, true);
        Ok(stat)
    }

    /// check (multi sub-op only).
    pub(crate) fn txn_check(&self, ids: &[Id], p: &str, version: i32) -> OpResult<()> {
        if !path::is_valid(p) {
            return Err(ErrorCode::BadArguments);
        }
        let node = self.tree.get(p).ok_or(ErrorCode::NoNode)?;
        if !acl::allowed(node.acl, perms::READ, ids) {
            return Err(ErrorCode::NoAuth);
        }
        check_version(version, node.version)
    }

    /// Applies a transaction's bookkeeping and fires its watch events, in op order.
    pub(crate) fn commit(&mut self, txn: Txn, out: &mut dyn Outbox) {
        self.record_commit(&txn);
        for (p, owner) in &txn.created {
            match tree::kind_of(*owner) {
                NodeKind::Ephemeral(sid) => {
                    if let Some(s) = self.sessions.get_mut(sid) {
                        s.ephemerals.insert(p.as_str().into());
                    }
                }
                NodeKind::Container => {
                    self.reapable.insert(p.as_str().into());
                }
                NodeKind::Ttl(_) => {
                    self.reapable.insert(p.as_str().into());
                    self.ttl_touched.insert(p.as_str().into(), txn.mono);
                }
                NodeKind::Persistent => {}
            }
        }
        for (p, owner) in &txn.deleted {
            match tree::kind_of(*owner) {
                NodeKind::Ephemeral(sid) => {
                    if let Some(s) = self.sessions.get_mut(sid) {
                        s.ephemerals.remove(p.as_str());
                    }
                }
                NodeKind::Container | NodeKind::Ttl(_) => {
                    self.reapable.remove(p.as_str());
                    self.ttl_touched.remove(p.as_str());
                }
                NodeKind::Persistent => {}
            }
        }
        for (event, p, _) in &txn.events {
            if *event == event_type::NODE_DATA_CHANGED {
                if let Some(t) = self.ttl_touched.get_mut(p.as_str()) {
                    *t = txn.mono;
                }
            }
        }
        for (event, p, acl) in &txn.events {
            self.fire(out, *event, p, txn.zxid, acl);
        }
    }

    /// Undoes everything a failed multi changed.
    pub(crate) fn rollback(&mut self, txn: Txn) {
        if let Some(saved) = txn.saved {
            // Removals deepest first, then the saved copies shallowest first: every node
            // put back finds its parent, and no node is removed before its children.
            let depth = |p: &str| p.bytes().filter(|b| *b == b'/').count();
            let mut saved: Vec<(String, Option<Node>)> = saved.into_iter().collect();
            saved.sort_by_key(|(p, n)| match n {
                None => (0, usize::MAX - depth(p)),
                Some(_) => (1, depth(p)),
            });
            for (p, node) in saved {
                self.tree.restore(&p, node);
            }
        }
    }

    /// Closes a session (explicit close or expiry): one zxid for all its ephemerals.
    pub(crate) fn kill_session(&mut self, sid: i64, now: Now, out: &mut dyn Outbox) -> i64 {
        if self.local_sessions.remove(&sid) {
            // A read-only member's local session ends without a transaction (it has no
            // ephemerals: read-only members refuse writes).
            self.sessions.remove(sid);
            return self.zxid;
        }
        let zxid = self.next_zxid(now.mono);
        let mut txn = Txn::new(zxid, now, false);
        if let Some(session) = self.sessions.remove(sid) {
            let mut owned: Vec<(&str, i64)> = session
                .ephemerals
                .iter()
                .filter_map(|p| {
                    let n = self.tree.get(p)?;
                    (n.owner == sid).then_some((&**p, n.czxid))
                })
                .collect();
            java_hash_set_order(&mut owned);
            for (p, _) in owned {
                let parent = path::canonical(path::parent(p).unwrap_or("")).to_string();
                self.delete_node(&mut txn, p, &parent);
            }
        }
        let zxid = txn.zxid;
        if self.logging() {
            let paths = txn.deleted.iter().map(|(p, _)| p.clone()).collect();
            self.log_session_closed(sid, zxid, now.wall, paths);
        }
        self.commit(txn, out);
        zxid
    }

    /// Deletes empty containers that have had a child and expired empty TTL nodes.
    pub(crate) fn reap(&mut self, now: Now, out: &mut dyn Outbox) {
        for p in &self.reapable {
            let is_ttl = self
                .tree
                .get(p)
                .is_some_and(|n| matches!(n.kind(), NodeKind::Ttl(_)));
            if is_ttl && !self.ttl_touched.contains_key(p) {
                self.ttl_touched.insert(p.clone(), now.mono);
            }
        }
        let due: Vec<String> = self
            .reapable
            .iter()
            .filter(|p| {
                self.tree.get(p).is_some_and(|n| {
                    n.num_children() == 0
                        && match n.kind() {
                            NodeKind::Container => n.child_creates != 0,
                            NodeKind::Ttl(ttl) => {
                                self.ttl_touched.get(*p).is_some_and(|t| now.mono - t > ttl)
                            }
                            _ => false,
                        }
                })
            })
            .map(|p| p.to_string())
            .collect();
        for p in due {
            let zxid = self.next_zxid(now.mono);
            let mut txn = Txn::new(zxid, now, false);
            let parent = path::canonical(path::parent(&p).unwrap_or("")).to_string();
            tracing::debug!(path = %p, "reaping");
            self.delete_node(&mut txn, &p, &parent);
            self.log_reaped(&p, txn.zxid, now.wall);
            self.commit(txn, out);
        }
        self.reapable.retain(|p| self.tree.get(p).is_some());
        let reapable = &self.reapable;
        self.ttl_touched.retain(|p, _| reapable.contains(p));
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
