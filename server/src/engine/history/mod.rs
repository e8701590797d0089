//! The history: a bounded ring of what happened (connections, handshakes, requests and their
//! outcomes, watches, notifications, sessions' ends, control-plane and ensemble events), in
//! the core's one order, with both clocks. It sits behind the core's lock and is written by
//! the engine around each core call ([`Registry`](super) sees every frame the core sends
//! and every [`zkd_core::Fact`]); readers copy out of it under the same lock.
//!
//! Each event is a fixed-size [`Rec`]; its strings (a path, an address, a list of
//! ephemerals) go to a byte ring. The ring holds at most `max_events` events and
//! `max_bytes` bytes of strings: a full ring drops its oldest events and counts them. Both
//! rings grow up to their bounds and are then reused, so recording allocates nothing once
//! they are full (the few events that build their text go through one reused buffer).

pub(crate) mod event;
pub(crate) mod frames;
mod slots;
mod text_ring;

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::net::SocketAddr;

use zkd_core::{ConnId, FaultAction, Frame, Now, SessionEnd};

pub use event::{HistoryEvent, HistoryFilter, RequestEvent, What};

/// The most events one read returns.
pub const MAX_READ: usize = 10_000;

/// The longest string one event keeps (a longer one is cut).
const MAX_TEXT: usize = 64 * 1024;

/// The kinds, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ConnOpen,
    ConnClose,
    Handshake,
    SessionCreated,
    SessionExpired,
    SessionClosed,
    Request,
    WatchSet,
    WatchRemoved,
    Notification,
    Fault,
    Control,
    MemberStopped,
    MemberStarted,
    Partition,
    Heal,
    Epoch,
    Snapshot,
    Warning,
    Quorum,
}

/// Why a connection closed, as `conn_close` writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloseWhy {
    Client,
    Server,
    SessionClosed,
    Expired,
    Control,
    MemberStopped,
    Limits,
    Fault,
}

const CLOSE_WHY: [&str; 8] = [
    "client",
    "server",
    "session_closed",
    "expired",
    "control",
    "member_stopped",
    "limits",
    "fault",
];
const OUTCOME: [&str; 4] = ["new", "resumed", "expired", "refused"];
const EXPIRED_WHY: [&str; 3] = ["timeout", "control", "member_stopped"];
const WATCH: [&str; 6] = [
    "data",
    "exist",
    "child",
    "persistent",
    "persistent_recursive",
    "any",
];
const FAULT: [&str; 5] = ["error", "drop-before", "drop-after", "delay", "no-response"];

/// What a `warning` event warns of.
pub(crate) const WARNING: [&str; 3] = ["herd", "slow_step", "slow_sync"];

/// Control-plane actions, as `control` events write them.
pub(crate) const CONTROL: [&str; 18] = [
    "expire",
    "disconnect",
    "pause",
    "resume",
    "stall",
    "fault_add",
    "fault_remove",
    "faults_clear",
    "net_fault_add",
    "net_fault_remove",
    "net_faults_clear",
    "reset",
    "clock_advance",
    "member_stop",
    "member_start",
    "member_lag",
    "partition",
    "heal",
];

