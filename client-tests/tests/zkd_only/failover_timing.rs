//! Failover on ZooKeeper's timing (`ElectionTiming::ZooKeeper`) through the wire protocol: a
//! leader cut off from its quorum keeps its clients until `syncLimit × tickTime` has passed,
//! a write sent to it meanwhile is never acknowledged (its client sees the connection drop)
//! and is absent after healing, the majority elects in a new epoch after the election's
//! time, and a stopped leader's followers drop their clients while they elect. On the manual
//! clock to the millisecond; on the real clock, measured against the configured ticks.

use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use zkd_protocol::Request;
use zkd_server::{ClockMode, Config, EnsembleConfig, Server};
use zkd_testkit::raw::{RawClient, Reply};

use crate::ensemble::{
    addrs, create, data_of, dropped, get_data, modes, move_to, read_only_session, session, set_data,
};

const WAIT: Duration = Duration::from_secs(10);

/// Three members on ZooKeeper's timing with `tick_ms` and `sync_limit`, the admin listener
/// on, sessions of up to a minute.
async fn timed(clock: ClockMode, tick_ms: u64, sync_limit: i32) -> Server {
    let e = EnsembleConfig::numbered(3, 0)
        .expect("three members")
        .with_zookeeper_timing(sync_limit);
    Server::start(Config {
        port: 0,
        ensemble: Some(e),
        admin_port: Some(0),
        clock,
        tick_time: Duration::from_millis(tick_ms),
        max_session_timeout: Some(Duration::from_secs(60)),
        ..Config::default()
    })
    .await
    .expect("ensemble starts")
}

