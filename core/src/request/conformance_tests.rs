//! Conformance tests of request handling on the core (docs/protocol.md): fresh-server zxids,
//! Stat bookkeeping, sequence numbers, watch triggers, failed multi results, setWatches
//! catch-up, reconnects, ACLs, reaping, and replies that share one encoded child list.

use bytes::Bytes;
use zkd_protocol::*;

use crate::testing::harness::*;
use crate::*;

#[test]
fn fresh_server_zxids_and_duplicate_create() {
    let (mut h, [c]) = Harness::with_sessions();
    assert_eq!(h.core.last_zxid(), 1, "session creation takes zxid 1");
    let f = h.create(c, "/a", 0);
    assert_eq!((f.err, f.zxid), (0, 2));
    let r: Create2Response = f.decode();
    assert_eq!(r.path, "/a");
    let s = r.stat;
    assert_eq!(
        (
            s.czxid,
            s.mzxid,
            s.pzxid,
            s.version,
            s.cversion,
            s.aversion,
            s.num_children
        ),
        (2, 2, 2, 0, 0, 0, 0)
    );
    assert_eq!(s.data_length, 1);
    let f = h.create(c, "/a", 0);
    assert_eq!((f.err, f.zxid), (ErrorCode::NodeExists.code(), 3));
    assert!(f.body.is_empty(), "error replies carry no body");
}

#[test]
fn initial_tree_stats() {
    let (mut h, [c]) = Harness::with_sessions();
    let root = stat_of(&mut h, c, "/");
    assert_eq!((root.cversion, root.num_children, root.czxid), (-1, 1, 0));
    assert_eq!(stat_of(&mut h, c, "/zookeeper").cversion, -2);
    assert_eq!(stat_of(&mut h, c, "/zookeeper/config").aversion, -1);
    for p in ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
        assert_eq!(
            h.reply(c, &delete(p, -1)).err,
            ErrorCode::BadArguments.code(),
            "{p}"
        );
    }
    assert_eq!(
        h.reply(c, &set_data("/zookeeper/config", -1)).err,
        ErrorCode::NoAuth.code()
    );
    let f = h.reply(
        c,
        &Request::GetAllChildrenNumber(PathRequest { path: "/".into() }),
    );
    assert_eq!(f.decode::<AllChildrenNumberResponse>().total, 3);
}

#[test]
fn cversion_and_sequence_numbers() {
    let (mut h, [c]) = Harness::with_sessions();
    h.create(c, "/a", 0);
    h.create(c, "/a/b", 0);
    let f = h.reply(c, &delete("/a/b", -1));
    assert_eq!(f.err, 0);
    let s = stat_of(&mut h, c, "/a");
    assert_eq!((s.cversion, s.num_children, s.pzxid), (2, 0, f.zxid));
    let names: Vec<String> = (0..2)
        .map(|_| h.create(c, "/a/s-", 2).decode::<Create2Response>().path)
        .collect();
    assert_eq!(names, ["/a/s-0000000001", "/a/s-0000000002"]);
    h.reply(c, &delete("/a/s-0000000002", -1));
    assert_eq!(
        h.create(c, "/a/s-", 2).decode::<Create2Response>().path,
        "/a/s-0000000003"
    );
    assert_eq!(
        h.create(c, "/a/", 2).decode::<Create2Response>().path,
        "/a/0000000004"
    );
}

#[test]
fn create_error_precedence() {
    let (mut h, [c]) = Harness::with_sessions();
    h.create(c, "/a", 0);
    let cases = [
        ("", ErrorCode::BadArguments),
        ("a", ErrorCode::BadArguments),
        ("/", ErrorCode::NodeExists),
        ("/x/", ErrorCode::NoNode),
        ("/a/", ErrorCode::BadArguments),
        ("//", ErrorCode::BadArguments),
        ("/a//b", ErrorCode::NoNode),
        ("/a/.", ErrorCode::BadArguments),
        ("/a/..", ErrorCode::BadArguments),
        ("/a\u{1}", ErrorCode::BadArguments),
        ("/a\0", ErrorCode::BadArguments),
    ];
    for (p, code) in cases {
        assert_eq!(h.create(c, p, 0).err, code.code(), "create {p:?}");
    }
    assert_eq!(h.create(c, "/a/...", 0).err, 0);
    let mut bad_acl = create_req(OpCode::Create, "/nope/x", 0);
    if let Request::Create(cr) = &mut bad_acl {
        cr.acl.clear();
    }
    assert_eq!(h.reply(c, &bad_acl).err, ErrorCode::InvalidAcl.code());
    h.create(c, "/e", 1);
    assert_eq!(
        h.create(c, "/e/x", 0).err,
        ErrorCode::NoChildrenForEphemerals.code()
    );
    assert_eq!(
        h.create(c, "/e/x", 3).err,
        ErrorCode::NoChildrenForEphemerals.code()
    );
    assert_eq!(h.create(c, "/a", 9).err, ErrorCode::BadArguments.code());
    assert_eq!(h.create(c, "/t", 5).err, ErrorCode::BadArguments.code());
}

