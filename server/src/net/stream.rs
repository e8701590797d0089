//! What a connection runs over: a plain TCP socket or a TLS session on one, split into a
//! reading and a writing half that the connection's reader and writer own.

use std::future::Future;
use std::io;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// A byte stream a connection can be served on.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    type Read: AsyncRead + ReadReady + Unpin + Send + 'static;
    type Write: AsyncWrite + Unpin + Send + 'static;
    /// Splits into halves usable from two futures at once.
    fn split(self) -> (Self::Read, Self::Write);
}

/// Waiting for input without a buffer, so that an idle connection need not hold one.
pub(crate) trait ReadReady {
    /// Resolves when a read would likely not block (it may still: readiness can be
    /// spurious). Streams that cannot tell resolve at once.
    fn ready(&self) -> impl Future<Output = io::Result<()>> + Send;
}

impl ReadReady for OwnedReadHalf {
    fn ready(&self) -> impl Future<Output = io::Result<()>> + Send {
        self.readable()
    }
}

impl Stream for TcpStream {
    type Read = OwnedReadHalf;
    type Write = OwnedWriteHalf;
    fn split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        self.into_split()
    }
}

/// TLS keeps its own buffers; its reading half reports ready at once.
#[cfg(feature = "tls")]
impl ReadReady for tokio::io::ReadHalf<tokio_rustls::server::TlsStream<TcpStream>> {
    fn ready(&self) -> impl Future<Output = io::Result<()>> + Send {
        std::future::ready(Ok(()))
    }
}

#[cfg(feature = "tls")]
impl Stream for tokio_rustls::server::TlsStream<TcpStream> {
    type Read = tokio::io::ReadHalf<Self>;
    type Write = tokio::io::WriteHalf<Self>;
    fn split(self) -> (Self::Read, Self::Write) {
        tokio::io::split(self)
    }
}
