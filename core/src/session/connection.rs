//! Per-connection state the core keeps: session binding, identities, and the counters the
//! `cons` four-letter word shows.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use zkd_protocol::Id;

/// How the member a connection arrived on serves clients (always `ReadWrite` on a
/// standalone server). Fixed for the connection's lifetime: a member whose mode changes
/// drops its connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Serving {
    /// Reads and writes (a leader or follower with quorum, or a standalone server).
    #[default]
    ReadWrite,
    /// Quorum lost, read-only mode on: only clients whose handshake asks for read-only
    /// mode are admitted, and every write is answered NOTREADONLY.
    ReadOnly,
    /// Quorum lost, read-only mode off: four-letter words are answered, handshakes are not.
    NotServing,
}

#[derive(Debug)]
pub struct Conn {
    pub remote: SocketAddr,
    /// The ensemble member the connection arrived on (0 on a standalone server).
    pub member: u64,
    /// How that member served when the connection was accepted.
    pub serving: Serving,
    pub session: Option<i64>,
    /// Identities: `ip:<addr>` from accept, plus whatever addauth added.
    pub ids: Arc<Vec<Id>>,
    /// Whether the client sent the readOnly byte (and so expects it back).
    pub read_only_byte: Option<bool>,
    pub established_ms: i64,
    pub received: u64,
    pub sent: u64,
    pub last_op: &'static str,
    pub last_cxid: i32,
    pub last_zxid: i64,
    pub last_response_ms: i64,
    /// Set once the core asked the outbox to close this connection.
    pub closing: bool,
    /// The SASL exchange, once the client started one.
    pub sasl: Option<crate::auth::digest_md5::DigestMd5>,
}

impl Conn {
    /// A connection from `remote` with identities `ids` (see [`ip_ids`]).
    pub fn new(remote: SocketAddr, ids: Arc<Vec<Id>>, now_ms: i64) -> Conn {
        Conn {
            remote,
            member: 0,
            serving: Serving::ReadWrite,
            session: None,
            ids,
            read_only_byte: None,
            established_ms: now_ms,
            received: 0,
            sent: 0,
            last_op: "NA",
            last_cxid: -1,
            last_zxid: -1,
            last_response_ms: 0,
            closing: false,
            sasl: None,
        }
    }
}

/// The identities of a new connection from `ip`: `ip:<addr>`.
pub fn ip_ids(ip: IpAddr) -> Arc<Vec<Id>> {
    Arc::new(vec![Id {
        scheme: "ip".into(),
        id: java_ip_text(ip),
    }])
}

/// An address as Java prints it: IPv6 fully expanded without zero compression.
pub fn java_ip_text(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6
                .segments()
                .iter()
                .map(|s| format!("{s:x}"))
                .collect::<Vec<_>>()
                .join(":"),
        },
    }
}