#[test]
fn delete_and_set_data_checks() {
    let (mut h, [c]) = Harness::with_sessions();
    h.create(c, "/a", 0);
    h.create(c, "/a/b", 0);
    assert_eq!(
        h.reply(c, &delete("/a", 5)).err,
        ErrorCode::BadVersion.code(),
        "BADVERSION beats NOTEMPTY"
    );
    assert_eq!(
        h.reply(c, &delete("/a", -1)).err,
        ErrorCode::NotEmpty.code()
    );
    assert_eq!(
        h.reply(c, &delete("/q/r", -1)).err,
        ErrorCode::NoNode.code()
    );
    let f = h.reply(c, &set_data("/a", 0));
    assert_eq!(f.decode::<StatResponse>().stat.version, 1);
    assert_eq!(
        h.reply(c, &set_data("/a", 0)).err,
        ErrorCode::BadVersion.code()
    );
    assert_eq!(
        h.reply(c, &set_data("/zz", -1)).err,
        ErrorCode::NoNode.code()
    );
}

#[test]
fn exists_watch_on_missing_node_fires_node_created() {
    let (mut h, [a, b]) = Harness::with_sessions();
    h.create(b, "/w", 0);
    let f = h.reply(a, &exists("/w/a", true));
    assert_eq!(f.err, ErrorCode::NoNode.code());
    let frames = h.call(b, &create_req(OpCode::Create, "/w/a", 0));
    assert_eq!(frames.len(), 1);
    assert_eq!(
        h.events(a),
        [(event_type::NODE_CREATED, "/w/a".to_string())]
    );
}

#[test]
fn delete_with_every_watch_gives_one_event_each() {
    let (mut h, [a, b]) = Harness::with_sessions();
    h.create(b, "/w", 0);
    h.create(b, "/w/a", 0);
    h.reply(a, &get_data("/w/a", true));
    h.reply(a, &children("/w/a", true));
    h.reply(a, &exists("/w/a", true));
    h.reply(a, &children("/w", true));
    h.reply(b, &delete("/w/a", -1));
    assert_eq!(
        h.events(a),
        [
            (event_type::NODE_DELETED, "/w/a".to_string()),
            (event_type::NODE_CHILDREN_CHANGED, "/w".to_string())
        ]
    );
}

#[test]
fn event_precedes_the_reply_on_the_writing_connection() {
    let (mut h, [a]) = Harness::with_sessions();
    h.create(a, "/n", 0);
    h.reply(a, &get_data("/n", true));
    let frames = h.call(a, &set_data("/n", -1));
    assert_eq!(frames.len(), 2);
    assert_eq!(
        frames[0].event(),
        (event_type::NODE_DATA_CHANGED, "/n".to_string())
    );
    assert_eq!(
        frames[0].zxid, frames[1].zxid,
        "notifications carry the triggering zxid"
    );
    assert_eq!(frames[1].xid, h.xid);
}

#[test]
fn persistent_and_recursive_watches() {
    let (mut h, [a, b, w]) = Harness::with_sessions();
    h.create(w, "/q", 0);
    let f = h.reply(
        a,
        &Request::AddWatch(AddWatchRequest {
            path: "/q".into(),
            mode: 1,
        }),
    );
    assert_eq!(
        (f.err, f.body.len()),
        (0, 4),
        "addWatch replies with an ErrorResponse body"
    );
    h.reply(
        b,
        &Request::AddWatch(AddWatchRequest {
            path: "/q".into(),
            mode: 0,
        }),
    );
    h.create(w, "/q/b", 0);
    assert_eq!(
        h.events(a),
        [(event_type::NODE_CREATED, "/q/b".to_string())]
    );
    assert_eq!(
        h.events(b),
        [(event_type::NODE_CHILDREN_CHANGED, "/q".to_string())]
    );
    h.reply(w, &delete("/q/b", -1));
    h.reply(w, &delete("/q", -1));
    h.create(w, "/q", 0);
    assert_eq!(
        h.events(a).len(),
        3,
        "recursive: deleted /q/b, deleted /q, created /q"
    );
    assert_eq!(
        h.events(b).len(),
        3,
        "persistent: children changed, deleted, created"
    );
    assert_eq!(
        h.reply(
            a,
            &Request::AddWatch(AddWatchRequest {
                path: "/q".into(),
                mode: 7
            })
        )
        .err,
        ErrorCode::MarshallingError.code()
    );
    let rm = |t| {
        Request::RemoveWatches(WatchTypeRequest {
            path: "/q".into(),
            watcher_type: t,
        })
    };
    assert_eq!(
        h.reply(a, &rm(watcher_type::DATA)).err,
        ErrorCode::NoWatcher.code()
    );
    assert_eq!(h.reply(a, &rm(watcher_type::ANY)).err, 0);
    assert_eq!(
        h.reply(a, &rm(watcher_type::ANY)).err,
        ErrorCode::NoWatcher.code()
    );
    assert_eq!(h.reply(a, &rm(42)).err, ErrorCode::MarshallingError.code());
}

