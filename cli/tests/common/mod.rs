//! What the tests of the `zkd` binary share: starting it and reading the lines it prints
//! once it listens.
// Each test binary that includes this module uses only part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};

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
