//! One client connection: a four-letter word, or the handshake followed by a reader and a
//! writer running side by side in the connection's task.
//!
//! Close semantics:
//! * The core asks for a close ([`Out::Close`]): the writer writes everything queued before
//!   it, then shuts down its side of the socket. The reader stops feeding the core as soon as
//!   the close is requested and, once the writer is done, waits briefly for the client's EOF
//!   (so unread input does not turn the close into a reset that could destroy the last
//!   replies in flight).
//! * The client closes, the socket fails, or the frame stream is corrupt (bad length,
//!   payload shorter than a request header): the reader asks for a close the same way, so
//!   replies already queued are still flushed, within [`LINGER`].
//! * The outbound queue overflows: the connection is dropped without flushing.
//! * In every case [`Shared::closed`] (and so `Core::connection_closed`) runs once our side
//!   of the socket is shut down and nothing more will be read or written (before the
//!   courtesy wait for the client's EOF), or when the task ends, however it ends.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{timeout, timeout_at, Instant, Sleep};
use zkd_protocol::frame::TELNET_INTERRUPT;
use zkd_protocol::{FourLetterWord, FrameCodec};

use super::gate::Gate;
use super::input::InputBuf;
use super::queue::{Receiver, Signal};
use super::stream::{ReadReady, Stream};
use super::{ConnChannels, Out, Shared};
use crate::core::{ConnId, Handshake};
use crate::fourlw;

/// Smallest valid payload after the handshake: a RequestHeader.
const REQUEST_HEADER_LEN: usize = 8;
/// Most buffers handed to one vectored write (Linux's IOV_MAX).
const MAX_IOV: usize = 1024;
/// Most frames / bytes taken off the queue for one round of writes.
const MAX_BATCH_FRAMES: usize = 4096;
const MAX_BATCH_BYTES: usize = 4 << 20;
/// How long queued replies may take to drain after the client stopped sending.
const LINGER: Duration = Duration::from_secs(5);
/// After our side is shut down, how long to wait for the client's EOF.
const DRAIN: Duration = Duration::from_secs(1);
/// Time allowed for writing a four-letter word's reply.
const FOUR_LETTER_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Tells the core the connection is gone: explicitly once the socket is shut down, or when
/// the task ends, however it ends.
struct Registered {
    shared: Arc<Shared>,
    id: ConnId,
    done: bool,
}

impl Registered {
    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            self.shared.closed(self.id);
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.finish();
    }
}

/// How the part of a connection before its session ended.
enum Opened<S: Stream> {
    /// The handshake went through (or was answered with a close by the core): serve it.
    Session {
        stream: S,
        buf: InputBuf,
        established: bool,
    },
    /// Nothing more to serve (a four-letter word, a failed handshake); the reading side to
    /// drain, if our side closed first.
    Done(Option<S::Read>),
}

/// Serves one accepted, registered connection until it is closed.
///
/// The task's future is what an idle connection costs, so whatever runs only for a while
/// (the handshake, a four-letter word, the final drain, a pause) runs in an allocation of
/// its own that is freed when it is over, and the established connection's reader and
/// writer keep nothing but their waits while idle.
pub(crate) async fn run<S: Stream>(
    shared: Arc<Shared>,
    id: ConnId,
    stream: S,
    remote: SocketAddr,
    channels: ConnChannels,
) {
    let mut registered = Registered {
        shared: shared.clone(),
        id,
        done: false,
    };
    let opened = Box::pin(open(&shared, id, stream, remote, channels.member)).await;
    let (stream, buf, established) = match opened {
        Opened::Session {
            stream,
            buf,
            established,
        } => (stream, buf, established),
        Opened::Done(rd) => {
            registered.finish();
            if let Some(rd) = rd {
                Box::pin(drain(rd)).await;
            }
            return;
        }
    };
    let codec = FrameCodec {
        max: shared.cfg.max_frame_len,
    };
    let (rd, wr) = stream.split();
    let reader_done = Signal::default();
    let writer_done = Signal::default();
    let reading = async {
        let rd = read_requests(
            &shared,
            id,
            remote,
            rd,
            buf,
            codec,
            established,
            &writer_done,
        )
        .await;
        reader_done.fire();
        rd
    };
    let writing = async {
        write_frames(id, wr, channels, &reader_done, &shared.gate).await;
        writer_done.fire();
    };
    let (rd, ()) = tokio::join!(reading, writing);
    registered.finish();
    if let Some(rd) = rd {
        Box::pin(drain(rd)).await;
    }
}

