//! The server's engine: the deterministic core behind its one lock, and what every task of
//! a server shares around it. The network layer, the reports, persistence and the control
//! plane all reach the core through [`Shared`] here.
//!
//! * One [`Core`] behind one `std::sync::Mutex`, held only while calling into the core. The
//!   [`Outbox`] the core writes to pushes frames into per-connection queues (see [`queue`])
//!   while the lock is held, so every connection sees frames in the global order the core
//!   produced them; the tasks those pushes are to wake are woken after the lock is released.
//! * Client requests reach the core through [`feed`]: connection tasks hand their batches
//!   over, and one thread at a time feeds all that waits under one acquisition of the lock,
//!   so more threads never means more threads queueing for the lock.
//! * Fail-closed: a panicking core call (or a transaction log that cannot be written) stops
//!   the server; nothing enters the core again ([`Shared::failure`]).
//! * Group commit (`--fsync always`, [`durable`]): what a core call queues after writing a
//!   transaction waits behind a barrier in each connection's queue until the log's sync
//!   thread has synced it, and so does the reply to a read of anything such a transaction
//!   changed ([`unsynced`]); the core never waits for the disk.
//! * The session and wall clocks ([`clock`]), the pause and refusal switches ([`gate`]), the
//!   request latencies ([`latency`]) and the slow-step warning ([`slow_step`]), the ensemble's membership ([`ensemble`]) and its
//!   members' listeners ([`listeners`]).
//! * A ticker task calls [`Core::tick`] at [`Core::next_deadline`], and at least every
//!   tick / reaper interval.
//! * What the layers above read is plain data: [`NetView`] under the lock, and the
//!   [`facts`] types.
//!
//! Outbound buffering is bounded per connection by [`crate::Config::max_outbound_bytes`]: the
//! outbox counts the bytes queued for each connection, and when a frame would push a
//! connection over the limit the connection is dropped at once (its queue is discarded, its
//! socket closed) instead of queueing more. Such a client was not reading its socket; it
//! reconnects like after any connection loss. The total over all connections is bounded by
//! [`crate::Config::max_total_outbound_bytes`]: past it, the connections holding the most are
//! dropped first (see [`outbound`]). Frames are shared `Bytes`, so a notification fanned out
//! to many connections is stored once however many queues hold it (and counted per queue).
//! A frame the core gives in parts ([`Frame`]: a getChildren reply around a cached child
//! list) is queued as its parts and written with the same vectored writes, so the list is
//! never copied per reply; the server-wide total counts such a list once while any queue
//! holds it (each connection still owes, and is judged by, all its bytes). Input buffers
//! together stay within [`crate::Config::max_total_input_bytes`] ([`InputBudget`]).

pub(crate) mod clock;
pub(crate) mod durable;
pub(crate) mod ensemble;
pub(crate) mod facts;
pub(crate) mod feed;
#[cfg(test)]
mod feed_tests;
pub(crate) mod gate;
pub(crate) mod history;
mod input_budget;
mod kept_membership;
pub(crate) mod latency;
pub(crate) mod listeners;
pub(crate) mod net_faults;
pub(crate) mod outbound;
pub(crate) mod queue;
pub(crate) mod records;
pub(crate) mod slow_step;
pub(crate) mod unsynced;

use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, FourLetterWhitelist, SESSIONLESS_CNXN_TIMEOUT_MS};
use crate::core::keyed::KeyedMap;
use crate::core::{ConnId, Core, Fact, Frame, Now, Outbox, Release, Serving};
use ensemble::{MemberId, Membership, Transition};
use outbound::OutBudget;

pub(crate) use clock::now_ms;
#[cfg(test)]
thread_local! {
    /// Holds of the core's lock taken on this thread (the server's tests count a control
    /// operation's slices with it).
    pub(crate) static HOLDS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

pub(crate) use facts::{DataDirInfo, MemberFacts, NetView, PersistStats, ServerExtras};
pub(crate) use input_budget::InputBudget;

/// ZooKeeper's default trace mask (`gtmk` on a fresh server).
pub const DEFAULT_TRACE_MASK: i64 = 306;

/// What the core sends a connection.
#[derive(Debug)]
pub(crate) enum Out {
    Frame(Bytes),
    /// A frame's shared body, counted once server-wide however many queues hold it.
    Shared(outbound::HeldBody),
    /// Hold what follows for this many ms (a `delay` fault rule).
    Delay(u64),
    /// Hold what follows until this many transactions are synced (group commit).
    Durable(u64),
    /// Flush what came before, then close.
    Close,
}

/// The engine's handle on one connection, kept in the registry while it is open.
pub(crate) struct ConnHandle {
    /// The connection's outbound queue, its byte count and its kill switch.
    q: Arc<queue::ConnQueue>,
    /// The core (or the reader) asked for a close: nothing more is queued or fed to the core.
    closing: bool,
    /// The ensemble member whose listener accepted it (0 on a standalone server).
    member: MemberId,
    /// Latency of this connection's requests (`cons`); reset by `crst`.
    latency: latency::AvgMinMax,
    /// The highest [`Out::Durable`] barrier queued on it.
    barrier: u64,
    /// The client's address, which network fault rules match.
    peer: SocketAddr,
    /// Its session once the handshake granted one (0 before), for the history.
    session: i64,
    /// Why it is being closed, once known (for the history's `conn_close`).
    why: Option<history::CloseWhy>,
    /// Its `conn_close` is in the history: recorded when its close was decided, or else
    /// when its socket went.
    close_recorded: bool,
}

/// The open connections by id. Each handle sits in its own allocation, so the table's slots
/// (sized for up to twice the connections it holds) cost a pointer each rather than a handle.
pub(crate) type Conns = KeyedMap<ConnId, Box<ConnHandle>>;

/// What sits behind the lock.
pub(crate) struct State {
    pub(crate) core: Core,
    pub(crate) conns: Conns,
    /// The simulated ensemble's membership (`None` on a standalone server). It sits behind
    /// the core's lock so a member's mode and the connections it admits change together.
    pub(crate) members: Option<Membership>,
    /// The network fault rules on client connections.
    pub(crate) net_faults: net_faults::NetFaults,
    /// Where the core's transaction records are stored (the data directory's log), if any.
    pub(crate) store: Option<Box<dyn records::RecordStore>>,
    /// What the call running now gave to leave only after its records are stored.
    pub(crate) held: records::HeldOut,
    /// The history of what happened (see [`history`]).
    pub(crate) history: history::History,
}

impl ConnHandle {
    /// Bytes queued on this connection and not yet written.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.q.queued.get()
    }
}