#[test]
fn set_watches_fires_what_changed() {
    let (mut h, [a]) = Harness::with_sessions();
    h.create(a, "/sw", 0);
    h.create(a, "/sw/d", 0);
    let rel = h.core.last_zxid();
    h.reply(a, &set_data("/sw/d", -1));
    let req = Request::SetWatches(SetWatches {
        relative_zxid: rel,
        data_watches: vec!["/sw/d".into(), "/gone".into()],
        exist_watches: vec!["/sw".into(), "/later".into()],
        child_watches: vec!["/sw".into()],
    });
    h.xid = -9;
    let frames = h.call(a, &req);
    let reply = frames.last().unwrap();
    assert_eq!((reply.xid, reply.err), (-8, 0));
    let events: Vec<_> = frames[..frames.len() - 1]
        .iter()
        .map(|f| {
            assert_eq!(f.zxid, -1);
            f.event()
        })
        .collect();
    assert_eq!(
        events,
        [
            (event_type::NODE_DATA_CHANGED, "/sw/d".to_string()),
            (event_type::NODE_DELETED, "/gone".to_string()),
            (event_type::NODE_CREATED, "/sw".to_string()),
        ]
    );
    let frames = h.call(a, &create_req(OpCode::Create, "/later", 0));
    assert_eq!(
        frames[0].event(),
        (event_type::NODE_CREATED, "/later".to_string())
    );
}

#[test]
fn failed_multi_results_and_rollback() {
    let (mut h, [c, w]) = Harness::with_sessions();
    h.create(c, "/m", 0);
    h.reply(w, &children("/m", true));
    let before = stat_of(&mut h, c, "/m");
    let Request::Create(mk) = create_req(OpCode::Create, "/m/x", 0) else {
        unreachable!()
    };
    let ops = vec![
        MultiOp::Create(mk.clone()),
        MultiOp::SetData(SetDataRequest {
            path: "/m".into(),
            data: None,
            version: 7,
        }),
        MultiOp::Check(CheckVersionRequest {
            path: "/m".into(),
            version: 0,
        }),
        MultiOp::Delete(DeleteRequest {
            path: "/m/y".into(),
            version: -1,
        }),
        MultiOp::Create(Create {
            path: "/m/z".into(),
            ..mk.clone()
        }),
    ];
    let zxid = h.core.last_zxid();
    let f = h.reply(c, &Request::Multi(ops));
    assert_eq!((f.err, f.zxid), (0, zxid + 1));
    let r: MultiResponse = f.decode();
    let codes: Vec<i32> =
        r.0.iter()
            .map(|r| match r {
                MultiResult::Error(e) => *e,
                _ => 99,
            })
            .collect();
    assert_eq!(codes, [0, -103, -2, -2, -2]);
    assert_eq!(
        h.reply(c, &exists("/m/x", false)).err,
        ErrorCode::NoNode.code()
    );
    assert_eq!(stat_of(&mut h, c, "/m"), before, "nothing applied");
    assert!(h.take(w).is_empty(), "no events from a failed multi");
    // Success: sequential creates in one multi see each other's counter.
    let seq = Create {
        path: "/m/s-".into(),
        flags: 2,
        ..mk.clone()
    };
    let f = h.reply(
        c,
        &Request::Multi(vec![MultiOp::Create(seq.clone()), MultiOp::Create(seq)]),
    );
    let r: MultiResponse = f.decode();
    assert_eq!(
        r.0[0],
        MultiResult::Create {
            path: "/m/s-0000000000".into(),
            stat: None
        }
    );
    assert_eq!(
        r.0[1],
        MultiResult::Create {
            path: "/m/s-0000000001".into(),
            stat: None
        }
    );
    assert_eq!(
        h.events(w),
        [(event_type::NODE_CHILDREN_CHANGED, "/m".to_string())]
    );
    // Empty multi consumes a zxid and returns just the terminator.
    let zxid = h.core.last_zxid();
    let f = h.reply(c, &Request::Multi(vec![]));
    assert_eq!((f.zxid, f.decode::<MultiResponse>().0.len()), (zxid + 1, 0));
    // A read in a write multi is malformed.
    let f = h.reply(
        c,
        &Request::Multi(vec![MultiOp::GetData(PathWatchRequest {
            path: "/m".into(),
            watch: false,
        })]),
    );
    assert_eq!(f.err, ErrorCode::MarshallingError.code());
}

