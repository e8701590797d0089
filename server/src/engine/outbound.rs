//! Outbound accounting: bytes of replies and notifications queued and not yet written, per
//! connection (`--max-outbound-bytes`) and for the whole server
//! (`--max-total-outbound-bytes`). Past the server-wide limit, the connections holding the
//! most are dropped first, each with a log line.
//!
//! A connection owes every byte queued on it, and is judged by all of them against its own
//! limit. The server-wide total counts what is held: the shared body of a frame (a cached
//! child list queued on many connections) counts once while any queue holds it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::{ConnHandle, Conns};

/// Marks a connection's counter once its queue is discarded: its bytes no longer count.
const DEAD: usize = 1 << (usize::BITS - 1);

/// The server-wide outbound limits and the running total.
#[derive(Debug)]
pub(crate) struct OutBudget {
    pub(crate) per_conn: usize,
    pub(crate) limit: usize,
    total: AtomicUsize,
    /// Shared bodies queued somewhere, by (address, length), with how many queued copies.
    bodies: Mutex<HashMap<(usize, usize), usize>>,
}

impl OutBudget {
    pub(crate) fn new(per_conn: usize, limit: usize) -> OutBudget {
        OutBudget {
            per_conn,
            limit,
            total: AtomicUsize::new(0),
            bodies: Mutex::default(),
        }
    }

    fn bodies(&self) -> std::sync::MutexGuard<'_, HashMap<(usize, usize), usize>> {
        // Every operation under this lock is one map update, so a poisoned lock is usable.
        self.bodies.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One more queue holds `body`: the first holder counts its bytes in the total.
    pub(crate) fn hold(self: &Arc<Self>, body: Bytes) -> HeldBody {
        let key = (body.as_ptr() as usize, body.len());
        let holders = {
            let mut bodies = self.bodies();
            let n = bodies.entry(key).or_insert(0);
            *n += 1;
            *n
        };
        if holders == 1 {
            self.total.fetch_add(body.len(), Ordering::Relaxed);
        }
        HeldBody {
            body,
            budget: self.clone(),
        }
    }

    /// One holder of the body `key` let go of it: the last takes its bytes off the total.
    fn release(&self, key: (usize, usize)) {
        let last = {
            let mut bodies = self.bodies();
            match bodies.get_mut(&key) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    false
                }
                Some(_) => {
                    bodies.remove(&key);
                    true
                }
                None => false,
            }
        };
        if last {
            self.total.fetch_sub(key.1, Ordering::Relaxed);
        }
    }

    /// Bytes queued on all connections.
    pub(crate) fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }
}

/// A shared body in a queue: counted in the server-wide total while any [`HeldBody`] of it
/// lives. Dropping it (written, or thrown away with its queue) lets go of the hold.
#[derive(Debug)]
pub(crate) struct HeldBody {
    pub(crate) body: Bytes,
    budget: Arc<OutBudget>,
}

impl Drop for HeldBody {
    fn drop(&mut self) {
        self.budget
            .release((self.body.as_ptr() as usize, self.body.len()));
    }
}

/// One connection's queued bytes, shared by the registry (which adds, under the core lock)
/// and the connection's writer (which subtracts what it wrote): all bytes it owes, and
/// those of them the server-wide total counts for it (all but shared bodies, which
/// [`HeldBody`] counts).
#[derive(Debug, Default)]
pub(crate) struct Queued {
    all: AtomicUsize,
    own: AtomicUsize,
}

/// Subtracts `n` from `counter` unless it was discarded; whether it was subtracted.
fn take_off(counter: &AtomicUsize, n: usize) -> bool {
    counter
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            (v & DEAD == 0).then(|| v.saturating_sub(n))
        })
        .is_ok()
}

impl Queued {
    /// Counts `n` more bytes queued, `own` of them outside shared bodies; returns all the
    /// bytes the connection owes.
    pub(crate) fn add(&self, n: usize, own: usize, budget: &OutBudget) -> usize {
        budget.total.fetch_add(own, Ordering::Relaxed);
        self.own.fetch_add(own, Ordering::Relaxed);
        (self.all.fetch_add(n, Ordering::Relaxed) + n) & !DEAD
    }

    /// The writer wrote `n` bytes, `own` of them outside shared bodies. Nothing changes
    /// once the queue was discarded (its bytes were taken off the total then).
    pub(crate) fn written(&self, n: usize, own: usize, budget: &OutBudget) {
        take_off(&self.all, n);
        if take_off(&self.own, own) {
            budget.total.fetch_sub(own, Ordering::Relaxed);
        }
    }