impl State {
    /// Runs `f` on the core with the connection registry as its outbox, then [`settle`]s.
    pub(crate) fn call<R>(
        &mut self,
        budget: &Arc<OutBudget>,
        durable: Option<&durable::Durability>,
        wakers: &mut Vec<Waker>,
        f: impl FnOnce(&mut Core, &mut dyn Outbox) -> R,
    ) -> R {
        let mut out = Registry::new(
            &mut self.conns,
            budget,
            durable,
            wakers,
            &mut self.held,
            Some(&mut self.history),
        );
        let r = f(&mut self.core, &mut out);
        self.settle(budget, durable, wakers);
        r
    }

    /// Ends the local sessions of `members`, which stopped or changed how they serve (their
    /// connections are being dropped).
    pub(crate) fn end_local_sessions(
        &mut self,
        members: &[MemberId],
        budget: &Arc<OutBudget>,
        durable: Option<&durable::Durability>,
        wakers: &mut Vec<Waker>,
    ) {
        self.call(budget, durable, wakers, |core, out| {
            for m in members {
                core.end_local_sessions(*m, out);
            }
        });
    }

    /// [`settle`] after a core call on this state.
    pub(crate) fn settle(
        &mut self,
        budget: &Arc<OutBudget>,
        durable: Option<&durable::Durability>,
        wakers: &mut Vec<Waker>,
    ) {
        let State {
            core,
            conns,
            held,
            store,
            ..
        } = self;
        settle(core, store, held, conns, budget, durable, wakers);
    }

    /// A leader starts a new epoch ([`Core::new_epoch`]); the record store hears of it (a
    /// data directory snapshots the state the epoch starts from).
    pub(crate) fn new_epoch(&mut self, now: Now) -> i64 {
        let epoch = self.core.new_epoch(now);
        let leader = self.members.as_ref().and_then(Membership::leader);
        self.history.epoch(leader.unwrap_or(0) as u32, epoch);
        if let Some(store) = self.store.as_mut() {
            store.epoch_started(epoch);
        }
        epoch
    }

    /// Drops the connections of the members in `members` (a mode change ended them); returns
    /// how many.
    pub(crate) fn drop_connections_of(
        &mut self,
        members: &[MemberId],
        budget: &OutBudget,
    ) -> usize {
        let mut dropped = 0;
        for (&id, h) in self.conns.iter_mut() {
            if members.contains(&h.member) && !h.closing {
                h.why.get_or_insert(history::CloseWhy::MemberStopped);
                record_close(&mut self.history, id, h);
                outbound::drop_connection(h, budget);
                dropped += 1;
            }
        }
        dropped
    }

    /// Brings the core in line with a membership change: the members running on the
    /// quorum's side, whether a quorum stands (session time follows it), and a new epoch
    /// when a new leader took over.
    fn apply_membership(&mut self, t: &Transition, now: Now) {
        let Some(members) = self.members.as_ref() else {
            return;
        };
        self.core.set_running_members(members.connected_ids());
        let quorum = members.has_quorum();
        if quorum != self.core.has_quorum() {
            self.history.quorum(quorum, members.voters());
        }
        self.core.set_quorum(quorum, now);
        if t.leader_after.is_some() && t.leader_after != t.leader_before {
            self.new_epoch(now);
        }
    }

    /// Follows a stop, start, partition or heal (or a step of the failover timing) through,
    /// under the core's lock: what reaches each member ([`ensemble::follow::apply_flows`]),
    /// the core learns the new membership ([`Self::apply_membership`]), and the members whose way of
    /// serving changed lose their local sessions and their connections. Returns how many
    /// connections dropped.
    pub(crate) fn follow_transition(
        &mut self,
        t: &Transition,
        now: Now,
        budget: &Arc<OutBudget>,
        durable: Option<&durable::Durability>,
        wakers: &mut Vec<Waker>,
    ) -> usize {
        ensemble::follow::apply_flows(self, &t.drop_connections, now, budget, durable, wakers);
        self.apply_membership(t, now);
        self.end_local_sessions(&t.drop_connections, budget, durable, wakers);
        self.drop_connections_of(&t.drop_connections, budget)
    }
}

/// Settings the engine and the network layer need.
pub(crate) struct NetConfig {
    /// The port clients connect to (the one actually bound).
    pub(crate) client_port: u16,
    pub(crate) max_frame_len: usize,
    pub(crate) whitelist: FourLetterWhitelist,
    /// Connections allowed per client IP (0 = unlimited), for the refusal log line.
    pub(crate) max_client_cnxns: u32,
    /// Longest wait between two ticks, in ms.
    pub(crate) tick_period_ms: i64,
    /// How long a connection may take to send its first complete frame.
    pub(crate) handshake_timeout: Duration,
    /// The ZooKeeper release line the server behaves as (reports, AdminServer commands).
    pub(crate) zookeeper_version: crate::ZookeeperVersion,
}

/// State shared by all tasks of one server.
pub(crate) struct Shared {
    state: Mutex<State>,
    pub(crate) cfg: NetConfig,
    /// Input buffer bytes all connections hold, against `--max-total-input-bytes`.
    pub(crate) input: Arc<InputBudget>,
    /// Outbound limits and the bytes queued on all connections.
    pub(crate) outbound: Arc<OutBudget>,
    /// The trace mask `gtmk` shows and `stmk` sets.
    pub(crate) trace_mask: AtomicI64,
    /// Time spent in the core per read and per update request.
    pub(crate) latencies: latency::Latencies,
    /// Holds of the lock over `--slow-step-warn-ms`: counted and logged.
    pub(crate) slow: slow_step::SlowSteps,
    /// When the ticker plans to wake next (epoch ms).
    planned_tick: AtomicI64,
    wake_ticker: Notify,
    /// The session and wall clocks the core is given.
    pub(crate) clock: clock::Clock,
    /// Pause and connection-refusal switches of the control plane.
    pub(crate) gate: gate::Gate,
    /// The ensemble members' listeners (empty on a standalone server).
    pub(crate) listeners: listeners::Listeners,
    /// The secure port and the data directory, for the reports; set once at start.
    pub(crate) extras: OnceLock<ServerExtras>,
    /// Set once a core call panicked; the core is never entered again.
    failure: OnceLock<ServerFailure>,
    /// Cancelled when `failure` is set: stops the listeners and the ticker.
    pub(crate) failed: CancellationToken,
    /// Group commit's counts, set once at start with `--fsync always` (see [`durable`]).
    pub(crate) durability: OnceLock<Arc<durable::Durability>>,
    /// Client requests handed over to be fed to the core (see [`feed`]).
    feed: feed::Feed,
}

