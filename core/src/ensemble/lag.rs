//! Lagging ensemble members: a member told to lag keeps its own replica of the tree, fed by
//! the committed transactions in zxid order, and serves its clients' reads and watches from
//! it; its clients' writes and syncs are answered once the replica has applied them
//! (docs/protocol.md, "Lagging members and sync"). With no member lagging none of this runs.

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;
use zkd_protocol::disk::TxnEntry;
use zkd_protocol::{FollowerAnswers, Request};

use crate::db::{Applied, Db};
use crate::request::execute::Call;
use crate::watch::watches::Watches;
use crate::{ConnId, Core, Frame, Now, Outbox};

/// Identifies one member of a simulated ensemble (0 in a standalone server).
pub type MemberId = u64;

/// The lagging member a request came through, and how far it lags: chosen once per request
/// by [`Core::request`] and handed down to [`Core::route`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaggingMember {
    pub member: MemberId,
    pub lag: Lag,
}

/// How far a member trails the committed history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lag {
    /// Applies every transaction as it commits: the member reads the main tree.
    #[default]
    Lockstep,
    /// Applies each transaction this many milliseconds (session clock) after it committed.
    Ms(u64),
    /// Stays this many transactions behind the last committed one. A write or sync of the
    /// member's own clients brings it up to that write (or to the sync) at once.
    Txns(u64),
    /// Applies nothing until its lag is changed; its clients' writes and syncs wait.
    Stalled,
}

impl std::fmt::Display for Lag {
    /// As the control plane shows it: `lockstep`, `ms=N`, `txns=K` or `stall`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lag::Lockstep => f.write_str("lockstep"),
            Lag::Ms(ms) => write!(f, "ms={ms}"),
            Lag::Txns(k) => write!(f, "txns={k}"),
            Lag::Stalled => f.write_str("stall"),
        }
    }
}

/// Requests a connection may have waiting behind a write its member has not applied yet;
/// past either limit the connection is closed (its client reconnects elsewhere).
const MAX_DEFERRED_REQUESTS: usize = 1000;
const MAX_DEFERRED_BYTES: usize = 16 << 20;

/// Transactions kept for lagging members at most, and bytes of node data, paths and events
/// they hold at most; a member further behind is moved forward.
#[cfg(not(test))]
const MAX_HISTORY: usize = 100_000;
#[cfg(test)]
const MAX_HISTORY: usize = 64;
#[cfg(not(test))]
const MAX_HISTORY_BYTES: usize = 64 << 20;
#[cfg(test)]
const MAX_HISTORY_BYTES: usize = 16 << 10;

/// What one recorded change or event counts against [`MAX_HISTORY_BYTES`] besides its path
/// and data: the node's other fields and the bookkeeping around them.
const RECORD_OVERHEAD: usize = 128;

/// One zxid of the committed history, as the replicas apply it.
struct Entry {
    zxid: i64,
    /// Session-clock time of the commit.
    mono: i64,
    /// The transaction's record as the log holds it (`None` for a zxid that records
    /// nothing: a new leader's first).
    record: Option<Bytes>,
    /// What it counts against [`MAX_HISTORY_BYTES`].
    bytes: usize,
}

/// A lagging member's own copy of the state: its watches are those its clients set, which
/// fire when the copy applies the change.
struct Replica {
    lag: Lag,
    db: Db,
}

/// A connection whose member has not yet applied the write (or sync) it is waiting for.
struct Blocked {
    member: MemberId,
    /// The zxid the member must reach; `None` once reached, while `deferred` is replayed.
    until: Option<i64>,
    reply: Option<Frame>,
    /// Requests that arrived meanwhile, in order (answered after the reply).
    deferred: VecDeque<Bytes>,
    deferred_bytes: usize,
    seq: u64,
}

/// Every lagging member, the history they still have to apply, and blocked connections.
#[derive(Default)]
pub(crate) struct Lagging {
    replicas: BTreeMap<MemberId, Replica>,
    log: VecDeque<Entry>,
    /// The sum of the entries' `bytes`.
    log_bytes: usize,
    blocked: HashMap<ConnId, Blocked>,
    seq: u64,
    draining: bool,
    /// Members that cannot reach a leader with a quorum: their clients' writes and syncs
    /// are held, unexecuted, until the member reaches one again (then they run) or drops
    /// its clients (then they never run).
    holding: std::collections::BTreeSet<MemberId>,
}

