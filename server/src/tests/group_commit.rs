//! Group commit with `--fsync always`: a write's reply and the notifications it fires wait
//! for the sync that covers it, a client's later replies stay behind it, and other sessions'
//! reads are answered while the sync is under way. A failed sync stops the server with
//! nothing it did not cover sent.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::fail_closed::{session, WAIT};
use super::shared_body::{create, read_op};
use crate::{Config, FsyncPolicy, Server};

/// How long a frame that must wait is given to (wrongly) arrive.
const QUIET: Duration = Duration::from_millis(300);

/// Reads one frame: (xid, err); `None` when nothing arrives within `within`.
async fn frame(s: &mut TcpStream, within: Duration) -> Option<(i32, i32)> {
    let mut len = [0u8; 4];
    tokio::time::timeout(within, s.read_exact(&mut len))
        .await
        .ok()?
        .expect("the connection stays open");
    let mut payload = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut payload).await.expect("the whole frame");
    let int = |at: usize| i32::from_be_bytes(payload[at..at + 4].try_into().expect("4 bytes"));
    Some((int(0), int(12)))
}

/// Sends one or more whole frames.
async fn send(s: &mut TcpStream, bytes: &[u8]) {
    s.write_all(bytes).await.expect("send");
}

/// The next frame on `s` is the answer `(xid, err)`, within [`WAIT`]; `what` names it.
async fn answered(s: &mut TcpStream, want: (i32, i32), what: &str) {
    assert_eq!(frame(s, WAIT).await, Some(want), "{what}");
}

/// Stops the server and removes its data directory.
async fn stop(server: Server, dir: std::path::PathBuf) {
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// An exists request with a watch.
fn watch_exists(xid: i32, path: &str) -> bytes::Bytes {
    let mut b = read_op(xid, 3, path).to_vec();
    *b.last_mut().expect("the watch flag") = 1;
    b.into()
}

/// Another session's read of a node the write does not change is answered while the
/// writer's write waits for its sync, and the writer hears nothing meanwhile.
async fn answered_while_the_write_waits(reader: &mut TcpStream, writer: &mut TcpStream) {
    send(reader, &read_op(7, 4, "/zookeeper")).await;
    answered(reader, (7, 0), "the other session's read").await;
    assert_eq!(frame(writer, QUIET).await, None, "no reply before the sync");
}

/// A server with `--fsync always` in a fresh directory (`name`), started from `config`'s
/// other settings.
async fn always_server(name: &str, config: Config) -> (Server, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("zkd-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let server = Server::start(Config {
        port: 0,
        data_dir: Some(dir.clone()),
        fsync: FsyncPolicy::Always,
        ..config
    })
    .await
    .expect("start");
    (server, dir)
}

/// [`always_server`] as a simulated ensemble of three, with its members' client addresses.
async fn always_ensemble(name: &str) -> (Server, std::path::PathBuf, Vec<std::net::SocketAddr>) {
    let (server, dir) = always_server(
        name,
        Config {
            ensemble: Some(crate::config::EnsembleConfig::numbered(3, 0).expect("three members")),
            ..Config::default()
        },
    )
    .await;
    let mut members = server.members().expect("members");
    members.sort_by_key(|m| m.id);
    let addrs = members.iter().map(|m| m.client_addr).collect();
    (server, dir, addrs)
}

/// Creates each path with `writer`, xids in order, and waits for each reply.
async fn create_each(writer: &mut TcpStream, nodes: [(i32, &str); 2]) {
    for (xid, path) in nodes {
        send(writer, &create(xid, path.into(), b"v".to_vec())).await;
        answered(writer, (xid, 0), path).await;
    }
}

/// A server with `--fsync always` in a fresh directory (`name`), and three sessions: a
/// writer, a reader and a watcher with an exists-watch on `/gc`.
async fn three_sessions(name: &str) -> (Server, std::path::PathBuf, [TcpStream; 3]) {
    let (server, dir) = always_server(name, Config::default()).await;
    let addr = server.local_addr();
    let mut watcher = session(addr).await;
    send(&mut watcher, &watch_exists(1, "/gc")).await;
    answered(&mut watcher, (1, -101), "the watch on a missing node").await;
    let sessions = [session(addr).await, session(addr).await, watcher];
    (server, dir, sessions)
}