    /// The queue is being discarded: takes its bytes off the total (once).
    pub(crate) fn discard(&self, budget: &OutBudget) {
        self.all.swap(DEAD, Ordering::Relaxed);
        let before = self.own.swap(DEAD, Ordering::Relaxed);
        if before & DEAD == 0 {
            budget.total.fetch_sub(before, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self) -> usize {
        self.all.load(Ordering::Relaxed) & !DEAD
    }

    pub(crate) fn is_discarded(&self) -> bool {
        self.all.load(Ordering::Relaxed) & DEAD != 0
    }
}

/// Drops a connection at once: its queue is discarded (the shared bodies in it let go of)
/// and its socket closed.
pub(crate) fn drop_connection(h: &mut ConnHandle, budget: &OutBudget) {
    h.closing = true;
    h.q.kill();
    h.q.queued.discard(budget);
    h.q.clear();
}

/// While the server-wide total is over the limit, drops the connection holding the most.
pub(crate) fn enforce_total(conns: &mut Conns, budget: &OutBudget) {
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
        h.why.get_or_insert(super::history::CloseWhy::Limits);
        drop_connection(h, budget);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::core::Frame;
    use crate::engine::queue::ConnQueue;

    #[test]
    fn counts_and_discards_once() {
        let b = OutBudget::new(100, 1000);
        let q = Queued::default();
        assert_eq!(q.add(40, 40, &b), 40);
        assert_eq!(q.add(30, 30, &b), 70);
        q.written(50, 50, &b);
        assert_eq!((q.get(), b.total()), (20, 20));
        q.discard(&b);
        assert_eq!(b.total(), 0);
        q.written(20, 20, &b);
        q.discard(&b);
        assert_eq!(b.total(), 0, "a discarded queue is never subtracted again");
        assert!(q.is_discarded());
    }

    /// Queues `frame` on `q` as the registry does.
    fn queue(q: &ConnQueue, frame: Frame, b: &Arc<OutBudget>) -> usize {
        let owed = q.queued.add(frame.len(), frame.len() - frame.body.len(), b);
        q.push_frame(None, frame, b).expect("writer alive");
        owed
    }

    #[test]
    fn a_shared_body_counts_once_until_every_queue_lets_go() {
        let b = Arc::new(OutBudget::new(1 << 20, 1 << 20));
        let list = Bytes::from(vec![7u8; 1000]);
        let frame = |body: &Bytes| Frame {
            head: Bytes::from_static(b"head"),
            body: body.clone(),
            tail: Bytes::from_static(b"t"),
        };
        let qs: Vec<ConnQueue> = (0..4).map(|_| ConnQueue::default()).collect();
        for q in &qs {
            // Each connection still owes every byte.
            assert_eq!(queue(q, frame(&list), &b), 1005);
        }
        assert_eq!(b.total(), 4 * 5 + 1000, "the list counts once");
        // The same list twice on one queue, and equal bytes in another buffer (counted apart).
        assert_eq!(queue(&qs[0], frame(&list), &b), 2010);
        let copy = Bytes::from(list.to_vec());
        assert_eq!(queue(&qs[3], frame(&copy), &b), 2010);
        assert_eq!(b.total(), 6 * 5 + 2000);

        // Written: the writer takes the parts, writes them, then lets go of the body.
        let mut taken = VecDeque::new();
        qs[0].take_while(|o| {
            taken.push_back(o);
            true
        });
        assert_eq!(taken.len(), 6);
        qs[0].queued.written(2010, 10, &b);
        drop(taken);
        assert_eq!((qs[0].queued.get(), b.total()), (0, 4 * 5 + 2000));
        // Dropped for a limit: discarded and cleared at once.
        qs[1].queued.discard(&b);
        qs[1].clear();
        assert_eq!(b.total(), 3 * 5 + 2000);
        // Closed with frames still queued: the writer's end goes away.
        qs[2].queued.discard(&b);
        qs[2].close_receiver();
        assert_eq!(
            b.total(),
            2 * 5 + 2000,
            "the last holder of the list remains"
        );
        qs[3].queued.discard(&b);
        drop(qs);
        assert_eq!(b.total(), 0);
        assert!(b.bodies().is_empty());
    }
}
