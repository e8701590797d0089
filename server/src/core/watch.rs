//! Watch tables (PROTOCOL.md §7): one-shot data/exist and child watches, persistent and
//! persistent-recursive watches, all owned by connections, with at most one event per
//! connection per trigger.

use std::collections::{HashMap, HashSet};

use zkd_protocol::{event_type, watcher_type};

use super::path;
use super::ConnId;

/// Standard (one-shot) data or exist watch.
pub const DATA: u8 = 1;
/// Standard (one-shot) child watch.
pub const CHILD: u8 = 2;
/// Persistent watch (both tables).
pub const PERSISTENT: u8 = 4;
/// Persistent recursive watch.
pub const RECURSIVE: u8 = 8;

#[derive(Debug, Default)]
struct PathWatches {
    data: HashSet<ConnId>,
    child: HashSet<ConnId>,
    persistent: HashSet<ConnId>,
    recursive: HashSet<ConnId>,
}

impl PathWatches {
    fn set(&mut self, kind: u8) -> &mut HashSet<ConnId> {
        match kind {
            DATA => &mut self.data,
            CHILD => &mut self.child,
            PERSISTENT => &mut self.persistent,
            _ => &mut self.recursive,
        }
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
            && self.child.is_empty()
            && self.persistent.is_empty()
            && self.recursive.is_empty()
    }
}

/// Every watch of every connection.
#[derive(Debug, Default)]
pub struct Watches {
    paths: HashMap<Box<str>, PathWatches>,
    by_conn: HashMap<ConnId, HashMap<Box<str>, u8>>,
    recursive: usize,
}

impl Watches {
    /// Registers a watch; registering the same (connection, path, kind) twice is a no-op.
    pub fn add(&mut self, conn: ConnId, path: &str, kind: u8) {
        let mask = self
            .by_conn
            .entry(conn)
            .or_default()
            .entry(path.into())
            .or_insert(0);
        if *mask & kind != 0 {
            return;
        }
        *mask |= kind;
        if kind == RECURSIVE {
            self.recursive += 1;
        }
        match self.paths.get_mut(path) {
            Some(pw) => pw.set(kind).insert(conn),
            None => self
                .paths
                .entry(path.into())
                .or_default()
                .set(kind)
                .insert(conn),
        };
    }

    /// Drops a connection's bit for `path` in the reverse index.
    fn unindex(&mut self, conn: ConnId, path: &str, kind: u8) {
        if let Some(paths) = self.by_conn.get_mut(&conn) {
            if let Some(mask) = paths.get_mut(path) {
                *mask &= !kind;
                if *mask == 0 {
                    paths.remove(path);
                }
            }
            if paths.is_empty() {
                self.by_conn.remove(&conn);
            }
        }
    }

    /// Removes the given kinds of `conn`'s watches at `path`; returns whether any existed.
    fn remove_kinds(&mut self, conn: ConnId, path: &str, kinds: u8) -> bool {
        let have = self.mask(conn, path) & kinds;
        if have == 0 {
            return false;
        }
        if let Some(pw) = self.paths.get_mut(path) {
            for kind in [DATA, CHILD, PERSISTENT, RECURSIVE] {
                if have & kind != 0 {
                    pw.set(kind).remove(&conn);
                }
            }
            if pw.is_empty() {
                self.paths.remove(path);
            }
        }
        if have & RECURSIVE != 0 {
            self.recursive -= 1;
        }
        self.unindex(conn, path, have);
        true
    }

    fn mask(&self, conn: ConnId, path: &str) -> u8 {
        self.by_conn
            .get(&conn)
            .and_then(|p| p.get(path))
            .copied()
            .unwrap_or(0)
    }

    /// Drops every watch of a connection (its socket closed).
    pub fn remove_conn(&mut self, conn: ConnId) {
        let Some(paths) = self.by_conn.remove(&conn) else {
            return;
        };
        for (path, mask) in paths {
            if let Some(pw) = self.paths.get_mut(&*path) {
                for kind in [DATA, CHILD, PERSISTENT, RECURSIVE] {
                    if mask & kind != 0 {
                        pw.set(kind).remove(&conn);
                    }
                }
                if pw.is_empty() {
                    self.paths.remove(&*path);
                }
            }
            if mask & RECURSIVE != 0 {
                self.recursive -= 1;
            }
        }
    }

    /// Collects into `out` (sorted, deduplicated) the connections to notify of `event` on
    /// `path`, removing the one-shot watches that fire.
    pub fn trigger(&mut self, event: i32, path: &str, out: &mut Vec<ConnId>) {
        out.clear();
        let (one_shot, persistent_here, recursive) = match event {
            event_type::NODE_CHILDREN_CHANGED => (CHILD, true, false),
            event_type::NODE_DELETED => (DATA | CHILD, true, true),
            _ => (DATA, true, true),
        };
        let mut fired: Vec<(u8, Vec<ConnId>)> = Vec::new();
        if let Some(pw) = self.paths.get_mut(path) {
            for kind in [DATA, CHILD] {
                if one_shot & kind != 0 && !pw.set(kind).is_empty() {
                    let conns: Vec<ConnId> = pw.set(kind).drain().collect();
                    out.extend_from_slice(&conns);
                    fired.push((kind, conns));
                }
            }
            if persistent_here {
                out.extend(pw.persistent.iter().copied());
            }
            if pw.is_empty() {
                self.paths.remove(path);
            }
        }
        for (kind, conns) in fired {
            for conn in conns {
                self.unindex(conn, path, kind);
            }
        }
        if recursive && self.recursive > 0 {
            for p in path::with_ancestors(path) {
                if let Some(pw) = self.paths.get(p) {
                    out.extend(pw.recursive.iter().copied());
                }
            }
        }
        if out.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
    }