/// The zxid a held request waits for: never reached, so only [`Core::set_member_holding`]
/// lets it go.
const HELD: i64 = i64::MAX;

impl Lagging {
    /// True when no member lags or holds writes and no connection waits: the core runs as a
    /// single server.
    pub(crate) fn idle(&self) -> bool {
        self.replicas.is_empty() && self.blocked.is_empty() && self.holding.is_empty()
    }
}

/// What a request needs from a lagging member before it is answered.
enum Needs {
    /// Served from the member's replica at once.
    Read,
    /// Executed by the ensemble; answered once the member applied its zxid.
    Write,
    /// Answered once the member applied everything committed before it.
    Sync,
}

fn needs(req: &Request) -> Needs {
    match req.op().info().follower {
        FollowerAnswers::Locally => Needs::Read,
        FollowerAnswers::AfterCommit => Needs::Write,
        FollowerAnswers::AfterSync => Needs::Sync,
    }
}

impl Core {
    fn member_of(&self, conn: ConnId) -> MemberId {
        self.conns.get(&conn).map_or(0, |c| c.member)
    }

    /// How far `member` is told to lag.
    pub fn member_lag(&self, member: MemberId) -> Lag {
        self.lag
            .replicas
            .get(&member)
            .map_or(Lag::Lockstep, |r| r.lag)
    }

    /// How many recorded transactions `member` has yet to apply (0 in lockstep).
    pub fn member_behind(&self, member: MemberId) -> u64 {
        let applied = self.member_zxid(member);
        let pending = self.lag.log.len() - self.lag.log.partition_point(|e| e.zxid <= applied);
        pending as u64
    }

    /// The last zxid `member` has applied (the last committed one for a member in lockstep).
    pub fn member_zxid(&self, member: MemberId) -> i64 {
        self.lag
            .replicas
            .get(&member)
            .map_or(self.db.zxid, |r| r.db.zxid)
    }

