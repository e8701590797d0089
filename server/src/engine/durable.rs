//! Group commit's bookkeeping: how many transactions were written to the log and how many
//! of them are synced, so that replies and notifications wait for their transaction's sync
//! without the core waiting for it.
//!
//! With `--fsync always` the transaction log counts every transaction it writes (under the
//! core's lock, as the core hands it over) and a sync thread raises the synced count after
//! each `fsync`, which covers everything written before it started. The outbox puts a
//! barrier ([`super::Out::Durable`]) in front of each frame a core call queues after
//! writing a transaction; a connection's writer holds what follows a barrier until the
//! synced count reaches it. Reads and writes of every session keep being ordered and
//! answered while the disk works; only what depends on an unsynced transaction waits.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Transactions written to the log and transactions synced, as counts since start.
#[derive(Debug)]
pub(crate) struct Durability {
    /// Raised by the log writer, under the core's lock.
    written: AtomicU64,
    /// Raised by the sync thread after each sync.
    synced: watch::Sender<u64>,
}

impl Default for Durability {
    fn default() -> Self {
        Durability {
            written: AtomicU64::new(0),
            synced: watch::Sender::new(0),
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
