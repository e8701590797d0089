//! `zkd-bench snapshot`: persistence at scale. Builds an N-node tree in zkd (from a seed
//! fixture), takes a snapshot while one client reads in a loop and another overwrites nodes
//! all over the tree (the longest stall each sees, and the longest the core was held at
//! once), stops zkd gracefully, then measures how long zkd and Apache ZooKeeper take to
//! start from that same snapshot and their peak RSS.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zkd_protocol::{PathWatchRequest, Request, SetDataRequest};
use zkd_testkit::oracle::Launcher;
use zkd_testkit::raw::RawClient;

use crate::progress::Progress;
use crate::util::BenchResult;

/// What one run measured.
#[derive(Debug, Clone)]
pub struct SnapshotFigures {
    pub nodes: usize,
    pub snapshot_bytes: u64,
    /// Longest single hold of the core while encoding the snapshot (ms).
    pub core_held_ms: f64,
    /// Holds of the core the encoding took, and the most node copies kept at once (nodes
    /// the writer changed before the snapshot wrote them).
    pub slices: f64,
    pub copies: f64,
    /// Encoding, writing, syncing and renaming (ms).
    pub write_ms: f64,
    /// Longest reply time a reading client saw during the snapshot (ms), and its median.
    pub longest_stall_ms: f64,
    pub median_read_ms: f64,
    /// The same for a client writing during the snapshot, and how many writes it made.
    pub longest_write_stall_ms: f64,
    pub median_write_ms: f64,
    pub writes: usize,
    /// Start-up from the snapshot until serving (ms) and peak RSS (bytes).
    pub zkd_load_ms: f64,
    pub zkd_peak_rss: u64,
    pub zk_load_ms: f64,
    pub zk_peak_rss: u64,
}

fn peak_rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| crate::proc::parse_status_kb(&s, "VmHWM:"))
        .map_or(0, |kb| kb * 1024)
}

/// Starts zkd (quiet logs, no per-address connection cap: every bench connection comes from
/// 127.0.0.1); returns it, its client address and its admin address (when asked for).
pub fn start_zkd(bin: &Path, args: &[String]) -> BenchResult<(Child, SocketAddr, Option<String>)> {
    let mut child = Command::new(bin)
        .args(["--port", "0"])
        .args(crate::servers::default_zkd_args())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut out = BufReader::new(stdout);
    let mut line = String::new();
    out.read_line(&mut line).map_err(|e| e.to_string())?;
    let addr = line
        .trim()
        .strip_prefix("zkd listening on ")
        .ok_or_else(|| format!("zkd did not start: {line:?}"))?
        .parse()
        .map_err(|e| format!("bad address: {e}"))?;
    let admin = if args.iter().any(|a| a == "--admin-port") {
        let mut line = String::new();
        out.read_line(&mut line).map_err(|e| e.to_string())?;
        line.trim()
            .strip_prefix("zkd admin on ")
            .map(str::to_string)
    } else {
        None
    };
    Ok((child, addr, admin))
}

/// SIGTERM (graceful: zkd writes its final snapshot), then wait.
fn stop_gracefully(child: &mut Child) -> BenchResult<()> {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    child.wait().map_err(|e| format!("wait: {e}"))?;
    Ok(())
}

/// `POST /zkd/snapshot` over plain HTTP/1.1; returns the JSON body.
fn post_snapshot(admin: &str) -> BenchResult<String> {
    let mut s = TcpStream::connect(admin).map_err(|e| format!("admin: {e}"))?;
    write!(
        s,
        "POST /zkd/snapshot HTTP/1.1\r\nHost: {admin}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    if !text.starts_with("HTTP/1.1 200") {
        return Err(format!("snapshot refused: {text}"));
    }
    Ok(body)
}

