//! Tests of [`Shared::requests`] as a connection's task sees it: what a feeder that fed reads
//! while writes waited tells the connection it fed for, and whom it wakes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::Instant;

use bytes::Bytes;
use zkd_protocol::OpCode;

use super::feed::Handed;
use super::queue::ConnQueue;
use super::{Handover, Shared};
use crate::config::Config;
use crate::core::{ConnId, Core};

/// A task's waker that counts its wake-ups.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// One request of `op` from connection `id` (no session is open: the core only skips it).
fn handed(id: ConnId, q: &Arc<ConnQueue>, op: OpCode) -> Handed {
    let mut frame = 7i32.to_be_bytes().to_vec();
    frame.extend_from_slice(&(op as i32).to_be_bytes());
    Handed::new(
        id,
        q.clone(),
        vec![Bytes::from(frame)],
        Instant::now(),
        false,
    )
}

/// Connection 2's `waiting` batch is handed over first and its task parks until it is fed;
/// then connection 1 hands `op` over and, nobody else feeding, feeds both.
fn feed_after(shared: &Arc<Shared>, waiting: OpCode, op: OpCode) -> (Handover, usize) {
    let waiting_q = Arc::new(ConnQueue::default());
    let count = Arc::new(Count::default());
    shared.feed.hand_over(handed(2, &waiting_q, waiting));
    assert!(waiting_q.park_fed(&Waker::from(count.clone())));
    let handover = shared.requests(handed(1, &Arc::new(ConnQueue::default()), op));
    (handover, count.0.load(Ordering::SeqCst))
}

/// The engine's shared state on the default configuration, without persistence.
fn default_shared() -> Arc<Shared> {
    let config = Config::default();
    Arc::new(Shared::new(
        &config,
        0,
        Core::new(config.core_config(), 0),
        None,
    ))
}

#[test]
fn a_feeder_that_woke_readers_while_writes_wait_steps_aside() {
    let shared = default_shared();
    let (handover, woken) = feed_after(&shared, OpCode::GetData, OpCode::SetData);
    assert!(handover.step_aside, "a read was fed while a write waited");
    assert_eq!(woken, 1, "the reader's task was woken");
    // Reads alone, or writes alone, leave nobody to make way for.
    for (waiting, op) in [
        (OpCode::GetData, OpCode::Exists),
        (OpCode::SetData, OpCode::Create),
        (OpCode::SetData, OpCode::GetData),
    ] {
        let (handover, woken) = feed_after(&shared, waiting, op);
        assert!(!handover.step_aside, "{waiting:?} then {op:?}");
        assert_eq!(woken, 1, "{waiting:?}'s task was woken");
    }
}

/// A connection with a session: its id and queue.
fn connected(shared: &Arc<Shared>) -> (ConnId, Arc<ConnQueue>) {
    let remote = "127.0.0.1:5000".parse().expect("address");
    let (id, channels) = shared
        .open(remote, 0)
        .expect("the core runs")
        .expect("under the per-address limit");
    let frame =
        zkd_protocol::frame::record_frame(&zkd_protocol::ConnectRequest::new_session(30_000));
    let payload = frame.slice(4..);
    let now = shared.now();
    shared
        .with_core(|core, out| core.handshake(id, payload, now, out))
        .expect("the core runs");
    // Take the ConnectResponse off the queue.
    let _ = channels.q.take_while(|_| true);
    (id, channels.q)
}

/// The task of a connection whose read was fed is usually waiting for two things at once: for
/// its batch to be fed and for something to write. The reply queued on it wakes it; it is
/// still one of the readers woken last, and the feeder still steps aside for it.
#[test]
fn a_reader_woken_by_its_reply_counts_as_a_reader() {
    let shared = default_shared();
    let (reader, reader_q) = connected(&shared);
    let (writer, writer_q) = connected(&shared);
    let mut get = 7i32.to_be_bytes().to_vec();
    get.extend_from_slice(&(OpCode::GetData as i32).to_be_bytes());
    get.extend_from_slice(&1i32.to_be_bytes());
    get.extend_from_slice(b"/\0");
    let count = Arc::new(Count::default());
    let waker = Waker::from(count.clone());
    shared.feed.hand_over(Handed::new(
        reader,
        reader_q.clone(),
        vec![Bytes::from(get)],
        Instant::now(),
        false,
    ));
    assert!(reader_q.park_fed(&waker));
    assert!(matches!(
        reader_q.park(&waker, true),
        super::queue::Parked::Waiting
    ));
    let handover = shared.requests(handed(writer, &writer_q, OpCode::SetData));
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        1,
        "the reader's task was woken"
    );
    assert!(handover.step_aside, "a read was fed while a write waited");
}