/// The first frame: a four-letter word (answered here), or the handshake.
async fn open<S: Stream>(
    shared: &Arc<Shared>,
    id: ConnId,
    mut stream: S,
    remote: SocketAddr,
    member: u64,
) -> Opened<S> {
    let deadline = Instant::now() + shared.cfg.handshake_timeout;
    let mut buf = match InputBuf::new(shared.input.clone(), shared.cfg.max_frame_len) {
        Ok(b) => b,
        Err(reason) => {
            tracing::warn!(conn = id, %remote, "closing connection: {reason}");
            return Opened::Done(None);
        }
    };

    // The first four bytes: a four-letter word, or the ConnectRequest's length.
    match read_at_least(&mut stream, &mut buf, 4, deadline).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::debug!(conn = id, %remote, "client closed the connection before a handshake");
            return Opened::Done(None);
        }
        Err(reason) => {
            tracing::info!(conn = id, %remote, "closing connection: {reason}");
            return Opened::Done(None);
        }
    }
    let b = buf.bytes();
    let first = [b[0], b[1], b[2], b[3]];
    if first == TELNET_INTERRUPT {
        // The telnet interrupt sequence: just close.
        return Opened::Done(None);
    }
    if let Some(word) = FourLetterWord::from_bytes(first) {
        let rd =
            answer_four_letter_word(shared, id, remote, stream, buf, word, deadline, member).await;
        return Opened::Done(rd);
    }

    let codec = FrameCodec {
        max: shared.cfg.max_frame_len,
    };
    let connect = loop {
        match buf.next_frame(&codec) {
            Ok(Some(payload)) => break payload,
            Ok(None) => {
                let want = buf.len() + 1;
                match read_at_least(&mut stream, &mut buf, want, deadline).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::info!(conn = id, %remote, "closing connection: EOF inside the connect request");
                        return Opened::Done(None);
                    }
                    Err(reason) => {
                        tracing::info!(conn = id, %remote, "closing connection: {reason}");
                        return Opened::Done(None);
                    }
                }
            }
            Err(e) => {
                tracing::info!(conn = id, %remote, "closing connection: {e}");
                return Opened::Done(None);
            }
        }
    };

    shared.gate.wait().await;
    let now = shared.now();
    let established = match shared.with_core(|core, out| core.handshake(id, connect, now, out)) {
        Ok(Handshake::Established) => true,
        Ok(Handshake::Closed) => false,
        // The server failed closed; this connection is being dropped.
        Err(_) => return Opened::Done(None),
    };
    Opened::Session {
        stream,
        buf,
        established,
    }
}

/// Reads until `buf` holds at least `n` bytes. Ok(false) = EOF first.
async fn read_at_least(
    stream: &mut (impl AsyncRead + Unpin),
    buf: &mut InputBuf,
    n: usize,
    deadline: Instant,
) -> Result<bool, String> {
    while buf.len() < n {
        match timeout_at(deadline, buf.read_from(stream)).await {
            Err(_) => return Err("no complete first frame within the handshake timeout".into()),
            Ok(Ok(Ok(0))) => return Ok(false),
            Ok(Ok(Ok(_))) => {}
            Ok(Ok(Err(reason))) => return Err(reason.to_string()),
            Ok(Err(e)) => return Err(format!("read failed: {e}")),
        }
    }
    Ok(true)
}

