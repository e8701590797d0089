//! The offline snapshot tool and the fixture round trip through the `zkd` binary:
//! `zkd snapshot dump` on a snapshot written by Apache ZooKeeper, `zkd snapshot convert`,
//! clear errors on bad files, and `--seed` → `zkd ctl export` → `--seed` round trips.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use bytes::Bytes;
use serde_json::{json, Value};
use zkd_protocol::{GetDataResponse, PathWatchRequest, Request};
use zkd_testkit::oracle::Launcher;
use zkd_testkit::raw::{self, RawClient};

mod common;

fn zkd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zkd"))
        .args(args)
        .output()
        .expect("zkd runs")
}

/// A running `zkd` with `args`; returns it with its client and admin addresses.
fn serve(args: &[&str]) -> (Child, SocketAddr, Option<String>) {
    let args = [&["--port", "0", "--log", "warn"], args].concat();
    let (child, mut out, addr) = common::start_zkd(&args, Stdio::inherit());
    let admin = args
        .contains(&"--admin-port")
        .then(|| common::announced(&mut out, "zkd admin on "));
    (child, addr, admin)
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `zkd ARGS` exits with `code` and a standard error that contains `expected`.
fn fails(args: &[&str], code: i32, expected: &str) {
    let out = zkd(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.contains(expected), "{err}");
}

async fn create(c: &RawClient, path: &str, data: &[u8]) {
    let req = raw::create(path, Some(Bytes::copy_from_slice(data)), 0);
    assert_eq!(c.call(&req).await.expect("reply").err, 0, "create {path}");
}

async fn get(addr: SocketAddr, path: &str) -> Option<Bytes> {
    let c = RawClient::connect(addr, 30_000).await.expect("connect");
    let r = c
        .call(&Request::GetData(PathWatchRequest {
            path: path.into(),
            watch: false,
        }))
        .await
        .expect("reply");
    assert_eq!(r.err, 0, "getData {path}");
    r.decode::<GetDataResponse>().expect("body").data
}

fn newest_snapshot(data: &Path) -> std::path::PathBuf {
    let mut snaps: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(data.join("version-2"))
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name()?.to_str()?.to_string();
            let z = u64::from_str_radix(name.strip_prefix("snapshot.")?, 16).ok()?;
            Some((z, p))
        })
        .collect();
    snaps.sort();
    snaps.pop().expect("a snapshot").1
}

