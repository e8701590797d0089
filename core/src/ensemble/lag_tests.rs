//! Lagging members on the core with the virtual clock: stale reads, sync, watches firing on
//! catch-up, write replies after the member applied them (per-session FIFO), stalls, the
//! connect guard, and replicas that end equal to the main tree.

use std::collections::HashMap;

use bytes::Bytes;
use zkd_protocol::*;

use crate::testing::harness::*;
use crate::*;

const LAGGING: MemberId = 2;

fn sync_req(path: &str) -> Request {
    Request::Sync(SyncRequest {
        path: Some(path.into()),
    })
}

fn set_to(path: &str, data: &'static [u8]) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: Some(Bytes::from_static(data)),
        version: -1,
    })
}

fn data_of(f: &Decoded) -> Bytes {
    assert_eq!(f.err, 0, "{f:?}");
    f.decode::<GetDataResponse>().data.unwrap_or_default()
}

impl Harness {
    fn lag(&mut self, member: MemberId, lag: Lag) {
        self.core
            .set_member_lag(member, lag, self.now, &mut self.out);
    }

    fn advance(&mut self, ms: i64) {
        self.now += ms;
        self.core.tick(self.now, &mut self.out);
    }

    /// Sends a request without collecting anything.
    fn send(&mut self, conn: ConnId, req: &Request) -> i32 {
        self.xid += 1;
        let frame = req.to_frame(self.xid);
        self.core
            .request(conn, frame.slice(4..), self.now, &mut self.out);
        self.xid
    }

    fn frames(&mut self, conn: ConnId) -> Vec<Decoded> {
        self.take(conn).iter().map(Decoded::parse).collect()
    }
}

/// A writer on member 1 and a reader on the lagging member, /x = "old".
fn setup(lag: Lag) -> (Harness, ConnId, ConnId) {
    let mut h = Harness::new();
    let (writer, _, _) = h.session_on(1, 30000);
    let (reader, _, _) = h.session_on(LAGGING, 30000);
    h.reply(writer, &create_req(OpCode::Create, "/x", 0));
    h.reply(writer, &set_to("/x", b"old"));
    h.lag(LAGGING, lag);
    (h, writer, reader)
}

#[test]
fn stale_read_without_sync_new_value_with_sync() {
    for lag in [Lag::Ms(60_000), Lag::Txns(100), Lag::Stalled] {
        let (mut h, writer, reader) = setup(lag);
        let before = h.core.last_zxid();
        let w = h.reply(writer, &set_to("/x", b"new"));
        assert_eq!(w.zxid, before + 1);
        let r = h.reply(reader, &get_data("/x", false));
        assert_eq!(data_of(&r), "old", "{lag:?}");
        assert_eq!(r.zxid, before, "a read carries the member's zxid");
        if lag == Lag::Stalled {
            // A stalled member answers a sync only once it applies again.
            assert!(h.call(reader, &sync_req("/x")).is_empty());
            h.lag(LAGGING, Lag::Lockstep);
            let f = h.frames(reader);
            assert_eq!((f.len(), f[0].zxid), (1, w.zxid));
        } else {
            let s = h.reply(reader, &sync_req("/x"));
            assert_eq!((s.err, s.zxid), (0, w.zxid), "{lag:?}");
        }
        let r = h.reply(reader, &get_data("/x", false));
        assert_eq!(data_of(&r), "new", "{lag:?}");
        // On the leader side nothing changed: the writer read its own write all along.
        assert_eq!(data_of(&h.reply(writer, &get_data("/x", false))), "new");
        h.core.replica_matches_main(LAGGING).unwrap();
    }
}

#[test]
fn lockstep_members_read_the_main_tree() {
    let (mut h, writer, reader) = setup(Lag::Lockstep);
    h.reply(writer, &set_to("/x", b"new"));
    assert_eq!(data_of(&h.reply(reader, &get_data("/x", false))), "new");
    assert_eq!(h.core.lag_log_len(), 0);
    assert_eq!(h.core.member_zxid(LAGGING), h.core.last_zxid());
}