fn advance(server: &Server, ms: u64) {
    server
        .advance_clock(Duration::from_millis(ms))
        .expect("manual clock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_leader_serves_until_sync_limit_passes_and_its_write_is_never_acknowledged() {
    // tickTime 100 ms, syncLimit 5: members notice after 500 ms.
    let server = timed(ClockMode::Manual, 100, 5).await;
    let a = addrs(&server);
    let c = session(a[0]).await;
    let made = c.call(&create("/p", 0)).await.expect("create");
    assert_eq!(made.err, 0);
    let writer = session(a[2]).await;
    let reader = session(a[2]).await;

    server.partition(&[&[3]]).expect("partition");
    // Nobody has noticed: the leader still leads and serves its clients.
    assert_eq!(modes(&server), ["follower", "follower", "leader"]);
    let pending = unanswered(&writer, &set_data("/p", b"lost")).await;
    advance(&server, 499);
    assert_eq!(modes(&server), ["follower", "follower", "leader"]);
    assert_eq!(
        data_of(&reader.call(&get_data("/p")).await.expect("a read")),
        b"v",
        "the cut-off leader still answers reads"
    );

    // syncLimit × tickTime after the cut the followers notice, drop their clients and
    // start electing; the leader notices at its next check, within a tick, steps down and
    // drops its clients: the write was never acknowledged (the client sees the connection
    // lost).
    advance(&server, 1);
    assert_eq!(modes(&server)[..2], ["looking", "looking"]);
    dropped(&c).await;
    advance(&server, 100);
    assert_eq!(modes(&server), ["looking", "looking", "looking"]);
    connection_lost(pending).await;
    dropped(&reader).await;

    // The election takes 370 ms from the followers' noticing; then member 2 leads, in a
    // new epoch.
    advance(&server, 269);
    assert_eq!(modes(&server), ["looking", "looking", "looking"]);
    advance(&server, 1);
    assert_eq!(modes(&server), ["follower", "leader", "looking"]);
    let c = move_to(&c, a[0], false).await;
    let w = c.call(&set_data("/p", b"new")).await.expect("write");
    assert_eq!(w.err, 0);
    assert!(w.zxid >> 32 > made.zxid >> 32, "a new epoch");

    // Two seconds after it stepped down, the cut-off member serves read-only clients what
    // it had; its own write is not there either.
    advance(&server, 1_730);
    assert_eq!(modes(&server), ["follower", "leader", "read-only"]);
    let ro = read_only_session(a[2]).await;
    assert_eq!(
        data_of(&ro.call(&get_data("/p")).await.expect("read")),
        b"v"
    );

    // Healed, member 3 follows member 2; the write sent to it is nowhere.
    server.heal().expect("heal");
    assert_eq!(modes(&server), ["follower", "leader", "follower"]);
    let back = session(a[2]).await;
    assert_eq!(
        data_of(&back.call(&get_data("/p")).await.expect("read")),
        b"new"
    );
    let on_two = move_to(&c, a[1], false).await;
    let stat = on_two.call(&get_data("/p")).await.expect("read");
    let body: zkd_protocol::GetDataResponse = stat.decode().expect("a body");
    assert_eq!(
        body.stat.version, 1,
        "one setData only: the lost one never ran"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_leaders_followers_drop_their_clients_while_they_elect() {
    let server = timed(ClockMode::Manual, 100, 5).await;
    let a = addrs(&server);
    let c = session(a[0]).await;
    assert_eq!(c.call(&create("/e", 1)).await.expect("create").err, 0);
    server.stop_member(3).await.expect("stop the leader");
    // The followers see their leader's connection close: they drop their clients and elect.
    dropped(&c).await;
    assert_eq!(modes(&server), ["looking", "looking", "stopped"]);
    assert!(
        RawClient::connect(a[0], 30_000).await.is_err(),
        "a looking member serves nobody"
    );
    advance(&server, 369);
    assert_eq!(modes(&server), ["looking", "looking", "stopped"]);
    advance(&server, 1);
    assert_eq!(modes(&server), ["follower", "leader", "stopped"]);
    // The session and its ephemeral survive the election.
    let c = move_to(&c, a[1], false).await;
    assert_eq!(c.call(&get_data("/e")).await.expect("read").err, 0);
    server.shutdown().await;
}

/// Polls the members' modes until `done` holds; the time since `from`.
async fn until(server: &Server, from: Instant, done: impl Fn(&[&str]) -> bool) -> Duration {
    let end = from + WAIT;
    loop {
        if done(&modes(server)) {
            return from.elapsed();
        }
        assert!(Instant::now() < end, "no change: {:?}", modes(server));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// On the real clock, with tickTime 100 ms and syncLimit 3: the leader steps down 300 ms
/// after the cut (plus up to a tick, its checks being once a tick) and the majority, which
/// noticed after 300 ms, leads 370 ms after that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_clock_step_down_and_election_take_the_configured_ticks() {
    let server = timed(ClockMode::Real, 100, 3).await;
    let a = addrs(&server);
    let on_leader = session(a[2]).await;
    let cut = Instant::now();
    server.partition(&[&[3]]).expect("partition");
    let noticed = until(&server, cut, |m| m[0] != "follower").await;
    let stepped_down = until(&server, cut, |m| m[2] != "leader").await;
    dropped(&on_leader).await;
    let elected = until(&server, cut, |m| m[1] == "leader").await;
    eprintln!(
        "zkd, tickTime 100 ms, syncLimit 3: followers noticed after {} ms, the leader stepped \
         down after {} ms, new leader after {} ms",
        noticed.as_millis(),
        stepped_down.as_millis(),
        elected.as_millis()
    );
    let ms = |d: Duration| d.as_millis() as u64;
    assert!(
        (295..380).contains(&ms(noticed)),
        "noticed after {noticed:?}"
    );
    assert!(
        (300..480).contains(&ms(stepped_down)),
        "step-down after {stepped_down:?}"
    );
    assert!(
        (360..460).contains(&(ms(elected) - ms(noticed))),
        "election took {:?}",
        elected - noticed
    );
    server.shutdown().await;
}

/// Sends `req` on `c` and insists that no answer comes within 300 ms; the pending answer.
async fn unanswered(c: &RawClient, req: &Request) -> oneshot::Receiver<Reply> {
    let mut pending = c.send(req).await.expect("the request is sent");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut pending)
            .await
            .is_err(),
        "{req:?} was answered"
    );
    pending
}

/// Insists that `pending` ends without an answer: the connection was lost.
async fn connection_lost(pending: oneshot::Receiver<Reply>) {
    let end = tokio::time::timeout(WAIT, pending)
        .await
        .expect("the pending request ends");
    assert!(end.is_err(), "answered: {end:?}");
}

/// Whether `/path` exists, as `c` reads it.
async fn exists(c: &RawClient, path: &str) -> bool {
    c.call(&get_data(path)).await.expect("a read").err == 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_way_cuts_decide_whether_a_followers_write_commits_and_what_it_reads() {
    // Member 1 does not hear leader 3: its client's write reaches the leader and commits,
    // but the reply, which would come with the commit, never comes; after syncLimit ×
    // tickTime member 1 drops its clients, and the write is there.
    let server = timed(ClockMode::Manual, 100, 5).await;
    let a = addrs(&server);
    let on_one = session(a[0]).await;
    let on_two = session(a[1]).await;
    server.cut_one_way(&[(3, 1)]).expect("a cut");
    let pending = unanswered(&on_one, &create("/w", 0)).await;
    assert!(exists(&on_two, "/w").await, "the write committed");
    advance(&server, 500);
    connection_lost(pending).await;
    assert_eq!(modes(&server), ["looking", "follower", "leader"]);
    server.heal().expect("heal");
    server.shutdown().await;

    // Leader 3 does not hear member 1: member 1 applies every commit, but its client's write
    // waits, unexecuted, and is gone with the connection when member 1 gives up.
    let server = timed(ClockMode::Manual, 100, 5).await;
    let a = addrs(&server);
    let on_one = session(a[0]).await;
    let reader = session(a[0]).await;
    let on_two = session(a[1]).await;
    server.cut_one_way(&[(1, 3)]).expect("a cut");
    let pending = unanswered(&on_one, &create("/held", 0)).await;
    assert!(!exists(&on_two, "/held").await, "the write ran");
    assert_eq!(
        on_two.call(&create("/fresh", 0)).await.expect("write").err,
        0
    );
    assert!(
        exists(&reader, "/fresh").await,
        "member 1 reads the commits"
    );
    advance(&server, 500);
    connection_lost(pending).await;
    server.heal().expect("heal");
    assert!(!exists(&on_two, "/held").await, "the held write never ran");
    server.shutdown().await;
}
