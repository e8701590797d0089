//! Read-only reports of the core's state as plain data, for the layers that format them (the
//! four-letter words, the admin endpoints). Each report copies only what it shows: counters are
//! O(1), per-session and per-connection summaries are a few numbers each, and node listings
//! are paged, so none of them copies the tree or the watch tables under the lock.

pub use crate::watch::watches::PathsSlice;
use std::net::SocketAddr;

use bytes::Bytes;
use zkd_protocol::{perms, Acl, Stat};

use crate::watch::herd_detector::HerdReport;
use crate::{auth::acl, ConnId, Core, Now};

/// Whether a client without credentials (`world:anyone`) may read a node with this ACL. The
/// admin listener's reports show a node's data only then.
pub fn world_readable(node_acl: &[Acl]) -> bool {
    acl::allowed(node_acl, perms::READ, &[world_anyone()])
}

/// The ACL as `getACL` shows it to a client without credentials: unless `world:anyone` has
/// ADMIN on the node, each digest id's password hash is replaced by `x` (`user:x`), as
/// ZooKeeper does.
pub fn acl_for_world(node_acl: &[Acl]) -> Vec<Acl> {
    if acl::allowed(node_acl, perms::ADMIN, &[world_anyone()]) {
        return node_acl.to_vec();
    }
    node_acl
        .iter()
        .map(|a| {
            let mut a = a.clone();
            if a.id.scheme == "digest" {
                if let Some((user, _)) = a.id.id.split_once(':') {
                    a.id.id = format!("{user}:x");
                }
            }
            a
        })
        .collect()
}

fn world_anyone() -> zkd_protocol::Id {
    zkd_protocol::Id {
        scheme: "world".into(),
        id: "anyone".into(),
    }
}

/// Server-wide numbers, all O(1) or O(sessions) to compute.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Last zxid applied.
    pub last_zxid: i64,
    /// Znodes, counting `/`, `/zookeeper`, `/zookeeper/quota` and `/zookeeper/config` (4 on a
    /// fresh server). ZooKeeper's reports show one more (it counts the root twice).
    pub znode_count: u64,
    /// Approximate bytes of data and paths held (`zk_approximate_data_size`).
    pub approximate_data_size: u64,
    /// Watch registrations in the data and child tables (`zk_watch_count`).
    pub watch_count: u64,
    /// Distinct watched paths.
    pub watched_paths: u64,
    /// The data table's connections, paths and watches (`wchs`), from running counts.
    pub watch_table: crate::TableSummary,
    pub session_count: u64,
    pub ephemeral_count: u64,
    /// Open connections (not closing), with or without a session.
    pub connection_count: u64,
    /// Frames received from clients since start or the last statistics reset.
    pub packets_received: u64,
    /// Frames sent to clients since start or the last statistics reset.
    pub packets_sent: u64,
    /// Watch notifications sent since start.
    pub notifications_sent: u64,
    /// Herd events since start.
    pub herd_events: u64,
    /// When the core started (epoch ms) and how long ago.
    pub started_ms: i64,
    pub uptime_ms: i64,
    pub tick_ms: i64,
    pub min_session_timeout_ms: i64,
    pub max_session_timeout_ms: i64,
    pub max_client_cnxns: u32,
    pub ttl_enabled: bool,
    /// The server-wide counters behind the `monitor` metrics.
    pub counters: crate::Counters,
}

/// One open connection.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionReport {
    pub id: ConnId,
    pub remote: SocketAddr,
    /// The ensemble member it arrived on (0 on a standalone server).
    pub member: u64,
    pub packets_received: u64,
    pub packets_sent: u64,
    /// When this connection last got a reply (epoch ms), or when it was opened.
    pub last_activity_ms: i64,
    pub session: Option<ConnSessionReport>,
}

/// The session side of a connection.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConnSessionReport {
    pub session_id: i64,
    pub timeout_ms: i64,
    /// Short name of the last operation (`NA` before the first one).
    pub last_op: &'static str,
    pub established_ms: i64,
    pub last_cxid: i64,
    pub last_zxid: i64,
    pub last_response_ms: i64,
}

