//! Persistence in ZooKeeper's on-disk format, checked through a client: a data directory
//! written by Apache ZooKeeper loads in zkd, one written by zkd starts Apache ZooKeeper, and
//! zkd restarts from its own directory (including after a damaged snapshot or log tail).
//! Every node's data, Stat and ACL are compared.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use zkd_protocol::*;
use zkd_testkit::oracle::{Launcher, Oracle, ZookeeperVersion};
use zkd_testkit::raw::RawClient;

/// `addauth digest user:pass` gives this identity.
const USER_ID: &str = "user:smGaoVKd/cQkjm7b88GyorAUz20=";

type Tree = BTreeMap<String, (Option<Bytes>, Stat, Vec<Acl>)>;

async fn client(addr: SocketAddr) -> RawClient {
    let c = RawClient::connect(addr, 30_000).await.expect("connect");
    let auth = Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: Bytes::from_static(b"user:pass"),
    });
    assert_eq!(c.call(&auth).await.expect("auth").err, 0);
    c
}

async fn ok(c: &RawClient, req: Request) -> Bytes {
    let r = c.call(&req).await.expect("reply");
    assert_eq!(r.err, 0, "{req:?}");
    r.body
}

fn create(path: &str, data: Option<&[u8]>, acl: Vec<Acl>, flags: i32) -> Request {
    let (op, ttl) = match flags {
        4 => (OpCode::CreateContainer, -1),
        5 | 6 => (OpCode::CreateTtl, 600_000),
        _ => (OpCode::Create2, -1),
    };
    Request::Create(Create {
        op,
        path: path.into(),
        data: data.map(Bytes::copy_from_slice),
        acl,
        flags,
        ttl,
    })
}

fn restricted() -> Vec<Acl> {
    vec![
        Acl::new(perms::ALL, "digest", USER_ID),
        Acl::new(perms::READ, "ip", "10.0.0.0/8"),
        Acl::new(perms::READ | perms::WRITE, "world", "anyone"),
    ]
}

/// A tree with every kind of node and Stat history: data (binary, empty, null), nested
/// nodes, sequentials, an ephemeral (its session stays open), a container, a TTL node,
/// custom ACLs, repeated setData/setACL, deletes and multis. Returns the session that owns
/// the ephemeral.
async fn populate(addr: SocketAddr) -> RawClient {
    let c = client(addr).await;
    let open = Acl::open_unsafe;
    ok(&c, create("/app", Some(b"root of app"), open(), 0)).await;
    ok(&c, create("/app/config", Some(&[0, 1, 2, 255]), open(), 0)).await;
    ok(&c, create("/app/empty", Some(b""), open(), 0)).await;
    ok(&c, create("/app/null", None, open(), 0)).await;
    ok(&c, create("/app/secret", Some(b"s"), restricted(), 0)).await;
    for i in 0..3 {
        ok(
            &c,
            create("/app/q-", Some(format!("{i}").as_bytes()), open(), 2),
        )
        .await;
    }
    ok(&c, create("/app/eph", Some(b"mine"), open(), 1)).await;
    ok(&c, create("/app/container", None, open(), 4)).await;
    ok(&c, create("/app/container/child", Some(b"c"), open(), 0)).await;
    ok(&c, create("/app/ttl", Some(b"t"), open(), 5)).await;
    for v in 0..3 {
        let req = Request::SetData(SetDataRequest {
            path: "/app/config".into(),
            data: Some(Bytes::from(format!("v{v}"))),
            version: -1,
        });
        ok(&c, req).await;
    }
    let req = Request::SetAcl(SetAclRequest {
        path: "/app/empty".into(),
        acl: restricted(),
        version: -1,
    });
    ok(&c, req).await;
    ok(&c, create("/gone", None, open(), 0)).await;
    ok(&c, create("/gone/a", None, open(), 0)).await;
    let del = |p: &str| {
        Request::Delete(DeleteRequest {
            path: p.into(),
            version: -1,
        })
    };
    ok(&c, del("/gone/a")).await;
    ok(&c, del("/app/q-0000000005")).await;
    let multi = Request::Multi(vec![
        MultiOp::Create(Create {
            op: OpCode::Create,
            path: "/app/m1".into(),
            data: Some(Bytes::from_static(b"multi")),
            acl: open(),
            flags: 0,
            ttl: -1,
        }),
        MultiOp::SetData(SetDataRequest {
            path: "/app".into(),
            data: Some(Bytes::from_static(b"changed in multi")),
            version: -1,
        }),
        MultiOp::Delete(DeleteRequest {
            path: "/gone".into(),
            version: -1,
        }),
    ]);
    ok(&c, multi).await;
    // A failing multi and a failing create use zxids and change nothing.
    let failing = Request::Multi(vec![
        MultiOp::Create(Create {
            op: OpCode::Create,
            path: "/app/never".into(),
            data: None,
            acl: open(),
            flags: 0,
            ttl: -1,
        }),
        MultiOp::Delete(DeleteRequest {
            path: "/missing".into(),
            version: -1,
        }),
    ]);
    c.call(&failing).await.expect("reply");
    let r = c
        .call(&create("/app", None, open(), 0))
        .await
        .expect("reply");
    assert_eq!(r.err, ErrorCode::NodeExists.code());
    c
}

/// Reads every node (data, Stat, ACL) by walking from the root.
async fn dump(addr: SocketAddr) -> Tree {
    let c = client(addr).await;
    let mut tree = Tree::new();
    let mut stack = vec!["/".to_string()];
    while let Some(p) = stack.pop() {
        let data: GetDataResponse = decode(ok(&c, Request::GetData(watchless(&p))).await);
        let acl: GetAclResponse =
            decode(ok(&c, Request::GetAcl(PathRequest { path: p.clone() })).await);
        let children: ChildrenResponse = decode(ok(&c, Request::GetChildren(watchless(&p))).await);
        for child in children.children {
            stack.push(if p == "/" {
                format!("/{child}")
            } else {
                format!("{p}/{child}")
            });
        }
        tree.insert(p, (data.data, data.stat, acl.acl));
    }
    let _ = c.close().await;
    tree
}

fn watchless(p: &str) -> PathWatchRequest {
    PathWatchRequest {
        path: p.into(),
        watch: false,
    }
}

fn decode<T: Jute>(b: Bytes) -> T {
    from_bytes(b).expect("decodes")
}

