//! Durability of the `zkd` binary under `kill -9`: clients write as fast as they can, the
//! process is killed mid-load, and a restart on the same data directory must hold every
//! write a client saw acknowledged (for each `--fsync` policy: killing the process loses
//! nothing under any of them; the policies differ only on power loss), also when snapshots
//! are being taken during the load. Under `always`, readers of other sessions never see a
//! value the kill could still take away. And a log that cannot be written stops the binary
//! with an ERROR line and exit code 1 before anything is acknowledged.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use zkd_protocol::{GetDataResponse, PathWatchRequest, Request, SetDataRequest};
use zkd_testkit::raw::{self, RawClient};

mod common;

/// Starts `zkd` on a free port with `args`; returns the child and its client address.
fn start(data: &Path, fsync: &str, extra: &[&str], stderr: Stdio) -> (Child, SocketAddr) {
    let data = data.to_str().expect("a UTF-8 data directory");
    let args = [
        &[
            "--port",
            "0",
            "--log",
            "warn",
            "--fsync",
            fsync,
            "--data-dir",
            data,
        ],
        extra,
    ]
    .concat();
    let (child, _, addr) = common::start_zkd(&args, stderr);
    (child, addr)
}

/// Pipelined creates from one client until the connection dies; acknowledged paths go to
/// `acked`.
async fn writer(addr: SocketAddr, id: usize, acked: Arc<Mutex<BTreeSet<String>>>) {
    writer_of(addr, id, acked, Bytes::from_static(b"payload")).await
}

/// [`writer`] with `payload` as each node's data.
async fn writer_of(
    addr: SocketAddr,
    id: usize,
    acked: Arc<Mutex<BTreeSet<String>>>,
    payload: Bytes,
) {
    let Ok(c) = RawClient::connect(addr, 30_000).await else {
        return;
    };
    let mut inflight = std::collections::VecDeque::new();
    for i in 0.. {
        let path = format!("/load/w{id}-{i:08}");
        let req = raw::create(&path, Some(payload.clone()), 0);
        let Ok(rx) = c.send(&req).await else { break };
        inflight.push_back((path, rx));
        if inflight.len() >= 16 {
            let Some((path, rx)) = inflight.pop_front() else {
                break;
            };
            match rx.await {
                Ok(reply) if reply.err == 0 => {
                    acked.lock().unwrap().insert(path);
                }
                Ok(reply) => panic!("create failed with {}", reply.err),
                Err(_) => break,
            }
        }
    }
    // Replies already received before the kill count too.
    while let Some((path, rx)) = inflight.pop_front() {
        match rx.await {
            Ok(reply) if reply.err == 0 => {
                acked.lock().unwrap().insert(path);
            }
            _ => break,
        }
    }
}

async fn kill_under_load(fsync: &str, extra: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(tmp.path(), fsync, extra, Stdio::inherit());
    let setup = RawClient::connect(addr, 30_000).await.expect("connect");
    create_empty(&setup, "/load").await;

    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    // 16 clients with 16 creates in flight each: with `always`, each sync covers many of
    // them (group commit), and the kill lands among writes applied but not yet synced.
    let writers: Vec<_> = (0..16)
        .map(|id| tokio::spawn(writer(addr, id, acked.clone())))
        .collect();
    // Let the load run (with snapshots: until two were written), then kill the process
    // without warning.
    let snapshots = || {
        std::fs::read_dir(tmp.path().join("version-2"))
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with("snapshot.")
            })
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if acked.lock().unwrap().len() >= 300 && (extra.is_empty() || snapshots() >= 2) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "--fsync {fsync}: {} writes acknowledged and {} snapshots after 60 s",
            acked.lock().unwrap().len(),
            snapshots()
        );
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    for w in writers {
        let _ = w.await;
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 300);

    let (mut child, addr) = start(tmp.path(), fsync, &[], Stdio::inherit());
    let missing = missing(addr, &acked).await;
    child.kill().expect("stop");
    child.wait().expect("reaped");
    none_lost(
        fsync,
        &missing,
        acked.len(),
        "acknowledged writes lost after kill -9",
    );
}

