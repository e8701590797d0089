//! The transaction log writer: the [`RecordStore`] the engine hands each transaction record
//! the core committed to. It appends entries in ZooKeeper's log format to `log.<first zxid>` and syncs them
//! according to the [`FsyncPolicy`]; a snapshot starts a new file. A transaction that
//! cannot be written stops the server before its reply is sent (with `batch` and `never`,
//! before it is even queued), as ZooKeeper stops when its log cannot be written: nothing is
//! acknowledged that is not in the log.
//!
//! With `always` the writes are group-committed: an append only adds the entry to an
//! in-memory buffer and counts the transaction ([`Durability`]); a sync thread
//! ([`TxnLog::run_syncer`]) writes what was appended since its last round to the file, in
//! order, syncs it, and then raises the synced count that replies and notifications wait for.
//! So the core's lock is held for neither the write nor the sync, and one write and one sync
//! cover a whole group. That holds for a new file too: the append that needs one (the first,
//! and the first after each snapshot) only creates it and buffers its header; the sync
//! thread writes the header with the group, syncs the file and then the directory that
//! names it, before any reply waiting on the group is sent. A failed write or sync stops the
//! server before anything it did not cover is sent; what was only buffered was never
//! acknowledged.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::sync::Notify;
use zkd_protocol::disk::txnlog::{file_header, frame_entry};

use super::datadir::{file_name, sync_dir};
use crate::config::FsyncPolicy;
use crate::core::Series;
use crate::engine::durable::Durability;
use crate::engine::records::RecordStore;

/// How often `batch` syncs the log when something was written.
pub const BATCH_SYNC_INTERVAL: Duration = Duration::from_millis(100);

struct LogState {
    dir: PathBuf,
    policy: FsyncPolicy,
    file: Option<Arc<File>>,
    /// Written since the last sync (batch, always).
    dirty: bool,
    /// Entries appended (`always`) and not yet written to `file`.
    pending: BytesMut,
    /// Files rolled away by a snapshot with writes the sync thread has not synced yet, each
    /// with the entries appended to it and not yet written.
    rolled: Vec<(Arc<File>, BytesMut)>,
    /// A log file was created (`always`) and the directory naming it is not synced yet.
    dir_unsynced: bool,
    /// The sync thread waits on [`TxnLog::written`] (so an append must wake it).
    syncer_waiting: bool,
    /// The sync thread is asked to end.
    stopping: bool,
    /// Transactions since the last snapshot.
    since_snapshot: u64,
    snap_count: u64,
    /// Set after a write error: the log is incomplete from here on.
    failed: Option<String>,
}

/// The shared log; cloned into the core's sink, the syncers and the snapshotter.
#[derive(Clone)]
pub struct TxnLog {
    state: Arc<Mutex<LogState>>,
    /// Wakes the sync thread when something was appended (`always`).
    written: Arc<Condvar>,
    /// Held through a whole [`TxnLog::sync_if_dirty`], so buffered entries reach each file in
    /// the order they were appended whoever syncs.
    writing: Arc<Mutex<()>>,
    /// Transactions written and synced (`always`).
    durability: Arc<Durability>,
    /// Held by a test to keep the sync thread from syncing; an error put in it fails the
    /// next sync.
    #[cfg(test)]
    pub(crate) syncs: Arc<Mutex<Option<io::ErrorKind>>>,
    /// Woken when `snap_count` transactions have been logged since the last snapshot.
    pub snapshot_due: Arc<Notify>,
    /// Each sync's duration and the syncs over the threshold.
    fsyncs: Arc<Mutex<FsyncStats>>,
    /// A sync longer than this (ms) is logged and counted.
    fsync_threshold_ms: i64,
    /// The slow syncs not yet handed to the history (ms, file bytes), at most
    /// [`MAX_SLOW_SYNCS`].
    slow_syncs: Arc<Mutex<Vec<(u64, u64)>>>,
}

/// Slow syncs kept for the history between two ticks (more are only logged).
const MAX_SLOW_SYNCS: usize = 64;

/// What the syncs of the log took (`fsynctime`, `fsync_threshold_exceed_count`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FsyncStats {
    /// Each sync of a log file, in whole milliseconds.
    pub times_ms: Series,
    /// Syncs that took longer than the threshold.
    pub over_threshold: u64,
}

