//! The herd detector: how many watchers each change wakes, which paths wake the most, and
//! changes that wake at least the configured number of watchers ("herd events"), followed for a
//! short window to count how many woken connections re-read the same node.

use std::collections::{HashMap, HashSet};

use zkd_protocol::event_type;

use crate::ConnId;

/// Upper bounds of the fan-out histogram buckets (watchers notified by one change).
pub const FANOUT_BUCKETS: [u64; 11] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000];

/// How long after a herd event re-reads of the same node are counted.
pub const REREAD_WINDOW_MS: i64 = 1000;

/// Most paths whose fan-out is remembered; the path with the smallest total fan-out makes
/// room for a new one.
const MAX_TRACKED_PATHS: usize = 1024;

/// Most herd events kept in the record.
const MAX_RECENT_EVENTS: usize = 32;

/// Fan-out of one path since start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathFanout {
    pub path: String,
    /// Changes on this path that notified at least one watcher.
    pub changes: u64,
    /// Notifications those changes sent.
    pub notifications: u64,
    /// The most watchers one change on this path notified.
    pub max_fanout: u64,
    /// Notifications sent to one-shot child watches (watchers of this node's children).
    pub child_watch_notifications: u64,
    /// Notifications sent to one-shot exist/data watches on this node.
    pub data_watch_notifications: u64,
    /// Notifications sent to persistent and persistent-recursive watches.
    pub persistent_notifications: u64,
    /// Herd events on this path.
    pub herd_events: u64,
}

/// One change that woke at least the configured number of watchers.
#[derive(Clone, Debug, PartialEq)]
pub struct HerdEvent {
    pub path: String,
    /// `NodeChildrenChanged`, `NodeDeleted`, …
    pub event: &'static str,
    pub zxid: i64,
    pub at_ms: i64,
    /// Connections woken.
    pub woken: u64,
    /// The node whose re-reads are counted: the path itself for a children change, else its
    /// parent.
    pub reread_path: String,
    /// Woken connections that read `reread_path` within the window (final once `open` is false).
    pub rereads: u64,
    /// Whether the re-read window is still open.
    pub open: bool,
}

/// What [`Herd`] reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HerdReport {
    /// The configured threshold (0 = off).
    pub warn_at: u64,
    pub window_ms: i64,
    /// Changes that notified at least one watcher.
    pub changes_notified: u64,
    /// Notifications sent in total.
    pub notifications: u64,
    /// Count of changes per bucket of [`FANOUT_BUCKETS`] (non-cumulative), plus one more bucket
    /// for larger fan-outs.
    pub fanout_histogram: Vec<u64>,
    /// Herd events since start.
    pub herd_events: u64,
    /// Paths by decreasing largest fan-out (then total notifications).
    pub top_paths: Vec<PathFanout>,
    /// The latest herd events, oldest first.
    pub recent_events: Vec<HerdEvent>,
}

#[derive(Debug)]
struct Pending {
    event: HerdEvent,
    woken: HashSet<ConnId>,
    reread: HashSet<ConnId>,
    deadline: i64,
}

/// The detector's state, owned by the core.
#[derive(Debug)]
pub struct Herd {
    warn_at: u64,
    changes_notified: u64,
    notifications: u64,
    histogram: [u64; FANOUT_BUCKETS.len() + 1],
    paths: HashMap<Box<str>, PathFanout>,
    herd_events: u64,
    pending: Vec<Pending>,
    recent: Vec<HerdEvent>,
}

/// Which kinds of watch a notification went to.
#[derive(Clone, Copy, Debug, Default)]
pub struct FiredKinds {
    pub child: u64,
    pub data: u64,
    pub persistent: u64,
}

impl Herd {
    /// A detector that warns at `warn_at` watchers per change (0 = never).
    pub fn new(warn_at: u64) -> Herd {
        Herd {
            warn_at,
            changes_notified: 0,
            notifications: 0,
            histogram: [0; FANOUT_BUCKETS.len() + 1],
            paths: HashMap::new(),
            herd_events: 0,
            pending: Vec::new(),
            recent: Vec::new(),
        }
    }

