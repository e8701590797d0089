//! Replies and events in a server-independent form: what both servers must agree on.
//!
//! Only what must differ is normalised: zxids become offsets from the program's baseline (the
//! zxid of the root's creation), ephemeralOwner becomes the session's index in the program,
//! paths lose the program root (`~`), ctime/mtime are dropped, and lists the server returns in
//! no particular order (children, ephemerals) are sorted. Everything else — error codes, xids,
//! versions, cversion, aversion, dataLength, numChildren, data bytes, ACLs, multi result
//! types — is kept exactly.

use std::fmt;

use bytes::Bytes;
use zkd_protocol::{Acl, ErrorCode, MultiResponse, MultiResult, OpCode, Reader, Response, Stat};
use zkd_testkit::raw::{Event, Reply};

use super::program::perm_string;

/// What a server-specific value becomes.
pub struct Ctx<'a> {
    /// The program root, e.g. `/p17/r`.
    pub root: &'a str,
    /// zxid of the root's creation on this server.
    pub baseline: i64,
    /// Session ids of the program's sessions on this server, by index.
    pub sessions: &'a [i64],
}

impl Ctx<'_> {
    pub fn zxid(&self, z: i64) -> Zxid {
        if z >= self.baseline {
            Zxid::Rel(z - self.baseline)
        } else if z <= 0 {
            Zxid::Raw(z)
        } else {
            // Older than the program: never expected inside a program's root. Kept raw so
            // that it shows up as a difference.
            Zxid::Old(z)
        }
    }

    /// `~` for the root; sequential siblings of the root (`<root>0000000001`) keep their
    /// suffix.
    pub fn path(&self, p: &str) -> String {
        match p.strip_prefix(self.root) {
            Some(rest) => format!("~{rest}"),
            None => p.to_string(),
        }
    }

    fn owner(&self, o: i64) -> Owner {
        if o == 0 {
            return Owner::None;
        }
        match self.sessions.iter().position(|s| *s == o) {
            Some(i) => Owner::Session(i),
            None => Owner::Other(o),
        }
    }

    pub fn stat(&self, s: &Stat) -> NStat {
        NStat {
            czxid: self.zxid(s.czxid),
            mzxid: self.zxid(s.mzxid),
            pzxid: self.zxid(s.pzxid),
            version: s.version,
            cversion: s.cversion,
            aversion: s.aversion,
            owner: self.owner(s.ephemeral_owner),
            data_length: s.data_length,
            num_children: s.num_children,
        }
    }

    pub fn event(&self, e: &Event) -> NEvent {
        NEvent {
            zxid: self.zxid(e.zxid),
            event_type: e.event_type,
            state: e.state,
            path: self.path(&e.path),
        }
    }

    /// Normalises a reply to a request sent with opcode `op`. `create2_in_multi[i]` is true
    /// when sub-op `i` of a multi was a create2 (header 15) of an ordinary node: ZooKeeper 3.8.0
    /// answers it with a type-1 result and zkd with a type-15 result, so its Stat is dropped.
    pub fn reply(&self, op: OpCode, r: &Reply, create2_in_multi: &[bool]) -> NReply {
        let body = if r.err != 0 {
            if r.body.is_empty() {
                Body::None
            } else {
                Body::Surplus(r.body.clone())
            }
        } else {
            self.body(op, &r.body, create2_in_multi)
        };
        NReply::Reply {
            xid: r.xid,
            zxid: self.zxid(r.zxid),
            err: r.err,
            body,
        }
    }

    fn body(&self, op: OpCode, raw: &Bytes, create2_in_multi: &[bool]) -> Body {
        let mut reader = Reader::new(raw.clone());
        let decoded = match Response::read(op, &mut reader) {
            Some(Ok(r)) => r,
            _ => return Body::Undecodable(raw.clone()),
        };
        match decoded {
            Response::Empty if raw.is_empty() => Body::None,
            Response::Empty => Body::Surplus(raw.clone()),
            Response::Create(c) => Body::Path(self.path(&c.path)),
            Response::Create2(c) => Body::PathStat(self.path(&c.path), self.stat(&c.stat)),
            Response::Stat(s) => Body::Stat(self.stat(&s.stat)),
            Response::GetData(d) => Body::Data(d.data, self.stat(&d.stat)),
            Response::GetAcl(a) => Body::Acl(a.acl, self.stat(&a.stat)),
            Response::Children(c) => {
                let mut names: Vec<String> = if op == OpCode::GetEphemerals {
                    c.children.iter().map(|p| self.path(p)).collect()
                } else {
                    c.children
                };
                names.sort();
                Body::Children(names)
            }
            Response::Children2(c) => {
                let mut names = c.children;
                names.sort();
                Body::Children2(names, self.stat(&c.stat))
            }
            Response::Sync(s) => Body::Sync(s.path.map(|p| self.path(&p))),
            Response::Multi(MultiResponse(results)) => Body::Multi(
                results
                    .iter()
                    .enumerate()
                    .map(|(i, r)| self.multi_result(r, create2_in_multi.get(i) == Some(&true)))
                    .collect(),
            ),
            Response::AllChildrenNumber(n) => Body::Number(n.total),
            Response::AddWatch(e) => Body::ErrCode(e.err),
            Response::WhoAmI(w) => {
                let mut ids: Vec<(String, String)> = w
                    .client_info
                    .into_iter()
                    .map(|c| (c.auth_scheme, c.user))
                    .collect();
                ids.sort();
                Body::WhoAmI(ids)
            }
            other => Body::Other(format!("{other:?}")),
        }
    }

    fn multi_result(&self, r: &MultiResult, drop_create2_stat: bool) -> NMulti {
        match r {
            MultiResult::Create { path, stat: None } => NMulti::Create(self.path(path), None),
            MultiResult::Create {
                path,
                stat: Some(_),
            } if drop_create2_stat => NMulti::Create(self.path(path), None),
            MultiResult::Create {
                path,
                stat: Some(s),
            } => NMulti::Create(self.path(path), Some(self.stat(s))),
            MultiResult::Delete => NMulti::Delete,
            MultiResult::SetData(s) => NMulti::SetData(self.stat(s)),
            MultiResult::Check => NMulti::Check,
            MultiResult::GetData { data, stat } => NMulti::GetData(data.clone(), self.stat(stat)),
            MultiResult::GetChildren(c) => {
                let mut names = c.clone();
                names.sort();
                NMulti::GetChildren(names)
            }
            MultiResult::Error(e) => NMulti::Error(*e),
        }
    }
}

