//! What the history reads out of frames: a request's opcode, xid, path, watch flag and data
//! size; a reply's error code, zxid, Stat version and child count; a notification's type and
//! path; a handshake's answer. Only lengths and positions are read from data and passwords,
//! never their bytes.

use zkd_core::Frame;
use zkd_protocol::{MultiOp, OpClass, OpCode, PathAt, Reader, ReplyBody, Request, WatchEffect};

/// Bytes of a Stat on the wire; the version sits 36 bytes before its end.
const STAT_LEN: usize = 68;
const VERSION_FROM_END: usize = 36;

/// A big-endian i32 at `at` of `b`.
fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    let raw = <[u8; 4]>::try_from(b.get(at..at.checked_add(4)?)?).ok()?;
    Some(i32::from_be_bytes(raw))
}

/// A big-endian i64 at `at` of `b`.
fn i64_at(b: &[u8], at: usize) -> Option<i64> {
    let raw = <[u8; 8]>::try_from(b.get(at..at.checked_add(8)?)?).ok()?;
    Some(i64::from_be_bytes(raw))
}

/// The string (i32 length, then the bytes) at `at`: its range, and where what follows starts.
fn string_at(b: &[u8], at: usize) -> Option<(std::ops::Range<usize>, usize)> {
    let len = usize::try_from(i32_at(b, at)?).unwrap_or(0);
    let start = at + 4;
    let end = start.checked_add(len)?;
    (end <= b.len()).then_some((start..end, end))
}

/// What a request says, read from its payload (the frame without its length prefix).
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestFacts {
    pub(crate) xid: i32,
    pub(crate) op: i32,
    /// `op`, when it is one zkd knows.
    pub(crate) code: Option<OpCode>,
    /// Where the path is in the payload.
    pub(crate) path: Option<std::ops::Range<usize>>,
    pub(crate) watch: bool,
    /// Bytes of data sent (create, setData), or -1.
    pub(crate) data_bytes: i64,
    /// `addWatch`'s mode, `removeWatches`' and `checkWatches`' watcher type.
    pub(crate) mode: i32,
}

impl RequestFacts {
    /// Whether the request can set or remove a watch (see [`super::History::request_done`]).
    pub(crate) fn may_watch(&self) -> bool {
        self.watch
            || self.code.is_some_and(|c| {
                matches!(
                    c.info().watch,
                    WatchEffect::Persistent | WatchEffect::Removes
                )
            })
    }
}

/// The header and what the history needs of a request's body; `None` for a payload shorter
/// than a header, and for pings (which it does not record).
pub(crate) fn request(payload: &[u8]) -> Option<RequestFacts> {
    let xid = i32_at(payload, 0)?;
    let op = i32_at(payload, 4)?;
    let mut facts = RequestFacts {
        xid,
        op,
        data_bytes: -1,
        ..RequestFacts::default()
    };
    let Some(code) = OpCode::from_i32(op) else {
        return Some(facts);
    };
    facts.code = Some(code);
    if code == OpCode::Ping {
        return None;
    }
    let info = code.info();
    let path = match info.path_at {
        PathAt::Body => string_at(payload, 8),
        PathAt::Nowhere | PathAt::FirstSubOp => None,
    };
    let Some((range, after)) = path else {
        return Some(facts);
    };
    facts.path = Some(range);
    if info.watch.is_watching_read() {
        facts.watch = payload.get(after).is_some_and(|&b| b != 0);
    } else if info.carries_data {
        facts.data_bytes = i64::from(i32_at(payload, after).unwrap_or(-1).max(0));
    } else if info.class == OpClass::Watches {
        // addWatch's mode, removeWatches' and checkWatches' watcher type.
        facts.mode = i32_at(payload, after).unwrap_or(-1);
    }
    Some(facts)
}

