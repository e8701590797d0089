//! zkd's deterministic core: tree, sessions, watches and ACLs. It takes one request at a time
//! with the current time injected, and emits reply and notification frames to an [`Outbox`].
//! No I/O and no async runtime: the server drives it, and tests, fuzz programs and benchmarks
//! call it directly.

#![forbid(unsafe_code)]

use std::net::IpAddr;

use bytes::Bytes;

/// Identifies one client connection (socket) for the lifetime of the server.
pub type ConnId = u64;

/// The time of one core call, on two clocks (both injected by the caller):
/// * `mono`: the session clock, which only moves forward (monotonic time, or the virtual
///   clock of `--clock manual`). Session expiry, the reaper and TTLs run on it.
/// * `wall`: wall-clock epoch milliseconds, recorded as nodes' ctime/mtime.
///
/// A wall clock stepped forward or back changes only the times written into Stats; no
/// session or TTL node expires early or late because of it. A bare `i64` converts into a
/// `Now` with both clocks at that reading (convenient in tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Session-clock milliseconds.
    pub mono: i64,
    /// Wall-clock epoch milliseconds.
    pub wall: i64,
}

impl From<i64> for Now {
    fn from(ms: i64) -> Now {
        Now { mono: ms, wall: ms }
    }
}

/// When what the core gives an [`Outbox`] may leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// At once: it shows nothing of the transactions whose records are not stored yet.
    Now,
    /// Only once every transaction record the core has handed over
    /// ([`Core::take_records`]) is stored: it may reveal them (a write's reply, its
    /// notifications, and whatever the same call produced after them).
    AfterRecords,
}

/// Where the core puts what it produces. Frames are complete (length-prefixed) and must be
/// written to the connection in the order they are given, across all calls; each says when
/// it may leave ([`Release`]).
pub trait Outbox {
    /// Queue `frame` on connection `conn`.
    fn send(&mut self, conn: ConnId, frame: Bytes, release: Release);
    /// Queue a frame given in parts on `conn`. Outboxes that write to sockets write the
    /// parts as they are (a shared body is not copied); the others get one buffer.
    fn send_frame(&mut self, conn: ConnId, frame: Frame, release: Release) {
        self.send(conn, frame.into_bytes(), release);
    }
    /// Close `conn` once everything queued before this call has been written.
    fn close(&mut self, conn: ConnId, release: Release);
    /// Hold what is queued on `conn` after this call for `ms` milliseconds before writing it
    /// (a `delay` fault). Outboxes that do not write to sockets ignore it.
    fn delay(&mut self, _conn: ConnId, _ms: u64, _release: Release) {}
    /// Hears what happened beyond the frames (see [`Fact`]), in the core's order. Outboxes
    /// that keep no record of it ignore it.
    fn fact(&mut self, _fact: Fact<'_>) {}
}

/// What the core tells its [`Outbox`] beside the frames, for a record of what happened (the
/// server's history): what no frame shows, such as why a session ended.
#[derive(Debug, Clone, Copy)]
pub enum Fact<'a> {
    /// A session ended. `conn` is its connection at the time, if it had one; `zxid` is the
    /// transaction that closed it (none for a local session); `ephemerals` are the nodes
    /// deleted with it, in the order deleted.
    SessionEnded {
        session: i64,
        conn: Option<ConnId>,
        why: SessionEnd,
        zxid: Option<i64>,
        ephemerals: &'a [String],
    },
    /// A herd: one change woke `woken` watchers of `path` and `rereads` of them read
    /// `reread_path` again within the detector's window.
    Herd {
        path: &'a str,
        event: &'static str,
        woken: u64,
        reread_path: &'a str,
        rereads: u64,
    },
    /// A fault rule acted on the request of `session` on `conn`.
    FaultFired {
        conn: ConnId,
        session: i64,
        action: FaultAction,
    },
}

/// Why a session ended ([`Fact::SessionEnded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// Its timeout passed without a word from its client.
    Timeout,
    /// The control plane expired it.
    Control,
    /// Its client closed it (`closeSession`).
    Closed,
    /// It was a local session of a member that stopped or changed how it serves.
    MemberStopped,
}