/// A normalised zxid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Zxid {
    /// Offset from the program's baseline.
    Rel(i64),
    /// 0 or negative (system nodes, auth replies, "unknown").
    Raw(i64),
    /// Positive but older than the program.
    Old(i64),
}

impl fmt::Display for Zxid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Zxid::Rel(d) => write!(f, "+{d}"),
            Zxid::Raw(z) => write!(f, "{z}"),
            Zxid::Old(z) => write!(f, "old:{z:#x}"),
        }
    }
}

/// A normalised ephemeralOwner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    None,
    Session(usize),
    Other(i64),
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::None => write!(f, "0"),
            Owner::Session(i) => write!(f, "s{}", i + 1),
            Owner::Other(o) => write!(f, "{o:#x}"),
        }
    }
}

/// A Stat without times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NStat {
    pub czxid: Zxid,
    pub mzxid: Zxid,
    pub pzxid: Zxid,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub owner: Owner,
    pub data_length: i32,
    pub num_children: i32,
}

impl fmt::Display for NStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{cz={} mz={} pz={} v={} cv={} av={} owner={} len={} nc={}}}",
            self.czxid,
            self.mzxid,
            self.pzxid,
            self.version,
            self.cversion,
            self.aversion,
            self.owner,
            self.data_length,
            self.num_children
        )
    }
}

/// A normalised multi result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NMulti {
    Create(String, Option<NStat>),
    Delete,
    SetData(NStat),
    Check,
    GetData(Option<Bytes>, NStat),
    GetChildren(Vec<String>),
    Error(i32),
}

impl fmt::Display for NMulti {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NMulti::Create(p, None) => write!(f, "create {p}"),
            NMulti::Create(p, Some(s)) => write!(f, "create2 {p} {s}"),
            NMulti::Delete => write!(f, "delete"),
            NMulti::SetData(s) => write!(f, "setData {s}"),
            NMulti::Check => write!(f, "check"),
            NMulti::GetData(d, s) => write!(f, "getData {} {s}", show_data(d)),
            NMulti::GetChildren(c) => write!(f, "getChildren {c:?}"),
            NMulti::Error(e) => write!(f, "error {}", err_name(*e)),
        }
    }
}