#[test]
fn watches_fire_when_the_member_catches_up_in_order() {
    let (mut h, writer, reader) = setup(Lag::Ms(500));
    h.reply(reader, &get_data("/x", true));
    h.reply(reader, &children("/", true));
    h.reply(reader, &exists("/y", true));
    h.advance(10);
    let set = h.reply(writer, &set_to("/x", b"new")).zxid;
    h.advance(10);
    let created = h.reply(writer, &create_req(OpCode::Create, "/y", 0)).zxid;
    assert_eq!(h.core.next_deadline(), Some(h.now - 10 + 500));
    h.advance(489);
    assert!(h.frames(reader).is_empty(), "nothing applied yet");
    assert_eq!(data_of(&h.reply(reader, &get_data("/x", false))), "old");
    h.advance(1);
    let f = h.frames(reader);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].event(), (event_type::NODE_DATA_CHANGED, "/x".into()));
    assert_eq!(f[0].zxid, set);
    assert_eq!(h.core.member_zxid(LAGGING), set);
    h.advance(10);
    let f = h.frames(reader);
    let events: Vec<_> = f.iter().map(|f| (f.event(), f.zxid)).collect();
    assert_eq!(
        events,
        [
            ((event_type::NODE_CREATED, "/y".into()), created),
            ((event_type::NODE_CHILDREN_CHANGED, "/".into()), created),
        ]
    );
    h.core.replica_matches_main(LAGGING).unwrap();
}

#[test]
fn own_write_is_answered_after_the_member_applied_it_fifo() {
    let (mut h, _writer, reader) = setup(Lag::Ms(100));
    h.reply(reader, &get_data("/x", true));
    let set = h.send(reader, &set_to("/x", b"mine"));
    let read = h.send(reader, &get_data("/x", false));
    let ping = h.send(reader, &Request::Ping);
    assert!(
        h.frames(reader).is_empty(),
        "the write waits, and what follows it"
    );
    h.advance(99);
    assert!(h.frames(reader).is_empty());
    h.advance(1);
    let f = h.frames(reader);
    assert_eq!(f.len(), 4, "{f:?}");
    assert_eq!(f[0].event(), (event_type::NODE_DATA_CHANGED, "/x".into()));
    assert_eq!((f[1].xid, f[1].err), (set, 0));
    assert_eq!(f[2].xid, read);
    assert_eq!(data_of(&f[2]), "mine", "read-your-writes within a session");
    assert_eq!(f[3].xid, xid::PING);
    let _ = ping;
}

#[test]
fn txns_lag_trails_by_k_and_own_writes_catch_up() {
    let (mut h, writer, reader) = setup(Lag::Txns(2));
    let base = h.core.last_zxid();
    for v in [&b"1"[..], b"2", b"3"] {
        let req = Request::SetData(SetDataRequest {
            path: "/x".into(),
            data: Some(Bytes::copy_from_slice(v)),
            version: -1,
        });
        h.reply(writer, &req);
    }
    assert_eq!(h.core.member_zxid(LAGGING), base + 1);
    assert_eq!(data_of(&h.reply(reader, &get_data("/x", false))), "1");
    let own = h.reply(reader, &create_req(OpCode::Create, "/mine", 0));
    assert_eq!(own.err, 0);
    assert_eq!(h.core.member_zxid(LAGGING), own.zxid);
    assert_eq!(data_of(&h.reply(reader, &get_data("/x", false))), "3");
    h.core.replica_matches_main(LAGGING).unwrap();
}

#[test]
fn stalled_member_holds_writes_until_released() {
    let (mut h, writer, reader) = setup(Lag::Stalled);
    let w = h.send(reader, &set_to("/x", b"mine"));
    let r = h.send(reader, &get_data("/x", false));
    h.reply(writer, &create_req(OpCode::Create, "/other", 0));
    for _ in 0..10 {
        // Waiting requests count as the client being heard from: no expiry.
        h.advance(20_000);
        h.send(reader, &Request::Ping);
    }
    assert!(h.frames(reader).is_empty());
    h.lag(LAGGING, Lag::Lockstep);
    let f = h.frames(reader);
    assert_eq!(f.iter().map(|f| f.xid).collect::<Vec<_>>()[..2], [w, r]);
    assert_eq!(f.len(), 12);
    assert_eq!(data_of(&f[1]), "mine");
    assert_eq!(h.core.lag_log_len(), 0);
}

#[test]
fn a_member_refuses_a_client_that_saw_newer_state() {
    let (mut h, writer, _reader) = setup(Lag::Stalled);
    let (sid, passwd) = {
        let (conn, sid, passwd) = h.session_on(1, 30000);
        h.core.connection_closed(conn);
        (sid, passwd)
    };
    let seen = h.reply(writer, &set_to("/x", b"new")).zxid;
    let connect = |h: &mut Harness, member| {
        let conn = h.open_on(member);
        let req = ConnectRequest {
            last_zxid_seen: seen,
            timeout: 30000,
            session_id: sid,
            passwd: passwd.clone(),
            read_only: Some(false),
            ..Default::default()
        };
        let r = h
            .core
            .handshake(conn, jute::to_bytes(&req), h.now, &mut h.out);
        (conn, r)
    };
    let (conn, r) = connect(&mut h, LAGGING);
    assert_eq!(r, Handshake::Closed);
    assert!(h.out.closed.contains(&conn));
    assert!(
        h.take(conn).is_empty(),
        "no ConnectResponse: the client tries another"
    );
    assert_eq!(connect(&mut h, 1).1, Handshake::Established);
    h.lag(LAGGING, Lag::Txns(0));
    assert_eq!(connect(&mut h, LAGGING).1, Handshake::Established);
}

