//! A parent with very many children whose list a client read (and zkd cached), emptied by one
//! big multi of deletes and then single deletes, and on zkd a reset of what is left: run on
//! the `zkd` binary and on ZooKeeper 3.9.3 side by side. Meanwhile a thread sends `ruok`
//! every 20 ms and records how long each answer took, and a kazoo client with a 10 s session
//! holds an ephemeral node (`client-tests/python/hold_session.py`). Both servers' figures are
//! printed; zkd must answer `ruok` within 100 ms at the 99th percentile, take no longer than
//! ZooKeeper for the multi and for any single delete (with slack for timer and machine
//! noise), and keep the kazoo session.
//!
//! The scale: `ZKD_PROBE_CHILDREN` (200 000), `ZKD_PROBE_MULTI` (10 000 deletes in the
//! multi), `ZKD_PROBE_SINGLES` (2 000 single deletes). The full probe is 1 000 000, 30 000 and
//! 2 000; with `ZKD_PROBE_HEAP` (default `1g`) large enough for ZooKeeper's tree.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zkd_client_tests::zkd_process::{start_with_admin, Running};
use zkd_protocol::{DeleteRequest, MultiOp, PathWatchRequest, Request};
use zkd_testkit::oracle::{four_letter_word, Launcher, ZookeeperVersion};
use zkd_testkit::raw::RawClient;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn child(i: usize) -> String {
    format!("/p/i{i:07}")
}

/// The process, killed if the test fails before it ends.
/// What one server showed.
#[derive(Debug, Default)]
struct Figures {
    build: Duration,
    list: Duration,
    multi: Duration,
    single_max: Duration,
    singles: Duration,
    reset: Option<Duration>,
    /// `ruok` while the deletes ran, and while the reset ran.
    ruok_p99: Duration,
    ruok_max: Duration,
    ruok_reset_p99: Option<Duration>,
    ruok_count: usize,
    /// The kazoo holder's report before the reset, and after everything.
    kazoo: String,
    kazoo_end: String,
}

/// Sends `ruok` every 20 ms until stopped; returns each answer's time (a failed one counts
/// as its time to fail).
fn ruok_loop(
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(Instant, Duration)>> {
    std::thread::spawn(move || {
        let mut times = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            let ok = four_letter_word(addr, "ruok").is_ok_and(|a| a == "imok");
            let took = t.elapsed();
            let took = if ok {
                took
            } else {
                took.max(Duration::from_secs(2))
            };
            times.push((t, took));
            std::thread::sleep(Duration::from_millis(20));
        }
        times
    })
}

/// Starts the kazoo session holder; returns once its ephemeral node exists.
fn kazoo(addr: SocketAddr) -> Running {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/hold_session.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let mut child = Command::new("timeout")
        .args(["-k", "5", "3600", &python])
        .arg(script)
        .arg(addr.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run python3 with kazoo: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout"))
        .read_line(&mut line)
        .expect("a line");
    assert_eq!(
        line.trim(),
        "ready",
        "kazoo did not start; run scripts/install-test-deps.sh"
    );
    Running(child)
}

/// Asks the holder for a report (with `last`, its final one) and reads it.
fn kazoo_report(k: &mut Running, last: bool) -> String {
    if last {
        drop(k.0.stdin.take());
    } else {
        let stdin = k.0.stdin.as_mut().expect("stdin");
        stdin.write_all(b"report\n").expect("ask");
        stdin.flush().expect("ask");
    }
    let mut line = String::new();
    let stdout = k.0.stdout.as_mut().expect("stdout");
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).expect("report") == 1 && byte[0] != b'\n' {
        line.push(byte[0] as char);
    }
    line
}

