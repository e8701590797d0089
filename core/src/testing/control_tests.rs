//! Core tests of the control plane's operations (expire, disconnect, reset, fault rules) and
//! of the two clocks, without sockets.

use bytes::Bytes;
use zkd_protocol::*;

use crate::testing::harness::*;
use crate::*;

fn rule(action: FaultAction) -> FaultRule {
    FaultRule {
        action,
        opcode: None,
        path_prefix: None,
        session: None,
        count: None,
    }
}

/// Sends a request at an explicit time on both clocks; returns the connection's frames.
fn call_at(h: &mut Harness, conn: ConnId, req: &Request, now: Now) -> Vec<Decoded> {
    h.xid += 1;
    let frame = req.to_frame(h.xid);
    h.core.request(conn, frame.slice(4..), now, &mut h.out);
    h.take(conn).iter().map(Decoded::parse).collect()
}

fn reconnect(h: &mut Harness, sid: i64, pw: &Bytes) -> Handshake {
    let c = h.open();
    h.handshake(c, &connect_request(sid, 30000, pw))
}

#[test]
fn expire_session_acts_like_a_timeout() {
    let mut h = Harness::new();
    let (a, sid, pw, w) = h.watched_ephemeral(30000, 30000);
    let report = h.core.sessions_report(h.now);
    assert_eq!(report.len(), 2);
    let mine = report.iter().find(|s| s.id == sid).unwrap();
    assert_eq!(
        (mine.ephemerals, mine.conn, mine.timeout_ms),
        (1, Some(a), 30000)
    );
    assert_eq!(
        report.iter().find(|s| s.id != sid).unwrap().watches,
        1,
        "the watcher's exists watch"
    );

    assert_eq!(h.core.expire_session(sid, h.now, &mut h.out), Ok(()));
    assert!(h.out.closed.contains(&a));
    assert!(h.take(a).is_empty(), "expiry sends nothing to the session");
    assert_eq!(
        h.events(w),
        [(event_type::NODE_DELETED, "/eph".to_string())]
    );
    assert_eq!(reconnect(&mut h, sid, &pw), Handshake::Closed);
    assert_eq!(
        h.core.expire_session(sid, h.now, &mut h.out),
        Err(SessionOpError::NoSuchSession)
    );
}

#[test]
fn disconnect_keeps_the_session() {
    let mut h = Harness::new();
    let (a, sid, pw) = h.session(30000);
    h.create(a, "/eph", 1);
    assert_eq!(h.core.disconnect_session(sid, &mut h.out), Ok(()));
    assert!(h.out.closed.contains(&a));
    assert_eq!(
        h.core.disconnect_session(sid, &mut h.out),
        Err(SessionOpError::NotConnected)
    );
    h.core.connection_closed(a);
    assert_eq!(reconnect(&mut h, sid, &pw), Handshake::Established);
    let report = h.core.sessions_report(h.now);
    assert_eq!(report[0].ephemerals, 1, "the ephemeral survived");
    assert_eq!(
        h.core.disconnect_session(12345, &mut h.out),
        Err(SessionOpError::NoSuchSession)
    );
}

#[test]
fn reset_leaves_only_zookeeper_and_sessions_keep_working() {
    let (mut h, [a, w]) = Harness::with_sessions();
    h.create_all(
        a,
        &[
            ("/app", 0),
            ("/app/deep", 0),
            ("/app/deep/er", 0),
            ("/eph", 1),
        ],
    );
    h.reply(w, &exists("/app/deep/er", true));
    let before = h.core.last_zxid();
    assert_eq!(h.core.reset(false, h.now, &mut h.out), 4);
    assert_eq!(h.core.last_zxid(), before + 1, "one transaction");
    assert_eq!(
        h.events(w),
        [(event_type::NODE_DELETED, "/app/deep/er".to_string())]
    );
    let kids = h.reply(a, &children("/", false));
    let kids: Children2Response = kids.decode();
    assert_eq!(kids.children, ["zookeeper"]);
    assert_eq!(h.reply(a, &exists("/zookeeper/quota", false)).err, 0);
    assert!(h
        .core
        .sessions_report(h.now)
        .iter()
        .all(|s| s.ephemerals == 0));
    assert_eq!(h.create(a, "/app", 0).err, 0, "sessions keep working");
    assert_eq!(h.core.reset(true, h.now, &mut h.out), 1);
    assert!(h.core.sessions_report(h.now).is_empty());
    assert!(h.out.closed.contains(&a) && h.out.closed.contains(&w));
}

