//! Embedding: several servers in one test process on port 0, each independent; dropping or
//! shutting down a handle closes its port and its connections.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkd_server::{Config, Server};
use zkd_testkit::frame::connect_request;

const WAIT: Duration = Duration::from_secs(5);

fn port_zero() -> Config {
    Config {
        port: 0,
        ..Config::default()
    }
}

/// Connects and completes a handshake; returns the open socket and the session id.
async fn handshake(addr: SocketAddr) -> (TcpStream, i64) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(&connect_request(30_000))
        .await
        .expect("send ConnectRequest");
    let mut resp = [0u8; 41];
    tokio::time::timeout(WAIT, s.read_exact(&mut resp))
        .await
        .expect("ConnectResponse in time")
        .expect("ConnectResponse");
    assert_eq!(i32::from_be_bytes(resp[0..4].try_into().expect("4")), 37);
    assert_eq!(
        i32::from_be_bytes(resp[8..12].try_into().expect("4")),
        30_000
    );
    let session = i64::from_be_bytes(resp[12..20].try_into().expect("8"));
    assert_ne!(session, 0);
    (s, session)
}

/// Waits until connecting to `addr` is refused.
async fn assert_refused_soon(addr: SocketAddr) {
    for _ in 0..100 {
        match TcpStream::connect(addr).await {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => return,
            // Caught in the backlog of a listener being closed.
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Err(e) => panic!("unexpected connect error: {e}"),
            Ok(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{addr} still accepts connections");
}

/// Waits until the server ends `s` (EOF or reset).
async fn assert_closed(mut s: TcpStream) {
    // Whatever was still sent is read; the read ends at EOF or with an error (a reset).
    let mut rest = Vec::new();
    let read = tokio::time::timeout(WAIT, s.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the connection stayed open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_servers_in_one_process() {
    let a = Server::start(port_zero()).await.expect("server a");
    let b = Server::start(port_zero()).await.expect("server b");
    let c = Server::start(port_zero()).await.expect("server c");
    let (a_addr, b_addr, c_addr) = (a.local_addr(), b.local_addr(), c.local_addr());
    assert_ne!(a_addr.port(), 0);
    assert!(a_addr.port() != b_addr.port() && b_addr.port() != c_addr.port());
    assert!(a_addr.ip().is_loopback());

    // Each works, independently: fresh session ids from each.
    let (_sa, _) = handshake(a_addr).await;
    let (sb, _) = handshake(b_addr).await;
    let (sc, _) = handshake(c_addr).await;

    // Dropping b closes its port and its connections.
    drop(b);
    assert_refused_soon(b_addr).await;
    assert_closed(sb).await;

    // shutdown() returns once c is fully stopped.
    c.shutdown().await;
    match TcpStream::connect(c_addr).await {
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionRefused),
        Ok(_) => panic!("{c_addr} still accepts connections after shutdown"),
    }
    assert_closed(sc).await;

    // a is unaffected.
    let (_sa2, _) = handshake(a_addr).await;
    a.shutdown().await;
    assert_refused_soon(a_addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_port_is_an_error() {
    let a = Server::start(port_zero()).await.expect("server a");
    let config = Config {
        port: a.local_addr().port(),
        ..Config::default()
    };
    match Server::start(config).await {
        Err(e) => assert_eq!(e.kind(), ErrorKind::AddrInUse),
        Ok(_) => panic!("two servers bound the same port"),
    }
    let (_s, _) = handshake(a.local_addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inconsistent_config_is_rejected() {
    let config = Config {
        min_session_timeout: Some(Duration::from_secs(60)),
        max_session_timeout: Some(Duration::from_secs(10)),
        ..port_zero()
    };
    match Server::start(config).await {
        Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidInput),
        Ok(_) => panic!("min > max session timeout was accepted"),
    }
}

#[tokio::test]
async fn works_on_a_current_thread_runtime_too() {
    let server = Server::start(port_zero()).await.expect("server");
    let (s, _) = handshake(server.local_addr()).await;
    let addr = server.local_addr();
    server.shutdown().await;
    assert_closed(s).await;
    assert_refused_soon(addr).await;
}
