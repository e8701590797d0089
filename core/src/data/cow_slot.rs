//! The slot where the tree keeps the old versions a snapshot in progress still needs (copy
//! on write): before the tree changes a node the snapshot has not written yet, it hands the
//! node's old version to the [`CowLog`] in its [`CowSlot`]. The job that fills and empties
//! the log is `durability::snapshot_cow`.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::data::node::Node;
use crate::data::path;

/// The order a snapshot lists nodes in: depth first from the root, siblings by name. A
/// path's components compared one by one, so a parent comes right before its subtree.
pub fn walk_order(a: &str, b: &str) -> Ordering {
    let parts = |p| str::split(p, '/').filter(|c: &&str| !c.is_empty());
    parts(a).cmp(parts(b))
}

/// Where the tree keeps the [`CowLog`] of a snapshot in progress. A copy of the tree (a
/// replica) is not part of that snapshot, so it starts with an empty slot.
#[derive(Debug, Default)]
pub struct CowSlot(pub Option<Box<CowLog>>);

impl Clone for CowSlot {
    fn clone(&self) -> CowSlot {
        CowSlot(None)
    }
}

/// The old versions a snapshot in progress still needs, kept by the tree.
#[derive(Debug, Default)]
pub struct CowLog {
    pub(crate) job: u64,
    /// The last path written, in [`walk_order`]; changes at or before it need no copy.
    pub(crate) written: Option<String>,
    /// The version at the job's zxid of each node changed since, before the job wrote it:
    /// `None` when the node did not exist then.
    pub(crate) saved: HashMap<Box<str>, Option<Node>>,
    /// Per parent, names of children that existed at the job's zxid and have been changed
    /// (removed ones among them): the live child set no longer lists removed ones.
    pub(crate) changed_children: HashMap<Box<str>, Vec<Box<str>>>,
    /// While the job gathers a node's children over several slices: the index of the next
    /// child to visit ([`NIL`](crate::data::node::NIL) at the end). The tree moves it on
    /// when it unlinks that child.
    pub(crate) gather: Option<u32>,
}

impl CowLog {
    /// Called by the tree before it changes (or creates, or removes) the node at `path`;
    /// `current` is the node as it is now.
    pub fn before_change(&mut self, path: &str, current: Option<&Node>) {
        if !self.wants(path) {
            return;
        }
        if current.is_some() && path != "/" {
            let parent = path::canonical(path::parent(path).unwrap_or(""));
            self.changed_children
                .entry(parent.into())
                .or_default()
                .push(path::name(path).into());
        }
        self.saved.insert(path.into(), current.cloned());
    }

    /// Whether a change to `path` needs its old version kept (the tree copies the node only
    /// then: a node changed again and again, such as the parent of many deletes, is copied
    /// once).
    pub fn wants(&self, path: &str) -> bool {
        !self.saved.contains_key(path) && !self.is_written(path)
    }

    fn is_written(&self, path: &str) -> bool {
        self.written
            .as_deref()
            .is_some_and(|w| walk_order(path, w) != Ordering::Greater)
    }

    /// Called by the tree as it unlinks the child at index `child`, whose next sibling is
    /// `next`: a gathering walk about to visit it goes on to `next` instead. (A child removed
    /// that existed at the job's zxid is listed in `changed_children`, so the walk misses
    /// nothing by stepping over it.)
    pub(crate) fn unlinked(&mut self, child: u32, next: u32) {
        if self.gather == Some(child) {
            self.gather = Some(next);
        }
    }

    /// The child a gathering walk visits next, if one is under way.
    #[cfg(test)]
    pub(crate) fn gather_at(&self) -> Option<u32> {
        self.gather.filter(|&i| i != crate::data::node::NIL)
    }

    /// Old versions held right now (for the log line and tests).
    pub fn held(&self) -> usize {
        self.saved.len()
    }
}
