//! A connection's outbound queue: what the core sent it and the connection has not taken
//! yet, its byte count, the kill switch and the connection's waker, in one small shared
//! allocation.
//!
//! It replaces a channel plus a cancellation token per connection: an idle connection holds
//! an empty `VecDeque` (no storage until something is queued), a few flags and its task's
//! waker, under one lock, where an unbounded channel preallocates a block of slots.
//!
//! Pushes made under the core's lock do not wake the task there: they return its waker, and
//! the engine wakes the tasks once the lock is released, so the lock is never held across a
//! wake-up. The queue also carries the connection's input hand-over flag: a batch of requests
//! handed to the core ([`super::feed`]) and not fed yet ([`ConnQueue::handed_over`],
//! [`ConnQueue::fed`], [`ConnQueue::park_fed`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use super::net_faults::ConnFault;
use super::outbound::{OutBudget, Queued};
use super::Out;
use crate::core::Frame;

/// Shared by the registry (which pushes, under the core lock) and the connection's task.
#[derive(Debug, Default)]
pub(crate) struct ConnQueue {
    items: Mutex<Items>,
    /// Bytes queued and not yet written.
    pub(crate) queued: Queued,
    /// The network faults the connection is under ([`super::net_faults::ConnFault`],
    /// packed), read by its task on every poll.
    net: AtomicU64,
}

#[derive(Debug, Default)]
struct Items {
    out: VecDeque<Out>,
    /// The connection stopped taking from the queue: nothing pushed would ever be written
    /// or freed.
    receiver_gone: bool,
    /// The connection is dropped without flushing (outbound overflow, failure).
    killed: bool,
    /// The connection's task: woken by a kill, and by a push while `want` is set.
    waker: Option<Waker>,
    /// The task waits for something to be queued.
    want: bool,
    /// A batch of the connection's requests waits to be fed to the core.
    pending_input: bool,
    /// The task waits for that batch to be fed.
    want_fed: bool,
}

/// The writer has stopped taking from the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WriterGone;

/// What [`ConnQueue::take_while`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// At least one item was handed over.
    Some,
    /// Nothing is queued.
    Empty,
    /// The connection was killed: drop it without flushing.
    Killed,
}

/// What [`ConnQueue::park`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parked {
    /// The waker is registered.
    Waiting,
    /// Something is queued already (only when waiting for items).
    Queued,
    /// The connection was killed.
    Killed,
}

impl ConnQueue {
    fn items(&self) -> MutexGuard<'_, Items> {
        // A panic while holding this lock cannot leave the queue half changed (every
        // operation is a single push or drain), so a poisoned lock is still usable.
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The network faults the connection is under.
    pub(crate) fn net_fault(&self) -> ConnFault {
        ConnFault::unpack(self.net.load(Ordering::Acquire))
    }

    /// Puts the connection under `fault`; the task's waker, to wake it so that it sees the
    /// change (whatever it waits for).
    pub(crate) fn set_net_fault(&self, fault: ConnFault) -> Option<Waker> {
        self.net.store(fault.pack(), Ordering::Release);
        self.items().waker.clone()
    }

    /// Queues `out` for the writer; the task's waker when it is to be woken.
    pub(crate) fn push(&self, out: Out) -> Result<Option<Waker>, WriterGone> {
        self.push_all(std::iter::once(out))
    }

    /// Queues `before` (a barrier) and then the parts of `frame` for the writer, one after
    /// the other; its shared body is held in `budget` while queued. Returns the task's waker
    /// when it is to be woken.
    pub(crate) fn push_frame(
        &self,
        before: Option<Out>,
        frame: Frame,
        budget: &Arc<OutBudget>,
    ) -> Result<Option<Waker>, WriterGone> {
        let Frame { head, body, tail } = frame;
        let body = (!body.is_empty()).then(|| Out::Shared(budget.hold(body)));
        let parts = [before, Some(Out::Frame(head)), body, Some(Out::Frame(tail))];
        self.push_all(parts.into_iter().flatten().filter(|o| match o {
            Out::Frame(b) => !b.is_empty(),
            _ => true,
        }))
    }

    /// Throws away what is queued (the connection is dropped without flushing).
    pub(crate) fn clear(&self) {
        let dropped = std::mem::take(&mut self.items().out);
        drop(dropped);
    }

    /// Queues `outs` in order under one lock; the waker to wake (at most one per burst: the
    /// task waited for items).
    fn push_all(&self, outs: impl Iterator<Item = Out>) -> Result<Option<Waker>, WriterGone> {
        let mut items = self.items();
        if items.receiver_gone {
            return Err(WriterGone);
        }
        items.out.extend(outs);
        if items.want {
            items.want = false;
            Ok(items.waker.take())
        } else {
            Ok(None)
        }
    }

    /// A batch of the connection's requests was handed to the core.
    pub(crate) fn handed_over(&self) {
        self.items().pending_input = true;
    }

    /// The batch handed over was fed to the core: the task's waker, if it waits for that.
    pub(crate) fn fed(&self) -> Option<Waker> {
        let mut items = self.items();
        items.pending_input = false;
        if std::mem::take(&mut items.want_fed) {
            items.waker.clone()
        } else {
            None
        }
    }

