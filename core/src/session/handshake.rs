//! The first frame of a connection: the ConnectRequest that creates a session or resumes
//! one (timeout negotiation, password check, the zxid guard, read-only members).

use bytes::Bytes;
use zkd_protocol::{ConnectRequest, ConnectResponse, Jute, Reader};

use crate::{ConnId, Core, Handshake, Now, Outbox, Serving};

impl Core {
    /// The first frame of a connection: a ConnectRequest.
    pub fn handshake(
        &mut self,
        conn: ConnId,
        payload: Bytes,
        now: impl Into<Now>,
        out: &mut dyn Outbox,
    ) -> Handshake {
        if self.stopped.is_some() {
            return Handshake::Closed;
        }
        let now = now.into();
        let payload_len = payload.len() as u64;
        let Ok(req) = ConnectRequest::read(&mut Reader::new(payload)) else {
            tracing::debug!(conn, "undecodable ConnectRequest");
            self.finish_connection(conn, out);
            return Handshake::Closed;
        };
        if !self.conns.contains_key(&conn) {
            return Handshake::Closed;
        }
        self.counters.received += 1;
        self.counters.bytes_received += payload_len + 4;
        if req.session_id != 0 {
            self.counters.revalidations += 1;
        }
        self.count_member_received(conn);
        let serving = self.conn_serving(conn);
        match serving {
            Serving::ReadWrite => {}
            Serving::NotServing => {
                tracing::debug!(
                    conn,
                    "member has no quorum and read-only mode is off; closing"
                );
                self.finish_connection(conn, out);
                return Handshake::Closed;
            }
            Serving::ReadOnly if req.read_only != Some(true) => {
                tracing::debug!(
                    conn,
                    "read-only member: refusing a client that did not ask for read-only mode"
                );
                self.finish_connection(conn, out);
                return Handshake::Closed;
            }
            Serving::ReadOnly
                if req.session_id != 0
                    && self.sessions.get(req.session_id).is_some()
                    && !self.local_sessions.contains_key(&req.session_id) =>
            {
                // A read-only member does not take over a global session (docs/protocol.md,
                // "Ensemble members and read-only mode"): closed without an answer.
                tracing::debug!(conn, "read-only member: refusing a global session");
                self.finish_connection(conn, out);
                return Handshake::Closed;
            }
            Serving::ReadOnly => {}
        }
        self.advance_members(now, out);
        // A member never lets a client see older state than it has seen: it refuses the
        // session until it has applied as much (docs/protocol.md, "Lagging members and sync").
        let applied = self.member_zxid(self.conns.get(&conn).map_or(0, |c| c.member));
        if req.last_zxid_seen > applied {
            tracing::info!(
                conn,
                client_zxid = format_args!("0x{:x}", req.last_zxid_seen),
                server_zxid = format_args!("0x{:x}", applied),
                "client has seen a newer zxid than this server; closing"
            );
            self.finish_connection(conn, out);
            return Handshake::Closed;
        }
        // Never below one tick, whatever the configuration says: expiry runs on ticks.
        let floor = self.cfg.min_session_timeout_ms.max(self.cfg.tick_ms).max(1);
        let timeout = (req.timeout as i64)
            .min(self.cfg.max_session_timeout_ms)
            .max(floor);
        let ro = req.read_only;
        let member = self.conns.get(&conn).map_or(0, |c| c.member);
        let local = serving == Serving::ReadOnly || (self.local_mode.0 && member != 0);
        let sid = if req.session_id == 0 && local {
            // A local session of this member (a read-only member's, or any member's with
            // local sessions on): no transaction, unknown to the other members.
            let s = self.sessions.create_on(member, timeout, now.mono);
            s.conn = Some(conn);
            let sid = s.id;
            self.local_sessions.insert(sid, member);
            sid
        } else if req.session_id == 0 {
            self.next_zxid();
            let member = self.conns.get(&conn).map_or(0, |c| c.member);
            let s = self.sessions.create_on(member, timeout, now.mono);
            s.conn = Some(conn);
            let sid = s.id;
            let zxid = self.db.zxid;
            self.commit_session_created(sid, timeout, zxid, now, out);
            sid
        } else {
            let valid = self
                .sessions
                .get(req.session_id)
                .is_some_and(|s| req.passwd.len() == 16 && s.passwd[..] == req.passwd[..])
                && self
                    .local_sessions
                    .get(&req.session_id)
                    .is_none_or(|owner| *owner == member);
            if !valid {
                let frame = zkd_protocol::frame::record_frame(&ConnectResponse::invalid(ro));
                self.send(out, conn, frame);
                self.finish_connection(conn, out);
                return Handshake::Closed;
            }
            let old = self.sessions.get(req.session_id).and_then(|s| s.conn);
            if let Some(old) = old.filter(|o| *o != conn) {
                self.finish_connection(old, out);
            }
            self.sessions.set_timeout(req.session_id, timeout, now.mono);
            if let Some(s) = self.sessions.get_mut(req.session_id) {
                s.conn = Some(conn);
            }
            req.session_id
        };
        let passwd = self.sessions.get(sid).map(|s| s.passwd).unwrap_or_default();
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session = Some(sid);
            c.read_only_byte = ro;
            c.last_op = "SESS";
            c.last_response_ms = now.wall;
        }
        let resp = ConnectResponse {
            protocol_version: 0,
            timeout: timeout as i32,
            session_id: sid,
            passwd: Bytes::copy_from_slice(&passwd),
            read_only: ro.map(|_| serving == Serving::ReadOnly),
        };
        self.send(out, conn, zkd_protocol::frame::record_frame(&resp));
        Handshake::Established
    }
}