// Holding the sync thread's lock across the awaits is the point: no sync happens meanwhile.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_and_notifications_wait_for_their_sync_and_reads_do_not() {
    let (server, dir, [mut writer, mut reader, mut watcher]) = three_sessions("gc-wait").await;
    let persist = server.persist.clone().expect("a data directory");
    let held = persist.hold_syncs();
    // The create and a read behind it on the same connection.
    let mut burst = create(1, "/gc".into(), b"v".to_vec()).to_vec();
    burst.extend_from_slice(&read_op(2, 4, "/gc"));
    send(&mut writer, &burst).await;
    answered_while_the_write_waits(&mut reader, &mut writer).await;
    assert_eq!(
        frame(&mut watcher, QUIET).await,
        None,
        "no notification before the sync"
    );

    drop(held);
    answered(&mut writer, (1, 0), "the create").await;
    answered(&mut writer, (2, 0), "then the read").await;
    answered(&mut watcher, (-1, 0), "the notification").await;
    stop(server, dir).await;
}

#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_stops_the_server_before_the_reply_and_the_notification() {
    let (server, dir, [mut writer, _reader, mut watcher]) = three_sessions("gc-fail").await;
    let persist = server.persist.clone().expect("a data directory");
    let mut held = persist.hold_syncs();
    send(&mut writer, &create(1, "/gc".into(), b"v".to_vec())).await;
    // The create is applied and written, and waits for the sync, which fails.
    tokio::time::sleep(QUIET).await;
    *held = Some(std::io::ErrorKind::StorageFull);
    drop(held);
    let failure = tokio::time::timeout(WAIT, server.failed())
        .await
        .expect("the server stops");
    assert!(
        failure.message.contains("cannot sync the transaction log"),
        "{failure}"
    );
    for s in [&mut writer, &mut watcher] {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(WAIT, s.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "the connection is closed");
        assert!(rest.is_empty(), "nothing was sent: {rest:?}");
    }
    stop(server, dir).await;
}

/// The log files of `dir`, with their sizes.
fn logs(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = std::fs::read_dir(dir.join("version-2"))
        .expect("version-2")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("log."))
        .map(|n| {
            let size = std::fs::metadata(dir.join("version-2").join(&n)).map_or(0, |m| m.len());
            (n, size)
        })
        .collect();
    out.sort();
    out
}

/// The first write of a log file (as after every snapshot) does not write or sync the file
/// under the core's lock: while the sync thread is held, the new file is empty and other
/// sessions are answered; the sync thread writes its header with the group, and the reply
/// follows.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_log_file_is_written_and_synced_by_the_sync_thread() {
    let (server, dir, [mut writer, mut reader, _watcher]) = three_sessions("gc-new-file").await;
    // The sessions' transactions went to the first log; the snapshot ends it.
    server.snapshot().await.expect("a snapshot");
    let before = logs(&dir);
    let persist = server.persist.clone().expect("a data directory");
    let held = persist.hold_syncs();
    send(&mut writer, &create(1, "/gc".into(), b"v".to_vec())).await;
    answered_while_the_write_waits(&mut reader, &mut writer).await;
    let created = logs(&dir);
    assert_eq!(
        created.len(),
        before.len() + 1,
        "{before:?} then {created:?}"
    );
    let new = created.last().expect("the new log").clone();
    assert_eq!(new.1, 0, "nothing written under the core: {created:?}");

    drop(held);
    answered(&mut writer, (1, 0), "the create").await;
    let synced = logs(&dir);
    assert_eq!(
        synced.last().map(|(n, _)| n),
        Some(&new.0),
        "the same file, still the newest"
    );
    let size = synced.last().map_or(0, |(_, s)| *s);
    assert!(
        size > zkd_protocol::disk::txnlog::HEADER_LEN as u64,
        "the header and the entry: {synced:?}"
    );
    stop(server, dir).await;
}

/// Under `always`, a read of another session that depends on a transaction not yet synced
/// is answered only after the sync (`getData` of the new node, `getChildren` of its parent,
/// `exists` with a watch, which registers its watch on the state it shows), and a session's
/// later replies stay behind its held one; a read of an unrelated node is answered at once.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_unsynced_changes_wait_for_the_sync_and_unrelated_reads_do_not() {
    let (server, dir, [writer, reader, _watcher]) = three_sessions("gc-reads").await;
    let addr = server.local_addr();
    unsynced_reads_wait(server, dir, writer, reader, addr).await;
}

/// The same in a simulated ensemble: the write goes to member 1, the reads to members 2 and
/// 3, which serve the same state and wait for the same sync.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_an_ensemble_reads_of_unsynced_changes_wait_for_the_sync() {
    let (server, dir, addrs) = always_ensemble("gc-ens").await;
    let writer = session(addrs[0]).await;
    let reader = session(addrs[1]).await;
    unsynced_reads_wait(server, dir, writer, reader, addrs[2]).await;
}

