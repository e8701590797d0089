//! The core's durable state in ZooKeeper's on-disk format: exporting the tree (data, Stats,
//! ACLs), the zxid and the sessions as a snapshot, importing one, and replaying the
//! transaction records a log holds (the records themselves are written by `txn_record.rs`).
//! No I/O happens here.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use zkd_protocol::disk::snapshot::{SnapNode, SnapshotImage};
use zkd_protocol::disk::{NewNode, TxnBody, TxnEntry, TxnHeader};
use zkd_protocol::Acl;

use crate::data::tree::{self, AclList, Node, NodeKind, Tree, CONTAINER_OWNER, TTL_MARKER};
use crate::durability::snapshot_cow::Step;
use crate::{data::path, Core};

/// What an import found besides the tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    pub nodes: usize,
    pub sessions: usize,
    /// Ephemeral nodes whose session was not in the snapshot; removed, as ZooKeeper does.
    pub orphans_removed: usize,
}

/// Why a replayed transaction was not applied as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replayed {
    Applied,
    /// Its zxid is not after the state's zxid (already contained).
    Skipped,
    /// Applied as far as the tree allowed; the message says what did not fit.
    Inconsistent(String),
}

fn node_from(n: &SnapNode, acl: AclList) -> Node {
    Node {
        // Own allocation: a slice would keep the whole file buffer alive.
        data: n.data.as_ref().map(|d| Bytes::copy_from_slice(d)),
        acl,
        czxid: n.stat.czxid,
        mzxid: n.stat.mzxid,
        ctime: n.stat.ctime,
        mtime: n.stat.mtime,
        version: n.stat.version,
        aversion: n.stat.aversion,
        pzxid: n.stat.pzxid,
        child_creates: n.stat.cversion,
        owner: n.stat.ephemeral_owner,
        num_children: 0,
    }
}

impl Core {
    /// Encodes the whole state as a snapshot file at once; returns the zxid it holds and its
    /// bytes. Takes time proportional to the tree: a server serving clients writes
    /// snapshots in slices instead ([`Core::begin_snapshot`]).
    pub fn export_snapshot(&mut self) -> (i64, Bytes) {
        let mut job = self.begin_snapshot();
        loop {
            match self.snapshot_step(&mut job, usize::MAX) {
                Ok(Step::More) => {}
                Ok(Step::Done) => {
                    if let Some(bytes) = job.finish() {
                        return (job.zxid(), bytes);
                    }
                }
                Err(e) => unreachable!("a snapshot written at once cannot be superseded: {e}"),
            }
        }
    }

    /// Replaces the tree, sessions and zxid with a snapshot's. Meant for a core that has no
    /// connections yet (server start). Sessions restart their timeout from `now_ms`.
    pub fn import_snapshot(
        &mut self,
        image: &SnapshotImage,
        zxid: i64,
        now_ms: i64,
    ) -> Result<ImportReport, String> {
        let mut acls: HashMap<i64, AclList> = HashMap::new();
        for (index, list) in &image.acls {
            let shared = if list[..] == self.open_acl[..] {
                self.open_acl.clone()
            } else {
                Arc::from(list.clone())
            };
            acls.insert(*index, shared);
        }
        let acl_of = |n: &SnapNode| -> Result<AclList, String> {
            if n.acl == zkd_protocol::disk::snapshot::OPEN_ACL_INDEX {
                return Ok(self.open_acl.clone());
            }
            acls.get(&n.acl).cloned().ok_or_else(|| {
                format!(
                    "node {:?} refers to ACL {} which the ACL cache does not hold",
                    n.path, n.acl
                )
            })
        };
        let Some(root) = image.nodes.first().filter(|n| n.path.is_empty()) else {
            return Err("the snapshot does not start with the root node".into());
        };
        let mut tree = Tree::from_root(node_from(root, acl_of(root)?));
        for n in &image.nodes[1..] {
            if !path::is_valid(&n.path) {
                return Err(format!("invalid node path {:?}", n.path));
            }
            if !tree.insert(&n.path, node_from(n, acl_of(n)?), 0, false) {
                return Err(format!("node {:?} comes before its parent", n.path));
            }
        }

        for (id, timeout) in &image.sessions {
            self.sessions.restore(*id, i64::from(*timeout), now_ms);
        }
        let mut orphans = Vec::new();
        self.reapable.clear();
        for (p, node) in tree.iter() {
            match node.kind() {
                NodeKind::Ephemeral(sid) => match self.sessions.get_mut(sid) {
                    Some(s) => {
                        s.ephemerals.insert(p.into());
                    }
                    None => orphans.push(p.to_string()),
                },
                NodeKind::Container | NodeKind::Ttl(_) => {
                    self.reapable.insert(p.into());
                }
                NodeKind::Persistent => {}
            }
        }
        for p in &orphans {
            let parent = path::canonical(path::parent(p).unwrap_or("")).to_string();
            let pzxid = tree.get(&parent).map(|n| n.pzxid);
            tree.remove(p, 0);
            if let (Some(pz), Some(n)) = (pzxid, tree.get_mut(&parent)) {
                n.pzxid = pz;
            }
        }
        self.tree = tree;
        self.zxid = zxid;
        Ok(ImportReport {
            nodes: self.tree.len(),
            sessions: image.sessions.len(),
            orphans_removed: orphans.len(),
        })
    }