/// Core settings, all in milliseconds.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    pub tick_ms: i64,
    pub min_session_timeout_ms: i64,
    pub max_session_timeout_ms: i64,
    /// Max connections per client IP; 0 = unlimited.
    pub max_client_cnxns: u32,
    /// `user:base64hash` of the super user, if any.
    pub super_digest: Option<String>,
    /// Whether TTL nodes (opcode 21) are enabled.
    pub ttl_enabled: bool,
    /// How often the container/TTL reaper runs.
    pub reaper_interval_ms: i64,
    /// Log a herd warning when one change notifies at least this many watchers (0 = off).
    pub herd_warn: u64,
    /// The ZooKeeper release line the wire behaviour follows.
    pub zookeeper_version: ZookeeperVersion,
    /// The x509 and sasl schemes and their super users.
    pub auth: AuthConfig,
    /// Whether `reconfig` may change an ensemble's membership (`reconfigEnabled`).
    pub reconfig_enabled: bool,
}

/// ZooKeeper's defaults where it has one (a 2 s tick, sessions between 2 and 20 ticks), with no
/// connection cap, TTL nodes on, the reaper every second, no super user and no herd warning.
impl Default for CoreConfig {
    fn default() -> CoreConfig {
        CoreConfig {
            tick_ms: 2000,
            min_session_timeout_ms: 4000,
            max_session_timeout_ms: 40000,
            max_client_cnxns: 0,
            super_digest: None,
            ttl_enabled: true,
            reaper_interval_ms: 1000,
            herd_warn: 0,
            zookeeper_version: ZookeeperVersion::default(),
            auth: AuthConfig::default(),
            reconfig_enabled: false,
        }
    }
}

/// What happened to a connection's handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// Session established; later frames go to [`Core::request`].
    Established,
    /// The connection was closed (the outbox got a close for it).
    Closed,
}

mod auth;
mod data;
mod db;
mod decode;
mod durability;
mod ensemble;
mod frame_parts;
mod request;
mod session;
pub mod state_report;
mod testing;
mod watch;
mod zk_version;

// The paths the server's layers name (`herd`, `report`, `path`, `keyed`).
pub use data::{keyed, path};
pub use state_report as report;
pub use watch::herd_detector as herd;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use zkd_protocol::{keeper_state, perms, xid, Acl, Jute, ReplyHeader, WatcherEvent};

pub use auth::sasl_users::SaslUsers;
pub use auth::secure_auth::AuthConfig;
use data::tree::AclList;
pub use durability::snapshot::{ImportReport, Replayed};
pub use durability::snapshot_cow::{SnapshotJob, Step as SnapshotStep};

pub use ensemble::lag::{Lag, MemberId};
pub use ensemble::servers::{host_and_ports, is_observer, LineParts, ServerSpec};
pub use frame_parts::Frame;
use session::connection::Conn;
pub use session::connection::Serving;
use session::sessions::Sessions;
pub use state_report::SessionReport;
pub use testing::control_ops::{SessionOpError, RESET_SLICE};
pub use testing::fault::{FaultAction, FaultRule, FaultStatus, MAX_FAULT_RULES};
pub use testing::fixture_nodes::{FixtureKind, FixtureNode, TreeEntry, TreeWalk};
#[cfg(any(test, feature = "test-support"))]
pub use testing::recording::{Recorded, RecordingOutbox};
#[cfg(any(test, feature = "test-support"))]
pub use testing::session::open_test_session;
use watch::herd_detector::Herd;
pub use watch::watches::TableSummary;
pub use zk_version::ZookeeperVersion;

/// Server-wide counters reported by the four-letter words and the `monitor` metrics; `srst`
/// resets them, as it resets ZooKeeper's.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counters {
    pub received: u64,
    pub sent: u64,
    /// Bytes of the frames received (length prefix included).
    pub bytes_received: u64,
    /// Sizes of the frames sent (replies and notifications, length prefix included), and
    /// the last one.
    pub response_sizes: Series,
    pub last_response_size: Option<u64>,
    /// Sockets registered, and of those refused for the per-IP limit.
    pub connection_requests: u64,
    pub connections_rejected: u64,
    /// Handshakes that asked to resume an existing session.
    pub revalidations: u64,
    /// Sessions ended by their timeout.
    pub sessions_expired: u64,
    /// `addauth` and SASL attempts refused.
    pub auth_failed: u64,
    /// Watchers notified per change that notified any, by event type (index = type - 1:
    /// NodeCreated, NodeDeleted, NodeDataChanged, NodeChildrenChanged).
    pub watchers_fired: [Series; 4],
}