/// `writer` creates `/p/c` while the sync thread is held; `reader` and sessions opened at
/// `addr` read it, its parent and an unrelated node.
#[allow(clippy::await_holding_lock)]
async fn unsynced_reads_wait(
    server: Server,
    dir: std::path::PathBuf,
    mut writer: TcpStream,
    mut reader: TcpStream,
    addr: std::net::SocketAddr,
) {
    create_each(&mut writer, [(1, "/p"), (2, "/other")]).await;
    let mut children = session(addr).await;
    let mut exists = session(addr).await;
    let mut unrelated = session(addr).await;
    let mut others = session(addr).await;
    let persist = server.persist.clone().expect("a data directory");
    let durability = server
        .shared
        .durability
        .get()
        .expect("group commit")
        .clone();
    let held = persist.hold_syncs();
    let before = durability.written();
    send(&mut writer, &create(3, "/p/c".into(), b"new".to_vec())).await;
    // The create is applied (and written, not synced) before the reads are sent.
    let applied = tokio::time::timeout(WAIT, async {
        while durability.written() == before {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    applied.await.expect("the create is applied");
    // The reader's getData of the new node, then a read that depends on nothing unsynced
    // on the same connection: both wait, in order.
    let mut burst = read_op(10, 4, "/p/c").to_vec();
    burst.extend_from_slice(&read_op(11, 4, "/other"));
    send(&mut reader, &burst).await;
    send(&mut children, &read_op(20, 8, "/p")).await;
    send(&mut exists, &watch_exists(30, "/p/c")).await;
    // A multiRead of the new node, then the count below its parent and the writer's
    // ephemerals (which read the whole tree), each on a connection of its own order.
    let path = |p: &str| zkd_protocol::PathRequest { path: p.into() };
    let multi_read = zkd_protocol::Request::MultiRead(vec![zkd_protocol::MultiOp::GetData(
        zkd_protocol::PathWatchRequest {
            path: "/p/c".into(),
            watch: false,
        },
    )]);
    let mut reads = multi_read.to_frame(50).to_vec();
    reads.extend_from_slice(&zkd_protocol::Request::GetAllChildrenNumber(path("/p")).to_frame(51));
    reads.extend_from_slice(&zkd_protocol::Request::GetEphemerals(path("/")).to_frame(52));
    send(&mut others, &reads).await;
    // Another session reading an unrelated node is answered while the sync is held.
    send(&mut unrelated, &read_op(40, 4, "/other")).await;
    answered(&mut unrelated, (40, 0), "the unrelated read").await;
    for (s, what) in [
        (&mut reader, "getData of the new node"),
        (&mut children, "getChildren of its parent"),
        (&mut exists, "exists with a watch"),
        (&mut others, "multiRead of the new node"),
        (&mut writer, "the create"),
    ] {
        assert_eq!(frame(s, QUIET).await, None, "{what} waits for the sync");
    }
    assert!(durability.unsynced_len().0 > 0, "/p/c and /p are recorded");

    drop(held);
    answered(&mut writer, (3, 0), "the create").await;
    answered(&mut reader, (10, 0), "the new node").await;
    answered(&mut reader, (11, 0), "then the next read").await;
    answered(&mut children, (20, 0), "the children").await;
    answered(&mut exists, (30, 0), "it exists").await;
    for xid in [50, 51, 52] {
        answered(&mut others, (xid, 0), &format!("reply {xid}")).await;
    }
    // The exists watch was set on the node that now exists: a change fires it.
    send(&mut writer, &super::shared_body::set_data(4, "/p/c", b"x")).await;
    answered(&mut exists, (-1, 0), "NodeDataChanged").await;
    answered(&mut writer, (4, 0), "the setData").await;
    // The sync thread forgets what a sync covered after it releases the replies waiting
    // for it, so the table may still hold the setData's paths for a moment.
    let forgotten = tokio::time::timeout(WAIT, async {
        while durability.unsynced_len() != (0, 0) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    assert!(
        forgotten.await.is_ok(),
        "the sync forgot what it covered: {:?} left",
        durability.unsynced_len()
    );
    stop(server, dir).await;
}

/// Sends a four-letter word on a fresh connection; its answer, or `None` when nothing came
/// within `within`.
async fn word(addr: std::net::SocketAddr, w: &str, within: Duration) -> Option<String> {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    send(&mut s, w.as_bytes()).await;
    let mut out = Vec::new();
    tokio::time::timeout(within, s.read_to_end(&mut out))
        .await
        .ok()?
        .expect("read");
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// A report that shows the tree's state (`srvr`: the zxid and node count) waits for the
/// sync of what was written when it was gathered; `ruok` does not.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_showing_state_wait_for_the_sync() {
    let (server, dir, [mut writer, _reader, _watcher]) = three_sessions("gc-words").await;
    let addr = server.local_addr();
    let persist = server.persist.clone().expect("a data directory");
    let held = persist.hold_syncs();
    send(&mut writer, &create(1, "/gc".into(), b"v".to_vec())).await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(word(addr, "ruok", WAIT).await.as_deref(), Some("imok"));
    let srvr = tokio::spawn(word(addr, "srvr", WAIT));
    tokio::time::sleep(QUIET).await;
    assert!(!srvr.is_finished(), "srvr waits for the sync");
    drop(held);
    let text = srvr
        .await
        .expect("joined")
        .expect("answered after the sync");
    assert!(text.contains("Node count:"), "{text}");
    answered(&mut writer, (1, 0), "the create").await;
    stop(server, dir).await;
}

/// A lagging member's client whose read waited behind its own write is answered when the
/// member catches up, in a call of another caller (here the control plane's): that read
/// shows the state the member caught up to, which may hold another session's unsynced
/// write, so it waits for the sync too.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_members_held_read_waits_for_the_sync_of_what_it_shows() {
    use crate::core::Lag;
    let (server, dir, addrs) = always_ensemble("gc-lag").await;
    let mut writer = session(addrs[0]).await;
    let mut lagging = session(addrs[1]).await;
    create_each(&mut writer, [(1, "/x"), (2, "/y")]).await;
    server
        .set_member_lag(2, Lag::Stalled)
        .expect("stall member 2");
    // Its write waits for the member, and its read waits behind the write.
    let mut burst = super::shared_body::set_data(1, "/x", b"a").to_vec();
    burst.extend_from_slice(&read_op(2, 4, "/y"));
    send(&mut lagging, &burst).await;
    assert_eq!(
        frame(&mut lagging, QUIET).await,
        None,
        "the member is stalled"
    );
    let persist = server.persist.clone().expect("a data directory");
    let held = persist.hold_syncs();
    send(&mut writer, &super::shared_body::set_data(3, "/y", b"new")).await;
    tokio::time::sleep(QUIET).await;
    // The member catches up to the unsynced setData of /y and runs the held read.
    server
        .set_member_lag(2, Lag::Lockstep)
        .expect("member 2 in step");
    let mut got = Vec::new();
    while let Some(f) = frame(&mut lagging, QUIET).await {
        got.push(f);
    }
    assert!(
        !got.contains(&(2, 0)),
        "the read of the unsynced /y is answered before its sync: {got:?}"
    );
    drop(held);
    while got.len() < 2 {
        got.push(
            frame(&mut lagging, WAIT)
                .await
                .expect("answered after the sync"),
        );
    }
    assert_eq!(got, [(1, 0), (2, 0)], "its write, then its read");
    answered(&mut writer, (3, 0), "the setData").await;
    stop(server, dir).await;
}

/// An admin route that shows the tree (`GET /zkd/tree`) answers only once what was written
/// when its handler finished is synced.
#[cfg(feature = "admin")]
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_routes_wait_for_the_sync() {
    let (server, dir) = always_server(
        "gc-admin",
        Config {
            admin_port: Some(0),
            ..Config::default()
        },
    )
    .await;
    let admin = server.admin_addr().expect("the admin listener");
    let mut writer = session(server.local_addr()).await;
    let persist = server.persist.clone().expect("a data directory");
    let held = persist.hold_syncs();
    send(&mut writer, &create(1, "/gc".into(), b"v".to_vec())).await;
    tokio::time::sleep(QUIET).await;
    let get = tokio::spawn(async move {
        let mut s = TcpStream::connect(admin).await.expect("connect");
        let req = format!("GET /zkd/tree HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n");
        send(&mut s, req.as_bytes()).await;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.expect("read");
        String::from_utf8_lossy(&out).into_owned()
    });
    tokio::time::sleep(QUIET).await;
    assert!(!get.is_finished(), "the tree waits for the sync");
    drop(held);
    let answer = tokio::time::timeout(WAIT, get)
        .await
        .expect("answered after the sync")
        .expect("joined");
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("/gc"),
        "{answer}"
    );
    stop(server, dir).await;
}