#[test]
fn multi_read_is_independent() {
    let (mut h, [c]) = Harness::with_sessions();
    h.create(c, "/r", 0);
    let zxid = h.core.last_zxid();
    let pw = |p: &str| PathWatchRequest {
        path: p.into(),
        watch: true,
    };
    let f = h.reply(
        c,
        &Request::MultiRead(vec![
            MultiOp::GetData(pw("/r")),
            MultiOp::GetChildren(pw("/")),
            MultiOp::GetData(pw("/none")),
            MultiOp::GetChildren(pw("/none")),
        ]),
    );
    assert_eq!(f.zxid, zxid);
    let r: MultiResponse = f.decode();
    assert!(matches!(r.0[0], MultiResult::GetData { .. }));
    assert!(matches!(&r.0[1], MultiResult::GetChildren(c) if c.contains(&"r".to_string())));
    assert_eq!(r.0[2], MultiResult::Error(-101));
    assert_eq!(r.0[3], MultiResult::Error(-101));
}

#[test]
fn session_close_deletes_ephemerals_under_one_zxid() {
    let (mut h, [a, w]) = Harness::with_sessions();
    h.create(w, "/app", 0);
    h.create_all(a, &[("/app/e1", 1), ("/app/e2", 3)]);
    h.reply(w, &children("/app", true));
    let frames = h.call(a, &Request::CloseSession);
    assert_eq!(frames.len(), 1);
    assert_eq!(h.out.closed, [a]);
    let zxid = frames[0].zxid;
    assert_eq!(zxid, h.core.last_zxid());
    assert_eq!(
        h.events(w),
        [(event_type::NODE_CHILDREN_CHANGED, "/app".to_string())]
    );
    let s = stat_of(&mut h, w, "/app");
    assert_eq!((s.num_children, s.pzxid), (0, zxid));
}

#[test]
fn expiry_on_tick_boundary_and_reconnect_rules() {
    let mut h = Harness::new();
    let (a, sid, pw, w) = h.watched_ephemeral(4000, 40000);
    // Reconnect with a wrong password: invalid response, then close.
    let c2 = h.open();
    let bad = connect_request(sid, 4000, &[1; 16]);
    assert_eq!(h.handshake(c2, &bad), Handshake::Closed);
    let resp: ConnectResponse = from_bytes(h.take(c2)[0].slice(4..)).unwrap();
    assert_eq!(resp, ConnectResponse::invalid(Some(false)));
    // Valid reconnect moves the session and closes the old connection.
    let c3 = h.open();
    let good = ConnectRequest {
        passwd: pw.clone(),
        ..bad.clone()
    };
    assert_eq!(
        h.core
            .handshake(c3, jute::to_bytes(&good), h.now, &mut h.out),
        Handshake::Established
    );
    assert!(h.out.closed.contains(&a));
    h.take(c3);
    // Expiry: between timeout and timeout + tick after the last request.
    let deadline = h.core.next_deadline().unwrap();
    assert!(
        deadline > h.now + 4000 && deadline <= h.now + 6000,
        "{deadline}"
    );
    h.core.tick(deadline - 1, &mut h.out);
    assert_eq!(h.reply(w, &exists("/eph", false)).err, 0);
    h.core.tick(deadline, &mut h.out);
    assert!(h.out.closed.contains(&c3));
    assert!(h.take(c3).is_empty(), "expiry sends nothing");
    assert_eq!(
        h.events(w),
        [(event_type::NODE_DELETED, "/eph".to_string())]
    );
    // The expired session can no longer be resumed.
    let c4 = h.open();
    assert_eq!(
        h.core
            .handshake(c4, jute::to_bytes(&good), h.now, &mut h.out),
        Handshake::Closed
    );
}

