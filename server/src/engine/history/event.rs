//! The history's events as typed values ([`HistoryEvent`]), the filter a reader gives
//! ([`HistoryFilter`]) and the JSON Lines form (docs/history.md lists every kind and field).

use std::fmt::Write as _;

use zkd_protocol::{ErrorCode, OpCode};

/// One event of the server's history, in the server's one order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEvent {
    /// Its place in the order, from 1, without gaps.
    pub seq: u64,
    /// The session clock (the one sessions expire by), in ms.
    pub mono_ms: i64,
    /// Wall-clock Unix ms.
    pub wall_ms: i64,
    /// The transaction's id, where the event has one.
    pub zxid: Option<i64>,
    /// The ensemble member it happened on (none on a standalone server).
    pub member: Option<u32>,
    pub session: Option<i64>,
    pub conn: Option<u64>,
    pub what: What,
}

/// What happened, by kind, with the kind's own fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    ConnOpen {
        peer: String,
    },
    /// `why`: `client`, `server`, `session_closed`, `expired`, `control`, `member_stopped`,
    /// `limits` or `fault`.
    ConnClose {
        why: &'static str,
    },
    /// `outcome`: `new`, `resumed`, `expired` or `refused`.
    Handshake {
        session_asked: i64,
        timeout_asked: i32,
        timeout_ms: Option<i32>,
        read_only: bool,
        outcome: &'static str,
        from_conn: Option<u64>,
        from_member: Option<u32>,
    },
    SessionCreated {
        timeout_ms: i32,
    },
    /// `why`: `timeout`, `control` or `member_stopped`.
    SessionExpired {
        why: &'static str,
        ephemerals: Vec<String>,
    },
    SessionClosed {
        ephemerals: Vec<String>,
    },
    Request(RequestEvent),
    /// `watch`: `data`, `exist`, `child`, `persistent` or `persistent_recursive`.
    WatchSet {
        path: String,
        watch: &'static str,
    },
    /// `watch`: `child`, `data` or `any`.
    WatchRemoved {
        path: String,
        watch: &'static str,
    },
    Notification {
        event_type: i32,
        path: String,
    },
    /// `action`: `error`, `drop-before`, `drop-after`, `delay` or `no-response`; `value` the
    /// error code or the milliseconds.
    Fault {
        action: &'static str,
        value: Option<i64>,
    },
    Control {
        action: &'static str,
        detail: String,
    },
    MemberStopped,
    MemberStarted,
    Partition {
        groups: String,
    },
    Heal,
    Epoch {
        leader: u32,
        epoch: i64,
    },
    /// A warning the server logged: `what` (`herd`, `slow_step`) and its text.
    Warning {
        what: &'static str,
        detail: String,
    },
    /// The members counted in the quorum changed: whether there is one now, and how many
    /// voting members it counts.
    Quorum {
        has_quorum: bool,
        members: i64,
    },
    /// A snapshot was written (its zxid is the event's).
    Snapshot {
        bytes: i64,
        duration_ms: i64,
        longest_hold_ms: i64,
    },
}

/// A request and its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestEvent {
    pub xid: i32,
    pub opcode: i32,
    pub path: Option<String>,
    /// A create of a sequential node: the path the server made (the path asked for and its
    /// ten-digit counter).
    pub created: Option<String>,
    /// A multi's sub-ops: opcode and path.
    pub ops: Vec<(i32, String)>,
    pub watch: bool,
    pub data_bytes: Option<i64>,
    /// False when no reply was sent in the step that ran it.
    pub replied: bool,
    pub err: Option<i32>,
    pub version: Option<i32>,
    pub children: Option<i64>,
    /// `auth`: the scheme only.
    pub scheme: Option<String>,
}

