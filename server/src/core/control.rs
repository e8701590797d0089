//! Control operations of the test control plane, applied in the core's one request order:
//! session reports, forced expiry, reset.

use super::{ConnId, Core, Outbox};

/// One session as the control plane reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session id.
    pub id: i64,
    /// The negotiated timeout in ms.
    pub timeout_ms: i64,
    /// The connected client's address, if a connection is attached.
    pub peer: Option<std::net::SocketAddr>,
    /// The connection attached, if any.
    pub conn: Option<ConnId>,
    /// Ephemeral nodes the session owns.
    pub ephemerals: usize,
    /// Watches held by the session's connection.
    pub watches: usize,
    /// Milliseconds since the session was last heard from.
    pub idle_ms: i64,
}

impl Core {
    /// Every live session, ordered by id. `now_ms` is on the session clock.
    pub fn sessions_report(&self, now_ms: i64) -> Vec<SessionInfo> {
        let mut v: Vec<SessionInfo> = self
            .sessions
            .iter()
            .map(|s| {
                let conn = s.conn.filter(|c| self.conns.contains_key(c));
                SessionInfo {
                    id: s.id,
                    timeout_ms: s.timeout_ms,
                    peer: conn.and_then(|c| self.conns.get(&c)).map(|c| c.remote),
                    conn,
                    ephemerals: s.ephemerals.len(),
                    watches: conn.map_or(0, |c| self.watches.count_for(c)),
                    idle_ms: (now_ms - s.last_heard).max(0),
                }
            })
            .collect();
        v.sort_by_key(|s| s.id);
        v
    }

    /// Expires session `sid` now, exactly as a timeout would: its ephemerals are deleted (and
    /// their watches fire), then its connection is closed. False if there is no such session.
    pub fn expire_session(&mut self, sid: i64, now_ms: i64, out: &mut dyn Outbox) -> bool {
        let Some(conn) = self.sessions.get(sid).map(|s| s.conn) else {
            return false;
        };
        tracing::debug!(
            session = format_args!("0x{sid:x}"),
            "session expired by control"
        );
        self.kill_session(sid, now_ms, out);
        if let Some(conn) = conn {
            self.finish_connection(conn, out);
        }
        true
    }
}
