//! The transaction log writer: the [`TxnSink`] the core hands each committed transaction
//! to. It appends entries in ZooKeeper's log format to `log.<first zxid>` and syncs them
//! according to the [`FsyncPolicy`]; a snapshot starts a new file. A transaction that
//! cannot be written (or, with `always`, synced) stops the server before its reply is
//! queued, as ZooKeeper stops when its log cannot be written: nothing is acknowledged that
//! is not in the log.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::Notify;
use zkd_protocol::disk::txnlog::{file_header, frame_entry};

use super::datadir::{file_name, sync_dir};
use crate::config::FsyncPolicy;
use crate::core::TxnSink;
use crate::engine::StopServing;

/// How often `batch` syncs the log when something was written.
pub const BATCH_SYNC_INTERVAL: Duration = Duration::from_millis(100);

struct LogState {
    dir: PathBuf,
    policy: FsyncPolicy,
    file: Option<Arc<File>>,
    /// Written since the last sync (batch).
    dirty: bool,
    /// Transactions since the last snapshot.
    since_snapshot: u64,
    snap_count: u64,
    /// Set after a write error: the log is incomplete from here on.
    failed: Option<String>,
}

/// The shared log; cloned into the core's sink, the batch syncer and the snapshotter.
#[derive(Clone)]
pub struct TxnLog {
    state: Arc<Mutex<LogState>>,
    /// Woken when `snap_count` transactions have been logged since the last snapshot.
    pub snapshot_due: Arc<Notify>,
}

impl TxnLog {
    pub fn new(dir: PathBuf, policy: FsyncPolicy, snap_count: u64) -> TxnLog {
        TxnLog {
            state: Arc::new(Mutex::new(LogState {
                dir,
                policy,
                file: None,
                dirty: false,
                since_snapshot: 0,
                snap_count: snap_count.max(1),
                failed: None,
            })),
            snapshot_due: Arc::new(Notify::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sink to install in the core.
    pub fn sink(&self) -> Box<dyn TxnSink> {
        Box::new(self.clone())
    }

    /// Called with the core held, right after it produced a snapshot: later transactions go
    /// to a new file named after the first of them. Returns the old file, which the caller
    /// syncs after releasing the core ([`TxnLog::sync_file`]).
    #[must_use]
    pub fn roll(&self) -> Option<Arc<File>> {
        let mut st = self.lock();
        st.dirty = false;
        st.since_snapshot = 0;
        let old = st.file.take();
        old.filter(|_| st.policy != FsyncPolicy::Never)
    }

    /// Syncs a file returned by [`TxnLog::roll`]; the error says what failed.
    pub fn sync_file(&self, file: &File) -> Result<(), String> {
        file.sync_data().map_err(|e| self.failure("sync", &e))
    }

    /// Syncs the current file if something was written since the last sync (batch policy).
    /// The sync itself runs without holding the log, so appends are not delayed by it.
    pub fn sync_if_dirty(&self) -> Result<(), String> {
        let file = {
            let mut st = self.lock();
            if !st.dirty {
                return Ok(());
            }
            st.dirty = false;
            st.file.clone()
        };
        match file {
            Some(f) => self.sync_file(&f),
            None => Ok(()),
        }
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
            f.write_all(&file_header())?;
            if st.policy == FsyncPolicy::Always {
                f.sync_all()?;
                sync_dir(&st.dir)?;
            }
            st.file = Some(Arc::new(f));
        }
        let mut buf = BytesMut::with_capacity(txn.len() + 13);
        frame_entry(txn, &mut buf);
        if let Some(f) = &st.file {
            (&**f).write_all(&buf)?;
            match st.policy {
                FsyncPolicy::Always => f.sync_data()?,
                FsyncPolicy::Batch => st.dirty = true,
                FsyncPolicy::Never => {}
            }
        }
        Ok(())
    }
}

impl TxnSink for TxnLog {
    /// Appends one transaction. When it cannot be written (under every policy) or synced
    /// (`always`), this unwinds with [`StopServing`]: the core call that committed the
    /// transaction ends there, before its reply or notifications are queued, and the server
    /// stops serving.
    fn append(&mut self, zxid: i64, txn: Bytes) {
        let error = {
            let mut st = self.lock();
            if let Some(earlier) = st.failed.clone() {
                drop(st);
                std::panic::resume_unwind(Box::new(StopServing(earlier)));
            }
            st.since_snapshot += 1;
            if st.since_snapshot == st.snap_count {
                self.snapshot_due.notify_one();
            }
            Self::append_entry(&mut st, zxid, &txn).err()
        };
        if let Some(e) = error {
            let message = self.failure(&format!("write transaction 0x{zxid:x} to"), &e);
            std::panic::resume_unwind(Box::new(StopServing(message)));
        }
    }
}
