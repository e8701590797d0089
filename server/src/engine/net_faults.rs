//! Network faults on client connections: the rule table (blackhole, lost replies, added
//! latency; matched by connection, client address and ensemble member) and what each open
//! connection is under, kept in its queue for its task to read on every poll.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use super::ensemble::MemberId;
use super::{wake, CoreFailed, Registry, Shared, State};
use crate::core::ConnId;

/// Most network fault rules held at once, so memory stays bounded.
pub const MAX_NET_FAULTS: usize = 1024;
/// Longest latency one rule adds each way: an hour.
pub const MAX_LATENCY_MS: u64 = 3_600_000;

/// What a network fault does to the connections it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetFault {
    /// Nothing is read and nothing is written, and nothing closes: the client notices only
    /// through its own timeout, and its session expires by the server's clock unless it
    /// reaches another member in time. Removing the fault closes the connection.
    Blackhole,
    /// Requests arrive and are applied; replies and notifications vanish (one-way loss).
    /// Removing the fault closes the connection (its client is missing replies).
    DropReplies,
    /// Every request is fed to the server this many ms (on the session clock) after it
    /// arrived, and every reply and notification is written this many ms after it was sent.
    Latency(u64),
}

impl NetFault {
    /// The name the admin API and `zkd ctl` use.
    pub fn name(self) -> &'static str {
        match self {
            NetFault::Blackhole => "blackhole",
            NetFault::DropReplies => "drop-replies",
            NetFault::Latency(_) => "latency",
        }
    }
}

/// Which clients a rule matches by address: every connection from an IP, or one
/// connection by its IP and port (as `zkd ctl sessions` shows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAddr {
    Ip(IpAddr),
    Socket(SocketAddr),
}

impl ClientAddr {
    fn matches(self, peer: SocketAddr) -> bool {
        match self {
            ClientAddr::Ip(ip) => peer.ip() == ip,
            ClientAddr::Socket(addr) => peer == addr,
        }
    }
}

impl FromStr for ClientAddr {
    type Err = String;

    /// `127.0.0.1`, `::1`, `127.0.0.1:51234` or `[::1]:51234`.
    fn from_str(text: &str) -> Result<ClientAddr, String> {
        let t = text.trim();
        if let Ok(ip) = t.parse::<IpAddr>() {
            return Ok(ClientAddr::Ip(ip));
        }
        t.parse::<SocketAddr>()
            .map(ClientAddr::Socket)
            .map_err(|_| {
                format!(
                "client {text:?} is not an IP address (127.0.0.1, ::1) or an IP address with a \
                 port (127.0.0.1:51234, [::1]:51234)"
            )
            })
    }
}

impl fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientAddr::Ip(ip) => ip.fmt(f),
            ClientAddr::Socket(addr) => addr.fmt(f),
        }
    }
}

/// A network fault rule. Its criteria must all hold; unset ones match anything, so a rule
/// with none matches every client connection of the server (of every member).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetFaultRule {
    pub fault: NetFault,
    /// The connection this session has when the rule is added (that one connection only:
    /// when the client reconnects, its new connection is not matched).
    pub session: Option<i64>,
    /// Connections from this client address.
    pub client: Option<ClientAddr>,
    /// Connections to this ensemble member.
    pub member: Option<MemberId>,
}

impl NetFaultRule {
    /// Why the rule cannot be taken, if it cannot.
    pub(crate) fn check(&self) -> Result<(), String> {
        match self.fault {
            NetFault::Latency(0) => {
                Err("latency 0 ms would change nothing; give ms of at least 1".into())
            }
            NetFault::Latency(ms) if ms > MAX_LATENCY_MS => Err(format!(
                "latency {ms} ms is more than the most a rule adds, {MAX_LATENCY_MS} ms (an hour)"
            )),
            _ => Ok(()),
        }
    }
}

/// A rule as reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetFaultStatus {
    pub id: u64,
    pub rule: NetFaultRule,
    /// For a rule naming a session: the client address of the connection it holds.
    pub connection: Option<SocketAddr>,
    /// Open connections the rule matches now.
    pub connections: usize,
}

/// One rule in the table.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) id: u64,
    pub(crate) rule: NetFaultRule,
    /// The connection a session rule holds, and its client's address.
    pub(crate) conn: Option<(ConnId, SocketAddr)>,
}

impl Entry {
    pub(crate) fn matches(&self, conn: ConnId, peer: SocketAddr, member: MemberId) -> bool {
        self.conn.is_none_or(|(c, _)| c == conn)
            && self.rule.client.is_none_or(|a| a.matches(peer))
            && self.rule.member.is_none_or(|m| m == member)
    }
}

/// The rule table.
#[derive(Debug, Default)]
pub(crate) struct NetFaults {
    entries: Vec<Entry>,
    next_id: u64,
}

