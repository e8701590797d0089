//! Tests of the fail-closed policy: a panic in any core call poisons the core, drops every
//! connection, stops the listener and is reported by the embedding handle.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::engine::CoreFailed;
use crate::{Config, Server};

pub(super) const WAIT: Duration = Duration::from_secs(10);

/// A ConnectRequest frame for a new 30 s session.
fn connect_request() -> Vec<u8> {
    zkd_protocol::frame::record_frame(&zkd_protocol::ConnectRequest::new_session(30_000)).to_vec()
}

/// A server on a free port.
pub(super) async fn start() -> Server {
    Server::start(Config {
        port: 0,
        ..Config::default()
    })
    .await
    .expect("start")
}

pub(super) async fn session(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(&connect_request()).await.expect("send");
    let mut resp = [0u8; 41];
    tokio::time::timeout(WAIT, s.read_exact(&mut resp))
        .await
        .expect("ConnectResponse in time")
        .expect("ConnectResponse");
    s
}

/// A getData("/") request frame.
fn get_root(xid: i32) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&xid.to_be_bytes());
    p.extend_from_slice(&4i32.to_be_bytes());
    p.extend_from_slice(&1i32.to_be_bytes());
    p.push(b'/');
    p.push(0);
    let mut frame = (p.len() as i32).to_be_bytes().to_vec();
    frame.extend(p);
    frame
}

async fn assert_closed(mut s: TcpStream) {
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout(WAIT, s.read(&mut buf)).await {
            Err(_) => panic!("the connection stayed open"),
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn a_panic_in_a_core_call_closes_everything_and_is_reported() {
    let server = start().await;
    let addr = server.local_addr();
    let mut a = session(addr).await;
    let b = session(addr).await;
    // Served before the failure (the two sessions took zxids 1 and 2).
    a.write_all(&get_root(1)).await.expect("send");
    let mut reply = [0u8; 20];
    tokio::time::timeout(WAIT, a.read_exact(&mut reply))
        .await
        .expect("reply in time")
        .expect("reply");
    assert!(server.failure().is_none());

    let r = server
        .shared
        .with_core(|core, _| -> i64 { panic!("injected failure at zxid {}", core.last_zxid()) });
    assert_eq!(r, Err(CoreFailed));

    let failure = tokio::time::timeout(WAIT, server.failed())
        .await
        .expect("failed() resolves");
    assert_eq!(failure.message, "injected failure at zxid 2");
    assert_eq!(server.failure(), Some(failure.clone()));
    assert!(failure.to_string().contains("injected failure"));

    // Every connection is dropped, and the core is never entered again.
    assert_closed(a).await;
    assert_closed(b).await;
    let mut entered = false;
    assert_eq!(
        server.shared.with_core(|_, _| entered = true),
        Err(CoreFailed)
    );
    assert!(!entered);

    // The listener is gone.
    let mut refused = false;
    for _ in 0..200 {
        match TcpStream::connect(addr).await {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                refused = true;
                break;
            }
            Err(_) => {}
            Ok(s) => assert_closed(s).await,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        refused,
        "{addr} still accepts connections after the failure"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_healthy_server_reports_no_failure() {
    let server = start().await;
    let s = session(server.local_addr()).await;
    assert!(server.failure().is_none());
    assert!(
        tokio::time::timeout(Duration::from_millis(200), server.failed())
            .await
            .is_err(),
        "failed() resolved on a healthy server"
    );
    drop(s);
    server.shutdown().await;
}