    /// Records one change on `path` that notified `targets`.
    pub fn fired(
        &mut self,
        event: i32,
        path: &str,
        zxid: i64,
        now: i64,
        targets: &[ConnId],
        kinds: FiredKinds,
    ) {
        let n = targets.len() as u64;
        if n == 0 {
            return;
        }
        self.changes_notified += 1;
        self.notifications += n;
        let bucket = FANOUT_BUCKETS
            .iter()
            .position(|&b| n <= b)
            .unwrap_or(FANOUT_BUCKETS.len());
        self.histogram[bucket] += 1;
        let herd = self.warn_at > 0 && n >= self.warn_at;
        if self.track(path, n) {
            if let Some(p) = self.paths.get_mut(path) {
                p.changes += 1;
                p.notifications += n;
                p.max_fanout = p.max_fanout.max(n);
                p.child_watch_notifications += kinds.child;
                p.data_watch_notifications += kinds.data;
                p.persistent_notifications += kinds.persistent;
                if herd {
                    p.herd_events += 1;
                }
            }
        }
        if herd {
            self.herd_events += 1;
            let reread_path = if event == event_type::NODE_CHILDREN_CHANGED {
                path.to_string()
            } else {
                crate::data::path::parent(path).unwrap_or("/").to_string()
            };
            self.pending.push(Pending {
                event: HerdEvent {
                    path: path.to_string(),
                    event: event_name(event),
                    zxid,
                    at_ms: now,
                    woken: n,
                    reread_path,
                    rereads: 0,
                    open: true,
                },
                woken: targets.iter().copied().collect(),
                reread: HashSet::new(),
                deadline: now + REREAD_WINDOW_MS,
            });
        }
    }

    /// Whether `path` has (or now got) an entry in the per-path table.
    fn track(&mut self, path: &str, n: u64) -> bool {
        if self.paths.contains_key(path) {
            return true;
        }
        if self.paths.len() >= MAX_TRACKED_PATHS {
            let smallest = self
                .paths
                .iter()
                .min_by_key(|(_, p)| (p.max_fanout, p.notifications))
                .map(|(k, p)| (k.clone(), p.max_fanout));
            match smallest {
                Some((key, max)) if max < n => {
                    self.paths.remove(&key);
                }
                _ => return false,
            }
        }
        self.paths.insert(
            path.into(),
            PathFanout {
                path: path.to_string(),
                ..PathFanout::default()
            },
        );
        true
    }

    /// A connection read `path` (getChildren, getData or exists).
    pub fn read(&mut self, conn: ConnId, path: &str, now: i64) {
        for p in &mut self.pending {
            if now <= p.deadline && p.event.reread_path == path && p.woken.contains(&conn) {
                p.reread.insert(conn);
            }
        }
    }

    /// Whether any re-read window is open.
    pub fn watching_rereads(&self) -> bool {
        !self.pending.is_empty()
    }

    /// When the next re-read window closes.
    pub fn next_deadline(&self) -> Option<i64> {
        self.pending.iter().map(|p| p.deadline).min()
    }

