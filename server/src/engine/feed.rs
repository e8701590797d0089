//! How client requests reach the core: connection tasks hand their batches over, and one
//! thread at a time feeds every batch handed over to the core, in order, under one lock.
//!
//! Each connection task reads what its socket holds and hands the complete frames over as
//! one [`Handed`] batch. Whichever thread finds nobody feeding becomes the feeder: it takes
//! every batch waiting, feeds them all to the core under one acquisition of the core's lock,
//! releases it, and looks again. A thread that finds another thread feeding leaves its batch
//! behind and goes on with its other connections instead of queueing for the lock, so adding
//! threads (cores) adds readers and writers, not contenders for the lock: the threads do not
//! convoy on the lock, and the core's work runs batched on the thread that is already warm.
//! With one thread, or no contention, the thread that hands a batch over feeds it at once,
//! as a direct call would.
//!
//! Order: batches are fed in the order they were handed over, one feeder at a time, so the
//! core still sees one total order and each connection's requests in the order they arrived.
//! A connection hands over at most one batch at a time: until it is fed the task reads no
//! more from its socket ([`super::queue::ConnQueue::park_fed`]), which also bounds what waits
//! here by what connections have read. A close the reader asks for after a corrupt frame
//! travels with its batch, so the good frames before it are fed first.
//!
//! A feeder that keeps finding new batches hands the rest to a fresh task after
//! [`MAX_ROUNDS`] rounds, so one connection's task is not kept from its own socket for long.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use bytes::Bytes;

use super::queue::ConnQueue;
use crate::core::ConnId;

/// Rounds a feeder runs before handing further batches to a task of their own.
pub(crate) const MAX_ROUNDS: usize = 8;

/// One connection's complete frames, handed over to be fed to the core in order.
pub(crate) struct Handed {
    pub(crate) id: ConnId,
    /// The connection's queue, told when the batch was fed.
    pub(crate) q: std::sync::Arc<ConnQueue>,
    pub(crate) frames: Vec<Bytes>,
    /// When the frames were read off the socket.
    pub(crate) arrived: Instant,
    /// The reader found a corrupt frame after these: close the connection once they are fed.
    pub(crate) close_after: bool,
}

/// The batches handed over and not yet taken by a feeder, and whether a thread is feeding.
#[derive(Default)]
pub(crate) struct Feed {
    waiting: Mutex<Vec<Handed>>,
    feeding: AtomicBool,
}

impl Feed {
    /// Adds `batch` behind every batch handed over before it.
    pub(crate) fn hand_over(&self, batch: Handed) {
        batch.q.handed_over();
        self.waiting().push(batch);
    }

    /// Becomes the feeder: false if another thread is feeding (it will take what waits).
    pub(crate) fn start_feeding(&self) -> bool {
        !self.feeding.swap(true, Ordering::SeqCst)
    }

    /// Stops feeding; true if batches arrived meanwhile that nobody else will take unless
    /// this thread (or another one, by becoming the feeder) does. Checked after letting go,
    /// so a batch handed over while this thread was feeding is never left behind.
    pub(crate) fn stop_feeding(&self) -> bool {
        self.feeding.store(false, Ordering::SeqCst);
        !self.waiting().is_empty()
    }

    /// Moves every waiting batch, in order, into `into` (which must be empty), keeping the
    /// storage of both lists.
    pub(crate) fn take(&self, into: &mut Vec<Handed>) {
        debug_assert!(into.is_empty());
        std::mem::swap(&mut *self.waiting(), into);
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Vec<Handed>> {
        // Every operation under this lock is a single push or swap: never half done.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(id: ConnId) -> Handed {
        Handed {
            id,
            q: Default::default(),
            frames: vec![Bytes::from_static(b"12345678")],
            arrived: Instant::now(),
            close_after: false,
        }
    }

    #[test]
    fn one_feeder_at_a_time_takes_the_batches_in_order() {
        let feed = Feed::default();
        feed.hand_over(batch(1));
        feed.hand_over(batch(2));
        assert!(feed.start_feeding());
        assert!(!feed.start_feeding(), "a second thread leaves its batch");
        let mut taken = Vec::new();
        feed.take(&mut taken);
        assert_eq!(taken.iter().map(|b| b.id).collect::<Vec<_>>(), [1, 2]);
        // A batch handed over while the first thread feeds is seen when it stops.
        feed.hand_over(batch(3));
        assert!(feed.stop_feeding());
        assert!(feed.start_feeding());
        taken.clear();
        feed.take(&mut taken);
        assert_eq!(taken.iter().map(|b| b.id).collect::<Vec<_>>(), [3]);
        assert!(!feed.stop_feeding(), "nothing left");
    }
}
