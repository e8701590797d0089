//! The embeddable server handle.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::core::Core;
use crate::net::{self, now_ms, ServerFailure, Shared};
use crate::Config;

/// A running server. Dropping it stops the server: the listener closes and every connection
/// is dropped. Servers share no global state, so one process can run many.
pub struct Server {
    addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    pub(crate) shared: Arc<Shared>,
    shutdown: CancellationToken,
    acceptor: Option<JoinHandle<()>>,
    ticker: Option<JoinHandle<()>>,
    admin: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds the listener (and the admin listener when `config.admin_port` is set) and starts
    /// serving. Must be called inside a tokio runtime; the server's tasks run on that runtime.
    pub async fn start(config: Config) -> io::Result<Server> {
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let listener = TcpListener::bind((config.bind, config.port)).await?;
        let addr = listener.local_addr()?;
        #[cfg(feature = "admin")]
        let admin_listener = match config.admin_port {
            Some(port) => Some(crate::admin::bind(SocketAddr::new(config.admin_bind, port)).await?),
            None => None,
        };
        let core = Core::new(config.core_config(addr.port()), now_ms());
        let shared = Arc::new(Shared::new(&config, core));
        let shutdown = CancellationToken::new();
        let acceptor = tokio::spawn(net::accept_loop(listener, shared.clone(), shutdown.clone()));
        let ticker = tokio::spawn(net::ticker(shared.clone()));
        tracing::info!(%addr, "zkd serving");
        #[cfg_attr(not(feature = "admin"), allow(unused_mut))]
        let mut server = Server {
            addr,
            admin_addr: None,
            shared,
            shutdown,
            acceptor: Some(acceptor),
            ticker: Some(ticker),
            admin: None,
        };
        #[cfg(feature = "admin")]
        if let Some(listener) = admin_listener {
            let admin_addr = listener.local_addr()?;
            let state = crate::admin::AdminState {
                shared: server.shared.clone(),
                client_addr: addr,
            };
            server.admin = Some(tokio::spawn(crate::admin::serve(
                listener,
                state,
                server.shutdown.clone(),
            )));
            server.admin_addr = Some(admin_addr);
            tracing::info!(addr = %admin_addr, "zkd admin serving");
        }
        Ok(server)
    }

    /// The address the server listens on (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address of the admin HTTP listener, if one was asked for in the `Config`.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// `Some` once the server has failed closed: a call into its core panicked, so it
    /// closed every connection and stopped listening rather than serve a possibly
    /// half-changed tree. It does not recover; start a new server.
    pub fn failure(&self) -> Option<ServerFailure> {
        self.shared.failure().cloned()
    }

    /// Resolves when the server fails closed (see [`Server::failure`]); pending for as long
    /// as it serves. The `zkd` binary exits non-zero when this resolves.
    pub async fn failed(&self) -> ServerFailure {
        self.shared.failed().await
    }

    /// Stops accepting, closes every connection and waits until all of it is done.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
            let _ = ticker.await;
        }
        if let Some(admin) = self.admin.take() {
            admin.abort();
            let _ = admin.await;
        }
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.await;
        }
        tracing::info!(addr = %self.addr, "zkd stopped");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
        // Aborting the acceptor drops its listener and its set of connection tasks, which
        // aborts those too.
        if let Some(acceptor) = self.acceptor.take() {
            acceptor.abort();
        }
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
        }
        if let Some(admin) = self.admin.take() {
            admin.abort();
        }
    }
}
