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
//! Reads and rounds of writes take turns: a round is either every batch of reads only
//! (getData, exists, getChildren, getACL, ping, ...) waiting, or batches of other requests up
//! to about [`ROUND_REQUESTS`] requests; when both wait, the next round is of the kind the
//! last one was not. So a read waits for at most one round of writes (with `--fsync always`
//! each write also appends to the log), not for every write that happened to be handed over
//! before it, and the writes are not held back by a stream of reads. That changes nothing a
//! client can tell: only batches of different connections, none of them answered yet, change
//! places, and a write is answered only after it was fed, so a read handed over after a
//! write's reply was sent still comes after that write.
//!
//! A feeder that keeps finding new batches hands the rest to a fresh task after
//! [`MAX_ROUNDS`] rounds, so one connection's task is not kept from its own socket for long.
//! A round that fed reads ends the feeder's turn at once: the tasks of the connections whose
//! reads it fed are woken last (whether they waited for the batch to be fed or for a reply to
//! write), so they run next on this thread, and a fresh task goes on with whatever waits,
//! queued behind them; a read's reply is not held behind further rounds. When the feeder was
//! a connection's task and other work waits, that task yields once its own replies are
//! written (it is told so by [`super::Handover`]) instead of reading and feeding more first.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use bytes::Bytes;
use zkd_protocol::OpCode;

use super::queue::ConnQueue;
use crate::core::ConnId;

/// Rounds a feeder runs before handing further batches to a task of their own.
pub(crate) const MAX_ROUNDS: usize = 8;
/// Requests of batches other than reads taken in one round of writes (a batch is never split).
pub(crate) const ROUND_REQUESTS: usize = 64;

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
    /// Every frame is a read (see [`is_read`]): the batch may go before batches of other
    /// connections handed over earlier.
    reads_only: bool,
}

impl Handed {
    /// Whether every frame is a read.
    pub(crate) fn reads_only(&self) -> bool {
        self.reads_only
    }

    pub(crate) fn new(
        id: ConnId,
        q: std::sync::Arc<ConnQueue>,
        frames: Vec<Bytes>,
        arrived: Instant,
        close_after: bool,
    ) -> Handed {
        let reads_only = !close_after && frames.iter().all(|f| is_read(f));
        Handed {
            id,
            q,
            frames,
            arrived,
            close_after,
            reads_only,
        }
    }
}

/// Whether a request payload (header first) only reads: it changes neither the tree nor a
/// session, so answering it before another connection's pending write is just as if it had
/// arrived first. Watches it leaves are set at the time it is fed, in the one order.
fn is_read(payload: &[u8]) -> bool {
    OpCode::of_payload(payload).is_some_and(|op| op.info().overtakes_writes)
}

/// The batches handed over and not yet taken by a feeder, and whether a thread is feeding.
#[derive(Default)]
pub(crate) struct Feed {
    waiting: Mutex<VecDeque<Handed>>,
    feeding: AtomicBool,
    /// The last round fed reads while other batches waited: the next one feeds those.
    /// Touched only under the `waiting` lock.
    writes_next: AtomicBool,
}

impl Feed {
    /// Adds `batch` behind every batch handed over before it.
    pub(crate) fn hand_over(&self, batch: Handed) {
        batch.q.handed_over();
        self.waiting().push_back(batch);
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

    /// Moves this round's batches into `into`, in the order to feed them. A round is either
    /// every batch of reads only waiting, in order, or the other batches in order up to
    /// [`ROUND_REQUESTS`] requests (at least one batch); when both wait they take turns, so
    /// neither waits for more than one round of the other. Everything waiting goes at once
    /// when it is all reads, or one batch. The rest keep their places.
    pub(crate) fn take(&self, into: &mut Vec<Handed>) {
        let mut waiting = self.waiting();
        if waiting.iter().all(|b| b.reads_only) || waiting.len() == 1 {
            into.extend(waiting.drain(..));
            self.writes_next.store(false, Ordering::Relaxed);
            return;
        }
        let reads_wait = waiting.iter().any(|b| b.reads_only);
        let reads_turn = reads_wait && !self.writes_next.load(Ordering::Relaxed);
        self.writes_next.store(reads_turn, Ordering::Relaxed);
        let mut left = VecDeque::with_capacity(waiting.len());
        let mut requests = 0;
        for b in waiting.drain(..) {
            if reads_turn {
                if b.reads_only {
                    into.push(b);
                } else {
                    left.push_back(b);
                }
            } else if !b.reads_only && requests < ROUND_REQUESTS {
                requests += b.frames.len().max(1);
                into.push(b);
            } else {
                left.push_back(b);
            }
        }
        // What is left goes back in front of anything handed over meanwhile (nothing could
        // be: this lock is held), in its order.
        *waiting = left;
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, VecDeque<Handed>> {
        // Every operation under this lock is a single push or swap: never half done.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of `n` requests with opcode `op`.
    fn requests(id: ConnId, op: OpCode, n: usize) -> Handed {
        let mut frame = 7i32.to_be_bytes().to_vec();
        frame.extend_from_slice(&(op as i32).to_be_bytes());
        let frames = vec![Bytes::from(frame); n];
        Handed::new(id, Default::default(), frames, Instant::now(), false)
    }

    fn batch(id: ConnId) -> Handed {
        requests(id, OpCode::SetData, 1)
    }

    fn ids(taken: &[Handed]) -> Vec<ConnId> {
        taken.iter().map(|b| b.id).collect()
    }

    #[test]
    fn reads_and_rounds_of_writes_take_turns() {
        let feed = Feed::default();
        feed.hand_over(requests(1, OpCode::SetData, ROUND_REQUESTS - 1));
        feed.hand_over(requests(2, OpCode::Create, 2));
        feed.hand_over(requests(3, OpCode::GetData, 5));
        feed.hand_over(requests(4, OpCode::SetData, 1));
        let mut mixed = requests(5, OpCode::GetData, 2);
        mixed
            .frames
            .push(requests(5, OpCode::Delete, 1).frames.remove(0));
        mixed.reads_only = mixed.frames.iter().all(|f| is_read(f));
        feed.hand_over(mixed);
        feed.hand_over(requests(6, OpCode::Exists, 1));
        let mut taken = Vec::new();
        feed.take(&mut taken);
        assert_eq!(ids(&taken), [3, 6], "the reads first");
        taken.clear();
        feed.hand_over(requests(7, OpCode::GetData, 1));
        feed.take(&mut taken);
        // Then writes up to the round's size (the batch that crosses it included), although
        // a read waits again: reads and writes take turns.
        assert_eq!(ids(&taken), [1, 2]);
        taken.clear();
        feed.take(&mut taken);
        assert_eq!(ids(&taken), [7], "the read's turn");
        taken.clear();
        feed.take(&mut taken);
        assert_eq!(ids(&taken), [4, 5], "the rest, in the order handed over");
        // A batch closed after a corrupt frame is not a read, whatever its frames.
        let closing = Handed::new(9, Default::default(), vec![], Instant::now(), true);
        assert!(!closing.reads_only);
        assert!(!is_read(b"1234"), "too short for a header");
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
        assert_eq!(ids(&taken), [1, 2]);
        // A batch handed over while the first thread feeds is seen when it stops.
        feed.hand_over(batch(3));
        assert!(feed.stop_feeding());
        assert!(feed.start_feeding());
        taken.clear();
        feed.take(&mut taken);
        assert_eq!(ids(&taken), [3]);
        assert!(!feed.stop_feeding(), "nothing left");
    }
}
