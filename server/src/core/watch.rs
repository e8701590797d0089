//! Watch tables: one-shot data/exist and child watches, persistent and
//! persistent-recursive watches, all owned by connections, with at most one event per
//! connection per trigger.

use std::collections::{HashMap, HashSet};

use zkd_protocol::{event_type, watcher_type};

use crate::ZookeeperVersion;

use super::herd::FiredKinds;
use super::keyed::KeyedMap;
use super::path;
use super::ConnId;

/// The kinds of watch a connection can hold on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchKind {
    /// Standard (one-shot) data or exist watch.
    Data,
    /// Standard (one-shot) child watch.
    Child,
    /// Persistent watch: data and child events of the path itself.
    Persistent,
    /// Persistent recursive watch: data events of the path and everything below it.
    Recursive,
}

impl WatchKind {
    const ALL: [WatchKind; 4] = [
        WatchKind::Data,
        WatchKind::Child,
        WatchKind::Persistent,
        WatchKind::Recursive,
    ];

    /// This kind's bit in a [`Kinds`] set.
    const fn bit(self) -> u8 {
        match self {
            WatchKind::Data => 1,
            WatchKind::Child => 2,
            WatchKind::Persistent => 4,
            WatchKind::Recursive => 8,
        }
    }
}

/// A set of watch kinds (the kinds one connection holds on one path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Kinds(u8);

impl Kinds {
    const NONE: Kinds = Kinds(0);

    fn of(kinds: &[WatchKind]) -> Kinds {
        Kinds(kinds.iter().fold(0, |m, k| m | k.bit()))
    }

    fn contains(self, kind: WatchKind) -> bool {
        self.0 & kind.bit() != 0
    }

    fn intersect(self, other: Kinds) -> Kinds {
        Kinds(self.0 & other.0)
    }

    fn without(self, other: Kinds) -> Kinds {
        Kinds(self.0 & !other.0)
    }

    fn with(self, kind: WatchKind) -> Kinds {
        Kinds(self.0 | kind.bit())
    }

    fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// How many kinds the set holds.
    fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    fn iter(self) -> impl Iterator<Item = WatchKind> {
        WatchKind::ALL
            .into_iter()
            .filter(move |k| self.contains(*k))
    }
}

#[derive(Debug, Default)]
struct PathWatches {
    data: HashSet<ConnId>,
    child: HashSet<ConnId>,
    persistent: HashSet<ConnId>,
    recursive: HashSet<ConnId>,
}

