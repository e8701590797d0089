//! The core's durable state in ZooKeeper's on-disk format: exporting the tree (data, Stats,
//! ACLs), the zxid and the sessions as a snapshot, importing one, and replaying the
//! transaction records a log holds (the records themselves are written by `txn_record.rs`).
//! No I/O happens here.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use zkd_protocol::disk::snapshot::{SnapNode, SnapshotImage};
use zkd_protocol::disk::{CloseSessionTxn, TxnBody, TxnEntry};

use crate::data::tree::{AclList, Node, NodeKind, Tree};
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
        self.db.reapable.clear();
        for (p, node) in tree.iter() {
            match node.kind() {
                NodeKind::Ephemeral(sid) => match self.sessions.get_mut(sid) {
                    Some(s) => {
                        s.ephemerals.insert(p.into());
                    }
                    None => orphans.push(p.to_string()),
                },
                NodeKind::Container | NodeKind::Ttl(_) => {
                    self.db.reapable.insert(p.into());
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
        self.db.tree = tree;
        self.db.zxid = zxid;
        Ok(ImportReport {
            nodes: self.db.tree.len(),
            sessions: image.sessions.len(),
            orphans_removed: orphans.len(),
        })
    }

    /// Applies one logged transaction (loading a data directory) with
    /// [`Db::apply`](crate::db::Db::apply), as a live write applies it. Transactions at or
    /// before the current zxid are skipped. Sessions created here start their timeout at
    /// `now_ms`.
    pub fn replay(&mut self, entry: &TxnEntry, now_ms: i64) -> Replayed {
        let h = &entry.header;
        if h.zxid <= self.db.zxid {
            return Replayed::Skipped;
        }
        let closed;
        let body = match &entry.body {
            TxnBody::CreateSession(s) => {
                self.sessions
                    .restore(h.client_id, i64::from(s.timeout), now_ms);
                &entry.body
            }
            TxnBody::CloseSession(close) => {
                // The session's own ephemerals, and those the record lists (an older
                // writer lists none).
                let mut paths: BTreeSet<Box<str>> = self
                    .sessions
                    .remove(h.client_id)
                    .map(|s| s.ephemerals)
                    .unwrap_or_default();
                if let Some(c) = close {
                    paths.extend(c.paths.iter().map(|p| p.as_str().into()));
                }
                let paths = paths.into_iter().map(String::from).collect();
                closed = TxnBody::CloseSession(Some(CloseSessionTxn { paths }));
                &closed
            }
            TxnBody::Multi(subs)
                if subs.iter().any(|(_, b)| {
                    matches!(
                        b,
                        TxnBody::CreateSession(_) | TxnBody::CloseSession(_) | TxnBody::Multi(_)
                    )
                }) =>
            {
                self.db.zxid = h.zxid;
                return Replayed::Inconsistent(
                    "session or multi transaction inside a multi".into(),
                );
            }
            body => body,
        };
        let applied = self.apply_main(h, body, now_ms);
        if applied.problems.is_empty() {
            Replayed::Applied
        } else {
            Replayed::Inconsistent(applied.problems.join("; "))
        }
    }

    /// Number of nodes in the tree.
    pub fn node_count(&self) -> usize {
        self.db.tree.len()
    }
}
