//! The tokio network layer: the client listeners and their connections, over the engine.
//!
//! * One accept loop per listener ([`accept_loop`]): the client port, the secure port (TLS,
//!   see [`tls`]) and, on a simulated ensemble, each member's port ([`member`]). A socket
//!   is registered with the engine ([`Shared`]) before its task starts.
//! * One task per connection (see [`conn`]): it answers a four-letter word, or performs the
//!   handshake and then serves the connection from one small hand-written future that reads
//!   requests and drains everything queued into one vectored write per syscall.
//!
//! Input is bounded (see [`input`]): a connection's buffer grows only as bytes arrive, up to
//! one largest frame, and all buffers together stay within the engine's input budget.

mod conn;
mod input;
pub(crate) mod member;
mod stream;
#[cfg(feature = "tls")]
pub(crate) mod tls;
#[cfg(feature = "tls")]
mod x509_dn;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::engine::ensemble::MemberId;
use crate::engine::{CoreFailed, Shared};

/// What a listener speaks: the plain client protocol, or TLS around it (the secure port).
#[derive(Clone)]
pub(crate) enum Transport {
    Plain,
    #[cfg(feature = "tls")]
    Tls(Arc<tls::TlsSetup>),
}

/// Accepts connections until `shutdown`; then stops every connection task and returns.
/// `member` is the ensemble member the listener belongs to (0 on a standalone server).
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    transport: Transport,
    member: MemberId,
) {
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = shared.failed.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) if shared.gate.rejecting() => {
                    tracing::debug!("refusing a connection: new connections are rejected (control plane)");
                    drop(stream);
                }
                Ok((stream, remote)) if shared.core_busy() && matches!(transport, Transport::Plain) => {
                    // A step holds the core: the accept loop does not wait for it.
                    let _ = stream.set_nodelay(true);
                    tasks.spawn(serve_registered_later(shared.clone(), stream, remote, member));
                }
                Ok((stream, remote)) => {
                    let _ = stream.set_nodelay(true);
                    match shared.open(remote, member) {
                        Ok(Some((id, channels))) => {
                            tracing::debug!(conn = id, %remote, "accepted connection");
                            match &transport {
                                Transport::Plain => {
                                    tasks.spawn(conn::run(shared.clone(), id, stream, remote, channels));
                                }
                                #[cfg(feature = "tls")]
                                Transport::Tls(setup) => {
                                    tasks.spawn(tls::serve(setup.clone(), shared.clone(), id, stream, remote, channels));
                                }
                            }
                        }
                        Ok(None) => {
                            refused_for_limit(&shared, remote);
                        }
                        Err(CoreFailed) => break,
                    }
                }
                Err(e) => {
                    // Usually out of file descriptors; back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(e) = done {
                    if e.is_panic() {
                        tracing::error!("connection task panicked");
                    }
                }
            }
        }
    }
    drop(listener);
    tasks.shutdown().await;
}

/// Logs a connection refused for `--max-client-cnxns`.
fn refused_for_limit(shared: &Shared, remote: std::net::SocketAddr) {
    tracing::warn!(
        %remote,
        limit = shared.cfg.max_client_cnxns,
        "refusing connection from {}: it already has {} connections (--max-client-cnxns)",
        remote.ip(),
        shared.cfg.max_client_cnxns,
    );
}

/// A plain connection accepted while a step held the core: `ruok` is answered at once; any
/// other connection is registered (waiting for the core on a blocking thread, not on the
/// runtime's) and then served as the accept loop serves it.
async fn serve_registered_later(
    shared: Arc<Shared>,
    stream: tokio::net::TcpStream,
    remote: std::net::SocketAddr,
    member: MemberId,
) {
    let Some(stream) = conn::answer_ruok_unregistered(&shared, stream, remote).await else {
        return;
    };
    let opening = shared.clone();
    let opened = tokio::task::spawn_blocking(move || opening.open(remote, member)).await;
    match opened {
        Ok(Ok(Some((id, channels)))) => {
            tracing::debug!(conn = id, %remote, "accepted connection");
            conn::run(shared, id, stream, remote, channels).await;
        }
        Ok(Ok(None)) => {
            refused_for_limit(&shared, remote);
        }
        Ok(Err(CoreFailed)) | Err(_) => {}
    }
}