#[test]
fn acl_enforcement_and_auth() {
    let (mut h, [owner, other]) = Harness::with_sessions();
    h.xid = -5;
    let auth = Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: Bytes::from_static(b"user:pass"),
    });
    let f = h.reply(owner, &auth);
    assert_eq!((f.xid, f.zxid, f.err), (-4, 0, 0));
    let req = Request::Create(Create {
        op: OpCode::Create,
        path: "/sec".into(),
        data: None,
        acl: vec![Acl::new(31, "auth", "")],
        flags: 0,
        ttl: -1,
    });
    assert_eq!(
        h.reply(other, &req).err,
        ErrorCode::InvalidAcl.code(),
        "auth scheme with no identity"
    );
    assert_eq!(h.reply(owner, &req).err, 0);
    assert_eq!(
        h.reply(other, &get_data("/sec", false)).err,
        ErrorCode::NoAuth.code()
    );
    let f = h.reply(owner, &get_data("/sec", false));
    assert_eq!(
        f.decode::<GetDataResponse>().data,
        None,
        "null data round-trips"
    );
    let acl: GetAclResponse = h
        .reply(
            owner,
            &Request::GetAcl(PathRequest {
                path: "/sec".into(),
            }),
        )
        .decode();
    assert_eq!(
        acl.acl,
        vec![Acl::new(31, "digest", "user:smGaoVKd/cQkjm7b88GyorAUz20=")]
    );
    assert_eq!(
        h.reply(other, &set_data("/sec", 9)).err,
        ErrorCode::NoAuth.code(),
        "NOAUTH beats BADVERSION"
    );
    // Super user bypasses ACLs.
    let (sup, _, _) = h.session(30000);
    let su = Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: Bytes::from_static(b"super:secret"),
    });
    h.reply(sup, &su);
    assert_eq!(h.reply(sup, &get_data("/sec", false)).err, 0);
    let who: WhoAmIResponse = h.reply(owner, &Request::WhoAmI).decode();
    assert_eq!(
        who.client_info,
        vec![
            ClientInfo {
                auth_scheme: "ip".into(),
                user: "127.0.0.1".into()
            },
            ClientInfo {
                auth_scheme: "digest".into(),
                user: "user".into()
            },
        ]
    );
    // Unknown scheme: AUTHFAILED and close.
    let bad = Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: "kerberos".into(),
        auth: Bytes::new(),
    });
    let f = h.reply(other, &bad);
    assert_eq!(f.err, ErrorCode::AuthFailed.code());
    assert!(h.out.closed.contains(&other));
}

#[test]
fn containers_and_ttl_nodes_are_reaped() {
    let mut h = Harness::new();
    let (c, _, _) = h.session(40000);
    let f = h.reply(c, &create_req(OpCode::CreateContainer, "/box", 0));
    assert_eq!(f.decode::<Create2Response>().stat.ephemeral_owner, 0);
    h.create(c, "/box/item", 0);
    let ttl = ttl_req("/ttl", 500);
    assert_eq!(h.reply(c, &ttl).err, 0);
    let bad_ttl = ttl_req("/ttl2", 1 << 40);
    assert_eq!(h.reply(c, &bad_ttl).err, ErrorCode::BadArguments.code());
    let never_used = create_req(OpCode::CreateContainer, "/fresh", 0);
    h.reply(c, &never_used);
    h.now += 1000;
    h.core.tick(h.now, &mut h.out);
    assert_eq!(
        h.reply(c, &exists("/box", false)).err,
        0,
        "container still has a child"
    );
    assert_eq!(
        h.reply(c, &exists("/ttl", false)).err,
        ErrorCode::NoNode.code(),
        "ttl expired"
    );
    h.reply(c, &delete("/box/item", -1));
    h.now += 1000;
    h.core.tick(h.now, &mut h.out);
    assert_eq!(
        h.reply(c, &exists("/box", false)).err,
        ErrorCode::NoNode.code(),
        "empty used container reaped"
    );
    assert_eq!(
        h.reply(c, &exists("/fresh", false)).err,
        0,
        "never-used container stays"
    );
}