impl TxnLog {
    /// A log in `dir`; a sync longer than `fsync_threshold_ms` is logged and counted.
    pub fn new(
        dir: PathBuf,
        policy: FsyncPolicy,
        snap_count: u64,
        fsync_threshold_ms: i64,
    ) -> TxnLog {
        TxnLog {
            state: Arc::new(Mutex::new(LogState {
                dir,
                policy,
                file: None,
                dirty: false,
                pending: BytesMut::new(),
                rolled: Vec::new(),
                dir_unsynced: false,
                syncer_waiting: false,
                stopping: false,
                since_snapshot: 0,
                snap_count: snap_count.max(1),
                failed: None,
            })),
            snapshot_due: Arc::new(Notify::new()),
            written: Arc::new(Condvar::new()),
            writing: Arc::new(Mutex::new(())),
            durability: Arc::new(Durability::default()),
            #[cfg(test)]
            syncs: Arc::default(),
            fsyncs: Arc::default(),
            slow_syncs: Arc::default(),
            fsync_threshold_ms,
        }
    }

    /// What the syncs took so far.
    pub fn fsync_stats(&self) -> FsyncStats {
        *self.fsyncs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The counts replies wait on with `always` (group commit).
    pub fn durability(&self) -> Arc<Durability> {
        self.durability.clone()
    }

    /// The sync thread of `always`: until [`TxnLog::stop_syncer`] (or `wanted` says no more,
    /// asked every second while idle), waits for writes, syncs every file they went to and
    /// raises the synced count to what was written when the sync began. On a failed sync it
    /// calls `failed` with the sentence (logged once) and ends; the synced count stays where
    /// it was.
    pub fn run_syncer(&self, wanted: impl Fn() -> bool, failed: impl FnOnce(String)) {
        loop {
            {
                let mut st = self.lock();
                while !st.dirty && !st.stopping {
                    if !wanted() {
                        return;
                    }
                    let idle = Duration::from_secs(1);
                    st.syncer_waiting = true;
                    st = match self.written.wait_timeout(st, idle) {
                        Ok((st, _)) => st,
                        Err(e) => e.into_inner().0,
                    };
                    st.syncer_waiting = false;
                }
                if !st.dirty {
                    return;
                }
            }
            #[cfg(test)]
            if let Some(kind) = self.syncs.lock().unwrap_or_else(|e| e.into_inner()).take() {
                failed(self.failure("sync", &kind.into()));
                return;
            }
            if let Err(e) = self.sync_if_dirty() {
                failed(e);
                return;
            }
        }
    }

    /// Asks the sync thread to end once what is written is synced.
    pub fn stop_syncer(&self) {
        self.lock().stopping = true;
        self.written.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The store the engine hands the core's records to.
    pub fn sink(&self) -> Box<dyn RecordStore> {
        Box::new(self.clone())
    }

    /// Called with the core held, right after it produced a snapshot: later transactions go
    /// to a new file named after the first of them. Returns the old file, which the caller
    /// syncs after releasing the core ([`TxnLog::sync_file`]).
    #[must_use]
    pub fn roll(&self) -> Option<Arc<File>> {
        let mut st = self.lock();
        st.since_snapshot = 0;
        let old = st.file.take();
        if st.policy == FsyncPolicy::Always {
            // Replies wait for the sync thread, which must write what is buffered for this
            // file and sync it too.
            if st.dirty {
                let pending = std::mem::take(&mut st.pending);
                if let Some(f) = &old {
                    st.rolled.push((f.clone(), pending));
                }
            }
        } else {
            st.dirty = false;
        }
        old.filter(|_| st.policy != FsyncPolicy::Never)
    }

    /// Syncs a file returned by [`TxnLog::roll`]; the error says what failed.
    /// Each sync is timed; one longer than the threshold is logged as a warning (with the
    /// file's size) and counted, as ZooKeeper does.
    pub fn sync_file(&self, file: &File) -> Result<(), String> {
        let started = Instant::now();
        file.sync_data().map_err(|e| self.failure("sync", &e))?;
        let ms = started.elapsed().as_millis() as u64;
        let over = i64::try_from(ms).unwrap_or(i64::MAX) > self.fsync_threshold_ms;
        {
            let mut stats = self.fsyncs.lock().unwrap_or_else(|e| e.into_inner());
            stats.times_ms.add(ms);
            stats.over_threshold += u64::from(over);
        }
        if over {
            let size = file.metadata().map_or(0, |m| m.len());
            let mut slow = self.slow_syncs.lock().unwrap_or_else(|e| e.into_inner());
            if slow.len() < MAX_SLOW_SYNCS {
                slow.push((ms, size));
            }
            drop(slow);
            tracing::warn!(
                ms,
                threshold_ms = self.fsync_threshold_ms,
                file_bytes = size,
                "syncing the transaction log took {ms} ms (over fsync.warningthresholdms, \
                 {} ms); writes wait this long for their replies: the disk is slow or busy",
                self.fsync_threshold_ms
            );
        }
        Ok(())
    }

    /// Writes what was appended and only buffered (`always`) and syncs what was written
    /// since the last sync (every file it went to, in order), then raises the synced count to
    /// what was appended when it began; nothing when nothing was appended. The write and the
    /// sync run without holding the log, so appends are not delayed by them.
    pub fn sync_if_dirty(&self) -> Result<(), String> {
        let _one = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let (files, new_file_in, written) = {
            let mut st = self.lock();
            if !st.dirty {
                return Ok(());
            }
            st.dirty = false;
            let mut files = std::mem::take(&mut st.rolled);
            if let Some(f) = st.file.clone() {
                files.push((f, std::mem::take(&mut st.pending)));
            }
            let new_file_in = std::mem::take(&mut st.dir_unsynced).then(|| st.dir.clone());
            (files, new_file_in, self.durability.written())
        };
        for (f, pending) in &files {
            if !pending.is_empty() {
                (&**f)
                    .write_all(pending)
                    .map_err(|e| self.failure("write", &e))?;
            }
            self.sync_file(f)?;
        }
        if let Some(dir) = new_file_in {
            // The new file's name, so that a restart finds what was just synced in it.
            sync_dir(&dir).map_err(|e| self.failure("sync the directory of", &e))?;
        }
        self.durability.synced_up_to(written);
        Ok(())
    }

    /// The sentence for a failed write or sync, logged once as an ERROR line.
    fn failure(&self, what: &str, e: &io::Error) -> String {
        let mut st = self.lock();
        let message = format!(
            "cannot {what} the transaction log in {}: {e}; stopping, since a change that is \
             not on disk must not be acknowledged",
            st.dir.display()
        );
        if st.failed.is_none() {
            tracing::error!("{message}");
            st.failed = Some(message.clone());
            st.file = None;
        }
        message
    }

    fn append_entry(st: &mut LogState, zxid: i64, txn: &[u8]) -> io::Result<()> {
        if st.file.is_none() {
            let path = st.dir.join(file_name("log", zxid));
            // A file of this name can only hold a header or a cut tail: every valid entry in
            // it would have been replayed, making this zxid older than the state.
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)?;
            if st.policy == FsyncPolicy::Always {
                // Written and synced by the sync thread with the group, not under the core's
                // lock. Until then the file is shorter than a header, which a start-up reads
                // as a log holding no transaction; nothing in it was acknowledged.
                st.pending.extend_from_slice(&file_header());
                st.dir_unsynced = true;
            } else {
                f.write_all(&file_header())?;
            }
            st.file = Some(Arc::new(f));
        }
        if st.policy == FsyncPolicy::Always {
            // Written by the sync thread, with the rest of its group.
            frame_entry(txn, &mut st.pending);
            st.dirty = true;
            return Ok(());
        }
        let mut buf = BytesMut::with_capacity(txn.len() + 13);
        frame_entry(txn, &mut buf);
        if let Some(f) = &st.file {
            (&**f).write_all(&buf)?;
            if st.policy == FsyncPolicy::Batch {
                st.dirty = true;
            }
        }
        Ok(())
    }
}

impl RecordStore for TxnLog {
    /// A new epoch: a snapshot of the state it starts from is due (the persistence task takes
    /// it at once, a slice at a time; several epochs in a row make one snapshot).
    fn epoch_started(&mut self, epoch: i64) {
        tracing::info!(epoch, "a new epoch starts: taking a snapshot");
        self.snapshot_due.notify_one();
    }

    fn take_slow_syncs(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut *self.slow_syncs.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Appends one transaction. When it cannot be written (under every policy) or synced
    /// (`always`), this returns the sentence naming the file: the engine lets go of nothing
    /// that waited for it (not the reply to the transaction, nor its notifications), and the
    /// server stops serving.
    fn store(&mut self, zxid: i64, txn: Bytes) -> Result<(), String> {
        let error = {
            let mut st = self.lock();
            if let Some(earlier) = st.failed.clone() {
                return Err(earlier);
            }
            st.since_snapshot += 1;
            if st.since_snapshot == st.snap_count {
                self.snapshot_due.notify_one();
            }
            let error = Self::append_entry(&mut st, zxid, &txn).err();
            if error.is_none() && st.policy == FsyncPolicy::Always {
                // Counted, with the paths it changed: reads of them wait for its sync.
                self.durability.wrote(txn);
                if st.syncer_waiting {
                    // Once per group: the thread is not waiting again until it has synced.
                    st.syncer_waiting = false;
                    self.written.notify_one();
                }
            }
            error
        };
        match error {
            Some(e) => Err(self.failure(&format!("write transaction 0x{zxid:x} to"), &e)),
            None => Ok(()),
        }
    }
}
