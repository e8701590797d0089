//! Tests of the server-wide outbound count with real connections: a child list queued on
//! many connections counts once, distinct bytes past the cap still drop connections, and
//! the count returns to 0 whichever way the queues are emptied.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkd_protocol::frame::encode_frame;
use zkd_protocol::jute::Jute;
use zkd_protocol::records::{Acl, CreateRequest, PathWatchRequest, RequestHeader, SetDataRequest};

use super::fail_closed::{session, WAIT};
use crate::{Config, Server};

const CAP: usize = 4 << 20;

pub(super) fn request<T: Jute>(xid: i32, op: i32, rec: &T) -> Bytes {
    encode_frame(|out| {
        RequestHeader { xid, op }.write(out);
        rec.write(out);
    })
}

pub(super) fn create(xid: i32, path: String, data: Vec<u8>) -> Bytes {
    let rec = CreateRequest {
        path,
        data: Some(data.into()),
        acl: Acl::open_unsafe(),
        flags: 0,
    };
    request(xid, 1, &rec)
}

pub(super) fn set_data(xid: i32, path: &str, data: &[u8]) -> Bytes {
    let rec = SetDataRequest {
        path: path.into(),
        data: Some(Bytes::copy_from_slice(data)),
        version: -1,
    };
    request(xid, 5, &rec)
}

pub(super) fn read_op(xid: i32, op: i32, path: &str) -> Bytes {
    let rec = PathWatchRequest {
        path: path.to_string(),
        watch: false,
    };
    request(xid, op, &rec)
}

/// Reads one reply's payload; `None` once the server closed the connection.
pub(super) async fn payload(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    tokio::time::timeout(WAIT, s.read_exact(&mut len))
        .await
        .expect("reply or close in time")
        .ok()?;
    let mut payload = vec![0u8; usize::try_from(i32::from_be_bytes(len)).ok()?];
    tokio::time::timeout(WAIT, s.read_exact(&mut payload))
        .await
        .expect("reply or close in time")
        .ok()?;
    Some(payload)
}

/// Reads one reply; `None` once the server closed the connection. Returns (err, length).
pub(super) async fn reply(s: &mut TcpStream) -> Option<(i32, usize)> {
    let payload = payload(s).await?;
    Some((
        i32::from_be_bytes(payload.get(12..16)?.try_into().ok()?),
        payload.len(),
    ))
}

/// Sends `n` pipelined copies of the read `op` of `path` on each of `conns` new sessions.
async fn readers(server: &Server, conns: usize, n: i32, op: i32, path: &str) -> Vec<TcpStream> {
    let mut pipeline = Vec::new();
    for xid in 1..=n {
        pipeline.extend_from_slice(&read_op(xid, op, path));
    }
    let mut out = Vec::new();
    for _ in 0..conns {
        let mut s = session(server.local_addr()).await;
        s.write_all(&pipeline).await.expect("pipelined reads");
        out.push(s);
    }
    out
}

/// Replies each connection gets before it ends or `n` arrived, all `want_len` long and OK.
async fn read_all(conns: &mut [TcpStream], n: usize, want_len: usize) -> Vec<usize> {
    let mut got = Vec::new();
    for s in conns {
        let mut k = 0;
        while k < n {
            match reply(s).await {
                Some((err, len)) => {
                    assert_eq!((err, len), (0, want_len), "reply {k}");
                    k += 1;
                }
                None => break,
            }
        }
        got.push(k);
    }
    got
}

/// Bytes all connections owe, and the server-wide count.
fn owed_and_total(server: &Server) -> (usize, usize) {
    let owed = server
        .shared
        .with_state(|s| s.conns.values().map(|h| h.queued()).sum())
        .unwrap_or(0);
    (owed, server.shared.outbound.total())
}

async fn wait_for_zero(server: &Server) {
    for _ in 0..1000 {
        if server.shared.outbound.total() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "the server-wide count stayed at {}",
        server.shared.outbound.total()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_child_list_counts_once_and_distinct_bytes_still_hit_the_cap() {
    let server = Server::start(Config {
        port: 0,
        max_total_outbound_bytes: CAP,
        ..Config::default()
    })
    .await
    .expect("start");
    let mut owner = session(server.local_addr()).await;
    // 1800 children with 90-byte names: a child list of about 170 KB.
    const CHILDREN: i32 = 1800;
    let mut creates = create(1, "/list".into(), Vec::new()).to_vec();
    for i in 0..CHILDREN {
        creates.extend_from_slice(&create(i + 2, format!("/list/{i:090}"), Vec::new()));
    }
    creates.extend_from_slice(&create(CHILDREN + 2, "/big".into(), vec![b'b'; 900_000]));
    owner.write_all(&creates).await.expect("creates");
    for _ in 0..CHILDREN + 2 {
        assert_eq!(reply(&mut owner).await.map(|r| r.0), Some(0));
    }
    owner
        .write_all(&read_op(1, 8, "/list"))
        .await
        .expect("getChildren");
    let (err, list_len) = reply(&mut owner).await.expect("list");
    assert!(err == 0 && list_len > 160_000, "{list_len}");

    // 40 sessions each read the list 40 times at once: about 270 MB owed, one list held.
    const CONNS: usize = 40;
    const READS: i32 = 40;
    let mut shared = readers(&server, CONNS, READS, 8, "/list").await;
    let mut peak = (0, 0);
    for _ in 0..300 {
        let now = owed_and_total(&server);
        peak = (peak.0.max(now.0), peak.1.max(now.1));
        if peak.0 > 8 * CAP {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(peak.0 > 8 * CAP, "queues never held much: {peak:?}");
    assert!(
        peak.1 < CAP,
        "the list was counted more than once: {peak:?}"
    );
    // Half read everything (none was dropped); the others leave with replies still queued.
    let got = read_all(&mut shared[..CONNS / 2], READS as usize, list_len).await;
    assert_eq!(
        got,
        vec![READS as usize; CONNS / 2],
        "a reading session was dropped"
    );
    let owed = owed_and_total(&server);
    assert!(owed.0 > 0, "the leaving sessions still owe: {owed:?}");
    drop(shared);
    wait_for_zero(&server).await;

    // Distinct bytes: 8 sessions each read a 900 KB node 20 times; past the cap some go.
    let mut distinct = readers(&server, 8, 20, 4, "/big").await;
    let got = read_all(&mut distinct, 20, 900_000 + 4 + 68 + 16).await;
    assert!(
        got.iter().any(|&k| k < 20),
        "no session was dropped by the cap: {got:?}"
    );
    drop(distinct);
    wait_for_zero(&server).await;
    // The owner is still served.
    owner
        .write_all(&read_op(2, 8, "/list"))
        .await
        .expect("getChildren");
    assert_eq!(reply(&mut owner).await, Some((0, list_len)));
}
