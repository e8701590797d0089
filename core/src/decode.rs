//! The second stage of a request, `Core::decode`: the frame's header, opcode and body
//! decoded and checked (authentication, read-only members, fault rules) before the request is
//! routed and executed, and the reply sent.

use bytes::Bytes;
use zkd_protocol::{DecodeError, ErrorCode, Jute, OpCode, Reader, Request, RequestHeader};

use crate::ensemble::lag::LaggingMember;
use crate::request::execute::Call;
use crate::request::reply::header_only;
use crate::testing::fault::{FaultAction, Muted};
use crate::{ConnId, Core, Now, Outbox, Serving};

impl Core {
    /// The second stage of a request, once it is this connection's turn: decodes the header,
    /// the opcode and the body, counts it, enforces authentication, the read-only rules and
    /// the fault rules, then hands the request to [`Core::route`] with the lagging member
    /// [`Core::request`] found, and sends the reply.
    pub(crate) fn decode(
        &mut self,
        conn: ConnId,
        payload: Bytes,
        now: Now,
        lagging: Option<LaggingMember>,
        out: &mut dyn Outbox,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.closing {
            return;
        }
        let Some(sid) = c.session else {
            self.finish_connection(conn, out);
            return;
        };
        let payload_len = payload.len() as u64;
        let mut r = Reader::new(payload);
        let Ok(header) = RequestHeader::read(&mut r) else {
            tracing::info!(conn, "request shorter than its header; closing");
            self.finish_connection(conn, out);
            return;
        };
        c.received += 1;
        c.last_cxid = header.xid;
        self.counters.received += 1;
        self.counters.bytes_received += payload_len + 4;
        self.count_member_received(conn);
        self.now_ms = now.mono;
        let op = OpCode::from_i32(header.op);
        if self.refuse_unauthenticated(conn, header.xid, header.op, out) {
            return;
        }
        if op.is_some_and(OpCode::touches_session) {
            self.sessions.touch(sid, now.mono);
        }
        let (_xid, zxid, frame) = match op.map(|op| (op, Request::read(op, &mut r))) {
            None | Some((_, Err(DecodeError::NotARequest(_))))
                if op != Some(OpCode::CreateSession) =>
            {
                tracing::info!(conn, opcode = header.op, "unknown opcode; closing");
                self.send(
                    out,
                    conn,
                    header_only(header.xid, -1, ErrorCode::Unimplemented.code()),
                );
                self.finish_connection(conn, out);
                return;
            }
            None | Some((_, Err(DecodeError::NotARequest(_)))) => {
                let zxid = self.db.zxid;
                (
                    header.xid,
                    zxid,
                    header_only(header.xid, zxid, ErrorCode::MarshallingError.code()),
                )
            }
            Some((op, Err(e))) => {
                tracing::debug!(conn, ?op, error = %e, "undecodable request body");
                let zxid = self.db.zxid;
                (
                    header.xid,
                    zxid,
                    header_only(header.xid, zxid, ErrorCode::MarshallingError.code()),
                )
            }
            Some((op, Ok(_)))
                if self.conn_serving(conn) == Serving::ReadOnly
                    && op.refused_when_read_only()
                    && !(op == OpCode::CloseSession && self.local_sessions.contains_key(&sid)) =>
            {
                let zxid = self.db.zxid;
                (
                    header.xid,
                    zxid,
                    header_only(header.xid, zxid, ErrorCode::NotReadOnly.code()),
                )
            }
            Some((op, Ok(req))) => {
                let call = Call {
                    conn,
                    sid,
                    xid: header.xid,
                };
                match self.faults.check(header.op, &req, sid).inspect(|&action| {
                    out.fact(crate::Fact::FaultFired {
                        conn,
                        session: sid,
                        action,
                    })
                }) {
                    None => match self.route(call, req, now, lagging, out, false) {
                        Some(done) => done,
                        None => return,
                    },
                    Some(FaultAction::Error(code)) => {
                        tracing::debug!(conn, ?op, code, "fault rule: error reply");
                        let zxid = self.db.zxid;
                        (header.xid, zxid, header_only(header.xid, zxid, code))
                    }
                    Some(FaultAction::DropBefore) => {
                        tracing::debug!(
                            conn,
                            ?op,
                            "fault rule: connection dropped before the request"
                        );
                        self.finish_connection(conn, out);
                        return;
                    }
                    Some(action @ (FaultAction::DropAfter | FaultAction::NoResponse)) => {
                        tracing::debug!(conn, ?op, ?action, "fault rule: reply suppressed");
                        let mut muted = Muted { inner: out, conn };
                        let _ = self.route(call, req, now, lagging, &mut muted, true);
                        if action == FaultAction::DropAfter {
                            self.finish_connection(conn, out);
                        }
                        return;
                    }
                    Some(FaultAction::Delay(ms)) => {
                        tracing::debug!(conn, ?op, ms, "fault rule: reply delayed");
                        out.delay(conn, ms, self.release_when());
                        match self.route(call, req, now, lagging, out, false) {
                            Some(done) => done,
                            None => return,
                        }
                    }
                }
            }
        };
        if let Some(c) = self.conns.get_mut(&conn) {
            c.last_op = op.map_or("NA", OpCode::short_name);
            c.last_zxid = zxid;
            c.last_response_ms = now.wall;
        }
        self.send(out, conn, frame);
    }
}
