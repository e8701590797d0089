//! The in-memory znode tree: nodes with their exact Stat bookkeeping (docs/protocol.md, "Znodes").

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use zkd_protocol::{Acl, Stat};

use super::children_cache::ChildrenCache;
use super::path;
use super::snapshot_cow::CowSlot;

/// Owner value marking a container node.
pub const CONTAINER_OWNER: i64 = i64::MIN;
/// Top byte marking a TTL node; the TTL sits in the low 40 bits.
pub const TTL_MARKER: i64 = 0xFF00_0000_0000_0000u64 as i64;
/// Largest TTL accepted (2^40 - 1 ms).
pub const MAX_TTL: i64 = (1 << 40) - 1;

/// What kind of node an owner value denotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
}

pub fn kind_of(owner: i64) -> NodeKind {
    if owner == 0 {
        NodeKind::Persistent
    } else if owner == CONTAINER_OWNER {
        NodeKind::Container
    } else if owner & TTL_MARKER == TTL_MARKER {
        NodeKind::Ttl(owner & MAX_TTL)
    } else {
        NodeKind::Ephemeral(owner)
    }
}

/// A shared ACL list (most nodes share the same few lists).
pub type AclList = Arc<[Acl]>;

/// One znode.
#[derive(Debug, Clone)]
pub struct Node {
    pub data: Option<Bytes>,
    pub acl: AclList,
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub aversion: i32,
    pub pzxid: i64,
    /// Lifetime count of child creations (the visible cversion is derived from it).
    pub child_creates: i32,
    /// Session id, container marker or TTL encoding; 0 for persistent nodes.
    pub owner: i64,
    pub children: BTreeSet<Box<str>>,
}

impl Node {
    pub fn new(data: Option<Bytes>, acl: AclList, zxid: i64, time: i64, owner: i64) -> Node {
        Node {
            data,
            acl,
            czxid: zxid,
            mzxid: zxid,
            ctime: time,
            mtime: time,
            version: 0,
            aversion: 0,
            pzxid: zxid,
            child_creates: 0,
            owner,
            children: BTreeSet::new(),
        }
    }

    pub fn kind(&self) -> NodeKind {
        kind_of(self.owner)
    }

    /// The Stat clients see.
    pub fn stat(&self) -> Stat {
        let num_children = self.children.len() as i32;
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self
                .child_creates
                .wrapping_mul(2)
                .wrapping_sub(num_children),
            aversion: self.aversion,
            ephemeral_owner: match self.kind() {
                NodeKind::Ephemeral(s) => s,
                _ => 0,
            },
            data_length: self.data.as_ref().map_or(0, |d| d.len() as i32),
            num_children,
            pzxid: self.pzxid,
        }
    }
}

/// All znodes by full path.
#[derive(Debug, Clone)]
pub struct Tree {
    nodes: HashMap<Box<str>, Node>,
    data_bytes: u64,
    /// While a snapshot is being written: the old versions of nodes it has yet to write.
    pub(super) cow: CowSlot,
    /// Encoded child lists, dropped whenever a list changes (insert, remove, restore).
    children_enc: ChildrenCache,
}

impl Tree {
    /// The initial tree of a fresh server (docs/protocol.md, "Initial tree").
    pub fn new(open: AclList, read_only: AclList) -> Tree {
        let mut tree = Tree {
            nodes: HashMap::new(),
            data_bytes: 0,
            cow: CowSlot::default(),
            children_enc: ChildrenCache::default(),
        };
        let empty = || Some(Bytes::new());
        tree.nodes
            .insert("/".into(), Node::new(empty(), open.clone(), 0, 0, 0));
        for (path, acl) in [
            ("/zookeeper", open.clone()),
            ("/zookeeper/quota", open),
            ("/zookeeper/config", read_only),
        ] {
            tree.insert(path, Node::new(empty(), acl, 0, 0, 0), 0, false);
        }
        if let Some(config) = tree.nodes.get_mut("/zookeeper/config") {
            config.aversion = -1;
        }
        tree
    }

    /// A tree holding only `root`, to be filled with [`Tree::insert`] (loading from disk).
    pub fn from_root(root: Node) -> Tree {
        let mut nodes = HashMap::new();
        nodes.insert("/".into(), root);
        Tree {
            nodes,
            data_bytes: 0,
            cow: CowSlot::default(),
            children_enc: ChildrenCache::default(),
        }
    }

