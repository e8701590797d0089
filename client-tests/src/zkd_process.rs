//! The zkd binary run as a child process with its admin listener, killed when dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

/// A child process, killed and reaped when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the workspace's zkd on free ports with the admin listener and `args`, its stderr
/// going to `stderr`; returns it with the client and admin addresses it prints.
pub fn start_with_admin(args: &[&str], stderr: Stdio) -> (Running, SocketAddr, SocketAddr) {
    let bin = crate::certs::zkd_binary().unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(bin)
        .args(["--port", "0", "--admin-port", "0", "--log", "warn"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("zkd starts");
    let stdout = child.stdout.take().expect("stdout");
    let running = Running(child);
    let mut lines = BufReader::new(stdout).lines();
    let mut addr = |prefix: &str| -> SocketAddr {
        let line = lines.next().expect("a line").expect("a line");
        line.strip_prefix(prefix)
            .unwrap_or_else(|| panic!("{line:?} does not start with {prefix:?}"))
            .parse()
            .expect("an address")
    };
    let client = addr("zkd listening on ");
    let admin = addr("zkd admin on ");
    (running, client, admin)
}
