//! Group commit's bookkeeping: how many transactions were written to the log and how many
//! of them are synced, so that replies and notifications wait for their transaction's sync
//! without the core waiting for it.
//!
//! With `--fsync always` the transaction log counts every transaction it writes (under the
//! core's lock, as the core hands it over) and a sync thread raises the synced count after
//! each `fsync`, which covers everything written before it started. The outbox puts a
//! barrier ([`super::Out::Durable`]) in front of each frame a core call queues after
//! writing a transaction; a connection's writer holds what follows a barrier until the
//! synced count reaches it. The log writer also records which paths each transaction
//! changed ([`super::unsynced`]), so that a read of any session that depends on an unsynced
//! transaction gets a barrier in front of its reply as well. Reads and writes of every
//! session keep being ordered and answered while the disk works; only what depends on an
//! unsynced transaction waits.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::unsynced::{Reads, Unsynced};

/// Transactions written to the log and transactions synced, as counts since start.
#[derive(Debug)]
pub(crate) struct Durability {
    /// Raised by the log writer, under the core's lock.
    written: AtomicU64,
    /// Raised by the sync thread after each sync.
    synced: watch::Sender<u64>,
    /// The paths changed by transactions written and not synced. Taken under the core's
    /// lock (by the log writer and by the engine before a read) and by the sync thread
    /// after each sync, a bounded number of entries at a time.
    unsynced: Mutex<Unsynced>,
}

/// Entries the sync thread forgets per hold of [`Durability::unsynced`].
const FORGET_PER_HOLD: usize = 1024;

impl Default for Durability {
    fn default() -> Self {
        Durability {
            written: AtomicU64::new(0),
            synced: watch::Sender::new(0),
            unsynced: Mutex::default(),
        }
    }
}

impl Durability {
    /// Transactions written so far.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// One more transaction is written (not yet synced); returns its number.
    pub(crate) fn wrote_one(&self) -> u64 {
        self.written.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// One more transaction is written (not yet synced), `txn` as logged: counts it and
    /// records the paths it changed.
    pub(crate) fn wrote(&self, txn: Bytes) -> u64 {
        let n = self.wrote_one();
        self.unsynced().wrote(n, txn);
        n
    }

    /// The number of the newest unsynced transaction that a request reading `reads`
    /// depends on; 0 when it depends on none.
    pub(crate) fn needs(&self, reads: &Reads) -> u64 {
        let (written, synced) = (self.written(), self.synced());
        if written <= synced || *reads == Reads::Nothing {
            return 0;
        }
        self.unsynced().needs(reads, written, synced)
    }

    fn unsynced(&self) -> MutexGuard<'_, Unsynced> {
        self.unsynced.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Entries of the paths table (paths, entries in write order), for tests.
    #[cfg(test)]
    pub(crate) fn unsynced_len(&self) -> (usize, usize) {
        self.unsynced().len()
    }

    /// Transactions synced so far.
    pub(crate) fn synced(&self) -> u64 {
        *self.synced.borrow()
    }

    /// A sync covered the first `n` transactions.
    pub(crate) fn synced_up_to(&self, n: u64) {
        self.synced.send_if_modified(|s| {
            let raised = n > *s;
            if raised {
                *s = n;
            }
            raised
        });
        // What the sync covered no longer holds reads back.
        while self.unsynced().forget_synced(n, FORGET_PER_HOLD) {}
    }

    /// Resolves once the first `n` transactions are synced, or once `failed` is cancelled
    /// (the server stopped: the caller's queue is killed and nothing after the barrier is
    /// written).
    pub(crate) fn wait_synced(
        &self,
        n: u64,
        failed: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.synced.subscribe();
        async move {
            tokio::select! {
                _ = rx.wait_for(|&s| s >= n) => {}
                _ = failed.cancelled() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_resolves_when_its_transaction_is_synced_and_not_before() {
        let d = Durability::default();
        assert_eq!((d.wrote_one(), d.wrote_one()), (1, 2));
        let token = CancellationToken::new();
        let wait = tokio::spawn(d.wait_synced(2, token.clone()));
        d.synced_up_to(1);
        tokio::task::yield_now().await;
        assert!(!wait.is_finished(), "transaction 2 is not synced yet");
        d.synced_up_to(2);
        wait.await.expect("resolved");
        d.synced_up_to(1);
        assert_eq!(d.synced(), 2, "the synced count never goes back");
    }

    #[tokio::test]
    async fn a_stopped_server_releases_waiters() {
        let d = Durability::default();
        d.wrote_one();
        let token = CancellationToken::new();
        let wait = tokio::spawn(d.wait_synced(1, token.clone()));
        token.cancel();
        wait.await.expect("released by the stop");
        assert_eq!(d.synced(), 0);
    }
}
