//! Identities from the secure transports: the x509 identity of a verified client
//! certificate (given by the network layer) and SASL DIGEST-MD5 over opcode 102; and the
//! enforcement of authentication before other requests are served.

use std::sync::Arc;

use bytes::Bytes;
use md5::{Digest, Md5};
use zkd_protocol::{ErrorCode, Id, Jute, ReplyHeader, SaslToken};

use crate::auth::digest_md5::{DigestMd5, Step};
use crate::SaslUsers;
use crate::{ConnId, Core, Frame, Outbox};

/// The authentication schemes beyond digest and ip, and their super users.
#[derive(Clone, Debug, Default)]
pub struct AuthConfig {
    /// Whether the x509 scheme is registered (a secure port is configured): ACLs may name it.
    pub x509: bool,
    /// The subject DN that is super user when it authenticates with x509
    /// (`zookeeper.X509AuthenticationProvider.superUser`).
    pub x509_super_user: Option<String>,
    /// SASL DIGEST-MD5 users; `None` = SASL not configured (opcode 102 answered OK with no
    /// token, as a server without SASL does, and ACLs cannot name the sasl scheme).
    pub sasl_users: Option<Arc<SaslUsers>>,
    /// The SASL user that is super user (`zookeeper.superUser`).
    pub sasl_super_user: Option<String>,
    /// Secret mixed into DIGEST-MD5 nonces, chosen at start-up.
    pub nonce_seed: [u8; 16],
    /// Schemes one of which a connection must have authenticated with before anything but
    /// auth (100) and sasl (102) is served (`zookeeper.enforce.auth.schemes`); empty = off.
    pub enforce_schemes: Vec<String>,
}

/// Opcodes an unauthenticated connection may still send when authentication is enforced.
const AUTH_OPCODES: [i32; 2] = [100, 102];

fn id(scheme: &str, id: &str) -> Id {
    Id {
        scheme: scheme.into(),
        id: id.into(),
    }
}

impl Core {
    /// Adds `new` to the identities of `conn` (once).
    fn add_ids(&mut self, conn: ConnId, new: Vec<Id>) {
        if let Some(c) = self.conns.get_mut(&conn) {
            let ids = Arc::make_mut(&mut c.ids);
            for id in new {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
    }

    /// The client on `conn` presented a certificate the secure port verified; `dn` is its
    /// subject as Java formats it (RFC 2253). It becomes `x509:<dn>`, plus `super` when it is
    /// the configured x509 super user.
    pub fn x509_authenticated(&mut self, conn: ConnId, dn: &str) {
        let mut ids = Vec::new();
        if self.cfg.auth.x509_super_user.as_deref() == Some(dn) {
            ids.push(id("super", dn));
        }
        ids.push(id("x509", dn));
        tracing::info!(conn, dn, "authenticated with a client certificate");
        self.add_ids(conn, ids);
    }

    /// With enforced schemes: refuses a request other than auth and sasl from a connection
    /// that holds no identity of an enforced scheme, as ZooKeeper does: the reply header
    /// carries SESSIONCLOSEDREQUIRESASLAUTH (zxid 0, no body) and the connection is closed.
    /// The session itself is not closed; it expires unless the client comes back. Returns
    /// whether the request was refused.
    pub(crate) fn refuse_unauthenticated(
        &mut self,
        conn: ConnId,
        xid: i32,
        opcode: i32,
        out: &mut dyn Outbox,
    ) -> bool {
        let enforced = &self.cfg.auth.enforce_schemes;
        if enforced.is_empty() || AUTH_OPCODES.contains(&opcode) {
            return false;
        }
        let Some(c) = self.conns.get(&conn) else {
            return false;
        };
        if c.ids.iter().any(|id| enforced.contains(&id.scheme)) {
            return false;
        }
        tracing::warn!(
            conn,
            opcode,
            required = ?enforced,
            "closing connection: request before authenticating with a required scheme"
        );
        let frame = zkd_protocol::encode_frame(|out| {
            ReplyHeader {
                xid,
                zxid: 0,
                err: ErrorCode::SessionClosedRequireSaslAuth.code(),
            }
            .write(out)
        });
        self.send(out, conn, frame);
        self.finish_connection(conn, out);
        true
    }

    /// Opcode 102. Without SASL users configured: OK with no token. Otherwise one step of
    /// DIGEST-MD5; success adds `sasl:<user>`; any failure answers AUTHFAILED (with a null
    /// token) and closes the connection, as ZooKeeper does.
    pub(crate) fn sasl(
        &mut self,
        conn: ConnId,
        xid: i32,
        token: Option<Bytes>,
        out: &mut dyn Outbox,
    ) -> Option<(i32, i64, Frame)> {
        // ZooKeeper answers with zxid 0 and always a token field, null on failure.
        let reply = |token: Option<Vec<u8>>, err: i32| -> Frame {
            zkd_protocol::encode_frame(|out| {
                ReplyHeader { xid, zxid: 0, err }.write(out);
                SaslToken {
                    token: token.map(Bytes::from),
                }
                .write(out);
            })
            .into()
        };
        let Some(users) = self.cfg.auth.sasl_users.clone() else {
            return Some((xid, 0, reply(None, 0)));
        };
        let nonce = self.next_nonce(conn);
        let c = self.conns.get_mut(&conn)?;
        let state = c.sasl.get_or_insert(DigestMd5::Start);
        match state.step(token.as_deref().unwrap_or_default(), &users, &nonce) {
            Ok(Step::Continue(t)) => Some((xid, 0, reply(Some(t), 0))),
            Ok(Step::Complete { token, user }) => {
                let mut ids = vec![id("sasl", &user)];
                if self.cfg.auth.sasl_super_user.as_deref() == Some(user.as_str()) {
                    ids.push(id("super", ""));
                }
                tracing::info!(conn, user, "authenticated with SASL DIGEST-MD5");
                self.add_ids(conn, ids);
                Some((xid, 0, reply(Some(token), 0)))
            }
            Err(e) => {
                tracing::warn!(conn, reason = %e.0, "SASL authentication failed; closing");
                self.counters.auth_failed += 1;
                // When sasl is an enforced scheme ZooKeeper answers with the enforcement
                // code instead of AUTHFAILED.
                let code = if self.cfg.auth.enforce_schemes.iter().any(|s| s == "sasl") {
                    ErrorCode::SessionClosedRequireSaslAuth
                } else {
                    ErrorCode::AuthFailed
                };
                self.send(out, conn, reply(None, code.code()));
                self.finish_connection(conn, out);
                None
            }
        }
    }

    /// A fresh nonce: hex MD5 of the start-up secret, the connection and a counter.
    fn next_nonce(&mut self, conn: ConnId) -> String {
        self.nonces += 1;
        let mut h = Md5::new();
        h.update(self.cfg.auth.nonce_seed);
        h.update(conn.to_be_bytes());
        h.update(self.nonces.to_be_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}
