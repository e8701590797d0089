//! The answers of the throughput floors ([`crate::floor_tokio`], [`crate::floor_epoll`]): a
//! request payload in, its reply frame out, with no tree behind it. Every request is decoded
//! whole, as zkd decodes it (`RequestHeader`, then `Request::read`), and every reply is a
//! complete, correct one: the handshake gets a session (the timeout it asked for, a fresh id,
//! a password), getData the floor's fixed value and a Stat, setData a Stat with a new zxid,
//! create the path it asked for (with a sequence number when sequential), delete and ping
//! their headers, closeSession its header followed by the end of the connection. Anything
//! else is answered with `UNIMPLEMENTED`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use zkd_protocol::frame::append_frame;
use zkd_protocol::{
    ConnectRequest, ConnectResponse, Create2Response, CreateMode, ErrorCode, GetDataResponse, Jute,
    OpCode, Reader, ReplyHeader, Request, RequestHeader, Stat,
};

/// The xid of a ping and of its reply.
const PING_XID: i32 = -2;

/// What the floor's replies share: the fixed value and the counters.
pub struct Replies {
    /// What every getData returns.
    data: Bytes,
    /// The last zxid handed out (each write takes the next one).
    zxid: AtomicI64,
    /// The last session id handed out.
    sessions: AtomicI64,
    /// The creation time of the fixed node, ms since the epoch.
    ctime: i64,
}

/// Whether the connection goes on after a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    Continue,
    /// The reply answered a closeSession (or the handshake was malformed): write what is
    /// queued, then close.
    Close,
}