/// Writes a four-letter word's reply and shuts down the sending side. Returns the reading
/// side to drain, if the reply went out.
#[allow(clippy::too_many_arguments)]
async fn answer_four_letter_word<S: Stream>(
    shared: &Arc<Shared>,
    id: ConnId,
    remote: SocketAddr,
    mut stream: S,
    mut buf: InputBuf,
    word: FourLetterWord,
    deadline: Instant,
    member: u64,
) -> Option<S::Read> {
    tracing::debug!(conn = id, %remote, %word, "four-letter word");
    let text = if !shared.cfg.whitelist.allows(word) {
        fourlw::not_whitelisted(word.as_str())
    } else {
        if word == FourLetterWord::Stmk {
            // The new trace mask follows as a big-endian long.
            if !matches!(
                read_at_least(&mut stream, &mut buf, 12, deadline).await,
                Ok(true)
            ) {
                return None;
            }
            let mut mask = [0u8; 8];
            mask.copy_from_slice(&buf.bytes()[4..12]);
            shared
                .trace_mask
                .store(i64::from_be_bytes(mask), Ordering::Relaxed);
        }
        if matches!(word, FourLetterWord::Crst | FourLetterWord::Srst)
            && shared.reset_stats(word == FourLetterWord::Srst).is_err()
        {
            return None;
        }
        fourlw::answer(shared.clone(), word, member).await?
    };
    let written = timeout(FOUR_LETTER_WRITE_TIMEOUT, async {
        stream.write_all(text.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        tracing::debug!(conn = id, %remote, %word, "could not deliver the four-letter reply");
        return None;
    }
    let (rd, _wr) = stream.split();
    Some(rd)
}

/// Feeds complete frames to the core until the connection closes. Returns the reading side
/// to drain when the close came from our side (the client has not sent EOF yet).
#[allow(clippy::too_many_arguments)]
async fn read_requests<R: AsyncRead + ReadReady + Unpin>(
    shared: &Shared,
    id: ConnId,
    remote: SocketAddr,
    mut rd: R,
    mut buf: InputBuf,
    codec: FrameCodec,
    mut feeding: bool,
    writer_done: &Signal,
) -> Option<R> {
    loop {
        if feeding {
            let mut frames = Vec::new();
            let mut bad = None;
            loop {
                match buf.next_frame(&codec) {
                    Ok(Some(f)) if f.len() < REQUEST_HEADER_LEN => {
                        bad = Some(format!(
                            "{}-byte payload is shorter than a request header",
                            f.len()
                        ));
                        break;
                    }
                    Ok(Some(f)) => frames.push(f),
                    Ok(None) => break,
                    Err(e) => {
                        bad = Some(e.to_string());
                        break;
                    }
                }
            }
            let arrived = std::time::Instant::now();
            if !frames.is_empty() && shared.gate.is_paused() {
                // Stop-the-world pause: no more reading until it ends.
                tokio::select! {
                    biased;
                    _ = writer_done.fired() => break,
                    _ = Box::pin(shared.gate.wait()) => {}
                }
            }
            if !frames.is_empty() && !shared.requests(id, frames, arrived) {
                feeding = false;
            }
            if let (true, Some(reason)) = (feeding, bad) {
                tracing::info!(conn = id, %remote, "closing connection: {reason}");
                shared.close(id);
                feeding = false;
            }
        }
        if !feeding {
            buf.clear();
        }
        buf.shrink_if_idle();
        if buf.len() == 0 {
            // Nothing partial: wait for input without holding a buffer.
            buf.release();
            tokio::select! {
                biased;
                _ = writer_done.fired() => break,
                ready = rd.ready() => if let Err(e) = ready {
                    tracing::debug!(conn = id, %remote, error = %e, "read failed");
                    shared.close(id);
                    return None;
                },
            }
        }
        tokio::select! {
            biased;
            _ = writer_done.fired() => break,
            read = buf.read_from(&mut rd) => match read {
                Ok(Ok(0)) => {
                    tracing::debug!(conn = id, %remote, "client closed the connection");
                    shared.close(id);
                    return None;
                }
                Ok(Ok(_)) => {}
                Ok(Err(reason)) => {
                    tracing::warn!(conn = id, %remote, "closing connection: {reason}");
                    shared.close(id);
                    feeding = false;
                }
                Err(e) => {
                    tracing::debug!(conn = id, %remote, error = %e, "read failed");
                    shared.close(id);
                    return None;
                }
            },
        }
    }
    Some(rd)
}

/// Reads and discards input until EOF, for at most [`DRAIN`]. (The sink is on the heap and
/// only while draining, so that it does not take room in every connection's task.)
async fn drain(mut rd: impl AsyncRead + Unpin) {
    let mut sink = vec![0u8; 4096];
    let _ = timeout(DRAIN, async {
        loop {
            match rd.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
}

/// Writes queued frames, many per syscall, until a close, an error or an overflow.
async fn write_frames(
    id: ConnId,
    mut wr: impl AsyncWrite + Unpin,
    channels: ConnChannels,
    reader_done: &Signal,
    gate: &Gate,
) {
    let ConnChannels { q, budget, .. } = channels;
    let rx = Receiver(&q);
    let mut linger = Linger::default();
    // Taken off the queue, in order, not yet handled; and the frames of one write round.
    // Both are emptied (and their storage freed) before the writer waits again, so an idle
    // connection holds no buffer.
    let mut pending: VecDeque<Out> = VecDeque::new();
    let mut batch: VecDeque<Bytes> = VecDeque::new();
    // The shared bodies in `batch`: let go of once written (or when the writer ends).
    let mut held = Vec::new();
    loop {
        if pending.is_empty() {
            pending.shrink_to_fit();
            tokio::select! {
                biased;
                _ = rx.0.killed() => return,
                _ = linger.over(reader_done) => return,
                _ = rx.0.wait_pushed() => {}
            }
            rx.0.take(&mut pending, MAX_BATCH_FRAMES);
        }
        let mut closing = false;
        let mut bytes = 0;
        let mut shared = 0;
        let mut hold = None;
        while !closing
            && hold.is_none()
            && batch.len() < MAX_BATCH_FRAMES
            && bytes < MAX_BATCH_BYTES
        {
            if pending.is_empty() {
                rx.0.take(&mut pending, MAX_BATCH_FRAMES - batch.len());
            }
            match pending.pop_front() {
                Some(Out::Frame(f)) => {
                    bytes += f.len();
                    batch.push_back(f);
                }
                Some(Out::Shared(b)) => {
                    bytes += b.body.len();
                    shared += b.body.len();
                    batch.push_back(b.body.clone());
                    held.push(b);
                }
                Some(Out::Delay(ms)) => hold = Some(ms),
                Some(Out::Close) => closing = true,
                None => break,
            }
        }
        if gate.is_paused() {
            // Stop-the-world pause: nothing is written until it ends.
            tokio::select! {
                biased;
                _ = rx.0.killed() => return,
                _ = Box::pin(gate.wait()) => {}
            }
        }
        if !batch.is_empty() {
            tokio::select! {
                biased;
                _ = rx.0.killed() => return,
                _ = linger.over(reader_done) => return,
                written = write_all_vectored(&mut wr, &mut batch) => {
                    if let Err(e) = written {
                        tracing::debug!(conn = id, error = %e, "write failed");
                        return;
                    }
                }
            }
            q.queued.written(bytes, bytes - shared, &budget);
            held.clear();
            held.shrink_to_fit();
            batch.shrink_to_fit();
        }
        if let Some(ms) = hold {
            tokio::select! {
                biased;
                _ = rx.0.killed() => return,
                _ = linger.over(reader_done) => return,
                _ = Box::pin(tokio::time::sleep(Duration::from_millis(ms))) => {}
            }
        }
        if closing {
            tokio::select! {
                _ = linger.over(reader_done) => {}
                _ = wr.shutdown() => {}
            }
            return;
        }
    }
}

/// How long the writer may still take once the reader is done: [`LINGER`], timed from the
/// reader's end. The timer exists (on the heap) only from then on.
#[derive(Default)]
struct Linger(Option<Pin<Box<Sleep>>>);

impl Linger {
    /// Resolves when the writer has lingered long enough.
    async fn over(&mut self, reader_done: &Signal) {
        if self.0.is_none() {
            reader_done.fired().await;
            self.0 = Some(Box::pin(tokio::time::sleep(LINGER)));
        }
        if let Some(sleep) = &mut self.0 {
            sleep.await;
        }
    }
}

/// Writes all of `batch` with vectored writes, dropping what has been written.
async fn write_all_vectored(
    wr: &mut (impl AsyncWrite + Unpin),
    batch: &mut VecDeque<Bytes>,
) -> io::Result<()> {
    while !batch.is_empty() {
        let n = {
            let slices: Vec<IoSlice<'_>> = batch
                .iter()
                .take(MAX_IOV)
                .map(|b| IoSlice::new(b))
                .collect();
            wr.write_vectored(&slices).await?
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        advance(batch, n);
    }
    Ok(())
}

/// Drops the first `n` bytes of `batch`.
fn advance(batch: &mut VecDeque<Bytes>, mut n: usize) {
    while n > 0 {
        let Some(front) = batch.front_mut() else {
            return;
        };
        if front.len() <= n {
            n -= front.len();
            batch.pop_front();
        } else {
            front.advance(n);
            n = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_drops_whole_and_partial_frames() {
        let mut b: VecDeque<Bytes> = [&b"abc"[..], b"de", b"fghij"]
            .into_iter()
            .map(Bytes::from_static)
            .collect();
        advance(&mut b, 4);
        assert_eq!(b, [Bytes::from_static(b"e"), Bytes::from_static(b"fghij")]);
        advance(&mut b, 3);
        assert_eq!(b, [Bytes::from_static(b"hij")]);
        advance(&mut b, 3);
        assert!(b.is_empty());
        advance(&mut b, 1);
    }
}