    /// Applies one logged transaction (loading a data directory). Transactions at or before
    /// the current zxid are skipped. Sessions created here start their timeout at `now_ms`.
    pub fn replay(&mut self, entry: &TxnEntry, now_ms: i64) -> Replayed {
        let h = &entry.header;
        if h.zxid <= self.zxid {
            return Replayed::Skipped;
        }
        self.zxid = h.zxid;
        let mut problems = Vec::new();
        match &entry.body {
            TxnBody::CreateSession(s) => {
                self.sessions
                    .restore(h.client_id, i64::from(s.timeout), now_ms);
            }
            TxnBody::CloseSession(close) => {
                let mut paths: BTreeSet<Box<str>> = self
                    .sessions
                    .remove(h.client_id)
                    .map(|s| s.ephemerals)
                    .unwrap_or_default();
                if let Some(c) = close {
                    paths.extend(c.paths.iter().map(|p| p.as_str().into()));
                }
                for p in paths {
                    if self.tree.get(&p).is_some_and(|n| n.owner == h.client_id) {
                        self.replay_delete(&p, h.zxid, &mut problems);
                    }
                }
            }
            TxnBody::Multi(subs) => {
                let failed = subs.iter().any(|(_, b)| matches!(b, TxnBody::Error(_)));
                if !failed {
                    for (_, body) in subs {
                        self.replay_op(h, body, &mut problems);
                    }
                }
            }
            body => self.replay_op(h, body, &mut problems),
        }
        if problems.is_empty() {
            Replayed::Applied
        } else {
            Replayed::Inconsistent(problems.join("; "))
        }
    }

    fn replay_op(&mut self, h: &TxnHeader, body: &TxnBody, problems: &mut Vec<String>) {
        let zxid = h.zxid;
        match body {
            TxnBody::Create(c) => {
                let owner = if c.ephemeral { h.client_id } else { 0 };
                self.replay_create(h, &c.node, owner, c.parent_cversion, problems)
            }
            TxnBody::CreateContainer(c) => {
                self.replay_create(h, &c.node, CONTAINER_OWNER, c.parent_cversion, problems)
            }
            TxnBody::CreateTtl(c) => {
                let owner = TTL_MARKER | (c.ttl & tree::MAX_TTL);
                self.replay_create(h, &c.node, owner, c.parent_cversion, problems)
            }
            TxnBody::Delete(d) => self.replay_delete(&d.path, zxid, problems),
            TxnBody::SetData(s) => {
                let data = s.data.as_ref().map(|d| Bytes::copy_from_slice(d));
                match self.tree.set_data(&s.path, data) {
                    Some(n) => {
                        n.version = s.version;
                        n.mzxid = zxid;
                        n.mtime = h.time;
                    }
                    None => problems.push(format!("setData of missing {}", s.path)),
                }
            }
            TxnBody::SetAcl(s) => {
                let acl = self.shared_acl(&s.acl);
                match self.tree.set_acl(&s.path, &acl) {
                    Some(n) => {
                        n.aversion = s.version;
                    }
                    None => problems.push(format!("setACL of missing {}", s.path)),
                }
            }
            TxnBody::CreateSession(_) | TxnBody::CloseSession(_) | TxnBody::Multi(_) => {
                problems.push("session or multi transaction inside a multi".into())
            }
            TxnBody::Check(_) | TxnBody::Error(_) | TxnBody::Other => {}
        }
    }

