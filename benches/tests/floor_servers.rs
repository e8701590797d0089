//! The throughput floors answer a real client correctly: they may do less than zkd (no tree,
//! no sessions kept), but never less than the protocol requires for what they answer. Each
//! runs as `zkd-bench floor --throughput` runs it (this crate's binary, re-executed as a
//! child process).

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zkd_bench::floor::{FloorKind, FloorProcess};
use zkd_protocol::{ConnectRequest, FrameCodec, Jute, Reader, ReplyHeader, Request};
use zkd_testkit::raw::RawClient;
use zookeeper_client as zk;

const VALUE_SIZE: usize = 300;

fn floor(kind: FloorKind) -> FloorProcess {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_zkd-bench"));
    FloorProcess::spawn_kind(&bin, kind, VALUE_SIZE)
        .unwrap_or_else(|e| panic!("{kind:?} floor: {e}"))
}

/// The Rust ZooKeeper client: a session, getData with the floor's value and a Stat that
/// describes it, setData with a Stat of the new version, and a session kept alive by its
/// pings for longer than its timeout (the client gives the connection up when a ping goes
/// unanswered).
async fn real_client(kind: FloorKind) {
    let server = floor(kind);
    let client = zk::Client::connector()
        .with_session_timeout(Duration::from_millis(1500))
        .connect(&server.addr().to_string())
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: connect: {e}"));
    assert_ne!(client.session_id().0, 0, "{kind:?}: a session id");
    assert_eq!(client.session_timeout(), Duration::from_millis(1500));

    let (data, stat) = client.get_data("/node").await.expect("getData");
    assert_eq!(data, vec![b'v'; VALUE_SIZE], "{kind:?}: the floor's value");
    assert_eq!(stat.data_length, VALUE_SIZE as i32);
    assert!(stat.czxid > 0 && stat.mzxid >= stat.czxid && stat.ctime > 0);

    let set = client
        .set_data("/node", b"hello", Some(3))
        .await
        .expect("setData");
    assert_eq!((set.version, set.data_length), (4, 5), "{kind:?}");
    let again = client
        .set_data("/node", b"hi", None)
        .await
        .expect("setData");
    assert!(
        again.mzxid > set.mzxid,
        "{kind:?}: every write takes a new zxid"
    );

    // Idle for more than the session timeout: only answered pings keep the connection.
    let mut states = client.state_watcher();
    let idle = tokio::time::timeout(Duration::from_millis(2500), states.changed()).await;
    assert!(
        idle.is_err(),
        "{kind:?}: the session changed state while idle: {idle:?}"
    );
    assert_eq!(client.state(), zk::SessionState::SyncConnected);
    let (data, _) = client.get_data("/node").await.expect("getData after pings");
    assert_eq!(data.len(), VALUE_SIZE);
    drop(client);
}

/// At the wire: a ping's reply carries the ping's xid; closeSession is answered, and then
/// the server ends the connection.
async fn wire(kind: FloorKind) {
    let server = floor(kind);
    let raw = RawClient::connect(server.addr(), 4000).await.expect("raw");
    let ping = raw.call(&Request::Ping).await.expect("ping");
    assert_eq!((ping.xid, ping.err), (-2, 0), "{kind:?}: ping");
    let close = raw.close().await.expect("closeSession");
    assert_eq!(close.err, 0, "{kind:?}: closeSession");

    let mut s = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let connect = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout: 4000,
        session_id: 0,
        passwd: bytes::Bytes::from_static(&[0; 16]),
        read_only: Some(false),
    };
    s.write_all(&zkd_protocol::frame::record_frame(&connect))
        .await
        .unwrap();
    s.write_all(&Request::CloseSession.to_frame(1))
        .await
        .unwrap();
    let mut buf = bytes::BytesMut::new();
    let read_all = async { while s.read_buf(&mut buf).await.unwrap() > 0 {} };
    tokio::time::timeout(Duration::from_secs(5), read_all)
        .await
        .unwrap_or_else(|_| panic!("{kind:?}: the connection stays open after closeSession"));
    let codec = FrameCodec::default();
    let _connected = codec.next_frame(&mut buf).unwrap().expect("connect reply");
    let reply = codec.next_frame(&mut buf).unwrap().expect("close reply");
    let h = ReplyHeader::read(&mut Reader::new(reply)).unwrap();
    assert_eq!((h.xid, h.err), (1, 0), "{kind:?}: closeSession reply");
    assert!(buf.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tokio_floor_answers_a_real_client() {
    real_client(FloorKind::Tokio).await;
    wire(FloorKind::Tokio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_epoll_floor_answers_a_real_client() {
    real_client(FloorKind::Epoll).await;
    wire(FloorKind::Epoll).await;
}
