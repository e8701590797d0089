//! The per-address connection limit of the `zkd` binary (`--max-client-cnxns`): a connection
//! over the limit is closed at once, and the server logs exactly one warning for it, naming
//! the address and the limit, so a client that sees its connection end can find out why.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

mod common;

/// Opens a connection the server must refuse and waits until the server has closed it.
fn refused(addr: SocketAddr) {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut buf = [0u8; 16];
    match c.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("a connection over the limit is closed at once, got {other:?}"),
    }
}

#[test]
fn a_refused_connection_is_logged_once_with_address_and_limit() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkd"))
        .args(["--port", "0", "--log", "warn", "--max-client-cnxns", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zkd runs");
    let addr = common::listening_addr(&mut BufReader::new(child.stdout.take().expect("stdout")));
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let refusal = |line: &str| line.contains("refusing connection");

    // Two connections are within the limit; the server accepts in order, so the third is
    // the first over it.
    let _a = TcpStream::connect(addr).expect("first connection");
    let _b = TcpStream::connect(addr).expect("second connection");
    refused(addr);
    let line = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a warning for the refused connection");
        if refusal(&line) {
            break line;
        }
    };
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("127.0.0.1"), "names the address: {line}");
    assert!(line.contains("limit=2"), "names the limit: {line}");
    assert!(
        line.contains("--max-client-cnxns"),
        "names the setting: {line}"
    );

    // A second refusal, then everything the server logged until it stops: one warning each.
    refused(addr);
    let _ = child.kill();
    let _ = child.wait();
    reader.join().expect("stderr reader");
    let more: Vec<String> = rx.try_iter().filter(|l| refusal(l)).collect();
    assert_eq!(
        more.len(),
        1,
        "one warning per refused connection: {more:?}"
    );
}
