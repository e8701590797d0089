//! The plain data the four-letter words (and the admin endpoints) show: [`FourLetterView`],
//! gathered from the core's read-only reports in chunks (see [`gather`]) plus what the
//! engine owns ([`NetView`]: client port, frame limit, request latency), and
//! [`HostInfo`], gathered from the host.

use std::net::SocketAddr;

use super::Needs;
use crate::core::report::{ConnSessionReport, ConnectionReport, Summary};
use crate::engine::ensemble::MemberId;
use crate::engine::{CoreFailed, DataDirInfo, MemberFacts, NetView, Shared};

pub(crate) use super::host::HostInfo;

/// Connections, sessions or watching connections reported per turn of the core's lock.
const CHUNK: usize = 256;

/// Entries of the connections' watch tables copied per turn of the core's lock (a
/// connection holding more is copied in slices: see [`copy_watches`]).
pub(crate) const PATHS_PER_TURN: usize = 16_384;

/// Gathers what `needs` asks for, as ensemble member `member` reports (see
/// [`Shared::inspect_member`]). The core's lock is taken once for the summary and
/// the ids to list, then once per [`CHUNK`] of them, so a server with many connections,
/// sessions or watches keeps serving its clients while a long report is gathered. A list
/// gathered this way is not one point in time: a session that ends during the walk is left
/// out, one that starts is not seen.
pub(crate) fn gather(
    shared: &Shared,
    member: MemberId,
    needs: Needs,
    now_ms: i64,
) -> Result<FourLetterView, CoreFailed> {
    let inspect = |f: &mut dyn FnMut(&crate::core::Core, &NetView<'_>)| {
        shared.inspect_member(member, |core, net| f(core, net))
    };
    let mut view = FourLetterView::default();
    let (mut conns, mut sessions, mut watchers) = (None, None, None);
    inspect(&mut |core, net| {
        view.member = net.member();
        if needs.summary || needs.connections || needs.sessions {
            let s = core.summary(now_ms);
            fill_summary(&mut view, &s, net);
            if let Some(m) = view.member.as_ref().map(|m| m.id) {
                // A member reports its own connections and packets, the shared state's rest.
                let own = core.member_summary(m);
                view.connection_count = own.connection_count;
                view.packets_received = own.packets_received;
                view.packets_sent = own.packets_sent;
                // A lagging member has applied less than the others.
                view.last_zxid = core.member_zxid(m);
            }
            let (min, avg, max) = net.latency().ms();
            view.latency = Latency { min, avg, max };
        }
        conns = needs.connections.then(|| core.connection_ids());
        sessions = needs.sessions.then(|| core.session_ids());
        watchers = needs.watches.then(|| core.watching_connections());
    })?;
    if needs.summary {
        view.read_latency = shared.latencies.read.snapshot();
        view.update_latency = shared.latencies.update.snapshot();
        view.slow_steps = shared.slow.count();
    }
    let extras = shared.extras.get();
    view.conf.secure_client_port = extras.and_then(|e| e.secure_port);
    // Every word names the version, whatever else it gathered.
    view.conf.zookeeper_version = shared.cfg.zookeeper_version;
    if needs.data_dir {
        view.data_dir = extras
            .and_then(|e| e.data_dir.as_ref())
            .map(|report| report());
    }
    let own = view.member.as_ref().map(|m| m.id);
    for chunk in conns.unwrap_or_default().chunks(CHUNK) {
        inspect(&mut |core, net| {
            view.connections.extend(
                core.connection_reports_for(chunk)
                    .into_iter()
                    .filter(|c| own.is_none_or(|m| c.member == m))
                    .map(|c| connection_info(c, net)),
            )
        })?;
    }
    view.connections.sort_by_key(|c| c.remote);
    if let Some(ids) = sessions.as_mut() {
        ids.sort_unstable();
    }
    let at = shared.now();
    for chunk in sessions.unwrap_or_default().chunks(CHUNK) {
        let mut got = None;
        inspect(&mut |core, _| {
            let reports = core.sessions_report_for(chunk, at);
            got = Some((reports, core.ephemerals_for(chunk)));
        })?;
        let (reports, ephemerals) = got.unwrap_or_default();
        let mut ephemerals: std::collections::HashMap<i64, Vec<String>> = ephemerals
            .into_iter()
            .map(|e| (e.session_id, e.paths))
            .collect();
        view.sessions
            .extend(reports.into_iter().map(|s| SessionInfo {
                id: s.id,
                expires_at_ms: s.expires_at_ms,
                ephemerals: ephemerals.remove(&s.id).unwrap_or_default(),
            }));
    }
    if let Some(ids) = watchers {
        let (all, turns) = copy_watches(&ids, PATHS_PER_TURN, &mut |f| inspect(f))?;
        view.watch_copy = turns;
        view.data_watches = crate::core::report::merge_watches(all);
    }
    Ok(view)
}

