//! Watch tables: one-shot data/exist and child watches, persistent and
//! persistent-recursive watches, all owned by connections, with at most one event per
//! connection per trigger.

use std::collections::{HashMap, HashSet};

use zkd_protocol::{event_type, watcher_type};

use crate::ZookeeperVersion;

use crate::data::counted::kept_as_counted;
use crate::data::keyed::KeyedMap;
use crate::data::path;
use crate::watch::herd_detector::FiredKinds;
use crate::ConnId;

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

/// The kinds of the data table (`wchs`, `wchc`, `wchp`): data/exist, persistent and
/// persistent-recursive watches; child watches are in the child table only.
const TABLE: Kinds = Kinds(1 | 4 | 8);

impl Kinds {
    /// Whether the set holds a data-table kind.
    fn in_table(self) -> bool {
        !self.intersect(TABLE).is_empty()
    }

    /// Registrations the set counts for in `zk_watch_count` (a persistent watch is in both
    /// tables).
    fn weight(self) -> usize {
        self.len() + usize::from(self.contains(WatchKind::Persistent))
    }
}

/// The connections watching one path, per kind.
#[derive(Debug, Default)]
struct KindSets {
    data: HashSet<ConnId>,
    child: HashSet<ConnId>,
    persistent: HashSet<ConnId>,
    recursive: HashSet<ConnId>,
}

impl KindSets {
    fn set(&mut self, kind: WatchKind) -> &mut HashSet<ConnId> {
        match kind {
            WatchKind::Data => &mut self.data,
            WatchKind::Child => &mut self.child,
            WatchKind::Persistent => &mut self.persistent,
            WatchKind::Recursive => &mut self.recursive,
        }
    }

    fn get(&self, kind: WatchKind) -> &HashSet<ConnId> {
        match kind {
            WatchKind::Data => &self.data,
            WatchKind::Child => &self.child,
            WatchKind::Persistent => &self.persistent,
            WatchKind::Recursive => &self.recursive,
        }
    }
}

/// Who watches one path. Most paths are watched by one connection: that case is kept inline
/// (16 bytes) and the per-kind sets are made only when a second connection comes.
#[derive(Debug)]
enum PathWatches {
    One(ConnId, Kinds),
    Many(Box<KindSets>),
}

impl PathWatches {
    fn insert(&mut self, conn: ConnId, kind: WatchKind) {
        match self {
            PathWatches::One(c, k) if *c == conn || k.is_empty() => {
                *c = conn;
                *k = k.with(kind);
            }
            PathWatches::One(c, k) => {
                let mut sets = KindSets::default();
                for have in k.iter() {
                    sets.set(have).insert(*c);
                }
                sets.set(kind).insert(conn);
                *self = PathWatches::Many(Box::new(sets));
            }
            PathWatches::Many(sets) => {
                sets.set(kind).insert(conn);
            }
        }
    }

    fn remove(&mut self, conn: ConnId, kinds: Kinds) {
        match self {
            PathWatches::One(c, k) if *c == conn => *k = k.without(kinds),
            PathWatches::One(..) => {}
            PathWatches::Many(sets) => {
                for kind in kinds.iter() {
                    sets.set(kind).remove(&conn);
                }
            }
        }
    }

    /// Removes and returns the connections holding `kind`.
    fn take(&mut self, kind: WatchKind) -> Vec<ConnId> {
        match self {
            PathWatches::One(c, k) if k.contains(kind) => {
                *k = k.without(Kinds::of(&[kind]));
                vec![*c]
            }
            PathWatches::One(..) => Vec::new(),
            PathWatches::Many(sets) => sets.set(kind).drain().collect(),
        }
    }

    /// Appends the connections holding `kind` to `out`.
    fn extend_conns(&self, kind: WatchKind, out: &mut Vec<ConnId>) {
        match self {
            PathWatches::One(c, k) if k.contains(kind) => out.push(*c),
            PathWatches::One(..) => {}
            PathWatches::Many(sets) => out.extend(sets.get(kind).iter().copied()),
        }
    }

