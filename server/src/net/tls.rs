//! The secure client port: TLS 1.2 and 1.3 (rustls) in front of the same connection code as
//! the plain port. A client certificate verified against the configured CA bundle becomes
//! the connection's x509 identity before its first request is read, as ZooKeeper's x509
//! provider does at the end of the handshake.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_rustls::TlsAcceptor;

use super::{conn, x509_dn};
use crate::config::{ClientAuth, TlsConfig};
use crate::core::ConnId;
use crate::engine::{ConnChannels, Shared};

/// The secure port's TLS settings, loaded once at start-up.
pub(crate) struct TlsSetup {
    acceptor: TlsAcceptor,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn load_certs(path: &std::path::Path, what: &str) -> io::Result<Vec<CertificateDer<'static>>> {
    let pem = crate::files::read_capped(path, crate::files::SMALL_FILE_CAP)
        .map_err(|e| invalid(format!("{what}: {e}")))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("cannot read {what} {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(invalid(format!(
            "{what} {} holds no PEM certificate",
            path.display()
        )));
    }
    Ok(certs)
}

impl TlsSetup {
    /// Reads the PEM files and builds the server's TLS configuration.
    pub(crate) fn load(cfg: &TlsConfig) -> io::Result<TlsSetup> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs = load_certs(&cfg.cert, "the server certificate file")?;
        let pem = crate::files::read_capped(&cfg.key, crate::files::SMALL_FILE_CAP)
            .map_err(|e| invalid(format!("the private key file: {e}")))?;
        let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
            invalid(format!(
                "cannot read a private key from {}: {e}",
                cfg.key.display()
            ))
        })?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| invalid(format!("TLS set-up failed: {e}")))?;
        let builder = match (cfg.client_auth, &cfg.client_ca) {
            (ClientAuth::None, _) => builder.with_no_client_auth(),
            (_, None) => {
                return Err(invalid(
                    "client certificate verification needs a CA bundle".into(),
                ))
            }
            (auth, Some(ca)) => {
                let mut roots = RootCertStore::empty();
                for cert in load_certs(ca, "the client CA file")? {
                    roots.add(cert).map_err(|e| {
                        invalid(format!("bad CA certificate in {}: {e}", ca.display()))
                    })?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if auth == ClientAuth::Want {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| invalid(format!("client verification set-up failed: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder.with_single_cert(certs, key).map_err(|e| {
            invalid(format!(
                "the server certificate and key do not make a usable pair: {e}"
            ))
        })?;
        Ok(TlsSetup {
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }
}

/// Tells the core the connection is gone if the handshake does not get as far as
/// [`conn::run`], however the task ends.
struct Pending<'a> {
    shared: &'a Shared,
    id: ConnId,
    armed: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.closed(self.id);
        }
    }
}

/// Performs the TLS handshake on an accepted, registered socket, records the client's x509
/// identity, then serves the connection like a plain one. A failed or slow handshake closes
/// only this connection.
pub(crate) async fn serve(
    setup: Arc<TlsSetup>,
    shared: Arc<Shared>,
    id: ConnId,
    stream: TcpStream,
    remote: SocketAddr,
    channels: ConnChannels,
) {
    let mut pending = Pending {
        shared: &shared,
        id,
        armed: true,
    };
    let limit = shared.cfg.handshake_timeout;
    if channels.q.net_fault().blackhole {
        // As on the plain port: nothing is read, and the connection ends when its handshake
        // is overdue or the blackhole is removed.
        let _ = timeout(limit, conn::blackhole_lifted(&channels.q)).await;
        tracing::debug!(conn = id, %remote, "closing a blackholed connection before its handshake");
        return;
    }
    let tls = match Box::pin(timeout(limit, setup.acceptor.accept(stream))).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::info!(conn = id, %remote, "closing connection: TLS handshake failed: {e}");
            return;
        }
        Err(_) => {
            tracing::info!(conn = id, %remote, "closing connection: no TLS handshake within {limit:?}");
            return;
        }
    };
    let peer = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first());
    if let Some(cert) = peer {
        let dn = match x509_dn::subject_dn(cert) {
            Ok(dn) => dn,
            Err(e) => {
                tracing::info!(conn = id, %remote, "closing connection: {e}");
                return;
            }
        };
        if shared
            .with_core(|core, _| core.x509_authenticated(id, &dn))
            .is_err()
        {
            return;
        }
    }
    pending.armed = false;
    drop(pending);
    conn::run(shared, id, tls, remote, channels).await;
}