/// How many times a connection's watches are copied again from the start when they keep
/// changing while copied; after that its last copy (duplicates removed) is taken as it is.
const RESTARTS: u32 = 3;

/// What copying the watched paths took: turns of the core's lock, and the most table
/// entries one turn went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyTurns {
    pub turns: usize,
    pub most_paths: usize,
}

/// Copies the data-table watches of the connections `ids`, at most `per_turn` entries of
/// their tables per turn of the core's lock (`inspect`), a connection's table in as many
/// slices as it needs. What the copy guarantees: a watch held from the start of the copy to
/// its end is shown exactly once (a connection whose table changed between two of its
/// slices is copied again from its start, up to [`RESTARTS`] times; after that a watch held
/// throughout may be missing from it, and nothing is shown twice); a watch added or
/// removed meanwhile may or may not be shown. Connections that close meanwhile drop out.
#[allow(clippy::type_complexity)]
pub(crate) fn copy_watches(
    ids: &[crate::core::ConnId],
    per_turn: usize,
    inspect: &mut dyn FnMut(
        &mut dyn FnMut(&crate::core::Core, &NetView<'_>),
    ) -> Result<(), CoreFailed>,
) -> Result<(Vec<crate::core::report::SessionWatches>, CopyTurns), CoreFailed> {
    let mut all = Vec::new();
    let mut turns = CopyTurns::default();
    // The connection being copied: its index, where its next slice starts, its change
    // count, the paths so far, and how often it started over.
    let mut at = 0;
    let mut from = 0;
    let mut changes: Option<u64> = None;
    let mut session = 0;
    let mut paths: Vec<String> = Vec::new();
    let mut restarts = 0;
    while at < ids.len() {
        let mut budget = per_turn.max(1);
        let mut copied = 0;
        inspect(&mut |core, _| {
            while budget > 0 && at < ids.len() {
                let (sid, slice) = core.data_watches_slice(ids[at], from, budget);
                budget = budget.saturating_sub(slice.walked.max(1));
                copied += slice.walked;
                let moved = changes.is_some_and(|c| c != slice.changes);
                if moved && restarts < RESTARTS {
                    // Its table changed since the last slice: start it over.
                    restarts += 1;
                    paths.clear();
                    from = 0;
                    changes = None;
                    continue;
                }
                changes = Some(slice.changes);
                session = sid;
                paths.extend(slice.paths);
                match slice.next {
                    Some(next) => from = next,
                    None => {
                        if !paths.is_empty() {
                            if restarts >= RESTARTS {
                                paths.sort_unstable();
                                paths.dedup();
                            }
                            all.push(crate::core::report::SessionWatches {
                                session_id: session,
                                paths: std::mem::take(&mut paths),
                            });
                        }
                        at += 1;
                        from = 0;
                        changes = None;
                        restarts = 0;
                    }
                }
            }
        })?;
        turns.turns += 1;
        turns.most_paths = turns.most_paths.max(copied);
    }
    Ok((all, turns))
}

/// The server-wide figures of the core's summary (those `GET /metrics` shows too).
pub(crate) fn summary_figures(view: &mut FourLetterView, s: &Summary) {
    view.last_zxid = s.last_zxid;
    view.znode_count = s.znode_count;
    view.packets_received = s.packets_received;
    view.packets_sent = s.packets_sent;
    view.connection_count = s.connection_count;
    view.session_count = s.session_count;
    view.ephemerals_count = s.ephemeral_count;
    view.watch_count = s.watch_count;
    view.approximate_data_size = s.approximate_data_size;
    view.uptime_ms = s.uptime_ms;
}

fn fill_summary(view: &mut FourLetterView, s: &Summary, net: &NetView<'_>) {
    summary_figures(view, s);
    view.watch_table = Some(WatchSummary {
        connections: s.watch_table.connections,
        paths: s.watch_table.paths,
        watches: s.watch_table.watches,
    });
    view.counters = s.counters.clone();
    view.conf = ConfInfo {
        client_port: net.client_port(),
        tick_time_ms: s.tick_ms,
        max_client_cnxns: s.max_client_cnxns,
        min_session_timeout_ms: s.min_session_timeout_ms,
        max_session_timeout_ms: s.max_session_timeout_ms,
        max_frame_len: net.max_frame_len(),
        secure_client_port: None,
        ttl_enabled: s.ttl_enabled,
        // Set by `gather` for every word.
        zookeeper_version: Default::default(),
    };
}

fn connection_info(c: ConnectionReport, net: &NetView<'_>) -> ConnectionInfo {
    let latency = net.conn_latency(c.id);
    let (min, avg, max) = latency.ms();
    ConnectionInfo {
        remote: c.remote,
        queued: 0,
        packets_received: c.packets_received,
        packets_sent: c.packets_sent,
        last_activity_ms: c.last_activity_ms,
        session: c.session.map(|core| ConnSession {
            core,
            last_latency_ms: latency.last_ms(),
            min_latency_ms: min,
            avg_latency_ms: avg as i64,
            max_latency_ms: max,
        }),
    }
}

/// Everything the four-letter words report about the server, as plain data.
#[derive(Clone, Debug, Default)]
pub struct FourLetterView {
    /// Last zxid applied.
    pub last_zxid: i64,
    /// The number of znodes, counting `/`, `/zookeeper`, `/zookeeper/quota` and
    /// `/zookeeper/config` (4 on a fresh server). The reports add one, because ZooKeeper counts
    /// the root twice (`Node count: 5` on a fresh server).
    pub znode_count: u64,
    /// Frames received from clients (all connections, since start or `srst`).
    pub packets_received: u64,
    /// Frames sent to clients (all connections, since start or `srst`).
    pub packets_sent: u64,
    /// Requests received but not answered yet (0 for a synchronous core).
    pub outstanding_requests: u64,
    /// Server-wide request latency in ms.
    pub latency: Latency,
    /// Open connections, including the one asking (ZooKeeper counts it too).
    pub connection_count: u64,
    /// Live sessions.
    pub session_count: u64,
    /// Ephemeral nodes.
    pub ephemerals_count: u64,
    /// Total number of watches, data and child tables together (`zk_watch_count`).
    pub watch_count: u64,
    /// The data table's counts from the core's running totals (`wchs`), when gathered with
    /// the summary; [`FourLetterView::watch_summary`] counts `data_watches` otherwise.
    pub watch_table: Option<WatchSummary>,
    /// Approximate bytes of data and paths held (`zk_approximate_data_size`).
    pub approximate_data_size: u64,
    /// Milliseconds since the server started.
    pub uptime_ms: i64,
    /// The configuration `conf` shows.
    pub conf: ConfInfo,
    /// On a simulated ensemble, the member reporting (its mode decides `Mode:`,
    /// `zk_server_state` and the leader's extra lines).
    pub member: Option<MemberFacts>,
    /// The data directory, when the server persists (filled by the layer that owns it).
    pub data_dir: Option<DataDirInfo>,
    /// The core's server-wide counters (see [`super::metrics`]).
    pub counters: crate::core::Counters,
    /// Time in the core per read and per update request, since start.
    pub read_latency: crate::engine::latency::LatencySnapshot,
    pub update_latency: crate::engine::latency::LatencySnapshot,
    /// Steps that held the core's lock over the slow-step threshold, since start.
    pub slow_steps: u64,
    /// Every open connection (gathered only for the words that list them).
    pub connections: Vec<ConnectionInfo>,
    /// Every live session (gathered only for `dump`).
    pub sessions: Vec<SessionInfo>,
    /// The data/exist-watch table (not child watches), grouped by watching connection.
    pub data_watches: Vec<ConnWatches>,
    /// What copying `data_watches` took.
    pub watch_copy: CopyTurns,
}

/// The counts `wchs` (and the AdminServer's `watch_summary`) show of the data-watch table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchSummary {
    /// Connections holding at least one watch.
    pub connections: usize,
    /// Distinct watched paths.
    pub paths: usize,
    /// Watches in all.
    pub watches: usize,
}

