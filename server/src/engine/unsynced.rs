//! Which paths transactions written but not yet synced changed (`--fsync always`), so that a
//! read of such a path waits for the sync that covers it while every other read is answered
//! at once.
//!
//! The log writer records, for each transaction it counts as written, the paths it changed:
//! the node of a create, delete, setData or setACL, and for a create or delete also its
//! parent (the parent's child list, cversion and pzxid change), for each sub-transaction of
//! a multi and for each ephemeral node a closed or expired session removed. A transaction
//! whose paths are not known (one of a type this table does not read) makes every read wait
//! for it. The engine asks, before the core runs a client request, what the request reads
//! ([`read_needs`]): its path (getData, exists, getChildren, getACL, each path of a
//! multiRead), everything (sync, getAllChildrenNumber, getEphemerals, setWatches) or nothing
//! (writes, which wait for their own transaction anyway, pings, authentication, watch
//! removal). What that read depends on becomes a barrier in front of its reply.
//!
//! Each step costs what its own request or transaction holds: a write adds an entry per
//! path it changed, a read looks each of its paths up in a hash map, and the sync that
//! covers a transaction removes its entries (oldest first: they are kept in the order they
//! were written). So the table holds only what is written and not yet synced.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use zkd_protocol::disk::{TxnBody, TxnEntry};
use zkd_protocol::{OpCode, ReadScope, Reader, Request};

/// The paths changed by transactions written and not yet synced.
#[derive(Debug, Default)]
pub(crate) struct Unsynced {
    /// Each path with the number of the newest transaction that changed it.
    by_path: HashMap<Arc<str>, u64>,
    /// Every (transaction, path) recorded, oldest first, so a sync removes what it covered.
    order: VecDeque<(u64, Arc<str>)>,
    /// The newest transaction whose paths are not known: every read waits for it.
    everything: u64,
}

/// What a client request reads, for the barrier in front of its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reads {
    /// Nothing the tree holds (or the request is a write: its reply waits for its own
    /// transaction, which comes after every earlier one).
    Nothing,
    /// These paths (a node's data, Stat, ACL and child list).
    Paths(Vec<String>),
    /// Anything: wait for every transaction written so far.
    Everything,
}

impl Unsynced {
    /// Transaction `n` changed `path` (and nothing is synced up to `n` yet).
    fn touch(&mut self, n: u64, path: &str) {
        match self.by_path.get_mut(path) {
            Some(at) => {
                *at = n;
                let key = self
                    .by_path
                    .get_key_value(path)
                    .map(|(k, _)| k.clone())
                    .unwrap_or_else(|| Arc::from(path));
                self.order.push_back((n, key));
            }
            None => {
                let key: Arc<str> = Arc::from(path);
                self.by_path.insert(key.clone(), n);
                self.order.push_back((n, key));
            }
        }
    }

    /// Transaction `n` changed `path` and its parent's child list.
    fn touch_with_parent(&mut self, n: u64, path: &str) {
        self.touch(n, path);
        if let Some(parent) = parent(path) {
            self.touch(n, parent);
        }
    }

    /// Records what transaction `n` (its `TxnHeader` and body as logged) changed.
    pub(crate) fn wrote(&mut self, n: u64, txn: Bytes) {
        match TxnEntry::decode(txn) {
            Ok(entry) => self.wrote_body(n, &entry.body),
            Err(_) => self.everything = n,
        }
    }

    fn wrote_body(&mut self, n: u64, body: &TxnBody) {
        match body {
            TxnBody::Create(t) => self.touch_with_parent(n, &t.node.path),
            TxnBody::CreateTtl(t) => self.touch_with_parent(n, &t.node.path),
            TxnBody::CreateContainer(t) => self.touch_with_parent(n, &t.node.path),
            TxnBody::Delete(t) => self.touch_with_parent(n, &t.path),
            TxnBody::SetData(t) | TxnBody::Reconfig(t) => self.touch(n, &t.path),
            TxnBody::SetAcl(t) => self.touch(n, &t.path),
            TxnBody::CloseSession(Some(t)) => {
                for p in &t.paths {
                    self.touch_with_parent(n, p);
                }
            }
            TxnBody::Multi(subs) => {
                for (_, sub) in subs {
                    self.wrote_body(n, sub);
                }
            }
            TxnBody::Check(_) | TxnBody::CreateSession(_) | TxnBody::Error(_) => {}
            TxnBody::CloseSession(None) | TxnBody::Other => self.everything = n,
        }
    }