fn assert_same(expected: &Tree, actual: &Tree) {
    for (path, want) in expected {
        assert_eq!(actual.get(path), Some(want), "node {path} differs");
    }
    assert_eq!(
        actual.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
}

/// zkd keeping its state in `dir`.
async fn start_zkd(dir: &Path) -> zkd_server::Server {
    zkd_server::Server::start(zkd_config(dir)).await.unwrap()
}

/// zkd keeping its state in `dir`, populated by the returned session, and the tree it
/// holds then.
async fn start_populated(dir: &Path) -> (zkd_server::Server, RawClient, Tree) {
    let server = start_zkd(dir).await;
    let owner = populate(server.local_addr()).await;
    let tree = dump(server.local_addr()).await;
    (server, owner, tree)
}

fn zkd_config(dir: &Path) -> zkd_server::Config {
    zkd_server::Config {
        port: 0,
        data_dir: Some(dir.to_path_buf()),
        ..Default::default()
    }
}

/// ZooKeeper with `base/data` as its data directory, which outlives it. Dropping the
/// returned value kills the server (SIGKILL).
fn zookeeper_in(base: &Path, extra: &[(&str, &str)]) -> Oracle {
    Launcher::new()
        .cfg(extra)
        .start_in(base, None)
        .expect("ZooKeeper starts")
}

/// ZooKeeper of release `version` in `base` (zkd loads the data directories of both: 3.9
/// adds a last-processed-zxid record to its snapshots).
fn zookeeper_release_in(version: ZookeeperVersion, base: &Path, extra: &[(&str, &str)]) -> Oracle {
    Launcher::new()
        .version(version)
        .cfg(extra)
        .start_in(base, None)
        .expect("ZooKeeper starts")
}

fn files(dir: &Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("version-2"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    v.sort();
    v
}

/// The tree [`populate`] makes, written by ZooKeeper of `version` (with `extra` zoo.cfg lines)
/// into `BASE/data` of a fresh temporary BASE, that server stopped: BASE, its data directory
/// and the tree as ZooKeeper served it.
async fn written_by_zookeeper(
    version: ZookeeperVersion,
    extra: &[(&str, &str)],
) -> (tempfile::TempDir, PathBuf, Tree) {
    let base = tempfile::tempdir().unwrap();
    let zk = zookeeper_release_in(version, base.path(), extra);
    let owner = populate(zk.addr()).await;
    let expected = dump(zk.addr()).await;
    drop(zk);
    drop(owner);
    let data = base.path().join("data");
    (base, data, expected)
}

/// Runs `check` for ZooKeeper 3.8 and then 3.9.
async fn on_each_release<F: Future<Output = ()>>(check: impl Fn(ZookeeperVersion) -> F) {
    for version in [ZookeeperVersion::V3_8, ZookeeperVersion::V3_9] {
        check(version).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn zookeeper_data_dir_loads_in_zkd() {
    on_each_release(zookeeper_data_dir_of_release_loads_in_zkd).await;
}

async fn zookeeper_data_dir_of_release_loads_in_zkd(version: ZookeeperVersion) {
    // A small snapCount makes ZooKeeper write several (fuzzy) snapshots between logs, so
    // loading exercises snapshots and log replay together.
    let (_base, data, expected) = written_by_zookeeper(version, &[("snapCount", "6")]).await;
    assert!(files(&data, "snapshot.").len() > 1);
    assert!(!files(&data, "log.").is_empty());

    let server = zkd_server::Server::start(zkd_config(&data))
        .await
        .expect("zkd loads ZooKeeper's data directory");
    let actual = dump(server.local_addr()).await;
    assert_same(&expected, &actual);
    assert!(
        actual.contains_key("/app/eph"),
        "the ephemeral's session was restored"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn zookeeper_snapshot_alone_loads_in_zkd() {
    on_each_release(zookeeper_snapshot_of_release_alone_loads_in_zkd).await;
}

async fn zookeeper_snapshot_of_release_alone_loads_in_zkd(version: ZookeeperVersion) {
    let (base, data, expected) = written_by_zookeeper(version, &[]).await;
    // Restarting ZooKeeper replays its log and writes a snapshot of the result.
    drop(zookeeper_release_in(version, base.path(), &[]));
    for log in files(&data, "log.") {
        std::fs::remove_file(log).unwrap();
    }
    let server = zkd_server::Server::start(zkd_config(&data))
        .await
        .expect("zkd loads ZooKeeper's snapshot");
    assert_same(&expected, &dump(server.local_addr()).await);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn zkd_data_dir_starts_zookeeper() {
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("data");
    let (server, owner, expected) = start_populated(&data).await;
    owner.abort().await;
    server.shutdown().await;
    let newest = files(&data, "snapshot.").pop().expect("a snapshot");
    let newest_bytes = std::fs::read(&newest).unwrap();

    let zk = zookeeper_in(base.path(), &[]);
    let actual = dump(zk.addr()).await;
    assert_same(&expected, &actual);
    drop(zk);

    // Only zkd's snapshot, without its logs, works too.
    let only_snap = tempfile::tempdir().unwrap();
    let dir = only_snap.path().join("data").join("version-2");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(newest.file_name().unwrap()), newest_bytes).unwrap();
    let zk = zookeeper_in(only_snap.path(), &[]);
    assert_same(&expected, &dump(zk.addr()).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn zkd_log_alone_starts_zookeeper() {
    // zkd killed without a final snapshot: the state is in its log after the startup
    // snapshot. ZooKeeper replays that log.
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("data");
    let (server, owner, expected) = start_populated(&data).await;
    drop(server);
    drop(owner);
    assert!(!files(&data, "log.").is_empty());
    let zk = zookeeper_in(base.path(), &[]);
    let actual = dump(zk.addr()).await;
    assert_same(&expected, &actual);
}

#[tokio::test(flavor = "multi_thread")]
async fn zkd_restarts_with_its_state_and_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, owner, expected) = start_populated(tmp.path()).await;
    let (sid, passwd) = (owner.session_id, owner.passwd.clone());
    owner.abort().await;
    server.shutdown().await;

    let server = start_zkd(tmp.path()).await;
    assert_same(&expected, &dump(server.local_addr()).await);
    // The session survived the restart: it can resume, and closing it removes its ephemeral.
    let resumed = RawClient::resume(server.local_addr(), sid, passwd, 30_000, 0)
        .await
        .expect("session resumes after restart");
    assert_eq!(resumed.session_id, sid);
    resumed.close().await.expect("close");
    assert!(!dump(server.local_addr()).await.contains_key("/app/eph"));
    server.shutdown().await;
}

/// A populated zkd on `dir` snapshotted twice, `/later` (holding `later`) created between the
/// two, then dropped as if killed: the two snapshots and the tree it served last.
async fn snapshots_around_a_create(
    dir: &Path,
    later: &[u8],
) -> (zkd_server::SnapshotInfo, zkd_server::SnapshotInfo, Tree) {
    let (server, owner, _) = start_populated(dir).await;
    let first = server.snapshot().await.expect("snapshot");
    ok(&owner, create("/later", Some(later), Acl::open_unsafe(), 0)).await;
    let second = server.snapshot().await.expect("snapshot");
    let tree = dump(server.local_addr()).await;
    owner.abort().await;
    drop(server);
    (first, second, tree)
}

/// Flips the bits `mask` of the byte in the middle of `file`.
fn flip_middle_byte(file: &Path, mask: u8) {
    let mut bytes = std::fs::read(file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= mask;
    std::fs::write(file, &bytes).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn damaged_last_snapshot_falls_back_to_the_previous_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, second, expected) =
        snapshots_around_a_create(tmp.path(), b"after the first snapshot").await;
    assert!(second.zxid > first.zxid);

    // Flip a byte in the middle of the newest snapshot.
    flip_middle_byte(&second.path, 0x55);

    let server = zkd_server::Server::start(zkd_config(tmp.path()))
        .await
        .expect("starts from the previous snapshot and the log");
    assert!(first.path.exists(), "the snapshot it started from is kept");
    assert_same(&expected, &dump(server.local_addr()).await);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_snapshot_nothing_else_covers_refuses_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, second, _) = snapshots_around_a_create(tmp.path(), b"x").await;
    // The log holding /later is gone (as after an old purge), and the newest snapshot is
    // damaged: falling back to the first one would silently lose /later.
    for log in files(tmp.path(), "log.") {
        let zxid = u64::from_str_radix(
            log.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .strip_prefix("log.")
                .unwrap(),
            16,
        )
        .unwrap() as i64;
        if zxid > first.zxid {
            std::fs::remove_file(log).unwrap();
        }
    }
    flip_middle_byte(&second.path, 0x10);
    let before = contents(tmp.path());

    let err = zkd_server::Server::start(zkd_config(tmp.path()))
        .await
        .err()
        .expect("refuses");
    let name = second
        .path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        err.to_string().contains(&name) && err.to_string().contains("at offset"),
        "{err}"
    );
    assert!(before == contents(tmp.path()), "nothing changed");

    // Asked to, it starts from the first snapshot and sets the damaged one aside.
    let server = zkd_server::Server::start(zkd_server::Config {
        recover_truncate: true,
        ..zkd_config(tmp.path())
    })
    .await
    .expect("recovers");
    assert!(!dump(server.local_addr()).await.contains_key("/later"));
    assert!(tmp
        .path()
        .join("version-2")
        .join(format!("dropped.{name}"))
        .exists());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_snapshot_damaged_refuses_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let server = start_zkd(tmp.path()).await;
    server.shutdown().await;
    for snap in files(tmp.path(), "snapshot.") {
        std::fs::write(&snap, b"ZKSN garbage").unwrap();
    }
    let err = zkd_server::Server::start(zkd_config(tmp.path()))
        .await
        .err()
        .expect("refuses a directory with no readable snapshot");
    assert!(err.to_string().contains("no readable snapshot"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn torn_log_tail_is_cut_at_the_last_good_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let log = creates_only_in_the_log(tmp.path(), &[("/kept", b"1"), ("/torn", b"2")]).await;
    let len = std::fs::metadata(&log).unwrap().len();
    // Cut the last entry (the create of /torn) in the middle.
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(len - 10).unwrap();
    drop(f);

    let server = zkd_server::Server::start(zkd_config(tmp.path()))
        .await
        .expect("starts");
    let tree = dump(server.local_addr()).await;
    assert!(tree.contains_key("/kept"));
    assert!(!tree.contains_key("/torn"));
    let cut = std::fs::metadata(&log).unwrap().len();
    assert!(
        cut < len - 10,
        "the damaged tail was removed from {}",
        log.display()
    );
    server.shutdown().await;
}

/// The largest log entry zkd and ZooKeeper read with the default jute.maxbuffer.
const LOG_LIMIT: u64 = 2 * 0xfffff;

/// The zxid of the last complete entry of the log `bytes`.
fn last_zxid_in(bytes: &[u8]) -> i64 {
    zkd_protocol::disk::txnlog::scan(bytes, LOG_LIMIT)
        .unwrap()
        .entries
        .last()
        .unwrap()
        .1
        .header
        .zxid
}

/// One framed log entry: the create of `path` (data "x") as transaction `zxid`.
fn entry(zxid: i64, path: &str) -> bytes::BytesMut {
    zkd_protocol::disk::txnlog::create_entry(zxid, path, Some(Bytes::from_static(b"x")))
}

/// A zkd data directory whose log ends in an entry cut in the middle (the create of /torn,
/// after the one of /kept), and a newer log named after a later transaction holding `newer`:
/// what a crash leaves when it interrupts the sync thread writing the group of the file a
/// snapshot rolled away from, after the next file was created. Returns the directory, the
/// older log and its size after the cut.
async fn cut_short_before_a_newer_log(newer: &[u8]) -> (tempfile::TempDir, PathBuf, u64) {
    let tmp = tempfile::tempdir().unwrap();
    let log = creates_only_in_the_log(tmp.path(), &[("/kept", b"1"), ("/torn", b"2")]).await;
    let mut bytes = std::fs::read(&log).unwrap();
    let last = last_zxid_in(&bytes);
    bytes.truncate(bytes.len() - 10);
    std::fs::write(&log, &bytes).unwrap();
    let dir = tmp.path().join("version-2");
    std::fs::write(dir.join(format!("log.{:x}", last + 1)), newer).unwrap();
    (tmp, log, bytes.len() as u64)
}

/// Every log after the cut one holds no transaction (empty, as zkd leaves a new file until
/// the sync thread writes it, or only a header): nothing after the cut was acknowledged, so
/// the incomplete entry is cut off as at the end of the newest log, and zkd starts.
/// ZooKeeper starts on the same directory with the same tree.
#[tokio::test(flavor = "multi_thread")]
async fn an_older_log_cut_short_before_logs_holding_nothing_is_cut_and_loads() {
    let header = zkd_protocol::disk::txnlog::file_header();
    for newer in [&b""[..], &header[..]] {
        let (tmp, log, size) = cut_short_before_a_newer_log(newer).await;
        // ZooKeeper starts on a copy of it with the same tree.
        let base = tempfile::tempdir().unwrap();
        let copy = base.path().join("data").join("version-2");
        std::fs::create_dir_all(&copy).unwrap();
        for f in std::fs::read_dir(tmp.path().join("version-2")).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), copy.join(f.file_name())).unwrap();
        }
        let zk = zookeeper_in(base.path(), &[]);
        let tree = dump(zk.addr()).await;
        assert!(tree.contains_key("/kept") && !tree.contains_key("/torn"));
        drop(zk);

        let server = start_zkd(tmp.path()).await;
        let tree = dump(server.local_addr()).await;
        assert!(tree.contains_key("/kept") && !tree.contains_key("/torn"));
        let cut = std::fs::metadata(&log).unwrap().len();
        assert!(
            cut < size,
            "the incomplete entry was cut from {}",
            log.display()
        );
        server.shutdown().await;
    }
}

/// A newer log that holds transactions and does not continue after the cut one: the
/// transactions in between are missing, so zkd refuses to start, naming the file and offset,
/// and changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn an_older_log_cut_short_before_a_log_that_does_not_continue_it_refuses_to_start() {
    let (tmp, log, _) = cut_short_before_a_newer_log(&[]).await;
    // The empty newer log, named after the cut transaction, is replaced by one starting a
    // transaction later: the cut one is missing.
    let empty = files(tmp.path(), "log.").pop().unwrap();
    let name = empty.file_name().unwrap().to_string_lossy().into_owned();
    let zxid = i64::from_str_radix(name.trim_start_matches("log."), 16).unwrap() + 1;
    let mut newer = zkd_protocol::disk::txnlog::file_header().to_vec();
    newer.extend_from_slice(&entry(zxid, "/later"));
    std::fs::remove_file(&empty).unwrap();
    let later = tmp.path().join("version-2").join(format!("log.{zxid:x}"));
    std::fs::write(&later, &newer).unwrap();
    let before = contents(tmp.path());
    let err = zkd_server::Server::start(zkd_config(tmp.path()))
        .await
        .err()
        .expect("refused");
    let text = err.to_string();
    assert!(
        text.contains(&*log.to_string_lossy())
            && text.contains("ends with an incomplete entry at offset")
            && text.contains("transactions are missing"),
        "{text}"
    );
    assert_eq!(before, contents(tmp.path()), "nothing changed");
}

/// What ZooKeeper leaves after a crash and a restart: an older log ending in an incomplete
/// entry, and a newer log that continues from the last good one (and an empty log whose
/// creation was interrupted). zkd loads it as ZooKeeper does, changing nothing.
#[tokio::test(flavor = "multi_thread")]
async fn an_older_log_with_an_incomplete_end_continued_by_the_next_loads() {
    use zkd_protocol::disk::txnlog;
    let tmp = tempfile::tempdir().unwrap();
    let log = creates_only_in_the_log(tmp.path(), &[("/a", b"1")]).await;
    let bytes = std::fs::read(&log).unwrap();
    let last = last_zxid_in(&bytes);
    // The older log: an entry cut off after 20 bytes, then pre-allocated zeros.
    let mut older = bytes.clone();
    older.extend_from_slice(&entry(last + 1, "/lost")[..20]);
    older.resize(older.len() + 4096, 0);
    std::fs::write(&log, &older).unwrap();
    // The next log starts at the zxid after the last good entry.
    let mut next = txnlog::file_header().to_vec();
    next.extend_from_slice(&entry(last + 1, "/c"));
    let dir = tmp.path().join("version-2");
    std::fs::write(dir.join(format!("log.{:x}", last + 1)), &next).unwrap();
    // And an empty newest log, as a crash right after creating it leaves.
    std::fs::write(dir.join(format!("log.{:x}", last + 2)), b"").unwrap();

    let (code, stdout) = datadir_check(tmp.path());
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("left as it is"), "{stdout}");
    assert!(stdout.contains("shorter than its header"), "{stdout}");

    let before = contents(tmp.path());
    let server = start_zkd(tmp.path()).await;
    let tree = dump(server.local_addr()).await;
    assert!(tree.contains_key("/a") && tree.contains_key("/c") && !tree.contains_key("/lost"));
    let after = contents(tmp.path());
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        before[&name], after[&name],
        "the older log is left as it is"
    );
    server.shutdown().await;
}