impl FourLetterView {
    pub fn watch_summary(&self) -> WatchSummary {
        if let Some(w) = self.watch_table {
            return w;
        }
        let mut paths: Vec<&str> = self
            .data_watches
            .iter()
            .flat_map(|w| w.paths.iter().map(String::as_str))
            .collect();
        let watches = paths.len();
        paths.sort_unstable();
        paths.dedup();
        let connections = self
            .data_watches
            .iter()
            .filter(|w| !w.paths.is_empty())
            .count();
        WatchSummary {
            connections,
            paths: paths.len(),
            watches,
        }
    }
}

/// Request latency statistics in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Latency {
    pub min: i64,
    pub avg: f64,
    pub max: i64,
}

/// One client connection.
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    pub remote: SocketAddr,
    /// Requests received and not answered yet.
    pub queued: u64,
    pub packets_received: u64,
    pub packets_sent: u64,
    /// When this connection last received a frame (epoch ms), or when it was opened. `dump`
    /// derives the connection's idle-expiry bucket from it.
    pub last_activity_ms: i64,
    /// Present once the handshake established a session.
    pub session: Option<ConnSession>,
}

/// Per-connection details shown by `cons` for a connection with a session: what the core
/// reports about the session plus the latency the engine measured.
#[derive(Clone, Debug, Default)]
pub struct ConnSession {
    /// Session id, timeout, last operation, cxid, zxid and reply time, as the core reports them.
    pub core: ConnSessionReport,
    pub last_latency_ms: i64,
    pub min_latency_ms: i64,
    pub avg_latency_ms: i64,
    pub max_latency_ms: i64,
}

