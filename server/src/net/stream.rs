//! What a connection runs over: a plain TCP socket or a TLS session on one, split into a
//! reading and a writing half that the connection's reader and writer own.

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// A byte stream a connection can be served on.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    type Read: AsyncRead + Unpin + Send + 'static;
    type Write: AsyncWrite + Unpin + Send + 'static;
    /// Splits into halves usable from two futures at once.
    fn split(self) -> (Self::Read, Self::Write);
}

impl Stream for TcpStream {
    type Read = OwnedReadHalf;
    type Write = OwnedWriteHalf;
    fn split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        self.into_split()
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