    fn kinds_for(watcher: i32) -> Option<u8> {
        Some(match watcher {
            watcher_type::CHILDREN => CHILD,
            watcher_type::DATA => DATA,
            watcher_type::ANY => DATA | CHILD | PERSISTENT | RECURSIVE,
            watcher_type::PERSISTENT => PERSISTENT,
            watcher_type::PERSISTENT_RECURSIVE => RECURSIVE,
            _ => return None,
        })
    }

    /// checkWatches: `None` for an unknown type, else whether a matching watch exists.
    pub fn check(&self, conn: ConnId, path: &str, watcher: i32) -> Option<bool> {
        Some(self.mask(conn, path) & Self::kinds_for(watcher)? != 0)
    }

    /// removeWatches: `None` for an unknown type, else whether anything was removed.
    pub fn remove(&mut self, conn: ConnId, path: &str, watcher: i32) -> Option<bool> {
        let kinds = Self::kinds_for(watcher)?;
        Some(self.remove_kinds(conn, path, kinds))
    }

    /// The data table (data/exist, persistent and recursive watches): path → connections.
    pub fn data_table(&self) -> Vec<(String, Vec<ConnId>)> {
        let mut v: Vec<(String, Vec<ConnId>)> = self
            .paths
            .iter()
            .filter_map(|(p, pw)| {
                let mut conns: Vec<ConnId> = pw
                    .data
                    .iter()
                    .chain(&pw.persistent)
                    .chain(&pw.recursive)
                    .copied()
                    .collect();
                conns.sort_unstable();
                conns.dedup();
                (!conns.is_empty()).then(|| (p.to_string(), conns))
            })
            .collect();
        v.sort();
        v
    }

    /// Total watch registrations in the data and child tables (as `zk_watch_count`).
    pub fn count(&self) -> usize {
        self.paths
            .values()
            .map(|pw| pw.data.len() + pw.child.len() + 2 * pw.persistent.len() + pw.recursive.len())
            .sum()
    }

    /// Number of watches one connection holds (each kind on each path counts once).
    pub fn count_for(&self, conn: ConnId) -> usize {
        self.by_conn.get(&conn).map_or(0, |paths| {
            paths.values().map(|m| m.count_ones() as usize).sum()
        })
    }

    /// Number of connections holding any watch.
    #[cfg(test)]
    pub fn watching_connections(&self) -> usize {
        self.by_conn.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkd_protocol::event_type::*;

    #[test]
    fn one_shot_fires_once_and_persistent_stays() {
        let mut w = Watches::default();
        let mut out = Vec::new();
        w.add(1, "/a", DATA);
        w.add(1, "/a", DATA);
        w.add(2, "/a", PERSISTENT);
        w.trigger(NODE_DATA_CHANGED, "/a", &mut out);
        assert_eq!(out, [1, 2]);
        w.trigger(NODE_DATA_CHANGED, "/a", &mut out);
        assert_eq!(out, [2]);
        assert_eq!(w.check(1, "/a", watcher_type::DATA), Some(false));
    }

    #[test]
    fn delete_notifies_each_connection_once() {
        let mut w = Watches::default();
        let mut out = Vec::new();
        w.add(1, "/a", DATA);
        w.add(1, "/a", CHILD);
        w.add(1, "/", RECURSIVE);
        w.trigger(NODE_DELETED, "/a", &mut out);
        assert_eq!(out, [1]);
        assert_eq!(w.count(), 1);
    }

    #[test]
    fn recursive_never_sees_children_changed() {
        let mut w = Watches::default();
        let mut out = Vec::new();
        w.add(1, "/q", RECURSIVE);
        w.add(2, "/q", PERSISTENT);
        w.trigger(NODE_CHILDREN_CHANGED, "/q", &mut out);
        assert_eq!(out, [2]);
        w.trigger(NODE_CREATED, "/q/b", &mut out);
        assert_eq!(out, [1]);
    }

    #[test]
    fn removal_and_connection_cleanup() {
        let mut w = Watches::default();
        let mut out = Vec::new();
        w.add(1, "/a", CHILD);
        w.add(1, "/a", RECURSIVE);
        assert_eq!(w.remove(1, "/a", watcher_type::DATA), Some(false));
        assert_eq!(w.remove(1, "/a", 9), None);
        assert_eq!(
            w.remove(1, "/a", watcher_type::PERSISTENT_RECURSIVE),
            Some(true)
        );
        w.remove_conn(1);
        w.trigger(NODE_DELETED, "/a", &mut out);
        assert!(out.is_empty());
        assert_eq!(w.count(), 0);
        assert_eq!(w.watching_connections(), 0);
    }
}
