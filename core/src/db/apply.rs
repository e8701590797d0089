//! [`Db::apply`]: one transaction record (header and body, as the log stores it) applied to
//! the state. A live write decides what to do and then applies the record it decided on;
//! start-up replays the records the log holds; a lagging member's copy applies the same
//! records later. All three change the state here and nowhere else.

use std::sync::Arc;

use zkd_protocol::disk::{NewNode, TxnBody, TxnHeader};
use zkd_protocol::{event_type, Acl, Stat};

use super::Db;
use crate::data::node::{kind_of, NodeKind, CONTAINER_OWNER, MAX_TTL, TTL_MARKER};
use crate::data::path;
use crate::data::tree::{AclList, Node, Placed};

/// The Stats a transaction's operations left, in op order; one (a single write's) is kept
/// without an allocation.
#[derive(Debug, Default)]
pub struct Stats {
    first: Option<Stat>,
    rest: Vec<Stat>,
}

impl Stats {
    fn push(&mut self, stat: Stat) {
        if self.first.is_none() {
            self.first = Some(stat);
        } else {
            self.rest.push(stat);
        }
    }

    /// The first operation's (a single write's).
    pub fn first(&self) -> Option<Stat> {
        self.first
    }
}

impl IntoIterator for Stats {
    type Item = Stat;
    type IntoIter = std::iter::Chain<std::option::IntoIter<Stat>, std::vec::IntoIter<Stat>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

/// What applying one record did, for the caller to act on.
#[derive(Debug, Default)]
pub struct Applied {
    /// The Stat each create, setData, setACL and reconfig left its node with, in op order.
    pub stats: Stats,
    /// Watch events in op order, each with the ACL that decides who may receive it. Kept
    /// only when the state has watches to fire.
    pub events: Vec<(i32, String, AclList)>,
    /// Ephemeral nodes created and deleted, with their sessions.
    pub created: Vec<(String, i64)>,
    pub deleted: Vec<(String, i64)>,
    /// What the record asked that the state could not do (a log that disagrees with the
    /// state it is replayed onto). Empty for every record a live write produced.
    pub problems: Vec<String>,
}

impl Applied {
    fn event(&mut self, announce: bool, event: i32, p: &str, acl: AclList) {
        if announce {
            self.events.push((event, p.to_string(), acl));
        }
    }
}

/// The parent of `p`, `/` for a top-level node.
fn parent_of(p: &str) -> &str {
    path::canonical(path::parent(p).unwrap_or(""))
}

impl Db {
    /// Applies transaction `body` under header `h`: the zxid becomes the header's, the tree
    /// changes as the body says, and TTL nodes changed are stamped with `mono` (session-clock
    /// time). A multi holding an error sub-transaction (a multi that failed) changes nothing
    /// but the zxid. A close-session record deletes the nodes it lists that the session
    /// still owns.
    pub(crate) fn apply(&mut self, h: &TxnHeader, body: &TxnBody, mono: i64) -> Applied {
        let mut done = Applied::default();
        let announce = !self.watches.is_empty();
        self.zxid = h.zxid;
        match body {
            TxnBody::Multi(subs) => {
                if !subs.iter().any(|(_, b)| matches!(b, TxnBody::Error(_))) {
                    for (_, sub) in subs {
                        if matches!(sub, TxnBody::Multi(_)) {
                            done.problems.push("a multi inside a multi".into());
                            continue;
                        }
                        self.apply_op(h, sub, mono, announce, &mut done);
                    }
                }
            }
            body => self.apply_op(h, body, mono, announce, &mut done),
        }
        done
    }

    fn apply_op(
        &mut self,
        h: &TxnHeader,
        body: &TxnBody,
        mono: i64,
        announce: bool,
        done: &mut Applied,
    ) {
        match body {
            TxnBody::Create(c) => {
                let owner = if c.ephemeral { h.client_id } else { 0 };
                self.create(h, &c.node, owner, c.parent_cversion, mono, announce, done);
            }
            TxnBody::CreateContainer(c) => {
                let cv = c.parent_cversion;
                self.create(h, &c.node, CONTAINER_OWNER, cv, mono, announce, done);
            }
            TxnBody::CreateTtl(c) => {
                let owner = TTL_MARKER | (c.ttl & MAX_TTL);
                let cv = c.parent_cversion;
                self.create(h, &c.node, owner, cv, mono, announce, done);
            }
            TxnBody::Delete(d) => self.delete(&d.path, h.zxid, announce, done),
            TxnBody::SetData(s) | TxnBody::Reconfig(s) => {
                // The tree keeps a copy of its own: nothing here holds on to the buffer
                // the record came in (a frame, a log file).
                let changed = self.tree.set_data_then(&s.path, s.data.as_deref(), |n| {
                    n.version = s.version;
                    n.mzxid = h.zxid;
                    n.mtime = h.time;
                });
                let Some(n) = changed else {
                    done.problems.push(format!("setData of missing {}", s.path));
                    return;
                };
                done.stats.push(n.stat());
                if announce {
                    let acl = n.acl.clone();
                    done.event(announce, event_type::NODE_DATA_CHANGED, &s.path, acl);
                }
                if let Some(t) = self.ttl_touched.get_mut(path::canonical(&s.path)) {
                    *t = mono;
                }
            }
            TxnBody::SetAcl(s) => {
                let acl = self.shared_acl(&s.acl);
                let Some(n) = self.tree.set_acl(&s.path, &acl) else {
                    done.problems.push(format!("setACL of missing {}", s.path));
                    return;
                };
                n.aversion = s.version;
                if let Some(stat) = self.tree.stat(&s.path) {
                    done.stats.push(stat);
                }
            }
            TxnBody::CloseSession(close) => {
                let paths = close.as_ref().map_or(&[][..], |c| &c.paths[..]);
                for p in paths {
                    if self.tree.get(p).is_some_and(|n| n.owner == h.client_id) {
                        self.delete(p, h.zxid, announce, done);
                    }
                }
            }
            TxnBody::Multi(_) => done.problems.push("a multi inside a multi".into()),
            TxnBody::CreateSession(_) | TxnBody::Check(_) | TxnBody::Error(_) | TxnBody::Other => {}
        }
    }