#[test]
fn replica_replays_every_kind_of_change_exactly() {
    let (mut h, writer, reader) = setup(Lag::Txns(1_000_000));
    let (eph, _, _) = h.session_on(1, 30000);
    h.reply(
        reader,
        &Request::AddWatch(AddWatchRequest {
            path: "/".into(),
            mode: add_watch_mode::PERSISTENT_RECURSIVE,
        }),
    );
    let mut expected = Vec::new();
    let mut step = |h: &mut Harness, conn, req: Request| {
        let f = h.reply(conn, &req);
        expected.push(f.err);
    };
    step(&mut h, writer, create_req(OpCode::Create, "/a", 0));
    step(&mut h, writer, create_req(OpCode::Create, "/a/s-", 2));
    step(&mut h, writer, create_req(OpCode::CreateContainer, "/c", 4));
    step(&mut h, writer, create_req(OpCode::Create, "/c/k", 0));
    step(&mut h, writer, delete("/c/k", -1));
    step(&mut h, eph, create_req(OpCode::Create, "/a/e", 1));
    step(&mut h, writer, create_req(OpCode::Create, "/a", 0));
    step(&mut h, writer, delete("/x", 7));
    step(
        &mut h,
        writer,
        Request::SetAcl(SetAclRequest {
            path: "/a".into(),
            acl: vec![Acl::new(perms::ALL, "world", "anyone")],
            version: -1,
        }),
    );
    let ops = vec![
        MultiOp::Create(Create {
            op: OpCode::Create,
            path: "/m".into(),
            data: None,
            acl: Acl::open_unsafe(),
            flags: 0,
            ttl: -1,
        }),
        MultiOp::Create(Create {
            op: OpCode::Create,
            path: "/m/n".into(),
            data: Some(Bytes::from_static(b"d")),
            acl: Acl::open_unsafe(),
            flags: 0,
            ttl: -1,
        }),
        MultiOp::Delete(DeleteRequest {
            path: "/m/n".into(),
            version: -1,
        }),
        MultiOp::SetData(SetDataRequest {
            path: "/x".into(),
            data: None,
            version: -1,
        }),
    ];
    step(&mut h, writer, Request::Multi(ops.clone()));
    step(&mut h, writer, Request::Multi(ops));
    step(&mut h, eph, Request::CloseSession);
    assert_eq!(expected[6], ErrorCode::NodeExists.code());
    assert_eq!(expected[7], ErrorCode::BadVersion.code());
    // The reaper deletes the container that had a child.
    h.advance(1000);
    assert!(h.core.replica_matches_main(LAGGING).is_err());
    assert!(h.frames(reader).is_empty());
    let head = h.core.last_zxid();
    let mut events = h.call(reader, &sync_req("/"));
    assert_eq!(events.pop().map(|f| f.zxid), Some(head));
    h.core.replica_matches_main(LAGGING).unwrap();
    assert!(events.len() > 10, "{events:?}");
    assert!(events.windows(2).all(|w| w[0].zxid <= w[1].zxid));
    assert!(events
        .iter()
        .any(|f| f.event() == (event_type::NODE_DELETED, "/c".into())));
    assert_eq!(h.core.lag_log_len(), 0, "applied history is dropped");
}