fn p99(times: &mut [Duration]) -> Duration {
    times.sort();
    times
        .get((times.len() * 99 / 100).min(times.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// Runs the probes against the server at `addr` (`admin`: zkd's, for the reset).
async fn probe(addr: SocketAddr, admin: Option<SocketAddr>) -> Figures {
    let n = env("ZKD_PROBE_CHILDREN", 200_000);
    let k = env("ZKD_PROBE_MULTI", 10_000).min(n);
    let s = env("ZKD_PROBE_SINGLES", 2_000).min(n - k);
    let mut f = Figures::default();
    let c = RawClient::connect(addr, 30_000).await.expect("connect");
    let t = Instant::now();
    let r = c
        .call(&zkd_testkit::raw::create("/p", None, 0))
        .await
        .expect("create");
    assert_eq!(r.err, 0);
    // Multis of 1 000 creates, 8 under way at a time.
    let mut pending = std::collections::VecDeque::new();
    for start in (0..n).step_by(1000) {
        let ops = (start..n.min(start + 1000))
            .map(|i| {
                let Request::Create(c) = zkd_testkit::raw::create(&child(i), None, 0) else {
                    unreachable!()
                };
                MultiOp::Create(c)
            })
            .collect();
        pending.push_back(c.send(&Request::Multi(ops)).await.expect("send"));
        if pending.len() >= 8 {
            let r = pending.pop_front().expect("one").await.expect("reply");
            assert_eq!(r.err, 0);
        }
    }
    for p in pending {
        assert_eq!(p.await.expect("reply").err, 0);
    }
    f.build = t.elapsed();
    let list = Request::GetChildren2(PathWatchRequest {
        path: "/p".into(),
        watch: false,
    });
    let t = Instant::now();
    let r = c.call(&list).await.expect("getChildren2");
    assert_eq!(r.err, 0);
    f.list = t.elapsed();

    let stop = Arc::new(AtomicBool::new(false));
    let ruok = ruok_loop(addr, stop.clone());
    let mut holder = tokio::task::spawn_blocking(move || kazoo(addr))
        .await
        .expect("kazoo");
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The multi deletes from the end of the list, where finding an entry costs the most.
    let ops = (0..k)
        .map(|i| {
            MultiOp::Delete(DeleteRequest {
                path: child(n - 1 - i),
                version: -1,
            })
        })
        .collect();
    let t = Instant::now();
    let r = c.call(&Request::Multi(ops)).await.expect("multi");
    f.multi = t.elapsed();
    assert_eq!(r.err, 0);
    let t0 = Instant::now();
    for i in 0..s {
        let t = Instant::now();
        let r = c
            .call(&Request::Delete(DeleteRequest {
                path: child(n - 1 - k - i),
                version: -1,
            }))
            .await
            .expect("delete");
        assert_eq!(r.err, 0);
        f.single_max = f.single_max.max(t.elapsed());
    }
    f.singles = t0.elapsed();
    // A reset deletes the holder's ephemeral node too: look before.
    let (h, report) = tokio::task::spawn_blocking(move || {
        let r = kazoo_report(&mut holder, false);
        (holder, r)
    })
    .await
    .expect("kazoo");
    f.kazoo = report;
    let mut holder = h;
    let reset_started = Instant::now();
    if let Some(admin) = admin {
        let t = Instant::now();
        tokio::task::spawn_blocking(move || {
            ureq::post(&format!("http://{admin}/zkd/reset"))
                .send_empty()
                .expect("reset")
        })
        .await
        .expect("reset");
        f.reset = Some(t.elapsed());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    f.kazoo_end = tokio::task::spawn_blocking(move || kazoo_report(&mut holder, true))
        .await
        .expect("kazoo");
    stop.store(true, Ordering::Relaxed);
    let times = ruok.join().expect("ruok thread");
    f.ruok_count = times.len();
    let (mut deletes, mut reset): (Vec<Duration>, Vec<Duration>) = (Vec::new(), Vec::new());
    for (at, took) in times {
        if at < reset_started {
            deletes.push(took);
        } else {
            reset.push(took);
        }
    }
    f.ruok_max = deletes.iter().max().copied().unwrap_or_default();
    f.ruok_p99 = p99(&mut deletes);
    if admin.is_some() {
        f.ruok_reset_p99 = Some(p99(&mut reset));
    }
    let _ = c.close().await;
    f
}

fn start_zkd() -> (Running, SocketAddr, SocketAddr) {
    start_with_admin(&[], Stdio::inherit())
}

fn row(name: &str, zkd: Duration, zk: Option<Duration>) -> String {
    let zk = zk.map_or("—".to_string(), |d| format!("{d:.3?}"));
    format!("  {name:<28} {:>12} {zk:>12}", format!("{zkd:.3?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wide_cached_parent_emptied_side_by_side_with_zookeeper() {
    let heap = std::env::var("ZKD_PROBE_HEAP").unwrap_or_else(|_| "1g".into());
    let zk = tokio::task::spawn_blocking(move || {
        Launcher::new()
            .version(ZookeeperVersion::V3_9)
            .jvm_opts(vec![
                "-Xshare:auto".into(),
                "-XX:+UseSerialGC".into(),
                "-XX:-UsePerfData".into(),
                format!("-Xmx{heap}"),
            ])
            .log_level("WARN")
            .start()
    })
    .await
    .expect("blocking")
    .unwrap_or_else(|e| panic!("{e}"));
    let theirs = probe(zk.addr(), None).await;
    drop(zk);
    let (_zkd, addr, admin) = start_zkd();
    let ours = probe(addr, Some(admin)).await;

    println!("{:<30} {:>12} {:>12}", "", "zkd", "ZooKeeper 3.9.3");
    for (name, a, b) in [
        ("build (multis of 1000)", ours.build, theirs.build),
        ("getChildren2 of the parent", ours.list, theirs.list),
        ("multi of deletes", ours.multi, theirs.multi),
        ("longest single delete", ours.single_max, theirs.single_max),
        ("all single deletes", ours.singles, theirs.singles),
        ("ruok p99", ours.ruok_p99, theirs.ruok_p99),
        ("ruok max", ours.ruok_max, theirs.ruok_max),
    ] {
        println!("{}", row(name, a, Some(b)));
    }
    if let (Some(r), Some(p)) = (ours.reset, ours.ruok_reset_p99) {
        println!("{}", row("reset (zkd only)", r, None));
        println!("{}", row("ruok p99 during the reset", p, None));
    }
    println!(
        "  ruok answers: zkd {}, ZooKeeper {}\n  kazoo after the deletes: zkd [{}], ZooKeeper \
         [{}]\n  kazoo at the end: zkd [{}], ZooKeeper [{}]",
        ours.ruok_count,
        theirs.ruok_count,
        ours.kazoo,
        theirs.kazoo,
        ours.kazoo_end,
        theirs.kazoo_end
    );
    let _ = std::io::stdout().flush();

    let slack = |zk: Duration| (zk * 2).max(zk + Duration::from_millis(250));
    assert!(
        ours.ruok_p99 <= Duration::from_millis(100),
        "zkd's ruok p99 {:?} is over 100 ms",
        ours.ruok_p99
    );
    let during_reset = ours.ruok_reset_p99.unwrap_or_default();
    assert!(
        during_reset <= Duration::from_millis(100),
        "zkd's ruok p99 during the reset {during_reset:?} is over 100 ms"
    );
    assert!(
        ours.multi <= slack(theirs.multi),
        "zkd's multi took {:?}, ZooKeeper's {:?}",
        ours.multi,
        theirs.multi
    );
    assert!(
        ours.single_max <= slack(theirs.single_max),
        "zkd's longest single delete took {:?}, ZooKeeper's {:?}",
        ours.single_max,
        theirs.single_max
    );
    assert!(
        ours.kazoo.starts_with("states 0 ") && ours.kazoo.contains("ephemeral present"),
        "the kazoo session on zkd after the deletes: {}",
        ours.kazoo
    );
    assert!(
        ours.kazoo_end.starts_with("states 0 ") && ours.kazoo_end.ends_with("connected True"),
        "the kazoo session on zkd after the reset: {}",
        ours.kazoo_end
    );
}