#[test]
fn unknown_opcode_and_bad_bodies() {
    let (mut h, [c]) = Harness::with_sessions();
    // Truncated getData body: MARSHALLINGERROR, connection stays usable.
    let frame = get_data("/zookeeper", false).to_frame(7);
    h.core
        .request(c, frame.slice(4..frame.len() - 3), h.now, &mut h.out);
    let f = Decoded::parse(&h.take(c)[0]);
    assert_eq!((f.xid, f.err), (7, ErrorCode::MarshallingError.code()));
    assert!(h.out.closed.is_empty());
    let f = h.reply(c, &Request::Ping);
    assert_eq!((f.xid, f.err), (-2, 0));
    // Unknown opcode 999: UNIMPLEMENTED with zxid -1, then close.
    let raw = encode_frame(|o| RequestHeader { xid: 8, op: 999 }.write(o));
    h.core.request(c, raw.slice(4..), h.now, &mut h.out);
    let f = Decoded::parse(&h.take(c)[0]);
    assert_eq!((f.xid, f.zxid, f.err), (8, -1, -6));
    assert_eq!(h.out.closed, [c]);
}

#[test]
fn handshake_shapes_and_zxid_guard() {
    let mut h = Harness::new();
    let conn = h.open();
    let old = ConnectRequest {
        timeout: 100000,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: None,
        ..Default::default()
    };
    h.core
        .handshake(conn, jute::to_bytes(&old), h.now, &mut h.out);
    let frame = h.take(conn).remove(0);
    assert_eq!(frame.len(), 4 + 36, "no readOnly byte for old clients");
    let resp: ConnectResponse = from_bytes(frame.slice(4..)).unwrap();
    assert_eq!(resp.timeout, 40000);
    let conn = h.open();
    let ahead = ConnectRequest {
        last_zxid_seen: 1000,
        ..old
    };
    assert_eq!(
        h.core
            .handshake(conn, jute::to_bytes(&ahead), h.now, &mut h.out),
        Handshake::Closed
    );
    assert!(h.take(conn).is_empty());
}

/// A create sub-op of a multi with opcode `op`, no data and the open ACL.
fn multi_create(op: OpCode, path: &str, flags: i32, ttl: i64) -> MultiOp {
    MultiOp::Create(Create {
        op,
        path: path.into(),
        data: None,
        acl: Acl::open_unsafe(),
        flags,
        ttl,
    })
}

#[test]
fn multi_create_kind_follows_the_flags() {
    let mut h = Harness::release(crate::ZookeeperVersion::V3_8);
    let (c, sid, _) = h.session(30000);
    let sub = multi_create;
    // Header 19 with an ordinary flag makes that kind; header 21 with a non-TTL flag ignores
    // its ttl; flag 4 makes a container under any header.
    let f = h.reply(
        c,
        &Request::Multi(vec![
            sub(OpCode::CreateContainer, "/p", 0, -1),
            sub(OpCode::CreateContainer, "/e", 1, -1),
            sub(OpCode::CreateTtl, "/q", 0, 0),
            sub(OpCode::Create, "/box", 4, -1),
        ]),
    );
    let r: MultiResponse = f.decode();
    assert_eq!(
        r.0[0],
        MultiResult::Create {
            path: "/p".into(),
            stat: None
        }
    );
    assert!(
        matches!(&r.0[3], MultiResult::Create { stat: Some(_), .. }),
        "{:?}",
        r.0[3]
    );
    assert_eq!(stat_of(&mut h, c, "/e").ephemeral_owner, sid);
    assert_eq!(stat_of(&mut h, c, "/p").ephemeral_owner, 0);
    // A TTL flag under header 1 fails the whole multi when reached...
    let f = h.reply(
        c,
        &Request::Multi(vec![
            sub(OpCode::Create, "/x", 0, -1),
            sub(OpCode::Create, "/t", 5, -1),
        ]),
    );
    assert_eq!(f.err, ErrorCode::MarshallingError.code());
    assert_eq!(
        h.reply(c, &exists("/x", false)).err,
        ErrorCode::NoNode.code(),
        "rolled back"
    );
    // ...but an earlier failing sub-op gives the usual per-op results.
    let f = h.reply(
        c,
        &Request::Multi(vec![
            sub(OpCode::Create, "/no/x", 0, -1),
            sub(OpCode::Create, "/t", 5, -1),
        ]),
    );
    let r: MultiResponse = f.decode();
    assert_eq!(r.0, vec![MultiResult::Error(-101), MultiResult::Error(-2)]);
}