impl PathWatches {
    fn set(&mut self, kind: WatchKind) -> &mut HashSet<ConnId> {
        match kind {
            WatchKind::Data => &mut self.data,
            WatchKind::Child => &mut self.child,
            WatchKind::Persistent => &mut self.persistent,
            WatchKind::Recursive => &mut self.recursive,
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
    paths: KeyedMap<Box<str>, PathWatches>,
    by_conn: KeyedMap<ConnId, HashMap<Box<str>, Kinds>>,
    recursive: usize,
    /// Per parent path: one-shot data/exist watches held on its children (kept up to date on
    /// every change, so the herd record reads it in O(1)).
    data_on_children: KeyedMap<Box<str>, usize>,
}

impl Watches {
    /// Registers a watch; registering the same (connection, path, kind) twice is a no-op.
    pub fn add(&mut self, conn: ConnId, path: &str, kind: WatchKind) {
        let mask = self
            .by_conn
            .entry(conn)
            .or_default()
            .entry(path.into())
            .or_default();
        if mask.contains(kind) {
            return;
        }
        *mask = mask.with(kind);
        if kind == WatchKind::Recursive {
            self.recursive += 1;
        }
        if kind == WatchKind::Data {
            self.count_on_parent(path, 1, true);
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

    /// Adds (`up`) or removes `n` data watches on a child of `path`'s parent.
    fn count_on_parent(&mut self, path: &str, n: usize, up: bool) {
        let Some(parent) = Self::parent_key(path) else {
            return;
        };
        if up {
            match self.data_on_children.get_mut(parent) {
                Some(c) => *c += n,
                None => {
                    self.data_on_children.insert(parent.into(), n);
                }
            }
        } else if let Some(c) = self.data_on_children.get_mut(parent) {
            *c = c.saturating_sub(n);
            if *c == 0 {
                self.data_on_children.remove(parent);
            }
        }
    }

    /// The key of `path`'s parent in `data_on_children` (the root's children count under
    /// the empty string); `None` for the root itself.
    fn parent_key(path: &str) -> Option<&str> {
        (path != "/").then(|| path::parent(path)).flatten()
    }

    /// One-shot data/exist watches held on the children of `path`.
    pub fn data_on_children(&self, path: &str) -> usize {
        let key = if path == "/" { "" } else { path };
        self.data_on_children.get(key).copied().unwrap_or(0)
    }

    /// Drops a connection's bit for `path` in the reverse index.
    fn unindex(&mut self, conn: ConnId, path: &str, kinds: Kinds) {
        if let Some(paths) = self.by_conn.get_mut(&conn) {
            if let Some(mask) = paths.get_mut(path) {
                *mask = mask.without(kinds);
                if mask.is_empty() {
                    paths.remove(path);
                }
            }
            if paths.is_empty() {
                self.by_conn.remove(&conn);
            }
        }
    }

    /// Removes the given kinds of `conn`'s watches at `path`; returns whether any existed.
    fn remove_kinds(&mut self, conn: ConnId, path: &str, kinds: Kinds) -> bool {
        let have = self.mask(conn, path).intersect(kinds);
        if have.is_empty() {
            return false;
        }
        if let Some(pw) = self.paths.get_mut(path) {
            for kind in have.iter() {
                pw.set(kind).remove(&conn);
            }
            if pw.is_empty() {
                self.paths.remove(path);
            }
        }
        if have.contains(WatchKind::Recursive) {
            self.recursive -= 1;
        }
        if have.contains(WatchKind::Data) {
            self.count_on_parent(path, 1, false);
        }
        self.unindex(conn, path, have);
        true
    }

    fn mask(&self, conn: ConnId, path: &str) -> Kinds {
        self.by_conn
            .get(&conn)
            .and_then(|p| p.get(path))
            .copied()
            .unwrap_or(Kinds::NONE)
    }

    /// Drops every watch of a connection (its socket closed).
    pub fn remove_conn(&mut self, conn: ConnId) {
        let Some(paths) = self.by_conn.remove(&conn) else {
            return;
        };
        for (path, mask) in paths {
            if let Some(pw) = self.paths.get_mut(&*path) {
                for kind in mask.iter() {
                    pw.set(kind).remove(&conn);
                }
                if pw.is_empty() {
                    self.paths.remove(&*path);
                }
            }
            if mask.contains(WatchKind::Recursive) {
                self.recursive -= 1;
            }
            if mask.contains(WatchKind::Data) {
                self.count_on_parent(&path, 1, false);
            }
        }
    }

    /// Collects into `out` (sorted, deduplicated) the connections to notify of `event` on
    /// `path`, removing the one-shot watches that fire. Returns how many watches of each kind
    /// fired (a connection holding several kinds counts in each).
    pub fn trigger(&mut self, event: i32, path: &str, out: &mut Vec<ConnId>) -> FiredKinds {
        out.clear();
        let mut kinds = FiredKinds::default();
        if self.paths.is_empty() {
            // No watch anywhere (recursive ones are kept under `paths` too).
            return kinds;
        }
        let (one_shot, persistent_here, recursive) = match event {
            event_type::NODE_CHILDREN_CHANGED => (Kinds::of(&[WatchKind::Child]), true, false),
            event_type::NODE_DELETED => {
                (Kinds::of(&[WatchKind::Data, WatchKind::Child]), true, true)
            }
            _ => (Kinds::of(&[WatchKind::Data]), true, true),
        };
        let mut fired: Vec<(WatchKind, Vec<ConnId>)> = Vec::new();
        if let Some(pw) = self.paths.get_mut(path) {
            for kind in one_shot.iter() {
                if !pw.set(kind).is_empty() {
                    let conns: Vec<ConnId> = pw.set(kind).drain().collect();
                    out.extend_from_slice(&conns);
                    if kind == WatchKind::Child {
                        kinds.child += conns.len() as u64;
                    } else {
                        kinds.data += conns.len() as u64;
                    }
                    fired.push((kind, conns));
                }
            }
            if persistent_here {
                kinds.persistent += pw.persistent.len() as u64;
                out.extend(pw.persistent.iter().copied());
            }
            if pw.is_empty() {
                self.paths.remove(path);
            }
        }
        for (kind, conns) in fired {
            if kind == WatchKind::Data {
                self.count_on_parent(path, conns.len(), false);
            }
            for conn in conns {
                self.unindex(conn, path, Kinds::of(&[kind]));
            }
        }
        if recursive && self.recursive > 0 {
            for p in path::with_ancestors(path) {
                if let Some(pw) = self.paths.get(p) {
                    kinds.persistent += pw.recursive.len() as u64;
                    out.extend(pw.recursive.iter().copied());
                }
            }
        }
        if out.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
        kinds
    }

    /// The kinds a checkWatches/removeWatches watcher type denotes; `None` if the release
    /// line does not know it (3.8 knows no Persistent or PersistentRecursive, and its Any
    /// covers every kind all the same).
    fn kinds_for(watcher: i32, version: ZookeeperVersion) -> Option<Kinds> {
        let persistent = version.persistent_watcher_types();
        Some(match watcher {
            watcher_type::CHILDREN => Kinds::of(&[WatchKind::Child]),
            watcher_type::DATA => Kinds::of(&[WatchKind::Data]),
            watcher_type::ANY => Kinds::of(&WatchKind::ALL),
            watcher_type::PERSISTENT if persistent => Kinds::of(&[WatchKind::Persistent]),
            watcher_type::PERSISTENT_RECURSIVE if persistent => Kinds::of(&[WatchKind::Recursive]),
            _ => return None,
        })
    }

    /// checkWatches: `None` for an unknown type, else whether a matching watch exists.
    pub fn check(
        &self,
        conn: ConnId,
        path: &str,
        watcher: i32,
        version: ZookeeperVersion,
    ) -> Option<bool> {
        Some(
            !self
                .mask(conn, path)
                .intersect(Self::kinds_for(watcher, version)?)
                .is_empty(),
        )
    }

    /// removeWatches: `None` for an unknown type, else whether anything was removed.
    pub fn remove(
        &mut self,
        conn: ConnId,
        path: &str,
        watcher: i32,
        version: ZookeeperVersion,
    ) -> Option<bool> {
        let kinds = Self::kinds_for(watcher, version)?;
        Some(self.remove_kinds(conn, path, kinds))
    }

    /// How many paths one connection watches (any kind).
    pub fn paths_of(&self, conn: ConnId) -> usize {
        self.by_conn.get(&conn).map_or(0, |p| p.len())
    }

    /// The paths where one connection holds a data-table watch (data/exist, persistent or
    /// persistent-recursive), in no order.
    pub fn data_paths_of(&self, conn: ConnId) -> Vec<String> {
        let table = Kinds::of(&[WatchKind::Data, WatchKind::Persistent, WatchKind::Recursive]);
        self.by_conn.get(&conn).map_or_else(Vec::new, |p| {
            p.iter()
                .filter(|(_, m)| !m.intersect(table).is_empty())
                .map(|(path, _)| path.to_string())
                .collect()
        })
    }

    /// The watches one connection holds, with their kinds, sorted by path.
    pub fn of_conn(&self, conn: ConnId) -> Vec<(String, Vec<WatchKind>)> {
        let mut v: Vec<(String, Vec<WatchKind>)> = self
            .by_conn
            .get(&conn)
            .map(|p| {
                p.iter()
                    .map(|(k, m)| (k.to_string(), m.iter().collect()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Watchers on one path: (data/exist, child, persistent, recursive) connection counts.
    pub fn on_path(&self, path: &str) -> [usize; 4] {
        self.paths.get(path).map_or([0; 4], |pw| {
            [
                pw.data.len(),
                pw.child.len(),
                pw.persistent.len(),
                pw.recursive.len(),
            ]
        })
    }

    /// The `n` paths with the most watchers, with their per-kind counts, most watched first.
    pub fn most_watched(&self, n: usize) -> Vec<(String, [usize; 4])> {
        let mut v: Vec<(&str, [usize; 4])> = self
            .paths
            .iter()
            .map(|(p, pw)| {
                (
                    &**p,
                    [
                        pw.data.len(),
                        pw.child.len(),
                        pw.persistent.len(),
                        pw.recursive.len(),
                    ],
                )
            })
            .collect();
        let total = |k: &[usize; 4]| k.iter().sum::<usize>();
        if v.len() > n {
            v.select_nth_unstable_by(n, |a, b| total(&b.1).cmp(&total(&a.1)));
            v.truncate(n);
        }
        v.sort_by(|a, b| total(&b.1).cmp(&total(&a.1)).then(a.0.cmp(b.0)));
        v.into_iter().map(|(p, k)| (p.to_string(), k)).collect()
    }

    /// Whether no watch of any kind is set.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Number of distinct watched paths.
    pub fn path_count(&self) -> usize {
        self.paths.len()
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
        self.by_conn
            .get(&conn)
            .map_or(0, |paths| paths.values().map(|m| m.len()).sum())
    }

    /// Number of connections holding any watch.
    #[cfg(test)]
    pub fn watching_connections(&self) -> usize {
        self.by_conn.len()
    }
}

impl Watches {
    /// Connections holding at least one watch.
    pub fn conns(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.by_conn.keys().copied()
    }

    /// Checks that the per-path and per-connection tables mirror each other and that the
    /// recursive-watch count is right (for invariant checks).
    pub fn check_consistency(&self) -> Result<(), String> {
        let mut recursive = 0;
        let mut on_children: HashMap<&str, usize> = HashMap::new();
        for (path, pw) in &self.paths {
            if let (Some(parent), n @ 1..) = (Self::parent_key(path), pw.data.len()) {
                *on_children.entry(parent).or_default() += n;
            }
        }
        if on_children.len() != self.data_on_children.len()
            || on_children
                .iter()
                .any(|(p, n)| self.data_on_children.get(*p) != Some(n))
        {
            return Err(format!(
                "data watches on children per parent: counted {on_children:?}, kept {:?}",
                self.data_on_children
            ));
        }
        for (path, pw) in &self.paths {
            if pw.is_empty() {
                return Err(format!("empty watch entry kept for {path}"));
            }
            for (kind, set) in [
                (WatchKind::Data, &pw.data),
                (WatchKind::Child, &pw.child),
                (WatchKind::Persistent, &pw.persistent),
                (WatchKind::Recursive, &pw.recursive),
            ] {
                for conn in set {
                    if !self.mask(*conn, path).contains(kind) {
                        return Err(format!(
                            "{kind:?} watch on {path} by conn {conn} missing from its conn index"
                        ));
                    }
                }
                if kind == WatchKind::Recursive {
                    recursive += set.len();
                }
            }
        }
        for (conn, paths) in &self.by_conn {
            if paths.is_empty() {
                return Err(format!("empty watch index kept for conn {conn}"));
            }
            for (path, mask) in paths {
                if mask.is_empty() {
                    return Err(format!("empty watch mask for conn {conn} on {path}"));
                }
                for kind in WatchKind::ALL {
                    let indexed = self.paths.get(&**path).is_some_and(|pw| match kind {
                        WatchKind::Data => pw.data.contains(conn),
                        WatchKind::Child => pw.child.contains(conn),
                        WatchKind::Persistent => pw.persistent.contains(conn),
                        WatchKind::Recursive => pw.recursive.contains(conn),
                    });
                    if mask.contains(kind) != indexed {
                        return Err(format!(
                            "{kind:?} watch on {path} by conn {conn}: conn index and path table disagree"
                        ));
                    }
                }
            }
        }
        if recursive != self.recursive {
            return Err(format!(
                "recursive watch count {} but {recursive} registered",
                self.recursive
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::WatchKind::*;
    use super::*;
    use crate::ZookeeperVersion::{V3_8, V3_9};
    use zkd_protocol::event_type::*;

    /// A watch table holding `watches` (connection, path, kind), and an empty list for the
    /// connections a trigger notifies.
    fn watching(watches: &[(ConnId, &str, WatchKind)]) -> (Watches, Vec<ConnId>) {
        let mut w = Watches::default();
        for &(conn, path, kind) in watches {
            w.add(conn, path, kind);
        }
        (w, Vec::new())
    }

    #[test]
    fn one_shot_fires_once_and_persistent_stays() {
        let (mut w, mut out) = watching(&[(1, "/a", Data), (1, "/a", Data), (2, "/a", Persistent)]);
        w.trigger(NODE_DATA_CHANGED, "/a", &mut out);
        assert_eq!(out, [1, 2]);
        w.trigger(NODE_DATA_CHANGED, "/a", &mut out);
        assert_eq!(out, [2]);
        assert_eq!(w.check(1, "/a", watcher_type::DATA, V3_9), Some(false));
    }

    #[test]
    fn data_watches_on_children_are_counted_per_parent() {
        let mut w = Watches::default();
        let mut out = Vec::new();
        w.add(1, "/e/a", Data);
        w.add(2, "/e/a", Data);
        w.add(2, "/e/b", Data);
        w.add(3, "/e/b", Child);
        w.add(3, "/e", Child);
        w.add(3, "/", Data);
        assert_eq!((w.data_on_children("/e"), w.data_on_children("/")), (3, 0));
        w.add(3, "/e", Data);
        assert_eq!(w.data_on_children("/"), 1);
        w.trigger(NODE_DELETED, "/e/a", &mut out);
        assert_eq!(w.data_on_children("/e"), 1);
        w.remove_conn(2);
        assert_eq!(w.data_on_children("/e"), 0);
        w.add(4, "/e/c", Data);
        assert_eq!(w.remove(4, "/e/c", watcher_type::ANY, V3_9), Some(true));
        assert_eq!(w.data_on_children("/e"), 0);
        assert_eq!(w.check_consistency(), Ok(()));
    }

    #[test]
    fn delete_notifies_each_connection_once() {
        let (mut w, mut out) = watching(&[(1, "/a", Data), (1, "/a", Child), (1, "/", Recursive)]);
        w.trigger(NODE_DELETED, "/a", &mut out);
        assert_eq!(out, [1]);
        assert_eq!(w.count(), 1);
    }

    #[test]
    fn recursive_never_sees_children_changed() {
        let (mut w, mut out) = watching(&[(1, "/q", Recursive), (2, "/q", Persistent)]);
        w.trigger(NODE_CHILDREN_CHANGED, "/q", &mut out);
        assert_eq!(out, [2]);
        w.trigger(NODE_CREATED, "/q/b", &mut out);
        assert_eq!(out, [1]);
    }

    #[test]
    fn removal_and_connection_cleanup() {
        let (mut w, mut out) = watching(&[(1, "/a", Child), (1, "/a", Recursive)]);
        assert_eq!(w.remove(1, "/a", watcher_type::DATA, V3_9), Some(false));
        assert_eq!(w.remove(1, "/a", 9, V3_9), None);
        assert_eq!(
            w.remove(1, "/a", watcher_type::PERSISTENT_RECURSIVE, V3_9),
            Some(true)
        );
        w.remove_conn(1);
        w.trigger(NODE_DELETED, "/a", &mut out);
        assert!(out.is_empty());
        assert_eq!(w.count(), 0);
        assert_eq!(w.watching_connections(), 0);
    }

    #[test]
    fn release_3_8_knows_no_persistent_watcher_types_and_any_removes_them() {
        let (mut w, _) = watching(&[(1, "/a", Persistent), (1, "/b", Recursive)]);
        for t in [watcher_type::PERSISTENT, watcher_type::PERSISTENT_RECURSIVE] {
            assert_eq!(w.check(1, "/a", t, V3_8), None);
            assert_eq!(w.remove(1, "/b", t, V3_8), None);
        }
        assert_eq!(w.check(1, "/a", watcher_type::ANY, V3_8), Some(true));
        assert_eq!(w.remove(1, "/a", watcher_type::ANY, V3_8), Some(true));
        assert_eq!(w.remove(1, "/b", watcher_type::ANY, V3_8), Some(true));
        assert_eq!(w.count(), 0);
    }
}
