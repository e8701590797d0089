//! What a connection runs over: a plain TCP socket or a TLS session on one, owned whole by
//! the connection (reading and writing are driven from one poll).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A byte stream a connection can be served on.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Ready when a read would likely not block (it may still: readiness can be spurious),
    /// so that an idle connection can wait for input without holding a buffer. Streams that
    /// cannot tell are ready at once.
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// The connection stopped writing: shuts down the sending side where that needs no
    /// waiting (so the client sees the end at once), else does nothing.
    fn stop_writing(&mut self, cx: &mut Context<'_>);
}

impl Stream for TcpStream {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        TcpStream::poll_read_ready(self, cx)
    }

    fn stop_writing(&mut self, cx: &mut Context<'_>) {
        // A TCP shutdown is one system call and never pending.
        let _ = Pin::new(self).poll_shutdown(cx);
    }
}

/// TLS keeps its own buffers; it reports ready at once, and its close needs a write.
#[cfg(feature = "tls")]
impl Stream for tokio_rustls::server::TlsStream<TcpStream> {
    fn poll_read_ready(&self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn stop_writing(&mut self, _: &mut Context<'_>) {}
}