impl NetFaults {
    /// Adds a rule (`conn`: the connection a session rule holds); its id, or why not.
    pub(crate) fn add(
        &mut self,
        rule: NetFaultRule,
        conn: Option<(ConnId, SocketAddr)>,
    ) -> Result<Entry, String> {
        rule.check()?;
        if self.entries.len() >= MAX_NET_FAULTS {
            return Err(format!(
                "there are already {MAX_NET_FAULTS} network fault rules; remove some first"
            ));
        }
        self.next_id += 1;
        let entry = Entry {
            id: self.next_id,
            rule,
            conn,
        };
        self.entries.push(entry.clone());
        Ok(entry)
    }

    /// Removes one rule; `None` if there is none with that id.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Entry> {
        let at = self.entries.iter().position(|e| e.id == id)?;
        Some(self.entries.remove(at))
    }

    /// Removes every rule; returns them.
    pub(crate) fn clear(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.entries)
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// What a connection is under: every matching rule counts (a blackhole or lost replies
    /// if any says so; the latencies of all add up).
    pub(crate) fn for_conn(&self, conn: ConnId, peer: SocketAddr, member: MemberId) -> ConnFault {
        let mut f = ConnFault::default();
        for e in self
            .entries
            .iter()
            .filter(|e| e.matches(conn, peer, member))
        {
            match e.rule.fault {
                NetFault::Blackhole => f.blackhole = true,
                NetFault::DropReplies => f.drop_replies = true,
                NetFault::Latency(ms) => {
                    f.latency_ms = f.latency_ms.saturating_add(ms).min(LATENCY_MASK)
                }
            }
        }
        f
    }
}

/// Low bits of the packed form hold the latency.
const LATENCY_MASK: u64 = (1 << 60) - 1;
const BLACKHOLE_BIT: u64 = 1 << 63;
const DROP_BIT: u64 = 1 << 62;

/// What one connection is under, packed into one word in its queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ConnFault {
    pub(crate) blackhole: bool,
    pub(crate) drop_replies: bool,
    /// Added each way, on the session clock.
    pub(crate) latency_ms: u64,
}

impl ConnFault {
    pub(crate) fn pack(self) -> u64 {
        (self.latency_ms & LATENCY_MASK)
            | if self.blackhole { BLACKHOLE_BIT } else { 0 }
            | if self.drop_replies { DROP_BIT } else { 0 }
    }

    pub(crate) fn unpack(word: u64) -> ConnFault {
        ConnFault {
            blackhole: word & BLACKHOLE_BIT != 0,
            drop_replies: word & DROP_BIT != 0,
            latency_ms: word & LATENCY_MASK,
        }
    }

    /// Whatever the connection sends vanishes.
    pub(crate) fn silences(self) -> bool {
        self.blackhole || self.drop_replies
    }
}

/// Which connections a change of the table may concern.
pub(crate) enum Touched {
    /// Those these rules (added or removed) match.
    Entries(Vec<Entry>),
    /// Every connection.
    All,
}

impl Shared {
    /// Runs `change` on the state (the table), then puts every open connection it touched
    /// under what the table now says, and closes those a blackhole or lost replies no
    /// longer hold (their client gave up on them, or is missing replies): all in one hold
    /// of the core's lock, so nothing is written on such a connection before its close.
    pub(crate) fn change_net_faults<R, E>(
        &self,
        change: impl FnOnce(&mut State) -> Result<(R, Touched), E>,
    ) -> Result<Result<R, E>, CoreFailed> {
        let budget = &self.outbound;
        let durable = self.durability.get().map(|d| &**d);
        let mut wakers = Vec::new();
        let r = self.with_state(|state| {
            let (r, touched) = change(state)?;
            let State {
                core,
                conns,
                net_faults,
                held,
                history,
                ..
            } = state;
            let mut close = Vec::new();
            for (&id, h) in conns.iter() {
                let concerned = match &touched {
                    Touched::All => true,
                    Touched::Entries(es) => es.iter().any(|e| e.matches(id, h.peer, h.member)),
                };
                if h.closing || !concerned {
                    continue;
                }
                let now = net_faults.for_conn(id, h.peer, h.member);
                let before = h.q.net_fault();
                if now == before {
                    continue;
                }
                wakers.extend(h.q.set_net_fault(now));
                if before.silences() && !now.silences() {
                    close.push(id);
                }
            }
            if !close.is_empty() {
                close.sort_unstable();
                for id in &close {
                    if let Some(h) = conns.get_mut(id) {
                        h.why.get_or_insert(super::history::CloseWhy::Fault);
                    }
                }
                let mut out =
                    Registry::new(conns, budget, durable, &mut wakers, held, Some(history));
                let closed = core.disconnect_connections(&close, &mut out);
                tracing::info!(
                    closed,
                    "closed the connections a removed network fault had silenced"
                );
            }
            Ok(r)
        });
        wake(&mut wakers);
        r
    }
}