/// As 3.9.3: every create sub-op is checked before any runs (a TTL flag without a ttl, or an
/// unknown flag under header 1, 15 or 19, fails the whole multi whatever came before), headers
/// 15 and 19 answer with a Stat whatever the flags, and a multiRead of writes only is refused
/// with an empty multi body after the error.
#[test]
fn multi_on_3_9_checks_creates_first() {
    let mut h = Harness::release(crate::ZookeeperVersion::V3_9);
    let (c, _, _) = h.session(30000);
    let sub = multi_create;
    let f = h.reply(
        c,
        &Request::Multi(vec![
            sub(OpCode::CreateContainer, "/p", 0, -1),
            sub(OpCode::CreateTtl, "/q", 0, 0),
            sub(OpCode::Create2, "/r", 0, -1),
        ]),
    );
    let r: MultiResponse = f.decode();
    let stats: Vec<bool> =
        r.0.iter()
            .map(|x| matches!(x, MultiResult::Create { stat: Some(_), .. }))
            .collect();
    assert_eq!(stats, [true, false, true]);
    for (op, flags) in [
        (OpCode::Create, 5),
        (OpCode::Create, 7),
        (OpCode::Create2, 9),
    ] {
        let f = h.reply(
            c,
            &Request::Multi(vec![
                sub(OpCode::Create, "/no/x", 0, -1),
                sub(op, "/t", flags, -1),
            ]),
        );
        assert_eq!(f.err, ErrorCode::MarshallingError.code(), "{op:?} {flags}");
        assert!(f.body.is_empty());
    }
    let f = h.reply(
        c,
        &Request::Multi(vec![sub(OpCode::CreateTtl, "/t", 7, 100)]),
    );
    let r: MultiResponse = f.decode();
    assert_eq!(
        r.0,
        vec![MultiResult::Error(ErrorCode::BadArguments.code())]
    );
    let check = MultiOp::Check(zkd_protocol::CheckVersionRequest {
        path: "/p".into(),
        version: -1,
    });
    let f = h.reply(c, &Request::MultiRead(vec![check.clone()]));
    assert_eq!(f.err, ErrorCode::MarshallingError.code());
    assert_eq!(
        &f.body[..],
        [0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff]
    );
    let read = MultiOp::GetData(zkd_protocol::PathWatchRequest {
        path: "/p".into(),
        watch: false,
    });
    let f = h.reply(c, &Request::MultiRead(vec![read, check]));
    assert_eq!(f.err, ErrorCode::MarshallingError.code());
    assert!(f.body.is_empty());
}

/// Notifications are filtered by the watcher's READ permission when the event fires:
/// NodeCreated / NodeDataChanged / NodeDeleted by the node's ACL, NodeChildrenChanged by the
/// parent's; the identities are the watcher's at that moment; one-shot watches are used up
/// even when their event is withheld.
#[test]
fn notifications_need_read_permission() {
    let (mut h, [owner, anon, late]) = Harness::with_sessions();
    let auth = |who: &'static [u8]| {
        Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: Bytes::from_static(who),
        })
    };
    h.reply(owner, &auth(b"user:pass"));
    let private = |p: &str| {
        Request::Create(Create {
            op: OpCode::Create,
            path: p.into(),
            data: None,
            acl: vec![Acl::new(31, "auth", "")],
            flags: 0,
            ttl: -1,
        })
    };
    let add_watch = |p: &str, mode: i32| {
        Request::AddWatch(AddWatchRequest {
            path: p.into(),
            mode,
        })
    };
    assert_eq!(h.reply(owner, &private("/sec")).err, 0);
    for conn in [anon, late] {
        assert_eq!(h.reply(conn, &add_watch("/", 1)).err, 0);
        assert_eq!(h.reply(conn, &add_watch("/sec", 0)).err, 0);
    }
    h.reply(late, &auth(b"user:pass"));

    // Unreadable node under an unreadable parent: nothing for `anon`.
    assert_eq!(h.reply(owner, &private("/sec/a")).err, 0);
    h.reply(owner, &set_data("/sec/a", -1));
    h.reply(owner, &set_data("/sec", -1));
    assert_eq!(h.events(anon), []);
    use event_type::*;
    let ev = |t, p: &str| (t, p.to_string());
    assert_eq!(
        h.events(late),
        [
            ev(NODE_CREATED, "/sec/a"),
            ev(NODE_CHILDREN_CHANGED, "/sec"),
            ev(NODE_DATA_CHANGED, "/sec/a"),
            ev(NODE_DATA_CHANGED, "/sec"),
        ],
        "the identity added after the watch counts"
    );

    // A readable node under the unreadable parent: its own events are delivered, the
    // parent's NodeChildrenChanged is not.
    h.create(owner, "/sec/open", 0);
    h.reply(owner, &delete("/sec/open", -1));
    assert_eq!(
        h.events(anon),
        [ev(NODE_CREATED, "/sec/open"), ev(NODE_DELETED, "/sec/open")]
    );
    h.reply(owner, &delete("/sec/a", -1));
    assert_eq!(h.events(anon), []);
    h.take(late);

    // Readable nodes: everything.
    h.create(owner, "/pub", 0);
    h.reply(owner, &set_data("/pub", -1));
    assert_eq!(
        h.events(anon),
        [ev(NODE_CREATED, "/pub"), ev(NODE_DATA_CHANGED, "/pub")]
    );

    // A one-shot watch set while readable is used up by an event it may no longer see.
    let (one, _, _) = h.session(30000);
    assert_eq!(h.reply(one, &get_data("/pub", true)).err, 0);
    let set_acl = |acl: Vec<Acl>| {
        Request::SetAcl(SetAclRequest {
            path: "/pub".into(),
            acl,
            version: -1,
        })
    };
    assert_eq!(
        h.reply(owner, &set_acl(vec![Acl::new(31, "auth", "")])).err,
        0
    );
    h.reply(owner, &set_data("/pub", -1));
    assert_eq!(h.reply(owner, &set_acl(Acl::open_unsafe())).err, 0);
    h.reply(owner, &set_data("/pub", -1));
    assert_eq!(h.events(one), [], "the watch fired, withheld, and is gone");
    assert_eq!(h.events(anon), [ev(NODE_DATA_CHANGED, "/pub")]);
}