    /// Closes the windows that ended by `now`, logging one warning per herd event; returns
    /// how many closed (the newest of [`HerdReport`]'s recent events).
    pub fn close_windows(&mut self, now: i64) -> usize {
        if self.pending.is_empty() {
            return 0;
        }
        let (done, open): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| now >= p.deadline);
        self.pending = open;
        let closed = done.len();
        for p in done {
            let mut e = p.event;
            e.rereads = p.reread.len() as u64;
            e.open = false;
            tracing::warn!(
                "herd: {} on {} woke {} sessions, {} of them re-read {} within {} ms; \
                 hint: have each waiter watch only its predecessor instead of all watching {}",
                e.event,
                e.path,
                e.woken,
                e.rereads,
                e.reread_path,
                REREAD_WINDOW_MS,
                e.path
            );
            self.recent.push(e);
            if self.recent.len() > MAX_RECENT_EVENTS {
                self.recent.remove(0);
            }
        }
        closed
    }

    /// The last `n` herd events closed, oldest first.
    pub fn last_closed(&self, n: usize) -> &[HerdEvent] {
        &self.recent[self.recent.len().saturating_sub(n)..]
    }

    /// The record, with at most `top` paths.
    pub fn report(&self, top: usize) -> HerdReport {
        let mut paths: Vec<&PathFanout> = self.paths.values().collect();
        paths.sort_by(|a, b| {
            (b.max_fanout, b.notifications, &a.path).cmp(&(a.max_fanout, a.notifications, &b.path))
        });
        let mut recent = self.recent.clone();
        recent.extend(self.pending.iter().map(|p| HerdEvent {
            rereads: p.reread.len() as u64,
            ..p.event.clone()
        }));
        HerdReport {
            warn_at: self.warn_at,
            window_ms: REREAD_WINDOW_MS,
            changes_notified: self.changes_notified,
            notifications: self.notifications,
            fanout_histogram: self.histogram.to_vec(),
            herd_events: self.herd_events,
            top_paths: paths.into_iter().take(top).cloned().collect(),
            recent_events: recent,
        }
    }

    /// Herd events since start.
    pub fn herd_events(&self) -> u64 {
        self.herd_events
    }

    /// Total notifications sent.
    pub fn notifications(&self) -> u64 {
        self.notifications
    }
}

/// The Java name of a watcher event type.
pub fn event_name(event: i32) -> &'static str {
    match event {
        event_type::NODE_CREATED => "NodeCreated",
        event_type::NODE_DELETED => "NodeDeleted",
        event_type::NODE_DATA_CHANGED => "NodeDataChanged",
        event_type::NODE_CHILDREN_CHANGED => "NodeChildrenChanged",
        _ => "None",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn herd_event_counts_rereads_of_the_parent_within_the_window() {
        let mut h = Herd::new(3);
        let woken: Vec<ConnId> = (1..=4).collect();
        h.fired(
            event_type::NODE_CHILDREN_CHANGED,
            "/election",
            7,
            1000,
            &woken,
            FiredKinds {
                child: 4,
                ..FiredKinds::default()
            },
        );
        h.read(1, "/election", 1100);
        h.read(2, "/election", 1200);
        h.read(2, "/election", 1300);
        h.read(9, "/election", 1300); // not woken
        h.read(3, "/other", 1300);
        h.read(4, "/election", 1000 + REREAD_WINDOW_MS + 1); // too late
        h.close_windows(1000 + REREAD_WINDOW_MS);
        let r = h.report(10);
        assert_eq!(r.herd_events, 1);
        assert_eq!(r.recent_events.len(), 1);
        assert_eq!(r.recent_events[0].rereads, 2);
        assert!(!r.recent_events[0].open);
        assert_eq!(r.top_paths[0].path, "/election");
        assert_eq!(r.top_paths[0].child_watch_notifications, 4);
        assert_eq!(r.fanout_histogram[2], 1); // 3..=5
    }

    #[test]
    fn small_fanout_is_counted_but_is_no_herd() {
        let mut h = Herd::new(3);
        h.fired(
            event_type::NODE_DELETED,
            "/e/n1",
            1,
            0,
            &[1, 2],
            FiredKinds::default(),
        );
        assert!(!h.watching_rereads());
        let r = h.report(10);
        assert_eq!(
            (r.herd_events, r.notifications, r.changes_notified),
            (0, 2, 1)
        );
        let off = Herd::new(0);
        assert_eq!(off.report(1).warn_at, 0);
    }

    #[test]
    fn the_path_table_stays_bounded() {
        let mut h = Herd::new(0);
        for i in 0..(MAX_TRACKED_PATHS + 10) {
            h.fired(
                event_type::NODE_DELETED,
                &format!("/n{i}"),
                1,
                0,
                &[1],
                FiredKinds::default(),
            );
        }
        h.fired(
            event_type::NODE_DELETED,
            "/big",
            1,
            0,
            &[1, 2, 3],
            FiredKinds::default(),
        );
        assert_eq!(h.paths.len(), MAX_TRACKED_PATHS);
        assert_eq!(h.report(1).top_paths[0].path, "/big");
    }
}