/// Count, sum, least and greatest of a series of values: the fields of a ZooKeeper summary
/// metric (`cnt_`, `sum_`, `min_`, `max_`, `avg_`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Series {
    pub count: u64,
    pub sum: u64,
    pub min: u64,
    pub max: u64,
}

impl Series {
    pub fn add(&mut self, v: u64) {
        self.min = if self.count == 0 { v } else { self.min.min(v) };
        self.max = self.max.max(v);
        self.sum = self.sum.saturating_add(v);
        self.count += 1;
    }

    /// The mean, 0 before the first value.
    pub fn avg(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
}

/// The whole server state. Every method runs to completion; calls are totally ordered.
pub struct Core {
    cfg: CoreConfig,
    start_ms: i64,
    /// The tree, its watches, the last zxid and the reaper's sets.
    db: db::Db,
    sessions: Sessions,
    /// Boxed: the table holds a pointer per connection, so its spare slots (up to half of
    /// them after a growth) cost 16 bytes each instead of a whole record.
    conns: data::keyed::KeyedMap<ConnId, Box<Conn>>,
    next_conn: ConnId,
    per_ip: HashMap<IpAddr, u32>,
    /// The identities (`ip:<addr>`) of connections from the address seen last, shared by
    /// every connection from it until one adds an identity (which copies them).
    last_ip_ids: Option<(IpAddr, Arc<Vec<zkd_protocol::Id>>)>,
    /// Fault rules of the control plane, matched on every request.
    faults: testing::fault::Faults,
    next_reap: i64,
    open_acl: AclList,
    counters: Counters,
    /// Local sessions, each with the member that made it: a read-only member's, and with
    /// local sessions on (`localSessionsEnabled`) every session until its first ephemeral.
    /// Never logged; known to their own member only.
    local_sessions: HashMap<i64, u64>,
    /// Whether read-write members start sessions local (`localSessionsEnabled`) and whether
    /// a local session's first ephemeral makes it global (`localSessionsUpgradingEnabled`).
    local_mode: (bool, bool),
    /// Packet counters per ensemble member (empty on a standalone server).
    member_counters: std::collections::BTreeMap<u64, Counters>,
    herd: Herd,
    /// The time of the call being processed (for the herd detector's windows).
    now_ms: i64,
    scratch: Vec<ConnId>,
    /// Whether committed transactions' records are handed over (persistence is on).
    logging: bool,
    /// Records handed over and not yet taken ([`Core::take_records`]), in zxid order.
    ready: Vec<(i64, Bytes)>,
    /// DIGEST-MD5 nonces handed out so far.
    nonces: u64,
    /// Ensemble members told to lag, with their replicas.
    lag: ensemble::lag::Lagging,
    /// Why the core stopped serving (a transaction could not be logged), once it has.
    stopped: Option<String>,
    /// Whether the ensemble has a quorum (always on a standalone server): without one no
    /// global session expires and nothing is reaped.
    quorum: bool,
    /// An ensemble's configuration (`None` on a standalone server).
    dynamic: Option<ensemble::reconfig::DynamicConfig>,
}

impl Core {
    pub fn new(cfg: CoreConfig, now: impl Into<Now>) -> Core {
        let now = now.into();
        let open_acl: AclList = Arc::from(Acl::open_unsafe());
        let read_acl: AclList = Arc::from(vec![Acl::new(perms::READ, "world", "anyone")]);
        let next_reap = now.mono + cfg.reaper_interval_ms.max(1);
        let cfg_herd_warn = cfg.herd_warn;
        Core {
            db: db::Db::new(open_acl.clone(), read_acl),
            sessions: Sessions::new(now.wall, cfg.tick_ms),
            cfg,
            start_ms: now.wall,
            conns: data::keyed::KeyedMap::default(),
            next_conn: 1,
            per_ip: HashMap::new(),
            last_ip_ids: None,
            faults: testing::fault::Faults::default(),
            next_reap,
            open_acl,
            counters: Counters::default(),
            member_counters: Default::default(),
            local_sessions: Default::default(),
            local_mode: (false, false),
            herd: Herd::new(cfg_herd_warn),
            now_ms: now.mono,
            scratch: Vec::new(),
            logging: false,
            ready: Vec::new(),
            nonces: 0,
            lag: ensemble::lag::Lagging::default(),
            stopped: None,
            quorum: true,
            dynamic: None,
        }
    }

