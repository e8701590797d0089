//! Quorum and epochs on the core with the virtual clock: nothing expires or is reaped
//! without a quorum, a regained quorum or a new leader restarts every session's deadline,
//! read-only members' local sessions keep expiring, and zxids carry the leader's epoch.

use std::net::SocketAddr;

use zkd_protocol::*;

use crate::testing::harness::*;
use crate::*;

impl Harness {
    fn advance_to(&mut self, at: i64) {
        self.now = at;
        self.core.tick(self.now, &mut self.out);
    }

    fn exists_from(&mut self, conn: ConnId, path: &str) -> bool {
        self.reply(conn, &exists(path, false)).err == 0
    }
}

#[test]
fn a_session_outlives_a_quorum_loss_and_gets_a_fresh_timeout_when_it_ends() {
    let mut h = Harness::new();
    let (a, sid, _) = h.session_on(1, 4000);
    h.create(a, "/eph", 1);
    let (watcher, _, _) = h.session_on(1, 40000);
    h.core.set_quorum(false, h.now);
    assert!(!h.core.has_quorum());
    // Ten seconds without a quorum: far past the 4 s timeout, nothing expires.
    let lost = h.now;
    for step in 1..=10 {
        h.advance_to(lost + step * 1000);
    }
    assert!(
        h.core.sessions.get(sid).is_some(),
        "no expiry without quorum"
    );
    assert!(
        h.core.next_deadline().is_none_or(|d| d > h.now),
        "no deadline left in the past while nothing may expire"
    );
    h.core.set_quorum(true, h.now);
    let back = h.now;
    // The deadline restarted at the quorum's return: 4 s (rounded up to the 2 s tick) on.
    h.advance_to(back + 3999);
    assert!(
        h.core.sessions.get(sid).is_some(),
        "fresh timeout after the quorum returned"
    );
    assert!(h.exists_from(watcher, "/eph"));
    h.advance_to(back + 6000);
    assert!(
        h.core.sessions.get(sid).is_none(),
        "expires once the fresh timeout passes"
    );
    assert!(
        !h.exists_from(watcher, "/eph"),
        "its ephemeral went with it"
    );
}

#[test]
fn read_only_local_sessions_keep_expiring_without_quorum() {
    let mut h = Harness::new();
    let (_, global, _) = h.session_on(1, 4000);
    h.core.set_quorum(false, h.now);
    let addr: SocketAddr = "127.0.0.1:5001".parse().unwrap();
    let conn = h
        .core
        .open_member_connection(addr, h.now, 1, Serving::ReadOnly)
        .unwrap();
    let req = ConnectRequest {
        read_only: Some(true),
        ..connect_request(0, 4000, &[0; 16])
    };
    assert_eq!(h.handshake(conn, &req), Handshake::Established);
    let resp: ConnectResponse = from_bytes(h.take(conn)[0].slice(4..)).unwrap();
    let local = resp.session_id;
    let start = h.now;
    assert!(h.core.next_deadline().is_some_and(|d| d <= start + 6000));
    h.advance_to(start + 6000);
    assert!(
        h.core.sessions.get(local).is_none(),
        "the local session expired"
    );
    assert!(
        h.core.sessions.get(global).is_some(),
        "the global one did not"
    );
}

#[test]
fn containers_and_ttl_nodes_wait_for_the_quorum() {
    let mut h = Harness::new();
    let (c, _, _) = h.session_on(1, 40000);
    h.reply(c, &create_req(OpCode::CreateContainer, "/box", 0));
    h.create(c, "/box/x", 0);
    h.reply(c, &delete("/box/x", -1));
    h.reply(c, &ttl_req("/ttl", 500));
    h.core.set_quorum(false, h.now);
    let lost = h.now;
    h.advance_to(lost + 5000);
    assert!(h.exists_from(c, "/box"), "no reaping without quorum");
    assert!(h.exists_from(c, "/ttl"));
    h.core.set_quorum(true, h.now);
    h.advance_to(h.now + 1000);
    h.advance_to(h.now + 1000);
    assert!(!h.exists_from(c, "/box"), "reaped once the quorum is back");
    assert!(!h.exists_from(c, "/ttl"));
}

#[test]
fn a_new_leader_restarts_every_deadline() {
    let mut h = Harness::new();
    let (_, sid, _) = h.session_on(1, 4000);
    h.advance_to(h.now + 3000);
    h.core.new_epoch(h.now);
    let elected = h.now;
    h.advance_to(elected + 3999);
    assert!(h.core.sessions.get(sid).is_some());
    h.advance_to(elected + 6000);
    assert!(h.core.sessions.get(sid).is_none());
}

#[test]
fn zxids_carry_the_epoch_and_the_counter_restarts_in_each() {
    let mut h = Harness::new();
    assert_eq!(h.core.epoch(), 0, "standalone: epoch 0");
    assert_eq!(h.core.new_epoch(h.now), 1);
    let (c, _, _) = h.session_on(1, 30000);
    assert_eq!(h.core.last_zxid(), 0x1_0000_0001, "createSession");
    let f = h.create(c, "/a", 0);
    assert_eq!(
        f.zxid, 0x1_0000_0002,
        "the first create: epoch 1, counter 2"
    );
    assert_eq!(h.core.new_epoch(h.now), 2);
    let f = h.create(c, "/b", 0);
    assert_eq!(
        f.zxid, 0x2_0000_0001,
        "a new leader: epoch 2, counter from 1"
    );
    assert_eq!(stat_of(&mut h, c, "/b").czxid, 0x2_0000_0001);
    assert_eq!(stat_of(&mut h, c, "/a").czxid, 0x1_0000_0002);
}

#[test]
fn a_member_lagging_by_transactions_counts_them_across_an_epoch() {
    let mut h = Harness::new();
    h.core.new_epoch(h.now);
    let (c, _, _) = h.session_on(1, 30000);
    h.core.set_member_lag(2, Lag::Txns(2), h.now, &mut h.out);
    h.create(c, "/a", 0);
    h.create(c, "/b", 0);
    h.core.new_epoch(h.now);
    let f = h.create(c, "/c", 0);
    assert_eq!(f.zxid, 0x2_0000_0001);
    h.core.tick(h.now, &mut h.out);
    // Recorded since the lag began: /a, /b, the new leader's zxid 0x200000000, /c.
    assert_eq!(
        h.core.member_zxid(2),
        0x1_0000_0003,
        "two behind: /b applied"
    );
    assert_eq!(h.core.member_behind(2), 2);
    assert_eq!(h.core.member_behind(1), 0);
}