/// What handing a batch over ([`Shared::requests`]) tells the connection that handed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handover {
    /// False once the connection is known to be closing: read no more.
    pub(crate) open: bool,
    /// This call fed the core and woke tasks waiting for reads while more work waited (see
    /// [`feed`]): the caller should let this thread run them before it goes on with its own
    /// connection.
    pub(crate) step_aside: bool,
}

/// What one call of [`Shared::feed_waiting`] did.
#[derive(Debug, Default)]
struct Fed {
    /// Whether the caller's connection is still open after its batch, if this call fed it.
    open: Option<bool>,
    /// Tasks of connections whose reads were fed were woken, last, while more work waited.
    readers_woken: bool,
}

/// A core call failed (panicked, now or earlier): the server no longer serves, and the
/// caller's connection is being dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CoreFailed;

/// Why a server stopped serving: a call into its core panicked, so its state may be half
/// changed, or the transaction log could not be written, so a change could not be made
/// durable. Every connection was closed and the listener stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFailure {
    /// The panic's message, or what failed.
    pub message: String,
}

impl std::fmt::Display for ServerFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the server stopped serving: {}", self.message)
    }
}

impl std::error::Error for ServerFailure {}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-text panic payload".to_string()
    }
}

/// The [`Outbox`] handed to the core: the connection registry.
struct Registry<'a> {
    conns: &'a mut Conns,
    budget: &'a Arc<OutBudget>,
    /// With group commit: the log's counts, and how many transactions were written when
    /// this core call began (what the call queues after writing more waits for their sync).
    durable: Option<(&'a durable::Durability, u64)>,
    /// With group commit: the connection whose request this call runs, if any, and the
    /// newest unsynced transaction that request reads (see [`unsynced`]); what the call
    /// queues for it waits for that sync. What it queues for any other connection without
    /// having written (a lagging member's held replies, released by this call or a tick)
    /// waits for every transaction written so far.
    requester: Option<ConnId>,
    reads: u64,
    /// Tasks to wake once the core's lock is released (see [`wake`]).
    wakers: &'a mut Vec<Waker>,
    /// What the core declared to leave only after its records are stored ([`settle`]).
    held: &'a mut records::HeldOut,
    /// The history, when this call's frames and facts are to be recorded (not when frames
    /// held back earlier are let go: they were seen when the core gave them).
    history: Option<&'a mut history::History>,
    /// The request this call runs, whose reply the history waits for: connection, xid,
    /// opcode and the request's event; and whether the reply was seen.
    expect: Option<(ConnId, i32, Option<zkd_protocol::OpCode>, u64)>,
    replied: bool,
    /// The handshake this call runs, whose answer the history waits for; and the answer
    /// (timeout, session, read-only) once seen.
    expect_connect: Option<ConnId>,
    connect: Option<(i32, i64, bool)>,
}

impl<'a> Registry<'a> {
    fn new(
        conns: &'a mut Conns,
        budget: &'a Arc<OutBudget>,
        durable: Option<&'a durable::Durability>,
        wakers: &'a mut Vec<Waker>,
        held: &'a mut records::HeldOut,
        history: Option<&'a mut history::History>,
    ) -> Registry<'a> {
        let durable = durable.map(|d| (d, d.written()));
        let history = history.filter(|h| h.on());
        Registry {
            conns,
            budget,
            durable,
            requester: None,
            reads: 0,
            wakers,
            held,
            history,
            expect: None,
            replied: false,
            expect_connect: None,
            connect: None,
        }
    }

    /// The history waits for the reply to request `xid` (opcode `op`, event `seq`) of `conn`.
    fn expecting(
        mut self,
        conn: ConnId,
        xid: i32,
        op: Option<zkd_protocol::OpCode>,
        seq: u64,
    ) -> Self {
        self.expect = Some((conn, xid, op, seq));
        self
    }

    /// Records what the history learns from `frame`, queued for `conn`: a notification, or
    /// the reply it waits for.
    fn observe(&mut self, conn: ConnId, frame: &Frame) {
        let Some(history) = self.history.as_deref_mut() else {
            return;
        };
        if self.expect_connect == Some(conn) {
            if self.connect.is_none() {
                self.connect = history::frames::connect_response(frame);
            }
            return;
        }
        let Some(xid) = history::frames::frame_xid(frame) else {
            return;
        };
        if xid == zkd_protocol::xid::NOTIFICATION {
            let Some((event, zxid, path)) = history::frames::notification(frame) else {
                return;
            };
            let (member, session) = self
                .conns
                .get(&conn)
                .map_or((0, 0), |h| (h.member as u32, h.session));
            let path = frame.head.get(path).unwrap_or(&[]);
            history.notification(conn, member, session, event, zxid, path);
            return;
        }
        if let Some((c, x, op, seq)) = self.expect {
            if c == conn && x == xid && !self.replied {
                self.replied = true;
                history.reply(seq, op, frame);
            }
        }
    }

    /// This call runs a request of `conn` that reads what transaction `n` changed (0:
    /// nothing unsynced).
    fn reading(mut self, conn: ConnId, n: u64) -> Self {
        self.requester = Some(conn);
        self.reads = n;
        self
    }

    /// The newest unsynced transaction what this call queues for `conn` depends on, when
    /// the call wrote nothing.
    fn reads_for(&self, conn: ConnId) -> u64 {
        match (self.requester, self.durable) {
            (Some(r), _) if r == conn => self.reads,
            (_, Some((d, _))) => d.written(),
            (_, None) => 0,
        }
    }
}

/// The most events a read of the history looks at under one hold of the core's lock.
const HISTORY_SCAN: usize = 4096;

/// Records the `conn_close` of connection `id` (handle `h`) in `history` now, once: its close
/// was just decided.
fn record_close(history: &mut history::History, id: ConnId, h: &mut ConnHandle) {
    if h.close_recorded || !history.on() {
        return;
    }
    h.close_recorded = true;
    let why = h.why.unwrap_or(history::CloseWhy::Server);
    history.conn_close(id, h.member as u32, h.session, why);
}

/// The newest unsynced transaction the client request `frame` reads (0: none, or no group
/// commit). Nothing is decoded while every written transaction is synced.
fn read_barrier(durable: Option<&durable::Durability>, frame: &Bytes) -> u64 {
    durable
        .filter(|d| d.written() > d.synced())
        .map_or(0, |d| d.needs(&unsynced::read_needs(frame)))
}

/// Wakes the tasks a core call queued frames for; called after the core's lock is released,
/// so no thread waits for the lock while another one makes a wake-up's system call.
pub(crate) fn wake(wakers: &mut Vec<Waker>) {
    for w in wakers.drain(..) {
        w.wake();
    }
}