    fn shared_acl(&self, acl: &[Acl]) -> AclList {
        if acl == &self.open_acl[..] {
            self.open_acl.clone()
        } else {
            Arc::from(acl.to_vec())
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn replay_create(
        &mut self,
        h: &TxnHeader,
        new: &NewNode,
        owner: i64,
        parent_cversion: i32,
        problems: &mut Vec<String>,
    ) {
        let (p, data, acl) = (new.path.as_str(), &new.data, &new.acl);
        let parent = path::canonical(path::parent(p).unwrap_or("")).to_string();
        if !path::is_valid(p) || self.tree.get(&parent).is_none() {
            problems.push(format!("create of {p} without its parent"));
            return;
        }
        if self.tree.get(p).is_none() {
            let node = Node::new(
                data.as_ref().map(|d| Bytes::copy_from_slice(d)),
                self.shared_acl(acl),
                h.zxid,
                h.time,
                owner,
            );
            self.tree.insert(p, node, h.zxid, false);
            match tree::kind_of(owner) {
                NodeKind::Ephemeral(sid) => {
                    if let Some(s) = self.sessions.get_mut(sid) {
                        s.ephemerals.insert(p.into());
                    }
                }
                NodeKind::Container | NodeKind::Ttl(_) => {
                    self.reapable.insert(p.into());
                }
                NodeKind::Persistent => {}
            }
        }
        if let Some(pn) = self.tree.get_mut(&parent) {
            if parent_cversion > pn.child_creates {
                pn.child_creates = parent_cversion;
            }
            if h.zxid > pn.pzxid {
                pn.pzxid = h.zxid;
            }
        }
    }

    fn replay_delete(&mut self, p: &str, zxid: i64, problems: &mut Vec<String>) {
        // As ZooKeeper's replay: the parent's pzxid moves on to the delete's zxid even when
        // the child is gone already (a fuzzy snapshot caught the parent before the delete
        // and the child after it), and never moves back.
        let parent = path::canonical(path::parent(p).unwrap_or("")).to_string();
        let parent_pzxid = self.tree.get(&parent).map(|n| n.pzxid.max(zxid));
        self.replay_delete_node(p, zxid, problems);
        if let (Some(pzxid), Some(pn)) = (parent_pzxid, self.tree.get_mut(&parent)) {
            pn.pzxid = pzxid;
        }
    }

    fn replay_delete_node(&mut self, p: &str, zxid: i64, problems: &mut Vec<String>) {
        match self.tree.get(p) {
            None => problems.push(format!("delete of missing {p}")),
            Some(n) if n.num_children() > 0 => {
                problems.push(format!("delete of {p}, which has children"))
            }
            Some(_) => {
                if let Some((node, _)) = self.tree.remove(p, zxid) {
                    match node.kind() {
                        NodeKind::Ephemeral(sid) => {
                            if let Some(s) = self.sessions.get_mut(sid) {
                                s.ephemerals.remove(p);
                            }
                        }
                        NodeKind::Container | NodeKind::Ttl(_) => {
                            self.reapable.remove(p);
                        }
                        NodeKind::Persistent => {}
                    }
                }
            }
        }
    }

    /// Number of nodes in the tree.
    pub fn node_count(&self) -> usize {
        self.tree.len()
    }
}
