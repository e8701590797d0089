//! A connection's input buffer. It grows only as bytes arrive (a frame's claimed length
//! reserves nothing), never beyond one largest frame plus one read, and only while the
//! server-wide input budget allows; every allocation is fallible, so a failed one closes the
//! connection instead of aborting the process.

use std::fmt;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt};
use zkd_protocol::{FrameCodec, FrameError};

use crate::engine::InputBudget;

/// Initial capacity, and the capacity an idle connection returns to.
pub(crate) const READ_MIN: usize = 1024;
/// Smallest growth step once a buffer fills.
pub(crate) const READ_CHUNK: usize = 8 * 1024;
/// A buffer that holds no partial frame and is larger than this is given back.
const IDLE_MAX: usize = 16 * 1024;

/// Why a buffer could not grow: the connection is closed with this reason.
#[derive(Debug)]
pub(crate) enum GrowError {
    /// The server-wide input budget is spent.
    Budget { want: usize, limit: usize },
    /// The allocator refused.
    Alloc { want: usize },
    /// The frame stream is corrupt (bad length).
    Frame(FrameError),
}

impl fmt::Display for GrowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GrowError::Budget { want, limit } => write!(
                f,
                "server-wide input buffer limit reached ({limit} bytes; {want} more wanted)"
            ),
            GrowError::Alloc { want } => write!(f, "cannot allocate {want} bytes of input buffer"),
            GrowError::Frame(e) => write!(f, "{e}"),
        }
    }
}

/// One connection's unread input: `data[start..]`.
///
/// The capacity of `data` is what the budget counts for this buffer: it changes only in
/// [`InputBuf::resize`] and [`InputBuf::release`] (a read never grows `data`, see
/// [`InputBuf::make_room`]).
pub(crate) struct InputBuf {
    data: Vec<u8>,
    start: usize,
    budget: Arc<InputBudget>,
    /// Largest capacity: one largest frame (with its length) plus one read chunk. (Frames
    /// are at most `i32::MAX` bytes, so it fits.)
    cap: u32,
    /// Capacity to allocate at the next read after [`InputBuf::release`] (at most
    /// [`IDLE_MAX`]).
    resume: u32,
}

impl InputBuf {
    pub(crate) fn new(
        budget: Arc<InputBudget>,
        max_frame_len: usize,
    ) -> Result<InputBuf, GrowError> {
        let mut b = InputBuf {
            data: Vec::new(),
            start: 0,
            budget,
            cap: u32::try_from(max_frame_len.saturating_add(4 + READ_CHUNK)).unwrap_or(u32::MAX),
            resume: READ_MIN as u32,
        };
        b.resize(READ_MIN)?;
        Ok(b)
    }