/// Stores the records the core handed over in the call just made (in zxid order), then lets
/// go of what it declared to wait for them, in the order given: each waits, with
/// `--fsync always`, behind a barrier for every transaction written so far. A record the
/// store cannot keep stops the core ([`Core::stop`]) and what waited for it is dropped: a
/// change the log could not take is never announced. Called after every core call that may
/// have committed a transaction.
fn settle(
    core: &mut Core,
    store: &mut Option<Box<dyn records::RecordStore>>,
    held: &mut records::HeldOut,
    conns: &mut Conns,
    budget: &Arc<OutBudget>,
    durable: Option<&durable::Durability>,
    wakers: &mut Vec<Waker>,
) {
    let ready = core.take_records();
    if let Some(store) = store.as_mut() {
        for (zxid, record) in ready {
            if let Err(reason) = store.store(zxid, record) {
                core.stop(reason);
                break;
            }
        }
    }
    if held.is_empty() {
        return;
    }
    let mut items = std::mem::take(held);
    if core.stopped().is_none() {
        let mut spare = records::HeldOut::new();
        let mut out = Registry::new(conns, budget, durable, wakers, &mut spare, None);
        for (conn, item) in items.drain(..) {
            match item {
                records::Held::Frame(frame) => out.send_frame(conn, frame, Release::Now),
                records::Held::Close => out.close(conn, Release::Now),
                records::Held::Delay(ms) => out.delay(conn, ms, Release::Now),
            }
        }
    }
    items.clear();
    // The buffer is kept for the next call.
    *held = items;
}

/// The barrier `h` needs before what a core call queues next: the number of the last
/// transaction written, when this call wrote it, or else of the newest one the call's read
/// depends on (`reads`), when it is not synced yet (and not already barred on this
/// connection). `durable` is [`Registry::durable`]. A connection's frames leave in the order
/// they were queued, so whatever it is sent later waits behind the same barrier.
fn barrier_for(
    durable: Option<(&durable::Durability, u64)>,
    reads: u64,
    h: &ConnHandle,
) -> Option<u64> {
    let (d, at_start) = durable?;
    let written = d.written();
    let need = if written > at_start { written } else { reads };
    (need > h.barrier && need > d.synced()).then_some(need)
}

impl Outbox for Registry<'_> {
    fn send(&mut self, conn: ConnId, frame: Bytes, release: Release) {
        self.send_frame(conn, frame.into(), release);
    }

    fn send_frame(&mut self, conn: ConnId, frame: Frame, release: Release) {
        if self.history.is_some() {
            self.observe(conn, &frame);
        }
        if release == Release::AfterRecords {
            self.held.push((conn, records::Held::Frame(frame)));
            return;
        }
        let reads = self.reads_for(conn);
        let Some(h) = self.conns.get_mut(&conn) else {
            return;
        };
        if h.closing {
            return;
        }
        let barrier = barrier_for(self.durable, reads, h);
        let len = frame.len();
        let queued = h.q.queued.add(len, len - frame.body.len(), self.budget);
        if queued > self.budget.per_conn {
            h.why.get_or_insert(history::CloseWhy::Limits);
            if let Some(history) = self.history.as_deref_mut() {
                record_close(history, conn, h);
            }
            tracing::info!(
                conn,
                queued,
                limit = self.budget.per_conn,
                "closing connection: client is not reading its replies (--max-outbound-bytes)"
            );
            outbound::drop_connection(h, self.budget);
            return;
        }
        if let Some(n) = barrier {
            h.barrier = n;
        }
        match h
            .q
            .push_frame(barrier.map(Out::Durable), frame, self.budget)
        {
            Ok(w) => self.wakers.extend(w),
            Err(queue::WriterGone) => {
                // The writer is gone: nothing will write or free this.
                outbound::drop_connection(h, self.budget);
                return;
            }
        }
        if self.budget.total() > self.budget.limit {
            outbound::enforce_total(self.conns, self.budget);
        }
    }

    fn close(&mut self, conn: ConnId, release: Release) {
        if let (Some(history), Some(h)) = (self.history.as_deref_mut(), self.conns.get_mut(&conn)) {
            if !h.closing {
                record_close(history, conn, h);
            }
        }
        if release == Release::AfterRecords {
            self.held.push((conn, records::Held::Close));
            return;
        }
        let reads = self.reads_for(conn);
        let Some(h) = self.conns.get_mut(&conn) else {
            return;
        };
        if !h.closing {
            h.closing = true;
            h.why.get_or_insert(history::CloseWhy::Server);
            if let Some(n) = barrier_for(self.durable, reads, h) {
                h.barrier = n;
                if let Ok(w) = h.q.push(Out::Durable(n)) {
                    self.wakers.extend(w);
                }
            }
            if let Ok(w) = h.q.push(Out::Close) {
                self.wakers.extend(w);
            }
        }
    }

    fn fact(&mut self, fact: Fact<'_>) {
        let Some(history) = self.history.as_deref_mut() else {
            return;
        };
        match fact {
            Fact::SessionEnded {
                session,
                conn,
                why,
                zxid,
                ephemerals,
            } => {
                let member = conn.and_then(|c| self.conns.get_mut(&c)).map_or(0, |h| {
                    h.why.get_or_insert(match why {
                        crate::core::SessionEnd::Closed => history::CloseWhy::SessionClosed,
                        crate::core::SessionEnd::MemberStopped => history::CloseWhy::MemberStopped,
                        _ => history::CloseWhy::Expired,
                    });
                    h.member as u32
                });
                history.session_ended(session, conn, member, why, zxid, ephemerals);
            }
            Fact::Herd {
                path,
                event,
                woken,
                reread_path,
                rereads,
            } => {
                let what = format!(
                    "{event} on {path} woke {woken} sessions, {rereads} of them re-read \
                     {reread_path}"
                );
                history.warning("herd", &what);
            }
            Fact::FaultFired {
                conn,
                session,
                action,
            } => {
                let member = self.conns.get_mut(&conn).map_or(0, |h| {
                    if matches!(
                        action,
                        crate::core::FaultAction::DropBefore | crate::core::FaultAction::DropAfter
                    ) {
                        h.why.get_or_insert(history::CloseWhy::Fault);
                    }
                    h.member as u32
                });
                history.fault(conn, member, session, action);
            }
        }
    }

    fn delay(&mut self, conn: ConnId, ms: u64, release: Release) {
        if release == Release::AfterRecords {
            self.held.push((conn, records::Held::Delay(ms)));
            return;
        }
        if let Some(h) = self.conns.get_mut(&conn) {
            if !h.closing {
                match h.q.push(Out::Delay(ms)) {
                    Ok(w) => self.wakers.extend(w),
                    Err(queue::WriterGone) => h.closing = true,
                }
            }
        }
    }
}