/// Random programs over three members (one in step, one trailing by transactions, one by
/// time): every connection's replies come in request order with zxids that never go back,
/// and after a sync each replica equals the main tree.
#[test]
fn random_programs_keep_fifo_monotonic_zxids_and_exact_replicas() {
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for _program in 0..20 {
        let mut h = Harness::new();
        let conns: Vec<ConnId> = [1, 2, 3, 1, 2, 3]
            .into_iter()
            .map(|m| h.session_on(m, 30000).0)
            .collect();
        h.lag(2, Lag::Txns(1 + next(4)));
        h.lag(3, Lag::Ms(1 + next(200)));
        let paths = ["/a", "/a/b", "/c", "/a/b/d"];
        let mut sent: HashMap<ConnId, Vec<i32>> = HashMap::new();
        for _ in 0..300 {
            let conn = conns[next(conns.len() as u64) as usize];
            let p = paths[next(paths.len() as u64) as usize];
            let req = match next(8) {
                0 => create_req(OpCode::Create, p, next(4) as i32),
                1 => delete(p, -1),
                2 => set_to(p, b"z"),
                3 => children(p, next(2) == 0),
                4 => exists(p, next(2) == 0),
                5 => sync_req(p),
                6 => {
                    h.advance(next(100) as i64);
                    continue;
                }
                _ => get_data(p, next(2) == 0),
            };
            let xid = h.send(conn, &req);
            sent.entry(conn).or_default().push(xid);
        }
        // Writes waiting behind writes each wait out the lag in turn.
        // (25 s in all: no session reaches its 30 s timeout.)
        for _ in 0..100 {
            h.advance(250);
        }
        for &conn in &conns {
            let xid = h.send(conn, &sync_req("/"));
            sent.entry(conn).or_default().push(xid);
        }
        for m in [2, 3] {
            h.core.replica_matches_main(m).unwrap_or_else(|e| {
                panic!(
                    "member {m} at {} of {}: {e}",
                    h.core.member_zxid(m),
                    h.core.last_zxid()
                )
            });
        }
        for &conn in &conns {
            let frames = h.frames(conn);
            let replies: Vec<&Decoded> = frames.iter().filter(|f| f.xid != -1).collect();
            let xids: Vec<i32> = replies.iter().map(|f| f.xid).collect();
            assert_eq!(xids, sent[&conn], "replies in request order");
            let zxids: Vec<i64> = frames.iter().map(|f| f.zxid).collect();
            assert!(
                zxids.windows(2).all(|w| w[0] <= w[1]),
                "zxids went back on one connection: {zxids:?}"
            );
        }
        h.core.check_invariants().unwrap();
    }
}

#[test]
fn history_kept_for_a_stalled_member_is_bounded() {
    let (mut h, writer, reader) = setup(Lag::Stalled);
    h.reply(reader, &get_data("/x", true));
    for _ in 0..200 {
        h.reply(writer, &set_to("/x", b"v"));
    }
    assert!(h.core.lag_log_len() <= 64, "{}", h.core.lag_log_len());
    let behind = h.core.last_zxid() - h.core.member_zxid(LAGGING);
    assert!((1..=64).contains(&behind), "{behind}");
    // Moved forward by force, the member fired its watch in order.
    let f = h.frames(reader);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].event(), (event_type::NODE_DATA_CHANGED, "/x".into()));
    h.lag(LAGGING, Lag::Lockstep);
    assert_eq!(h.core.lag_log_len(), 0);
}

/// The history is bounded in bytes too: big values written while a member is stalled move it
/// forward long before the count of transactions would.
#[test]
fn history_kept_for_a_stalled_member_is_bounded_in_bytes() {
    let (mut h, writer, reader) = setup(Lag::Stalled);
    static BIG: [u8; 4096] = [7; 4096];
    for _ in 0..20 {
        h.reply(writer, &set_to("/x", &BIG));
    }
    // At most 16 KiB of history: four values of 4 KiB and their bookkeeping, not twenty.
    assert!(h.core.lag_log_len() <= 4, "{}", h.core.lag_log_len());
    let r = h.reply(reader, &get_data("/x", false));
    assert_eq!(data_of(&r).len(), BIG.len(), "the member was moved forward");
    h.lag(LAGGING, Lag::Lockstep);
    assert_eq!(h.core.lag_log_len(), 0);
}

#[test]
fn writes_through_a_member_that_reaches_no_quorum_wait_unexecuted() {
    let (mut h, writer, reader) = setup(Lag::Stalled);
    h.core
        .set_member_holding(LAGGING, true, false, h.now, &mut h.out);
    let w = h.send(reader, &set_to("/x", b"held"));
    let r = h.send(reader, &get_data("/x", false));
    assert!(
        h.frames(reader).is_empty(),
        "the write waits, the read behind it"
    );
    assert_eq!(data_of(&h.reply(writer, &get_data("/x", false))), "old");
    // Reaching a leader again, the member runs what it held, in order.
    h.core
        .set_member_holding(LAGGING, false, true, h.now, &mut h.out);
    h.lag(LAGGING, Lag::Lockstep);
    let f = h.frames(reader);
    assert_eq!(f.iter().map(|f| f.xid).collect::<Vec<_>>(), [w, r]);
    assert_eq!(data_of(&f[1]), "held");
    // Dropping its clients instead, what it held never runs.
    h.core
        .set_member_holding(LAGGING, true, false, h.now, &mut h.out);
    h.send(reader, &set_to("/x", b"lost"));
    h.send(reader, &sync_req("/x"));
    h.core
        .set_member_holding(LAGGING, false, false, h.now, &mut h.out);
    assert!(h.frames(reader).is_empty());
    assert_eq!(data_of(&h.reply(writer, &get_data("/x", false))), "held");
    // A read goes on from the member's view while it holds writes.
    h.core
        .set_member_holding(LAGGING, true, false, h.now, &mut h.out);
    let (other, _, _) = h.session_on(LAGGING, 30000);
    assert_eq!(data_of(&h.reply(other, &get_data("/x", false))), "held");
}
