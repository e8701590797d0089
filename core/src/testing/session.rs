//! Opening a session in an embedded core, for the tests and benchmarks that drive a [`Core`]
//! directly (feature `test-support`).

use std::net::SocketAddr;

use bytes::Bytes;
use zkd_protocol::ConnectRequest;

use crate::{ConnId, Core, Handshake, Outbox};

/// Opens a connection from loopback port `port` and hands it a handshake asking for a new
/// session of `timeout_ms`; returns the connection and what became of the handshake.
pub fn open_test_session(
    core: &mut Core,
    port: u16,
    timeout_ms: i32,
    now: i64,
    out: &mut dyn Outbox,
) -> (ConnId, Handshake) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let c = core
        .open_connection(addr, now)
        .expect("a loopback connection is accepted");
    let req = ConnectRequest {
        timeout: timeout_ms,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: Some(false),
        ..Default::default()
    };
    let hs = core.handshake(c, zkd_protocol::to_bytes(&req), now, out);
    (c, hs)
}