/// A multi's sub-ops, each as its opcode and path (decoded only for a multi).
pub(crate) fn multi_ops(payload: &[u8], op: i32, mut each: impl FnMut(OpCode, &str)) {
    let Some(code) = OpCode::from_i32(op).filter(|o| o.info().path_at == PathAt::FirstSubOp) else {
        return;
    };
    let Some(body) = payload.get(8..) else {
        return;
    };
    let mut r = Reader::new(bytes::Bytes::copy_from_slice(body));
    let ops = match Request::read(code, &mut r) {
        Ok(Request::Multi(ops) | Request::MultiRead(ops)) => ops,
        _ => return,
    };
    for o in &ops {
        let path: &str = match o {
            MultiOp::Create(c) => &c.path,
            MultiOp::Delete(d) => &d.path,
            MultiOp::SetData(s) => &s.path,
            MultiOp::Check(c) => &c.path,
            MultiOp::GetData(g) | MultiOp::GetChildren(g) => &g.path,
        };
        each(o.op(), path);
    }
}

/// The auth scheme of an `auth` request (never its data).
pub(crate) fn auth_scheme(payload: &[u8]) -> Option<std::ops::Range<usize>> {
    // xid, opcode, then the auth type (an i32), then the scheme.
    string_at(payload, 12).map(|(r, _)| r)
}

/// One thing a reply says, read from its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyFact {
    /// Its header: zxid and error code (always first).
    Header { zxid: i64, err: i32 },
    /// The Stat's version, for replies that carry one.
    Version(i32),
    /// getData: bytes of data returned.
    DataBytes(i64),
    /// getChildren, getChildren2: how many children.
    Children(i64),
    /// A create's reply whose path ends in a sequential node's ten-digit counter: the
    /// counter, and the path's length.
    Created { counter: i64, len: usize },
}

/// The xid of a frame (after its length prefix).
pub(crate) fn frame_xid(frame: &Frame) -> Option<i32> {
    i32_at(&frame.head, 4)
}

/// A byte of the frame at `at` over its parts.
fn byte_of(frame: &Frame, at: usize) -> Option<u8> {
    let (h, b) = (frame.head.len(), frame.body.len());
    if at < h {
        frame.head.get(at).copied()
    } else if at < h + b {
        frame.body.get(at - h).copied()
    } else {
        frame.tail.get(at - h - b).copied()
    }
}

/// A big-endian i32 at `at` of the frame, over its parts.
fn frame_i32(frame: &Frame, at: usize) -> Option<i32> {
    // Most replies are one part, and a reply's Stat is its last: read a part straight when
    // the four bytes lie in it.
    if let Some(v) = i32_at(&frame.head, at) {
        return Some(v);
    }
    let body_end = frame.head.len() + frame.body.len();
    if let Some(v) = at
        .checked_sub(body_end)
        .and_then(|i| i32_at(&frame.tail, i))
    {
        return Some(v);
    }
    let mut raw = [0u8; 4];
    for (i, b) in raw.iter_mut().enumerate() {
        *b = byte_of(frame, at + i)?;
    }
    Some(i32::from_be_bytes(raw))
}

/// The reply to a request of opcode `code`: its header, then its Stat's version, data size
/// or child count where the opcode's reply has them, each handed to `each`.
#[inline]
pub(crate) fn reply(code: Option<OpCode>, frame: &Frame, mut each: impl FnMut(ReplyFact)) {
    let head = &frame.head;
    let zxid = i64_at(head, 8).unwrap_or(-1);
    let err = i32_at(head, 16).unwrap_or(0);
    each(ReplyFact::Header { zxid, err });
    let Some(code) = code.filter(|_| err == 0) else {
        return;
    };
    let len = frame.len();
    // The body starts after the length prefix and the 16-byte reply header.
    const BODY: usize = 20;
    let body = code.info().reply;
    if body.ends_with_stat() && len >= BODY + STAT_LEN {
        if let Some(v) = frame_i32(frame, len - VERSION_FROM_END) {
            each(ReplyFact::Version(v));
        }
    }
    match body {
        ReplyBody::Create | ReplyBody::Create2 => {
            let created = string_at(head, BODY).and_then(|(path, _)| sequence_of(&head[path]));
            if let Some((counter, len)) = created {
                each(ReplyFact::Created { counter, len });
            }
        }
        ReplyBody::GetData => {
            if let Some(n) = frame_i32(frame, BODY) {
                each(ReplyFact::DataBytes(i64::from(n.max(0))));
            }
        }
        ReplyBody::Children | ReplyBody::Children2 => {
            if let Some(n) = frame_i32(frame, BODY) {
                each(ReplyFact::Children(i64::from(n.max(0))));
            }
        }
        _ => {}
    }
}