impl HistoryEvent {
    /// The kind's name, as the `kind` field writes it.
    pub fn kind(&self) -> &'static str {
        match &self.what {
            What::ConnOpen { .. } => "conn_open",
            What::ConnClose { .. } => "conn_close",
            What::Handshake { .. } => "handshake",
            What::SessionCreated { .. } => "session_created",
            What::SessionExpired { .. } => "session_expired",
            What::SessionClosed { .. } => "session_closed",
            What::Request(_) => "request",
            What::WatchSet { .. } => "watch_set",
            What::WatchRemoved { .. } => "watch_removed",
            What::Notification { .. } => "notification",
            What::Fault { .. } => "fault",
            What::Control { .. } => "control",
            What::MemberStopped => "member_stopped",
            What::MemberStarted => "member_started",
            What::Partition { .. } => "partition",
            What::Heal => "heal",
            What::Epoch { .. } => "epoch",
            What::Snapshot { .. } => "snapshot",
            What::Warning { .. } => "warning",
            What::Quorum { .. } => "quorum",
        }
    }

    /// The paths the event names (its path, a multi's sub-op paths, a session's ephemerals).
    pub fn paths(&self) -> Vec<&str> {
        match &self.what {
            What::Request(r) => r
                .path
                .iter()
                .map(String::as_str)
                .chain(r.ops.iter().map(|(_, p)| p.as_str()))
                .collect(),
            What::WatchSet { path, .. }
            | What::WatchRemoved { path, .. }
            | What::Notification { path, .. } => vec![path.as_str()],
            What::SessionExpired { ephemerals, .. } | What::SessionClosed { ephemerals } => {
                ephemerals.iter().map(String::as_str).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The event as one JSON object (no newline), as `GET /zkd/history` writes it.
    pub fn to_json(&self) -> String {
        let mut o = Obj::new();
        o.num("seq", self.seq);
        o.num("mono_ms", self.mono_ms);
        o.num("wall_ms", self.wall_ms);
        o.str("kind", self.kind());
        if let Some(z) = self.zxid {
            o.hex("zxid", z);
        }
        if let Some(m) = self.member {
            o.num("member", m);
        }
        if let Some(s) = self.session {
            o.hex("session", s);
        }
        if let Some(c) = self.conn {
            o.num("conn", c);
        }
        match &self.what {
            What::ConnOpen { peer } => o.str("peer", peer),
            What::ConnClose { why } => o.str("why", why),
            What::Handshake {
                session_asked,
                timeout_asked,
                timeout_ms,
                read_only,
                outcome,
                from_conn,
                from_member,
            } => {
                o.hex("session_asked", *session_asked);
                o.num("timeout_asked", timeout_asked);
                if let Some(t) = timeout_ms {
                    o.num("timeout_ms", t);
                }
                o.raw("read_only", if *read_only { "true" } else { "false" });
                o.str("outcome", outcome);
                if let Some(c) = from_conn {
                    o.num("from_conn", c);
                }
                if let Some(m) = from_member {
                    o.num("from_member", m);
                }
            }
            What::SessionCreated { timeout_ms } => o.num("timeout_ms", timeout_ms),
            What::SessionExpired { why, ephemerals } => {
                o.str("why", why);
                o.strs("ephemerals", ephemerals);
            }
            What::SessionClosed { ephemerals } => o.strs("ephemerals", ephemerals),
            What::Request(r) => request_fields(&mut o, r),
            What::WatchSet { path, watch } | What::WatchRemoved { path, watch } => {
                o.str("path", path);
                o.str("watch", watch);
            }
            What::Notification { event_type, path } => {
                o.str("type", event_name(*event_type));
                o.num("type_code", event_type);
                o.str("path", path);
            }
            What::Fault { action, value } => {
                o.str("action", action);
                if let Some(v) = value {
                    o.num("value", v);
                }
            }
            What::Control { action, detail } => {
                o.str("action", action);
                o.str("detail", detail);
            }
            What::MemberStopped | What::MemberStarted | What::Heal => {}
            What::Partition { groups } => o.str("groups", groups),
            What::Epoch { leader, epoch } => {
                o.num("leader", leader);
                o.num("epoch", epoch);
            }
            What::Warning { what, detail } => {
                o.str("what", what);
                o.str("detail", detail);
            }
            What::Quorum {
                has_quorum,
                members,
            } => {
                o.raw("has_quorum", if *has_quorum { "true" } else { "false" });
                o.num("members", members);
            }
            What::Snapshot {
                bytes,
                duration_ms,
                longest_hold_ms,
            } => {
                o.num("bytes", bytes);
                o.num("duration_ms", duration_ms);
                o.num("longest_hold_ms", longest_hold_ms);
            }
        }
        o.finish()
    }
}

fn request_fields(o: &mut Obj, r: &RequestEvent) {
    o.num("xid", r.xid);
    o.str("op", &op_name(r.opcode));
    o.num("opcode", r.opcode);
    if let Some(p) = &r.path {
        o.str("path", p);
    }
    if let Some(p) = &r.created {
        o.str("created", p);
    }
    if !r.ops.is_empty() {
        let mut list = String::from("[");
        for (i, (op, path)) in r.ops.iter().enumerate() {
            if i > 0 {
                list.push(',');
            }
            let mut sub = Obj::new();
            sub.str("op", &op_name(*op));
            sub.str("path", path);
            list.push_str(&sub.finish());
        }
        list.push(']');
        o.raw("ops", &list);
    }
    if let Some(s) = &r.scheme {
        o.str("scheme", s);
    }
    if r.watch {
        o.raw("watch", "true");
    }
    if let Some(n) = r.data_bytes {
        o.num("data_bytes", n);
    }
    if !r.replied {
        o.raw("replied", "false");
    }
    if let Some(e) = r.err {
        o.num("err", e);
        o.str("err_name", &err_name(e));
    }
    if let Some(v) = r.version {
        o.num("version", v);
    }
    if let Some(c) = r.children {
        o.num("children", c);
    }
}

/// The name of an opcode as ZooKeeper's clients write it (`getData`, `createTTL`), or its
/// number.
pub fn op_name(op: i32) -> String {
    let Some(code) = OpCode::from_i32(op) else {
        return op.to_string();
    };
    match code {
        OpCode::CreateTtl => "createTTL".into(),
        OpCode::GetAcl => "getACL".into(),
        OpCode::SetAcl => "setACL".into(),
        _ => {
            let name = format!("{code:?}");
            let mut chars = name.chars();
            chars.next().map_or(String::new(), |first| {
                first.to_ascii_lowercase().to_string() + chars.as_str()
            })
        }
    }
}

/// The name of an error code as ZooKeeper's `Code` enum writes it (`NONODE`, `OK`), or its
/// number.
pub fn err_name(err: i32) -> String {
    ErrorCode::from_i32(err).map_or_else(
        || err.to_string(),
        |c| format!("{c:?}").to_ascii_uppercase(),
    )
}

/// The name of a watcher event type.
pub fn event_name(t: i32) -> &'static str {
    match t {
        -1 => "None",
        1 => "NodeCreated",
        2 => "NodeDeleted",
        3 => "NodeDataChanged",
        4 => "NodeChildrenChanged",
        5 => "DataWatchRemoved",
        6 => "ChildWatchRemoved",
        7 => "PersistentWatchRemoved",
        _ => "Unknown",
    }
}

/// Which events a reader wants. Every set criterion must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryFilter {
    /// Events of this session, and the opening and closing of its connections.
    pub session: Option<i64>,
    /// Events naming a path that starts with this string.
    pub path: Option<String>,
    /// Events of these kinds (`request`, `notification`, ...).
    pub kinds: Option<Vec<String>>,
    /// `mono_ms` at least / at most.
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    /// Events with a zxid within this range (events without one are left out).
    pub from_zxid: Option<i64>,
    pub to_zxid: Option<i64>,
    /// Events after this `seq`.
    pub after_seq: Option<u64>,
    /// At most this many events (the first ones matching).
    pub limit: Option<usize>,
}

