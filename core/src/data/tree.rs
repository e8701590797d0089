//! The in-memory znode tree: nodes with their exact Stat bookkeeping (docs/protocol.md, "Znodes").
//!
//! Nodes live in a slab of fixed-size chunks, addressed by `u32` index. A node stores its
//! name (not its full path) together with its data in one allocation, its parent's index,
//! its children as a linked list of indices, and its ACL as an index into a shared table.
//! Paths are found through a hash table of indices keyed by the path's hash (each entry keeps
//! a 32-bit key of it, so growing the table never walks a path again) and checked by
//! walking the name/parent links up to the root.

use std::ops::Deref;

use bytes::Bytes;
use hashbrown::HashTable;
use zkd_protocol::Stat;

use crate::data::acl_table::AclTable;
use crate::data::children_cache::ChildrenCache;
use crate::data::cow_slot::CowSlot;
use crate::data::keyed::{path_hasher, PathHasher};
pub use crate::data::node::{
    kind_of, AclList, Meta, Node, NodeKind, CONTAINER_OWNER, MAX_TTL, TTL_MARKER,
};
pub(crate) use crate::data::node::{NIL, ROOT};
use crate::data::path;
use crate::data::tree_slab::{
    child_indices, has_path, hash_path, key_of, sorted_children, spread, Slab, Slot,
};
use crate::data::work;

/// A node as the tree holds it, borrowed: its bookkeeping (through `Deref`), ACL list and
/// data.
#[derive(Debug, Clone, Copy)]
pub struct NodeRef<'a> {
    meta: &'a Meta,
    pub acl: &'a AclList,
    pub data: Option<&'a [u8]>,
    num_children: u32,
}

impl Deref for NodeRef<'_> {
    type Target = Meta;
    fn deref(&self) -> &Meta {
        self.meta
    }
}

impl NodeRef<'_> {
    /// The Stat clients see.
    pub fn stat(&self) -> Stat {
        self.meta
            .stat(self.data.map_or(0, <[u8]>::len), self.num_children)
    }

    pub fn num_children(&self) -> usize {
        self.num_children as usize
    }

    /// The data as an owned buffer (for a reply).
    pub fn data_bytes(&self) -> Option<Bytes> {
        work::add(self.data.map_or(0, <[u8]>::len));
        self.data.map(Bytes::copy_from_slice)
    }

    /// An owned copy.
    pub fn to_node(self) -> Node {
        let m = self.meta;
        Node {
            data: self.data_bytes(),
            acl: self.acl.clone(),
            czxid: m.czxid,
            mzxid: m.mzxid,
            ctime: m.ctime,
            mtime: m.mtime,
            version: m.version,
            aversion: m.aversion,
            pzxid: m.pzxid,
            child_creates: m.child_creates,
            owner: m.owner,
        }
    }
}

/// What [`Tree::create`] did.
pub enum Placed<'a> {
    /// Made the node, given as it is now.
    Made(NodeRef<'a>),
    /// A node was there already; it stays as it was.
    Existed,
    /// There is no parent node (or the path is the root's).
    NoParent,
}

/// All znodes.
#[derive(Debug, Clone)]
pub struct Tree {
    slab: Slab,
    /// Node indices by the hash of their path, each with its path's key (see [`hash_path`]).
    index: HashTable<(u32, u32)>,
    hasher: PathHasher,
    acls: AclTable,
    data_bytes: u64,
    /// While a snapshot is being written: the old versions of nodes it has yet to write.
    pub(crate) cow: CowSlot,
    /// Encoded child lists: any change to a node's children drops its list (encoded again
    /// by the next getChildren).
    children_enc: ChildrenCache,
}