/// One live session, as the reports, the web view and the control plane show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionReport {
    /// The session id.
    pub id: i64,
    /// The negotiated timeout in ms.
    pub timeout_ms: i64,
    /// The open connection attached, if any (one that is closing counts as none).
    pub conn: Option<ConnId>,
    /// The expiry bucket the session sits in (epoch ms).
    pub expires_at_ms: i64,
    /// The connected client's address, if a connection is attached.
    pub peer: Option<SocketAddr>,
    /// Milliseconds since the session was last heard from (session clock).
    pub idle_ms: i64,
    /// Ephemeral nodes the session owns.
    pub ephemerals: usize,
    /// Watches held by the session's connection, and the distinct paths they are on.
    pub watches: usize,
    pub watched_paths: usize,
}

/// Ephemeral paths of one session.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionEphemerals {
    pub session_id: i64,
    pub paths: Vec<String>,
}

/// Paths one session watches in the data table (data/exist, persistent, recursive).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionWatches {
    pub session_id: i64,
    pub paths: Vec<String>,
}

/// One watch a session holds.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchEntry {
    pub path: String,
    /// Kinds: any of `data`, `child`, `persistent`, `recursive`.
    pub kinds: Vec<&'static str>,
}

/// Watchers of one path, by kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathWatchers {
    pub path: String,
    pub data: u64,
    pub child: u64,
    pub persistent: u64,
    pub recursive: u64,
    /// One-shot data/exist watches on the path's children (how predecessor-watching
    /// followers of an election under this path wait).
    pub data_on_children: u64,
    /// One-shot data/exist watches on the path's siblings (the other children of its parent).
    pub data_on_siblings: u64,
}

/// One node and a page of its children.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeReport {
    pub path: String,
    pub stat: Stat,
    pub acl: Vec<Acl>,
    /// The data, when `world:anyone` may read the node; `None` otherwise.
    pub data: Option<Bytes>,
    /// Whether the data was withheld because the ACL does not let everyone read it.
    pub data_withheld: bool,
    /// Children after `after`, in order, at most `limit`.
    pub children: Vec<String>,
    /// Whether more children follow the page.
    pub more: bool,
    pub watchers: PathWatchers,
}

impl Core {
    /// Server-wide numbers.
    pub fn summary(&self, now_ms: i64) -> Summary {
        Summary {
            last_zxid: self.db.zxid,
            znode_count: self.db.tree.len() as u64,
            approximate_data_size: self.db.tree.approximate_data_size(),
            watch_count: self.db.watches.count() as u64,
            watched_paths: self.db.watches.path_count() as u64,
            watch_table: self.db.watches.table_summary(),
            session_count: self.sessions.iter().count() as u64,
            ephemeral_count: self
                .sessions
                .iter()
                .map(|s| s.ephemerals.len() as u64)
                .sum(),
            connection_count: self.conns.values().filter(|c| !c.closing).count() as u64,
            packets_received: self.counters.received,
            packets_sent: self.counters.sent,
            notifications_sent: self.herd.notifications(),
            herd_events: self.herd.herd_events(),
            started_ms: self.start_ms,
            uptime_ms: now_ms - self.start_ms,
            tick_ms: self.cfg.tick_ms,
            min_session_timeout_ms: self.cfg.min_session_timeout_ms,
            max_session_timeout_ms: self.cfg.max_session_timeout_ms,
            max_client_cnxns: self.cfg.max_client_cnxns,
            ttl_enabled: self.cfg.ttl_enabled,
            counters: self.counters.clone(),
        }
    }

