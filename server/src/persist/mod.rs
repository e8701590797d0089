//! Opt-in persistence (`Config::data_dir`): loading the data directory at start, the
//! transaction log, and snapshots (every `snap_count` transactions, every `snap_interval`,
//! on demand, and at graceful shutdown). A snapshot holds the state at one zxid but is
//! encoded a slice of nodes at a time, with client requests served between the slices
//! (the core keeps copies of nodes changed before they are written); the file is written
//! after the last slice.

pub mod datadir;
pub mod load;
pub mod txnlog;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::config::{Config, FsyncPolicy};
use crate::core::{Core, SnapshotStep};
use crate::engine::PersistStats;
use crate::engine::Shared;
use datadir::DataDir;
use txnlog::TxnLog;

/// Nodes a snapshot encodes per hold of the core.
const SLICE_NODES: usize = 1000;

/// What one snapshot wrote.
#[derive(Debug, Clone)]
pub struct SnapshotInfo {
    /// The last zxid it holds (also in its file name).
    pub zxid: i64,
    pub path: PathBuf,
    pub bytes: usize,
    /// The longest the core was held at once while encoding it (client requests wait this
    /// long at most).
    pub core_held: Duration,
    /// How many times the core was taken to encode it (requests run in between).
    pub slices: u64,
    /// The most node copies kept at once for it (nodes changed before it wrote them).
    pub copies: usize,
    /// Encoding plus writing, syncing and renaming the file.
    pub total: Duration,
}

/// What `zkd datadir check` found in a data directory.
#[derive(Debug, Clone)]
pub struct DirCheck {
    /// File by file: what it holds, and what a start would do about it.
    pub findings: Vec<String>,
    /// The damage that stops a start (a sentence naming file and offset), if any.
    pub damage: Option<String>,
    /// The zxid and node count the directory loads to (when undamaged).
    pub zxid: i64,
    pub nodes: usize,
}

/// Reads a data directory (`root/version-2`) as a start would with `jute.maxbuffer` set to
/// `jute_maxbuffer`, without changing anything. `Err` when it cannot be read at all (e.g. it
/// does not exist).
pub fn check_data_dir(root: &std::path::Path, jute_maxbuffer: u64) -> Result<DirCheck, String> {
    let dir = DataDir::existing(root).map_err(|e| {
        format!(
            "{} is not a data directory: {e}",
            root.join(datadir::VERSION_DIR).display()
        )
    })?;
    let mut core = Core::new(Config::default().core_config(), 0);
    let mut findings = Vec::new();
    let max_entry = zkd_protocol::disk::txnlog::max_entry_len(jute_maxbuffer);
    let result = load::load(
        &dir,
        &mut core,
        0,
        load::LoadMode::Check,
        max_entry,
        &mut findings,
    );
    Ok(match result {
        Ok(loaded) => DirCheck {
            findings,
            damage: None,
            zxid: loaded.zxid,
            nodes: loaded.nodes,
        },
        Err(e) => DirCheck {
            findings,
            damage: Some(e),
            zxid: core.last_zxid(),
            nodes: core.node_count(),
        },
    })
}

/// A data directory that cannot be written at start-up (the first snapshot, e.g. on a full
/// disk): the sentence names the directory, the file and the system's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDirWriteError {
    pub dir: String,
    pub reason: String,
}

impl std::fmt::Display for DataDirWriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot write to the data directory {}: {}",
            self.dir, self.reason
        )
    }
}

impl std::error::Error for DataDirWriteError {}

/// The persistence of one server.
pub(crate) struct Persistence {
    dir: DataDir,
    log: TxnLog,
    retain: usize,
    interval: Option<Duration>,
    /// One snapshot at a time.
    snapshotting: Mutex<()>,
    /// zxid of the last snapshot written.
    last_snapshot: Mutex<i64>,
    /// Timings for the `monitor` metrics.
    stats: Mutex<PersistStats>,
}

