//! Tests of a connection whose client stops reading: once its queue passes
//! `--max-outbound-bytes` the connection is dropped (its registration and queued bytes gone)
//! while its writes are blocked, without waiting for the client to read again.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::fail_closed::{session, WAIT};
use super::shared_body::{create, read_op, reply};
use crate::{Config, Server};

/// Connections in the server's registry.
fn open_connections(server: &Server) -> usize {
    server.shared.with_state(|s| s.conns.len()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_dropped_without_reading_again() {
    let server = Server::start(Config {
        port: 0,
        max_outbound_bytes: 256 * 1024,
        ..Config::default()
    })
    .await
    .expect("start");
    let mut owner = session(server.local_addr()).await;
    owner
        .write_all(&create(1, "/big".into(), vec![b'z'; 100 * 1024]))
        .await
        .expect("create");
    assert_eq!(reply(&mut owner).await.map(|r| r.0), Some(0));

    // 600 reads of 100 KiB, far more than the socket buffers hold; no reply is read.
    let mut slow = session(server.local_addr()).await;
    let mut burst = Vec::new();
    for xid in 1..=600 {
        burst.extend_from_slice(&read_op(xid, 4, "/big"));
    }
    slow.write_all(&burst).await.expect("pipelined reads");
    let mut left = false;
    for _ in 0..(WAIT.as_millis() / 10) {
        if open_connections(&server) == 1 {
            left = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        left,
        "the connection that does not read is still registered"
    );
    assert_eq!(server.shared.outbound.total(), 0, "its queue was let go of");

    // The client reads what was written before the drop, then the end.
    let mut sink = vec![0u8; 64 * 1024];
    let mut received = 0;
    loop {
        match tokio::time::timeout(WAIT, slow.read(&mut sink)).await {
            Err(_) => panic!("the dropped connection stayed open"),
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => received += n,
        }
    }
    assert!(received < 600 * 100 * 1024, "{received} bytes arrived");
    // The owner is still served.
    owner
        .write_all(&read_op(2, 4, "/big"))
        .await
        .expect("getData");
    assert_eq!(reply(&mut owner).await.map(|r| r.0), Some(0));
}
