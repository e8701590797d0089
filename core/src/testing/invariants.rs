//! Internal consistency checks of the core's state: tree shape and Stat rules, sessions and
//! their ephemerals, connections, and the watch tables. Used by the fuzz targets and tests
//! after every step; never called while serving.

use std::collections::HashMap;

use crate::data::counted::kept_as_counted;
use crate::data::path;
use crate::data::tree::NodeKind;
use crate::Core;

impl Core {
    /// Checks every internal invariant and describes the first one broken.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_tree()?;
        self.check_sessions()?;
        self.check_connections()?;
        self.check_watches()
    }

    fn check_tree(&self) -> Result<(), String> {
        if self.db.tree.get("/").is_none() {
            return Err("the root node is missing".into());
        }
        self.db.tree.check_descendant_counts()?;
        let mut data_bytes = 0u64;
        let mut listed = 0usize;
        for (p, n) in self.db.tree.iter() {
            let p = p.as_str();
            let at = |what: &str| Err(format!("{p}: {what}"));
            // As ZooKeeper counts it: path and data of every node, the root's path as empty.
            data_bytes += n.data.map_or(0, <[u8]>::len) as u64;
            if p != "/" {
                if !path::is_valid(p) {
                    return at("invalid path in the tree");
                }
                data_bytes += p.len() as u64;
                let parent = path::canonical(path::parent(p).unwrap_or(""));
                match self.db.tree.get(parent) {
                    None => return at("parent missing"),
                    Some(pn) if matches!(pn.kind(), NodeKind::Ephemeral(_)) => {
                        return at("child of an ephemeral node")
                    }
                    Some(_) => {}
                }
            }
            let children = self.db.tree.children(p).unwrap_or_default();
            listed += children.len();
            for c in &children {
                if self
                    .db
                    .tree
                    .get(&path::join(path::canonical(p), c))
                    .is_none()
                {
                    return at(&format!("lists child {c:?} that does not exist"));
                }
            }
            let s = n.stat();
            if s.czxid > self.db.zxid || s.mzxid > self.db.zxid || s.pzxid > self.db.zxid {
                return at(&format!(
                    "zxid from the future: {s:?}, last {}",
                    self.db.zxid
                ));
            }
            if s.mzxid < s.czxid || s.pzxid < s.czxid {
                return at(&format!("modified before it was created: {s:?}"));
            }
            if s.version < 0 || s.aversion < -1 {
                return at(&format!("negative version: {s:?}"));
            }
            if s.num_children as usize != children.len()
                || s.data_length as usize != n.data.map_or(0, <[u8]>::len)
            {
                return at(&format!("Stat counts disagree with the node: {s:?}"));
            }
            if p != "/" && !path::is_system(p) && (n.child_creates as usize) < children.len() {
                return at(&format!("more children than child creations: {s:?}"));
            }
            match n.kind() {
                NodeKind::Ephemeral(sid) => match self.sessions.get(sid) {
                    None => return at(&format!("ephemeral of dead session 0x{sid:x}")),
                    Some(sess) if !sess.ephemerals.contains(p) => {
                        return at(&format!("ephemeral not listed by session 0x{sid:x}"))
                    }
                    Some(_) => {}
                },
                NodeKind::Container | NodeKind::Ttl(_) => {
                    if !self.db.reapable.contains(p) {
                        return at("container or TTL node unknown to the reaper");
                    }
                }
                NodeKind::Persistent => {}
            }
        }
        kept_as_counted(
            "nodes (root and listed children)",
            &self.db.tree.len(),
            &(listed + 1),
        )?;
        kept_as_counted(
            "tree size counter",
            &self.db.tree.approximate_data_size(),
            &data_bytes,
        )?;
        Ok(())
    }

    fn check_sessions(&self) -> Result<(), String> {
        self.sessions.check_consistency()?;
        for s in self.sessions.iter() {
            for p in &s.ephemerals {
                if self.db.tree.get(p).map(|n| n.owner) != Some(s.id) {
                    return Err(format!(
                        "session 0x{:x} lists ephemeral {p} it does not own",
                        s.id
                    ));
                }
            }
            if let Some(conn) = s.conn {
                match self.conns.get(&conn) {
                    Some(c) if c.session == Some(s.id) && !c.closing => {}
                    _ => {
                        return Err(format!(
                            "session 0x{:x} bound to conn {conn}, which is not bound back",
                            s.id
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    fn check_connections(&self) -> Result<(), String> {
        let mut per_ip: HashMap<_, u32> = HashMap::new();
        for (id, c) in &self.conns {
            if *id >= self.next_conn {
                return Err(format!(
                    "conn {id} not below the next id {}",
                    self.next_conn
                ));
            }
            *per_ip.entry(c.remote.ip()).or_default() += 1;
            if let Some(sid) = c.session {
                if self.sessions.get(sid).map(|s| s.conn) != Some(Some(*id)) {
                    return Err(format!(
                        "conn {id} bound to session 0x{sid:x}, which is gone or bound elsewhere"
                    ));
                }
            }
        }
        kept_as_counted("per-IP connection counts", &self.per_ip, &per_ip)?;
        Ok(())
    }

    fn check_watches(&self) -> Result<(), String> {
        self.db.watches.check_consistency()?;
        for conn in self.db.watches.conns() {
            if self.conns.get(&conn).map(|c| c.closing) != Some(false) {
                return Err(format!("watches kept for closed connection {conn}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use crate::data::tree::Node;
    use crate::testing::harness::tests_config;
    use crate::watch::watches::WatchKind;
    use crate::Core;

    fn remote() -> SocketAddr {
        "127.0.0.1:5000".parse().unwrap()
    }

    #[test]
    fn a_fresh_core_is_consistent() {
        let mut core = Core::new(tests_config(), 1_000);
        core.open_connection(remote(), 1_000).unwrap();
        assert_eq!(core.check_invariants(), Ok(()));
    }

    #[test]
    fn an_ephemeral_of_no_session_is_caught_and_a_node_without_parent_refused() {
        let mut core = Core::new(tests_config(), 1_000);
        let acl = core.open_acl.clone();
        let orphan = Node::new(None, acl.clone(), 0, 0, 0);
        assert!(!core.db.tree.insert("/a/b", orphan, 0, true));
        assert_eq!(core.check_invariants(), Ok(()));
        assert!(core
            .db
            .tree
            .insert("/e", Node::new(None, acl, 0, 0, 0x77), 0, true));
        let err = core.check_invariants().unwrap_err();
        assert!(err.contains("ephemeral of dead session"), "{err}");
    }

    #[test]
    fn watches_of_a_gone_connection_are_caught() {
        let mut core = Core::new(tests_config(), 1_000);
        core.db.watches.add(42, "/a", WatchKind::Data);
        let err = core.check_invariants().unwrap_err();
        assert!(err.contains("closed connection 42"), "{err}");
    }

    #[test]
    fn a_session_left_bound_to_a_closed_connection_is_caught() {
        let mut core = Core::new(tests_config(), 1_000);
        let conn = core.open_connection(remote(), 1_000).unwrap();
        core.sessions.create(4_000, 1_000).conn = Some(conn);
        let err = core.check_invariants().unwrap_err();
        assert!(err.contains("not bound back"), "{err}");
    }
}