    /// Sets how far `member` lags. A member leaving lockstep keeps serving the history up to
    /// now and moves on by its rule; one set back to lockstep first catches up (its clients'
    /// watches fire, their waiting replies go out) and then reads the main tree again.
    pub fn set_member_lag(
        &mut self,
        member: MemberId,
        lag: Lag,
        now: impl Into<Now>,
        out: &mut dyn Outbox,
    ) {
        let now = now.into();
        self.now_ms = now.mono;
        let lag = match lag {
            Lag::Ms(0) | Lag::Txns(0) => Lag::Lockstep,
            lag => lag,
        };
        match (self.lag.replicas.get_mut(&member), lag) {
            (None, Lag::Lockstep) => {}
            (None, lag) => {
                let mut db = self.db.fork();
                let conns: Vec<ConnId> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.member == member)
                    .map(|(id, _)| *id)
                    .collect();
                for conn in conns {
                    move_watches(&mut self.db.watches, &mut db.watches, conn);
                }
                self.lag.replicas.insert(member, Replica { lag, db });
            }
            (Some(r), Lag::Lockstep) => {
                // Up to date, with its own writes applied at once while the waiting
                // requests are replayed; then back onto the main tree.
                r.lag = Lag::Txns(0);
                let head = self.db.zxid;
                self.bring_up(member, head, out);
                self.drain(now, out);
                if let Some(mut r) = self.lag.replicas.remove(&member) {
                    let conns: Vec<ConnId> = r.db.watches.conns().collect();
                    for conn in conns {
                        move_watches(&mut r.db.watches, &mut self.db.watches, conn);
                    }
                }
                self.prune_log();
            }
            (Some(r), lag) => r.lag = lag,
        }
        self.advance_members(now, out);
    }

    /// Uses the next zxid.
    pub(crate) fn next_zxid(&mut self) -> i64 {
        self.db.zxid += 1;
        self.db.zxid
    }

    /// The state a request through lagging member `member` sees (`None`, or a member not
    /// lagging: the main one). `None` only for a member that stopped lagging meanwhile.
    pub(crate) fn view_db(&mut self, member: Option<MemberId>) -> Option<&mut Db> {
        match member {
            None => Some(&mut self.db),
            Some(m) => self.lag.replicas.get_mut(&m).map(|r| &mut r.db),
        }
    }

    /// [`Core::view_db`], falling back on the main state.
    pub(crate) fn view_or_main(&mut self, member: Option<MemberId>) -> &mut Db {
        match member.and_then(|m| self.lag.replicas.get_mut(&m)) {
            Some(r) => &mut r.db,
            None => &mut self.db,
        }
    }

    /// Whether any member lags behind (and applies what commits record).
    pub(crate) fn lagging(&self) -> bool {
        !self.lag.replicas.is_empty()
    }

    /// Keeps a committed transaction's record (`None`: a zxid that records nothing) for
    /// the lagging members to apply.
    pub(crate) fn record_history(&mut self, zxid: i64, mono: i64, record: Option<Bytes>) {
        if self.lag.replicas.is_empty() {
            return;
        }
        let bytes = RECORD_OVERHEAD + record.as_ref().map_or(0, Bytes::len);
        self.lag.log.push_back(Entry {
            zxid,
            mono,
            record,
            bytes,
        });
        self.lag.log_bytes += bytes;
    }

    /// Moves every lagging member forward by its rule at `now`, then answers what that
    /// released. Called first by every entry point that carries a time.
    pub(crate) fn advance_members(&mut self, now: Now, out: &mut dyn Outbox) {
        if self.lag.idle() {
            return;
        }
        let members: Vec<(MemberId, Lag)> =
            self.lag.replicas.iter().map(|(m, r)| (*m, r.lag)).collect();
        for (m, lag) in members {
            let target = match lag {
                Lag::Ms(ms) => {
                    let cutoff = now
                        .mono
                        .saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX));
                    let i = self.lag.log.partition_point(|e| e.mono <= cutoff);
                    match i.checked_sub(1).and_then(|i| self.lag.log.get(i)) {
                        Some(e) => e.zxid,
                        None => continue,
                    }
                }
                // Counted in recorded transactions, not zxid values: a new epoch jumps the
                // zxid without k transactions in between.
                Lag::Txns(k) => {
                    let back = usize::try_from(k).unwrap_or(usize::MAX);
                    let len = self.lag.log.len();
                    match len.checked_sub(back.saturating_add(1)) {
                        Some(i) => self.lag.log[i].zxid,
                        None => continue,
                    }
                }
                Lag::Stalled | Lag::Lockstep => continue,
            };
            self.bring_up(m, target, out);
        }
        self.prune_log();
        self.cap_history(out);
        self.drain(now, out);
    }

    /// Keeps the recorded history within [`MAX_HISTORY`] transactions: a member further
    /// behind is moved forward (its watches fire, its waiting replies go out), as a leader
    /// resynchronizes a follower that fell too far behind.
    fn cap_history(&mut self, out: &mut dyn Outbox) {
        // The oldest entries to let go of: past the count, then as many more as the bytes
        // need (a walk over the entries dropped, no further).
        let mut excess = self.lag.log.len().saturating_sub(MAX_HISTORY);
        let mut bytes = self.lag.log_bytes;
        bytes -= self
            .lag
            .log
            .iter()
            .take(excess)
            .map(|e| e.bytes)
            .sum::<usize>();
        while bytes > MAX_HISTORY_BYTES {
            let Some(e) = self.lag.log.get(excess) else {
                break;
            };
            bytes -= e.bytes;
            excess += 1;
        }
        let Some(floor) = excess
            .checked_sub(1)
            .and_then(|i| self.lag.log.get(i))
            .map(|e| e.zxid)
        else {
            return;
        };
        let behind: Vec<MemberId> = self
            .lag
            .replicas
            .iter()
            .filter(|(_, r)| r.db.zxid < floor)
            .map(|(m, _)| *m)
            .collect();
        for m in behind {
            tracing::warn!(
                member = m,
                "member is more than {MAX_HISTORY} transactions or {MAX_HISTORY_BYTES} bytes of history behind; moving it forward"
            );
            self.bring_up(m, floor, out);
        }
        self.prune_log();
    }

    /// When a member lagging by time next has a transaction to apply (session clock).
    pub(crate) fn lag_deadline(&self) -> Option<i64> {
        self.lag
            .replicas
            .values()
            .filter_map(|r| {
                let Lag::Ms(ms) = r.lag else { return None };
                let i = self.lag.log.partition_point(|e| e.zxid <= r.db.zxid);
                let e = self.lag.log.get(i)?;
                Some(e.mono.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX)))
            })
            .min()
    }

    /// Applies the history to `member`'s replica up to `target`, one zxid at a time: its
    /// record, then its clients' watch events, then the replies that waited for it.
    fn bring_up(&mut self, member: MemberId, target: i64, out: &mut dyn Outbox) {
        loop {
            let Some(r) = self.lag.replicas.get_mut(&member) else {
                return;
            };
            if r.db.zxid >= target {
                return;
            }
            let i = self.lag.log.partition_point(|e| e.zxid <= r.db.zxid);
            let Some(e) = self.lag.log.get(i).filter(|e| e.zxid <= target) else {
                // Nothing recorded up to the target: those zxids changed nothing.
                r.db.zxid = target;
                self.release(member, target, out);
                return;
            };
            let (zxid, mono) = (e.zxid, e.mono);
            let applied = match e.record.clone().map(TxnEntry::decode) {
                Some(Ok(entry)) => r.db.apply(&entry.header, &entry.body, mono),
                Some(Err(err)) => {
                    // The core encoded it: never expected.
                    tracing::error!(zxid, %err, "a lagging member cannot read a recorded transaction");
                    Applied::default()
                }
                None => Applied::default(),
            };
            r.db.zxid = zxid;
            for (event, p, acl) in &applied.events {
                self.fire_in(Some(member), out, *event, p, zxid, acl);
            }
            self.release(member, zxid, out);
        }
    }

    /// Sends the replies `member` has now applied, in zxid order; their connections'
    /// waiting requests are replayed by [`Core::drain`].
    fn release(&mut self, member: MemberId, zxid: i64, out: &mut dyn Outbox) {
        let mut ready: Vec<(i64, u64, ConnId)> = self
            .lag
            .blocked
            .iter()
            .filter_map(|(c, b)| {
                let until = b.until.filter(|u| b.member == member && *u <= zxid)?;
                Some((until, b.seq, *c))
            })
            .collect();
        ready.sort_unstable();
        for (_, _, conn) in ready {
            let Some(b) = self.lag.blocked.get_mut(&conn) else {
                continue;
            };
            b.until = None;
            let reply = b.reply.take();
            if b.deferred.is_empty() {
                self.lag.blocked.remove(&conn);
            }
            if let Some(frame) = reply {
                self.send(out, conn, frame);
            }
        }
    }

    /// Replays the requests of connections whose wait is over, in order, until each has
    /// none left or waits again.
    fn drain(&mut self, now: Now, out: &mut dyn Outbox) {
        if self.lag.draining {
            return;
        }
        self.lag.draining = true;
        loop {
            let next = self
                .lag
                .blocked
                .iter()
                .filter(|(_, b)| b.until.is_none())
                .min_by_key(|(_, b)| b.seq)
                .map(|(c, _)| *c);
            let Some(conn) = next else { break };
            let Some(mut b) = self.lag.blocked.remove(&conn) else {
                break;
            };
            while let Some(payload) = b.deferred.pop_front() {
                let lagging = self.lagging_member(conn);
                self.decode(conn, payload, now, lagging, out);
                if let Some(again) = self.lag.blocked.get_mut(&conn) {
                    again.deferred_bytes += b.deferred.iter().map(Bytes::len).sum::<usize>();
                    again.deferred.extend(b.deferred.drain(..));
                    break;
                }
            }
        }
        self.lag.draining = false;
    }

    /// Drops history every lagging member has applied.
    fn prune_log(&mut self) {
        let oldest = self.lag.replicas.values().map(|r| r.db.zxid).min();
        match oldest {
            None => {
                self.lag.log.clear();
                self.lag.log_bytes = 0;
            }
            Some(z) => {
                while self.lag.log.front().is_some_and(|e| e.zxid <= z) {
                    if let Some(e) = self.lag.log.pop_front() {
                        self.lag.log_bytes -= e.bytes;
                    }
                }
            }
        }
    }

    /// A connection is gone: forget its waits and its watches on lagging members.
    pub(crate) fn lag_forget(&mut self, conn: ConnId) {
        if self.lag.idle() {
            return;
        }
        self.lag.blocked.remove(&conn);
        for r in self.lag.replicas.values_mut() {
            r.db.watches.remove_conn(conn);
        }
    }

    /// Keeps `payload` when `conn` waits for its member to apply an earlier write or sync
    /// (per-session FIFO), closing the connection when too much waits; otherwise hands it
    /// back to be served now.
    pub(crate) fn wait_turn(
        &mut self,
        conn: ConnId,
        payload: Bytes,
        now: Now,
        out: &mut dyn Outbox,
    ) -> Option<Bytes> {
        let Some(b) = self.lag.blocked.get_mut(&conn) else {
            return Some(payload);
        };
        b.deferred_bytes += payload.len();
        b.deferred.push_back(payload);
        let over =
            b.deferred.len() > MAX_DEFERRED_REQUESTS || b.deferred_bytes > MAX_DEFERRED_BYTES;
        // The client is alive: its session is heard from, as a follower would report.
        if let Some(sid) = self.conns.get(&conn).and_then(|c| c.session) {
            self.sessions.touch(sid, now.mono);
        }
        if over {
            tracing::info!(
                conn,
                "too many requests waiting behind a write on a lagging member; closing"
            );
            self.lag.blocked.remove(&conn);
            self.finish_connection(conn, out);
        }
        None
    }

    /// Starts or ends holding `member`'s writes and syncs (see [`Lagging::holding`]). Ending
    /// it with `replay` runs what was held, in order, as if it had just arrived; without,
    /// what was held is forgotten unexecuted (the member is dropping those clients).
    pub fn set_member_holding(
        &mut self,
        member: MemberId,
        on: bool,
        replay: bool,
        now: impl Into<Now>,
        out: &mut dyn Outbox,
    ) {
        let now = now.into();
        if on {
            self.lag.holding.insert(member);
            return;
        }
        if !self.lag.holding.remove(&member) {
            return;
        }
        let held: Vec<ConnId> = self
            .lag
            .blocked
            .iter()
            .filter(|(_, b)| b.member == member && b.until == Some(HELD))
            .map(|(c, _)| *c)
            .collect();
        for conn in held {
            if replay {
                if let Some(b) = self.lag.blocked.get_mut(&conn) {
                    b.until = None;
                }
            } else {
                self.lag.blocked.remove(&conn);
            }
        }
        if replay {
            self.drain(now, out);
        }
    }

    /// Holds `payload` when it is a write or sync of a client of a member that holds them
    /// (see [`Lagging::holding`]); otherwise hands it back. Reads go on from the member's
    /// view.
    pub(crate) fn hold_if_unreachable(&mut self, conn: ConnId, payload: Bytes) -> Option<Bytes> {
        if self.lag.holding.is_empty() {
            return Some(payload);
        }
        let member = self.member_of(conn);
        if !self.lag.holding.contains(&member) {
            return Some(payload);
        }
        let op = payload
            .get(4..8)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .and_then(|b| zkd_protocol::OpCode::from_i32(i32::from_be_bytes(b)));
        if op.is_none_or(|op| op.info().follower == FollowerAnswers::Locally) {
            return Some(payload);
        }
        self.lag.seq += 1;
        let bytes = payload.len();
        let held = Blocked {
            member,
            until: Some(HELD),
            reply: None,
            deferred: VecDeque::from([payload]),
            deferred_bytes: bytes,
            seq: self.lag.seq,
        };
        self.lag.blocked.insert(conn, held);
        None
    }

    /// The lagging member `conn` came through, if it lags: looked up once per request.
    pub(crate) fn lagging_member(&self, conn: ConnId) -> Option<LaggingMember> {
        if self.lag.replicas.is_empty() {
            // No member lags (the usual case): nothing to look up.
            return None;
        }
        let member = self.member_of(conn);
        let lag = self.lag.replicas.get(&member)?.lag;
        Some(LaggingMember { member, lag })
    }

    /// The third stage of a request: routes a decoded request to [`Core::execute`]. When its
    /// connection's member does not lag (`lagging` is `None`, the usual case) it runs at once; for a connection of a lagging
    /// member, reads run on its replica, and writes and syncs go through the ensemble and are
    /// answered once the member applied them. `muted`: the reply is discarded anyway (a
    /// fault rule), so nothing waits for it.
    pub(crate) fn route(
        &mut self,
        call: Call,
        req: Request,
        now: Now,
        lagging: Option<LaggingMember>,
        out: &mut dyn Outbox,
        muted: bool,
    ) -> Option<(i32, i64, Frame)> {
        let Call { conn, sid, xid } = call;
        if self.local_sessions.contains_key(&sid)
            && crate::request::execute::creates_ephemeral(&req)
        {
            // A local session's first ephemeral: it becomes global first (its own
            // transaction), or, without upgrading, the create is refused.
            if !self.upgrade_local_session(sid, now, out) {
                let zxid = self.db.zxid;
                let err = zkd_protocol::ErrorCode::EphemeralOnLocalSession.code();
                let reply = crate::request::reply::header_only(xid, zxid, err);
                return Some((xid, zxid, reply));
            }
        }
        let Some(LaggingMember { member, lag }) = lagging else {
            return self.execute(call, req, now, None, out);
        };
        let sync = match needs(&req) {
            Needs::Read => return self.execute(call, req, now, Some(member), out),
            Needs::Write => false,
            Needs::Sync => true,
        };
        let done = self.execute(call, req, now, None, out)?;
        let need = done.1;
        if matches!((lag, sync), (Lag::Txns(_), _) | (Lag::Ms(_), true)) {
            self.bring_up(member, need, out);
        }
        if muted || self.member_zxid(member) >= need {
            return Some(done);
        }
        self.lag.seq += 1;
        let blocked = Blocked {
            member,
            until: Some(need),
            reply: Some(done.2),
            deferred: VecDeque::new(),
            deferred_bytes: 0,
            seq: self.lag.seq,
        };
        self.lag.blocked.insert(conn, blocked);
        None
    }
}

