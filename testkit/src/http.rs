//! A raw HTTP/1.1 GET over a blocking socket, for tests that read the admin listener's answer
//! byte for byte (status lines, chunked bodies) or name a `Host` of their own.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Connects to `addr`, sends `GET path` with the given `Host` and `Connection: close`, and
/// returns the socket to read the answer from (reads time out after `timeout`). Panics when
/// the connection or the request fails.
pub fn send_get(addr: SocketAddr, path: &str, host: &str, timeout: Duration) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(timeout)).expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    s
}
