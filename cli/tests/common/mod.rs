//! What the tests of the `zkd` binary share: reading the lines it prints once it listens.

use std::io::BufRead;
use std::net::SocketAddr;

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
