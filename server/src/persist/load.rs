//! Loading a data directory at start-up, and checking one offline (`zkd datadir check`).
//!
//! Everything is read and judged before anything is changed: the newest readable snapshot,
//! then every log it needs, entry by entry. Only an incomplete final entry of the newest log
//! (what a crash in the middle of a write leaves) is cut off on an ordinary start. Any other
//! damage — a bad entry with valid entries after it, an older log whose successor does not
//! continue where it stops, a log whose first transaction does not follow the snapshot and
//! the logs before it (a log file went missing), an entry whose zxid jumps past the next one
//! inside a log (entries cut out of it), a damaged snapshot whose transactions nothing
//! else holds — stops the start with a sentence naming the file and the offset, and the
//! directory is left as it was. With [`LoadMode::Recover`] (`--recover-truncate`) the start
//! goes ahead without the transactions after the damage, and says exactly what it set aside:
//! the dropped bytes of a log are copied beside it (`dropped.log.<zxid>.from-<offset>`) before
//! it is truncated, and a log after a gap, later logs and snapshots are renamed
//! `dropped.<name>`; neither zkd nor ZooKeeper reads files of those names.

use std::cell::RefCell;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use zkd_protocol::disk::snapshot::SnapshotImage;
use zkd_protocol::disk::txnlog::{self, LogEnd, LogScan, LogSource};

use super::datadir::{sync_dir, DataDir, Loaded, ZxidFile};
use crate::core::{Core, Replayed};
use crate::files::open_regular;

/// What loading may do about damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    /// An ordinary start: an incomplete final entry of the newest log is cut off; other
    /// damage stops the start.
    Start,
    /// `--recover-truncate`: start without the transactions after the first damage, setting
    /// the damaged and later files aside and saying what was dropped.
    Recover,
    /// Judge only: change nothing, report every file.
    Check,
}

/// A change to the directory, made only once everything has been judged.
enum Action {
    /// Cut `path` at `at`; with `keep`, first copy the bytes from `at` to that file.
    Truncate {
        path: PathBuf,
        at: u64,
        size: u64,
        keep: Option<PathBuf>,
        what: String,
    },
    /// Rename `path` to `to`.
    SetAside {
        path: PathBuf,
        to: PathBuf,
        what: String,
    },
}

/// Whether none of `later` holds a transaction: each is shorter than a log's header, or a
/// log with no entry and nothing after its header but zeros. A file that cannot be read as a
/// log counts as holding something, so damage is never taken for emptiness. After a snapshot
/// the next log file exists before the sync thread has written the group of the file before
/// it, so a crash during that write leaves the older file cut short and the newer one empty.
fn hold_no_transaction(later: &[ZxidFile], max_entry: u64) -> bool {
    later.iter().all(|l| match open_regular(&l.path) {
        Ok((_, size)) if size < txnlog::HEADER_LEN as u64 => true,
        Ok(_) => matches!(
            scan_log(&l.path, max_entry),
            Ok((scan, _)) if scan.entries.is_empty()
                && matches!(scan.end, LogEnd::Clean | LogEnd::Padding(_))
        ),
        Err(_) => false,
    })
}

/// A log file opened for positioned reads, through a read-ahead window (entries are small
/// and read in order, so one read serves many of them).
struct LogFile {
    file: File,
    size: u64,
    /// The window: its offset in the file and its bytes.
    window: RefCell<(u64, Vec<u8>)>,
}

/// Bytes read ahead at once.
const READ_AHEAD: u64 = 1 << 20;

impl LogFile {
    fn new(file: File, size: u64) -> LogFile {
        LogFile {
            file,
            size,
            window: RefCell::new((0, Vec::new())),
        }
    }
}

impl LogSource for LogFile {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let len = buf.len() as u64;
        if len > READ_AHEAD / 2 {
            return self.file.read_exact_at(buf, offset);
        }
        let mut w = self.window.borrow_mut();
        let (start, bytes) = &mut *w;
        if offset < *start || offset + len > *start + bytes.len() as u64 {
            let n = READ_AHEAD.min(self.size.saturating_sub(offset)).max(len);
            bytes.resize(n as usize, 0);
            self.file.read_exact_at(bytes, offset)?;
            *start = offset;
        }
        let at = (offset - *start) as usize;
        buf.copy_from_slice(&bytes[at..at + buf.len()]);
        Ok(())
    }
}

