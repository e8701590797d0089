//! What the tests of the `zkd` binary share: starting it, reading the lines it prints once
//! it listens, the request frames they send it, and running a helper command to its end.
// Each test binary that includes this module uses only part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Output, Stdio};

/// Starts the `zkd` binary with `args` (standard output piped, standard error to `stderr`)
/// and waits for its `zkd listening on` line: the child, the rest of its output and the
/// client address.
pub fn start_zkd(args: &[&str], stderr: Stdio) -> (Child, BufReader<ChildStdout>, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkd"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("zkd runs");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let addr = listening_addr(&mut out);
    (child, out, addr)
}

/// Reads the next line of the server's output and returns what follows `prefix` on it;
/// panics naming the line when it says something else.
pub fn announced(out: &mut impl BufRead, prefix: &str) -> String {
    let mut line = String::new();
    out.read_line(&mut line)
        .unwrap_or_else(|e| panic!("reading the {prefix:?} line: {e}"));
    match line.trim().strip_prefix(prefix) {
        Some(rest) => rest.to_string(),
        None => panic!("unexpected line {line:?}, wanted {prefix:?}"),
    }
}

/// The client address of the `zkd listening on HOST:PORT` line.
pub fn listening_addr(out: &mut impl BufRead) -> SocketAddr {
    announced(out, "zkd listening on ")
        .parse()
        .expect("address")
}

/// A ConnectRequest frame for a new session of `timeout_ms`, without the readOnly byte (the
/// 44-byte form older clients send, so the ConnectResponse is 36 bytes).
pub fn connect_request(timeout_ms: i32) -> Vec<u8> {
    let request = zkd_protocol::ConnectRequest {
        read_only: None,
        ..zkd_protocol::ConnectRequest::new_session(timeout_ms)
    };
    zkd_protocol::frame::record_frame(&request).to_vec()
}

/// A create request frame for a persistent node holding `data`, with the open ACL.
pub fn create(xid: i32, path: &str, data: &[u8]) -> Vec<u8> {
    let data = Some(bytes::Bytes::copy_from_slice(data));
    zkd_testkit::raw::create(path, data, 0)
        .to_frame(xid)
        .to_vec()
}

/// Runs `cmd` to its end; fails with `what` and the command's standard error unless it exits
/// 0.
pub fn succeeds(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run it: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
