//! Answers on their way out of the HTTP listeners, bounded for clients that never read:
//!
//! - every connection's socket is wrapped in [`Deadlined`]: a write that makes no progress
//!   for [`WRITE_DEADLINE`] (the client reads nothing) fails, and the connection is closed
//!   with a logged reason;
//! - the bytes of answers made and not yet written (large answers are made a page at a time,
//!   as the socket takes them: [`paged`]) are counted in one total for both listeners
//!   ([`unsent`]); a page is made only while that total is under [`MAX_UNSENT`], and a whole
//!   answer that would take it over is refused with 503.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long a connection may hold an answer the client takes nothing of.
pub(crate) const WRITE_DEADLINE: Duration = Duration::from_secs(10);

/// Most bytes of answers made and not yet written, all HTTP connections together.
pub(crate) const MAX_UNSENT: usize = 64 << 20;

/// How often a page waiting for room under [`MAX_UNSENT`] looks again.
const ROOM_POLL: Duration = Duration::from_millis(20);

static UNSENT: AtomicUsize = AtomicUsize::new(0);

/// Bytes of answers made and not yet written (or dropped), all HTTP connections together.
pub(crate) fn unsent() -> usize {
    UNSENT.load(Ordering::Relaxed)
}

/// A buffer counted in [`unsent`] until the last reference to it is gone (written by the
/// connection, or dropped with it).
struct Counted(Vec<u8>);

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        UNSENT.fetch_sub(self.0.len(), Ordering::Relaxed);
    }
}

/// `bytes` as a body chunk counted in [`unsent`] while it waits to be written.
pub(crate) fn counted(bytes: Vec<u8>) -> Bytes {
    UNSENT.fetch_add(bytes.len(), Ordering::Relaxed);
    Bytes::from_owner(Counted(bytes))
}

/// `n` bytes an answer under way holds besides its pages (the ids a listing walks), counted
/// in [`unsent`] until dropped.
pub(crate) struct Reserved(usize);

impl Drop for Reserved {
    fn drop(&mut self) {
        UNSENT.fetch_sub(self.0, Ordering::Relaxed);
    }
}

/// Reserves `n` bytes in [`unsent`], or `Err` with the refusal's reason when they would take
/// the total past [`MAX_UNSENT`].
pub(crate) fn reserve(n: usize) -> Result<Reserved, String> {
    let now = unsent();
    if now.saturating_add(n) > MAX_UNSENT {
        return Err(format!(
            "the HTTP listeners hold {now} bytes for answers their clients have not read yet \
             (at most {MAX_UNSENT}); this answer needs {n} more: ask again later"
        ));
    }
    UNSENT.fetch_add(n, Ordering::Relaxed);
    Ok(Reserved(n))
}

/// Answers up to this size are never refused for the cap (the connection caps bound them:
/// 256 connections a listener), so health checks and small reports are answered however
/// many long answers wait.
const SMALL: usize = 64 << 10;

/// `bytes` counted, or `Err` with the refusal's reason when an answer longer than [`SMALL`]
/// would take the total past [`MAX_UNSENT`].
pub(crate) fn counted_whole(bytes: Vec<u8>) -> Result<Bytes, String> {
    let now = unsent();
    if bytes.len() > SMALL && now.saturating_add(bytes.len()) > MAX_UNSENT {
        return Err(format!(
            "the HTTP listeners hold {now} bytes of answers their clients have not read yet \
             (at most {MAX_UNSENT}); this {}-byte answer must wait: ask again later",
            bytes.len()
        ));
    }
    Ok(counted(bytes))
}

/// Waits until the unsent total is under [`MAX_UNSENT`]; `false` after [`WRITE_DEADLINE`].
async fn room() -> bool {
    let waited = tokio::time::timeout(WRITE_DEADLINE, async {
        while unsent() >= MAX_UNSENT {
            tokio::time::sleep(ROOM_POLL).await;
        }
    });
    waited.await.is_ok()
}

/// What makes the next page: the page's bytes and the state for the page after it (`None`
/// after the last), or the reason the answer stops.
pub(crate) type NextPage<S> = Arc<
    dyn Fn(S) -> Pin<Box<dyn Future<Output = Result<(Vec<u8>, Option<S>), String>> + Send>>
        + Send
        + Sync,
