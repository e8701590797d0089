//! Durability of the `zkd` binary under `kill -9`: clients write as fast as they can, the
//! process is killed mid-load, and a restart on the same data directory must hold every
//! write a client saw acknowledged (for each `--fsync` policy: killing the process loses
//! nothing under any of them; the policies differ only on power loss).

use std::collections::BTreeSet;
use std::io::BufReader;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use zkd_protocol::{PathWatchRequest, Request};
use zkd_testkit::raw::{self, RawClient};

mod common;

/// Starts `zkd` on a free port with `args`; returns the child and its client address.
fn start(data: &Path, fsync: &str) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkd"))
        .args([
            "--port",
            "0",
            "--log",
            "warn",
            "--fsync",
            fsync,
            "--data-dir",
        ])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("zkd runs");
    let stdout = child.stdout.take().expect("stdout");
    let addr = common::listening_addr(&mut BufReader::new(stdout));
    (child, addr)
}

/// Pipelined creates from one client until the connection dies; acknowledged paths go to
/// `acked`.
async fn writer(addr: SocketAddr, id: usize, acked: Arc<Mutex<BTreeSet<String>>>) {
    let Ok(c) = RawClient::connect(addr, 30_000).await else {
        return;
    };
    let mut inflight = std::collections::VecDeque::new();
    for i in 0.. {
        let path = format!("/load/w{id}-{i:08}");
        let req = raw::create(&path, Some(Bytes::from_static(b"payload")), 0);
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

async fn kill_under_load(fsync: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(tmp.path(), fsync);
    let setup = RawClient::connect(addr, 30_000).await.expect("connect");
    let root = raw::create("/load", None, 0);
    assert_eq!(setup.call(&root).await.expect("reply").err, 0);

    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let writers: Vec<_> = (0..4)
        .map(|id| tokio::spawn(writer(addr, id, acked.clone())))
        .collect();
    // Let the load run, then kill the process without warning.
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if acked.lock().unwrap().len() >= 300 {
            break;
        }
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    for w in writers {
        let _ = w.await;
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 300);

    let (mut child, addr) = start(tmp.path(), fsync);
    let c = RawClient::connect(addr, 30_000).await.expect("connect");
    let mut missing = Vec::new();
    for path in &acked {
        let req = Request::Exists(PathWatchRequest {
            path: path.clone(),
            watch: false,
        });
        if c.call(&req).await.expect("reply").err != 0 {
            missing.push(path.clone());
        }
    }
    child.kill().expect("stop");
    child.wait().expect("reaped");
    assert!(
        missing.is_empty(),
        "--fsync {fsync}: {} of {} acknowledged writes lost after kill -9, e.g. {:?}",
        missing.len(),
        acked.len(),
        missing.first()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_loses_no_acknowledged_write_with_fsync_always() {
    kill_under_load("always").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_loses_no_acknowledged_write_with_fsync_batch() {
    kill_under_load("batch").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_loses_no_acknowledged_write_with_fsync_never() {
    kill_under_load("never").await;
}