/// Fails when `lost` (of `of` paths checked, `what` they are) is not empty, naming the first.
fn none_lost(fsync: &str, lost: &[String], of: usize, what: &str) {
    assert!(
        lost.is_empty(),
        "--fsync {fsync}: {} of {of} {what}, e.g. {:?}",
        lost.len(),
        lost.first()
    );
}

/// Creates the persistent node `path` with no data through `c`, and insists it was created.
async fn create_empty(c: &RawClient, path: &str) {
    let req = raw::create(path, None, 0);
    assert_eq!(c.call(&req).await.expect("reply").err, 0, "create {path}");
}

/// The paths of `acked` the server at `addr` does not hold.
async fn missing(addr: SocketAddr, acked: &BTreeSet<String>) -> Vec<String> {
    let c = RawClient::connect(addr, 30_000).await.expect("connect");
    let mut missing = Vec::new();
    for path in acked {
        let req = Request::Exists(PathWatchRequest {
            path: path.clone(),
            watch: false,
        });
        if c.call(&req).await.expect("reply").err != 0 {
            missing.push(path.clone());
        }
    }
    missing
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_loses_no_acknowledged_write_with_fsync_always() {
    kill_under_load("always", &[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_loses_no_acknowledged_write_with_fsync_batch() {
    kill_under_load("batch", &[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_loses_no_acknowledged_write_with_fsync_never() {
    kill_under_load("never", &[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_during_snapshots_loses_no_acknowledged_write() {
    // A snapshot every 50 transactions: the kill lands while snapshots are being encoded
    // between requests and written (and, with `always`, while rolled-away log files still
    // wait for their sync).
    for fsync in ["always", "batch", "never"] {
        kill_under_load(fsync, &["--snap-count", "50"]).await;
    }
}

/// The counter in a node's data (0 for anything else).
fn counter(data: Option<&[u8]>) -> u64 {
    data.and_then(|d| std::str::from_utf8(d).ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Sets `{prefix}{key}` to 1, 2, 3, … with 16 writes in flight, until the connection dies.
async fn counting_writer(addr: SocketAddr, prefix: String, key: usize) {
    let Ok(c) = RawClient::connect(addr, 30_000).await else {
        return;
    };
    let mut inflight = std::collections::VecDeque::new();
    for i in 1u64.. {
        let req = Request::SetData(SetDataRequest {
            path: format!("{prefix}{key}"),
            data: Some(Bytes::from(i.to_string())),
            version: -1,
        });
        let Ok(rx) = c.send(&req).await else { break };
        inflight.push_back(rx);
        if inflight.len() >= 16 {
            let Some(rx) = inflight.pop_front() else {
                break;
            };
            match rx.await {
                Ok(reply) if reply.err == 0 => {}
                Ok(reply) => panic!("setData failed with {}", reply.err),
                Err(_) => break,
            }
        }
    }
}

/// Reads every key `{prefix}{key}` over and over (a few reads in flight) until the
/// connection dies, raising `seen[key]` to the highest counter any reply showed.
async fn counting_reader(addr: SocketAddr, prefix: String, seen: Arc<Mutex<Vec<u64>>>) {
    let Ok(c) = RawClient::connect(addr, 30_000).await else {
        return;
    };
    let keys = seen.lock().unwrap().len();
    let mut inflight = std::collections::VecDeque::new();
    for i in 0.. {
        let key = i % keys;
        let req = Request::GetData(PathWatchRequest {
            path: format!("{prefix}{key}"),
            watch: false,
        });
        let Ok(rx) = c.send(&req).await else { break };
        inflight.push_back((key, rx));
        if inflight.len() >= 4 {
            let Some((key, rx)) = inflight.pop_front() else {
                break;
            };
            let Ok(reply) = rx.await else { break };
            let data = reply.decode::<GetDataResponse>().expect("a getData reply");
            let v = counter(data.data.as_deref());
            let mut seen = seen.lock().unwrap();
            seen[key] = seen[key].max(v);
        }
    }
}

/// The keys of round `round` whose counter in the server at `addr` is below what a reader
/// saw: (key, seen, now).
async fn values_lost(addr: SocketAddr, round: usize, seen: &[u64]) -> Vec<(usize, u64, u64)> {
    let c = RawClient::connect(addr, 30_000).await.expect("connect");
    let mut lost = Vec::new();
    for (key, &saw) in seen.iter().enumerate() {
        let req = Request::GetData(PathWatchRequest {
            path: format!("/vals/r{round}k{key}"),
            watch: false,
        });
        let reply = c.call(&req).await.expect("reply");
        let data = reply.decode::<GetDataResponse>().expect("a getData reply");
        let now = counter(data.data.as_deref());
        if now < saw {
            lost.push((key, saw, now));
        }
    }
    lost
}

/// Under `always`, writers count up their keys while several reader sessions read them;
/// the process is killed mid-run, restarted on its directory, and this is done a few times.
/// Every counter value any reader saw must be in the restarted server (its key holds that
/// value or a later one): a read never showed a write that was not yet on disk. Before
/// reads waited for the sync of what they show, they saw writes still buffered for the
/// sync thread, which the kill took away.
#[tokio::test(flavor = "multi_thread")]
async fn kill_9_loses_no_value_a_reader_saw_with_fsync_always() {
    const KEYS: usize = 8;
    const ROUNDS: usize = 6;
    let tmp = tempfile::tempdir().unwrap();
    let mut before: Option<(usize, Vec<u64>)> = None;
    let mut lost = Vec::new();
    for round in 0..=ROUNDS {
        let (mut child, addr) = start(tmp.path(), "always", &[], Stdio::inherit());
        if let Some((r, seen)) = before.take() {
            let gone = values_lost(addr, r, &seen).await;
            if !gone.is_empty() {
                lost.push((r, gone, seen));
            }
        }
        if round == ROUNDS {
            child.kill().expect("stop");
            child.wait().expect("reaped");
            break;
        }
        let prefix = format!("/vals/r{round}k");
        let setup = RawClient::connect(addr, 30_000).await.expect("connect");
        if round == 0 {
            create_empty(&setup, "/vals").await;
        }
        for key in 0..KEYS {
            let req = raw::create(&format!("{prefix}{key}"), Some(Bytes::from_static(b"0")), 0);
            assert_eq!(setup.call(&req).await.expect("reply").err, 0);
        }
        let seen = Arc::new(Mutex::new(vec![0u64; KEYS]));
        let mut tasks: Vec<_> = (0..KEYS)
            .map(|key| tokio::spawn(counting_writer(addr, prefix.clone(), key)))
            .collect();
        tasks.extend(
            (0..4).map(|_| tokio::spawn(counting_reader(addr, prefix.clone(), seen.clone()))),
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if seen.lock().unwrap().iter().sum::<u64>() >= 1_000 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "readers saw {:?} after 30 s",
                seen.lock().unwrap()
            );
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        for t in tasks {
            let _ = t.await;
        }
        let seen = seen.lock().unwrap().clone();
        before = Some((round, seen));
    }
    assert!(
        lost.is_empty(),
        "values readers saw are gone after kill -9 (round, [(key, seen, after restart)], \
         seen): {lost:?}"
    );
}

/// Waits for `child` to exit, polling every 50 ms at most `polls` times; kills it and fails
/// with `stuck` when it is still running.
async fn exit_within(child: &mut Child, polls: usize, stuck: &str) -> std::process::ExitStatus {
    for _ in 0..polls {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{stuck}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_log_device_stops_zkd_with_an_error_and_exit_code_1() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(tmp.path(), "always", &[], Stdio::piped());
    // Started on an empty directory: the first transaction (the next session) opens
    // log.1, here the full device, where every write fails with ENOSPC.
    let log = tmp.path().join("version-2").join("log.1");
    std::os::unix::fs::symlink("/dev/full", &log).unwrap();
    let connected = RawClient::connect(addr, 30_000).await;
    assert!(
        connected.is_err(),
        "a session the log could not take was granted"
    );
    let status = exit_within(&mut child, 600, "zkd still runs after its log failed").await;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ERROR")
            // With `always` the sync thread writes each group, the new file's header too.
            && stderr.contains("cannot write the transaction log in")
            && stderr.contains("No space left on device"),
        "{stderr}"
    );
    std::fs::remove_file(&log).unwrap();
}

/// A tmpfs mounted for a test, unmounted when dropped.
struct Mounted(std::path::PathBuf);

impl Mounted {
    /// Mounts a tmpfs of `size` at `at`. Mounting needs root: without it the test fails
    /// saying so (a disk-full run is part of the durability checks, never skipped).
    fn tmpfs(at: &Path, size: &str) -> Mounted {
        Self::mount(
            at,
            &["-t", "tmpfs", "-o", &format!("size={size}")],
            Path::new("tmpfs"),
        )
    }

    /// Mounts a fresh ext4 file system of `size` bytes at `at`, on a loop device over an
    /// image file next to it: a disk whose syncs take the time a journal commit takes, so
    /// that writes wait for them as on a real disk (a tmpfs syncs at once).
    fn ext4(at: &Path, size: u64) -> Mounted {
        let img = at.with_extension("img");
        std::fs::File::create(&img).unwrap().set_len(size).unwrap();
        let mut mkfs = std::process::Command::new("mkfs.ext4");
        mkfs.args(["-q", "-F"]).arg(&img);
        common::succeeds(
            &mut mkfs,
            &format!("mkfs.ext4 (e2fsprogs) {}", img.display()),
        );
        Self::mount(at, &["-o", "loop"], &img)
    }

    /// `mount ARGS SOURCE AT`, as root (the test fails saying why otherwise).
    fn mount(at: &Path, args: &[&str], source: &Path) -> Mounted {
        let uid = std::process::Command::new("id")
            .arg("-u")
            .output()
            .expect("id runs");
        let uid = String::from_utf8_lossy(&uid.stdout).trim().to_string();
        assert_eq!(
            uid, "0",
            "the disk-full test mounts a small file system as the data directory, which needs \
             root (uid 0, with the right to mount); this run has uid {uid}"
        );
        std::fs::create_dir_all(at).unwrap();
        let mut mount = std::process::Command::new("mount");
        mount.args(args).arg(source).arg(at);
        let what = format!(
            "mount {} at {} for the disk-full test",
            source.display(),
            at.display()
        );
        common::succeeds(&mut mount, &what);
        Mounted(at.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Lists `/load` over and over until the connection dies, adding every child it saw to
/// `seen`.
async fn listing_reader(addr: SocketAddr, seen: Arc<Mutex<BTreeSet<String>>>) {
    let Ok(c) = RawClient::connect(addr, 30_000).await else {
        return;
    };
    let req = Request::GetChildren(PathWatchRequest {
        path: "/load".into(),
        watch: false,
    });
    while let Ok(reply) = c.call(&req).await {
        let names = reply.decode::<Vec<String>>().expect("a child list");
        seen.lock()
            .unwrap()
            .extend(names.into_iter().map(|n| format!("/load/{n}")));
    }
}

/// zkd with `--fsync fsync` on a 512 KiB tmpfs, 8 clients creating 2 KiB nodes until the
/// disk is full while 3 others list them: zkd stops with exit code 1 and an ERROR line
/// naming the full disk; its files, copied to a directory with room, start a zkd that holds
/// every create a client saw acknowledged and every node a reader saw listed. Under
/// `always` nothing was acknowledged or shown before it was synced; under `batch` nothing
/// before the operating system had it, which a clean stop (here the disk-full stop) keeps.
async fn full_disk_loses_no_acknowledged_write(fsync: &str, ext4: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let small = tmp.path().join("small");
    let mounted = if ext4 {
        Mounted::ext4(&small, 2 << 20)
    } else {
        Mounted::tmpfs(&small, "512k")
    };
    let (mut child, addr) = start(&small, fsync, &[], Stdio::piped());
    let setup = RawClient::connect(addr, 30_000).await.expect("connect");
    create_empty(&setup, "/load").await;
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let payload = Bytes::from(vec![b'x'; 2048]);
    let writers: Vec<_> = (0..8)
        .map(|id| tokio::spawn(writer_of(addr, id, acked.clone(), payload.clone())))
        .collect();
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let readers: Vec<_> = (0..3)
        .map(|_| tokio::spawn(listing_reader(addr, seen.clone())))
        .collect();
    let status = exit_within(
        &mut child,
        1200,
        &format!("--fsync {fsync}: zkd still runs after 60 s of writes to a small disk"),
    )
    .await;
    for t in writers.into_iter().chain(readers) {
        let _ = t.await;
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    assert_eq!(status.code(), Some(1), "--fsync {fsync}: {stderr}");
    assert!(
        stderr.contains("ERROR") && stderr.contains("No space left on device"),
        "--fsync {fsync}: {stderr}"
    );
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() >= 50,
        "--fsync {fsync}: only {} acknowledged",
        acked.len()
    );

    // The files, moved to a disk with room.
    let big = tmp.path().join("big").join("version-2");
    std::fs::create_dir_all(&big).unwrap();
    for e in std::fs::read_dir(small.join("version-2")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), big.join(e.file_name())).unwrap();
    }
    drop(mounted);
    let (mut child, addr) = start(&tmp.path().join("big"), fsync, &[], Stdio::inherit());
    eprintln!(
        "--fsync {fsync}: {} writes acknowledged, {} nodes seen by readers",
        acked.len(),
        seen.lock().unwrap().len()
    );
    let missing_acked = missing(addr, &acked).await;
    let seen = seen.lock().unwrap().clone();
    let missing_seen = missing(addr, &seen).await;
    child.kill().expect("stop");
    child.wait().expect("reaped");
    let what = "acknowledged writes lost after the disk filled";
    none_lost(fsync, &missing_acked, acked.len(), what);
    let what = "nodes readers saw are gone after the disk filled";
    none_lost(fsync, &missing_seen, seen.len(), what);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_loses_no_acknowledged_write_with_fsync_always() {
    full_disk_loses_no_acknowledged_write("always", false).await;
    full_disk_loses_no_acknowledged_write("always", true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_loses_no_acknowledged_write_with_fsync_batch() {
    full_disk_loses_no_acknowledged_write("batch", false).await;
    full_disk_loses_no_acknowledged_write("batch", true).await;
}

/// The "with a warning" half of crash safety, through the binary: a damaged newest snapshot
/// is skipped for the previous one and a torn log tail is cut, each reported on stderr with
/// the file and the offset, and no acknowledged write is lost.
#[tokio::test(flavor = "multi_thread")]
async fn damage_is_reported_with_the_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("version-2");
    let mut paths = Vec::new();
    for path in ["/a", "/b"] {
        // Each start snapshots what it replayed; the kill leaves the create in the log only.
        let (mut child, addr) = start(tmp.path(), "always", &[], Stdio::inherit());
        let c = RawClient::connect(addr, 30_000).await.expect("connect");
        create_empty(&c, path).await;
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        paths.push(path);
    }
    let newest = |prefix: &str| {
        let mut v: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let p = e.unwrap().path();
                let name = p.file_name()?.to_str()?.to_string();
                let z = u64::from_str_radix(name.strip_prefix(prefix)?, 16).ok()?;
                Some((z, p))
            })
            .collect();
        v.sort();
        v.pop().expect("a file").1
    };
    let (snap, log) = (newest("snapshot."), newest("log."));
    let mut bytes = std::fs::read(&snap).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&snap, bytes).unwrap();
    // A cut entry: checksum and length, but not the bytes.
    let mut tail = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut tail, &[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 50]).unwrap();
    drop(tail);

    let (mut child, addr) = start(tmp.path(), "always", &[], Stdio::piped());
    let c = RawClient::connect(addr, 30_000).await.expect("connect");
    for path in &paths {
        let req = Request::Exists(PathWatchRequest {
            path: path.to_string(),
            watch: false,
        });
        assert_eq!(c.call(&req).await.expect("reply").err, 0, "{path} lost");
    }
    child.kill().expect("stop");
    child.wait().expect("reaped");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    let line = |needle: &str| {
        stderr
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} line in:\n{stderr}"))
            .to_string()
    };
    let skipped = line("skipping damaged snapshot");
    assert!(skipped.contains("WARN") && skipped.contains(&*snap.to_string_lossy()));
    assert!(skipped.contains("offset"), "{skipped}");
    let cut = line("incomplete final entry");
    assert!(cut.contains("WARN") && cut.contains(&*log.to_string_lossy()));
    assert!(
        cut.contains("at offset ") && cut.contains("12 bytes"),
        "{cut}"
    );
}