/// A transaction log that cannot be written stops the server before the write is
/// acknowledged, as ZooKeeper stops when its log cannot be written: the writer gets no
/// reply, a watcher no notification, `failed()` says why, and a restart holds every write
/// that was acknowledged. The log goes to a full device: the next log file is made a link
/// to `/dev/full`, where every write fails with ENOSPC.
#[tokio::test(flavor = "multi_thread")]
async fn a_log_write_failure_stops_the_server_before_the_reply() {
    use zkd_server::FsyncPolicy;
    for fsync in [FsyncPolicy::Always, FsyncPolicy::Batch, FsyncPolicy::Never] {
        let tmp = tempfile::tempdir().unwrap();
        let config = zkd_server::Config {
            fsync,
            ..zkd_config(tmp.path())
        };
        let server = zkd_server::Server::start(config.clone())
            .await
            .expect("starts");
        let c = client(server.local_addr()).await;
        let watcher = client(server.local_addr()).await;
        ok(&c, create("/kept", Some(b"1"), Acl::open_unsafe(), 0)).await;
        let watch = Request::Exists(PathWatchRequest {
            path: "/lost".into(),
            watch: true,
        });
        assert_eq!(watcher.call(&watch).await.expect("reply").err, -101);
        let mut events = watcher.events().expect("events");

        // The next transaction starts log.<snapshot zxid + 1>.
        let snap = server.snapshot().await.expect("snapshot");
        let next = tmp
            .path()
            .join("version-2")
            .join(format!("log.{:x}", snap.zxid + 1));
        std::os::unix::fs::symlink("/dev/full", &next).unwrap();
        let r = c
            .call(&create("/lost", Some(b"2"), Acl::open_unsafe(), 0))
            .await;
        assert!(
            r.is_err(),
            "{fsync:?}: a write the log refused was answered: {r:?}"
        );
        let failure = tokio::time::timeout(std::time::Duration::from_secs(30), server.failed())
            .await
            .expect("the server reports its failure");
        // With `always` the sync thread writes each group (the new file's header with
        // it); the other policies write each transaction as it comes.
        let what = match fsync {
            FsyncPolicy::Always => "cannot write the transaction log in",
            _ => "cannot write transaction 0x",
        };
        assert!(
            failure.message.contains(what) && failure.message.contains("No space left on device"),
            "{failure}"
        );
        while let Ok(Some(e)) =
            tokio::time::timeout(std::time::Duration::from_millis(200), events.recv()).await
        {
            assert_ne!(
                e.path, "/lost",
                "{fsync:?}: a watcher heard of the lost write"
            );
        }
        assert!(c.call(&watch).await.is_err(), "the server still serves");
        server.shutdown().await;

        std::fs::remove_file(&next).unwrap();
        let server = zkd_server::Server::start(config).await.expect("restarts");
        let c = client(server.local_addr()).await;
        let exists = |p: &str| {
            Request::Exists(PathWatchRequest {
                path: p.into(),
                watch: false,
            })
        };
        assert_eq!(c.call(&exists("/kept")).await.expect("reply").err, 0);
        assert_eq!(c.call(&exists("/lost")).await.expect("reply").err, -101);
        server.shutdown().await;
    }
}

