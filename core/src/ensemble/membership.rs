//! What the core knows of a simulated ensemble: the member each connection arrived on and how
//! that member served then ([`Serving`]) and per-member packet counters for the members' own
//! reports. Which requests a read-only member refuses is a column of the opcode table
//! (`OpCode::refused_when_read_only`; docs/protocol.md, "Read-only mode").

use crate::{ConnId, Core, Counters, Serving};

/// One member's share of the server's numbers, for its own `srvr`/`mntr`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberSummary {
    /// Open connections on the member (not closing).
    pub connection_count: u64,
    /// Frames received on the member's connections since start or `srst`.
    pub packets_received: u64,
    /// Frames sent on the member's connections since start or `srst`.
    pub packets_sent: u64,
}

impl Core {
    /// The member a connection arrived on and how it served then.
    pub(crate) fn conn_serving(&self, conn: ConnId) -> Serving {
        self.conns
            .get(&conn)
            .map_or(Serving::ReadWrite, |c| c.serving)
    }

    /// Counts a frame received on `conn` against its member.
    pub(crate) fn count_member_received(&mut self, conn: ConnId) {
        if let Some(m) = self.conns.get(&conn).map(|c| c.member).filter(|m| *m != 0) {
            self.member_counters.entry(m).or_default().received += 1;
        }
    }

    /// Counts a frame sent on a connection of `member`.
    pub(crate) fn count_member_sent(&mut self, member: u64) {
        if member != 0 {
            self.member_counters.entry(member).or_default().sent += 1;
        }
    }

    /// `member`'s connections and packet counters.
    pub fn member_summary(&self, member: u64) -> MemberSummary {
        let counters = self
            .member_counters
            .get(&member)
            .cloned()
            .unwrap_or_else(Counters::default);
        MemberSummary {
            connection_count: self
                .conns
                .values()
                .filter(|c| c.member == member && !c.closing)
                .count() as u64,
            packets_received: counters.received,
            packets_sent: counters.sent,
        }
    }
}