    fn contains(&self, conn: ConnId, kind: WatchKind) -> bool {
        match self {
            PathWatches::One(c, k) => *c == conn && k.contains(kind),
            PathWatches::Many(sets) => sets.get(kind).contains(&conn),
        }
    }

    /// How many connections hold `kind`.
    fn len(&self, kind: WatchKind) -> usize {
        match self {
            PathWatches::One(_, k) => usize::from(k.contains(kind)),
            PathWatches::Many(sets) => sets.get(kind).len(),
        }
    }

    /// Connections per kind: data/exist, child, persistent, recursive.
    fn counts(&self) -> [usize; 4] {
        WatchKind::ALL.map(|k| self.len(k))
    }

    /// Whether some connection holds a data-table kind here.
    fn in_table(&self) -> bool {
        match self {
            PathWatches::One(_, k) => k.in_table(),
            PathWatches::Many(sets) => {
                !(sets.data.is_empty() && sets.persistent.is_empty() && sets.recursive.is_empty())
            }
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            PathWatches::One(_, k) => k.is_empty(),
            PathWatches::Many(sets) => WatchKind::ALL.iter().all(|k| sets.get(*k).is_empty()),
        }
    }
}

/// One connection's watches: the kinds it holds per path.
#[derive(Debug, Default)]
struct ConnWatches {
    paths: HashMap<Box<str>, Kinds>,
    /// Paths where it holds a data-table kind.
    in_table: usize,
    /// Its registrations, a kind on a path each (kept on every change, so that a session
    /// report reads it without walking the connection's paths).
    kinds: usize,
    /// Paths added or removed so far: a report copied in slices starts over when it moved.
    changes: u64,
}

/// Running totals, kept on every change so that reports (`wchs`, `mntr`, `srvr`) read them
/// without walking the tables.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    /// Registrations in the data and child tables (`zk_watch_count`).
    total: usize,
    /// (connection, path) pairs with a data-table kind.
    table_pairs: usize,
    /// Paths with a data-table kind.
    table_paths: usize,
    /// Connections with a data-table kind on some path.
    table_conns: usize,
}

impl Counts {
    /// One connection's kinds on one path went from `old` to `new`; `conn` holds that
    /// connection's own counts, kept here too.
    fn pair_changed(&mut self, old: Kinds, new: Kinds, conn: &mut ConnWatches) {
        self.total = self.total + new.weight() - old.weight();
        conn.kinds = conn.kinds + new.len() - old.len();
        match (old.in_table(), new.in_table()) {
            (false, true) => {
                self.table_pairs += 1;
                conn.in_table += 1;
                if conn.in_table == 1 {
                    self.table_conns += 1;
                }
            }
            (true, false) => {
                self.table_pairs -= 1;
                conn.in_table -= 1;
                if conn.in_table == 0 {
                    self.table_conns -= 1;
                }
            }
            _ => {}
        }
    }

    /// A path's data-table entry appeared (`false` → `true`) or went.
    fn path_changed(&mut self, before: bool, after: bool) {
        match (before, after) {
            (false, true) => self.table_paths += 1,
            (true, false) => self.table_paths -= 1,
            _ => {}
        }
    }
}

/// One slice of a connection's data-table watch paths ([`Watches::data_paths_slice`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PathsSlice {
    /// The paths of the slice's entries that hold a data-table kind, in no order.
    pub paths: Vec<String>,
    /// Entries of the table the slice took (with or without a data-table kind).
    pub walked: usize,
    /// Where the next slice starts; `None` after the last.
    pub next: Option<usize>,
    /// The connection's table's change count when the slice was copied.
    pub changes: u64,
}

