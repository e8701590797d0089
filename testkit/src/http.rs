//! HTTP for tests: a call answered with its status and body text whatever the status (the
//! admin listener, a stand-in serving its routes, a WebDriver), and a raw HTTP/1.1 GET over a
//! blocking socket, for tests that read the admin listener's answer byte for byte (status
//! lines, chunked bodies) or name a `Host` of their own.

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

/// How long a call may take before it is given up.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Sends `method` (GET, DELETE or POST) to `url`; a POST carries `json` as its body when
/// given (as `application/json`), else none. Returns the status and the body's text (empty
/// when it cannot be read), or `"{method} {url}: {why}"` when no answer came. Blocks: call it
/// from `tokio::task::spawn_blocking` in async tests.
pub fn call(url: &str, method: &str, json: Option<&str>) -> Result<(u16, String), String> {
    call_within(url, method, json, TIMEOUT)
}

/// [`call`], given up after `timeout` instead.
pub fn call_within(
    url: &str,
    method: &str,
    json: Option<&str>,
    timeout: Duration,
) -> Result<(u16, String), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into();
    let response = match (method, json) {
        ("GET", _) => agent.get(url).call(),
        ("DELETE", _) => agent.delete(url).call(),
        (_, Some(body)) => agent
            .post(url)
            .header("content-type", "application/json")
            .send(body.as_bytes()),
        (_, None) => agent.post(url).send_empty(),
    };
    let mut response = response.map_err(|e| format!("{method} {url}: {e}"))?;
    let status = response.status().as_u16();
    Ok((
        status,
        response.body_mut().read_to_string().unwrap_or_default(),
    ))
}