#[tokio::test(flavor = "multi_thread")]
async fn dump_prints_a_zookeeper_snapshot() {
    let base = tempfile::tempdir().unwrap();
    let zk = Launcher::new()
        .start_in(base.path(), None)
        .expect("ZooKeeper starts");
    let c = RawClient::connect(zk.addr(), 30_000)
        .await
        .expect("connect");
    create(&c, "/app", b"hello from zookeeper").await;
    create(&c, "/app/bin", &[0, 1, 2, 255]).await;
    drop(c);
    drop(zk);
    // On restart ZooKeeper replays its log and snapshots the result.
    drop(
        Launcher::new()
            .start_in(base.path(), None)
            .expect("restarts"),
    );
    let snap = newest_snapshot(&base.path().join("data"));
    let snap = snap.to_str().unwrap();

    let out = zkd(&["snapshot", "dump", snap]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listing = text(&out.stdout);
    assert!(
        listing.contains("app = \"hello from zookeeper\""),
        "{listing}"
    );
    assert!(listing.contains("  bin = <4 bytes>"), "{listing}");

    let out = zkd(&["snapshot", "dump", "--format", "json", snap]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let nodes = doc["nodes"].as_array().expect("nodes");
    let app = nodes.iter().find(|n| n["path"] == "/app").expect("/app");
    assert_eq!(app["data"], "hello from zookeeper");
    let bin = nodes
        .iter()
        .find(|n| n["path"] == "/app/bin")
        .expect("/app/bin");
    assert_eq!(bin["data_base64"], "AAEC/w==");
    assert_eq!(app["stat"]["numChildren"], 1);
}

#[test]
fn bad_files_give_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let junk = tmp.path().join("snapshot.5");
    std::fs::write(&junk, b"this is not a snapshot at all").unwrap();
    let out = zkd(&["snapshot", "dump", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("is not a readable snapshot: not a snapshot file") && err.contains("offset 0"),
        "{err}"
    );
    let missing = tmp.path().join("missing");
    fails(
        &["snapshot", "dump", missing.to_str().unwrap()],
        1,
        "cannot read",
    );

    let bad_json = tmp.path().join("bad.json");
    std::fs::write(&bad_json, r#"{"nodes":[{"path":"/e","ephemeral":true}]}"#).unwrap();
    fails(
        &[
            "snapshot",
            "convert",
            bad_json.to_str().unwrap(),
            tmp.path().to_str().unwrap(),
        ],
        1,
        "node 1 (/e): ephemeral nodes cannot be seeded",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_zkd"))
        .args(["--seed", bad_json.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("invalid --seed"),
        "{}",
        text(&out.stderr)
    );
}

/// A fixture of every kind of node. `/svc/cfg` has a digest entry; `world:anyone` may
/// administer it, so the admin listener's export shows the entry whole (as `getACL` would) and
/// the export seeds the same tree.
fn fixture() -> Value {
    json!({ "nodes": [
        { "path": "/svc", "data": "service root" },
        { "path": "/svc/cfg", "data_base64": "AAEC/w==", "acl": [
            { "perms": "cdrwa", "scheme": "digest", "id": "user:smGaoVKd/cQkjm7b88GyorAUz20=" },
            { "perms": "ra", "scheme": "world", "id": "anyone" } ] },
        { "path": "/svc/null", "data": null },
        { "path": "/deep/a/b", "data": "parents are created" },
        { "path": "/jobs", "container": true },
        { "path": "/cache", "ttl_ms": 3600000 }
    ] })
}

/// Nodes without their Stats, for comparing exports.
fn without_stats(doc: &Value) -> Vec<Value> {
    doc["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            let mut n = n.clone();
            n.as_object_mut().unwrap().remove("stat");
            n
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn seed_export_seed_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed.json");
    std::fs::write(&seed, fixture().to_string()).unwrap();
    let (child, addr, admin) = serve(&["--seed", seed.to_str().unwrap(), "--admin-port", "0"]);
    let admin = admin.expect("admin address");
    assert_eq!(
        get(addr, "/svc").await.as_deref(),
        Some(&b"service root"[..])
    );
    let first = tmp.path().join("first.json");
    let out = zkd(&[
        "ctl",
        "--admin",
        &admin,
        "export",
        "--out",
        first.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Without a data directory there is nowhere to snapshot: a clear refusal.
    fails(
        &["ctl", "--admin", &admin, "snapshot"],
        1,
        "no data directory",
    );
    stop(child);

    let exported: Value = serde_json::from_str(&std::fs::read_to_string(&first).unwrap()).unwrap();
    let paths: Vec<&str> = exported["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "/cache",
            "/deep",
            "/deep/a",
            "/deep/a/b",
            "/jobs",
            "/svc",
            "/svc/cfg",
            "/svc/null"
        ]
    );
    // Every field of the fixture is in the export.
    for node in fixture()["nodes"].as_array().unwrap() {
        let got = exported["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["path"] == node["path"])
            .unwrap();
        for (k, v) in node.as_object().unwrap() {
            assert_eq!(&got[k], v, "{k} of {}", node["path"]);
        }
    }

    // The export seeds an identical tree.
    let data = tmp.path().join("data");
    let (child, _, admin) = serve(&[
        "--seed",
        first.to_str().unwrap(),
        "--admin-port",
        "0",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    let admin = admin.expect("admin address");
    let out = zkd(&["ctl", "--admin", &admin, "export"]);
    assert!(out.status.success());
    let second: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(without_stats(&second), without_stats(&exported));
    let out = zkd(&["ctl", "--admin", &admin, "snapshot"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("snapshot 0x"),
        "{}",
        text(&out.stdout)
    );
    stop(child);
}

#[tokio::test(flavor = "multi_thread")]
async fn convert_makes_a_snapshot_zkd_and_zookeeper_start_from() {
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed.json");
    std::fs::write(&seed, fixture().to_string()).unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let out = zkd(&[
        "snapshot",
        "convert",
        seed.to_str().unwrap(),
        data.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("wrote "));

    let (child, addr, _) = serve(&["--data-dir", data.to_str().unwrap()]);
    assert_eq!(
        get(addr, "/deep/a/b").await.as_deref(),
        Some(&b"parents are created"[..])
    );
    assert_eq!(get(addr, "/svc/null").await, None);
    stop(child);

    let zk = Launcher::new()
        .start_in(tmp.path(), None)
        .expect("ZooKeeper starts");
    assert_eq!(
        get(zk.addr(), "/svc/cfg").await.as_deref(),
        Some(&[0u8, 1, 2, 255][..])
    );
}

/// zkd started on `data` must end on its own (within 30 s): its exit code and stderr.
fn start_refused(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkd"))
        .args(["--port", "0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zkd runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            return (status.code(), err);
        }
        if std::time::Instant::now() > deadline {
            stop(child);
            panic!("zkd {args:?} did not stop within 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn hostile_data_files_are_refused_without_reading_them_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dir = data.join("version-2");
    std::fs::create_dir_all(&dir).unwrap();
    let data_arg = data.to_str().unwrap();

    // A 512 MiB sparse snapshot: a valid header, then zeros (no real blocks). It is refused
    // at the first impossible record, not read whole.
    let snap = dir.join("snapshot.5");
    let mut head = b"ZKSN".to_vec();
    head.extend_from_slice(&2i32.to_be_bytes());
    head.extend_from_slice(&(-1i64).to_be_bytes());
    std::fs::write(&snap, &head).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&snap)
        .unwrap()
        .set_len(512 << 20)
        .unwrap();
    let (code, err) = start_refused(&["--data-dir", data_arg]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("no readable snapshot")
            && err.contains("snapshot.5 damaged: ")
            && err.contains("at offset"),
        "{err}"
    );
    let out = zkd(&["datadir", "check", data_arg]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("damaged"),
        "{}",
        text(&out.stdout)
    );
    fails(&["snapshot", "dump", snap.to_str().unwrap()], 1, "offset");
    std::fs::remove_file(&snap).unwrap();

    // A FIFO named like a snapshot or a log: refused with a sentence, never opened (opening
    // a FIFO for reading would wait for a writer forever).
    for name in ["snapshot.7", "log.8"] {
        let fifo = dir.join(name);
        let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(made.success());
        let (code, err) = start_refused(&["--data-dir", data_arg]);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(&format!("{name} is a FIFO, not a regular file")),
            "{err}"
        );
        let out = zkd(&["datadir", "check", data_arg]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
        std::fs::remove_file(&fifo).unwrap();
    }

    // A directory named like a log.
    std::fs::create_dir(dir.join("log.9")).unwrap();
    let (code, err) = start_refused(&["--data-dir", data_arg]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("log.9 is a directory"), "{err}");
    std::fs::remove_dir(dir.join("log.9")).unwrap();

    let nothing = tmp.path().join("nothing");
    fails(
        &["datadir", "check", nothing.to_str().unwrap()],
        2,
        "is not a data directory",
    );
}

#[test]
fn datadir_check_reports_a_healthy_directory_and_a_torn_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (child, addr, _) = serve(&["--data-dir", data.to_str().unwrap()]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = RawClient::connect(addr, 30_000).await.expect("connect");
        create(&c, "/a", b"1").await;
        create(&c, "/b", b"2").await;
    });
    stop(child); // killed: the creates are only in the log
    let out = zkd(&["datadir", "check", data.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("complete") && stdout.contains("ok: "),
        "{stdout}"
    );

    // Cut the last entry in the middle: an incomplete final entry is not damage; the check
    // says a start cuts it off, and changes nothing itself.
    let log = std::fs::read_dir(data.join("version-2"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("log."))
        .expect("a log");
    let len = std::fs::metadata(&log).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    let out = zkd(&["datadir", "check", data.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("incomplete final entry"), "{stdout}");
    assert_eq!(std::fs::metadata(&log).unwrap().len(), len - 5);
}