    /// The open ACL's shared list when `acl` is it, else a list of its own.
    pub(crate) fn shared_acl(&self, acl: &[Acl]) -> AclList {
        if acl == &self.open_acl[..] {
            self.open_acl.clone()
        } else {
            Arc::from(acl.to_vec())
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        &mut self,
        h: &TxnHeader,
        new: &NewNode,
        owner: i64,
        parent_cversion: i32,
        mono: i64,
        announce: bool,
        done: &mut Applied,
    ) {
        let p = path::canonical(&new.path);
        let parent = parent_of(p);
        if !path::is_valid(p) {
            done.problems.push(format!("create of invalid path {p:?}"));
            return;
        }
        let acl = self.shared_acl(&new.acl);
        // The tree copies the data into a node of its own.
        let node = Node::new(new.data.clone(), acl, h.zxid, h.time, owner);
        match self.tree.create(p, node, h.zxid, parent_cversion) {
            Placed::Made(n) => {
                done.stats.push(n.stat());
                if announce {
                    let acl = n.acl.clone();
                    done.event(announce, event_type::NODE_CREATED, p, acl);
                }
            }
            // A replay may meet a node a fuzzy snapshot already holds: the parent's counters
            // moved on all the same.
            Placed::Existed => return,
            Placed::NoParent => {
                done.problems
                    .push(format!("create of {p} without its parent"));
                return;
            }
        }
        match kind_of(owner) {
            NodeKind::Container => {
                self.reapable.insert(p.into());
            }
            NodeKind::Ttl(_) => {
                self.reapable.insert(p.into());
                self.ttl_touched.insert(p.into(), mono);
            }
            NodeKind::Ephemeral(sid) => done.created.push((p.to_string(), sid)),
            NodeKind::Persistent => {}
        }
        self.children_changed(announce, parent, done);
    }

    /// Records `parent`'s NodeChildrenChanged, which its own ACL filters.
    fn children_changed(&self, announce: bool, parent: &str, done: &mut Applied) {
        if announce {
            let acl = self
                .tree
                .get(parent)
                .map_or_else(|| self.open_acl.clone(), |n| n.acl.clone());
            done.event(announce, event_type::NODE_CHILDREN_CHANGED, parent, acl);
        }
    }

    /// Deletes the childless node `p`. As in ZooKeeper's replay, the parent's pzxid moves on
    /// to the delete's zxid even when the node is gone already (a fuzzy snapshot caught the
    /// parent before the delete and the node after it), and never moves back.
    fn delete(&mut self, p: &str, zxid: i64, announce: bool, done: &mut Applied) {
        let p = path::canonical(p);
        let parent = parent_of(p);
        match self.tree.get(p).map(|n| n.num_children()) {
            None => {
                done.problems.push(format!("delete of missing {p}"));
                if let Some(pn) = self.tree.get_mut(parent) {
                    pn.pzxid = pn.pzxid.max(zxid);
                }
            }
            Some(children) if children > 0 => done
                .problems
                .push(format!("delete of {p}, which has children")),
            Some(_) => {
                // The tree moves the parent's pzxid on (never back).
                if let Some((node, acl)) = self.tree.remove(p, zxid) {
                    match node.kind() {
                        NodeKind::Container | NodeKind::Ttl(_) => {
                            self.reapable.remove(p);
                            self.ttl_touched.remove(p);
                        }
                        NodeKind::Ephemeral(sid) => done.deleted.push((p.to_string(), sid)),
                        NodeKind::Persistent => {}
                    }
                    // NodeDeleted is filtered by the deleted node's ACL, the parent's
                    // NodeChildrenChanged by the parent's.
                    done.event(announce, event_type::NODE_DELETED, p, acl);
                    self.children_changed(announce, parent, done);
                }
            }
        }
    }
}