    /// Every node, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Node)> {
        self.nodes.iter().map(|(k, v)| (&**k, v))
    }

    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path::canonical(path))
    }

    pub fn get_mut(&mut self, path: &str) -> Option<&mut Node> {
        let path = path::canonical(path);
        self.keep_old(path);
        self.nodes.get_mut(path)
    }

    /// Every change to a node goes through here first: a snapshot being written keeps the
    /// version it has yet to write.
    fn keep_old(&mut self, path: &str) {
        if let Some(cow) = &mut self.cow.0 {
            cow.before_change(path, self.nodes.get(path));
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Approximate bytes of data and paths, as `mntr` reports.
    pub fn approximate_data_size(&self) -> u64 {
        self.data_bytes
    }

    /// Inserts `node` at `path` under its existing parent, bumping the parent's create counter
    /// and pzxid when `count` is set (always, except for the initial tree).
    pub fn insert(&mut self, path: &str, node: Node, zxid: i64, count: bool) {
        let parent = path::canonical(path::parent(path).unwrap_or(""));
        self.keep_old(parent);
        self.keep_old(path);
        self.data_bytes += (path.len() + node.data.as_ref().map_or(0, |d| d.len())) as u64;
        self.children_enc.invalidate(parent);
        if let Some(p) = self.nodes.get_mut(parent) {
            p.children.insert(path::name(path).into());
            if count {
                p.child_creates = p.child_creates.wrapping_add(1);
                p.pzxid = zxid;
            }
        }
        self.nodes.insert(path.into(), node);
    }

    /// Removes the node at `path` (which must have no children) and updates its parent.
    pub fn remove(&mut self, path: &str, zxid: i64) -> Option<Node> {
        let parent = path::canonical(path::parent(path).unwrap_or(""));
        self.keep_old(parent);
        self.keep_old(path);
        let node = self.nodes.remove(path)?;
        self.data_bytes = self
            .data_bytes
            .saturating_sub((path.len() + node.data.as_ref().map_or(0, |d| d.len())) as u64);
        self.children_enc.invalidate(parent);
        if let Some(p) = self.nodes.get_mut(parent) {
            p.children.remove(path::name(path));
            p.pzxid = zxid;
        }
        Some(node)
    }

    /// Replaces a node's data, keeping the size accounting right.
    pub fn set_data(&mut self, path: &str, data: Option<Bytes>) -> Option<&mut Node> {
        self.keep_old(path);
        let node = self.nodes.get_mut(path)?;
        let old = node.data.as_ref().map_or(0, |d| d.len()) as u64;
        let new = data.as_ref().map_or(0, |d| d.len()) as u64;
        self.data_bytes = self.data_bytes.saturating_sub(old) + new;
        node.data = data;
        Some(node)
    }

    /// Puts back a saved copy of a node (or removes it), for rolling back a failed multi.
    pub fn restore(&mut self, path: &str, saved: Option<Node>) {
        self.keep_old(path);
        self.children_enc.invalidate(path::canonical(path));
        let cur = self.nodes.remove(path);
        let size = |p: &str, n: &Node| (p.len() + n.data.as_ref().map_or(0, |d| d.len())) as u64;
        if let Some(c) = &cur {
            self.data_bytes = self.data_bytes.saturating_sub(size(path, c));
        }
        if let Some(n) = saved {
            self.data_bytes += size(path, &n);
            self.nodes.insert(path.into(), n);
        }
    }

    /// The child list of the node at `path` as a getChildren reply encodes it (count, then
    /// each name), shared by every reply until the list changes; `None` if no such node.
    pub fn encoded_children(&mut self, path: &str) -> Option<Bytes> {
        let path = path::canonical(path);
        let node = self.nodes.get(path)?;
        Some(self.children_enc.encoded(
            path,
            node.children.len(),
            node.children.iter().map(|c| &**c),
        ))
    }

    /// Every path, for invariant checks in tests.
    #[cfg(test)]
    pub fn nodes_for_tests(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(|k| &**k)
    }

    /// Number of nodes strictly below `path`.
    pub fn descendants(&self, path: &str) -> i32 {
        let Some(node) = self.get(path) else { return 0 };
        let mut count = 0i32;
        let mut stack: Vec<String> = node
            .children
            .iter()
            .map(|c| path::join(path::canonical(path), c))
            .collect();
        while let Some(p) = stack.pop() {
            count = count.saturating_add(1);
            if let Some(n) = self.nodes.get(p.as_str()) {
                stack.extend(n.children.iter().map(|c| path::join(&p, c)));
            }
        }
        count
    }
}
