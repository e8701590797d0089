//! Core tests of enforced authentication: what an unauthenticated connection may send, the
//! reply and close it gets otherwise, and that its session outlives the closed connection.

use bytes::Bytes;
use zkd_protocol::*;

use crate::testing::harness::*;
use crate::*;

fn enforcing(schemes: &[&str]) -> Harness {
    let mut cfg = config();
    cfg.auth.enforce_schemes = schemes.iter().map(|s| s.to_string()).collect();
    Harness {
        core: Core::new(cfg, T0),
        now: T0,
        out: RecordingOutbox::default(),
        xid: 0,
    }
}

fn digest_auth(user_pass: &'static [u8]) -> Request {
    Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: Bytes::from_static(user_pass),
    })
}

#[test]
fn unauthenticated_requests_are_refused_and_the_connection_closed() {
    let mut h = enforcing(&["digest"]);
    // Every kind of request but auth and sasl is refused, pings included.
    for req in [get_data("/", false), Request::Ping, Request::CloseSession] {
        let (conn, sid, _) = h.session(30000);
        let f = h.reply(conn, &req);
        assert_eq!((f.xid, f.zxid, f.err), (h.xid, 0, -124), "{req:?}");
        assert!(f.body.is_empty(), "no body after the error header");
        assert!(h.out.closed.contains(&conn), "connection closed");
        // The session is not closed with the connection.
        assert!(h.core.sessions.get_mut(sid).is_some(), "session lives on");
        h.out.closed.clear();
    }
}

#[test]
fn authenticating_with_an_enforced_scheme_admits_requests() {
    let mut h = enforcing(&["sasl", "digest"]);
    let (conn, _, _) = h.session(30000);
    h.xid = -5;
    let f = h.reply(conn, &digest_auth(b"user:pass"));
    assert_eq!((f.xid, f.err), (-4, 0));
    h.xid = 0;
    assert_eq!(h.reply(conn, &get_data("/", false)).err, 0);
    assert!(h.out.closed.is_empty());
}

#[test]
fn not_enforced_without_schemes() {
    let mut h = Harness::new();
    let (conn, _, _) = h.session(30000);
    assert_eq!(h.reply(conn, &get_data("/", false)).err, 0);
    assert!(h.out.closed.is_empty());
}

#[test]
fn failed_sasl_gets_the_enforcement_code_when_sasl_is_enforced() {
    for (enforce, code) in [(&["sasl"][..], -124), (&[][..], -115)] {
        let mut cfg = config();
        cfg.auth.sasl_users = Some(std::sync::Arc::new(
            crate::SaslUsers::parse("bob:secret\n", "Server").expect("users"),
        ));
        cfg.auth.enforce_schemes = enforce.iter().map(|s| s.to_string()).collect();
        let mut h = Harness {
            core: Core::new(cfg, T0),
            now: T0,
            out: RecordingOutbox::default(),
            xid: 0,
        };
        let (conn, _, _) = h.session(30000);
        let sasl = |token: &'static [u8]| {
            Request::Sasl(SaslToken {
                token: Some(Bytes::from_static(token)),
            })
        };
        assert_eq!(h.reply(conn, &sasl(b"")).err, 0, "challenge");
        let f = h.reply(conn, &sasl(b"not a digest response"));
        assert_eq!((f.zxid, f.err), (0, code), "enforcing {enforce:?}");
        assert!(h.out.closed.contains(&conn));
    }
}
