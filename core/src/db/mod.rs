//! The state a transaction changes, held as one value: the tree, the watch tables set on
//! it, the last zxid applied, and the containers and TTL nodes the reaper checks with their
//! TTL stamps. The server's state is one `Db`; a lagging ensemble member's view is another.

mod apply;
#[cfg(test)]
mod apply_tests;

use std::collections::{BTreeSet, HashMap};

pub use apply::Applied;

use crate::data::tree::{AclList, Tree};
use crate::watch::watches::Watches;

/// One copy of the replicated state. [`Db::apply`] is the only way its tree changes.
pub(crate) struct Db {
    pub(crate) tree: Tree,
    /// Watches set by the clients that read this copy.
    pub(crate) watches: Watches,
    /// The last zxid applied.
    pub(crate) zxid: i64,
    /// Containers and TTL nodes, checked by the reaper.
    pub(crate) reapable: BTreeSet<Box<str>>,
    /// When each TTL node was last modified, on the session clock (its Stat's mtime is
    /// wall time, which may step). A TTL node missing here is stamped at the next reap.
    pub(crate) ttl_touched: HashMap<Box<str>, i64>,
    /// The open ACL, shared by every node that has it.
    pub(crate) open_acl: AclList,
}

impl Db {
    /// A fresh state: the root and `/zookeeper` nodes of a new server, zxid 0.
    pub(crate) fn new(open_acl: AclList, read_acl: AclList) -> Db {
        Db {
            tree: Tree::new(open_acl.clone(), read_acl),
            watches: Watches::default(),
            zxid: 0,
            reapable: BTreeSet::new(),
            ttl_touched: HashMap::new(),
            open_acl,
        }
    }

    /// A copy of this state without its watches, sharing the tree's storage until either
    /// side changes it ([`Tree::fork`]).
    pub(crate) fn fork(&self) -> Db {
        Db {
            tree: self.tree.fork(),
            watches: Watches::default(),
            zxid: self.zxid,
            reapable: self.reapable.clone(),
            ttl_touched: self.ttl_touched.clone(),
            open_acl: self.open_acl.clone(),
        }
    }
}