/// The name at `i` of a table, or `?`.
fn name(table: &[&'static str], i: i32) -> &'static str {
    usize::try_from(i)
        .ok()
        .and_then(|i| table.get(i))
        .copied()
        .unwrap_or("?")
}

/// How much of `text` fits in `max` bytes without splitting a character.
fn cut(text: &[u8], max: usize) -> usize {
    let mut len = max.min(text.len());
    while len > 0 && len < text.len() && (text[len] & 0xC0) == 0x80 {
        len -= 1;
    }
    len
}

// Request flags.
const REPLIED: u8 = 1;
const WATCHED: u8 = 2;
const HAS_VERSION: u8 = 4;
const MULTI: u8 = 8;
const AUTH: u8 = 16;
const READ_ONLY: u8 = 32;
/// A create that made a sequential node: `x` holds its counter (the path created is the
/// path asked for and the counter).
const SEQUENTIAL: u8 = 64;

const NO_ZXID: i64 = i64::MIN;

/// One stored event: fixed size, its strings in the byte ring.
#[derive(Debug, Clone, Copy)]
struct Rec {
    seq: u64,
    mono: i64,
    wall: i64,
    zxid: i64,
    /// 0: none.
    session: i64,
    /// 0: none.
    conn: u64,
    /// 0: none (a standalone server).
    member: u32,
    kind: Kind,
    flags: u8,
    a: i32,
    b: i32,
    c: i32,
    d: i32,
    n: i64,
    x: i64,
    /// Where its text starts in the byte ring (counted from the ring's first byte ever).
    text_at: u64,
    text_len: u32,
}

impl Rec {
    /// An event of `kind` on connection `conn` of `member`, for `session` (0 for none).
    fn at(kind: Kind, conn: ConnId, member: u32, session: i64) -> Rec {
        Rec {
            conn,
            member,
            session,
            ..Rec::new(kind)
        }
    }

    fn new(kind: Kind) -> Rec {
        Rec {
            seq: 0,
            mono: 0,
            wall: 0,
            zxid: NO_ZXID,
            session: 0,
            conn: 0,
            member: 0,
            kind,
            flags: 0,
            a: 0,
            b: 0,
            c: 0,
            d: 0,
            n: -1,
            x: -1,
            text_at: 0,
            text_len: 0,
        }
    }
}

/// A summary of the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistorySummary {
    pub enabled: bool,
    /// The seqs of the oldest and the newest event held (`None` while empty).
    pub seqs: Option<(u64, u64)>,
    pub events: usize,
    pub bytes: usize,
    /// Events pushed out of the ring to keep it within its bounds.
    pub dropped: u64,
    pub max_events: usize,
    pub max_bytes: usize,
}

/// The ring.
pub(crate) struct History {
    max_events: usize,
    max_bytes: usize,
    recs: slots::Slots<Rec>,
    text: text_ring::TextRing,
    next_seq: u64,
    dropped: u64,
    /// The time stamped on events (set once per step by the engine).
    now: Now,
    /// Where each live session was last connected: connection and member.
    last_conn: HashMap<i64, (ConnId, u32)>,
    /// A reused buffer for text that is built before it is stored.
    scratch: Vec<u8>,
}

impl History {
    /// A ring of at most `max_events` events (0: off) and `max_bytes` bytes of strings.
    pub(crate) fn new(max_events: usize, max_bytes: usize) -> History {
        History {
            max_events,
            max_bytes,
            recs: slots::Slots::new(max_events),
            text: text_ring::TextRing::new(max_bytes),
            next_seq: 1,
            dropped: 0,
            now: Now { mono: 0, wall: 0 },
            last_conn: HashMap::new(),
            scratch: Vec::new(),
        }
    }

    /// Whether anything is recorded.
    #[inline]
    pub(crate) fn on(&self) -> bool {
        self.max_events > 0
    }

    /// The time the next events are stamped with.
    #[inline]
    pub(crate) fn stamp(&mut self, now: Now) {
        self.now = now;
    }

    /// Stores `rec` with the text in `self.scratch`; returns its seq.
    fn push(&mut self, rec: Rec) -> u64 {
        let text = std::mem::take(&mut self.scratch);
        let seq = self.push_text(rec, &text);
        self.scratch = text;
        self.scratch.clear();
        seq
    }

    /// Stores `rec` with `text`; returns its seq.
    fn push_text(&mut self, rec: Rec, text: &[u8]) -> u64 {
        let slot = self.claim(text);
        *slot = Rec {
            seq: slot.seq,
            mono: slot.mono,
            wall: slot.wall,
            text_at: slot.text_at,
            text_len: slot.text_len,
            ..rec
        };
        slot.seq
    }

    /// Makes room for one more event, stores `text` for it (cut to [`MAX_TEXT`] and to the
    /// ring's bound, on a character boundary) and returns it in place: its seq, time and
    /// text set, the rest to be filled in (it may hold an older event's values).
    #[inline]
    fn claim(&mut self, text: &[u8]) -> &mut Rec {
        let len = if text.len() <= MAX_TEXT.min(self.max_bytes) {
            text.len()
        } else {
            cut(text, MAX_TEXT.min(self.max_bytes))
        };
        if self.text.len() + len > self.max_bytes {
            self.make_room(len);
        }
        let text_at = self.text.end();
        self.text.push(&text[..len]);
        let seq = self.next_seq;
        self.next_seq += 1;
        let (r, dropped) = self.recs.next_slot(|| Rec::new(Kind::Request));
        if dropped {
            // A full ring: the oldest event goes, and its text with it.
            self.text.forget_to(r.text_at + u64::from(r.text_len));
            self.dropped += 1;
        }
        r.seq = seq;
        r.mono = self.now.mono;
        r.wall = self.now.wall;
        r.text_at = text_at;
        r.text_len = len as u32;
        r
    }

    /// Drops the oldest events until `len` more bytes of text fit.
    #[cold]
    fn make_room(&mut self, len: usize) {
        while self.text.len() + len > self.max_bytes {
            let Some(old) = self.recs.front() else {
                return;
            };
            self.text.forget_to(old.text_at + u64::from(old.text_len));
            self.recs.pop_front();
            self.dropped += 1;
        }
    }

    /// The stored event `seq`, if still held.
    fn rec_mut(&mut self, seq: u64) -> Option<&mut Rec> {
        let i = usize::try_from(seq.checked_sub(self.first_seq())?).ok()?;
        self.recs.get_mut(i)
    }

    /// The text of `rec`.
    fn text_of(&self, rec: &Rec) -> Vec<u8> {
        let mut out = Vec::new();
        self.text
            .copy_out(rec.text_at, rec.text_len as usize, &mut out);
        out
    }

    /// A client connection was accepted.
    pub(crate) fn conn_open(&mut self, conn: ConnId, member: u32, peer: SocketAddr) {
        if !self.on() {
            return;
        }
        let _ = write!(self.scratch, "{peer}");
        let r = Rec::at(Kind::ConnOpen, conn, member, 0);
        self.push(r);
    }

    /// A client connection ended.
    pub(crate) fn conn_close(&mut self, conn: ConnId, member: u32, session: i64, why: CloseWhy) {
        if !self.on() {
            return;
        }
        let mut r = Rec::at(Kind::ConnClose, conn, member, session);
        r.a = why as i32;
        self.push(r);
    }

    /// A connect request is about to be answered: `asked` is the session and timeout asked
    /// for. Stores the handshake (its outcome follows with [`History::handshake_done`]);
    /// returns its seq.
    pub(crate) fn handshake(&mut self, conn: ConnId, member: u32, asked: (i64, i32)) -> u64 {
        if !self.on() {
            return 0;
        }
        // The session asked for, until the answer says which one the connection has.
        let mut r = Rec::at(Kind::Handshake, conn, member, asked.0);
        r.n = asked.0;
        r.a = asked.1;
        r.b = -1;
        r.c = 3;
        r.d = -1;
        self.push(r)
    }

    /// The answer to handshake `seq`: what it granted (timeout, session, read-only), and
    /// whether the connection goes on.
    pub(crate) fn handshake_done(
        &mut self,
        seq: u64,
        granted: Option<(i32, i64, bool)>,
        established: bool,
    ) {
        let Some(r) = self.rec_mut(seq) else {
            return;
        };
        let asked = r.n;
        let (conn, member) = (r.conn, r.member);
        let mut from = None;
        match granted {
            Some((timeout, session, read_only)) if established && session != 0 => {
                r.session = session;
                r.b = timeout;
                r.flags = if read_only { READ_ONLY } else { 0 };
                r.c = if asked == 0 { 0 } else { 1 };
                from = Some(session);
            }
            Some((timeout, _, _)) => {
                r.b = timeout;
                // A session asked for that is gone: the event stays in that session's life.
                r.c = if asked != 0 { 2 } else { 3 };
            }
            None => {}
        }
        let (outcome, session, timeout) = (r.c, r.session, r.b);
        if let Some(session) = from {
            if let Some((was, was_member)) = self.last_conn.insert(session, (conn, member)) {
                if was != conn {
                    if let Some(r) = self.rec_mut(seq) {
                        r.x = was as i64;
                        r.d = was_member as i32;
                    }
                }
            }
        }
        if outcome == 0 {
            let mut c = Rec::at(Kind::SessionCreated, conn, member, session);
            c.b = timeout;
            self.push(c);
        }
    }

    /// A session ended ([`zkd_core::Fact::SessionEnded`]).
    pub(crate) fn session_ended(
        &mut self,
        session: i64,
        conn: Option<ConnId>,
        member: u32,
        why: SessionEnd,
        zxid: Option<i64>,
        ephemerals: &[String],
    ) {
        self.last_conn.remove(&session);
        if !self.on() {
            return;
        }
        for (i, p) in ephemerals.iter().enumerate() {
            if i > 0 {
                self.scratch.push(0);
            }
            self.scratch.extend_from_slice(p.as_bytes());
        }
        let (kind, a) = match why {
            SessionEnd::Closed => (Kind::SessionClosed, 0),
            SessionEnd::Timeout => (Kind::SessionExpired, 0),
            SessionEnd::Control => (Kind::SessionExpired, 1),
            SessionEnd::MemberStopped => (Kind::SessionExpired, 2),
        };
        let mut r = Rec::at(kind, conn.unwrap_or(0), member, session);
        r.zxid = zxid.unwrap_or(NO_ZXID);
        r.a = a;
        self.push(r);
    }

    /// A request is about to run: stores it (its outcome follows with
    /// [`History::request_done`]); returns its seq.
    pub(crate) fn request(
        &mut self,
        conn: ConnId,
        member: u32,
        session: i64,
        facts: &frames::RequestFacts,
        payload: &[u8],
    ) -> u64 {
        if !self.on() {
            return 0;
        }
        // Every field but the seq, time and text (set by [`History::claim`]).
        let fill = |r: &mut Rec| {
            r.kind = Kind::Request;
            r.conn = conn;
            r.member = member;
            r.session = session;
            r.zxid = NO_ZXID;
            r.a = facts.xid;
            r.b = facts.op;
            r.c = facts.mode;
            r.d = 0;
            r.n = facts.data_bytes;
            r.x = -1;
            r.flags = if facts.watch { WATCHED } else { 0 };
        };
        if let Some(p) = facts.path.clone().and_then(|p| payload.get(p)) {
            // The common case: the path alone, stored straight from the request, in place.
            let r = self.claim(p);
            fill(r);
            return r.seq;
        }
        let mut r = Rec::new(Kind::Request);
        fill(&mut r);
        if facts.op == zkd_protocol::OpCode::Auth as i32 {
            if let Some(s) = frames::auth_scheme(payload).and_then(|p| payload.get(p)) {
                self.scratch.extend_from_slice(s);
            }
            r.flags |= AUTH;
        } else {
            let scratch = &mut self.scratch;
            let mut any = false;
            frames::multi_ops(payload, facts.op, |op, path| {
                any = true;
                scratch.push(op as i32 as u8);
                scratch.extend_from_slice(path.as_bytes());
                scratch.push(0);
            });
            if any {
                r.flags |= MULTI;
            }
        }
        self.push(r)
    }

    /// Request `seq`'s reply `frame` (to opcode `code`) was queued: its outcome.
    pub(crate) fn reply(&mut self, seq: u64, code: Option<zkd_protocol::OpCode>, frame: &Frame) {
        let Some(r) = self.rec_mut(seq) else {
            return;
        };
        r.flags |= REPLIED;
        frames::reply(code, frame, |fact| match fact {
            frames::ReplyFact::Header { zxid, err } => {
                r.zxid = zxid;
                r.d = err;
            }
            frames::ReplyFact::Version(v) => {
                r.flags |= HAS_VERSION;
                r.c = v;
            }
            frames::ReplyFact::DataBytes(n) => r.n = n,
            frames::ReplyFact::Children(n) => r.x = n,
            frames::ReplyFact::Created { counter, len } => {
                // Only a name made of the path asked for and ten more characters is one the
                // server numbered.
                if len == r.text_len as usize + 10 {
                    r.x = counter;
                    r.flags |= SEQUENTIAL;
                }
            }
        });
    }

    /// Request `seq` has run and its reply was seen: records the watch it set or removed.
    /// Called only for a request that can (see [`frames::RequestFacts::may_watch`]).
    pub(crate) fn request_done(&mut self, seq: u64) {
        let Some(r) = self.rec_mut(seq) else {
            return;
        };
        let Some((kind, w)) = watch_of(r) else {
            return;
        };
        let (conn, member, session) = (r.conn, r.member, r.session);
        let (at, len) = (r.text_at, r.text_len as usize);
        self.text.copy_out(at, len, &mut self.scratch);
        let mut e = Rec::at(kind, conn, member, session);
        e.a = w;
        self.push(e);
    }

    /// A notification was queued for `conn`.
    pub(crate) fn notification(
        &mut self,
        conn: ConnId,
        member: u32,
        session: i64,
        event: i32,
        zxid: i64,
        path: &[u8],
    ) {
        if !self.on() {
            return;
        }
        self.scratch.extend_from_slice(path);
        let mut r = Rec::at(Kind::Notification, conn, member, session);
        r.a = event;
        r.zxid = if zxid == -1 { NO_ZXID } else { zxid };
        self.push(r);
    }

    /// A fault rule acted on a request.
    pub(crate) fn fault(&mut self, conn: ConnId, member: u32, session: i64, action: FaultAction) {
        if !self.on() {
            return;
        }
        let mut r = Rec::at(Kind::Fault, conn, member, session);
        let (a, n) = match action {
            FaultAction::Error(code) => (0, i64::from(code)),
            FaultAction::DropBefore => (1, -1),
            FaultAction::DropAfter => (2, -1),
            FaultAction::Delay(ms) => (3, i64::try_from(ms).unwrap_or(i64::MAX)),
            FaultAction::NoResponse => (4, -1),
        };
        r.a = a;
        r.n = n;
        self.push(r);
    }

    /// A control-plane operation (`action` indexes [`CONTROL`]).
    pub(crate) fn control(&mut self, action: &str, session: i64, detail: &str) {
        self.named(Kind::Control, &CONTROL, action, session, detail);
    }

    /// A warning the server logged: `what` (one of [`WARNING`]) and its text.
    pub(crate) fn warning(&mut self, what: &str, detail: &str) {
        self.named(Kind::Warning, &WARNING, what, 0, detail);
    }

    /// An event of `kind` whose name is one of `names` (kept as its index), with a text; a
    /// name not in the list records nothing.
    fn named(&mut self, kind: Kind, names: &[&str], name: &str, session: i64, detail: &str) {
        if !self.on() {
            return;
        }
        let Some(i) = names.iter().position(|a| *a == name) else {
            return;
        };
        self.scratch.extend_from_slice(detail.as_bytes());
        let mut r = Rec::new(kind);
        r.session = session;
        r.a = i as i32;
        self.push(r);
    }

    /// The members in the quorum changed: whether there is a quorum now, and how many
    /// voting members are counted in it.
    pub(crate) fn quorum(&mut self, has_quorum: bool, members: usize) {
        if !self.on() {
            return;
        }
        let mut r = Rec::new(Kind::Quorum);
        r.a = i32::from(has_quorum);
        r.n = members as i64;
        self.push(r);
    }

    /// A member stopped (`false`) or started (`true`).
    pub(crate) fn member(&mut self, member: u32, started: bool) {
        if !self.on() {
            return;
        }
        let mut r = Rec::new(if started {
            Kind::MemberStarted
        } else {
            Kind::MemberStopped
        });
        r.member = member;
        self.push(r);
    }

    /// The members were split into `groups` (`1/2,3`), or joined again (`None`).
    pub(crate) fn partition(&mut self, groups: Option<&str>) {
        if !self.on() {
            return;
        }
        let kind = match groups {
            Some(g) => {
                self.scratch.extend_from_slice(g.as_bytes());
                Kind::Partition
            }
            None => Kind::Heal,
        };
        self.push(Rec::new(kind));
    }

    /// A leader's epoch began.
    pub(crate) fn epoch(&mut self, leader: u32, epoch: i64) {
        if !self.on() {
            return;
        }
        let mut r = Rec::new(Kind::Epoch);
        r.a = leader as i32;
        r.n = epoch;
        self.push(r);
    }

    /// A snapshot of the state at `zxid` was written: `bytes` long, in `total_ms` (encoding,
    /// writing and syncing), holding the core at most `held_ms` at once.
    pub(crate) fn snapshot(&mut self, zxid: i64, bytes: u64, total_ms: u64, held_ms: u64) {
        if !self.on() {
            return;
        }
        let mut r = Rec::new(Kind::Snapshot);
        r.zxid = zxid;
        r.n = i64::try_from(bytes).unwrap_or(i64::MAX);
        r.x = i64::try_from(total_ms).unwrap_or(i64::MAX);
        r.a = i32::try_from(held_ms).unwrap_or(i32::MAX);
        self.push(r);
    }

    /// The events `filter` keeps, oldest first, at most `filter.limit` (and [`MAX_READ`]),
    /// read in one go (the engine reads in bounded steps, [`Reading`]).
    #[cfg(test)]
    pub(crate) fn read(&self, filter: &HistoryFilter) -> Vec<HistoryEvent> {
        let mut reading = Reading::new(filter, self.next_seq);
        while reading.step(self, usize::MAX) {}
        reading.out
    }

    /// The seq the next event stored takes.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The seq of the oldest event held (of the next one, when none is), read without
    /// touching the ring.
    fn first_seq(&self) -> u64 {
        // The held events' seqs follow one another up to the newest.
        self.next_seq - self.recs.len() as u64
    }

    /// Where event `seq` is in the ring (0 for one already dropped).
    fn index_of(&self, seq: u64) -> usize {
        usize::try_from(seq.saturating_sub(self.first_seq())).unwrap_or(usize::MAX)
    }

    /// The ring's size and bounds.
    pub(crate) fn summary(&self) -> HistorySummary {
        HistorySummary {
            enabled: self.on(),
            events: self.recs.len(),
            bytes: self.text.len(),
            dropped: self.dropped,
            seqs: self
                .recs
                .front()
                .zip(self.recs.back())
                .map(|(a, b)| (a.seq, b.seq)),
            max_events: self.max_events,
            max_bytes: self.max_bytes,
        }
    }

    /// The typed event of `r`.
    fn decode(&self, r: &Rec) -> HistoryEvent {
        let text = self.text_of(r);
        let string = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let list = || -> Vec<String> {
            if text.is_empty() {
                Vec::new()
            } else {
                text.split(|&b| b == 0).map(string).collect()
            }
        };
        let what = match r.kind {
            Kind::ConnOpen => What::ConnOpen {
                peer: string(&text),
            },
            Kind::ConnClose => What::ConnClose {
                why: name(&CLOSE_WHY, r.a),
            },
            Kind::Handshake => What::Handshake {
                session_asked: r.n,
                timeout_asked: r.a,
                timeout_ms: (r.b >= 0).then_some(r.b),
                read_only: r.flags & READ_ONLY != 0,
                outcome: name(&OUTCOME, r.c),
                from_conn: u64::try_from(r.x).ok(),
                from_member: u32::try_from(r.d).ok(),
            },
            Kind::SessionCreated => What::SessionCreated { timeout_ms: r.b },
            Kind::SessionExpired => What::SessionExpired {
                why: name(&EXPIRED_WHY, r.a),
                ephemerals: list(),
            },
            Kind::SessionClosed => What::SessionClosed { ephemerals: list() },
            Kind::Request => What::Request(self.decode_request(r, &text)),
            Kind::WatchSet => What::WatchSet {
                path: string(&text),
                watch: name(&WATCH, r.a),
            },
            Kind::WatchRemoved => What::WatchRemoved {
                path: string(&text),
                watch: name(&WATCH, r.a),
            },
            Kind::Notification => What::Notification {
                event_type: r.a,
                path: string(&text),
            },
            Kind::Fault => What::Fault {
                action: name(&FAULT, r.a),
                value: (r.n >= 0 || r.a == 0).then_some(r.n),
            },
            Kind::Control => What::Control {
                action: name(&CONTROL, r.a),
                detail: string(&text),
            },
            Kind::MemberStopped => What::MemberStopped,
            Kind::MemberStarted => What::MemberStarted,
            Kind::Partition => What::Partition {
                groups: string(&text),
            },
            Kind::Heal => What::Heal,
            Kind::Epoch => What::Epoch {
                leader: r.a as u32,
                epoch: r.n,
            },
            Kind::Warning => What::Warning {
                what: name(&WARNING, r.a),
                detail: string(&text),
            },
            Kind::Quorum => What::Quorum {
                has_quorum: r.a != 0,
                members: r.n,
            },
            Kind::Snapshot => What::Snapshot {
                bytes: r.n,
                duration_ms: r.x,
                longest_hold_ms: i64::from(r.a),
            },
        };
        HistoryEvent {
            seq: r.seq,
            mono_ms: r.mono,
            wall_ms: r.wall,
            zxid: (r.zxid != NO_ZXID).then_some(r.zxid),
            member: (r.member != 0).then_some(r.member),
            session: (r.session != 0).then_some(r.session),
            conn: (r.conn != 0).then_some(r.conn),
            what,
        }
    }

    fn decode_request(&self, r: &Rec, text: &[u8]) -> RequestEvent {
        let string = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let replied = r.flags & REPLIED != 0;
        let mut e = RequestEvent {
            xid: r.a,
            opcode: r.b,
            watch: r.flags & WATCHED != 0,
            data_bytes: (r.n >= 0).then_some(r.n),
            replied,
            err: replied.then_some(r.d),
            version: (r.flags & HAS_VERSION != 0).then_some(r.c),
            children: (r.x >= 0 && r.flags & SEQUENTIAL == 0).then_some(r.x),
            ..RequestEvent::default()
        };
        if r.flags & AUTH != 0 {
            e.scheme = Some(string(text));
        } else if r.flags & MULTI != 0 {
            let mut rest = text;
            while let Some((&op, after)) = rest.split_first() {
                let end = after.iter().position(|&b| b == 0).unwrap_or(after.len());
                e.ops.push((i32::from(op), string(&after[..end])));
                rest = after.get(end + 1..).unwrap_or(&[]);
            }
            e.path = e.ops.first().map(|(_, p)| p.clone());
        } else if !text.is_empty() {
            e.path = Some(string(text));
        }
        if r.flags & SEQUENTIAL != 0 {
            e.created = Some(format!("{}{:010}", string(text), r.x));
        }
        e
    }
}

/// A read of the history in steps that each look at a bounded number of events, so that a
/// filter that keeps few events does not hold the core's lock for a scan of the whole ring:
/// the caller takes the lock for each [`Reading::step`]. It reads the events that were held
/// when it began (later ones are left to the next read, `after_seq`); events dropped between
/// steps are skipped.
pub(crate) struct Reading<'f> {
    filter: &'f HistoryFilter,
    limit: usize,
    /// The first event not yet looked at, and the first one not to be read.
    at: u64,
    until: u64,
    /// With a session filter: first the session's connections are gathered over the whole
    /// ring (their opening comes before the handshake that names the session), then the
    /// events are read.
    gathering: bool,
    conns: HashSet<u64>,
    pub(crate) out: Vec<HistoryEvent>,
}