    /// The newest transaction above `synced` that what `reads` names depends on.
    pub(crate) fn needs(&self, reads: &Reads, written: u64, synced: u64) -> u64 {
        let newest = match reads {
            Reads::Nothing => 0,
            Reads::Everything => written,
            Reads::Paths(paths) => paths
                .iter()
                .filter_map(|p| self.by_path.get(p.as_str()).copied())
                .fold(self.everything, u64::max),
        };
        if newest > synced {
            newest
        } else {
            0
        }
    }

    /// Forgets up to `max` entries of transactions up to `synced`; returns whether any such
    /// entry is left.
    pub(crate) fn forget_synced(&mut self, synced: u64, max: usize) -> bool {
        for _ in 0..max {
            match self.order.front() {
                Some((n, _)) if *n <= synced => {}
                _ => return false,
            }
            if let Some((n, path)) = self.order.pop_front() {
                if self.by_path.get(&*path) == Some(&n) {
                    self.by_path.remove(&*path);
                }
            }
        }
        self.order.front().is_some_and(|(n, _)| *n <= synced)
    }

    /// Entries held (for tests: the table empties as syncs complete).
    #[cfg(test)]
    pub(crate) fn len(&self) -> (usize, usize) {
        (self.by_path.len(), self.order.len())
    }
}

/// The parent of an absolute path (`/` for a child of the root); `None` for the root.
fn parent(path: &str) -> Option<&str> {
    match path.rfind('/')? {
        0 if path.len() > 1 => Some("/"),
        0 => None,
        i => Some(&path[..i]),
    }
}