#[test]
fn reset_slices_delete_deepest_first_one_transaction_each() {
    let (mut h, [a, w]) = Harness::with_sessions();
    h.create_all(
        a,
        &[
            ("/app", 0),
            ("/app/x", 0),
            ("/app/x/y", 0),
            ("/app/z", 0),
            ("/b", 0),
        ],
    );
    let req = Request::AddWatch(AddWatchRequest {
        path: "/".into(),
        mode: add_watch_mode::PERSISTENT_RECURSIVE,
    });
    assert_eq!(h.reply(w, &req).err, 0);
    let before = h.core.last_zxid();
    let mut slices = Vec::new();
    loop {
        match h.core.reset_slice(2, h.now, &mut h.out) {
            0 => break,
            n => slices.push(n),
        }
    }
    assert_eq!(slices, [2, 2, 1]);
    assert_eq!(h.core.last_zxid(), before + 3, "one transaction per slice");
    let deleted: Vec<String> = h
        .events(w)
        .into_iter()
        .filter(|(e, _)| *e == event_type::NODE_DELETED)
        .map(|(_, p)| p)
        .collect();
    assert_eq!(deleted.len(), 5);
    for (k, p) in deleted.iter().enumerate() {
        assert!(
            deleted[k + 1..]
                .iter()
                .all(|later| !later.starts_with(&format!("{p}/"))),
            "{p} deleted before its children: {deleted:?}"
        );
    }
    assert_eq!(h.core.reset_slice(2, h.now, &mut h.out), 0);
    assert_eq!(
        h.core.last_zxid(),
        before + 3,
        "nothing left: no transaction"
    );
    h.core.check_invariants().unwrap();
}

#[test]
fn fault_rules_match_and_count() {
    let mut h = Harness::new();
    let (a, sid, _) = h.session(30000);
    let id = h
        .core
        .add_fault(FaultRule {
            opcode: Some(OpCode::Create2 as i32),
            path_prefix: Some("/x".into()),
            count: Some(1),
            ..rule(FaultAction::Error(ErrorCode::ConnectionLoss.code()))
        })
        .unwrap();
    assert_eq!(h.create(a, "/other", 0).err, 0, "other paths pass");
    assert_eq!(h.create(a, "/x1", 0).err, ErrorCode::ConnectionLoss.code());
    assert_eq!(
        h.reply(a, &exists("/x1", false)).err,
        ErrorCode::NoNode.code(),
        "nothing applied"
    );
    assert_eq!(h.create(a, "/x1", 0).err, 0, "the rule is spent");
    let st = &h.core.faults()[0];
    assert_eq!((st.id, st.fired, st.remaining), (id, 1, Some(0)));
    // Pings are not matched by a rule without an opcode.
    h.core.clear_faults();
    h.core
        .add_fault(rule(FaultAction::Error(ErrorCode::ApiError.code())))
        .unwrap();
    assert_eq!(h.reply(a, &Request::Ping).err, 0);
    assert_eq!(h.reply(a, &get_data("/x1", false)).err, -100);
    h.core.clear_faults();
    // Session filter.
    h.core
        .add_fault(FaultRule {
            session: Some(sid + 1),
            ..rule(FaultAction::DropBefore)
        })
        .unwrap();
    assert_eq!(h.create(a, "/y", 0).err, 0, "another session's rule");
    h.core.clear_faults();
}

#[test]
fn drop_and_no_response_faults() {
    let (mut h, [a, w]) = Harness::with_sessions();
    h.reply(w, &exists("/after", true));
    for (prefix, action) in [
        ("/before", FaultAction::DropBefore),
        ("/after", FaultAction::DropAfter),
        ("/silent", FaultAction::NoResponse),
    ] {
        h.core
            .add_fault(FaultRule {
                path_prefix: Some(prefix.into()),
                count: Some(1),
                ..rule(action)
            })
            .unwrap();
    }

    assert!(h
        .call(a, &create_req(OpCode::Create, "/before", 0))
        .is_empty());
    assert!(h.out.closed.contains(&a));
    assert_eq!(
        h.reply(w, &exists("/before", false)).err,
        ErrorCode::NoNode.code()
    );

    let (b, _, _) = h.session(30000);
    assert!(
        h.call(b, &create_req(OpCode::Create, "/after", 0))
            .is_empty(),
        "no reply"
    );
    assert!(h.out.closed.contains(&b));
    assert_eq!(
        h.events(w),
        [(event_type::NODE_CREATED, "/after".to_string())],
        "applied, and others are notified"
    );

    let (c, _, _) = h.session(30000);
    assert!(h
        .call(c, &create_req(OpCode::Create, "/silent", 0))
        .is_empty());
    assert!(!h.out.closed.contains(&c), "the connection stays");
    assert_eq!(h.reply(c, &exists("/silent", false)).err, 0, "applied");
}