fn json_number(body: &str, key: &str) -> f64 {
    body.split(&format!("\"{key}\":"))
        .nth(1)
        .and_then(|rest| {
            rest.split([',', '}'])
                .next()
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(f64::NAN)
}

/// A fixture with `n` nodes: 1000 parents, 16 bytes of data each.
fn write_fixture(path: &Path, n: usize) -> BenchResult<()> {
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?,
    );
    let w = |f: &mut std::io::BufWriter<std::fs::File>, s: String| {
        f.write_all(s.as_bytes()).map_err(|e| e.to_string())
    };
    w(&mut f, "{\"nodes\":[\n".into())?;
    for i in 0..n {
        let sep = if i + 1 < n { "," } else { "" };
        w(
            &mut f,
            format!(
                "{{\"path\":\"/bench/p{:04}/n{i:08}\",\"data\":\"value-{i:010}\"}}{sep}\n",
                i % 1000
            ),
        )?;
    }
    w(&mut f, "]}\n".into())?;
    f.flush().map_err(|e| e.to_string())
}

fn newest_snapshot(data: &Path) -> BenchResult<PathBuf> {
    let mut best: Option<(u64, PathBuf)> = None;
    for e in std::fs::read_dir(data.join("version-2")).map_err(|e| e.to_string())? {
        let p = e.map_err(|e| e.to_string())?.path();
        let Some(z) = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("snapshot."))
            .and_then(|h| u64::from_str_radix(h, 16).ok())
        else {
            continue;
        };
        if best.as_ref().is_none_or(|(b, _)| z > *b) {
            best = Some((z, p));
        }
    }
    best.map(|(_, p)| p)
        .ok_or_else(|| "no snapshot written".into())
}

/// One client sending `request(i)` for i = 0, 1, … until `stop`; resolves to its reply
/// times (ms), sorted.
async fn timed_loop(
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    request: impl Fn(usize) -> Request + Send + 'static,
) -> BenchResult<tokio::task::JoinHandle<Vec<f64>>> {
    let client = RawClient::connect(addr, 30_000)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    Ok(tokio::spawn(async move {
        let mut times = Vec::new();
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let req = request(i);
            i += 1;
            let t = Instant::now();
            match client.call(&req).await {
                Ok(r) if r.err == 0 => times.push(t.elapsed().as_secs_f64() * 1e3),
                _ => break,
            }
        }
        times.sort_by(|a, b| a.total_cmp(b));
        times
    }))
}