    /// The unread bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data[self.start..]
    }

    pub(crate) fn len(&self) -> usize {
        self.data.len() - self.start
    }

    /// Capacity held (for tests and accounting).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.held()
    }

    /// Capacity counted in the budget.
    fn held(&self) -> usize {
        self.data.capacity()
    }

    /// Drops the unread bytes (the connection stopped feeding the core).
    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.start = 0;
    }

    /// Moves the buffer to a new allocation of `want` bytes holding the unread bytes.
    fn resize(&mut self, want: usize) -> Result<(), GrowError> {
        let want = want.max(self.len());
        let held = self.held();
        let extra = want.saturating_sub(held);
        if extra > 0 && !self.budget.take(extra) {
            return Err(GrowError::Budget {
                want: extra,
                limit: self.budget.limit,
            });
        }
        // The budget now counts `reserved` for this buffer.
        let reserved = held.max(want);
        let mut fresh = Vec::new();
        if fresh.try_reserve_exact(want).is_err() {
            self.budget.give(extra);
            return Err(GrowError::Alloc { want });
        }
        fresh.extend_from_slice(self.bytes());
        // Count what the allocator actually gave; the old buffer is freed below.
        let got = fresh.capacity();
        if got > reserved {
            self.budget.add_unchecked(got - reserved);
        } else {
            self.budget.give(reserved - got);
        }
        self.data = fresh;
        self.start = 0;
        Ok(())
    }

    /// Makes room for the next read: reuses consumed space, and when the buffer is full
    /// doubles it (at least by [`READ_CHUNK`]) up to the per-connection cap. So capacity
    /// stays within about twice the bytes actually received.
    fn make_room(&mut self) -> Result<(), GrowError> {
        let held = self.held();
        if held == 0 {
            return self.resize(self.resume as usize);
        }
        let spare = held - self.data.len();
        if spare >= READ_MIN / 4 {
            return Ok(());
        }
        let len = self.len();
        if held - len >= READ_MIN / 4 && self.start > 0 {
            // Enough room once the consumed prefix is dropped.
            self.data.copy_within(self.start.., 0);
            self.data.truncate(len);
            self.start = 0;
            return Ok(());
        }
        let new_cap = (held * 2).max(len + READ_CHUNK).min(self.cap as usize);
        if new_cap <= held {
            // At the cap: only reached with a complete frame inside, which the caller
            // takes out before reading again; make room by compacting.
            self.data.copy_within(self.start.., 0);
            self.data.truncate(len);
            self.start = 0;
            return Ok(());
        }
        self.resize(new_cap)
    }

    /// Reads once from `rd` into the buffer. Ok(0) = EOF.
    pub(crate) async fn read_from<R: AsyncRead + Unpin>(
        &mut self,
        rd: &mut R,
    ) -> io::Result<Result<usize, GrowError>> {
        std::future::poll_fn(|cx| self.poll_read_from(rd, cx)).await
    }

    /// [`InputBuf::read_from`] as a poll: one read attempt, which registers `cx` for
    /// readiness when nothing is there yet.
    pub(crate) fn poll_read_from<R: AsyncRead + Unpin>(
        &mut self,
        rd: &mut R,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Result<usize, GrowError>>> {
        if let Err(e) = self.make_room() {
            return Poll::Ready(Ok(Err(e)));
        }
        // `data` has spare capacity, so the read never grows it. The read's future holds
        // nothing but its two references, so dropping it when pending loses nothing.
        let read = std::pin::pin!(rd.read_buf(&mut self.data));
        read.poll(cx).map(|r| r.map(Ok))
    }

    /// Takes the next complete frame's payload (copied into its own allocation) off the
    /// front, if one is there.
    pub(crate) fn next_frame(&mut self, codec: &FrameCodec) -> Result<Option<Bytes>, GrowError> {
        let Some(len) = codec.payload_len(self.bytes()).map_err(GrowError::Frame)? else {
            return Ok(None);
        };
        if self.len() < 4 + len {
            return Ok(None);
        }
        let from = self.start + 4;
        let mut payload = Vec::new();
        payload
            .try_reserve_exact(len)
            .map_err(|_| GrowError::Alloc { want: len })?;
        payload.extend_from_slice(&self.data[from..from + len]);
        self.start = from + len;
        if self.start == self.data.len() {
            self.data.clear();
            self.start = 0;
        }
        Ok(Some(Bytes::from(payload)))
    }

    /// Gives back a large buffer that holds no partial frame, so that a connection that
    /// once sent a big request does not keep its buffer while idle.
    pub(crate) fn shrink_if_idle(&mut self) {
        if self.held() > IDLE_MAX && self.len() < READ_MIN / 2 {
            // Cannot fail for want of budget (it shrinks); an allocation failure keeps the
            // old buffer.
            let _ = self.resize(READ_MIN);
        }
    }
}

impl InputBuf {
    /// Frees the storage of an empty buffer (an idle connection holds none); the next read
    /// allocates again, as much as the buffer had, within [`IDLE_MAX`].
    pub(crate) fn release(&mut self) {
        let held = self.held();
        if self.len() == 0 && held > 0 {
            self.resume = held.clamp(READ_MIN, IDLE_MAX) as u32;
            self.data = Vec::new();
            self.start = 0;
            self.budget.give(held);
        }
    }

    /// Whether the buffer holds no storage.
    #[cfg(test)]
    pub(crate) fn is_released(&self) -> bool {
        self.held() == 0
    }
}

