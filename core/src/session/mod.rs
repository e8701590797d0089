//! Sessions and the connections bound to them: the session table (ids, passwords, timeouts,
//! expiry) and the per-connection state (identities, counters).

pub(crate) mod connection;
pub(crate) mod handshake;
pub(crate) mod sessions;