/// What a connection task gets when it is registered.
pub(crate) struct ConnChannels {
    /// Its outbound queue.
    pub(crate) q: Arc<queue::ConnQueue>,
    /// The ensemble member whose listener accepted it (0 on a standalone server).
    pub(crate) member: MemberId,
}

impl Shared {
    /// The engine around `core`, storing its transaction records in `store` (none: no
    /// data directory).
    pub(crate) fn new(
        config: &Config,
        client_port: u16,
        core: Core,
        store: Option<Box<dyn records::RecordStore>>,
    ) -> Shared {
        let tick_ms = i64::try_from(config.tick_time.as_millis()).unwrap_or(i64::MAX);
        let reaper_ms = i64::try_from(config.reaper_interval.as_millis()).unwrap_or(i64::MAX);
        Shared {
            state: Mutex::new(State {
                core,
                conns: Conns::default(),
                members: None,
                net_faults: net_faults::NetFaults::default(),
                store,
                held: records::HeldOut::new(),
                history: history::History::new(config.history_events, config.history_bytes),
            }),
            cfg: NetConfig {
                client_port,
                max_frame_len: config.max_frame_len,
                whitelist: config.four_letter_whitelist.clone(),
                max_client_cnxns: config.max_client_cnxns,
                tick_period_ms: tick_ms.min(reaper_ms).max(1),
                handshake_timeout: Duration::from_millis(SESSIONLESS_CNXN_TIMEOUT_MS as u64),
                zookeeper_version: config.zookeeper_version,
            },
            input: Arc::new(InputBudget::new(config.max_total_input_bytes)),
            outbound: Arc::new(OutBudget::new(
                config.max_outbound_bytes,
                config.max_total_outbound_bytes,
            )),
            trace_mask: AtomicI64::new(DEFAULT_TRACE_MASK),
            latencies: latency::Latencies::default(),
            slow: slow_step::SlowSteps::new(config.slow_step_warn),
            planned_tick: AtomicI64::new(i64::MAX),
            wake_ticker: Notify::new(),
            extras: OnceLock::new(),
            failure: OnceLock::new(),
            failed: CancellationToken::new(),
            durability: OnceLock::new(),
            feed: feed::Feed::default(),
            clock: clock::Clock::new(config.clock),
            gate: gate::Gate::new(),
            listeners: listeners::Listeners::default(),
        }
    }

    /// The time to give the core now (session clock and wall clock).
    pub(crate) fn now(&self) -> Now {
        self.clock.now()
    }

    /// Runs `f` on the whole state behind the lock. This is the one place the core is
    /// entered, and it carries the fail-closed policy: if `f` panics (or the lock was
    /// poisoned), the core is marked poisoned, the panic is logged, every connection is
    /// dropped, the listener and ticker stop, and the embedding handle reports the failure
    /// (see [`Shared::failure`]). From then on every call returns [`CoreFailed`] without
    /// touching the state: a possibly half-changed tree is never served.
    #[track_caller]
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> Result<R, CoreFailed> {
        let at = Location::caller();
        self.hold(Some(slow_step::EngineStep { what: None, at }), f)
    }