/// Reads and decodes a snapshot file incrementally (never more than the file holds), with
/// the default jute.maxbuffer.
pub fn read_snapshot_file(path: &Path) -> Result<SnapshotImage, String> {
    let limit = txnlog::max_entry_len(txnlog::DEFAULT_JUTE_MAXBUFFER);
    read_snapshot_limited(path, limit)
}

/// [`read_snapshot_file`], refusing buffers longer than `max_len`.
fn read_snapshot_limited(path: &Path, max_len: u64) -> Result<SnapshotImage, String> {
    let (file, size) = open_regular(path)?;
    zkd_protocol::disk::snapshot::read_snapshot_limited(io::BufReader::new(file), size, max_len)
        .map_err(|e| e.to_string())
}

fn scan_log(path: &Path, max_entry: u64) -> Result<(LogScan, LogFile), String> {
    let (file, size) = open_regular(path)?;
    let src = LogFile::new(file, size);
    let scan = txnlog::scan(&src, max_entry).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((scan, src))
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

fn aside(path: &Path) -> PathBuf {
    path.with_file_name(format!("dropped.{}", name_of(path)))
}

/// Whether a log starting at `next` continues a state whose last transaction is `last`
/// (nothing in between is missing): the next zxid of the same epoch, or a later epoch.
fn continues(last: i64, next: i64) -> bool {
    next <= last.saturating_add(1) || (next >> 32) > (last >> 32)
}

/// The first of `entries` that does not continue the transactions before it, the state
/// loaded so far ending at `last`: its index, its offset, and the zxid it should have
/// followed. Entries the state already holds (a snapshot taken while the log was written)
/// continue it.
fn first_gap(
    entries: &[(u64, zkd_protocol::disk::TxnEntry)],
    mut last: i64,
) -> Option<(usize, u64, i64)> {
    for (index, (offset, entry)) in entries.iter().enumerate() {
        let next = entry.header.zxid;
        if !continues(last, next) {
            return Some((index, *offset, last));
        }
        last = last.max(next);
    }
    None
}

const REFUSING: &str = "refusing to start; nothing in the data directory was changed. \
     `zkd datadir check DIR` reports the damage; starting with --recover-truncate gives up \
     the transactions from the damage on (the dropped bytes are kept beside the log)";

impl DataDir {
    /// Loads the newest valid snapshot into `core` and replays the logs after it; see
    /// this module for what is done about damage.
    pub fn load(
        &self,
        core: &mut Core,
        now_ms: i64,
        mode: LoadMode,
        max_entry: u64,
    ) -> Result<Loaded, String> {
        load(self, core, now_ms, mode, max_entry, &mut Vec::new())
    }
}

/// Loads `dir` into `core` (see the module documentation for what is done about damage).
/// `findings` gets, file by file, what was found and what is done about it. A log entry
/// longer than `max_entry` bytes (`txnlog::max_entry_len` of the server's jute.maxbuffer) is
/// damage.
pub fn load(
    dir: &DataDir,
    core: &mut Core,
    now_ms: i64,
    mode: LoadMode,
    max_entry: u64,
    findings: &mut Vec<String>,
) -> Result<Loaded, String> {
    let mut loaded = Loaded::default();
    let mut actions = Vec::new();
    let list_failed = |e: io::Error| format!("cannot list {}: {e}", dir.path().display());
    let snaps = dir.snapshots().map_err(list_failed)?;
    let logs = dir.logs().map_err(list_failed)?;

    // The newest snapshot that reads back completely; newer damaged ones are remembered.
    let mut damaged_snaps: Vec<(ZxidFile, String)> = Vec::new();
    let mut chosen: Option<(ZxidFile, SnapshotImage)> = None;
    for snap in snaps.iter().rev() {
        match read_snapshot_limited(&snap.path, max_entry) {
            Ok(image) => {
                findings.push(format!(
                    "{}: snapshot, {} nodes, {} sessions",
                    snap.path.display(),
                    image.nodes.len(),
                    image.sessions.len()
                ));
                chosen = Some((snap.clone(), image));
                break;
            }
            Err(e) => {
                tracing::warn!(
                    file = %snap.path.display(),
                    "skipping damaged snapshot: {e}; trying the previous one"
                );
                findings.push(format!("{}: snapshot {e}", snap.path.display()));
                damaged_snaps.push((snap.clone(), e));
            }
        }
    }
    if chosen.is_none() && !snaps.is_empty() {
        return Err(format!(
            "no readable snapshot in {} ({} found, all damaged: {}); refusing to start from \
             a partial state",
            dir.path().display(),
            snaps.len(),
            damaged_snaps
                .iter()
                .map(|(s, e)| format!("{} damaged: {e}", name_of(&s.path)))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    if let Some((snap, image)) = chosen {
        let report = core
            .import_snapshot(&image, snap.zxid, now_ms)
            .map_err(|e| format!("{}: {e}", snap.path.display()))?;
        if report.orphans_removed > 0 {
            tracing::info!(
                count = report.orphans_removed,
                "removed ephemeral nodes whose session was not in the snapshot"
            );
        }
        loaded.snapshot = Some(snap.path);
        loaded.snapshot_zxid = snap.zxid;
        loaded.sessions = report.sessions;
    }

    // The newest log starting at or before the snapshot may hold transactions after it.
    let first = logs
        .iter()
        .rposition(|l| l.zxid <= loaded.snapshot_zxid)
        .unwrap_or(0);
    let count = logs.len();
    let mut i = first;
    while i < count {
        let log = &logs[i];
        // A log shorter than its header holds no transaction (its creation was interrupted);
        // the writer replaces a file of that name when it next needs it.
        let (_, size) = open_regular(&log.path)?;
        if size < txnlog::HEADER_LEN as u64 {
            findings.push(format!(
                "{}: log of {size} bytes, shorter than its header: holds no transaction, \
                 skipped",
                log.path.display()
            ));
            i += 1;
            continue;
        }
        let (scan, src) = scan_log(&log.path, max_entry)?;
        let shown = log.path.display();
        // Every transaction must follow the one before it. A log file that went missing (or
        // a snapshot without the logs after it) leaves a gap before a log's first entry, and
        // entries cut out of a file leave one inside it; neither shows as a damaged entry.
        let gap = first_gap(&scan.entries, core.last_zxid()).map(|(index, offset, last)| {
            let next = scan.entries[index].1.header.zxid;
            let missing = format!(
                "transactions 0x{:x} to 0x{:x} are missing",
                last + 1,
                next - 1
            );
            let sentence = if index > 0 {
                format!(
                    "{shown} jumps from zxid 0x{last:x} to 0x{next:x} at offset {offset} (its \
                     entry {}): {missing}",
                    index + 1
                )
            } else {
                let before = if last == 0 && loaded.snapshot.is_none() {
                    "no snapshot or earlier log holds what comes before it".to_string()
                } else {
                    format!("what was loaded before it ends at zxid 0x{last:x}")
                };
                format!(
                    "{shown} starts with zxid 0x{next:x} (its first entry, at offset \
                     {offset}), but {before}: {missing}"
                )
            };
            (index, offset, sentence)
        });
        // A gap before the first entry sets the whole log aside; one inside it cuts it there.
        let gapped = gap.as_ref().is_some_and(|(index, _, _)| *index == 0);
        let jumped = gap.is_some() && !gapped;
        let entries_to_replay = match &gap {
            Some((index, _, _)) => &scan.entries[..*index],
            None => &scan.entries[..],
        };
        for (_, entry) in entries_to_replay {
            match core.replay(entry, now_ms) {
                Replayed::Applied => loaded.replayed += 1,
                Replayed::Skipped => {}
                Replayed::Inconsistent(why) => {
                    loaded.replayed += 1;
                    tracing::warn!(
                        file = %log.path.display(),
                        zxid = format_args!("0x{:x}", entry.header.zxid),
                        "replayed transaction did not match the tree: {why}"
                    );
                }
            }
        }
        let entries = scan.entries.len();
        // The damage found in this log, if any: (offset, sentence).
        let damage = match &scan.end {
            _ if gap.is_some() => gap.map(|(_, offset, sentence)| (offset, sentence)),
            LogEnd::Clean => {
                findings.push(format!("{shown}: log, {entries} entries, complete"));
                None
            }
            LogEnd::Padding(at) => {
                findings.push(format!(
                    "{shown}: log, {entries} entries, then zero pre-allocation from offset {at}"
                ));
                None
            }
            LogEnd::Torn { offset, reason }
                if i + 1 == count || hold_no_transaction(&logs[i + 1..], max_entry) =>
            {
                let dropped = scan.size - offset;
                let later = if i + 1 == count {
                    ""
                } else {
                    " (every later log holds no transaction)"
                };
                let what = format!(
                    "{shown}: log, {entries} entries, then an incomplete final entry at offset \
                     {offset} ({reason}): {dropped} bytes, cut off at start-up as a write a \
                     crash interrupted{later}"
                );
                findings.push(what.clone());
                actions.push(Action::Truncate {
                    path: log.path.clone(),
                    at: *offset,
                    size: scan.size,
                    keep: None,
                    what,
                });
                None
            }
            LogEnd::Torn { offset, reason } => {
                let next = &logs[i + 1];
                let last = core.last_zxid();
                if continues(last, next.zxid) {
                    findings.push(format!(
                        "{shown}: log, {entries} entries, then an incomplete entry at offset \
                         {offset} ({reason}) that the next log {} continues after; left as it is",
                        name_of(&next.path)
                    ));
                    None
                } else {
                    Some((
                        *offset,
                        format!(
                            "{shown} ends with an incomplete entry at offset {offset} \
                             ({reason}), and the next log {} starts at zxid 0x{:x}, not \
                             0x{:x}: transactions are missing",
                            name_of(&next.path),
                            next.zxid,
                            last + 1
                        ),
                    ))
                }
            }
            LogEnd::Damaged {
                offset,
                reason,
                next_entry,
            } => {
                let after = match next_entry {
                    Some(n) => format!("; a valid entry follows at offset {n}"),
                    None => String::new(),
                };
                Some((
                    *offset,
                    format!("{shown} is damaged at offset {offset} ({reason}){after}"),
                ))
            }
        };
        if let Some((offset, sentence)) = damage {
            let lost = txnlog::count_entries_from(&src, offset, max_entry)
                .map_err(|e| format!("{shown}: {e}"))?;
            let mut dropped = if gapped {
                format!(
                    "the {lost} entries of {} ({} bytes from offset {offset})",
                    name_of(&log.path),
                    scan.size - offset
                )
            } else if jumped {
                format!(
                    "the {lost} entries from there to the end of {} ({} bytes from offset \
                     {offset})",
                    name_of(&log.path),
                    scan.size - offset
                )
            } else {
                format!(
                    "the damaged entry and the {lost} valid entries after it ({} bytes from \
                     offset {offset} to the end of {})",
                    scan.size - offset,
                    name_of(&log.path)
                )
            };
            let mut later = Vec::new();
            for next in &logs[i + 1..] {
                // A later file that is not a readable log holds no entry to count.
                let (n, size) = match scan_log(&next.path, max_entry) {
                    Ok((s, f)) => (
                        txnlog::count_entries_from(&f, txnlog::HEADER_LEN as u64, max_entry)
                            .unwrap_or(0),
                        s.size,
                    ),
                    Err(_) => (0, fs::metadata(&next.path).map_or(0, |m| m.len())),
                };
                later.push((next.path.clone(), n, size));
            }
            if !later.is_empty() {
                dropped.push_str(&format!(
                    ", and the later logs {}",
                    later
                        .iter()
                        .map(|(p, n, b)| format!("{} ({n} entries, {b} bytes)", name_of(p)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            findings.push(format!("{sentence}; after it: {dropped}"));
            if mode != LoadMode::Recover {
                return Err(format!(
                    "{sentence}: the transactions after it would be lost ({dropped}); \
                     {REFUSING}"
                ));
            }
            if gapped {
                // Nothing of this log can be applied: it is set aside whole, like the later ones.
                later.insert(0, (log.path.clone(), lost, scan.size));
            } else {
                let keep = log
                    .path
                    .with_file_name(format!("dropped.{}.from-{offset}", name_of(&log.path)));
                actions.push(Action::Truncate {
                    path: log.path.clone(),
                    at: offset,
                    size: scan.size,
                    keep: Some(keep.clone()),
                    what: format!(
                        "{sentence}; dropped {}: {} bytes from offset {offset} of {} (kept in {})",
                        if jumped {
                            format!("the {lost} entries from there on")
                        } else {
                            format!("the damaged entry and the {lost} valid entries after it")
                        },
                        scan.size - offset,
                        shown,
                        name_of(&keep)
                    ),
                });
            }
            for (p, n, b) in later {
                actions.push(Action::SetAside {
                    to: aside(&p),
                    what: format!(
                        "dropped the log {} ({n} entries, {b} bytes; renamed {})",
                        p.display(),
                        name_of(&aside(&p))
                    ),
                    path: p,
                });
            }
            break;
        }
        i += 1;
    }
    loaded.zxid = core.last_zxid();
    loaded.nodes = core.node_count();

    // A damaged snapshot is only given up when the state loaded reaches its zxid.
    for (snap, e) in &damaged_snaps {
        if snap.zxid <= loaded.zxid {
            findings.push(format!(
                "{}: not needed (the older snapshot and the logs reach zxid 0x{:x})",
                snap.path.display(),
                loaded.zxid
            ));
            continue;
        }
        let sentence = format!(
            "snapshot {} is damaged ({e}), and the older snapshot and the logs reach only zxid 0x{:x}, \
             short of its 0x{:x}",
            snap.path.display(),
            loaded.zxid,
            snap.zxid
        );
        if mode != LoadMode::Recover {
            return Err(format!(
                "{sentence}: the transactions up to it would be lost; {REFUSING}"
            ));
        }
        actions.push(Action::SetAside {
            path: snap.path.clone(),
            to: aside(&snap.path),
            what: format!(
                "{sentence}; dropped the transactions 0x{:x} to 0x{:x} (renamed it {})",
                loaded.zxid + 1,
                snap.zxid,
                name_of(&aside(&snap.path))
            ),
        });
    }

    if mode != LoadMode::Check {
        apply(dir, &actions)?;
    }
    Ok(loaded)
}

/// Makes the changes decided on, logging each.
fn apply(dir: &DataDir, actions: &[Action]) -> Result<(), String> {
    for action in actions {
        match action {
            Action::Truncate {
                path,
                at,
                size,
                keep,
                what,
            } => {
                if let Some(keep) = keep {
                    copy_tail(path, *at, *size, keep).map_err(|e| {
                        format!(
                            "cannot copy the tail of {} to {}: {e}",
                            path.display(),
                            keep.display()
                        )
                    })?;
                }
                truncate(path, *at)
                    .map_err(|e| format!("cannot truncate {}: {e}", path.display()))?;
                tracing::warn!("{what}");
            }
            Action::SetAside { path, to, what } => {
                fs::rename(path, to).map_err(|e| {
                    format!("cannot rename {} to {}: {e}", path.display(), to.display())
                })?;
                tracing::warn!("{what}");
            }
        }
    }
    if !actions.is_empty() {
        sync_dir(dir.path()).map_err(|e| format!("cannot sync {}: {e}", dir.path().display()))?;
    }
    Ok(())
}

fn copy_tail(path: &Path, at: u64, size: u64, to: &Path) -> io::Result<()> {
    let src = File::open(path)?;
    let mut out = OpenOptions::new().write(true).create_new(true).open(to)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = at;
    while pos < size {
        let n = (size - pos).min(buf.len() as u64) as usize;
        src.read_exact_at(&mut buf[..n], pos)?;
        out.write_all(&buf[..n])?;
        pos += n as u64;
    }
    out.sync_all()
}

fn truncate(path: &Path, len: u64) -> io::Result<()> {
    let f = OpenOptions::new().write(true).open(path)?;
    f.set_len(len)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_read_ahead_window_returns_the_bytes_asked_for() {
        let path = std::env::temp_dir().join(format!("zkd-read-ahead-{}", std::process::id()));
        let data: Vec<u8> = (0..3 * READ_AHEAD as usize)
            .map(|i| (i % 251) as u8)
            .collect();
        fs::write(&path, &data).expect("write");
        let (file, size) = open_regular(&path).expect("open");
        let src = LogFile::new(file, size);
        for (at, len) in [
            (0, 10),
            (5, 100),
            (READ_AHEAD - 3, 7),
            (20, 600_000),
            (2 * READ_AHEAD + 9, 12),
            (1, 1),
        ] {
            let mut buf = vec![0u8; len];
            src.read_at(at, &mut buf).expect("read");
            assert_eq!(buf, data[at as usize..at as usize + len], "{at}+{len}");
        }
        let _ = fs::remove_file(&path);
    }

    #[test]
    fn continuation_across_logs() {
        assert!(continues(5, 6));
        assert!(continues(5, 3));
        assert!(!continues(5, 8));
        assert!(continues(0x1_0000_0005, 0x2_0000_0001));
        assert!(!continues(0x2_0000_0005, 0x2_0000_0009));
    }

    #[test]
    fn the_first_gap_inside_a_log() {
        use zkd_protocol::disk::{TxnBody, TxnEntry, TxnHeader};
        // Entries at offsets 16, 116, 216, ... with these zxids.
        let log = |zxids: &[i64]| -> Vec<(u64, TxnEntry)> {
            zxids
                .iter()
                .enumerate()
                .map(|(i, &zxid)| {
                    let header = TxnHeader {
                        client_id: 0,
                        cxid: 0,
                        zxid,
                        time: 0,
                        txn_type: 0,
                    };
                    let body = TxnBody::Other;
                    (16 + 100 * i as u64, TxnEntry { header, body })
                })
                .collect()
        };
        assert_eq!(first_gap(&log(&[4, 5, 6]), 3), None);
        // Entries the state already holds (a snapshot taken while the log was written).
        assert_eq!(first_gap(&log(&[2, 3, 4, 5]), 3), None);
        assert_eq!(
            first_gap(&log(&[6]), 3),
            Some((0, 16, 3)),
            "before the first"
        );
        assert_eq!(first_gap(&log(&[4, 5, 7, 8]), 3), Some((2, 216, 5)));
        // A new epoch may start at any counter; within it the counter goes on by one.
        let e2 = 0x2_0000_0000;
        assert_eq!(first_gap(&log(&[4, e2 + 1, e2 + 2]), 3), None);
        assert_eq!(
            first_gap(&log(&[4, e2 + 7, e2 + 9]), 3),
            Some((2, 216, e2 + 7))
        );
        // Extreme zxids neither overflow nor hide a gap.
        assert_eq!(first_gap(&log(&[i64::MAX, 1]), 0), None);
        assert_eq!(first_gap(&log(&[-1, 1, 3]), 0), Some((2, 216, 1)));
        assert_eq!(first_gap(&[], 7), None);
    }

    /// The process's peak resident memory, from `/proc/self/status` (`VmHWM`), in KiB.
    fn peak_rss_kib() -> u64 {
        let status = fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM")
    }

    /// A data directory under `base/name` holding one file `file` of `size` bytes: `head`,
    /// then a hole.
    fn sparse_dir(base: &Path, name: &str, file: &str, head: &[u8], size: u64) -> PathBuf {
        let root = base.join(name);
        let dir = root.join(super::super::datadir::VERSION_DIR);
        fs::create_dir_all(&dir).expect("mkdir");
        let f = File::create(dir.join(file)).expect("create");
        f.write_all_at(head, 0).expect("write");
        f.set_len(size).expect("sparse file");
        root
    }

    /// Sparse files claiming what their bytes do not hold: a 100 GB snapshot claiming 2^31-1
    /// sessions, a log entry claiming 0x7ffffff0 bytes in a 4 GiB file, a 100 GB log of
    /// zeros. Each is judged (`zkd datadir check`, as a start reads it) in well under a
    /// second and a few MiB. Run in a child process of its own, whose peak resident memory
    /// (`VmHWM`) is all this test's.
    #[test]
    fn sparse_files_are_judged_in_little_memory_and_time() {
        const CHILD: &str = "ZKD_SPARSE_FILES_CHILD";
        const NAME: &str =
            "persist::load::tests::sparse_files_are_judged_in_little_memory_and_time";
        if std::env::var_os(CHILD).is_none() {
            let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
                .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
                .env(CHILD, "1")
                .output()
                .expect("runs");
            assert!(
                out.status.success(),
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        use zkd_protocol::disk::{snapshot::SnapshotWriter, txnlog};
        let base = std::env::temp_dir().join(format!("zkd-sparse-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let rss_before = peak_rss_kib();

        let mut snap = SnapshotWriter::new(0).finish().to_vec();
        snap.truncate(16);
        snap.extend_from_slice(&i32::MAX.to_be_bytes());
        let snapshot = sparse_dir(&base, "snap", "snapshot.5", &snap, 100 << 30);

        let mut log = txnlog::file_header().to_vec();
        log.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
        log.extend_from_slice(&0x7fff_fff0i32.to_be_bytes());
        let huge_entry = sparse_dir(&base, "entry", "log.1", &log, 4 << 30);

        let zeros = sparse_dir(&base, "zeros", "log.1", &txnlog::file_header(), 100 << 30);

        for (root, says) in [
            (&snapshot, "session 0x0 listed twice"),
            (&huge_entry, "entry length 2147483632 is impossible"),
        ] {
            let t = Instant::now();
            let check = super::super::check_data_dir(root, txnlog::DEFAULT_JUTE_MAXBUFFER)
                .expect("a data directory");
            let damage = check.damage.expect("damaged");
            assert!(damage.contains(says), "{damage}");
            assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        }
        let t = Instant::now();
        let check = super::super::check_data_dir(&zeros, txnlog::DEFAULT_JUTE_MAXBUFFER)
            .expect("a data directory");
        assert_eq!(check.damage, None);
        assert!(
            check
                .findings
                .iter()
                .any(|f| f.contains("zero pre-allocation")),
            "{:?}",
            check.findings
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

        let grew = peak_rss_kib().saturating_sub(rss_before);
        let _ = fs::remove_dir_all(&base);
        assert!(grew < 64 << 10, "peak resident memory grew by {grew} KiB");
    }

    /// A data directory under `base/name` holding logs named after their first zxid, each
    /// with the creates of the zxids given (and, with `padding`, zeros after them).
    fn dir_of_logs(base: &Path, name: &str, logs: &[&[i64]], padding: usize) -> PathBuf {
        let root = base.join(name);
        let dir = root.join(super::super::datadir::VERSION_DIR);
        fs::create_dir_all(&dir).expect("mkdir");
        for zxids in logs {
            let mut bytes = txnlog::file_header().to_vec();
            for &zxid in *zxids {
                bytes.extend_from_slice(&txnlog::create_entry(zxid, &format!("/n{zxid:x}"), None));
            }
            bytes.resize(bytes.len() + padding, 0);
            fs::write(dir.join(format!("log.{:x}", zxids[0])), bytes).expect("write");
        }
        root
    }

    /// Two logs that each end cleanly (or in pre-allocated zeros), the second starting past
    /// the zxid after the first's last: the start refuses it as it refuses a jump inside one
    /// log, naming the later log, its first entry's offset and the zxids missing. A later
    /// epoch may start anywhere; the next zxid, or one already loaded, continues.
    #[test]
    fn a_gap_between_two_complete_logs_is_refused() {
        let base = std::env::temp_dir().join(format!("zkd-log-gap-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let e2 = 0x2_0000_0000;
        for padding in [0, 4096] {
            let gap = dir_of_logs(
                &base,
                &format!("gap{padding}"),
                &[&[1, 2, 3], &[6, 7]],
                padding,
            );
            let check = super::super::check_data_dir(&gap, txnlog::DEFAULT_JUTE_MAXBUFFER)
                .expect("a data directory");
            let damage = check.damage.expect("refused");
            assert!(
                damage.contains(
                    "log.6 starts with zxid 0x6 (its first entry, at offset 16), but what was \
                     loaded before it ends at zxid 0x3: transactions 0x4 to 0x5 are missing"
                ),
                "{damage}"
            );
            assert!(damage.contains("refusing to start"), "{damage}");
            for (name, logs) in [
                ("next", &[&[1i64, 2, 3][..], &[4, 5]][..]),
                ("overlap", &[&[1, 2, 3], &[3, 4]]),
                ("epoch", &[&[1, 2, 3], &[e2 + 5, e2 + 6]]),
            ] {
                let ok = dir_of_logs(&base, &format!("{name}{padding}"), logs, padding);
                let check = super::super::check_data_dir(&ok, txnlog::DEFAULT_JUTE_MAXBUFFER)
                    .expect("a data directory");
                assert_eq!(check.damage, None, "{name}: {:?}", check.findings);
            }
        }
        let _ = fs::remove_dir_all(&base);
    }
}