#[test]
fn negotiated_timeout_never_below_one_tick() {
    // A core configured (directly, past `Config::validate`) with a zero minimum still
    // negotiates at least one tick; clients asking for 0 or less get the floor.
    let cfg = CoreConfig {
        min_session_timeout_ms: 0,
        ..config()
    };
    let mut h = Harness {
        core: Core::new(cfg, T0),
        now: T0,
        out: RecordingOutbox::default(),
        xid: 0,
    };
    for asked in [0, -5, 1, 1999] {
        let conn = h.open();
        let req = ConnectRequest {
            timeout: asked,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: Some(false),
            ..Default::default()
        };
        h.core
            .handshake(conn, jute::to_bytes(&req), h.now, &mut h.out);
        let frame = h.take(conn).remove(0);
        let resp: ConnectResponse = from_bytes(frame.slice(4..)).unwrap();
        assert_eq!(resp.timeout, 2000, "asked for {asked} ms");
    }
}

#[test]
fn long_child_lists_are_shared_by_replies_not_copied() {
    let (mut h, [a, b]) = Harness::with_sessions::<2>();
    h.create(a, "/p", 0);
    for i in 0..200 {
        h.create(a, &format!("/p/c-{i:04}"), 0);
    }
    let mut parts = RecordingOutbox::keeping_parts();
    let reads = [
        (a, children("/p", true)),
        (b, Request::GetChildren(path_watch("/p", false))),
    ];
    for (conn, req) in reads {
        h.xid += 1;
        let frame = req.to_frame(h.xid);
        h.core.request(conn, frame.slice(4..), h.now, &mut parts);
    }
    let [(ca, x), (cb, y)] = <[_; 2]>::try_from(parts.parts).expect("two replies");
    assert_eq!((ca, cb), (a, b));
    assert!(x.body.len() > 200 * 10, "the list is its own part");
    assert_eq!(
        x.body.as_ptr(),
        y.body.as_ptr(),
        "one list for both replies"
    );
    for f in [&x, &y] {
        let len = i32::from_be_bytes([f.head[0], f.head[1], f.head[2], f.head[3]]);
        assert_eq!(
            len as usize,
            f.len() - 4,
            "the length prefix covers every part"
        );
    }
    let with_stat: Children2Response = Decoded::parse(&x.into_bytes()).decode();
    assert_eq!(with_stat.children.len(), 200);
    assert_eq!(with_stat.stat.num_children, 200);
    let plain: ChildrenResponse = Decoded::parse(&y.into_bytes()).decode();
    assert_eq!(plain.children, with_stat.children);
    // Deletes cut their names out of the shared list; creates start it over.
    let mut want = with_stat.children;
    for (gone, created) in [("c-0000", None), ("c-0100", None), ("c-0199", Some("b"))] {
        if let Some(name) = created {
            h.create(a, &format!("/p/{name}"), 0);
            want.insert(0, name.to_string());
        }
        h.reply(a, &delete(&format!("/p/{gone}"), -1));
        want.retain(|n| n != gone);
        let now: Children2Response = h.reply(b, &children("/p", false)).decode();
        assert_eq!(now.children, want, "after deleting {gone}");
        assert_eq!(now.stat.num_children as usize, want.len());
    }
}