/// Runs the whole item with `nodes` nodes, in a scratch directory under `work`.
pub async fn run(
    zkd_bin: &Path,
    zk_heap_mb: u32,
    nodes: usize,
    work: &Path,
    p: &Progress,
) -> BenchResult<SnapshotFigures> {
    let dir = work.join(format!("snapshot-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    let fixture = dir.join("fixture.json");
    p.say(format!("writing a {nodes}-node fixture"));
    write_fixture(&fixture, nodes)?;

    p.say("starting zkd with the fixture as seed");
    let args: Vec<String> = [
        "--seed",
        &fixture.to_string_lossy(),
        "--data-dir",
        &data.to_string_lossy(),
        "--admin-port",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (mut zkd, addr, admin) = start_zkd(zkd_bin, &args)?;
    let admin = admin.ok_or("no admin address")?;

    // A reader and a writer in a loop while the snapshot is taken.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = timed_loop(addr, stop.clone(), |_| {
        Request::GetData(PathWatchRequest {
            path: "/bench/p0000/n00000000".into(),
            watch: false,
        })
    })
    .await?;
    let writer = timed_loop(addr, stop.clone(), move |i| {
        // Spread over the tree, so the snapshot meets nodes changed ahead of it.
        let n = (i.wrapping_mul(7919)) % nodes.max(1);
        Request::SetData(SetDataRequest {
            path: format!("/bench/p{:04}/n{n:08}", n % 1000),
            data: Some(Bytes::from(format!("write-{i:010}"))),
            version: -1,
        })
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    p.say("taking a snapshot under read and write load");
    let admin2 = admin.clone();
    let body = tokio::task::spawn_blocking(move || post_snapshot(&admin2))
        .await
        .map_err(|e| e.to_string())??;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let reads = reader.await.map_err(|e| e.to_string())?;
    let writes = writer.await.map_err(|e| e.to_string())?;
    let longest = |t: &[f64]| t.last().copied().unwrap_or(f64::NAN);
    stop_gracefully(&mut zkd)?;
    let snap = newest_snapshot(&data)?;
    let snapshot_bytes = std::fs::metadata(&snap).map_or(0, |m| m.len());

    p.say("starting zkd from the snapshot");
    let started = Instant::now();
    let (mut zkd, _, _) = start_zkd(
        zkd_bin,
        &["--data-dir".into(), data.to_string_lossy().into()],
    )?;
    let zkd_load_ms = started.elapsed().as_secs_f64() * 1e3;
    let zkd_peak_rss = peak_rss(zkd.id());
    let _ = zkd.kill();
    let _ = zkd.wait();

    p.say("starting Apache ZooKeeper from the same snapshot");
    let zk_base = dir.join("zk");
    let zk_dir = zk_base.join("data").join("version-2");
    std::fs::create_dir_all(&zk_dir).map_err(|e| e.to_string())?;
    std::fs::copy(&snap, zk_dir.join(snap.file_name().ok_or("name")?))
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let zk = Launcher::new()
        .jvm_opts(crate::servers::default_jvm_opts(zk_heap_mb))
        .start_in(&zk_base, None)?;
    let zk_load_ms = started.elapsed().as_secs_f64() * 1e3;
    let zk_peak_rss = peak_rss(zk.pid());
    drop(zk);
    let _ = std::fs::remove_dir_all(&dir);

    Ok(SnapshotFigures {
        nodes,
        snapshot_bytes,
        core_held_ms: json_number(&body, "core_held_ms"),
        slices: json_number(&body, "slices"),
        copies: json_number(&body, "copies"),
        write_ms: json_number(&body, "total_ms"),
        longest_stall_ms: longest(&reads),
        median_read_ms: crate::util::quantile_sorted(&reads, 0.5),
        longest_write_stall_ms: longest(&writes),
        median_write_ms: crate::util::quantile_sorted(&writes, 0.5),
        writes: writes.len(),
        zkd_load_ms,
        zkd_peak_rss,
        zk_load_ms,
        zk_peak_rss,
    })
}

/// The side-by-side table.
pub fn report(f: &SnapshotFigures) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    format!(
        "snapshot of {} nodes: {:.1} MiB\n\
         zkd snapshot: written in {:.0} ms in {:.0} slices, the core held at most {:.1} ms at \
         once, {:.0} node copies at most\n\
         longest client stall during the snapshot: reads {:.1} ms (median {:.2} ms), writes \
         {:.1} ms (median {:.2} ms, {} writes)\n\
         \n\
         | start from the snapshot | zkd | ZooKeeper 3.8 | zkd / ZooKeeper |\n\
         |---|---|---|---|\n\
         | time until serving (ms) | {:.0} | {:.0} | {:.2} |\n\
         | peak RSS (MiB) | {:.0} | {:.0} | {:.2} |\n\
         \n\
         ZooKeeper's time includes JVM start-up and the snapshot it writes after loading.",
        f.nodes,
        mib(f.snapshot_bytes),
        f.write_ms,
        f.slices,
        f.core_held_ms,
        f.copies,
        f.longest_stall_ms,
        f.median_read_ms,
        f.longest_write_stall_ms,
        f.median_write_ms,
        f.writes,
        f.zkd_load_ms,
        f.zk_load_ms,
        ratio(f.zkd_load_ms, f.zk_load_ms),
        mib(f.zkd_peak_rss),
        mib(f.zk_peak_rss),
        ratio(f.zkd_peak_rss as f64, f.zk_peak_rss as f64),
    )
}