>;

/// A chunked body made a page at a time: `next` is called for the first page with `first`,
/// and for each later page only once the connection has taken the previous one (and while
/// the unsent total has room), so an answer never holds more than a page of its own. An
/// error (or no room within the deadline) ends the body early, with a log line naming
/// `what`: the client sees an incomplete chunked answer, never a shorter valid document.
pub(crate) fn paged<S: Send + 'static>(what: &'static str, first: S, next: NextPage<S>) -> Body {
    let pages = futures_util::stream::unfold(Some(first), move |state| {
        let next = next.clone();
        async move {
            let state = state?;
            if !room().await {
                tracing::warn!(
                    unsent = unsent(),
                    limit = MAX_UNSENT,
                    "{what}: answer stopped midway: the HTTP listeners' unsent answers stayed at \
                     their limit for {} s",
                    WRITE_DEADLINE.as_secs()
                );
                return Some((Err(io::Error::other("no room for the answer")), None));
            }
            match next(state).await {
                Ok((bytes, rest)) => Some((Ok::<_, io::Error>(counted(bytes)), rest)),
                Err(e) => {
                    tracing::warn!(error = %e, "{what}: answer stopped midway");
                    Some((Err(io::Error::other(e)), None))
                }
            }
        }
    });
    Body::from_stream(pages)
}

/// A socket whose writes fail once none has made progress for [`WRITE_DEADLINE`]; `stalled`
/// is set when that happens, so the connection's end is logged with its reason.
pub(crate) struct Deadlined<S> {
    inner: S,
    deadline: Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    pub(crate) stalled: Arc<AtomicBool>,
}

impl<S> Deadlined<S> {
    /// `inner` with [`WRITE_DEADLINE`].
    pub(crate) fn new(inner: S) -> Deadlined<S> {
        Deadlined::within(inner, WRITE_DEADLINE)
    }

    fn within(inner: S, deadline: Duration) -> Deadlined<S> {
        Deadlined {
            inner,
            deadline,
            timer: None,
            stalled: Arc::default(),
        }
    }

    /// After a write attempt: progress disarms the timer; no progress arms it (once) and
    /// fails the write when it has run out.
    fn judge<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.timer = None;
            return r;
        }
        let deadline = self.deadline;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(deadline)));
        if timer.as_mut().poll(cx).is_ready() {
            self.stalled.store(true, Ordering::Relaxed);
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing of the answer within the write deadline",
            )));
        }
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Deadlined<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Deadlined<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.judge(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.judge(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.judge(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.judge(cx, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn counted_bytes_leave_the_total_when_dropped() {
        let before = unsent();
        let a = counted(vec![1; 1000]);
        let b = a.slice(10..20);
        assert!(unsent() >= before + 1000);
        drop(a);
        assert!(unsent() >= before + 1000, "a slice still holds the buffer");
        drop(b);
        assert!(counted_whole(vec![0; MAX_UNSENT + 1]).is_err());
        let held = counted(vec![0; MAX_UNSENT]);
        assert!(counted_whole(vec![0; SMALL + 1]).is_err(), "no room");
        assert!(
            counted_whole(vec![0; SMALL]).is_ok(),
            "a small answer goes out"
        );
        drop(held);
    }

    const SHORT: Duration = Duration::from_millis(200);

    #[tokio::test]
    async fn a_write_without_progress_fails_at_the_deadline() {
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut w = Deadlined::within(ours, SHORT);
        let stalled = w.stalled.clone();
        let started = std::time::Instant::now();
        let e = w.write_all(&[7; 1000]).await.expect_err("nobody reads");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(stalled.load(Ordering::Relaxed));
        assert!(started.elapsed() >= SHORT);
    }

    #[tokio::test]
    async fn a_slow_reader_that_keeps_reading_is_served() {
        use tokio::io::AsyncReadExt;
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut w = Deadlined::within(ours, SHORT);
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0; 64];
            while got < 1000 {
                tokio::time::sleep(SHORT / 4).await;
                got += theirs.read(&mut buf).await.expect("read");
            }
        });
        w.write_all(&[7; 1000])
            .await
            .expect("each write makes progress in time");
        reader.await.expect("reader");
    }
}