    /// Why the core stopped serving, once a transaction could not be stored ([`Core::stop`]).
    /// From then on it queues nothing on any outbox, and requests, handshakes, ticks and new
    /// connections are refused without looking at the state. The layer around it closes every
    /// connection, and never lets go of what was declared [`Release::AfterRecords`].
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.as_deref()
    }

    /// The last zxid applied.
    pub fn last_zxid(&self) -> i64 {
        self.db.zxid
    }

    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    /// Registers an accepted socket. `None` means the per-IP limit is reached: close it.
    pub fn open_connection(&mut self, remote: SocketAddr, now: impl Into<Now>) -> Option<ConnId> {
        self.open_member_connection(remote, now, 0, Serving::ReadWrite)
    }

    /// Registers a socket accepted by ensemble member `member`, which serves as `serving`.
    /// `None` means the per-IP limit is reached: close it.
    pub fn open_member_connection(
        &mut self,
        remote: SocketAddr,
        now: impl Into<Now>,
        member: u64,
        serving: Serving,
    ) -> Option<ConnId> {
        if self.stopped.is_some() {
            return None;
        }
        let now_ms = now.into().wall;
        let ip = remote.ip();
        self.counters.connection_requests += 1;
        let count = self.per_ip.entry(ip).or_insert(0);
        if self.cfg.max_client_cnxns > 0 && *count >= self.cfg.max_client_cnxns {
            self.counters.connections_rejected += 1;
            return None;
        }
        *count += 1;
        let id = self.next_conn;
        self.next_conn += 1;
        let ids = match &self.last_ip_ids {
            Some((last, ids)) if *last == ip => ids.clone(),
            _ => {
                let ids = session::connection::ip_ids(ip);
                self.last_ip_ids = Some((ip, ids.clone()));
                ids
            }
        };
        let mut conn = Conn::new(remote, ids, now_ms);
        conn.member = member;
        conn.serving = serving;
        self.conns.insert(id, Box::new(conn));
        Some(id)
    }