    /// [`Shared::with_state`] for a step the slow-step warning names `what`.
    #[track_caller]
    pub(crate) fn with_state_named<R>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut State) -> R,
    ) -> Result<R, CoreFailed> {
        let at = Location::caller();
        let step = slow_step::EngineStep {
            what: Some(what),
            at,
        };
        self.hold(Some(step), f)
    }

    /// Takes the lock and runs `f` (see [`Shared::with_state`]). With `step`, the hold is
    /// timed as one step for the slow-step warning; without, `f` times its own steps.
    fn hold<R>(
        &self,
        step: Option<slow_step::EngineStep>,
        f: impl FnOnce(&mut State) -> R,
    ) -> Result<R, CoreFailed> {
        if self.failure.get().is_some() {
            return Err(CoreFailed);
        }
        #[cfg(test)]
        HOLDS.with(|h| h.set(h.get() + 1));
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => {
                let mut g = poisoned.into_inner();
                tracing::error!(
                    "the core lock was poisoned; closing every connection and stopping"
                );
                self.poison(&mut g, "the core lock was poisoned".into());
                return Err(CoreFailed);
            }
        };
        let started = step.as_ref().map(|_| Instant::now());
        if step.is_some() && guard.history.on() {
            guard.history.stamp(self.now());
        }
        let mut late_wakers = Vec::new();
        match catch_unwind(AssertUnwindSafe(|| {
            let r = f(&mut guard);
            // A reconfig changes who votes and leads before the lock is released.
            if guard.core.reconfig_pending() {
                ensemble::apply_reconfig(&mut guard, &self.outbound, self.now());
            }
            // Records a call left (one that did not settle them itself) are stored now.
            let durable = self.durability.get().map(|d| &**d);
            guard.settle(&self.outbound, durable, &mut late_wakers);
            r
        })) {
            Ok(r) => {
                if let Some(reason) = guard.core.stopped().map(str::to_string) {
                    // The transaction log could not keep a write; the core queued nothing
                    // more. The reason was logged where it arose.
                    tracing::error!(
                        connections = guard.conns.len(),
                        "stopping: closing every connection"
                    );
                    self.poison(&mut guard, reason);
                    return Err(CoreFailed);
                }
                self.check_deadline(&guard);
                if let (Some(step), Some(t)) = (step, started) {
                    let us = micros(t.elapsed());
                    if self.slow.is_slow(us) {
                        self.slow.report(&step, us);
                        let what = format!("{step} held the core lock for {} ms", us / 1000);
                        guard.history.warning("slow_step", &what);
                    }
                }
                drop(guard);
                wake(&mut late_wakers);
                Ok(r)
            }
            Err(payload) => {
                let message = panic_message(&*payload);
                tracing::error!(
                    panic = %message,
                    connections = guard.conns.len(),
                    "a core call panicked: the core is poisoned; closing every connection \
                     and stopping"
                );
                self.poison(&mut guard, message);
                Err(CoreFailed)
            }
        }
    }

    /// Stops serving for a reason found (and logged) outside a core call, such as a failed
    /// sync of the transaction log, exactly as after a failed core call.
    pub(crate) fn fail(&self, message: String) {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.failure.get().is_none() {
            tracing::error!(
                connections = guard.conns.len(),
                "stopping: closing every connection"
            );
            self.poison(&mut guard, message);
        }
    }

    /// Marks the core poisoned and drops every connection.
    fn poison(&self, state: &mut State, message: String) {
        let _ = self.failure.set(ServerFailure { message });
        for h in state.conns.values_mut() {
            h.closing = true;
            h.q.kill();
        }
        self.failed.cancel();
    }

    /// Why the server stopped serving, once a core call has panicked.
    pub(crate) fn failure(&self) -> Option<&ServerFailure> {
        self.failure.get()
    }

    /// Group commit's counts, with `--fsync always`.
    pub(crate) fn durability(&self) -> Option<&durable::Durability> {
        self.durability.get().map(|d| &**d)
    }

    /// Transactions synced so far with group commit (all of them without it).
    pub(crate) fn synced(&self) -> u64 {
        self.durability.get().map_or(u64::MAX, |d| d.synced())
    }

    /// Resolves once every transaction written so far is synced (at once without group
    /// commit): a report that shows the tree's state is sent only after this, so it shows no
    /// change that a crash could still undo.
    pub(crate) async fn synced_now(&self) {
        let Some(d) = self.durability.get() else {
            return;
        };
        let n = d.written();
        if d.synced() < n {
            d.wait_synced(n, self.failed.clone()).await;
        }
    }

    /// What a writer holding a group-commit barrier waits on: `None` when the first `n`
    /// transactions are synced already (or there is no group commit).
    pub(crate) fn wait_synced(
        &self,
        n: u64,
    ) -> Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>> {
        let d = self.durability.get().filter(|d| d.synced() < n)?;
        Some(Box::pin(d.wait_synced(n, self.failed.clone())))
    }

    /// `Err` once the core is poisoned.
    pub(crate) fn failure_check(&self) -> Result<(), CoreFailed> {
        match self.failure.get() {
            Some(_) => Err(CoreFailed),
            None => Ok(()),
        }
    }

    /// Resolves once the core is poisoned.
    pub(crate) async fn failed(&self) -> ServerFailure {
        self.failed.cancelled().await;
        self.failure
            .get()
            .cloned()
            .unwrap_or_else(|| ServerFailure {
                message: "the core failed".into(),
            })
    }

    /// Runs `f` on the core with the registry as its outbox; afterwards wakes the ticker if
    /// the core's next deadline moved before the ticker's planned wake-up. Every call into
    /// the core goes through here (or [`Shared::with_state`]), so a panic in it fails the
    /// whole server closed; callers drop their connection on `Err`.
    #[track_caller]
    pub(crate) fn with_core<R>(
        &self,
        f: impl FnOnce(&mut Core, &mut dyn Outbox) -> R,
    ) -> Result<R, CoreFailed> {
        let budget = &self.outbound;
        let durable = self.durability.get().map(|d| &**d);
        let mut wakers = Vec::new();
        let r = self.with_state(|state| state.call(budget, durable, &mut wakers, f));
        wake(&mut wakers);
        r
    }

    /// Runs `f` on the core, read-only, with what the engine knows about the connections
    /// ([`NetView`]). `f` runs under the core's lock: it must copy only what it reports.
    #[track_caller]
    pub(crate) fn inspect<R>(
        &self,
        f: impl FnOnce(&Core, &NetView<'_>) -> R,
    ) -> Result<R, CoreFailed> {
        let first = self.first_member();
        self.inspect_member(first, f)
    }

    /// [`Shared::inspect`] as ensemble member `member` reports (its port, mode and
    /// connections); on a standalone server the same as `inspect`.
    #[track_caller]
    pub(crate) fn inspect_member<R>(
        &self,
        member: MemberId,
        f: impl FnOnce(&Core, &NetView<'_>) -> R,
    ) -> Result<R, CoreFailed> {
        let cfg = &self.cfg;
        let latencies = &self.latencies;
        self.with_state(|state| {
            let facts = NetView {
                cfg,
                conns: &state.conns,
                members: state.members.as_ref(),
                member,
                latencies,
            };
            f(&state.core, &facts)
        })
    }

    /// The lowest member id of an ensemble (0 on a standalone server).
    pub(crate) fn first_member(&self) -> MemberId {
        self.with_members(|m| m.ids().next().unwrap_or(0))
            .ok()
            .flatten()
            .unwrap_or(0)
    }

    /// Runs `f` on the ensemble's membership under the core's lock; `Ok(None)` on a
    /// standalone server.
    #[track_caller]
    pub(crate) fn with_members<R>(
        &self,
        f: impl FnOnce(&Membership) -> R,
    ) -> Result<Option<R>, CoreFailed> {
        self.with_state(|state| state.members.as_ref().map(f))
    }

    /// Whether a step holds the core's lock right now (a connection accepted meanwhile is
    /// registered off the accept loop, see `net::accept_loop`).
    pub(crate) fn core_busy(&self) -> bool {
        matches!(
            self.state.try_lock(),
            Err(std::sync::TryLockError::WouldBlock)
        )
    }

    /// Registers an accepted socket with the core; `Ok(None)` = over the per-IP limit.
    pub(crate) fn open(
        &self,
        remote: SocketAddr,
        member: MemberId,
    ) -> Result<Option<(ConnId, ConnChannels)>, CoreFailed> {
        self.with_state(|state| {
            let serving = match &state.members {
                Some(m) => m.mode(member).serving(),
                None => Serving::ReadWrite,
            };
            let now = self.now();
            let id = state
                .core
                .open_member_connection(remote, now, member, serving)?;
            state.history.stamp(now);
            state.history.conn_open(id, member as u32, remote);
            let q = Arc::new(queue::ConnQueue::default());
            let fault = state.net_faults.for_conn(id, remote, member);
            if fault != net_faults::ConnFault::default() {
                let _ = q.set_net_fault(fault);
            }
            state.conns.insert(
                id,
                Box::new(ConnHandle {
                    q: q.clone(),
                    closing: false,
                    member,
                    latency: latency::AvgMinMax::default(),
                    barrier: 0,
                    peer: remote,
                    session: 0,
                    why: None,
                    close_recorded: false,
                }),
            );
            Some((id, ConnChannels { q, member }))
        })
    }

    /// Runs the handshake of connection `id` (its connect request `connect`) in the core,
    /// and records it in the history.
    pub(crate) fn handshake(
        &self,
        id: ConnId,
        connect: Bytes,
        now: Now,
    ) -> Result<crate::core::Handshake, CoreFailed> {
        let asked = history::frames::connect_request(&connect);
        let budget = &self.outbound;
        let durable = self.durability.get().map(|d| &**d);
        let mut wakers = Vec::new();
        let r = self.with_state(|state| {
            let mut seq = None;
            if state.history.on() {
                if let Some(h) = state.conns.get_mut(&id) {
                    // Until the answer says otherwise, the connection is the asked session's.
                    h.session = asked.0;
                    seq = Some(state.history.handshake(id, h.member as u32, asked));
                }
            }
            let mut out = Registry::new(
                &mut state.conns,
                budget,
                durable,
                &mut wakers,
                &mut state.held,
                Some(&mut state.history),
            );
            out.expect_connect = Some(id);
            let r = state.core.handshake(id, connect, now, &mut out);
            let granted = out.connect.take();
            state.settle(budget, durable, &mut wakers);
            let established = r == crate::core::Handshake::Established;
            if let Some(seq) = seq {
                if let Some(h) = state.conns.get_mut(&id) {
                    if let Some((_, session, _)) = granted.filter(|_| established) {
                        h.session = session;
                    }
                }
                state.history.handshake_done(seq, granted, established);
            }
            r
        });
        wake(&mut wakers);
        r
    }

    /// Records a control-plane operation in the history (before it runs, so what it causes
    /// follows it). A disconnect marks the session's connections as closed by control.
    pub(crate) fn record_control(&self, action: &'static str, session: i64, detail: &str) {
        let _ = self.with_state(|state| {
            if !state.history.on() {
                return;
            }
            if action == "disconnect" {
                for h in state.conns.values_mut() {
                    if h.session == session && session != 0 && !h.closing {
                        h.why.get_or_insert(history::CloseWhy::Control);
                    }
                }
            }
            state.history.control(action, session, detail);
        });
    }

    /// Records a snapshot written (see [`history::History::snapshot`]).
    pub(crate) fn record_snapshot(&self, zxid: i64, bytes: usize, total: Duration, held: Duration) {
        let _ = self.with_state(|state| {
            let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
            state
                .history
                .snapshot(zxid, bytes as u64, ms(total), ms(held));
        });
    }

    /// The history's events `filter` keeps, and its summary. The events are read in steps of
    /// at most [`HISTORY_SCAN`] events, each under a hold of the lock of its own, so that a
    /// read never holds the core for more than that whatever its filter keeps.
    pub(crate) fn history(
        &self,
        filter: &history::HistoryFilter,
    ) -> Result<(Vec<history::HistoryEvent>, history::HistorySummary), CoreFailed> {
        let (mut reading, mut more) = self.with_state(|state| {
            let mut reading = history::Reading::new(filter, state.history.next_seq());
            let more = reading.step(&state.history, HISTORY_SCAN);
            (reading, more)
        })?;
        while more {
            more = self.with_state(|state| reading.step(&state.history, HISTORY_SCAN))?;
        }
        let summary = self.with_state(|state| state.history.summary())?;
        Ok((reading.out, summary))
    }

    /// Hands a connection's batch of requests over to be fed to the core (see [`feed`]) and
    /// feeds what waits unless another thread is feeding. `open` turns false once the
    /// connection is known to be closing (stop reading); a batch another thread will feed
    /// leaves it true, and the connection waits for it before reading more
    /// ([`queue::ConnQueue::park_fed`]).
    pub(crate) fn requests(self: &Arc<Self>, batch: feed::Handed) -> Handover {
        let id = batch.id;
        self.feed.hand_over(batch);
        let fed = self.feed_waiting(Some(id));
        Handover {
            open: fed.open.unwrap_or(true),
            step_aside: fed.readers_woken,
        }
    }

    /// Feeds the batches handed over, as the feeder, until none waits (or after
    /// [`feed::MAX_ROUNDS`] rounds, when a task of its own takes over); returns at once if
    /// another thread is feeding. With `mine`, whether that connection is still open after
    /// its batch, if this call fed it.
    fn feed_waiting(self: &Arc<Self>, mine: Option<ConnId>) -> Fed {
        let mut fed = Fed::default();
        let mut taken = Vec::new();
        let mut wakers = Vec::new();
        for _ in 0..feed::MAX_ROUNDS {
            if !self.feed.start_feeding() {
                return fed;
            }
            self.feed.take(&mut taken);
            if !taken.is_empty() {
                match self.feed_batches(&mut taken, mine, &mut wakers) {
                    Ok(Some(o)) => fed.open = Some(o),
                    Ok(None) => {}
                    Err(CoreFailed) => fed.open = Some(false),
                }
            }
            let more = self.feed.stop_feeding();
            // A round is reads only or writes only ([`feed::Feed::take`]). A round of reads
            // ends this feeder's turn: a task of its own goes on with whatever waits, and the
            // tasks of the connections whose reads were fed (woken by their batch being fed or
            // by a reply to write) are woken after that task is queued, so the last one runs
            // next on this thread and a read's reply (this connection's own too) does not also
            // wait for further rounds of writes. When tasks were woken while more waits, the
            // caller is told, so that it lets them run before going on with its own connection.
            let fed_reads = taken.first().is_some_and(feed::Handed::reads_only);
            debug_assert!(taken.iter().all(|b| b.reads_only() == fed_reads));
            wakers.extend(taken.drain(..).filter_map(|b| b.q.fed()));
            if !fed_reads {
                wake(&mut wakers);
                if !more {
                    return fed;
                }
                continue;
            }
            if more {
                self.go_on_feeding();
            }
            fed.readers_woken = more && !wakers.is_empty();
            wake(&mut wakers);
            return fed;
        }
        self.go_on_feeding();
        fed
    }

    /// Lets a task of its own feed what waits, so that this thread returns to its connection.
    fn go_on_feeding(self: &Arc<Self>) {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let shared = self.clone();
                rt.spawn(async move {
                    shared.feed_waiting(None);
                });
            }
            Err(_) => {
                self.feed_waiting(None);
            }
        }
    }

    /// Feeds `batches` to the core in order, all under one lock, each request with its
    /// latency recorded. With `mine`, whether that connection is still open after its batch.
    fn feed_batches(
        &self,
        batches: &mut [feed::Handed],
        mine: Option<ConnId>,
        wakers: &mut Vec<Waker>,
    ) -> Result<Option<bool>, CoreFailed> {
        let budget = &self.outbound;
        let latencies = &self.latencies;
        let durable = self.durability.get().map(|d| &**d);
        let slow = &self.slow;
        self.hold(None, |state| {
            let now = self.now();
            // One clock reading per request: the end of one request is the start of the next.
            let mut started = Instant::now();
            // Gathered here and added to the shared figures once for all the batches.
            let mut times = latency::Batch::default();
            let mut mine_open = None;
            for batch in batches.iter_mut() {
                let id = batch.id;
                for frame in batch.frames.drain(..) {
                    // Its member and session, for the history.
                    let (member, session) = match state.conns.get(&id) {
                        Some(h) if !h.closing => (h.member as u32, h.session),
                        _ => break,
                    };
                    let reads = read_barrier(durable, &frame);
                    let asked = if state.history.on() {
                        history::frames::request(&frame)
                    } else {
                        None
                    };
                    let seq = asked.as_ref().map(|facts| {
                        state.history.stamp(now);
                        state.history.request(id, member, session, facts, &frame)
                    });
                    let mut out = Registry::new(
                        &mut state.conns,
                        budget,
                        durable,
                        wakers,
                        &mut state.held,
                        Some(&mut state.history),
                    )
                    .reading(id, reads);
                    if let (Some(facts), Some(seq)) = (&asked, seq) {
                        out = out.expecting(id, facts.xid, facts.code, seq);
                    }
                    // The request's start: its header (xid, opcode) says which distribution
                    // the time goes to, and the rest is read only if the step turns out slow.
                    let mut kept = [0u8; slow_step::KEPT];
                    let whole = frame.len();
                    let n = whole.min(slow_step::KEPT);
                    kept[..n].copy_from_slice(&frame[..n]);
                    state.core.request(id, frame, now, &mut out);
                    let watching = asked.as_ref().is_some_and(|f| f.may_watch());
                    if let Some(seq) = seq.filter(|_| out.replied && watching) {
                        state.history.request_done(seq);
                    }
                    // Each request's records are stored before the next runs, so a later
                    // read in the batch waits only for what it reads.
                    state.settle(budget, durable, wakers);
                    let done = Instant::now();
                    let took = micros(done.saturating_duration_since(started));
                    times.record(&kept[..n.min(8)], took);
                    if slow.is_slow(took) {
                        let step = slow_step::RequestStep {
                            frame: &kept[..n],
                            len: whole,
                            conn: id,
                        };
                        slow.report(&step, took);
                        let what = format!("{step} held the core lock for {} ms", took / 1000);
                        state.history.warning("slow_step", &what);
                    }
                    let total = micros(done.saturating_duration_since(batch.arrived));
                    started = done;
                    times.record_request(total);
                    if let Some(h) = state.conns.get_mut(&id) {
                        h.latency.record(total);
                    }
                }
                if batch.close_after {
                    // A close records nothing in the history until the socket is gone.
                    Registry::new(
                        &mut state.conns,
                        budget,
                        durable,
                        wakers,
                        &mut state.held,
                        None,
                    )
                    .close(id, Release::Now);
                }
                if mine == Some(id) {
                    mine_open = Some(state.conns.get(&id).is_some_and(|h| !h.closing));
                }
            }
            latencies.add(&times);
            mine_open
        })
    }

    /// `srst` (`server`) or `crst`: zero the packet counters and the request latency, of the
    /// server or of every connection.
    pub(crate) fn reset_stats(&self, server: bool) -> Result<(), CoreFailed> {
        self.with_state(|state| {
            if server {
                state.core.reset_server_stats();
                self.latencies.reset_requests();
            } else {
                state.core.reset_connection_stats();
                for h in state.conns.values_mut() {
                    h.latency = latency::AvgMinMax::default();
                }
            }
        })
    }

    /// Asks for `id` to be closed after what is queued has been written.
    pub(crate) fn close(&self, id: ConnId) {
        let _ = self.with_core(|_, out| out.close(id, Release::Now));
    }

    /// The client closed `id` (or its socket failed): close it here too, and say so in the
    /// history.
    pub(crate) fn client_gone(&self, id: ConnId) {
        let budget = &self.outbound;
        let durable = self.durability.get().map(|d| &**d);
        let mut wakers = Vec::new();
        let _ = self.with_state(|state| {
            if let Some(h) = state.conns.get_mut(&id) {
                if !h.closing {
                    h.why.get_or_insert(history::CloseWhy::Client);
                }
            }
            state.call(budget, durable, &mut wakers, |_, out| {
                out.close(id, Release::Now)
            });
        });
        wake(&mut wakers);
    }

    /// The socket of `id` is gone: forget it here and in the core.
    pub(crate) fn closed(&self, id: ConnId) {
        let _ = self.with_state(|state| {
            if let Some(mut h) = state.conns.remove(&id) {
                // Whatever the writer left unwritten is freed with the task.
                h.q.queued.discard(&self.outbound);
                // A close no step decided (the socket failed, or a limit dropped it) is
                // recorded now.
                if !h.closing {
                    h.why.get_or_insert(history::CloseWhy::Client);
                }
                record_close(&mut state.history, id, &mut h);
            }
            state.core.connection_closed(id);
        });
    }

    fn check_deadline(&self, state: &State) {
        if let Some(d) = state.next_deadline() {
            if d < self.planned_tick.load(Ordering::Relaxed) {
                self.wake_ticker.notify_one();
            }
        }
    }

    /// Runs what fell due by `at`: the ensemble members' timing steps (noticing a lost
    /// leader or quorum, elections), then the core's tick (session expiry, reaping). Returns
    /// the next deadline of either.
    pub(crate) fn tick(&self, at: Now) -> Result<Option<i64>, CoreFailed> {
        let budget = &self.outbound;
        let durable = self.durability.get().map(|d| &**d);
        let mut wakers = Vec::new();
        let next =
            self.with_state_named("the tick (session expiry, reaping, elections)", |state| {
                ensemble::follow::advance(state, at, budget, durable, &mut wakers);
                state.call(budget, durable, &mut wakers, |core, out| core.tick(at, out));
                if let Some(store) = state.store.as_mut() {
                    for (ms, bytes) in store.take_slow_syncs() {
                        let what =
                            format!("syncing the transaction log took {ms} ms ({bytes}-byte file)");
                        state.history.warning("slow_sync", &what);
                    }
                }
                state.next_deadline()
            });
        wake(&mut wakers);
        next
    }
}