impl<'f> Reading<'f> {
    /// A read of what `filter` keeps among the events before `until` (the history's next
    /// seq when the read begins).
    pub(crate) fn new(filter: &'f HistoryFilter, until: u64) -> Reading<'f> {
        let gathering = filter.session.is_some();
        Reading {
            filter,
            limit: filter.limit.unwrap_or(MAX_READ).min(MAX_READ),
            at: if gathering { 0 } else { Self::start(filter) },
            until,
            gathering,
            conns: HashSet::new(),
            out: Vec::new(),
        }
    }

    fn start(filter: &HistoryFilter) -> u64 {
        filter.after_seq.map_or(0, |s| s.saturating_add(1))
    }

    /// Looks at up to `scan` events of `h`; returns whether there is more to do.
    pub(crate) fn step(&mut self, h: &History, scan: usize) -> bool {
        let start = h.index_of(self.at);
        let end = h.index_of(self.until).min(start.saturating_add(scan));
        if self.gathering {
            if let Some(session) = self.filter.session {
                for r in (start..end).filter_map(|i| h.recs.get(i)) {
                    if r.session == session && r.conn != 0 {
                        self.conns.insert(r.conn);
                    }
                }
            }
            self.at = h.first_seq() + end as u64;
            if self.at >= self.until {
                self.gathering = false;
                self.at = Self::start(self.filter);
            }
            return true;
        }
        for r in (start..end).filter_map(|i| h.recs.get(i)) {
            if self.out.len() >= self.limit {
                return false;
            }
            if let Some(s) = self.filter.session {
                let own = r.session == s
                    || (r.session == 0
                        && matches!(r.kind, Kind::ConnOpen | Kind::ConnClose)
                        && self.conns.contains(&r.conn));
                if !own {
                    continue;
                }
            }
            let e = h.decode(r);
            if self.filter.matches(&e) {
                self.out.push(e);
            }
        }
        self.at = h.first_seq() + end as u64;
        self.at < self.until && self.out.len() < self.limit
    }
}

/// The watch a request with outcome set or removed: the kind of event, and its
/// [`WATCH`] index.
fn watch_of(r: &Rec) -> Option<(Kind, i32)> {
    use zkd_protocol::WatchEffect as W;
    if r.flags & REPLIED == 0 {
        return None;
    }
    let effect = zkd_protocol::OpCode::from_i32(r.b)?.info().watch;
    let ok = r.d == 0;
    let no_node = r.d == zkd_protocol::ErrorCode::NoNode.code();
    let watched = r.flags & WATCHED != 0;
    match effect {
        W::Data | W::DataOrExist if watched && ok => Some((Kind::WatchSet, 0)),
        W::DataOrExist if watched && no_node => Some((Kind::WatchSet, 1)),
        W::Child if watched && ok => Some((Kind::WatchSet, 2)),
        // addWatch's mode: 0 persistent, 1 persistent and recursive.
        W::Persistent if ok => Some((Kind::WatchSet, if r.c == 1 { 4 } else { 3 })),
        // removeWatches' watcher type: 1 children, 2 data, 3 any.
        W::Removes if ok => Some((
            Kind::WatchRemoved,
            match r.c {
                1 => 2,
                2 => 0,
                _ => 5,
            },
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(events: usize, bytes: usize) -> History {
        let mut h = History::new(events, bytes);
        h.stamp(Now { mono: 5, wall: 6 });
        h
    }

    #[test]
    fn a_full_ring_drops_the_oldest_events_and_counts_them() {
        let mut h = ring(3, 1 << 20);
        for i in 0..10 {
            h.control("expire", i + 1, "x");
        }
        let s = h.summary();
        assert_eq!((s.events, s.dropped, s.seqs.map(|r| r.0)), (3, 7, Some(8)));
        let seqs: Vec<u64> = h
            .read(&HistoryFilter::default())
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, vec![8, 9, 10]);
    }

    #[test]
    fn the_byte_budget_drops_events_whose_strings_do_not_fit() {
        let mut h = ring(1000, 100);
        for _ in 0..10 {
            h.control("reset", 0, &"p".repeat(30));
        }
        let s = h.summary();
        assert!(s.bytes <= 100, "{s:?}");
        assert_eq!(s.events, 3);
        assert_eq!(s.dropped, 7);
        for e in h.read(&HistoryFilter::default()) {
            assert_eq!(
                e.what,
                What::Control {
                    action: "reset",
                    detail: "p".repeat(30)
                }
            );
        }
    }

    #[test]
    fn a_session_filter_keeps_its_connections_opening_and_closing() {
        let mut h = ring(100, 1 << 20);
        let peer: SocketAddr = "127.0.0.1:5".parse().expect("addr");
        h.conn_open(1, 0, peer);
        h.conn_open(2, 0, peer);
        let one = h.handshake(1, 0, (0, 3000));
        let two = h.handshake(2, 0, (0, 3000));
        h.handshake_done(one, Some((3000, 0x77, false)), true);
        h.handshake_done(two, Some((3000, 0x78, false)), true);
        h.conn_close(1, 0, 0x77, CloseWhy::Client);
        let f = HistoryFilter {
            session: Some(0x77),
            ..HistoryFilter::default()
        };
        let kinds: Vec<&str> = h.read(&f).iter().map(HistoryEvent::kind).collect();
        assert_eq!(
            kinds,
            vec!["conn_open", "handshake", "session_created", "conn_close"]
        );
    }

    #[test]
    fn a_read_in_bounded_steps_finds_what_a_read_at_once_finds_and_no_later_event() {
        let mut h = ring(1000, 1 << 20);
        let peer: SocketAddr = "127.0.0.1:5".parse().expect("addr");
        h.conn_open(1, 0, peer);
        for i in 0..40 {
            h.control("expire", i, "x");
        }
        let one = h.handshake(1, 0, (0, 3000));
        h.handshake_done(one, Some((3000, 0x77, false)), true);
        for i in 0..40 {
            h.control("expire", i, "y");
        }
        h.conn_close(1, 0, 0x77, CloseWhy::Client);
        for f in [
            HistoryFilter {
                session: Some(0x77),
                ..HistoryFilter::default()
            },
            HistoryFilter {
                kinds: Some(vec!["conn_close".into()]),
                after_seq: Some(2),
                ..HistoryFilter::default()
            },
        ] {
            let whole = h.read(&f);
            let held = h.summary().events;
            let mut reading = Reading::new(&f, h.next_seq());
            let mut steps = 0;
            while reading.step(&h, 5) {
                steps += 1;
                // Events stored after the read began are not read.
                h.control("expire", 1, "z");
            }
            let seqs = |v: &[HistoryEvent]| v.iter().map(|e| e.seq).collect::<Vec<_>>();
            assert_eq!(seqs(&reading.out), seqs(&whole));
            assert!(!whole.is_empty());
            // Every event held, 5 at a time: twice over (connections, then events) with a
            // session.
            let passes = if f.session.is_some() { 2 } else { 1 };
            assert!(steps <= passes * held.div_ceil(5) + 1, "{steps} steps");
        }
    }

    #[test]
    fn events_dropped_between_steps_are_skipped() {
        let mut h = ring(10, 1 << 20);
        for i in 0..10 {
            h.control("expire", i, "x");
        }
        let f = HistoryFilter::default();
        let mut reading = Reading::new(&f, h.next_seq());
        assert!(reading.step(&h, 3));
        // Five more: seqs 1 to 5 are dropped; the read goes on from the oldest held.
        for i in 0..5 {
            h.control("expire", i, "x");
        }
        while reading.step(&h, 3) {}
        let seqs: Vec<u64> = reading.out.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3, 6, 7, 8, 9, 10]);
    }

    #[test]
    fn an_event_takes_the_104_bytes_the_guide_counts() {
        assert!(
            std::mem::size_of::<Rec>() <= 104,
            "{}",
            std::mem::size_of::<Rec>()
        );
    }

    #[test]
    fn off_records_nothing() {
        let mut h = ring(0, 0);
        h.control("expire", 1, "x");
        h.conn_open(1, 0, "127.0.0.1:5".parse().expect("addr"));
        assert_eq!(h.summary().events, 0);
    }
}
