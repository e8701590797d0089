//! Tests of how requests reach the core from many threads at once: every connection's
//! requests are answered in the order sent, the core gives every write its own zxid in one
//! total order, and the good requests before a corrupt frame are applied before the close.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::fail_closed::{session, start, WAIT};
use super::shared_body::create;

/// Reads one reply: (xid, zxid, err); `None` once the server closed the connection.
async fn header(s: &mut TcpStream) -> Option<(i32, i64, i32)> {
    let p = super::shared_body::payload(s).await?;
    Some((
        i32::from_be_bytes(p.get(0..4)?.try_into().ok()?),
        i64::from_be_bytes(p.get(4..12)?.try_into().ok()?),
        i32::from_be_bytes(p.get(12..16)?.try_into().ok()?),
    ))
}

/// Sends `chunks` on a new session, each chunk in one write with a yield between them, so
/// that batches of this connection interleave with every other connection's; returns every
/// reply's (xid, zxid, err), `expected` of them.
async fn exchange(
    addr: std::net::SocketAddr,
    c: usize,
    chunks: Vec<Vec<u8>>,
    expected: usize,
) -> Vec<(i32, i64, i32)> {
    let mut s = session(addr).await;
    let (mut rd, mut wr) = s.split();
    let send = async {
        for bytes in chunks {
            wr.write_all(&bytes).await.expect("send");
            tokio::task::yield_now().await;
        }
    };
    let receive = async {
        let mut got = Vec::new();
        let mut buf = Vec::new();
        while got.len() < expected {
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(WAIT, rd.read(&mut chunk))
                .await
                .expect("replies in time")
                .expect("read");
            assert!(n > 0, "connection {c} closed early");
            buf.extend_from_slice(&chunk[..n]);
            while buf.len() >= 4 {
                let len = i32::from_be_bytes(buf[..4].try_into().expect("4 bytes")) as usize;
                if buf.len() < 4 + len {
                    break;
                }
                let p = &buf[4..4 + len];
                got.push((
                    i32::from_be_bytes(p[0..4].try_into().expect("xid")),
                    i64::from_be_bytes(p[4..12].try_into().expect("zxid")),
                    i32::from_be_bytes(p[12..16].try_into().expect("err")),
                ));
                buf.drain(..4 + len);
            }
        }
        got
    };
    let ((), got) = tokio::join!(send, receive);
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_from_many_threads_keep_each_connections_order_and_one_total_order() {
    const CONNS: usize = 12;
    const CREATES: i32 = 300;
    let server = start().await;
    let mut tasks = Vec::new();
    for c in 0..CONNS {
        let chunks = (1..=CREATES)
            .collect::<Vec<_>>()
            .chunks(7)
            .map(|xids| {
                xids.iter()
                    .flat_map(|&xid| create(xid, format!("/c{c}-{xid}"), vec![1]))
                    .collect()
            })
            .collect();
        tasks.push(tokio::spawn(exchange(
            server.local_addr(),
            c,
            chunks,
            CREATES as usize,
        )));
    }
    let mut zxids = Vec::new();
    for (c, t) in tasks.into_iter().enumerate() {
        let got = t.await.expect("connection task");
        let xids: Vec<i32> = got.iter().map(|r| r.0).collect();
        assert_eq!(
            xids,
            (1..=CREATES).collect::<Vec<_>>(),
            "connection {c}'s order"
        );
        assert!(
            got.iter().all(|r| r.2 == 0),
            "connection {c}: every create succeeds"
        );
        assert!(
            got.windows(2).all(|w| w[0].1 < w[1].1),
            "connection {c}: its writes' zxids increase"
        );
        zxids.extend(got.iter().map(|r| r.1));
    }
    zxids.sort_unstable();
    let n = zxids.len();
    zxids.dedup();
    assert_eq!(zxids.len(), n, "every write has a zxid of its own");
    assert_eq!(n, CONNS * CREATES as usize);
    server.shutdown().await;
}

/// Reads go before writes of other connections, in turns: none of that may let a read
/// overtake its own connection's writes, or a reply leave out of order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_and_writes_from_many_threads_keep_each_connections_order() {
    const CONNS: usize = 12;
    const CHUNKS: i32 = 60;
    const PER_CHUNK: i32 = 5;
    let server = start().await;
    let mut tasks = Vec::new();
    for c in 0..CONNS {
        // Chunks of creates and chunks of exists of the nodes the chunk before created, taking
        // turns; half the connections also send a chunk of reads alone first.
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        let mut xid = 0;
        if c % 2 == 0 {
            chunks.push(
                (0..PER_CHUNK)
                    .flat_map(|_| {
                        xid += 1;
                        super::shared_body::read_op(xid, 3, "/")
                    })
                    .collect(),
            );
        }
        for k in 0..CHUNKS {
            let write = k % 2 == 0;
            let base = k / 2 * PER_CHUNK;
            chunks.push(
                (0..PER_CHUNK)
                    .flat_map(|i| {
                        xid += 1;
                        let path = format!("/m{c}-{}", base + i);
                        if write {
                            create(xid, path, vec![1])
                        } else {
                            super::shared_body::read_op(xid, 3, &path)
                        }
                    })
                    .collect(),
            );
        }
        tasks.push(tokio::spawn(exchange(
            server.local_addr(),
            c,
            chunks,
            xid as usize,
        )));
    }
    for (c, t) in tasks.into_iter().enumerate() {
        let got = t.await.expect("connection task");
        let xids: Vec<i32> = got.iter().map(|r| r.0).collect();
        assert_eq!(
            xids,
            (1..=got.len() as i32).collect::<Vec<_>>(),
            "connection {c}'s order"
        );
        assert!(
            got.iter().all(|r| r.2 == 0),
            "connection {c}: every create succeeds and every exists finds its node"
        );
        assert!(
            got.windows(2).all(|w| w[0].1 <= w[1].1),
            "connection {c}: the zxids its replies carry never go back"
        );
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requests_before_a_corrupt_frame_are_applied_before_the_close() {
    let server = start().await;
    let mut s = session(server.local_addr()).await;
    let mut bytes = Vec::new();
    for xid in 1..=3 {
        bytes.extend_from_slice(&create(xid, format!("/before-{xid}"), vec![]));
    }
    // A negative length: the stream is corrupt from here on.
    bytes.extend_from_slice(&(-5i32).to_be_bytes());
    s.write_all(&bytes).await.expect("send");
    for xid in 1..=3 {
        let (got, _, err) = header(&mut s).await.expect("a reply before the close");
        assert_eq!((got, err), (xid, 0));
    }
    assert_eq!(header(&mut s).await, None, "then the connection is closed");

    let mut other = session(server.local_addr()).await;
    let mut exists = Vec::new();
    for xid in 1..=3 {
        exists.extend_from_slice(&super::shared_body::read_op(
            xid,
            3,
            &format!("/before-{xid}"),
        ));
    }
    other.write_all(&exists).await.expect("send");
    for xid in 1..=3 {
        assert_eq!(header(&mut other).await.map(|r| (r.0, r.2)), Some((xid, 0)));
    }
    server.shutdown().await;
}