impl Persistence {
    /// Loads `config.data_dir` into `core` and has it hand over its transaction records,
    /// which [`Persistence::store`] keeps.
    /// `Ok(None)` when no data directory is configured.
    pub(crate) fn open(
        config: &Config,
        core: &mut Core,
        now_ms: i64,
    ) -> Result<Option<(Persistence, bool)>, String> {
        let Some(root) = &config.data_dir else {
            return Ok(None);
        };
        let dir = DataDir::open(root)
            .map_err(|e| format!("cannot use data directory {}: {e}", root.display()))?;
        let started = Instant::now();
        let mode = if config.recover_truncate {
            load::LoadMode::Recover
        } else {
            load::LoadMode::Start
        };
        let max_entry = zkd_protocol::disk::txnlog::max_entry_len(config.max_frame_len as u64);
        let loaded = dir.load(core, now_ms, mode, max_entry)?;
        tracing::info!(
            dir = %root.display(),
            snapshot = ?loaded.snapshot,
            replayed = loaded.replayed,
            zxid = format_args!("0x{:x}", loaded.zxid),
            nodes = loaded.nodes,
            sessions = loaded.sessions,
            ms = started.elapsed().as_millis() as u64,
            "loaded data directory"
        );
        let mut stats = PersistStats::default();
        stats.db_init_ms.add(started.elapsed().as_millis() as u64);
        stats.txns_loaded.add(loaded.replayed);
        let log = TxnLog::new(
            dir.path().to_path_buf(),
            config.fsync,
            config.snap_count,
            config.fsync_warning_threshold_ms,
        );
        core.set_logging(true);
        // Like ZooKeeper, start from a snapshot of what was loaded when logs were replayed
        // (or nothing existed), so the next start reads one file.
        let snapshot_now = loaded.snapshot.is_none() || loaded.replayed > 0;
        Ok(Some((
            Persistence {
                dir,
                log,
                retain: config.snap_retain_count,
                interval: config.snap_interval,
                snapshotting: Mutex::new(()),
                last_snapshot: Mutex::new(loaded.snapshot_zxid),
                stats: Mutex::new(stats),
            },
            snapshot_now,
        )))
    }

    /// The store of the core's transaction records: the transaction log.
    pub(crate) fn store(&self) -> Box<dyn crate::engine::records::RecordStore> {
        self.log.sink()
    }