impl HistoryFilter {
    /// Whether `e` matches every criterion but `session` (the ring applies that one, since
    /// it needs the session's connections) and `limit`.
    pub(crate) fn matches(&self, e: &HistoryEvent) -> bool {
        if self.after_seq.is_some_and(|s| e.seq <= s)
            || self.since_ms.is_some_and(|t| e.mono_ms < t)
            || self.until_ms.is_some_and(|t| e.mono_ms > t)
        {
            return false;
        }
        if self.from_zxid.is_some() || self.to_zxid.is_some() {
            let Some(z) = e.zxid else {
                return false;
            };
            if self.from_zxid.is_some_and(|f| z < f) || self.to_zxid.is_some_and(|t| z > t) {
                return false;
            }
        }
        if let Some(kinds) = &self.kinds {
            if !kinds.iter().any(|k| k == e.kind()) {
                return false;
            }
        }
        if let Some(prefix) = &self.path {
            if !e.paths().iter().any(|p| p.starts_with(prefix.as_str())) {
                return false;
            }
        }
        true
    }
}

/// Renders `events` as JSON Lines.
pub fn to_json_lines(events: &[HistoryEvent]) -> String {
    let mut s = String::new();
    for e in events {
        s.push_str(&e.to_json());
        s.push('\n');
    }
    s
}

/// A JSON object written field by field.
struct Obj(String);

impl Obj {
    fn new() -> Obj {
        Obj(String::from("{"))
    }

    fn key(&mut self, k: &str) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        self.0.push('"');
        self.0.push_str(k);
        self.0.push_str("\":");
    }

    fn num(&mut self, k: &str, v: impl std::fmt::Display) {
        self.key(k);
        let _ = write!(self.0, "{v}");
    }

    fn hex(&mut self, k: &str, v: i64) {
        self.key(k);
        let _ = write!(self.0, "\"0x{v:x}\"");
    }

    fn raw(&mut self, k: &str, v: &str) {
        self.key(k);
        self.0.push_str(v);
    }

    fn str(&mut self, k: &str, v: &str) {
        self.key(k);
        escape_into(&mut self.0, v);
    }

    fn strs(&mut self, k: &str, vs: &[String]) {
        self.key(k);
        self.0.push('[');
        for (i, v) in vs.iter().enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            escape_into(&mut self.0, v);
        }
        self.0.push(']');
    }

    fn finish(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

/// `v` as a JSON string.
fn escape_into(out: &mut String, v: &str) {
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_line_names_its_op_and_error_and_escapes_its_path() {
        let e = HistoryEvent {
            seq: 3,
            mono_ms: 10,
            wall_ms: 20,
            zxid: Some(0x1f),
            member: None,
            session: Some(0x100),
            conn: Some(2),
            what: What::Request(RequestEvent {
                xid: 5,
                opcode: 4,
                path: Some("/a\"b".into()),
                replied: true,
                err: Some(-101),
                ..RequestEvent::default()
            }),
        };
        assert_eq!(
            e.to_json(),
            r#"{"seq":3,"mono_ms":10,"wall_ms":20,"kind":"request","zxid":"0x1f","session":"0x100","conn":2,"xid":5,"op":"getData","opcode":4,"path":"/a\"b","err":-101,"err_name":"NONODE"}"#
        );
    }

    #[test]
    fn op_and_error_names_follow_zookeeper() {
        assert_eq!(op_name(12), "getChildren2");
        assert_eq!(op_name(21), "createTTL");
        assert_eq!(err_name(0), "OK");
        assert_eq!(err_name(-110), "NODEEXISTS");
    }
}
