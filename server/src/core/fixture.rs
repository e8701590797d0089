//! Fixtures in the core's one order: creating a whole set of nodes at once (each a logged
//! create with its own zxid, all-or-nothing), and listing the tree for export.

use std::collections::BTreeSet;

use bytes::Bytes;
use zkd_protocol::{Acl, Stat};

use super::tree::{Node, NodeKind, CONTAINER_OWNER, MAX_TTL, TTL_MARKER};
use super::{acl, path, Core};

/// The kind of a fixture node (ephemeral nodes belong to sessions and are not fixtures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixtureKind {
    Persistent,
    Container,
    /// Time to live in ms (1 ..= 2^40-1).
    Ttl(i64),
}

/// One node to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureNode {
    pub path: String,
    pub data: Option<Bytes>,
    /// Empty = `world:anyone` with all permissions.
    pub acl: Vec<Acl>,
    pub kind: FixtureKind,
}

/// One node of the tree as exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// What a fixture needs to create the node again.
    pub node: FixtureNode,
    pub stat: Stat,
    /// The owning session of an ephemeral node.
    pub ephemeral_owner: Option<i64>,
}

impl Core {
    /// Creates `nodes` in order (missing ancestors are created empty with the open ACL).
    /// Everything is checked first: on any error nothing is created. Returns how many nodes
    /// were created.
    pub fn apply_fixture(&mut self, nodes: &[FixtureNode], now_ms: i64) -> Result<usize, String> {
        let mut plan: Vec<FixtureNode> = Vec::new();
        let mut planned: BTreeSet<String> = BTreeSet::new();
        for n in nodes {
            if !path::is_valid(&n.path) || n.path == "/" || n.path.ends_with('/') {
                return Err(format!("{:?} is not a valid node path", n.path));
            }
            if path::is_system(&n.path) || n.path == "/zookeeper" {
                return Err(format!("{} is a system node and cannot be seeded", n.path));
            }
            if self.tree.get(&n.path).is_some() || planned.contains(&n.path) {
                return Err(format!("{} exists already", n.path));
            }
            if let FixtureKind::Ttl(ttl) = n.kind {
                if !(1..=MAX_TTL).contains(&ttl) {
                    return Err(format!("{}: TTL {ttl} ms is outside 1..={MAX_TTL}", n.path));
                }
            }
            if !n.acl.is_empty() {
                acl::fixup(&n.acl, &[]).map_err(|_| {
                    format!(
                        "{}: invalid ACL (schemes world:anyone, digest user:hash and ip \
                         addr[/bits] are accepted)",
                        n.path
                    )
                })?;
            }
            // Missing ancestors first, outermost first.
            let mut missing = Vec::new();
            let mut p = path::parent(&n.path).unwrap_or("");
            while !p.is_empty() && self.tree.get(p).is_none() && !planned.contains(p) {
                missing.push(p.to_string());
                p = path::parent(p).unwrap_or("");
            }
            let parent = path::canonical(p);
            let parent_kind = self.tree.get(parent).map(|node| node.kind());
            if matches!(parent_kind, Some(NodeKind::Ephemeral(_))) {
                return Err(format!("{}: its parent is an ephemeral node", n.path));
            }
            for m in missing.into_iter().rev() {
                planned.insert(m.clone());
                plan.push(FixtureNode {
                    path: m,
                    data: Some(Bytes::new()),
                    acl: Vec::new(),
                    kind: FixtureKind::Persistent,
                });
            }
            planned.insert(n.path.clone());
            plan.push(n.clone());
        }
        for n in &plan {
            let zxid = self.next_zxid(self.now_ms);
            let acl = if n.acl.is_empty() {
                self.open_acl.clone()
            } else {
                let fixed = acl::fixup(&n.acl, &[]).unwrap_or_default();
                if fixed[..] == self.open_acl[..] {
                    self.open_acl.clone()
                } else {
                    std::sync::Arc::from(fixed)
                }
            };
            let owner = match n.kind {
                FixtureKind::Persistent => 0,
                FixtureKind::Container => CONTAINER_OWNER,
                FixtureKind::Ttl(ttl) => TTL_MARKER | ttl,
            };
            let data = n.data.as_ref().map(|d| Bytes::copy_from_slice(d));
            self.tree.insert(
                &n.path,
                Node::new(data, acl, zxid, now_ms, owner),
                zxid,
                true,
            );
            if owner != 0 {
                self.reapable.insert(n.path.as_str().into());
            }
            let parent = path::canonical(path::parent(&n.path).unwrap_or("/"));
            self.record_paths(zxid, [n.path.as_str(), parent].into_iter(), &[]);
            self.log_created(&n.path, false);
            self.log_write(0, 0, zxid, now_ms, false, None);
        }
        Ok(plan.len())
    }

    /// Every node below the root except the `/zookeeper` subtree, parents before children
    /// and siblings in name order. Ephemeral nodes are included only when asked for.
    pub fn export_tree(&self, with_ephemerals: bool) -> Vec<TreeEntry> {
        let mut walk = TreeWalk::new(with_ephemerals);
        let mut out = Vec::new();
        while !walk.done() {
            self.export_some(&mut walk, usize::MAX, &mut out);
        }
        out
    }

    /// Continues `walk` for at most `max` nodes, appending them to `out`, so that a large
    /// tree can be exported in pieces with other work in between. Between pieces the walk
    /// holds only paths still to visit: a node deleted meanwhile is skipped, and one created
    /// under a node already visited is not seen.
    pub fn export_some(&self, walk: &mut TreeWalk, max: usize, out: &mut Vec<TreeEntry>) {
        if !walk.started {
            walk.started = true;
            if let Some(names) = self.tree.children("/") {
                for c in names.into_iter().rev() {
                    if c != "zookeeper" {
                        walk.stack.push(path::join("/", c));
                    }
                }
            }
        }
        let mut taken = 0;
        while taken < max {
            let Some(p) = walk.stack.pop() else { break };
            let Some(node) = self.tree.get(&p) else {
                continue;
            };
            let (kind, ephemeral_owner) = match node.kind() {
                NodeKind::Persistent => (FixtureKind::Persistent, None),
                NodeKind::Container => (FixtureKind::Container, None),
                NodeKind::Ttl(ttl) => (FixtureKind::Ttl(ttl), None),
                NodeKind::Ephemeral(sid) => (FixtureKind::Persistent, Some(sid)),
            };
            if ephemeral_owner.is_some() && !walk.with_ephemerals {
                continue;
            }
            for c in self.tree.children(&p).unwrap_or_default().into_iter().rev() {
                walk.stack.push(path::join(&p, c));
            }
            taken += 1;
            out.push(TreeEntry {
                stat: node.stat(),
                node: FixtureNode {
                    data: node.data_bytes(),
                    acl: node.acl.to_vec(),
                    kind,
                    path: p,
                },
                ephemeral_owner,
            });
        }
    }
}

/// Where an export of the tree stands (see [`Core::export_some`]).
#[derive(Debug, Default)]
pub struct TreeWalk {
    with_ephemerals: bool,
    started: bool,
    /// Paths still to visit, the next on top.
    stack: Vec<String>,
}

impl TreeWalk {
    pub fn new(with_ephemerals: bool) -> TreeWalk {
        TreeWalk {
            with_ephemerals,
            ..TreeWalk::default()
        }
    }

    /// Whether every node has been visited.
    pub fn done(&self) -> bool {
        self.started && self.stack.is_empty()
    }
}