impl Drop for InputBuf {
    fn drop(&mut self) {
        self.budget.give(self.held());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as i32).to_be_bytes().to_vec();
        f.extend_from_slice(payload);
        f
    }

    /// A server-wide budget of `budget` bytes, a codec taking frames up to `max` bytes and a
    /// buffer drawing on that budget.
    fn buffer(budget: usize, max: usize) -> (Arc<InputBudget>, FrameCodec, InputBuf) {
        let budget = Arc::new(InputBudget::new(budget));
        let codec = FrameCodec { max };
        let b = InputBuf::new(budget.clone(), codec.max).unwrap();
        (budget, codec, b)
    }

    #[tokio::test]
    async fn a_claimed_length_costs_nothing_until_bytes_arrive() {
        let (budget, codec, mut b) = buffer(1 << 20, 1 << 30);
        let mut src: &[u8] = &(1i32 << 30).to_be_bytes();
        assert_eq!(b.read_from(&mut src).await.unwrap().unwrap(), 4);
        assert!(b.next_frame(&codec).unwrap().is_none());
        assert_eq!(b.capacity(), READ_MIN);
        assert_eq!(budget.used(), READ_MIN);
        drop(b);
        assert_eq!(budget.used(), 0);
    }

    #[tokio::test]
    async fn grows_with_the_bytes_and_shrinks_when_idle() {
        let (budget, codec, mut b) = buffer(1 << 24, 1 << 20);
        let payload = vec![7u8; 300_000];
        let big = frame(&payload);
        let mut src: &[u8] = &big;
        let mut received = 0;
        let got = loop {
            if let Some(f) = b.next_frame(&codec).unwrap() {
                break f;
            }
            let n = b.read_from(&mut src).await.unwrap().unwrap();
            assert!(n > 0, "EOF before the frame");
            received += n;
            assert!(
                b.capacity() <= 2 * received + READ_CHUNK + READ_MIN,
                "capacity {} for {received} bytes",
                b.capacity()
            );
        };
        assert_eq!(&got[..], &payload[..]);
        assert_eq!(budget.used(), b.capacity());
        b.shrink_if_idle();
        assert_eq!(b.capacity(), READ_MIN);
        assert_eq!(budget.used(), READ_MIN);
    }

    #[tokio::test]
    async fn a_released_buffer_holds_nothing_and_reads_again() {
        let (budget, codec, mut b) = buffer(1 << 20, 1 << 20);
        let two = [frame(b"first"), frame(b"second")].concat();
        let mut src: &[u8] = &two[..7];
        b.read_from(&mut src).await.unwrap().unwrap();
        b.release();
        assert!(!b.is_released(), "a partial frame keeps its buffer");
        let mut src: &[u8] = &two[7..];
        b.read_from(&mut src).await.unwrap().unwrap();
        assert_eq!(&b.next_frame(&codec).unwrap().unwrap()[..], b"first");
        assert_eq!(&b.next_frame(&codec).unwrap().unwrap()[..], b"second");
        b.release();
        assert!(b.is_released());
        assert_eq!(budget.used(), 0);
        let one = frame(b"third");
        let mut src: &[u8] = &one;
        b.read_from(&mut src).await.unwrap().unwrap();
        assert_eq!(budget.used(), b.capacity());
        assert_eq!(&b.next_frame(&codec).unwrap().unwrap()[..], b"third");
    }

    #[tokio::test]
    async fn the_server_wide_budget_refuses_growth() {
        let (budget, _, mut b) = buffer(64 * 1024, 1 << 20);
        let big = frame(&vec![1u8; 200_000]);
        let mut src: &[u8] = &big;
        let err = loop {
            match b.read_from(&mut src).await.unwrap() {
                Ok(n) => assert!(n > 0),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, GrowError::Budget { .. }), "{err}");
        assert!(budget.used() <= 64 * 1024);
        drop(b);
        assert_eq!(budget.used(), 0);
    }

    #[tokio::test]
    async fn pipelined_frames_come_out_in_order() {
        let (_, codec, mut b) = buffer(1 << 20, 1 << 20);
        let mut stream = Vec::new();
        for i in 0..500u32 {
            stream.extend(frame(&i.to_be_bytes().repeat(1 + (i as usize % 40))));
        }
        let mut src: &[u8] = &stream;
        let mut next = 0u32;
        loop {
            while let Some(f) = b.next_frame(&codec).unwrap() {
                assert_eq!(&f[..4], &next.to_be_bytes());
                assert_eq!(f.len(), 4 * (1 + (next as usize % 40)));
                next += 1;
            }
            if b.read_from(&mut src).await.unwrap().unwrap() == 0 {
                break;
            }
        }
        assert_eq!(next, 500);
        assert_eq!(b.len(), 0);
    }
}