/// The data table's summary, as `wchs` shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableSummary {
    /// Connections holding a data-table watch.
    pub connections: usize,
    /// Paths with a data-table watch.
    pub paths: usize,
    /// (connection, path) pairs with a data-table watch.
    pub watches: usize,
}

/// Gives back a table's memory once most of it is unused: hash tables never shrink on
/// their own, so a burst of watches would otherwise stay resident after they are gone.
/// Shrinks only below an eighth of the capacity (to twice the length), so that a table that
/// grows and shrinks by a little does not rehash every time.
fn shrink_if_sparse<K: Eq + std::hash::Hash, V, S: std::hash::BuildHasher>(
    map: &mut HashMap<K, V, S>,
) {
    const MIN: usize = 64;
    if map.capacity() > MIN && map.len() < map.capacity() / 8 {
        map.shrink_to((map.len() * 2).max(MIN / 2));
    }
}

/// Every watch of every connection.
#[derive(Debug, Default)]
pub struct Watches {
    paths: KeyedMap<Box<str>, PathWatches>,
    by_conn: KeyedMap<ConnId, ConnWatches>,
    recursive: usize,
    /// Per parent path: one-shot data/exist watches held on its children (kept up to date on
    /// every change, so the herd record reads it in O(1)).
    data_on_children: KeyedMap<Box<str>, usize>,
    counts: Counts,
}

impl Watches {
    /// Registers a watch; registering the same (connection, path, kind) twice is a no-op.
    pub fn add(&mut self, conn: ConnId, path: &str, kind: WatchKind) {
        let cw = self.by_conn.entry(conn).or_default();
        let old = match cw.paths.get_mut(path) {
            Some(mask) if mask.contains(kind) => return,
            Some(mask) => {
                let old = *mask;
                *mask = old.with(kind);
                old
            }
            None => {
                cw.paths.insert(path.into(), Kinds::NONE.with(kind));
                cw.changes += 1;
                Kinds::NONE
            }
        };
        self.counts.pair_changed(old, old.with(kind), cw);
        if kind == WatchKind::Recursive {
            self.recursive += 1;
        }
        if kind == WatchKind::Data {
            self.count_on_parent(path, 1, true);
        }
        match self.paths.get_mut(path) {
            Some(pw) => {
                let before = pw.in_table();
                pw.insert(conn, kind);
                self.counts.path_changed(before, pw.in_table());
            }
            None => {
                let pw = PathWatches::One(conn, Kinds::NONE.with(kind));
                self.counts.path_changed(false, pw.in_table());
                self.paths.insert(path.into(), pw);
            }
        }
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
                shrink_if_sparse(&mut self.data_on_children);
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
        if let Some(cw) = self.by_conn.get_mut(&conn) {
            if let Some(mask) = cw.paths.get_mut(path) {
                let old = *mask;
                let new = old.without(kinds);
                *mask = new;
                self.counts.pair_changed(old, new, cw);
                if new.is_empty() {
                    cw.paths.remove(path);
                    cw.changes += 1;
                    shrink_if_sparse(&mut cw.paths);
                }
            }
            if cw.paths.is_empty() {
                self.by_conn.remove(&conn);
                shrink_if_sparse(&mut self.by_conn);
            }
        }
    }

    /// Removes `path`'s entry if no watch is left on it.
    fn drop_if_empty(&mut self, path: &str) {
        if self.paths.get(path).is_some_and(PathWatches::is_empty) {
            self.paths.remove(path);
            shrink_if_sparse(&mut self.paths);
        }
    }