/// Moves `conn`'s watches from one table to another.
fn move_watches(from: &mut Watches, to: &mut Watches, conn: ConnId) {
    for (p, kinds) in from.of_conn(conn) {
        for kind in kinds {
            to.add(conn, &p, kind);
        }
    }
    from.remove_conn(conn);
}

#[cfg(test)]
impl Core {
    /// Whether `member`'s replica equals the main tree node for node (Stats, data, ACLs,
    /// children), or describes the first difference.
    pub(crate) fn replica_matches_main(&self, member: MemberId) -> Result<(), String> {
        let Some(r) = self.lag.replicas.get(&member) else {
            return Ok(());
        };
        if r.db.tree.len() != self.db.tree.len() {
            return Err(format!(
                "replica has {} nodes, main {}",
                r.db.tree.len(),
                self.db.tree.len()
            ));
        }
        for (p, n) in self.db.tree.iter() {
            let Some(m) = r.db.tree.get(&p) else {
                return Err(format!("{p} missing in the replica"));
            };
            if m.stat() != n.stat() || m.data != n.data || m.acl != n.acl {
                return Err(format!("{p} differs: {:?} vs {:?}", m.stat(), n.stat()));
            }
            if r.db.tree.children(&p) != self.db.tree.children(&p) {
                return Err(format!("{p}: children differ"));
            }
        }
        if r.db.tree.approximate_data_size() != self.db.tree.approximate_data_size() {
            return Err("data size accounting differs".into());
        }
        Ok(())
    }

    /// History entries held for lagging members.
    pub(crate) fn lag_log_len(&self) -> usize {
        self.lag.log.len()
    }
}
