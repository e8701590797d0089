//! Outbound accounting: bytes of replies and notifications queued and not yet written, per
//! connection (`--max-outbound-bytes`) and for the whole server
//! (`--max-total-outbound-bytes`). Past the server-wide limit, the connections holding the
//! most are dropped first, each with a log line.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::ConnHandle;
use crate::core::ConnId;

/// Marks a connection's counter once its queue is discarded: its bytes no longer count.
const DEAD: usize = 1 << (usize::BITS - 1);

/// The server-wide outbound limits and the running total.
#[derive(Debug)]
pub(crate) struct OutBudget {
    pub(crate) per_conn: usize,
    pub(crate) limit: usize,
    total: AtomicUsize,
}

impl OutBudget {
    pub(crate) fn new(per_conn: usize, limit: usize) -> OutBudget {
        OutBudget {
            per_conn,
            limit,
            total: AtomicUsize::new(0),
        }
    }

    /// Bytes queued on all connections.
    pub(crate) fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }
}

/// One connection's queued bytes, shared by the registry (which adds, under the core lock)
/// and the connection's writer (which subtracts what it wrote).
#[derive(Debug, Default)]
pub(crate) struct Queued(AtomicUsize);

impl Queued {
    /// Counts `n` more bytes queued; returns the connection's new total.
    pub(crate) fn add(&self, n: usize, budget: &OutBudget) -> usize {
        budget.total.fetch_add(n, Ordering::Relaxed);
        (self.0.fetch_add(n, Ordering::Relaxed) + n) & !DEAD
    }

    /// The writer wrote `n` bytes. Nothing changes once the queue was discarded (its bytes
    /// were taken off the total then).
    pub(crate) fn written(&self, n: usize, budget: &OutBudget) {
        let done = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                (v & DEAD == 0).then(|| v.saturating_sub(n))
            });
        if done.is_ok() {
            budget.total.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// The queue is being discarded: takes its bytes off the total (once).
    pub(crate) fn discard(&self, budget: &OutBudget) {
        let before = self.0.swap(DEAD, Ordering::Relaxed);
        if before & DEAD == 0 {
            budget.total.fetch_sub(before, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed) & !DEAD
    }

    pub(crate) fn is_discarded(&self) -> bool {
        self.0.load(Ordering::Relaxed) & DEAD != 0
    }
}

/// Drops a connection at once: its queue is discarded and its socket closed.
pub(crate) fn drop_connection(h: &mut ConnHandle, budget: &OutBudget) {
    h.closing = true;
    h.q.kill();
    h.q.queued.discard(budget);
}

/// While the server-wide total is over the limit, drops the connection holding the most.
pub(crate) fn enforce_total(conns: &mut HashMap<ConnId, ConnHandle>, budget: &OutBudget) {
    while budget.total() > budget.limit {
        let Some((&id, h)) = conns
            .iter_mut()
            .filter(|(_, h)| !h.q.queued.is_discarded())
            .max_by_key(|(_, h)| h.q.queued.get())
        else {
            return;
        };
        let queued = h.q.queued.get();
        if queued == 0 {
            return;
        }
        tracing::warn!(
            conn = id,
            queued,
            total = budget.total(),
            limit = budget.limit,
            "closing connection: server-wide outbound limit (--max-total-outbound-bytes) \
             reached; this connection holds the most unwritten data"
        );
        drop_connection(h, budget);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_discards_once() {
        let b = OutBudget::new(100, 1000);
        let q = Queued::default();
        assert_eq!(q.add(40, &b), 40);
        assert_eq!(q.add(30, &b), 70);
        q.written(50, &b);
        assert_eq!((q.get(), b.total()), (20, 20));
        q.discard(&b);
        assert_eq!(b.total(), 0);
        q.written(20, &b);
        q.discard(&b);
        assert_eq!(b.total(), 0, "a discarded queue is never subtracted again");
        assert!(q.is_discarded());
    }
}