impl State {
    /// The earlier of the core's next deadline and the ensemble members' next timing step.
    fn next_deadline(&self) -> Option<i64> {
        let members = self.members.as_ref().and_then(Membership::next_deadline);
        match (self.core.next_deadline(), members) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Calls [`Core::tick`] at the core's next deadline (on the session clock), and at least
/// every tick period. It stands still during a pause. Under a manual clock the deadlines
/// are reached only by `advance`, which ticks the core itself.
pub(crate) async fn ticker(shared: Arc<Shared>) {
    let period = shared.cfg.tick_period_ms;
    loop {
        shared.gate.wait().await;
        // A long step holds the core: wait for it without tying up a runtime thread (on a
        // small machine the runtime has two, and the accept loop needs one to answer `ruok`).
        while shared.core_busy() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let at = shared.now();
        let now = at.mono;
        let Ok(next) = shared.tick(at) else {
            return;
        };
        let next = next.filter(|_| shared.clock.mode() == crate::config::ClockMode::Real);
        let wake = next
            .map_or(now + period, |d| d.min(now + period))
            .max(now + 1);
        shared.planned_tick.store(wake, Ordering::Relaxed);
        let sleep = Duration::from_millis(u64::try_from(wake - now).unwrap_or(1));
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = shared.wake_ticker.notified() => {}
        }
    }
}

/// Whole microseconds of `d`, saturating.
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