    /// The socket of `conn` is gone. Its watches go with it; its session lives on.
    pub fn connection_closed(&mut self, conn: ConnId) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        if let Some(sid) = c.session {
            if let Some(s) = self.sessions.get_mut(sid) {
                if s.conn == Some(conn) {
                    s.conn = None;
                }
            }
        }
        self.db.watches.remove_conn(conn);
        self.lag_forget(conn);
        let ip = c.remote.ip();
        if let Some(n) = self.per_ip.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_ip.remove(&ip);
            }
        }
    }

    /// Marks a connection as finished: no more requests are processed, watches are dropped,
    /// and the outbox is told to close it after flushing.
    fn finish_connection(&mut self, conn: ConnId, out: &mut dyn Outbox) {
        if let Some(c) = self.conns.get_mut(&conn) {
            if c.closing {
                return;
            }
            c.closing = true;
            if let Some(sid) = c.session.take() {
                if let Some(s) = self.sessions.get_mut(sid) {
                    if s.conn == Some(conn) {
                        s.conn = None;
                    }
                }
            }
        }
        self.db.watches.remove_conn(conn);
        self.lag_forget(conn);
        if self.stopped.is_none() {
            out.close(conn, self.release_when());
        }
    }

    /// When what the core gives an outbox now may leave: once the records handed over are
    /// stored, while any is waiting to be taken ([`Core::take_records`]).
    pub(crate) fn release_when(&self) -> Release {
        if self.ready.is_empty() {
            Release::Now
        } else {
            Release::AfterRecords
        }
    }

    /// Queues a frame on a connection, counting it.
    fn send(&mut self, out: &mut dyn Outbox, conn: ConnId, frame: impl Into<Frame>) {
        if self.stopped.is_some() {
            return;
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.sent += 1;
            let member = c.member;
            self.count_member_sent(member);
        }
        self.counters.sent += 1;
        let frame: Frame = frame.into();
        let size = frame.len() as u64;
        self.counters.response_sizes.add(size);
        self.counters.last_response_size = Some(size);
        out.send_frame(conn, frame, self.release_when());
    }

    /// Sends one notification to every connection watching `path` for `event` that holds
    /// READ permission under `acl` with its identities at this moment. One-shot watches that
    /// fire are used up whether or not their event is delivered, as in ZooKeeper.
    fn fire(&mut self, out: &mut dyn Outbox, event: i32, path: &str, zxid: i64, acl: &[Acl]) {
        self.fire_in(None, out, event, path, zxid, acl);
    }

    /// [`Core::fire`] on the watches of lagging member `member`'s copy (`None`: the main
    /// state's).
    fn fire_in(
        &mut self,
        member: Option<ensemble::lag::MemberId>,
        out: &mut dyn Outbox,
        event: i32,
        path: &str,
        zxid: i64,
        acl: &[Acl],
    ) {
        if self.stopped.is_some() {
            return;
        }
        let mut targets = std::mem::take(&mut self.scratch);
        let Some(db) = self.view_db(member) else {
            self.scratch = targets;
            return;
        };
        let kinds = db.watches.trigger(event, path, &mut targets);
        let conns = &self.conns;
        targets.retain(|conn| {
            conns
                .get(conn)
                .is_some_and(|c| auth::acl::allowed(acl, perms::READ, &c.ids))
        });
        self.herd
            .fired(event, path, zxid, self.now_ms, &targets, kinds);
        if !targets.is_empty() {
            let by_event = usize::try_from(event - 1).ok();
            if let Some(s) = by_event.and_then(|i| self.counters.watchers_fired.get_mut(i)) {
                s.add(targets.len() as u64);
            }
            let header_zxid = self.cfg.zookeeper_version.notification_zxid(zxid);
            let frame = notification_frame(event, path, header_zxid);
            for &conn in &targets {
                self.send(out, conn, frame.clone());
            }
        }
        self.scratch = targets;
    }

    /// Session expiry and container/TTL reaping due at `now` (on the session clock). Without
    /// a quorum ([`Core::set_quorum`]) only read-only members' local sessions expire and
    /// nothing is reaped.
    pub fn tick(&mut self, now: impl Into<Now>, out: &mut dyn Outbox) {
        if self.stopped.is_some() {
            return;
        }
        let now = now.into();
        self.now_ms = now.mono;
        self.advance_members(now, out);
        let closed = self.herd.close_windows(now.mono);
        for e in self.herd.last_closed(closed) {
            out.fact(Fact::Herd {
                path: &e.path,
                event: e.event,
                woken: e.woken,
                reread_path: &e.reread_path,
                rereads: e.rereads,
            });
        }
        for sid in self.expiring_sessions(now.mono) {
            let conn = self.sessions.get(sid).and_then(|s| s.conn);
            tracing::debug!(session = format_args!("0x{sid:x}"), "session expired");
            self.counters.sessions_expired += 1;
            self.kill_session(sid, SessionEnd::Timeout, now, out);
            if let Some(conn) = conn {
                self.finish_connection(conn, out);
            }
        }
        if self.quorum && now.mono >= self.next_reap {
            self.reap(now, out);
            self.next_reap = now.mono + self.cfg.reaper_interval_ms.max(1);
        }
    }

    /// When [`Core::tick`] next has work to do, on the session clock.
    pub fn next_deadline(&self) -> Option<i64> {
        let reap = (self.quorum && !self.db.reapable.is_empty()).then_some(self.next_reap);
        [
            self.next_session_expiry(),
            reap,
            self.herd.next_deadline(),
            self.lag_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// A complete notification frame (xid -1), encoded once and shared by every recipient.
pub(crate) fn notification_frame(event: i32, path: &str, zxid: i64) -> Bytes {
    zkd_protocol::encode_frame(|out| {
        ReplyHeader {
            xid: xid::NOTIFICATION,
            zxid,
            err: 0,
        }
        .write(out);
        WatcherEvent {
            event_type: event,
            state: keeper_state::SYNC_CONNECTED,
            path: path.into(),
        }
        .write(out);
    })
}