/// A full disk at start: the first snapshot cannot be written (its temporary file is a link
/// to `/dev/full`, where every write fails with ENOSPC). zkd exits 1 with a sentence naming
/// the data directory, the snapshot file and the system's error, not a listening failure.
#[test]
fn a_full_disk_at_start_is_reported_as_such() {
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("data");
    let dir = data.join("version-2");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink("/dev/full", dir.join("tmp.snapshot.0")).unwrap();
    let (child, _) = run_zkd_binary(&data, &[]);
    let (code, stderr) = exit_of(child);
    assert_eq!(code, Some(1), "{stderr}");
    let snapshot = dir.join("snapshot.0");
    assert!(
        stderr.contains(&format!(
            "cannot write to the data directory {}: cannot write snapshot {}: No space left on \
             device",
            data.display(),
            snapshot.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("cannot listen"), "{stderr}");
}

/// The zxids of the snapshots in `dir`, oldest first.
fn snapshot_zxids(dir: &Path) -> Vec<i64> {
    let mut zxids: Vec<i64> = files(dir, "snapshot.")
        .iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            i64::from_str_radix(name.strip_prefix("snapshot.")?, 16).ok()
        })
        .collect();
    zxids.sort_unstable();
    zxids
}

/// Waits up to 10 s for a snapshot of epoch `epoch` in `dir`; its zxid.
async fn snapshot_of_epoch(dir: &Path, epoch: i64) -> i64 {
    for _ in 0..500 {
        if let Some(z) = snapshot_zxids(dir).into_iter().find(|z| z >> 32 == epoch) {
            return z;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no snapshot of epoch {epoch}: {:x?}", snapshot_zxids(dir));
}

/// A leader starting an epoch snapshots the state the epoch starts from, as ZooKeeper's
/// leader does when it takes over (before its first proposal): an ensemble with a data
/// directory has a snapshot of epoch 1 once it has started, and when the leader stops and
/// another takes over, one of epoch 2 holding what was written before.
#[tokio::test(flavor = "multi_thread")]
async fn a_new_epoch_takes_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let config = zkd_server::Config {
        ensemble: Some(zkd_server::EnsembleConfig::numbered(3, 0).unwrap()),
        ..zkd_config(tmp.path())
    };
    let server = zkd_server::Server::start(config).await.expect("starts");
    let first = snapshot_of_epoch(tmp.path(), 1).await;
    assert_eq!(first, 1 << 32, "the state epoch 1 starts from");
    let members = server.members().expect("an ensemble");
    let c = client(members[0].client_addr).await;
    ok(&c, create("/before", Some(b"1"), Acl::open_unsafe(), 0)).await;
    c.abort().await;
    // Member 3 leads; stopping it makes member 2 lead, in epoch 2.
    server.stop_member(3).await.expect("stops");
    let second = snapshot_of_epoch(tmp.path(), 2).await;
    let snap = tmp
        .path()
        .join("version-2")
        .join(format!("snapshot.{second:x}"));
    let image = zkd_server::read_snapshot_file(&snap).expect("reads");
    assert!(
        image.nodes.iter().any(|n| n.path == "/before"),
        "the snapshot of epoch 2 holds what epoch 1 wrote"
    );
    server.shutdown().await;
}

/// `mntr`'s numeric lines as a map (`zk_` prefix kept).
async fn mntr(addr: SocketAddr) -> BTreeMap<String, f64> {
    let text = tokio::task::spawn_blocking(move || {
        zkd_testkit::oracle::four_letter_word(addr, "mntr").expect("mntr")
    })
    .await
    .unwrap();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('\t')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// Every sync of the transaction log is timed (`fsynctime` in `mntr`), and one longer than
/// `fsync.warningthresholdms` is counted (the AdminServer's `fsync_threshold_exceed_count`)
/// and logged. With a threshold of -1 ms every sync is over it; with the default (1 s) none
/// of these. ZooKeeper, given the same zoo.cfg key, times its syncs in `mntr` the same way.
#[tokio::test(flavor = "multi_thread")]
async fn log_syncs_are_timed_and_counted_over_the_threshold() {
    use zkd_server::FsyncPolicy;
    for threshold in [-1, 1000] {
        let tmp = tempfile::tempdir().unwrap();
        let config = zkd_server::Config {
            fsync: FsyncPolicy::Always,
            fsync_warning_threshold_ms: threshold,
            admin_server_port: Some(0),
            admin_port: Some(0),
            ..zkd_config(tmp.path())
        };
        let server = zkd_server::Server::start(config).await.expect("starts");
        let before = mntr(server.local_addr()).await;
        let c = client(server.local_addr()).await;
        create_twenty(&c).await;
        let after = mntr(server.local_addr()).await;
        let syncs = after["zk_cnt_fsynctime"];
        assert!(
            syncs >= before["zk_cnt_fsynctime"] + 1.0 && syncs <= 21.0,
            "{syncs} syncs for 20 creates"
        );
        assert!(after["zk_max_fsynctime"] >= after["zk_min_fsynctime"]);
        let admin = server.admin_server_addr().expect("AdminServer");
        let stats: serde_json::Value = tokio::task::spawn_blocking(move || {
            let url = format!("http://{admin}/commands/stats");
            let mut r = ureq::get(&url).call().expect("GET stats");
            serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap()
        })
        .await
        .unwrap();
        let exceeded = stats["server_stats"]["fsync_threshold_exceed_count"]
            .as_f64()
            .expect("a count");
        let expected = if threshold < 0 { syncs } else { 0.0 };
        assert_eq!(
            exceeded, expected,
            "threshold {threshold} ms, {syncs} syncs"
        );
        // The same counts in the Prometheus exposition.
        let admin = server.admin_addr().expect("admin listener");
        let text = tokio::task::spawn_blocking(move || {
            let url = format!("http://{admin}/metrics");
            let mut r = ureq::get(&url).call().expect("GET /metrics");
            r.body_mut().read_to_string().unwrap()
        })
        .await
        .unwrap();
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
                .unwrap_or_else(|| panic!("no {name} in {text}"))
        };
        assert!(value("fsynctime_count") >= syncs, "{text}");
        assert_eq!(
            value("fsync_threshold_exceed_count_total"),
            expected,
            "{text}"
        );
        // The history has a `slow_sync` warning for each (taken over at a tick).
        let warnings = |server: &zkd_server::Server| {
            server
                .history(&zkd_server::HistoryFilter {
                    kinds: Some(vec!["warning".into()]),
                    ..Default::default()
                })
                .expect("history")
                .iter()
                .filter(|e| e.to_json().contains("\"what\":\"slow_sync\""))
                .count()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while threshold < 0 && (warnings(&server) as f64) < expected {
            assert!(
                std::time::Instant::now() < deadline,
                "no slow_sync warnings"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(
            warnings(&server) as f64,
            expected,
            "threshold {threshold} ms"
        );
        c.abort().await;
        server.shutdown().await;
    }

    let base = tempfile::tempdir().unwrap();
    let zk = zookeeper_in(
        base.path(),
        &[("forceSync", "yes"), ("fsync.warningthresholdms", "-1")],
    );
    let c = client(zk.addr()).await;
    create_twenty(&c).await;
    let after = mntr(zk.addr()).await;
    assert!(after["zk_cnt_fsynctime"] >= 1.0, "{after:?}");
}

/// Creates `/n0` to `/n19` (data "v", open ACL), one call after another.
async fn create_twenty(c: &RawClient) {
    for i in 0..20 {
        ok(
            c,
            create(&format!("/n{i}"), Some(b"v"), Acl::open_unsafe(), 0),
        )
        .await;
    }
}

/// Every file of a data directory with its bytes (the file list and each file's content).
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir.join("version-2"))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// zkd (the binary) started on `dir` with `extra` flags. With `expect_exit` it must end on
/// its own within 30 s: returns its exit code and stderr. Otherwise it must start: returns
/// the running child (stderr is read up to the listening line and returned).
fn run_zkd_binary(dir: &Path, extra: &[&str]) -> (std::process::Child, String) {
    use std::process::{Command, Stdio};
    let bin = zkd_client_tests::certs::zkd_binary().expect("zkd binary");
    let child = Command::new(bin)
        .args(["--port", "0", "--data-dir"])
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zkd runs");
    (child, String::new())
}

/// Waits up to 30 s for `child` to exit; its exit code and stderr.
fn exit_of(mut child: std::process::Child) -> (Option<i32>, String) {
    use std::io::Read;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), err);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("zkd did not exit within 30 s on a damaged data directory");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `zkd datadir check DIR`: its exit code and standard output.
fn datadir_check(dir: &Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(zkd_client_tests::certs::zkd_binary().unwrap())
        .args(["datadir", "check"])
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A base directory for ZooKeeper whose data directory holds a copy of `files` (as
/// [`contents`] gives them).
fn zookeeper_copy(files: &BTreeMap<String, Vec<u8>>) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    let copied = copy.path().join("data").join("version-2");
    std::fs::create_dir_all(&copied).unwrap();
    for (file, body) in files {
        std::fs::write(copied.join(file), body).unwrap();
    }
    copy
}

/// ZooKeeper, started by `launcher` on a copy of `files`, exits during start-up; when it
/// starts, fails naming `what` it started on and whether it serves `node`.
async fn zookeeper_refuses(
    launcher: Launcher,
    files: &BTreeMap<String, Vec<u8>>,
    what: &str,
    node: &str,
) {
    let copy = zookeeper_copy(files);
    match launcher.start_in(copy.path(), None) {
        Err(e) => assert!(e.contains("exited during start-up"), "{e}"),
        Ok(zk) => {
            let tree = dump(zk.addr()).await;
            panic!(
                "ZooKeeper started on {what}, serving {node}: {}",
                tree.contains_key(node)
            );
        }
    }
}

/// The client address a started zkd binary prints on its first line of standard output.
fn listening_addr(child: &mut std::process::Child) -> SocketAddr {
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    line.trim()
        .strip_prefix("zkd listening on ")
        .unwrap_or_else(|| panic!("unexpected line {line:?}"))
        .parse::<SocketAddr>()
        .unwrap()
}

/// zkd (the binary) started on `dir` with `--recover-truncate`: the tree it serves, and its
/// stderr once it is killed.
async fn recovered(dir: &Path) -> (Tree, String) {
    let (mut child, _) = run_zkd_binary(dir, &["--recover-truncate"]);
    let addr = listening_addr(&mut child);
    let tree = dump(addr).await;
    child.kill().unwrap();
    let (_, stderr) = exit_of(child);
    (tree, stderr)
}

/// zkd on `dir` creates each `(path, data)`, then is dropped as if killed: no final snapshot,
/// the creates are only in the log. Returns the newest log.
async fn creates_only_in_the_log<P: AsRef<str>>(dir: &Path, nodes: &[(P, &[u8])]) -> PathBuf {
    let server = start_zkd(dir).await;
    let c = client(server.local_addr()).await;
    for (path, data) in nodes {
        ok(&c, create(path.as_ref(), Some(data), Acl::open_unsafe(), 0)).await;
    }
    c.abort().await;
    drop(server);
    files(dir, "log.").pop().expect("a log")
}

/// A zkd data directory whose only state is in its newest log: 100 creates of /n000../n099
/// after the start-up snapshot. Returns the log's path and the offset of each create.
async fn hundred_writes_in_the_log(dir: &Path) -> (std::path::PathBuf, Vec<u64>) {
    let nodes: Vec<(String, &[u8])> = (0..100).map(|i| (format!("/n{i:03}"), &b"v"[..])).collect();
    let log = creates_only_in_the_log(dir, &nodes).await;
    let bytes = std::fs::read(&log).unwrap();
    let scan = zkd_protocol::disk::txnlog::scan(&bytes[..], LOG_LIMIT).expect("a log");
    let creates: Vec<u64> = scan
        .entries
        .iter()
        .filter(|(_, e)| matches!(e.body, zkd_protocol::disk::TxnBody::Create(_)))
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(creates.len(), 100, "{}", log.display());
    (log, creates)
}

/// The middle of the newest log damaged by `damage` (given the file's bytes and the offset
/// of the 50th create): zkd refuses to start naming file and offset and changes nothing,
/// `zkd datadir check` reports it, ZooKeeper refuses the directory too, and
/// `--recover-truncate` starts with the 49 creates before the damage and says what it
/// dropped.
async fn damaged_log_is_refused(damage: fn(&mut Vec<u8>, usize)) {
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("data");
    let (log, creates) = hundred_writes_in_the_log(&data).await;
    let at = creates[49];
    let mut bytes = std::fs::read(&log).unwrap();
    damage(&mut bytes, at as usize);
    std::fs::write(&log, &bytes).unwrap();
    let before = contents(&data);
    let name = log.file_name().unwrap().to_string_lossy().into_owned();

    let (child, _) = run_zkd_binary(&data, &[]);
    let (code, stderr) = exit_of(child);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&name) && stderr.contains(&format!("offset {at}")),
        "names file and offset: {stderr}"
    );
    assert!(stderr.contains("refusing to start"), "{stderr}");
    assert!(
        before == contents(&data),
        "the data directory changed when zkd refused it"
    );

    // The check command reports the damage (and changes nothing either).
    let (code, stdout) = datadir_check(&data);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("damaged") && stdout.contains(&format!("offset {at}")),
        "{stdout}"
    );
    assert!(
        stdout.contains("the damaged entry and the 50 valid entries after it"),
        "counts what follows: {stdout}"
    );
    assert!(before == contents(&data));

    // ZooKeeper 3.8, on a copy, refuses the same directory (it does not serve the later
    // writes).
    zookeeper_refuses(Launcher::new(), &before, "the damaged directory", "/n099").await;

    // Asked to, zkd starts without the transactions from the damage on and says so.
    let (tree, stderr) = recovered(&data).await;
    assert!(
        tree.contains_key("/n048"),
        "the creates before the damage are kept"
    );
    assert!(!tree.contains_key("/n049") && !tree.contains_key("/n099"));
    assert!(
        stderr.contains(&format!(
            "dropped the damaged entry and the 50 valid entries after it: {} bytes from \
             offset {at}",
            bytes.len() as u64 - at
        )),
        "says what it dropped: {stderr}"
    );
    let kept = std::fs::read(
        data.join("version-2")
            .join(format!("dropped.{name}.from-{at}")),
    )
    .expect("the dropped bytes are kept beside the log");
    assert_eq!(kept, bytes[at as usize..]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flipped_bit_in_the_newest_log_refuses_to_start() {
    // One bit of the 50th create's transaction bytes (past the 12-byte checksum and length).
    damaged_log_is_refused(|bytes, at| bytes[at + 30] ^= 0x04).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_impossible_entry_length_in_the_newest_log_refuses_to_start() {
    damaged_log_is_refused(|bytes, at| {
        bytes[at + 8..at + 12].copy_from_slice(&0x7fff_ffffi32.to_be_bytes())
    })
    .await;
}

/// Under `--fsync always`, 300 creates acknowledged, zkd killed (SIGKILL), then one bit
/// flipped inside the final entry of the newest log. The entry is whole — its length and
/// end-of-record byte are intact — so it was written completely and changed since: not an
/// interrupted write, and the create it holds was acknowledged. zkd refuses to start (exit 1,
/// naming the log and the entry's offset) and changes nothing; `zkd datadir check` reports
/// it; ZooKeeper 3.8 and 3.9 refuse a copy ("CRC check failed"); `--recover-truncate` starts
/// with the 299 creates before it and keeps the entry's bytes beside the log.
#[tokio::test(flavor = "multi_thread")]
async fn a_flipped_bit_in_the_final_whole_entry_refuses_to_start() {
    use zkd_protocol::disk::{txnlog, TxnBody};
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let (mut child, _) = run_zkd_binary(&data, &["--fsync", "always"]);
    let addr = listening_addr(&mut child);
    let c = client(addr).await;
    for i in 0..300 {
        ok(
            &c,
            create(&format!("/n{i:03}"), Some(b"v"), Acl::open_unsafe(), 0),
        )
        .await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    c.abort().await;

    let log = files(&data, "log.").pop().expect("a log");
    let mut bytes = std::fs::read(&log).unwrap();
    let scan = txnlog::scan(&bytes[..], LOG_LIMIT).unwrap();
    let (at, last) = scan.entries.last().expect("entries");
    assert!(
        matches!(&last.body, TxnBody::Create(c) if c.node.path == "/n299"),
        "{last:?}"
    );
    let at = *at as usize;
    bytes[at + 30] ^= 0x04;
    std::fs::write(&log, &bytes).unwrap();
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    let before = contents(&data);

    let offset = format!("offset {at}");
    refused_and_reported(
        &data,
        &[&name, &offset, "checksum mismatch"],
        &[&name, &offset, "checksum mismatch", "damaged"],
    );
    // ZooKeeper refuses a copy too, in both releases.
    for version in [ZookeeperVersion::V3_8, ZookeeperVersion::V3_9] {
        let launcher = Launcher::new().version(version);
        let what = format!("the damaged log ({version:?})");
        zookeeper_refuses(launcher, &before, &what, "/n298").await;
    }

    // Asked to, zkd starts without it and keeps its bytes.
    let (tree, stderr) = recovered(&data).await;
    assert!(tree.contains_key("/n298") && !tree.contains_key("/n299"));
    let kept = format!("dropped.{name}.from-{at}");
    assert!(stderr.contains(&kept), "says what it cut: {stderr}");
    assert_eq!(contents(&data)[&kept], bytes[at..]);
}

/// A log file missing between two others (deleted by hand, or left out of a copy): the next
/// log starts after a gap, so its transactions would be replayed onto a tree without the
/// acknowledged writes in between. zkd refuses to start, naming the log, the offset of its
/// first entry and the zxids missing, and changes nothing; `zkd datadir check` says the
/// same; `--recover-truncate` starts with what comes before the gap and sets the log aside.
/// ZooKeeper 3.8 does not check this: on a copy it starts and serves the write after the gap.
#[tokio::test(flavor = "multi_thread")]
async fn a_log_after_missing_transactions_refuses_to_start() {
    use zkd_protocol::disk::txnlog;
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("data");
    let log = creates_only_in_the_log(&data, &[("/a", b"1"), ("/b", b"2")]).await;
    let last = last_zxid_in(&std::fs::read(&log).unwrap());
    // The log of transactions last+1 and last+2 is gone; the next one starts at last+3.
    let next = last + 3;
    let mut later = txnlog::file_header().to_vec();
    later.extend_from_slice(&entry(next, "/later"));
    let name = format!("log.{next:x}");
    std::fs::write(data.join("version-2").join(&name), &later).unwrap();
    let before = contents(&data);
    let offset = txnlog::HEADER_LEN;
    let missing = format!(
        "transactions 0x{:x} to 0x{:x} are missing",
        last + 1,
        last + 2
    );

    let at = format!("at offset {offset}");
    refused_and_reported(
        &data,
        &[&name, &at, &missing],
        &[&missing, &format!("the 1 entries of {name}")],
    );
    // ZooKeeper, on a copy, replays the later log over the gap.
    zookeeper_serves(&before, &["/a", "/later"]).await;

    // Asked to, zkd starts with what precedes the gap and sets the later log aside.
    let (tree, stderr) = recovered(&data).await;
    assert!(tree.contains_key("/a") && tree.contains_key("/b"));
    assert!(!tree.contains_key("/later"));
    assert!(
        stderr.contains("dropped the log") && stderr.contains(&format!("dropped.{name}")),
        "says what it set aside: {stderr}"
    );
    let after = contents(&data);
    assert!(!after.contains_key(&name));
    assert_eq!(after[&format!("dropped.{name}")], later);
}

/// Entries cut out of the middle of a log (by hand, or by a tool that rewrote the file): the
/// entries after the cut are whole and their checksums hold, but their zxids jump past the
/// missing ones. zkd refuses to start, naming the log, the entry's offset and the zxids
/// missing, and changes nothing; `zkd datadir check` says the same; `--recover-truncate`
/// cuts the log at that entry, keeping the bytes from there beside it. ZooKeeper 3.8 does
/// not check this either: on a copy it starts and serves the writes after the jump.
#[tokio::test(flavor = "multi_thread")]
async fn a_log_whose_zxids_jump_refuses_to_start() {
    use zkd_protocol::disk::txnlog::{self, LogEnd};
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("data");
    let log = creates_only_in_the_log(&data, &[("/a", b"1"), ("/b", b"2")]).await;
    let mut bytes = std::fs::read(&log).unwrap();
    let last = last_zxid_in(&bytes);
    match txnlog::scan(&bytes[..], LOG_LIMIT).unwrap().end {
        LogEnd::Padding(at) => bytes.truncate(at as usize),
        end => assert_eq!(end, LogEnd::Clean),
    }
    // Transaction last+1 is cut out; last+2 and last+3 follow /b directly.
    let offset = bytes.len();
    let mut tail = entry(last + 2, "/later").to_vec();
    tail.extend_from_slice(&entry(last + 3, "/latest"));
    bytes.extend_from_slice(&tail);
    std::fs::write(&log, &bytes).unwrap();
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    let before = contents(&data);
    let jump = format!(
        "{name} jumps from zxid 0x{last:x} to 0x{:x} at offset {offset}",
        last + 2
    );
    let missing = format!(
        "transactions 0x{:x} to 0x{:x} are missing",
        last + 1,
        last + 1
    );

    refused_and_reported(
        &data,
        &[&jump, &missing],
        &[
            &jump,
            &format!("the 2 entries from there to the end of {name}"),
        ],
    );
    // ZooKeeper, on a copy, replays the entries after the jump.
    zookeeper_serves(&before, &["/b", "/latest"]).await;

    // Asked to, zkd starts with the entries before the jump and keeps the rest beside the log.
    let (tree, stderr) = recovered(&data).await;
    assert!(tree.contains_key("/a") && tree.contains_key("/b"));
    assert!(!tree.contains_key("/later") && !tree.contains_key("/latest"));
    let kept = format!("dropped.{name}.from-{offset}");
    assert!(
        stderr.contains("dropped the 2 entries from there on") && stderr.contains(&kept),
        "says what it cut: {stderr}"
    );
    let after = contents(&data);
    assert_eq!(after[&name], bytes[..offset]);
    assert_eq!(after[&kept], tail);
}

/// zkd refuses to start on `data` (exit 1, saying each of `start_says` and that it refuses),
/// `zkd datadir check` reports the damage (exit 1, saying each of `check_says`), and neither
/// changes a file.
fn refused_and_reported(data: &Path, start_says: &[&str], check_says: &[&str]) {
    let before = contents(data);
    let (child, _) = run_zkd_binary(data, &[]);
    let (code, stderr) = exit_of(child);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        start_says.iter().all(|s| stderr.contains(s)) && stderr.contains("refusing to start"),
        "{stderr}"
    );
    assert!(before == contents(data), "nothing changed");
    let (code, stdout) = datadir_check(data);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(check_says.iter().all(|s| stdout.contains(s)), "{stdout}");
    assert!(before == contents(data), "nothing changed");
}

/// ZooKeeper, started on a copy of `files` (as [`contents`] gives them), serves every one of
/// `paths`.
async fn zookeeper_serves(files: &BTreeMap<String, Vec<u8>>, paths: &[&str]) {
    let copy = zookeeper_copy(files);
    let zk = Launcher::new()
        .start_in(copy.path(), None)
        .expect("ZooKeeper starts");
    let tree = dump(zk.addr()).await;
    assert!(
        paths.iter().all(|p| tree.contains_key(*p)),
        "{:?}",
        tree.keys()
    );
}