impl Tree {
    /// The initial tree of a fresh server (docs/protocol.md, "Initial tree").
    pub fn new(open: AclList, read_only: AclList) -> Tree {
        let empty = || Some(Bytes::new());
        let mut tree = Tree::from_root(Node::new(empty(), open.clone(), 0, 0, 0));
        for (path, acl) in [
            ("/zookeeper", open.clone()),
            ("/zookeeper/quota", open),
            ("/zookeeper/config", read_only),
        ] {
            tree.insert(path, Node::new(empty(), acl, 0, 0, 0), 0, false);
        }
        if let Some(config) = tree.get_mut("/zookeeper/config") {
            config.aversion = -1;
        }
        tree
    }

    /// A tree holding only `root`, to be filled with [`Tree::insert`] (loading from disk).
    pub fn from_root(root: Node) -> Tree {
        let mut tree = Tree {
            slab: Slab::default(),
            index: HashTable::new(),
            hasher: path_hasher(),
            acls: AclTable::default(),
            data_bytes: 0,
            cow: CowSlot::default(),
            children_enc: ChildrenCache::default(),
        };
        let acl = tree.acls.acquire(&root.acl);
        let i = tree
            .slab
            .alloc(Slot::new(root.meta(acl), "", root.data.as_deref(), NIL));
        let h = hash_path(&tree.hasher, "/");
        tree.index
            .insert_unique(h, (key_of(h), i), |&(k, _)| spread(k));
        tree.data_bytes = root.data.as_ref().map_or(0, |d| d.len()) as u64;
        tree
    }

    /// A copy of the tree for a lagging member's replica, cheap to make: the node records
    /// stay shared chunk by chunk until one side changes a chunk (which copies that chunk
    /// alone); the path index is copied flat (8 bytes a node, no path walked), the ACL table
    /// list by list, and the encoded child lists are not copied (the copy encodes again).
    pub(crate) fn fork(&self) -> Tree {
        Tree {
            slab: self.slab.clone(),
            index: self.index.clone(),
            hasher: self.hasher.clone(),
            acls: self.acls.clone(),
            data_bytes: self.data_bytes,
            cow: CowSlot::default(),
            children_enc: ChildrenCache::default(),
        }
    }

    fn find(&self, path: &str) -> Option<u32> {
        self.find_hashed(path).map(|(i, _)| i)
    }

    /// The index of the node at `path` with the path's hash (hashed once, reused to unlink).
    fn find_hashed(&self, path: &str) -> Option<(u32, u64)> {
        let path = path::canonical(path);
        if !path.starts_with('/') {
            return None;
        }
        let h = hash_path(&self.hasher, path);
        self.index
            .find(h, |&(_, i)| has_path(&self.slab, i, path))
            .map(|&(_, i)| (i, h))
    }

    /// The index of the child called `name` of the node at `parent`, given the hash `h` of
    /// the child's path: a candidate is checked by its parent index and name alone.
    fn find_child(&self, h: u64, parent: u32, name: &str) -> Option<u32> {
        self.index
            .find(h, |&(_, i)| {
                let s = self.slab.at(i);
                s.parent == parent && s.name_bytes() == name.as_bytes()
            })
            .map(|&(_, i)| i)
    }