#[test]
fn delay_faults_reach_the_outbox_before_the_reply() {
    let (mut h, [a]) = Harness::with_sessions();
    h.core.add_fault(rule(FaultAction::Delay(250))).unwrap();
    let mut out = RecordingOutbox::new();
    let frame = get_data("/", false).to_frame(7);
    h.core.request(a, frame.slice(4..), h.now, &mut out);
    assert_eq!(out.log, [Recorded::Delayed(a, 250), Recorded::Sent(a)]);
}

/// The wall clock steps an hour forward and then an hour back while the session clock runs
/// steadily: sessions expire exactly when the session clock says, and only Stat times follow
/// the wall clock.
#[test]
fn wall_clock_steps_do_not_move_expiry() {
    let mut h = Harness::new();
    let hour = 3_600_000;
    let mono = T0;
    let (a, sid, _) = h.session(4000);
    let (w, _, _) = h.session(40000);
    h.create(a, "/eph", 1);
    let deadline = h.core.next_deadline().unwrap();
    assert!(deadline > mono + 4000 && deadline <= mono + 6000);

    // Wall clock jumps forward an hour: nothing expires, the new node's mtime is an hour on.
    let fwd = Now {
        mono: mono + 1000,
        wall: T0 + hour,
    };
    h.core.tick(fwd, &mut h.out);
    assert!(h.core.sessions_report(fwd).iter().any(|s| s.id == sid));
    let f = call_at(&mut h, w, &create_req(OpCode::Create2, "/n", 0), fwd);
    let stat = f.last().unwrap().decode::<Create2Response>().stat;
    assert_eq!(stat.mtime, T0 + hour);

    // Wall clock jumps back two hours: the session still expires on time.
    let back = |m: i64| Now {
        mono: m,
        wall: T0 - hour,
    };
    h.core.tick(back(deadline - 1), &mut h.out);
    assert!(
        h.core
            .sessions_report(back(deadline - 1))
            .iter()
            .any(|s| s.id == sid),
        "not early"
    );
    h.core.tick(back(deadline), &mut h.out);
    assert!(
        !h.core
            .sessions_report(back(deadline))
            .iter()
            .any(|s| s.id == sid),
        "not late"
    );
    assert!(h.out.closed.contains(&a));
}

/// TTL nodes expire on the session clock, not on their (wall-clock) mtime.
#[test]
fn ttl_runs_on_the_session_clock() {
    let mut h = Harness::new();
    let (c, _, _) = h.session(40000);
    let ttl = ttl_req("/ttl", 5000);
    assert_eq!(h.reply(c, &ttl).err, 0);
    // A wall clock a day ahead does not reap it.
    let day = 86_400_000;
    h.core.tick(
        Now {
            mono: T0 + 2000,
            wall: T0 + day,
        },
        &mut h.out,
    );
    assert_eq!(h.reply(c, &exists("/ttl", false)).err, 0);
    // A setData at mono T0+3000 restarts its TTL.
    call_at(
        &mut h,
        c,
        &set_data("/ttl", -1),
        Now {
            mono: T0 + 3000,
            wall: T0 - day,
        },
    );
    h.core.tick(
        Now {
            mono: T0 + 7000,
            wall: T0,
        },
        &mut h.out,
    );
    assert_eq!(h.reply(c, &exists("/ttl", false)).err, 0, "not early");
    h.core.tick(
        Now {
            mono: T0 + 8001,
            wall: T0,
        },
        &mut h.out,
    );
    assert_eq!(
        h.reply(c, &exists("/ttl", false)).err,
        ErrorCode::NoNode.code(),
        "reaped once the session clock passed mtime + ttl"
    );
}