    /// Removes the given kinds of `conn`'s watches at `path`; returns whether any existed.
    fn remove_kinds(&mut self, conn: ConnId, path: &str, kinds: Kinds) -> bool {
        let have = self.mask(conn, path).intersect(kinds);
        if have.is_empty() {
            return false;
        }
        if let Some(pw) = self.paths.get_mut(path) {
            let before = pw.in_table();
            pw.remove(conn, have);
            self.counts.path_changed(before, pw.in_table());
            self.drop_if_empty(path);
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
            .and_then(|cw| cw.paths.get(path))
            .copied()
            .unwrap_or(Kinds::NONE)
    }

    /// Drops every watch of a connection (its socket closed).
    pub fn remove_conn(&mut self, conn: ConnId) {
        let Some(mut cw) = self.by_conn.remove(&conn) else {
            return;
        };
        shrink_if_sparse(&mut self.by_conn);
        for (path, mask) in std::mem::take(&mut cw.paths) {
            if let Some(pw) = self.paths.get_mut(&*path) {
                let before = pw.in_table();
                pw.remove(conn, mask);
                self.counts.path_changed(before, pw.in_table());
                if pw.is_empty() {
                    self.paths.remove(&*path);
                }
            }
            self.counts.pair_changed(mask, Kinds::NONE, &mut cw);
            if mask.contains(WatchKind::Recursive) {
                self.recursive -= 1;
            }
            if mask.contains(WatchKind::Data) {
                self.count_on_parent(&path, 1, false);
            }
        }
        shrink_if_sparse(&mut self.paths);
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
            let before = pw.in_table();
            for kind in one_shot.iter() {
                let conns = pw.take(kind);
                if !conns.is_empty() {
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
                kinds.persistent += pw.len(WatchKind::Persistent) as u64;
                pw.extend_conns(WatchKind::Persistent, out);
            }
            self.counts.path_changed(before, pw.in_table());
            self.drop_if_empty(path);
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
                    kinds.persistent += pw.len(WatchKind::Recursive) as u64;
                    pw.extend_conns(WatchKind::Recursive, out);
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
        self.by_conn.get(&conn).map_or(0, |cw| cw.paths.len())
    }

    /// The paths where one connection holds a data-table watch (data/exist, persistent or
    /// persistent-recursive), in no order.
    pub fn data_paths_of(&self, conn: ConnId) -> Vec<String> {
        self.by_conn.get(&conn).map_or_else(Vec::new, |cw| {
            let mut v = Vec::with_capacity(cw.in_table);
            v.extend(
                cw.paths
                    .iter()
                    .filter(|(_, m)| m.in_table())
                    .map(|(path, _)| path.to_string()),
            );
            v
        })
    }

    /// A slice of one connection's data-table watch paths, for a report copied across
    /// several holds of the core's lock: the paths among the entries at positions
    /// `from..from + max` of the connection's table (in the table's own order), the position
    /// after them (`None` once the table is done, or when the connection holds no watch), and
    /// the table's change count. Entries keep their positions while nothing is added to or
    /// removed from the table, so a caller whose slices all show the same count has copied
    /// every path once; when the count moved, it starts over. Costs `max` copies and a walk
    /// (without copying) past the `from` entries before them.
    pub fn data_paths_slice(&self, conn: ConnId, from: usize, max: usize) -> PathsSlice {
        let Some(cw) = self.by_conn.get(&conn) else {
            return PathsSlice::default();
        };
        let paths = cw
            .paths
            .iter()
            .skip(from)
            .take(max)
            .filter(|(_, m)| m.in_table())
            .map(|(path, _)| path.to_string())
            .collect();
        let walked = cw.paths.len().saturating_sub(from).min(max);
        let next = from + walked;
        PathsSlice {
            paths,
            walked,
            next: (next < cw.paths.len()).then_some(next),
            changes: cw.changes,
        }
    }

    /// The watches one connection holds, with their kinds, sorted by path.
    pub fn of_conn(&self, conn: ConnId) -> Vec<(String, Vec<WatchKind>)> {
        let mut v: Vec<(String, Vec<WatchKind>)> = self
            .by_conn
            .get(&conn)
            .map(|cw| {
                cw.paths
                    .iter()
                    .map(|(k, m)| (k.to_string(), m.iter().collect()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Watchers on one path: (data/exist, child, persistent, recursive) connection counts.
    pub fn on_path(&self, path: &str) -> [usize; 4] {
        self.paths.get(path).map_or([0; 4], PathWatches::counts)
    }

    /// The `n` paths with the most watchers, with their per-kind counts, most watched first.
    pub fn most_watched(&self, n: usize) -> Vec<(String, [usize; 4])> {
        let mut v: Vec<(&str, [usize; 4])> = self
            .paths
            .iter()
            .map(|(p, pw)| (&**p, pw.counts()))
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
        self.counts.total
    }

    /// The data table's connections, paths and watches (`wchs`), from running counts.
    pub fn table_summary(&self) -> TableSummary {
        TableSummary {
            connections: self.counts.table_conns,
            paths: self.counts.table_paths,
            watches: self.counts.table_pairs,
        }
    }

    /// Number of watches one connection holds (each kind on each path counts once).
    pub fn count_for(&self, conn: ConnId) -> usize {
        self.by_conn.get(&conn).map_or(0, |cw| cw.kinds)
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
            if let (Some(parent), n @ 1..) = (Self::parent_key(path), pw.len(WatchKind::Data)) {
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
        let mut counted = Counts::default();
        for (path, pw) in &self.paths {
            if pw.is_empty() {
                return Err(format!("empty watch entry kept for {path}"));
            }
            counted.table_paths += usize::from(pw.in_table());
            for kind in WatchKind::ALL {
                let mut conns = Vec::new();
                pw.extend_conns(kind, &mut conns);
                for conn in conns {
                    if !self.mask(conn, path).contains(kind) {
                        return Err(format!(
                            "{kind:?} watch on {path} by conn {conn} missing from its conn index"
                        ));
                    }
                }
                if kind == WatchKind::Recursive {
                    recursive += pw.len(kind);
                }
            }
        }
        for (conn, cw) in &self.by_conn {
            if cw.paths.is_empty() {
                return Err(format!("empty watch index kept for conn {conn}"));
            }
            let in_table = cw.paths.values().filter(|m| m.in_table()).count();
            kept_as_counted(
                &format!("conn {conn}'s paths in the data table"),
                &cw.in_table,
                &in_table,
            )?;
            let kinds: usize = cw.paths.values().map(|m| m.len()).sum();
            kept_as_counted(&format!("conn {conn}'s registrations"), &cw.kinds, &kinds)?;
            counted.table_pairs += in_table;
            counted.table_conns += usize::from(in_table > 0);
            for (path, mask) in &cw.paths {
                if mask.is_empty() {
                    return Err(format!("empty watch mask for conn {conn} on {path}"));
                }
                counted.total += mask.weight();
                for kind in WatchKind::ALL {
                    let indexed = self
                        .paths
                        .get(&**path)
                        .is_some_and(|pw| pw.contains(*conn, kind));
                    if mask.contains(kind) != indexed {
                        return Err(format!(
                            "{kind:?} watch on {path} by conn {conn}: conn index and path table disagree"
                        ));
                    }
                }
            }
        }
        kept_as_counted("running watch counts", &self.counts, &counted)?;
        kept_as_counted("recursive watches", &self.recursive, &recursive)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::WatchKind::*;
    use super::*;
    use crate::ZookeeperVersion::{V3_8, V3_9};
    use zkd_protocol::event_type::*;

    #[test]
    fn a_connections_paths_come_in_slices_that_tell_a_change() {
        let mut w = data_watches(1, "/p", 1000);
        w.add(1, "/children-only", Child);
        let (mut from, mut all) = (0, Vec::new());
        let first = w.data_paths_slice(1, 0, 64).changes;
        loop {
            let s = w.data_paths_slice(1, from, 64);
            assert!(s.walked <= 64 && s.paths.len() <= s.walked);
            assert_eq!(s.changes, first, "nothing changed");
            all.extend(s.paths);
            match s.next {
                Some(n) => from = n,
                None => break,
            }
        }
        all.sort();
        all.dedup();
        assert_eq!(
            all.len(),
            1000,
            "each data watch once, the child watch left out"
        );
        w.add(1, "/new", Data);
        assert_ne!(
            w.data_paths_slice(1, 0, 64).changes,
            first,
            "an added path shows"
        );
        assert_eq!(w.data_paths_slice(2, 0, 64), PathsSlice::default());
    }

    /// A watch table where connection `conn` watches the data of `n` paths, `prefix`
    /// followed by 0, 1, ...
    fn data_watches(conn: ConnId, prefix: &str, n: usize) -> Watches {
        let mut w = Watches::default();
        for i in 0..n {
            w.add(conn, &format!("{prefix}{i}"), Data);
        }
        w
    }

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
    fn running_counts_follow_every_change() {
        let (mut w, mut out) = watching(&[
            (1, "/a", Data),
            (1, "/a", Child),
            (2, "/a", Data),
            (2, "/b", Persistent),
            (3, "/c", Child),
            (3, "/d", Recursive),
        ]);
        let summary = |w: &Watches| {
            let s = w.table_summary();
            (s.connections, s.paths, s.watches, w.count())
        };
        // Data table: conns 1, 2, 3; paths /a, /b, /d; pairs (1,/a) (2,/a) (2,/b) (3,/d).
        assert_eq!(summary(&w), (3, 3, 4, 7));
        assert_eq!(w.check_consistency(), Ok(()));
        w.trigger(NODE_DATA_CHANGED, "/a", &mut out);
        assert_eq!(out, [1, 2]);
        assert_eq!(summary(&w), (2, 2, 2, 5));
        assert_eq!(w.check_consistency(), Ok(()));
        assert_eq!(w.remove(3, "/d", watcher_type::ANY, V3_9), Some(true));
        assert_eq!(summary(&w), (1, 1, 1, 4));
        w.remove_conn(2);
        assert_eq!(summary(&w), (0, 0, 0, 2));
        assert_eq!(w.check_consistency(), Ok(()));
        w.remove_conn(1);
        w.remove_conn(3);
        assert_eq!(summary(&w), (0, 0, 0, 0));
        assert!(w.is_empty());
    }

    #[test]
    fn a_second_connection_on_a_path_keeps_both() {
        let (mut w, mut out) = watching(&[(1, "/a", Data), (1, "/a", Persistent), (2, "/a", Data)]);
        assert_eq!(w.on_path("/a"), [2, 0, 1, 0]);
        assert_eq!(w.check_consistency(), Ok(()));
        w.remove_conn(1);
        assert_eq!(w.on_path("/a"), [1, 0, 0, 0]);
        w.trigger(NODE_DATA_CHANGED, "/a", &mut out);
        assert_eq!(out, [2]);
        assert!(w.is_empty());
        assert_eq!(w.check_consistency(), Ok(()));
    }

    #[test]
    fn tables_give_memory_back_after_mass_removal() {
        let mut w = data_watches(1, "/absent/", 20_000);
        w.add(2, "/kept", Data);
        let full = w.paths.capacity();
        w.remove_conn(1);
        assert!(
            w.paths.capacity() < full / 100,
            "{} of {full}",
            w.paths.capacity()
        );
        assert_eq!(w.on_path("/kept"), [1, 0, 0, 0]);
        // One-shot watches firing one by one shrink the connection's own index as well.
        for i in 0..20_000 {
            w.add(3, &format!("/n/{i}"), Data);
        }
        let mut out = Vec::new();
        for i in 0..19_990 {
            w.trigger(NODE_CREATED, &format!("/n/{i}"), &mut out);
        }
        assert!(w.by_conn[&3].paths.capacity() < 1000);
        assert!(w.paths.capacity() < 1000);
        assert_eq!(w.check_consistency(), Ok(()));
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