/// The counter a created path ends in (ten characters: digits, or a minus sign and nine
/// digits once the counter has wrapped), and the path's length.
fn sequence_of(path: &[u8]) -> Option<(i64, usize)> {
    let tail = path.get(path.len().checked_sub(10)?..)?;
    let (negative, digits) = match tail.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, tail),
    };
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: i64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((if negative { -n } else { n }, path.len()))
}

/// A notification frame (xid -1): its event type, the zxid in its header and its path's range
/// in the frame's head.
pub(crate) fn notification(frame: &Frame) -> Option<(i32, i64, std::ops::Range<usize>)> {
    let head = &frame.head;
    let zxid = i64_at(head, 8)?;
    let event = i32_at(head, 20)?;
    // The keeper state (an i32) sits between the type and the path.
    let (path, _) = string_at(head, 28)?;
    Some((event, zxid, path))
}

/// What a connect request asked: the session (0 for a new one) and the timeout.
pub(crate) fn connect_request(payload: &[u8]) -> (i64, i32) {
    // protocol version, last zxid seen, timeout, session id: the password is not read.
    let timeout = i32_at(payload, 12).unwrap_or(0);
    let session = i64_at(payload, 16).unwrap_or(0);
    (session, timeout)
}

/// What a connect response granted: the timeout, the session (0: expired or unknown) and
/// whether the connection is read-only.
pub(crate) fn connect_response(frame: &Frame) -> Option<(i32, i64, bool)> {
    let head = &frame.head;
    // length prefix, protocol version, timeout, session id, password, read-only byte.
    let timeout = i32_at(head, 8)?;
    let session = i64_at(head, 12)?;
    let (_, after) = string_at(head, 20)?;
    let read_only = head.get(after).is_some_and(|&b| b != 0);
    Some((timeout, session, read_only))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};

    fn payload(xid: i32, op: i32, body: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_i32(xid);
        b.put_i32(op);
        body(&mut b);
        b.to_vec()
    }

    /// A Jute string or buffer: its length, then its bytes.
    fn put_string(b: &mut BytesMut, s: &[u8]) {
        b.put_i32(s.len() as i32);
        b.put_slice(s);
    }

    #[test]
    fn a_set_data_request_gives_its_path_and_data_size_not_its_data() {
        let p = payload(7, 5, |b| {
            put_string(b, b"/a/b");
            put_string(b, b"hello");
            b.put_i32(-1);
        });
        let f = request(&p).expect("facts");
        assert_eq!((f.xid, f.op, f.data_bytes), (7, 5, 5));
        assert_eq!(&p[f.path.expect("path")], b"/a/b");
    }

    #[test]
    fn a_get_data_request_with_a_watch_sets_watch() {
        let p = payload(1, 4, |b| {
            put_string(b, b"/x");
            b.put_u8(1);
        });
        assert!(request(&p).expect("facts").watch);
        assert!(
            request(&payload(2, 11, |_| {})).is_none(),
            "pings are not recorded"
        );
    }

    #[test]
    fn a_get_data_reply_gives_its_size_and_version() {
        let mut b = BytesMut::new();
        b.put_i32(0);
        b.put_i32(1);
        b.put_i64(0x42);
        b.put_i32(0);
        put_string(&mut b, b"abc");
        let mut stat = [0u8; STAT_LEN];
        stat[32..36].copy_from_slice(&9i32.to_be_bytes());
        b.put_slice(&stat);
        let frame = Frame::from(b.freeze());
        let mut facts = Vec::new();
        reply(Some(OpCode::GetData), &frame, |f| facts.push(f));
        assert_eq!(
            facts,
            [
                ReplyFact::Header { zxid: 0x42, err: 0 },
                ReplyFact::Version(9),
                ReplyFact::DataBytes(3)
            ]
        );
    }
}