    /// Takes a snapshot now (blocking: call from a blocking context).
    pub(crate) fn snapshot(&self, shared: &Shared) -> Result<SnapshotInfo, String> {
        let _one = self.snapshotting.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        let failed = |_| "the server has stopped serving; no snapshot taken".to_string();
        let (mut job, old_log) = shared
            .with_core(|core, _| (core.begin_snapshot(), self.log.roll()))
            .map_err(failed)?;
        let mut core_held = started.elapsed();
        if let Some(f) = old_log {
            self.log
                .sync_file(&f)
                .inspect_err(|e| shared.fail(e.clone()))?;
        }
        let mut slices = 1;
        let bytes = loop {
            let (step, held) = shared
                .with_core(|core, _| {
                    let t = Instant::now();
                    (core.snapshot_step(&mut job, SLICE_NODES), t.elapsed())
                })
                .map_err(failed)?;
            core_held = core_held.max(held);
            slices += 1;
            match step {
                // The checksum over the whole file is computed without the core.
                Ok(SnapshotStep::Done) => match job.finish() {
                    Some(bytes) => break bytes,
                    None => return Err("snapshot abandoned: incomplete".into()),
                },
                // Let the requests that queued up during the slice take the core first.
                Ok(SnapshotStep::More) => std::thread::yield_now(),
                Err(e) => return Err(format!("snapshot abandoned: {e}")),
            }
        };
        let zxid = job.zxid();
        let path = self.dir.write_snapshot(zxid, &bytes).map_err(|e| {
            format!(
                "cannot write snapshot {}: {e}",
                self.dir
                    .path()
                    .join(datadir::file_name("snapshot", zxid))
                    .display()
            )
        })?;
        *self.last_snapshot.lock().unwrap_or_else(|e| e.into_inner()) = zxid;
        match self.dir.purge(self.retain) {
            Ok(removed) if !removed.is_empty() => {
                tracing::debug!(count = removed.len(), "removed old snapshots and logs")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot remove old snapshots"),
        }
        let info = SnapshotInfo {
            zxid,
            path,
            bytes: bytes.len(),
            core_held,
            slices,
            copies: job.most_copies_held(),
            total: started.elapsed(),
        };
        self.stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .snapshot_ms
            .add(info.total.as_millis() as u64);
        shared.record_snapshot(info.zxid, info.bytes, info.total, info.core_held);
        tracing::info!(
            file = %info.path.display(),
            bytes = info.bytes,
            nodes = job.nodes_written(),
            slices = info.slices,
            copies = info.copies,
            longest_hold_ms = info.core_held.as_millis() as u64,
            total_ms = info.total.as_millis() as u64,
            "snapshot written"
        );
        Ok(info)
    }

    /// The data directory given (`--data-dir`; its files are in `version-2` below it).
    pub(crate) fn dir_path(&self) -> &std::path::Path {
        self.dir.path().parent().unwrap_or(self.dir.path())
    }

    /// What the admin reports show of the data directory: its `version-2` path, the bytes
    /// its files hold, the newest snapshot (zxid, file modification time in seconds), if
    /// its file exists, and the timings. Reads the directory; takes no lock of the core.
    pub(crate) fn report(&self) -> crate::engine::DataDirInfo {
        let path = self.dir.path();
        let zxid = *self.last_snapshot.lock().unwrap_or_else(|e| e.into_inner());
        let snap = path.join(datadir::file_name("snapshot", zxid));
        let secs = |m: std::fs::Metadata| {
            m.modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs() as i64)
        };
        let size = std::fs::read_dir(path).map_or(0, |entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        });
        crate::engine::DataDirInfo {
            path: std::path::absolute(path)
                .unwrap_or_else(|_| path.to_path_buf())
                .display()
                .to_string(),
            size_bytes: size,
            last_snapshot: std::fs::metadata(&snap).ok().map(|m| (zxid, secs(m))),
            stats: self.stats(),
        }
    }

    /// The directory's timings and counts so far (`fsynctime`, `snapshottime`, …).
    pub(crate) fn stats(&self) -> PersistStats {
        let mut stats = *self.stats.lock().unwrap_or_else(|e| e.into_inner());
        let fsyncs = self.log.fsync_stats();
        stats.fsync_ms = fsyncs.times_ms;
        stats.fsync_over_threshold = fsyncs.over_threshold;
        stats
    }

    /// With `--fsync always`: installs group commit's counts in `shared` (call before any
    /// client connects, so that every reply waits for its transaction's sync) and starts the
    /// sync thread, which ends with [`Persistence::run`] or the server.
    pub(crate) fn start_group_commit(&self, shared: &Arc<Shared>) -> std::io::Result<()> {
        let _ = shared.durability.set(self.log.durability());
        let log = self.log.clone();
        let weak = Arc::downgrade(shared);
        std::thread::Builder::new()
            .name("zkd-log-sync".into())
            .spawn(move || {
                let alive = weak.clone();
                log.run_syncer(
                    move || alive.strong_count() > 0,
                    move |e| {
                        if let Some(shared) = weak.upgrade() {
                            shared.fail(e);
                        }
                    },
                )
            })
            .map(drop)
    }

    /// Keeps the sync thread of `always` from syncing while the guard lives; an error kind
    /// put in the guard fails the next sync.
    #[cfg(test)]
    pub(crate) fn hold_syncs(&self) -> std::sync::MutexGuard<'_, Option<std::io::ErrorKind>> {
        self.log.syncs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Syncs the log (graceful shutdown).
    pub(crate) fn sync_log(&self) {
        // Already logged as an ERROR line; the server is stopping anyway.
        let _ = self.log.sync_if_dirty();
    }

    /// Background work until `shutdown`: snapshots every `snap_count` transactions and
    /// every `snap_interval` (when something changed), and the batch policy's syncs.
    pub(crate) async fn run(
        this: Arc<Persistence>,
        shared: Arc<Shared>,
        policy: FsyncPolicy,
        shutdown: CancellationToken,
    ) {
        let far = Duration::from_secs(3600 * 24 * 365);
        let mut interval = tokio::time::interval(this.interval.unwrap_or(far));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval.tick().await;
        let mut syncs = tokio::time::interval(txnlog::BATCH_SYNC_INTERVAL);
        syncs.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let due = this.log.snapshot_due.clone();
        loop {
            let snapshot = tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = due.notified() => true,
                _ = interval.tick(), if this.interval.is_some() => {
                    let last = *this.last_snapshot.lock().unwrap_or_else(|e| e.into_inner());
                    shared.with_core(|core, _| core.last_zxid()).is_ok_and(|z| z != last)
                }
                _ = syncs.tick(), if policy == FsyncPolicy::Batch => {
                    let p = this.clone();
                    let synced = tokio::task::spawn_blocking(move || p.log.sync_if_dirty()).await;
                    if let Ok(Err(e)) = synced {
                        // Written data the OS could not store: stop, as a failed write does.
                        shared.fail(e);
                        break;
                    }
                    false
                }
            };
            if snapshot {
                let (p, s) = (this.clone(), shared.clone());
                let done = tokio::task::spawn_blocking(move || p.snapshot(&s)).await;
                if let Ok(Err(e)) = done {
                    tracing::error!("{e}");
                }
            }
        }
        this.log.stop_syncer();
    }
}
