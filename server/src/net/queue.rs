//! A connection's outbound queue: what the core sent it and the writer has not taken yet,
//! its byte count, and the kill switch, in one small shared allocation.
//!
//! It replaces a channel plus a cancellation token per connection: an idle connection holds
//! an empty `VecDeque` (no storage until something is queued) and two `Notify`s, about a
//! hundred bytes, where an unbounded channel preallocates a block of slots.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::outbound::{OutBudget, Queued};
use super::Out;
use crate::core::Frame;

/// Shared by the registry (which pushes, under the core lock) and the connection's writer.
#[derive(Debug, Default)]
pub(crate) struct ConnQueue {
    items: Mutex<Items>,
    /// Woken when something is pushed (a permit is kept if the writer is not waiting).
    pushed: Notify,
    /// Fired when the connection is dropped without flushing (outbound overflow, failure).
    kill: Signal,
    /// Bytes queued and not yet written.
    pub(crate) queued: Queued,
}

#[derive(Debug, Default)]
struct Items {
    out: VecDeque<Out>,
    /// The writer is gone: nothing pushed would ever be written or freed.
    receiver_gone: bool,
}

/// The writer has stopped taking from the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WriterGone;

impl ConnQueue {
    fn items(&self) -> MutexGuard<'_, Items> {
        // A panic while holding this lock cannot leave the queue half changed (every
        // operation is a single push or drain), so a poisoned lock is still usable.
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `out` for the writer.
    pub(crate) fn push(&self, out: Out) -> Result<(), WriterGone> {
        self.push_all(std::iter::once(out))
    }

    /// Queues the parts of `frame` for the writer, one after the other; its shared body is
    /// held in `budget` while queued.
    pub(crate) fn push_frame(
        &self,
        frame: Frame,
        budget: &Arc<OutBudget>,
    ) -> Result<(), WriterGone> {
        let Frame { head, body, tail } = frame;
        let body = (!body.is_empty()).then(|| Out::Shared(budget.hold(body)));
        let parts = [Some(Out::Frame(head)), body, Some(Out::Frame(tail))];
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

    /// Queues `outs` in order under one lock, with one wake-up.
    fn push_all(&self, outs: impl Iterator<Item = Out>) -> Result<(), WriterGone> {
        {
            let mut items = self.items();
            if items.receiver_gone {
                return Err(WriterGone);
            }
            items.out.extend(outs);
        }
        self.pushed.notify_one();
        Ok(())
    }

    /// Moves up to `max` queued items into `into` (without waiting).
    pub(crate) fn take(&self, into: &mut VecDeque<Out>, max: usize) {
        let mut items = self.items();
        let n = items.out.len().min(max);
        into.extend(items.out.drain(..n));
        if items.out.is_empty() && items.out.capacity() > 64 {
            // Give back the storage of a burst.
            items.out = VecDeque::new();
        }
    }

    /// Waits until something is queued.
    pub(crate) async fn wait_pushed(&self) {
        loop {
            if !self.items().out.is_empty() {
                return;
            }
            self.pushed.notified().await;
        }
    }

    /// The writer stops: later pushes fail, and what is queued is dropped.
    pub(crate) fn close_receiver(&self) {
        let mut items = self.items();
        items.receiver_gone = true;
        items.out = VecDeque::new();
    }

    /// Drops the connection without flushing.
    pub(crate) fn kill(&self) {
        self.kill.fire();
    }

    /// Resolves once [`ConnQueue::kill`] was called.
    pub(crate) async fn killed(&self) {
        self.kill.fired().await;
    }
}

/// A one-way flag that can be awaited: a cancellation token without an allocation of its
/// own (it lives inside whatever holds it).
#[derive(Debug, Default)]
pub(crate) struct Signal {
    set: AtomicBool,
    notify: Notify,
}

impl Signal {
    pub(crate) fn fire(&self) {
        self.set.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Resolves once [`Signal::fire`] was called (at once if it already was).
    pub(crate) async fn fired(&self) {
        loop {
            // Created before the check: a `fire` after the check still wakes it.
            let woken = self.notify.notified();
            if self.set.load(Ordering::Acquire) {
                return;
            }
            woken.await;
        }
    }
}

/// The writer's end: closes the queue however the writer ends.
pub(crate) struct Receiver<'a>(pub(crate) &'a ConnQueue);

impl Drop for Receiver<'_> {
    fn drop(&mut self) {
        self.0.close_receiver();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;

    fn frame(s: &'static str) -> Out {
        Out::Frame(Bytes::from_static(s.as_bytes()))
    }

    #[tokio::test]
    async fn wakes_the_writer_in_order_and_refuses_after_close() {
        let q = Arc::new(ConnQueue::default());
        let q2 = q.clone();
        let writer = tokio::spawn(async move {
            let rx = Receiver(&q2);
            let mut got = VecDeque::new();
            while got.len() < 3 {
                rx.0.wait_pushed().await;
                rx.0.take(&mut got, 2);
            }
            got.into_iter()
                .map(|o| match o {
                    Out::Frame(f) => f,
                    _ => Bytes::new(),
                })
                .collect::<Vec<_>>()
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        for s in ["a", "b", "c"] {
            q.push(frame(s)).expect("writer alive");
        }
        let got = tokio::time::timeout(Duration::from_secs(10), writer)
            .await
            .expect("woken")
            .expect("writer");
        assert_eq!(
            got,
            ["a", "b", "c"].map(|s| Bytes::from_static(s.as_bytes()))
        );
        assert_eq!(q.push(frame("d")), Err(WriterGone));
    }

    #[tokio::test]
    async fn kill_wakes_a_waiter_and_stays_set() {
        let q = Arc::new(ConnQueue::default());
        let q2 = q.clone();
        let waiter = tokio::spawn(async move { q2.killed().await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        q.kill();
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken")
            .expect("waiter");
        tokio::time::timeout(Duration::from_secs(10), q.killed())
            .await
            .expect("already killed");
    }
}