    /// The open connections (not closing), in no order: a list to report on in chunks with
    /// [`Core::connection_reports_for`], releasing the lock in between.
    pub fn connection_ids(&self) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| !c.closing)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The connections of `ids` still open, in the order given.
    pub fn connection_reports_for(&self, ids: &[ConnId]) -> Vec<ConnectionReport> {
        ids.iter()
            .filter_map(|id| {
                let c = self.conns.get(id).filter(|c| !c.closing)?;
                Some(ConnectionReport {
                    id: *id,
                    remote: c.remote,
                    member: c.member,
                    packets_received: c.received,
                    packets_sent: c.sent,
                    last_activity_ms: c.last_response_ms.max(c.established_ms),
                    session: c.session.map(|sid| ConnSessionReport {
                        session_id: sid,
                        timeout_ms: self.sessions.get(sid).map_or(0, |s| s.timeout_ms),
                        last_op: c.last_op,
                        established_ms: c.established_ms,
                        last_cxid: c.last_cxid as i64,
                        last_zxid: c.last_zxid,
                        last_response_ms: c.last_response_ms,
                    }),
                })
            })
            .collect()
    }

    /// Every open connection, by remote address.
    pub fn connection_reports(&self) -> Vec<ConnectionReport> {
        let mut v = self.connection_reports_for(&self.connection_ids());
        v.sort_by_key(|c| c.remote);
        v
    }

    /// The live sessions' ids, in no order (see [`Core::connection_ids`]).
    pub fn session_ids(&self) -> Vec<i64> {
        self.sessions.iter().map(|s| s.id).collect()
    }

    /// Every live session, ordered by id.
    pub fn sessions_report(&self, now: impl Into<Now>) -> Vec<SessionReport> {
        let mut ids = self.session_ids();
        ids.sort_unstable();
        self.sessions_report_for(&ids, now)
    }

    /// The sessions of `ids` still live, in the order given (a chunk of a long listing).
    pub fn sessions_report_for(&self, ids: &[i64], now: impl Into<Now>) -> Vec<SessionReport> {
        let now = now.into();
        ids.iter()
            .filter_map(|id| self.sessions.get(*id))
            .map(|s| {
                let open = s.conn.and_then(|c| Some(c).zip(self.conns.get(&c)));
                let open = open.filter(|(_, c)| !c.closing);
                let conn = open.map(|(id, _)| id);
                SessionReport {
                    id: s.id,
                    timeout_ms: s.timeout_ms,
                    conn,
                    expires_at_ms: s.expires_at,
                    peer: open.map(|(_, c)| c.remote),
                    idle_ms: (now.mono - s.last_heard).max(0),
                    ephemerals: s.ephemerals.len(),
                    watches: conn.map_or(0, |c| self.db.watches.count_for(c)),
                    watched_paths: conn.map_or(0, |c| self.db.watches.paths_of(c)),
                }
            })
            .collect()
    }

    /// Ephemeral paths of the sessions of `ids` that own any, in the order given.
    pub fn ephemerals_for(&self, ids: &[i64]) -> Vec<SessionEphemerals> {
        ids.iter()
            .filter_map(|id| self.sessions.get(*id))
            .filter(|s| !s.ephemerals.is_empty())
            .map(|s| SessionEphemerals {
                session_id: s.id,
                paths: s.ephemerals.iter().map(|p| p.to_string()).collect(),
            })
            .collect()
    }

    /// Ephemeral paths of every session that owns any, by session id.
    pub fn ephemeral_reports(&self) -> Vec<SessionEphemerals> {
        let mut ids = self.session_ids();
        ids.sort_unstable();
        self.ephemerals_for(&ids)
    }

    /// Connections holding any watch, in no order (see [`Core::connection_ids`]).
    pub fn watching_connections(&self) -> Vec<ConnId> {
        self.db.watches.conns().collect()
    }

    /// The data-table watches (data/exist, persistent, recursive; not child watches) of the
    /// connections of `conns`, each under its session (0 for a connection without one),
    /// paths in no order ([`merge_watches`] sorts them, after the lock is released);
    /// connections without such watches are left out.
    pub fn data_watches_of(&self, conns: &[ConnId]) -> Vec<SessionWatches> {
        conns
            .iter()
            .filter_map(|conn| {
                let paths = self.db.watches.data_paths_of(*conn);
                if paths.is_empty() {
                    return None;
                }
                let session_id = self.conns.get(conn).and_then(|c| c.session).unwrap_or(0);
                Some(SessionWatches { session_id, paths })
            })
            .collect()
    }

    /// One slice of one connection's data-table watches, under its session (0 for a
    /// connection without one): the slice's paths, where the next starts and the
    /// connection's change count ([`PathsSlice`]).
    pub fn data_watches_slice(&self, conn: ConnId, from: usize, max: usize) -> (i64, PathsSlice) {
        let session_id = self.conns.get(&conn).and_then(|c| c.session).unwrap_or(0);
        (
            session_id,
            self.db.watches.data_paths_slice(conn, from, max),
        )
    }

    /// The data-table watches grouped by the watching connection's session, by session id.
    pub fn data_watch_reports(&self) -> Vec<SessionWatches> {
        merge_watches(self.data_watches_of(&self.watching_connections()))
    }

    /// Every watch of one session's connection, by path.
    pub fn session_watches(&self, session_id: i64) -> Vec<WatchEntry> {
        let Some(conn) = self.sessions.get(session_id).and_then(|s| s.conn) else {
            return Vec::new();
        };
        self.db
            .watches
            .of_conn(conn)
            .into_iter()
            .map(|(path, kinds)| WatchEntry {
                path,
                kinds: kinds.into_iter().map(kind_name).collect(),
            })
            .collect()
    }

    /// The `n` most watched paths.
    pub fn most_watched_paths(&self, n: usize) -> Vec<PathWatchers> {
        self.db
            .watches
            .most_watched(n)
            .into_iter()
            .map(|(path, k)| self.path_watchers(path, k))
            .collect()
    }

    /// One node with the children after `after` (at most `limit`), or `None` if it does not
    /// exist.
    pub fn node_report(&self, path: &str, after: Option<&str>, limit: usize) -> Option<NodeReport> {
        let node = self.db.tree.get(path)?;
        let readable = world_readable(node.acl);
        let names = self.db.tree.children(path).unwrap_or_default();
        let mut iter = names.into_iter().filter(|c| after.is_none_or(|a| *c > a));
        let children: Vec<String> = iter.by_ref().take(limit).map(|c| c.to_string()).collect();
        let more = iter.next().is_some();
        Some(NodeReport {
            path: crate::data::path::canonical(path).to_string(),
            stat: node.stat(),
            data: if readable { node.data_bytes() } else { None },
            data_withheld: !readable,
            acl: acl_for_world(node.acl),
            children,
            more,
            watchers: self.node_watchers(path),
        })
    }

    /// `srst`: zero the server-wide packet counters.
    pub fn reset_server_stats(&mut self) {
        self.counters = Default::default();
        self.member_counters.clear();
    }

    /// `crst`: zero every connection's packet counters.
    pub fn reset_connection_stats(&mut self) {
        for c in self.conns.values_mut() {
            c.received = 0;
            c.sent = 0;
        }
    }

    /// The watches held on one path, by kind.
    pub fn node_watchers(&self, path: &str) -> PathWatchers {
        self.path_watchers(path.to_string(), self.db.watches.on_path(path))
    }

    /// `k` are the (data, child, persistent, recursive) counts on `path` itself; the data
    /// watches on its children and siblings come from the watch table's per-parent counts.
    fn path_watchers(&self, path: String, k: [usize; 4]) -> PathWatchers {
        let siblings = match crate::data::path::parent(&path) {
            Some("") if path != "/" => self.db.watches.data_on_children("/"),
            Some(p) if !p.is_empty() => self.db.watches.data_on_children(p),
            _ => 0,
        };
        PathWatchers {
            data_on_children: self.db.watches.data_on_children(&path) as u64,
            data_on_siblings: siblings.saturating_sub(k[0]) as u64,
            data: k[0] as u64,
            child: k[1] as u64,
            persistent: k[2] as u64,
            recursive: k[3] as u64,
            path,
        }
    }

    /// The herd detector's record with at most `top` paths.
    pub fn herd_report(&self, top: usize) -> HerdReport {
        self.herd.report(top)
    }
}

/// Merges the entries of one session (several connections without a session share 0),
/// ordered by session id, paths sorted.
pub fn merge_watches(list: Vec<SessionWatches>) -> Vec<SessionWatches> {
    let mut by_session: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
    for w in list {
        by_session.entry(w.session_id).or_default().extend(w.paths);
    }
    by_session
        .into_iter()
        .map(|(session_id, mut paths)| {
            paths.sort();
            SessionWatches { session_id, paths }
        })
        .collect()
}

fn kind_name(kind: crate::watch::watches::WatchKind) -> &'static str {
    use crate::watch::watches::WatchKind;
    match kind {
        WatchKind::Data => "data",
        WatchKind::Child => "child",
        WatchKind::Persistent => "persistent",
        WatchKind::Recursive => "recursive",
    }
}