    fn view(&self, i: u32) -> NodeRef<'_> {
        let s = self.slab.at(i);
        NodeRef {
            meta: &s.meta,
            acl: self.acls.get(s.meta.acl),
            data: s.data(),
            num_children: s.num_children,
        }
    }

    /// The full path of the node at `i`.
    fn path_of(&self, mut i: u32) -> String {
        let mut names = Vec::new();
        while i != ROOT {
            let s = self.slab.at(i);
            names.push(s.name());
            i = s.parent;
        }
        if names.is_empty() {
            return "/".into();
        }
        let mut p = String::new();
        for n in names.iter().rev() {
            p.push('/');
            p.push_str(n);
        }
        p
    }

    /// Every node with its path, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (String, NodeRef<'_>)> {
        self.slab
            .live()
            .map(|(i, _)| (self.path_of(i), self.view(i)))
    }

    pub fn get(&self, path: &str) -> Option<NodeRef<'_>> {
        self.find(path).map(|i| self.view(i))
    }

    /// The bookkeeping of the node at `path`, to change it.
    pub fn get_mut(&mut self, path: &str) -> Option<&mut Meta> {
        let path = path::canonical(path);
        self.keep_old(path);
        let i = self.find(path)?;
        Some(&mut self.slab.at_mut(i).meta)
    }

    /// The Stat of the node at `path`.
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.get(path).map(|n| n.stat())
    }

    /// Every change to a node goes through here first: a snapshot being written keeps the
    /// version it has yet to write.
    fn keep_old(&mut self, path: &str) {
        if self.cow.0.as_ref().is_some_and(|cow| cow.wants(path)) {
            let current = self.get(path).map(|n| n.to_node());
            if let Some(cow) = &mut self.cow.0 {
                cow.before_change(path, current.as_ref());
            }
        }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Approximate bytes of data and paths, as `mntr` reports.
    pub fn approximate_data_size(&self) -> u64 {
        self.data_bytes
    }

    /// Inserts `node` at `path` under its existing parent, bumping the parent's create counter
    /// and pzxid when `count` is set (always, except for the initial tree). A node already
    /// at `path` is replaced (its children stay). False when the parent does not exist.
    pub fn insert(&mut self, path: &str, node: Node, zxid: i64, count: bool) -> bool {
        let path = path::canonical(path);
        let parent_path = path::canonical(path::parent(path).unwrap_or(""));
        if path == "/" {
            return self.overwrite(path, &node);
        }
        let Some(parent) = self.find(parent_path) else {
            return false;
        };
        let h = hash_path(&self.hasher, path);
        self.insert_under(parent, h, path, node, zxid, count)
    }

    fn insert_under(
        &mut self,
        parent: u32,
        h: u64,
        path: &str,
        node: Node,
        zxid: i64,
        count: bool,
    ) -> bool {
        let parent_path = path::canonical(path::parent(path).unwrap_or(""));
        self.keep_old(parent_path);
        self.keep_old(path);
        self.children_enc.invalidate(parent_path);
        if count {
            let p = &mut self.slab.at_mut(parent).meta;
            p.child_creates = p.child_creates.wrapping_add(1);
            p.pzxid = zxid;
        }
        if self.find_child(h, parent, path::name(path)).is_some() {
            return self.overwrite(path, &node);
        }
        self.place(parent, h, path, node);
        true
    }

    /// Creates the node at `path` (whose hash is `h`, absent so far) under the node at
    /// `parent`; gives its index.
    fn place(&mut self, parent: u32, h: u64, path: &str, node: Node) -> u32 {
        self.data_bytes += (path.len() + node.data.as_ref().map_or(0, |d| d.len())) as u64;
        let acl = self.acls.acquire(&node.acl);
        let slot = Slot::new(
            node.meta(acl),
            path::name(path),
            node.data.as_deref(),
            parent,
        );
        let i = self.slab.alloc(slot);
        self.link(parent, i);
        self.count_below(parent, 1);
        self.index
            .insert_unique(h, (key_of(h), i), |&(k, _)| spread(k));
        i
    }

    /// A transaction's create of `node` at `path`: the parent's create count moves on to
    /// `parent_cversion` and its pzxid to `zxid`, never back (a log replayed over a fuzzy
    /// snapshot may meet a node the snapshot holds already, which then stays as it is). Looks
    /// the parent up once.
    pub fn create(
        &mut self,
        path: &str,
        node: Node,
        zxid: i64,
        parent_cversion: i32,
    ) -> Placed<'_> {
        let path = path::canonical(path);
        let parent_path = path::canonical(path::parent(path).unwrap_or(""));
        if path == "/" {
            return Placed::NoParent;
        }
        let Some(parent) = self.find(parent_path) else {
            return Placed::NoParent;
        };
        let h = hash_path(&self.hasher, path);
        let exists = self.find_child(h, parent, path::name(path)).is_some();
        self.keep_old(parent_path);
        let p = &mut self.slab.at_mut(parent).meta;
        p.child_creates = p.child_creates.max(parent_cversion);
        p.pzxid = p.pzxid.max(zxid);
        if exists {
            return Placed::Existed;
        }
        self.keep_old(path);
        self.children_enc.invalidate(parent_path);
        let i = self.place(parent, h, path, node);
        Placed::Made(self.view(i))
    }

    /// Replaces the bookkeeping, data and ACL of the node at `path` (its children stay).
    /// False when there is no such node.
    pub fn overwrite(&mut self, path: &str, node: &Node) -> bool {
        let path = path::canonical(path);
        self.keep_old(path);
        let Some(i) = self.find(path) else {
            return false;
        };
        let acl = self.acls.acquire(&node.acl);
        let s = self.slab.at_mut(i);
        let old_acl = s.meta.acl;
        let old_len = s.data_len() as u64;
        s.meta = node.meta(acl);
        s.set_data(node.data.as_deref());
        self.acls.release(old_acl);
        let new_len = node.data.as_ref().map_or(0, |d| d.len()) as u64;
        self.data_bytes = self.data_bytes.saturating_sub(old_len) + new_len;
        true
    }

    fn link(&mut self, parent: u32, child: u32) {
        let first = self.slab.at(parent).first_child;
        {
            let c = self.slab.at_mut(child);
            c.prev = NIL;
            c.next = first;
        }
        if first != NIL {
            self.slab.at_mut(first).prev = child;
        }
        let p = self.slab.at_mut(parent);
        p.first_child = child;
        p.num_children += 1;
    }

    fn unlink(&mut self, child: u32) {
        let (parent, prev, next) = {
            let c = self.slab.at(child);
            (c.parent, c.prev, c.next)
        };
        if let Some(cow) = &mut self.cow.0 {
            cow.unlinked(child, next);
        }
        if prev != NIL {
            self.slab.at_mut(prev).next = next;
        } else {
            self.slab.at_mut(parent).first_child = next;
        }
        if next != NIL {
            self.slab.at_mut(next).prev = prev;
        }
        self.slab.at_mut(parent).num_children -= 1;
    }

    /// Indices of the children of the node at `i`, in no particular order.
    fn child_indices(&self, i: u32) -> impl Iterator<Item = u32> + '_ {
        child_indices(&self.slab, i)
    }

    /// Adds `by` (positive or negative) to the descendant counts of the node at `i` and of
    /// every node above it: as many steps as the path has components.
    fn count_below(&mut self, mut i: u32, by: i64) {
        while i != NIL {
            work::add(1);
            let s = self.slab.at_mut(i);
            s.descendants = (i64::from(s.descendants) + by).clamp(0, i64::from(u32::MAX)) as u32;
            i = s.parent;
        }
    }

    /// Takes the node at `i` (path `path`, not the root) and everything below it out of the
    /// tree; its parent's bookkeeping is left alone but for the descendant counts above it.
    /// `h` is the hash of `path`.
    fn detach(&mut self, i: u32, path: &str, h: u64) -> (Meta, AclList) {
        let (parent, below) = {
            let s = self.slab.at(i);
            (s.parent, s.descendants)
        };
        self.count_below(parent, -(i64::from(below) + 1));
        self.drop_subtree(i, path, h)
    }

    /// [`Tree::detach`] without the counts above `i` (the whole subtree goes).
    fn drop_subtree(&mut self, i: u32, path: &str, h: u64) -> (Meta, AclList) {
        let kids: Vec<String> = self
            .child_indices(i)
            .map(|c| path::join(path, self.slab.at(c).name()))
            .collect();
        for k in kids {
            if let Some((c, hc)) = self.find_hashed(&k) {
                self.keep_old(&k);
                self.drop_subtree(c, &k, hc);
            }
        }
        work::add(1);
        let (meta, data_len) = {
            let s = self.slab.at(i);
            (s.meta, s.data_len())
        };
        let acl = self.acls.get(meta.acl).clone();
        self.unlink(i);
        if let Ok(e) = self.index.find_entry(h, |&(_, j)| j == i) {
            e.remove();
        }
        self.slab.release(i);
        self.acls.release(meta.acl);
        self.data_bytes = self
            .data_bytes
            .saturating_sub((path.len() + data_len) as u64);
        self.children_enc.invalidate(path);
        (meta, acl)
    }

    /// Removes the node at `path` (which must have no children) and updates its parent;
    /// gives the removed node's bookkeeping and ACL list.
    pub fn remove(&mut self, path: &str, zxid: i64) -> Option<(Meta, AclList)> {
        if path == "/" {
            return None;
        }
        let (i, h) = self.find_hashed(path)?;
        self.remove_at(i, h, path, zxid)
    }

    fn remove_at(&mut self, i: u32, h: u64, path: &str, zxid: i64) -> Option<(Meta, AclList)> {
        let parent = path::canonical(path::parent(path).unwrap_or(""));
        self.keep_old(parent);
        self.keep_old(path);
        let p = self.slab.at(i).parent;
        let node = self.detach(i, path, h);
        self.children_enc.child_removed(parent, path::name(path));
        // Never back: a replayed delete may be older than a create the parent has seen.
        let meta = &mut self.slab.at_mut(p).meta;
        meta.pzxid = meta.pzxid.max(zxid);
        Some(node)
    }

    /// Replaces a node's data, keeping the size accounting right.
    pub fn set_data(&mut self, path: &str, data: Option<&[u8]>) -> Option<&mut Meta> {
        let i = self.replace_data(path, data)?;
        Some(&mut self.slab.at_mut(i).meta)
    }

    /// Replaces a node's data (the tree keeps a copy of its own), lets `update` change its
    /// bookkeeping, and gives the node: one lookup.
    pub fn set_data_then(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        update: impl FnOnce(&mut Meta),
    ) -> Option<NodeRef<'_>> {
        let i = self.replace_data(path, data)?;
        update(&mut self.slab.at_mut(i).meta);
        Some(self.view(i))
    }

    fn replace_data(&mut self, path: &str, data: Option<&[u8]>) -> Option<u32> {
        self.keep_old(path);
        let i = self.find(path)?;
        self.replace_data_at(i, data);
        Some(i)
    }

    fn replace_data_at(&mut self, i: u32, data: Option<&[u8]>) {
        let s = self.slab.at_mut(i);
        let old = s.data_len() as u64;
        let new = data.map_or(0, <[u8]>::len) as u64;
        s.set_data(data);
        self.data_bytes = self.data_bytes.saturating_sub(old) + new;
    }

    /// Replaces a node's ACL list.
    pub fn set_acl(&mut self, path: &str, acl: &AclList) -> Option<&mut Meta> {
        self.keep_old(path);
        let i = self.find(path)?;
        let new = self.acls.acquire(acl);
        let s = self.slab.at_mut(i);
        let old = std::mem::replace(&mut s.meta.acl, new);
        self.acls.release(old);
        Some(&mut self.slab.at_mut(i).meta)
    }

    /// The names of the children of the node at `path`, sorted; `None` if no such node.
    /// Where a walk of the children of the node at `path` starts, one at a time with
    /// [`Tree::child_at`]: the first child's index, [`NIL`] when it has none; `None` if no
    /// such node. A snapshot walks a wide parent's children this way over many slices; the
    /// snapshot's log moves its cursor on when the child it points at is unlinked.
    pub(crate) fn first_child(&self, path: &str) -> Option<u32> {
        Some(self.slab.at(self.find(path)?).first_child)
    }

    /// The name of the child at index `i` (from [`Tree::first_child`] or a previous call)
    /// and the index of the next one ([`NIL`] after the last).
    pub(crate) fn child_at(&self, i: u32) -> (&str, u32) {
        work::add(1);
        let s = self.slab.at(i);
        (s.name(), s.next)
    }

    pub fn children(&self, path: &str) -> Option<Vec<&str>> {
        Some(sorted_children(&self.slab, self.find(path)?))
    }

    /// The child list of the node at `path` as a getChildren reply encodes it (count, then
    /// each name, sorted), shared by every reply until the list changes; `None` if no such
    /// node.
    pub fn encoded_children(&mut self, path: &str) -> Option<Bytes> {
        let path = path::canonical(path);
        if let Some(b) = self.children_enc.cached(path) {
            return Some(b);
        }
        let names = sorted_children(&self.slab, self.find(path)?);
        let count = names.len();
        let out = self
            .children_enc
            .encoded(path, count, names.iter().copied());
        Some(out)
    }

    /// Every path, for invariant checks in tests.
    #[cfg(test)]
    pub fn nodes_for_tests(&self) -> Vec<String> {
        self.iter().map(|(p, _)| p).collect()
    }

    /// The path of a node with no children, found by following first children down from a
    /// child of the root not named `keep`; `None` when the root has no other child. Taking
    /// such leaves one after the other removes a tree deepest first; each costs the length
    /// of the path found.
    pub fn leaf_outside(&self, keep: &str) -> Option<String> {
        let mut i = self
            .child_indices(ROOT)
            .find(|&c| self.slab.at(c).name() != keep)?;
        loop {
            work::add(1);
            match self.slab.at(i).first_child {
                NIL => return Some(self.path_of(i)),
                c => i = c,
            }
        }
    }

    /// Number of nodes strictly below `path` (a count the tree keeps: no walk).
    pub fn descendants(&self, path: &str) -> i32 {
        self.find(path).map_or(0, |i| {
            i32::try_from(self.slab.at(i).descendants).unwrap_or(i32::MAX)
        })
    }

    /// Checks every node's descendant count against its children's (for the invariant
    /// checks; walks the whole tree).
    pub fn check_descendant_counts(&self) -> Result<(), String> {
        for (i, s) in self.slab.live() {
            let below: u64 = self
                .child_indices(i)
                .map(|c| u64::from(self.slab.at(c).descendants) + 1)
                .sum();
            if below != u64::from(s.descendants) {
                return Err(format!(
                    "{}: {} descendants counted, {below} below",
                    self.path_of(i),
                    s.descendants
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use zkd_protocol::Acl;

    use super::*;
    use crate::data::tree_slab::{Slot, CHUNK};

    fn tree() -> Tree {
        let open: AclList = Arc::from(Acl::open_unsafe());
        let read: AclList = Arc::from(vec![Acl::new(1, "world", "anyone")]);
        Tree::new(open, read)
    }

    fn node(t: &Tree, data: Option<&str>) -> Node {
        let acl = t.get("/").map(|n| n.acl.clone()).unwrap();
        Node::new(
            data.map(|d| Bytes::copy_from_slice(d.as_bytes())),
            acl,
            1,
            1,
            0,
        )
    }

    #[test]
    fn paths_children_and_slots_across_many_chunks() {
        let mut t = tree();
        assert!(t.insert("/p", node(&t, None), 1, true));
        let names: Vec<String> = (0..3 * CHUNK)
            .map(|i| format!("c{}", i * 7919 % 10007))
            .collect();
        for n in &names {
            let data = n.clone();
            assert!(t.insert(&format!("/p/{n}"), node(&t, Some(&data)), 2, true));
        }
        let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
        sorted.sort();
        assert_eq!(t.children("/p").unwrap(), sorted);
        for n in names.iter().step_by(2) {
            let data = t.get(&format!("/p/{n}")).unwrap().data_bytes();
            assert_eq!(data.as_deref(), Some(n.as_bytes()));
            assert_eq!(t.remove(&format!("/p/{n}"), 3).unwrap().0.pzxid, 1);
        }
        for n in names.iter().step_by(4) {
            assert!(t.insert(&format!("/p/{n}"), node(&t, Some("x")), 4, true));
        }
        assert_eq!(
            t.slab.slots_made(),
            4 + 1 + names.len(),
            "removed slots are reused"
        );
        let expected: Vec<&str> = sorted
            .iter()
            .copied()
            .filter(|n| {
                let i = names.iter().position(|m| m == n).unwrap();
                i % 2 == 1 || i % 4 == 0
            })
            .collect();
        assert_eq!(t.children("/p").unwrap(), expected);
        for (i, n) in names.iter().enumerate() {
            let data = t.get(&format!("/p/{n}")).map(|n| n.data_bytes());
            match i % 4 {
                0 => assert_eq!(data, Some(Some(Bytes::from("x")))),
                2 => assert_eq!(data, None),
                _ => assert_eq!(data, Some(Some(Bytes::from(n.clone())))),
            }
        }
        let stat = t.stat("/p").unwrap();
        assert_eq!(stat.num_children as usize, expected.len());
        assert_eq!(
            stat.cversion,
            2 * (names.len() + names.len() / 4) as i32 - stat.num_children
        );
        assert_eq!(t.descendants("/"), t.len() as i32 - 1);
        assert_eq!(t.len(), 5 + expected.len());
        assert!(t.get("/p/").is_none() && t.get("p").is_none() && t.get("/p//c0").is_none());
        let size: u64 = t
            .iter()
            .map(|(p, n)| (if p == "/" { 0 } else { p.len() }) + n.data.map_or(0, <[u8]>::len))
            .map(|b| b as u64)
            .sum();
        assert_eq!(t.approximate_data_size(), size);
    }

    #[test]
    fn a_mass_deletion_gives_the_slab_memory_back() {
        let mut t = tree();
        let empty = t.slab.bytes_held();
        t.insert("/p", node(&t, None), 1, true);
        t.insert("/q", node(&t, None), 1, true);
        let n = 100 * CHUNK;
        for i in 0..n {
            assert!(t.insert(&format!("/p/c{i}"), node(&t, None), 2, true));
        }
        let full = t.slab.bytes_held();
        // One node survives at the far end.
        assert!(t.insert("/q/last", node(&t, None), 3, true));
        for i in 0..n {
            assert!(t.remove(&format!("/p/c{i}"), 4).is_some());
        }
        let after = t.slab.bytes_held();
        println!(
            "slab: {empty} bytes empty, {full} with {n} nodes, {after} after deleting them \
             ({} bytes per slot)",
            std::mem::size_of::<Option<Slot>>()
        );
        assert!(full > n * std::mem::size_of::<Option<Slot>>());
        // The first chunk (the root's) and the survivor's with their lists of free slots, and
        // a few words per chunk ever made.
        assert!(
            after <= empty + CHUNK * (std::mem::size_of::<Option<Slot>>() + 4) + 128 * 64,
            "{after} bytes held after the deletion"
        );
        // Freed slots are reused lowest first: the survivor's chunk fills before a new one.
        for i in 0..2 * CHUNK {
            assert!(t.insert(&format!("/p/d{i}"), node(&t, None), 5, true));
        }
        assert!(t.slab.slots_made() <= 2 * CHUNK + CHUNK);
        assert_eq!(t.descendants("/"), t.len() as i32 - 1);
        t.check_descendant_counts().unwrap();
    }

    #[test]
    fn null_and_empty_data_stay_apart_and_acl_lists_are_counted() {
        let mut t = tree();
        t.insert("/n", node(&t, None), 1, true);
        t.insert("/e", node(&t, Some("")), 1, true);
        assert_eq!(t.get("/n").unwrap().data, None);
        assert_eq!(t.get("/e").unwrap().data, Some(&b""[..]));
        assert_eq!(t.acls.lists_in_use(), 2);
        let own: AclList = Arc::from(vec![Acl::new(31, "digest", "u:x")]);
        t.set_acl("/n", &own).unwrap().aversion = 1;
        assert_eq!(t.acls.lists_in_use(), 3);
        t.set_data("/n", Some(&b"v"[..])).unwrap().version = 1;
        let n = t.get("/n").unwrap();
        assert_eq!(
            (n.data, &n.acl[..], n.version, n.aversion),
            (Some(&b"v"[..]), &own[..], 1, 1)
        );
        t.remove("/n", 2);
        assert_eq!(t.acls.lists_in_use(), 2, "the list went with its last node");
    }
}