/// A normalised reply body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    None,
    Path(String),
    PathStat(String, NStat),
    Stat(NStat),
    Data(Option<Bytes>, NStat),
    Acl(Vec<Acl>, NStat),
    Children(Vec<String>),
    Children2(Vec<String>, NStat),
    Sync(Option<String>),
    Multi(Vec<NMulti>),
    Number(i32),
    ErrCode(i32),
    /// whoAmI identities (scheme, user), sorted.
    WhoAmI(Vec<(String, String)>),
    /// Bytes after a reply that has no body (or after an error header).
    Surplus(Bytes),
    Undecodable(Bytes),
    Other(String),
}

impl fmt::Display for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::None => Ok(()),
            Body::Path(p) => write!(f, " {p}"),
            Body::PathStat(p, s) => write!(f, " {p} {s}"),
            Body::Stat(s) => write!(f, " {s}"),
            Body::Data(d, s) => write!(f, " {} {s}", show_data(d)),
            Body::Acl(acl, s) => {
                let parts: Vec<String> = acl
                    .iter()
                    .map(|a| format!("{}:{}:{}", a.id.scheme, a.id.id, perm_string(a.perms)))
                    .collect();
                write!(f, " [{}] {s}", parts.join(", "))
            }
            Body::Children(c) => write!(f, " {c:?}"),
            Body::Children2(c, s) => write!(f, " {c:?} {s}"),
            Body::Sync(p) => write!(f, " {p:?}"),
            Body::Multi(rs) => {
                let parts: Vec<String> = rs.iter().map(|r| r.to_string()).collect();
                write!(f, " [{}]", parts.join("; "))
            }
            Body::Number(n) => write!(f, " {n}"),
            Body::ErrCode(e) => write!(f, " body=ErrorResponse({e})"),
            Body::WhoAmI(ids) => {
                let parts: Vec<String> = ids.iter().map(|(s, u)| format!("{s}:{u}")).collect();
                write!(f, " [{}]", parts.join(", "))
            }
            Body::Surplus(b) => write!(f, " surplus={}", hex(b)),
            Body::Undecodable(b) => write!(f, " undecodable={}", hex(b)),
            Body::Other(s) => write!(f, " {s}"),
        }
    }
}

/// One normalised reply, or what happened instead of one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NReply {
    Reply {
        xid: i32,
        zxid: Zxid,
        err: i32,
        body: Body,
    },
    /// A reconnect's ConnectResponse: accepted with this negotiated timeout.
    Connected { timeout: i32 },
    /// A reconnect was refused (invalid session) or the connection closed before a response.
    ConnectFailed(String),
    /// The connection closed before the reply.
    ConnectionLost,
    /// No reply within the harness's timeout.
    NoReply,
    /// The step did nothing on this session.
    Skipped(&'static str),
}

impl fmt::Display for NReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NReply::Reply {
                xid,
                zxid,
                err,
                body,
            } => write!(f, "{} xid={xid} zxid={zxid}{body}", err_name(*err)),
            NReply::Connected { timeout } => write!(f, "connected timeout={timeout}"),
            NReply::ConnectFailed(why) => write!(f, "connect failed: {why}"),
            NReply::ConnectionLost => write!(f, "connection lost"),
            NReply::NoReply => write!(f, "no reply"),
            NReply::Skipped(why) => write!(f, "skipped ({why})"),
        }
    }
}

/// A notification, its header zxid normalised (3.9 sends the change's zxid, 3.8 -1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NEvent {
    pub zxid: Zxid,
    pub event_type: i32,
    pub state: i32,
    pub path: String,
}

impl fmt::Display for NEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.event_type {
            -1 => "None",
            1 => "NodeCreated",
            2 => "NodeDeleted",
            3 => "NodeDataChanged",
            4 => "NodeChildrenChanged",
            _ => "?",
        };
        write!(f, "{name}({}) zxid={}", self.path, self.zxid)?;
        if self.state != 3 {
            write!(f, " state={}", self.state)?;
        }
        Ok(())
    }
}

pub fn err_name(e: i32) -> String {
    match ErrorCode::from_i32(e) {
        Some(ErrorCode::Ok) => "OK".to_string(),
        Some(c) => format!("{}({e})", format!("{c:?}").to_uppercase()),
        None => format!("ERR({e})"),
    }
}

fn show_data(d: &Option<Bytes>) -> String {
    match d {
        None => "null".to_string(),
        Some(b) if b.iter().all(|c| c.is_ascii_graphic() || *c == b' ') => {
            format!("{:?}", String::from_utf8_lossy(b))
        }
        Some(b) => format!("0x{}", hex(b)),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02x}")).collect()
}