    /// True (with `waker` registered for [`ConnQueue::fed`]) while a batch handed over waits
    /// to be fed; false once it was (or none was handed over), or the connection was killed.
    pub(crate) fn park_fed(&self, waker: &Waker) -> bool {
        let mut items = self.items();
        if !items.pending_input || items.killed {
            return false;
        }
        items.want_fed = true;
        match &mut items.waker {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        true
    }

    /// Hands queued items to `f` in order, without waiting, until the queue is empty or `f`
    /// returns false (after taking the item it was given).
    pub(crate) fn take_while(&self, mut f: impl FnMut(Out) -> bool) -> Taken {
        let mut items = self.items();
        if items.killed {
            return Taken::Killed;
        }
        let mut taken = Taken::Empty;
        while let Some(out) = items.out.pop_front() {
            taken = Taken::Some;
            if !f(out) {
                break;
            }
        }
        if items.out.is_empty() && items.out.capacity() > 64 {
            // Give back the storage of a burst.
            items.out = VecDeque::new();
        }
        taken
    }

    /// Registers the connection's `waker`, to be woken by a kill and, with `want`, by the
    /// next push; unless the connection was killed, or (with `want`) something is queued.
    pub(crate) fn park(&self, waker: &Waker, want: bool) -> Parked {
        let mut items = self.items();
        if items.killed {
            return Parked::Killed;
        }
        if want && !items.out.is_empty() {
            return Parked::Queued;
        }
        items.want = want;
        match &mut items.waker {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        Parked::Waiting
    }

    /// The connection stops taking from the queue: later pushes fail, and what is queued is
    /// dropped. True the first time only.
    pub(crate) fn close_receiver(&self) -> bool {
        let (first, out, waker) = {
            let mut items = self.items();
            let first = !items.receiver_gone;
            items.receiver_gone = true;
            items.want = false;
            (first, std::mem::take(&mut items.out), items.waker.take())
        };
        drop((out, waker));
        first
    }

    /// Drops the connection without flushing.
    pub(crate) fn kill(&self) {
        let woken = {
            let mut items = self.items();
            items.killed = true;
            items.waker.take()
        };
        if let Some(w) = woken {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use bytes::Bytes;

    use super::*;

    fn frame(s: &'static str) -> Out {
        Out::Frame(Bytes::from_static(s.as_bytes()))
    }

    /// Pushes `out` and wakes the task as the engine does once its lock is released.
    fn push(q: &ConnQueue, out: Out) -> Result<(), WriterGone> {
        if let Some(w) = q.push(out)? {
            w.wake();
        }
        Ok(())
    }

    /// A waker that counts its wake-ups.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count::default());
        (c.clone(), Waker::from(c))
    }

    fn take_all(q: &ConnQueue) -> (Taken, Vec<Bytes>) {
        let mut got = Vec::new();
        let taken = q.take_while(|o| {
            if let Out::Frame(f) = o {
                got.push(f);
            }
            true
        });
        (taken, got)
    }

    #[test]
    fn a_waiting_connection_is_woken_once_and_takes_in_order() {
        let q = ConnQueue::default();
        let (count, waker) = counting();
        assert_eq!(q.park(&waker, true), Parked::Waiting);
        for s in ["a", "b", "c"] {
            push(&q, frame(s)).expect("receiver alive");
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "one wake-up for a burst");
        assert_eq!(q.park(&waker, true), Parked::Queued);
        let (taken, got) = take_all(&q);
        assert_eq!(taken, Taken::Some);
        assert_eq!(
            got,
            ["a", "b", "c"].map(|s| Bytes::from_static(s.as_bytes()))
        );
        assert_eq!(take_all(&q).0, Taken::Empty);

        // Not waiting for items (say, a write is blocked): a push does not wake.
        assert_eq!(q.park(&waker, false), Parked::Waiting);
        push(&q, frame("d")).expect("receiver alive");
        assert_eq!(count.0.load(Ordering::SeqCst), 1);

        assert!(q.close_receiver());
        assert!(!q.close_receiver(), "closed once");
        assert_eq!(push(&q, frame("e")), Err(WriterGone));
        assert_eq!(take_all(&q).0, Taken::Empty, "what was queued is dropped");
    }

    #[test]
    fn a_task_waiting_for_its_batch_is_woken_when_it_is_fed() {
        let q = ConnQueue::default();
        let (count, waker) = counting();
        assert!(!q.park_fed(&waker), "nothing was handed over");
        q.handed_over();
        assert!(q.park_fed(&waker));
        let w = q.fed().expect("the task waits");
        w.wake();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(!q.park_fed(&waker), "fed");
        q.handed_over();
        assert!(q.fed().is_none(), "fed before anyone waited");
        q.handed_over();
        q.kill();
        assert!(!q.park_fed(&waker), "a killed connection does not wait");
    }

    #[test]
    fn take_while_stops_after_the_refused_item() {
        let q = ConnQueue::default();
        for s in ["a", "b", "c"] {
            push(&q, frame(s)).expect("receiver alive");
        }
        let mut n = 0;
        assert_eq!(
            q.take_while(|_| {
                n += 1;
                n < 2
            }),
            Taken::Some
        );
        assert_eq!(take_all(&q).1, [Bytes::from_static(b"c")]);
    }

    #[test]
    fn kill_wakes_a_parked_connection_and_stays_set() {
        let q = ConnQueue::default();
        let (count, waker) = counting();
        push(&q, frame("a")).expect("receiver alive");
        assert_eq!(q.park(&waker, false), Parked::Waiting);
        q.kill();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(q.park(&waker, true), Parked::Killed);
        assert_eq!(q.take_while(|_| true), Taken::Killed);
    }
}