/// One connection's state: whether the handshake is done.
#[derive(Debug, Default)]
pub struct Session {
    handshaken: bool,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Replies {
    /// Replies whose getData returns `value_size` bytes of `v` (the throughput client's
    /// values).
    pub fn new(value_size: usize) -> Replies {
        Replies {
            data: Bytes::from(vec![b'v'; value_size]),
            zxid: AtomicI64::new(1),
            sessions: AtomicI64::new(0),
            ctime: now_ms(),
        }
    }

    /// The value every getData returns.
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// The Stat of the fixed node as of `mzxid` (set at `mtime`) with `len` bytes.
    fn stat(&self, mzxid: i64, mtime: i64, version: i32, len: usize) -> Stat {
        Stat {
            czxid: 1,
            mzxid,
            ctime: self.ctime,
            mtime,
            version,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: len as i32,
            num_children: 0,
            pzxid: 1,
        }
    }

    fn next_zxid(&self) -> i64 {
        self.zxid.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Answers one frame's `payload`, appending the reply frame to `out`. An error is a
    /// payload that does not decode: the connection is to be closed without a reply.
    pub fn answer(
        &self,
        session: &mut Session,
        payload: Bytes,
        out: &mut BytesMut,
    ) -> Result<After, String> {
        if !session.handshaken {
            return self.handshake(session, payload, out);
        }
        let mut r = Reader::new(payload);
        let h = RequestHeader::read(&mut r).map_err(|e| e.to_string())?;
        let Some(op) = OpCode::from_i32(h.op) else {
            reply(
                out,
                h.xid,
                self.zxid(),
                ErrorCode::Unimplemented as i32,
                |_| {},
            );
            return Ok(After::Continue);
        };
        let req = Request::read(op, &mut r).map_err(|e| format!("{op:?}: {e}"))?;
        match req {
            Request::GetData(_) => {
                let zxid = self.zxid();
                let body = GetDataResponse {
                    data: Some(self.data.clone()),
                    stat: self.stat(1, self.ctime, 0, self.data.len()),
                };
                reply(out, h.xid, zxid, 0, |o| body.write(o));
            }
            Request::SetData(set) => {
                let zxid = self.next_zxid();
                let version = if set.version >= 0 { set.version + 1 } else { 1 };
                let len = set.data.as_ref().map_or(0, Bytes::len);
                let stat = self.stat(zxid, now_ms(), version, len);
                reply(out, h.xid, zxid, 0, |o| stat.write(o));
            }
            Request::Create(c) => {
                let zxid = self.next_zxid();
                let sequential = CreateMode::from_flags(c.flags).is_some_and(|m| m.is_sequential());
                let path = if sequential {
                    format!("{}{:010}", c.path, zxid % 10_000_000_000)
                } else {
                    c.path
                };
                if c.op == OpCode::Create {
                    reply(out, h.xid, zxid, 0, |o| path.write(o));
                } else {
                    let len = c.data.as_ref().map_or(0, Bytes::len);
                    let body = Create2Response {
                        path,
                        stat: self.stat(zxid, now_ms(), 0, len),
                    };
                    reply(out, h.xid, zxid, 0, |o| body.write(o));
                }
            }
            Request::Delete(_) => reply(out, h.xid, self.next_zxid(), 0, |_| {}),
            Request::Ping => reply(out, PING_XID, self.zxid(), 0, |_| {}),
            Request::CloseSession => {
                reply(out, h.xid, self.next_zxid(), 0, |_| {});
                return Ok(After::Close);
            }
            _ => reply(
                out,
                h.xid,
                self.zxid(),
                ErrorCode::Unimplemented as i32,
                |_| {},
            ),
        }
        Ok(After::Continue)
    }

    fn zxid(&self) -> i64 {
        self.zxid.load(Ordering::Relaxed)
    }

    /// The first frame: a ConnectRequest, answered with a new session.
    fn handshake(
        &self,
        session: &mut Session,
        payload: Bytes,
        out: &mut BytesMut,
    ) -> Result<After, String> {
        let req = ConnectRequest::read(&mut Reader::new(payload)).map_err(|e| e.to_string())?;
        session.handshaken = true;
        let id = self.sessions.fetch_add(1, Ordering::Relaxed) + 1;
        let resp = ConnectResponse {
            protocol_version: 0,
            timeout: req.timeout,
            session_id: id,
            passwd: Bytes::copy_from_slice(&id.to_be_bytes().repeat(2)),
            read_only: req.read_only.map(|_| false),
        };
        append_frame(out, |o| resp.write(o));
        Ok(After::Continue)
    }
}

/// Appends one reply frame: the header, then what `body` writes.
fn reply(out: &mut BytesMut, xid: i32, zxid: i64, err: i32, body: impl FnOnce(&mut BytesMut)) {
    append_frame(out, |o| {
        ReplyHeader { xid, zxid, err }.write(o);
        body(o);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkd_protocol::{FrameCodec, PathWatchRequest, SetDataRequest};

    fn frames(mut out: BytesMut) -> Vec<Bytes> {
        let codec = FrameCodec::default();
        let mut v = Vec::new();
        while let Some(f) = codec.next_frame(&mut out).unwrap() {
            v.push(f);
        }
        assert!(out.is_empty());
        v
    }

    fn payload(req: &Request, xid: i32) -> Bytes {
        let mut f = req.to_frame(xid);
        f.split_off(4)
    }

    #[test]
    fn answers_handshake_get_set_ping_close() {
        let r = Replies::new(5);
        let mut s = Session::default();
        let mut out = BytesMut::new();
        let connect = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout: 4000,
            session_id: 0,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: Some(false),
        };
        let frame = zkd_protocol::frame::record_frame(&connect);
        let after = r.answer(&mut s, frame.slice(4..), &mut out).unwrap();
        assert_eq!(after, After::Continue);
        let get = Request::GetData(PathWatchRequest {
            path: "/a".into(),
            watch: false,
        });
        r.answer(&mut s, payload(&get, 7), &mut out).unwrap();
        let set = Request::SetData(SetDataRequest {
            path: "/a".into(),
            data: Some(Bytes::from_static(b"abc")),
            version: 4,
        });
        r.answer(&mut s, payload(&set, 8), &mut out).unwrap();
        r.answer(&mut s, payload(&Request::Ping, -2), &mut out)
            .unwrap();
        let after = r
            .answer(&mut s, payload(&Request::CloseSession, 9), &mut out)
            .unwrap();
        assert_eq!(after, After::Close);

        let f = frames(out);
        assert_eq!(f.len(), 5);
        let resp: ConnectResponse = zkd_protocol::from_bytes(f[0].clone()).unwrap();
        assert_eq!((resp.timeout, resp.session_id), (4000, 1));
        assert_eq!(resp.passwd.len(), 16);
        let mut rd = Reader::new(f[1].clone());
        let h = ReplyHeader::read(&mut rd).unwrap();
        assert_eq!((h.xid, h.err), (7, 0));
        let body = GetDataResponse::read(&mut rd).unwrap();
        assert_eq!(body.data.as_deref(), Some(&b"vvvvv"[..]));
        assert_eq!(body.stat.data_length, 5);
        let mut rd = Reader::new(f[2].clone());
        let h = ReplyHeader::read(&mut rd).unwrap();
        assert_eq!((h.xid, h.zxid, h.err), (8, 2, 0));
        let stat = Stat::read(&mut rd).unwrap();
        assert_eq!((stat.version, stat.data_length, stat.mzxid), (5, 3, 2));
        let h = ReplyHeader::read(&mut Reader::new(f[3].clone())).unwrap();
        assert_eq!((h.xid, h.err), (-2, 0));
        let h = ReplyHeader::read(&mut Reader::new(f[4].clone())).unwrap();
        assert_eq!((h.xid, h.err), (9, 0));
    }

    #[test]
    fn a_request_that_does_not_decode_is_an_error() {
        let r = Replies::new(1);
        let mut s = Session::default();
        let mut out = BytesMut::new();
        assert!(r
            .answer(&mut s, Bytes::from_static(&[0, 1]), &mut out)
            .is_err());
        assert!(out.is_empty());
    }
}