/// What the client request `frame` (header and body, as the core receives it) reads. A
/// frame that does not decode reads nothing: the core answers it with an error alone.
pub(crate) fn read_needs(frame: &Bytes) -> Reads {
    let Some(op) = OpCode::of_payload(frame) else {
        return Reads::Nothing;
    };
    match op.info().reads {
        ReadScope::Paths => {}
        ReadScope::Everything => return Reads::Everything,
        ReadScope::Nothing => return Reads::Nothing,
    }
    let mut r = Reader::new(frame.slice(8.min(frame.len())..));
    let paths = match Request::read(op, &mut r) {
        // Only a multiRead's read sub-operations read: one that names a write fails whole.
        Ok(Request::MultiRead(ops)) => ops
            .iter()
            .filter(|o| o.is_read())
            .map(|o| o.path().to_string())
            .collect(),
        Ok(req) => req.paths().into_iter().map(str::to_string).collect(),
        Err(_) => return Reads::Nothing,
    };
    Reads::Paths(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkd_protocol::disk::{txn_type, CreateTxn, NewNode, SetDataTxn, TxnHeader};
    use zkd_protocol::Jute;

    fn txn<T: Jute>(kind: i32, body: &T) -> Bytes {
        let mut b = zkd_protocol::to_bytes(&TxnHeader {
            client_id: 1,
            cxid: 1,
            zxid: 1,
            time: 0,
            txn_type: kind,
        })
        .to_vec();
        b.extend_from_slice(&zkd_protocol::to_bytes(body));
        b.into()
    }

    fn paths(p: &[&str]) -> Reads {
        Reads::Paths(p.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn parents_of_paths() {
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/"), None);
    }

    #[test]
    fn a_create_holds_its_node_and_parent_until_synced_and_nothing_else() {
        let mut u = Unsynced::default();
        let create = CreateTxn {
            node: NewNode {
                path: "/a/b".into(),
                data: None,
                acl: Vec::new(),
            },
            ephemeral: false,
            parent_cversion: 1,
        };
        u.wrote(1, txn(txn_type::CREATE, &create));
        let set = SetDataTxn {
            path: "/c".into(),
            data: None,
            version: 1,
        };
        u.wrote(2, txn(txn_type::SET_DATA, &set));
        assert_eq!(u.needs(&paths(&["/a/b"]), 2, 0), 1);
        assert_eq!(u.needs(&paths(&["/a"]), 2, 0), 1);
        assert_eq!(u.needs(&paths(&["/c", "/a"]), 2, 0), 2);
        assert_eq!(
            u.needs(&paths(&["/"]), 2, 0),
            0,
            "the root's child list is unchanged"
        );
        assert_eq!(u.needs(&paths(&["/a/b"]), 2, 1), 0, "synced");
        assert_eq!(u.needs(&Reads::Everything, 2, 1), 2);
        assert_eq!(u.needs(&Reads::Nothing, 2, 0), 0);
        assert!(!u.forget_synced(1, 100));
        assert_eq!(u.len(), (1, 1), "only /c is left");
        assert!(u.forget_synced(2, 0), "one entry left to forget");
        assert!(!u.forget_synced(2, 1));
        assert_eq!(u.len(), (0, 0));
    }

    #[test]
    fn a_path_rewritten_stays_until_its_newest_write_is_synced() {
        let mut u = Unsynced::default();
        for n in 1..=3 {
            let set = SetDataTxn {
                path: "/c".into(),
                data: None,
                version: n as i32,
            };
            u.wrote(n, txn(txn_type::SET_DATA, &set));
        }
        u.forget_synced(2, 100);
        assert_eq!(u.needs(&paths(&["/c"]), 3, 2), 3);
        assert_eq!(u.len(), (1, 1));
    }

    #[test]
    fn an_unknown_transaction_holds_every_read() {
        let mut u = Unsynced::default();
        u.wrote(4, Bytes::from_static(b"\x00\x01"));
        assert_eq!(u.needs(&paths(&["/x"]), 4, 3), 4);
        assert_eq!(u.needs(&paths(&["/x"]), 4, 4), 0);
    }

    /// A request as the core receives it (no length prefix).
    fn read_op(xid: i32, op: i32, path: &str) -> Bytes {
        use zkd_protocol::records::{PathWatchRequest, RequestHeader};
        let mut out = bytes::BytesMut::new();
        RequestHeader { xid, op }.write(&mut out);
        PathWatchRequest {
            path: path.into(),
            watch: true,
        }
        .write(&mut out);
        out.freeze()
    }

    #[test]
    fn requests_name_what_they_read() {
        assert_eq!(read_needs(&read_op(1, 4, "/a")), paths(&["/a"]));
        assert_eq!(read_needs(&read_op(1, 3, "/a")), paths(&["/a"]));
        assert_eq!(read_needs(&read_op(1, 12, "/p")), paths(&["/p"]));
        assert_eq!(read_needs(&read_op(1, 104, "/p")), Reads::Everything);
        assert_eq!(read_needs(&read_op(1, 103, "/p")), Reads::Everything);
        let multi_read = zkd_protocol::Request::MultiRead(vec![
            zkd_protocol::MultiOp::GetData(zkd_protocol::PathWatchRequest {
                path: "/a".into(),
                watch: false,
            }),
            zkd_protocol::MultiOp::GetChildren(zkd_protocol::PathWatchRequest {
                path: "/p".into(),
                watch: false,
            }),
        ])
        .to_frame(1);
        assert_eq!(read_needs(&multi_read.slice(4..)), paths(&["/a", "/p"]));
        assert_eq!(read_needs(&read_op(1, 2, "/p")), Reads::Nothing, "delete");
        assert_eq!(read_needs(&Bytes::from_static(b"\x00")), Reads::Nothing);
    }
}
