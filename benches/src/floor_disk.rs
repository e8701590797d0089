//! The durable-write floor: the least a program can do to make G writes durable at a time
//! on a disk. One new file, started with the log's file header and synced with its
//! directory, as zkd starts a log file; then, as fast as the disk allows, rounds of G log
//! entries of a setData transaction — framed as zkd frames them (checksum, length, the
//! `TxnHeader` and `SetDataTxn`, end mark), so each is the size of zkd's entry for the same
//! request — appended with one `write` and made durable with one `fdatasync`. G is the number
//! of writes in flight (connections × writes per connection): with group commit, a round of
//! zkd `--fsync always` covers at most that many.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use zkd_protocol::disk::txnlog::{file_header, frame_entry};
use zkd_protocol::disk::TxnHeader;
use zkd_protocol::{Jute, OpCode, SetDataRequest};

use crate::util::{fresh_dir, quantile_sorted, unique, BenchResult};

/// One run of the floor.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Entries per round (one write, one sync each).
    pub group: usize,
    /// Bytes of one entry.
    pub entry_len: usize,
    /// Entries made durable per second.
    pub ops_per_sec: f64,
    /// One round (write and sync), µs.
    pub round_p50_us: f64,
    pub round_p99_us: f64,
}

/// A node path as long as those the throughput client writes.
pub fn node_path() -> String {
    format!("{}/n-{}", unique("tp-set"), 63)
}

/// The log entry of a setData of `value` to `path`, as zkd logs it.
pub fn entry(path: &str, value: &Bytes, zxid: i64) -> Bytes {
    let mut txn = BytesMut::new();
    TxnHeader {
        client_id: 0x0100_0000_0000_0001,
        cxid: zxid as i32,
        zxid,
        time: 1_764_806_400_000 + zxid,
        txn_type: OpCode::SetData as i32,
    }
    .write(&mut txn);
    SetDataRequest {
        path: path.to_string(),
        data: Some(value.clone()),
        version: (zxid % 1000) as i32,
    }
    .write(&mut txn);
    let mut out = BytesMut::new();
    frame_entry(&txn, &mut out);
    out.freeze()
}

/// Runs rounds of `group` entries in a fresh file under `base` for `warmup` and then
/// `duration`; the file and its directory are removed afterwards.
pub fn run(
    base: &Path,
    value_size: usize,
    group: usize,
    warmup: Duration,
    duration: Duration,
) -> BenchResult<Outcome> {
    let dir = fresh_dir(base, "disk-floor").map_err(|e| format!("disk floor: {e}"))?;
    let out = rounds(&dir, value_size, group.max(1), warmup, duration);
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn rounds(
    dir: &Path,
    value_size: usize,
    group: usize,
    warmup: Duration,
    duration: Duration,
) -> BenchResult<Outcome> {
    let err = |what: &str, e: std::io::Error| format!("disk floor: {what}: {e}");
    let path = dir.join("log.1");
    let mut file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(&path)
        .map_err(|e| err("create", e))?;
    file.write_all(&file_header())
        .map_err(|e| err("write", e))?;
    file.sync_data().map_err(|e| err("sync", e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| err("sync the directory", e))?;
    // Every round encodes and frames its entries, as zkd does (its checksum included).
    let (path, value) = (node_path(), Bytes::from(vec![b'v'; value_size]));
    let entry_len = entry(&path, &value, 1).len();
    let mut buf = BytesMut::with_capacity(entry_len * group);
    let mut zxid = 1i64;
    let mut times = Vec::new();
    let mut ops = 0u64;
    let t0 = Instant::now();
    let mut measured_from = None;
    loop {
        let now = Instant::now();
        let elapsed = now - t0;
        if elapsed >= warmup + duration {
            break;
        }
        if measured_from.is_none() && elapsed >= warmup {
            measured_from = Some(now);
        }
        buf.clear();
        for _ in 0..group {
            zxid += 1;
            buf.extend_from_slice(&entry(&path, &value, zxid));
        }
        let r0 = Instant::now();
        file.write_all(&buf).map_err(|e| err("write", e))?;
        file.sync_data().map_err(|e| err("sync", e))?;
        if measured_from.is_some() {
            times.push(r0.elapsed().as_secs_f64() * 1e6);
            ops += group as u64;
        }
    }
    let secs = measured_from.map_or(0.0, |t| t.elapsed().as_secs_f64());
    times.sort_by(f64::total_cmp);
    Ok(Outcome {
        group,
        entry_len,
        ops_per_sec: if secs > 0.0 { ops as f64 / secs } else { 0.0 },
        round_p50_us: quantile_sorted(&times, 0.5),
        round_p99_us: quantile_sorted(&times, 0.99),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry is what zkd's log reader takes back: the checksum and the length frame the
    /// transaction, which decodes as a setData.
    #[test]
    fn entries_are_log_entries_of_the_right_size() {
        let e = entry(&node_path(), &Bytes::from(vec![b'v'; 100]), 7);
        let len = i32::from_be_bytes([e[8], e[9], e[10], e[11]]) as usize;
        assert_eq!(e.len(), 8 + 4 + len + 1);
        let mut r = zkd_protocol::Reader::new(e.slice(12..12 + len));
        let h = TxnHeader::read(&mut r).unwrap();
        assert_eq!((h.zxid, h.txn_type), (7, OpCode::SetData as i32));
        let body = SetDataRequest::read(&mut r).unwrap();
        assert_eq!(body.data.map(|d| d.len()), Some(100));
        let dir = std::env::temp_dir();
        let o = run(&dir, 100, 4, Duration::ZERO, Duration::from_millis(50)).unwrap();
        assert_eq!((o.group, o.entry_len), (4, e.len()));
        assert!(o.ops_per_sec > 0.0);
    }
}
