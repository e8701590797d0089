//! What the four-letter words show, read out of the core as plain data.

use std::collections::HashMap;

use crate::fourlw::{
    ConfInfo, ConnSession, ConnWatches, ConnectionInfo, FourLetterView, SessionInfo,
};

use super::Core;

impl Core {
    /// A snapshot of everything `srvr`, `stat`, `cons`, `dump`, `wch*`, `conf` and `mntr` report.
    pub fn four_letter_view(&self, now_ms: i64) -> FourLetterView {
        let mut connections: Vec<ConnectionInfo> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.closing)
            .map(|(_, c)| ConnectionInfo {
                remote: c.remote,
                queued: 0,
                packets_received: c.received,
                packets_sent: c.sent,
                last_activity_ms: c.last_response_ms.max(c.established_ms),
                session: c.session.map(|sid| ConnSession {
                    session_id: sid,
                    timeout_ms: self.sessions.get(sid).map_or(0, |s| s.timeout_ms),
                    last_op: c.last_op,
                    established_ms: c.established_ms,
                    last_cxid: c.last_cxid as i64,
                    last_zxid: c.last_zxid,
                    last_response_ms: c.last_response_ms,
                    ..ConnSession::default()
                }),
            })
            .collect();
        connections.sort_by_key(|c| c.remote);
        let mut sessions: Vec<SessionInfo> = self
            .sessions
            .iter()
            .map(|s| SessionInfo {
                id: s.id,
                timeout_ms: s.timeout_ms,
                expires_at_ms: s.expires_at,
                ephemerals: s.ephemerals.iter().map(|p| p.to_string()).collect(),
            })
            .collect();
        sessions.sort_by_key(|s| s.id);
        let session_of: HashMap<u64, i64> = self
            .conns
            .iter()
            .map(|(id, c)| (*id, c.session.unwrap_or(0)))
            .collect();
        let mut by_session: HashMap<i64, Vec<String>> = HashMap::new();
        for (path, conns) in self.watches.data_table() {
            for conn in conns {
                let sid = session_of.get(&conn).copied().unwrap_or(0);
                by_session.entry(sid).or_default().push(path.clone());
            }
        }
        let mut data_watches: Vec<ConnWatches> = by_session
            .into_iter()
            .map(|(session_id, mut paths)| {
                paths.sort();
                ConnWatches { session_id, paths }
            })
            .collect();
        data_watches.sort_by_key(|w| w.session_id);
        FourLetterView {
            last_zxid: self.zxid,
            znode_count: self.tree.len() as u64,
            packets_received: self.counters.received,
            packets_sent: self.counters.sent,
            outstanding_requests: 0,
            latency: Default::default(),
            connections,
            sessions,
            data_watches,
            watch_count: self.watches.count() as u64,
            approximate_data_size: self.tree.approximate_data_size(),
            uptime_ms: now_ms - self.start_ms,
            conf: ConfInfo::from(&self.cfg),
        }
    }

    /// `srst`: zero the server-wide packet counters.
    pub fn reset_server_stats(&mut self) {
        self.counters = Default::default();
    }

    /// `crst`: zero every connection's packet counters.
    pub fn reset_connection_stats(&mut self) {
        for c in self.conns.values_mut() {
            c.received = 0;
            c.sent = 0;
        }
    }
}
