//! Fixtures in the core's one order: creating a whole set of nodes at once (each a logged
//! create with its own zxid, all-or-nothing), and listing the tree for export.

use std::collections::BTreeSet;

use bytes::Bytes;
use zkd_protocol::{Acl, Stat};

use zkd_protocol::disk::NewNode;

use crate::data::tree::{NodeKind, CONTAINER_OWNER, MAX_TTL, TTL_MARKER};
use crate::request::txn::{create_record, header};
use crate::{auth::acl, data::path, Core};

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
    /// were created, or why the core stopped serving when a create could not be logged.
    pub fn apply_fixture(&mut self, nodes: &[FixtureNode], now_ms: i64) -> Result<usize, String> {
        if let Some(reason) = self.stopped() {
            return Err(reason.to_string());
        }
        let mut plan: Vec<FixtureNode> = Vec::new();
        let mut planned: BTreeSet<String> = BTreeSet::new();
        for n in nodes {
            if !path::is_valid(&n.path) || n.path == "/" || n.path.ends_with('/') {
                return Err(format!("{:?} is not a valid node path", n.path));
            }
            if path::is_system(&n.path) || n.path == "/zookeeper" {
                return Err(format!("{} is a system node and cannot be seeded", n.path));
            }
            if self.db.tree.get(&n.path).is_some() || planned.contains(&n.path) {
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
            while !p.is_empty() && self.db.tree.get(p).is_none() && !planned.contains(p) {
                missing.push(p.to_string());
                p = path::parent(p).unwrap_or("");
            }
            let parent = path::canonical(p);
            let parent_kind = self.db.tree.get(parent).map(|node| node.kind());
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
            let zxid = self.next_zxid();
            let acl = if n.acl.is_empty() {
                self.open_acl.to_vec()
            } else {
                acl::fixup(&n.acl, &[]).unwrap_or_default()
            };
            let owner = match n.kind {
                FixtureKind::Persistent => 0,
                FixtureKind::Container => CONTAINER_OWNER,
                FixtureKind::Ttl(ttl) => TTL_MARKER | ttl,
            };
            let parent = path::canonical(path::parent(&n.path).unwrap_or("/"));
            let parent_cversion = self
                .db
                .tree
                .get(parent)
                .map_or(0, |p| p.child_creates)
                .wrapping_add(1);
            let node = NewNode {
                path: n.path.clone(),
                data: n.data.clone(),
                acl,
            };
            let (t, body) = create_record(node, owner, parent_cversion, false);
            let h = header(0, 0, zxid, now_ms, t);
            // Seeding fires no watch (as before any client could have set one).
            self.apply_main(&h, &body, self.now_ms);
            self.record(&h, &body, self.now_ms);
            if let Some(reason) = self.stopped() {
                return Err(reason.to_string());
            }
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
    /// tree can be exported in pieces with other work in between. `max` bounds the nodes
    /// looked at, skipped ephemerals included. The walk keeps, per level, the sorted names
    /// of the children still to visit (copied when the level is entered): between pieces a
    /// node deleted meanwhile is skipped, and one created under a node already entered is
    /// not seen.
    pub fn export_some(&self, walk: &mut TreeWalk, max: usize, out: &mut Vec<TreeEntry>) {
        if !walk.started {
            walk.started = true;
            let names = self.db.tree.children("/").unwrap_or_default();
            walk.stack.push(WalkLevel {
                parent: "/".to_string(),
                names: names
                    .into_iter()
                    .filter(|c| *c != "zookeeper")
                    .map(Box::from)
                    .collect(),
                next: 0,
            });
        }
        let mut looked_at = 0;
        while looked_at < max {
            let Some(level) = walk.stack.last_mut() else {
                break;
            };
            let Some(name) = level.names.get(level.next) else {
                walk.stack.pop();
                continue;
            };
            let p = path::join(&level.parent, name);
            level.next += 1;
            looked_at += 1;
            let Some(node) = self.db.tree.get(&p) else {
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
            if node.num_children() > 0 {
                let names = self.db.tree.children(&p).unwrap_or_default();
                walk.stack.push(WalkLevel {
                    parent: p.clone(),
                    names: names.into_iter().map(Box::from).collect(),
                    next: 0,
                });
            }
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
    /// The levels being walked, the deepest on top.
    stack: Vec<WalkLevel>,
}

/// One level of a [`TreeWalk`]: a node, the sorted names of its children, and the next to
/// visit.
#[derive(Debug)]
struct WalkLevel {
    parent: String,
    names: Vec<Box<str>>,
    next: usize,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::harness::tests_config;

    fn node(path: &str) -> FixtureNode {
        FixtureNode {
            path: path.to_string(),
            data: Some(Bytes::from(path.to_string())),
            acl: Vec::new(),
            kind: FixtureKind::Persistent,
        }
    }

    /// A wide parent, a deep chain and names that sort differently as paths and as names.
    fn sample() -> Core {
        let mut core = Core::new(tests_config(), 1_700_000_000_000);
        let mut nodes: Vec<FixtureNode> = (0..600).map(|i| node(&format!("/wide/c{i}"))).collect();
        nodes.extend(["/a/b/c/d/e", "/a-b", "/a/b-c", "/z", "/a/b/c2"].map(node));
        core.apply_fixture(&nodes, 1_700_000_000_000)
            .expect("fixture");
        core
    }

    #[test]
    fn a_walk_in_pieces_gives_the_whole_walk_and_each_piece_is_bounded() {
        let core = sample();
        let whole = core.export_tree(false);
        let paths: Vec<&str> = whole.iter().map(|e| e.node.path.as_str()).collect();
        // Parents first, siblings in name order, /zookeeper left out.
        assert_eq!(
            &paths[..9],
            [
                "/a",
                "/a/b",
                "/a/b/c",
                "/a/b/c/d",
                "/a/b/c/d/e",
                "/a/b/c2",
                "/a/b-c",
                "/a-b",
                "/wide"
            ]
        );
        assert_eq!(paths.len(), 9 + 600 + 1);
        assert_eq!(paths.last(), Some(&"/z"));
        for max in [1, 2, 7, 256] {
            let mut walk = TreeWalk::new(false);
            let mut pieces = Vec::new();
            while !walk.done() {
                let mut piece = Vec::new();
                core.export_some(&mut walk, max, &mut piece);
                assert!(
                    piece.len() <= max,
                    "a piece of {} with max {max}",
                    piece.len()
                );
                pieces.extend(piece);
            }
            assert_eq!(pieces, whole, "max {max}");
        }
    }
}