/// Open connections each rule matches now.
pub(crate) fn matched_counts(state: &State) -> Vec<usize> {
    state
        .net_faults
        .entries
        .iter()
        .map(|e| {
            state
                .conns
                .iter()
                .filter(|(&id, h)| !h.closing && e.matches(id, h.peer, h.member))
                .count()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    fn rule(fault: NetFault) -> NetFaultRule {
        NetFaultRule {
            fault,
            session: None,
            client: None,
            member: None,
        }
    }

    #[test]
    fn client_addresses_parse_as_ip_or_ip_and_port() {
        assert_eq!(
            "127.0.0.1".parse::<ClientAddr>(),
            Ok(ClientAddr::Ip("127.0.0.1".parse().expect("ip")))
        );
        assert_eq!(
            " [::1]:5 ".parse::<ClientAddr>(),
            Ok(ClientAddr::Socket(addr("[::1]:5")))
        );
        assert_eq!(
            "::1".parse::<ClientAddr>().map(|a| a.to_string()),
            Ok("::1".to_string())
        );
        for bad in ["", "localhost", "1.2.3.4:", "1.2.3.4:99999", "1.2.3"] {
            let e = bad.parse::<ClientAddr>().expect_err(bad);
            assert!(e.contains("is not an IP address"), "{bad}: {e}");
        }
    }

    #[test]
    fn rules_match_on_every_criterion_they_set() {
        let mut t = NetFaults::default();
        let peer = addr("10.0.0.1:4000");
        let other = addr("10.0.0.2:4000");
        let by_member = NetFaultRule {
            member: Some(2),
            ..rule(NetFault::Blackhole)
        };
        let e = t.add(by_member, None).expect("added");
        assert!(e.matches(7, peer, 2));
        assert!(!e.matches(7, peer, 1));
        let by_ip_on_3 = NetFaultRule {
            client: Some(ClientAddr::Ip(peer.ip())),
            member: Some(3),
            ..rule(NetFault::DropReplies)
        };
        let e = t.add(by_ip_on_3, None).expect("added");
        assert!(e.matches(1, peer, 3));
        assert!(!e.matches(1, other, 3));
        assert!(!e.matches(1, peer, 2));
        let by_conn = NetFaultRule {
            session: Some(0x100),
            ..rule(NetFault::Latency(5))
        };
        let e = t.add(by_conn, Some((9, peer))).expect("added");
        assert!(e.matches(9, peer, 1));
        assert!(
            !e.matches(10, peer, 1),
            "a reconnection is another connection"
        );
        let one_port = NetFaultRule {
            client: Some(ClientAddr::Socket(peer)),
            ..rule(NetFault::Latency(7))
        };
        let e = t.add(one_port, None).expect("added");
        assert!(e.matches(1, peer, 1));
        assert!(!e.matches(1, addr("10.0.0.1:4001"), 1));
    }

    #[test]
    fn a_connection_is_under_every_rule_that_matches_it() {
        let mut t = NetFaults::default();
        let peer = addr("10.0.0.1:4000");
        assert_eq!(t.for_conn(1, peer, 1), ConnFault::default());
        t.add(rule(NetFault::Latency(100)), None).expect("added");
        let on_2 = NetFaultRule {
            member: Some(2),
            ..rule(NetFault::Latency(50))
        };
        let on_2 = t.add(on_2, None).expect("added").id;
        assert_eq!(t.for_conn(1, peer, 1).latency_ms, 100);
        assert_eq!(t.for_conn(1, peer, 2).latency_ms, 150, "latencies add up");
        let hole = NetFaultRule {
            member: Some(2),
            ..rule(NetFault::Blackhole)
        };
        t.add(hole, None).expect("added");
        let f = t.for_conn(1, peer, 2);
        assert!(f.blackhole && !f.drop_replies && f.silences());
        assert!(!t.for_conn(1, peer, 3).silences());
        assert!(t.remove(on_2).is_some());
        assert!(t.remove(on_2).is_none(), "removed once");
        assert_eq!(t.for_conn(1, peer, 2).latency_ms, 100);
        assert_eq!(t.clear().len(), 2);
        assert_eq!(t.for_conn(1, peer, 2), ConnFault::default());
    }

    #[test]
    fn the_table_is_capped_and_refuses_useless_latencies() {
        let mut t = NetFaults::default();
        for _ in 0..MAX_NET_FAULTS {
            t.add(rule(NetFault::DropReplies), None).expect("room");
        }
        let e = t.add(rule(NetFault::Blackhole), None).expect_err("full");
        assert!(e.contains("already 1024"), "{e}");
        let mut t = NetFaults::default();
        let e = t.add(rule(NetFault::Latency(0)), None).expect_err("zero");
        assert!(e.contains("would change nothing"), "{e}");
        let e = t
            .add(rule(NetFault::Latency(MAX_LATENCY_MS + 1)), None)
            .expect_err("too long");
        assert!(e.contains("an hour"), "{e}");
        assert!(t.add(rule(NetFault::Latency(MAX_LATENCY_MS)), None).is_ok());
    }

    #[test]
    fn a_connections_fault_packs_into_one_word() {
        for f in [
            ConnFault::default(),
            ConnFault {
                blackhole: true,
                drop_replies: false,
                latency_ms: 0,
            },
            ConnFault {
                blackhole: false,
                drop_replies: true,
                latency_ms: MAX_LATENCY_MS * 3,
            },
            ConnFault {
                blackhole: true,
                drop_replies: true,
                latency_ms: 1,
            },
        ] {
            assert_eq!(ConnFault::unpack(f.pack()), f);
        }
    }
}