/// One live session.
#[derive(Clone, Debug, Default)]
pub struct SessionInfo {
    pub id: i64,
    /// The expiry bucket the session currently sits in (epoch ms).
    pub expires_at_ms: i64,
    /// Paths of the ephemeral nodes it owns.
    pub ephemerals: Vec<String>,
}

/// For tests of the reports: one session that owns `/app/e` and whose connection holds data
/// watches on `watched`, as a view's `sessions` and `data_watches`.
#[cfg(test)]
pub(crate) fn app_session(
    id: i64,
    expires_at_ms: i64,
    watched: &[&str],
) -> (Vec<SessionInfo>, Vec<ConnWatches>) {
    let session = SessionInfo {
        id,
        expires_at_ms,
        ephemerals: vec!["/app/e".into()],
    };
    let watches = ConnWatches {
        session_id: id,
        paths: watched.iter().map(|p| p.to_string()).collect(),
    };
    (vec![session], vec![watches])
}

/// The data/exist watches one connection holds: the core's report as it is.
pub type ConnWatches = crate::core::report::SessionWatches;

/// Configuration values reported by `conf`.
#[derive(Clone, Debug, Default)]
pub struct ConfInfo {
    /// The plain client port (0 when there is none: a secure-only server).
    pub client_port: u16,
    /// The secure client port, when one is configured.
    pub secure_client_port: Option<u16>,
    pub tick_time_ms: i64,
    pub max_client_cnxns: u32,
    pub min_session_timeout_ms: i64,
    pub max_session_timeout_ms: i64,
    /// Shown by the AdminServer's `configuration` only.
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub max_frame_len: usize,
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub ttl_enabled: bool,
    /// The ZooKeeper release line the server behaves as (its reported version); filled for
    /// every word.
    pub zookeeper_version: crate::ZookeeperVersion,
}
