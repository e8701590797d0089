//! The simulated ensemble through the wire protocol: members with their own listeners and
//! modes, sessions moving between members, stopping members and the leader, elections by
//! newest zxid then highest id, epochs in zxids and file names, session time that stands still
//! without quorum, quorum loss with and without read-only mode, observers (serving clients,
//! never voting or leading, not counting for the quorum), and the membership in
//! `/zookeeper/config`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkd_protocol::{
    Acl, ConnectRequest, Create, ErrorCode, OpCode, PathWatchRequest, Request, SetDataRequest,
};
use zkd_server::{Config, EnsembleConfig, Server};
use zkd_testkit::raw::{RawClient, Reply};

use crate::admin;

const WAIT: Duration = Duration::from_secs(10);

async fn ensemble(read_only: bool) -> Server {
    with_observers(3, 0, read_only).await
}

/// `voters` voting members, then `observers` observers, with the admin listener.
async fn with_observers(voters: u64, observers: u64, read_only: bool) -> Server {
    let mut e = EnsembleConfig::numbered(voters + observers, 0)
        .and_then(|e| e.with_observers(observers))
        .expect("an ensemble");
    e.read_only = read_only;
    Server::start(Config {
        port: 0,
        ensemble: Some(e),
        admin_port: Some(0),
        ..Config::default()
    })
    .await
    .expect("ensemble starts")
}

/// A session of 30 s on the member listening at `addr`.
pub(crate) async fn session(addr: SocketAddr) -> RawClient {
    RawClient::connect(addr, 30_000)
        .await
        .unwrap_or_else(|e| panic!("a session on {addr}: {e}"))
}

/// Sends `req` on `c` and insists that it succeeds; returns the reply.
async fn succeeds(c: &RawClient, req: &Request) -> Reply {
    let r = c.call(req).await.unwrap_or_else(|e| panic!("{req:?}: {e}"));
    assert_eq!(r.err, 0, "{req:?}");
    r
}

pub(crate) fn addrs(server: &Server) -> Vec<SocketAddr> {
    let members = server.members().expect("an ensemble");
    members.iter().map(|m| m.client_addr).collect()
}

/// The client address of member `id` of an embedded ensemble.
pub fn member_addr(server: &Server, id: u64) -> SocketAddr {
    server
        .members()
        .expect("members")
        .iter()
        .find(|m| m.id == id)
        .map(|m| m.client_addr)
        .expect("the member")
}

async fn word(addr: SocketAddr, w: &'static str) -> String {
    tokio::task::spawn_blocking(move || zkd_testkit::oracle::four_letter_word(addr, w))
        .await
        .expect("word thread")
        .unwrap_or_else(|e| panic!("{w} on {addr}: {e}"))
}

/// Each member's mode as `/zkd/members` reports it, in id order.
pub(crate) fn modes(server: &Server) -> Vec<&'static str> {
    let members = server.members().expect("members");
    members.iter().map(|m| m.mode.as_str()).collect()
}

/// Whether each member is cut off by a partition, in id order.
pub fn cut_flags(server: &Server) -> Vec<bool> {
    let members = server.members().expect("members");
    members.iter().map(|m| m.cut).collect()
}

/// Fails naming the first of `lines` that `report` does not contain.
fn has_lines(report: &str, lines: &[&str]) {
    for line in lines {
        assert!(report.contains(line), "{line:?} missing:\n{report}");
    }
}

/// A new session on `addr` asked for with the read-only flag.
pub(crate) async fn read_only_session(addr: SocketAddr) -> RawClient {
    let passwd = Bytes::from_static(&[0; 16]);
    tokio::time::timeout(WAIT, RawClient::handshake(addr, 0, passwd, 30_000, 0, true))
        .await
        .expect("handshake in time")
        .expect("a read-only session")
}

fn mode_line(srvr: &str) -> &str {
    srvr.lines()
        .find(|l| l.starts_with("Mode: "))
        .unwrap_or("<no Mode line>")
}

pub(crate) fn create(path: &str, flags: i32) -> Request {
    Request::Create(Create {
        op: OpCode::Create,
        path: path.to_string(),
        data: Some(Bytes::from_static(b"v")),
        acl: Acl::open_unsafe(),
        flags,
        ttl: -1,
    })
}

pub(crate) fn get_data(path: &str) -> Request {
    Request::GetData(PathWatchRequest {
        path: path.to_string(),
        watch: false,
    })
}

fn watch_data(path: &str) -> Request {
    Request::GetData(PathWatchRequest {
        path: path.to_string(),
        watch: true,
    })
}

pub(crate) fn set_data(path: &str, data: &'static [u8]) -> Request {
    Request::SetData(SetDataRequest {
        path: path.to_string(),
        data: Some(Bytes::from_static(data)),
        version: -1,
    })
}

/// Tries to move `c`'s session to `addr` (asking for read-only mode or not).
pub(crate) async fn try_move(
    c: &RawClient,
    addr: SocketAddr,
    read_only: bool,
) -> Result<RawClient, zkd_testkit::raw::ClientError> {
    tokio::time::timeout(
        WAIT,
        RawClient::handshake(
            addr,
            c.session_id,
            c.passwd.clone(),
            30_000,
            c.last_zxid(),
            read_only,
        ),
    )
    .await
    .expect("handshake in time")
}

/// Moves `c`'s session to `addr` (asking for read-only mode or not).
pub(crate) async fn move_to(c: &RawClient, addr: SocketAddr, read_only: bool) -> RawClient {
    try_move(c, addr, read_only)
        .await
        .unwrap_or_else(|e| panic!("session moves to {addr}: {e}"))
}

/// Sends a ConnectRequest and returns every byte the server sends before closing (bounded).
async fn raw_handshake(addr: SocketAddr, session_id: i64, passwd: Bytes, ro: bool) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout: 30_000,
        session_id,
        passwd,
        read_only: Some(ro),
    };
    s.write_all(&zkd_protocol::frame::record_frame(&req))
        .await
        .expect("send");
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut out))
        .await
        .expect("the server closes in time")
        .expect("read");
    out
}

/// Waits until `c`'s connection is closed by the server.
pub(crate) async fn dropped(c: &RawClient) {
    let gone = tokio::time::timeout(WAIT, async {
        loop {
            if c.call(&Request::Ping).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "the connection should have been dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_listen_on_their_own_ports_and_report_their_modes() {
    let server = ensemble(true).await;
    let a = addrs(&server);
    assert_eq!(a.len(), 3);
    assert_eq!(server.local_addr(), a[0]);
    // Equally up to date, the highest id wins the first election, as in ZooKeeper.
    for (addr, mode) in a.iter().zip(["follower", "follower", "leader"]) {
        let srvr = word(*addr, "srvr").await;
        assert_eq!(mode_line(&srvr), format!("Mode: {mode}"), "{srvr}");
        assert_eq!(word(*addr, "isro").await, "rw");
    }
    let mntr = word(a[2], "mntr").await;
    has_lines(
        &mntr,
        &[
            "zk_server_state\tleader",
            "zk_synced_followers\t2",
            "zk_learners\t2",
        ],
    );
    // A client on member 2 counts there only.
    let c = session(a[1]).await;
    let on = |srvr: String| srvr.contains("Connections: 2\n");
    assert!(on(word(a[1], "srvr").await), "member 2 sees its client");
    // The earlier four-letter-word connections to member 3 may take a moment to be let go
    // of, so it may count one of them besides the srvr connection itself for a while.
    let mut other = word(a[2], "srvr").await;
    for _ in 0..50 {
        if !on(other.clone()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        other = word(a[2], "srvr").await;
    }
    assert!(!on(other), "member 3 does not");
    // getConfig is getData of /zookeeper/config.
    let config = c
        .call(&get_data("/zookeeper/config"))
        .await
        .expect("config");
    assert_eq!(config.err, 0);
    let expected: String = a
        .iter()
        .enumerate()
        .map(|(i, addr)| {
            format!(
                "server.{}=127.0.0.1:{}:{}:participant;127.0.0.1:{}\n",
                i + 1,
                2888 + i,
                3888 + i,
                addr.port()
            )
        })
        .collect::<String>()
        + "version=0";
    let body = config.body.as_ref();
    assert!(
        body.windows(expected.len())
            .any(|w| w == expected.as_bytes()),
        "{:?}",
        String::from_utf8_lossy(body)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_move_between_members_and_survive_stopping_the_member_and_the_leader() {
    let server = ensemble(true).await;
    let a = addrs(&server);
    let c = session(a[2]).await;
    assert_eq!(
        c.session_id >> 56,
        3,
        "the creating member's id leads the session id"
    );
    succeeds(&c, &create("/eph", 1)).await;

    // Member 3 leads; when it stops, member 2 (the highest remaining id) does.
    server.stop_member(3).await.expect("stop member 3");
    dropped(&c).await;
    assert!(
        TcpStream::connect(a[2]).await.is_err(),
        "member 3's port is closed"
    );
    let c = move_to(&c, a[0], false).await;
    assert_eq!(
        c.call(&get_data("/eph")).await.expect("get").err,
        0,
        "ephemeral kept"
    );

    assert_eq!(mode_line(&word(a[1], "srvr").await), "Mode: leader");
    server.start_member(3).await.expect("start member 3");
    assert_eq!(mode_line(&word(a[2], "srvr").await), "Mode: follower");

    // The leader goes again: member 3, back and as up to date as member 1, has the higher
    // id. Member 1's clients stay.
    server.stop_member(2).await.expect("stop the leader");
    assert_eq!(mode_line(&word(a[2], "srvr").await), "Mode: leader");
    succeeds(&c, &get_data("/eph")).await;
    succeeds(&c, &create("/after", 0)).await;

    server.start_member(2).await.expect("start member 2");
    assert_eq!(modes(&server), ["follower", "follower", "leader"]);
    assert_eq!(mode_line(&word(a[1], "srvr").await), "Mode: follower");
    let c = move_to(&c, a[1], false).await;
    succeeds(&c, &get_data("/after")).await;
    assert!(server.stop_member(9).await.is_err(), "no member 9");
    assert!(server.start_member(3).await.is_err(), "member 3 runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_loss_serves_read_only_clients_until_quorum_returns() {
    let server = ensemble(true).await;
    let a = addrs(&server);
    let c = session(a[0]).await;
    succeeds(&c, &create("/kept", 0)).await;
    succeeds(&c, &create("/eph", 1)).await;

    server.stop_member(2).await.expect("stop 2");
    server.stop_member(3).await.expect("stop 3: quorum lost");
    dropped(&c).await;
    let srvr = word(a[0], "srvr").await;
    assert!(
        srvr.contains("\nREAD-ONLY mode; serving only read-only clients\n"),
        "{srvr}"
    );
    assert_eq!(mode_line(&srvr), "Mode: read-only");
    assert_eq!(word(a[0], "isro").await, "ro");

    // A client that does not accept read-only mode is closed without an answer, and so is
    // a global session: a read-only member only creates sessions of its own.
    assert!(raw_handshake(a[0], 0, Bytes::from_static(&[0; 16]), false)
        .await
        .is_empty());
    assert!(raw_handshake(a[0], c.session_id, c.passwd.clone(), true)
        .await
        .is_empty());

    // A new read-only session: reads work, writes and sync are refused.
    let ro = read_only_session(a[0]).await;
    assert!(ro.read_only, "the ConnectResponse says read-only");
    assert_eq!(ro.session_id >> 56, 1, "created by member 1");
    succeeds(&ro, &get_data("/kept")).await;
    succeeds(&ro, &get_data("/eph")).await;
    let refused = ErrorCode::NotReadOnly.code();
    assert_eq!(
        ro.call(&create("/new", 0)).await.expect("write").err,
        refused
    );
    let sync = Request::Sync(zkd_protocol::SyncRequest {
        path: Some("/kept".into()),
    });
    assert_eq!(ro.call(&sync).await.expect("sync").err, refused);

    // Quorum returns: the read-only connection drops; its session is unknown to the
    // read-write members, while the global session comes back with its ephemeral.
    server.start_member(2).await.expect("start 2");
    dropped(&ro).await;
    assert_eq!(word(a[0], "isro").await, "rw");
    let local = RawClient::resume(a[1], ro.session_id, ro.passwd.clone(), 30_000, 0).await;
    assert!(local.is_err(), "a read-only session does not become global");
    let rw = move_to(&c, a[1], false).await;
    assert!(!rw.read_only);
    succeeds(&rw, &create("/new", 0)).await;
    assert_eq!(
        rw.call(&get_data("/eph")).await.expect("read").err,
        0,
        "ephemeral kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_read_only_mode_members_without_quorum_serve_nobody() {
    let server = ensemble(false).await;
    let a = addrs(&server);
    let c = session(a[0]).await;
    server.stop_member(1).await.expect("stop 1");
    server.stop_member(2).await.expect("stop 2");
    dropped(&c).await;
    let not_serving = "This ZooKeeper instance is not currently serving requests\n";
    assert_eq!(word(a[2], "srvr").await, not_serving);
    assert_eq!(word(a[2], "isro").await, "null");
    assert_eq!(word(a[2], "ruok").await, "imok");
    assert!(raw_handshake(a[2], c.session_id, c.passwd.clone(), true)
        .await
        .is_empty());
    let members = server.members().expect("members");
    assert_eq!(members[2].mode.as_str(), "looking");
    server.start_member(2).await.expect("start 2");
    let c = move_to(&c, a[2], false).await;
    succeeds(&c, &create("/back", 0)).await;
}

/// Session time follows the quorum, on the manual clock too: ten seconds without a quorum
/// expire nothing, and the quorum's return gives the session a fresh 4 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_session_expires_without_quorum_and_its_return_restarts_the_timeout() {
    let mut e = EnsembleConfig::numbered(3, 0).expect("three members");
    e.read_only = false;
    let server = Server::start(Config {
        port: 0,
        ensemble: Some(e),
        clock: zkd_server::ClockMode::Manual,
        ..Config::default()
    })
    .await
    .expect("ensemble starts");
    let a = addrs(&server);
    let c = RawClient::connect(a[0], 4_000).await.expect("session");
    succeeds(&c, &create("/eph", 1)).await;
    let alive = |server: &Server| {
        server
            .sessions()
            .expect("sessions")
            .iter()
            .any(|s| s.id == c.session_id)
    };
    server.stop_member(2).await.expect("stop 2");
    server.stop_member(3).await.expect("stop 3: quorum lost");
    dropped(&c).await;
    for _ in 0..10 {
        server
            .advance_clock(Duration::from_secs(1))
            .expect("advance");
    }
    assert!(alive(&server), "nothing expires without a quorum");
    server.start_member(2).await.expect("start 2: quorum back");
    server
        .advance_clock(Duration::from_millis(3_900))
        .expect("advance");
    assert!(alive(&server), "a fresh timeout from the quorum's return");
    server
        .advance_clock(Duration::from_millis(200))
        .expect("advance");
    assert!(!alive(&server), "expired once the fresh timeout passed");
    let other = session(a[1]).await;
    assert_eq!(
        other.call(&get_data("/eph")).await.expect("get").err,
        ErrorCode::NoNode.code(),
        "its ephemeral went with it"
    );
}

/// A member behind the others takes part in the election with what it has applied: when the
/// leader stops, the up-to-date member 1 wins over the lagging member 2's higher id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_member_does_not_win_the_election() {
    let server = ensemble(true).await;
    let a = addrs(&server);
    server
        .set_member_lag(2, zkd_server::Lag::Stalled)
        .expect("member 2 stalls");
    let c = session(a[0]).await;
    succeeds(&c, &create("/ahead", 0)).await;
    server.stop_member(3).await.expect("stop the leader");
    assert_eq!(modes(&server), ["leader", "follower", "stopped"]);
}

/// Three voting members and two observers: the observers report their mode everywhere
/// (`srvr`, `mntr`, `conf`, `/zookeeper/config`, `/zkd/members`), serve a session with
/// writes, reads and watches, let sessions move to and from them, and count for nothing:
/// stopping both keeps the quorum and the leader, a leader's stop elects a voting member, and
/// two stopped voters lose the quorum although three of the five members run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_serve_clients_but_never_vote_or_lead() {
    let server = with_observers(3, 2, true).await;
    let a = addrs(&server);
    assert_eq!(
        modes(&server),
        ["follower", "follower", "leader", "observer", "observer"]
    );
    assert_eq!(mode_line(&word(a[3], "srvr").await), "Mode: observer");
    assert_eq!(word(a[3], "isro").await, "rw");
    let mntr = word(a[3], "mntr").await;
    has_lines(
        &mntr,
        &[
            "zk_server_state\tobserver\n",
            "zk_peer_state\tobserving - broadcast\n",
            "zk_observer_master_id\t3\n",
            "zk_quorum_size\t3\n",
        ],
    );
    let leader = word(a[2], "mntr").await;
    has_lines(
        &leader,
        &[
            "zk_learners\t4\n",
            "zk_synced_followers\t2\n",
            "zk_synced_observers\t2\n",
            "zk_quorum_size\t3\n",
        ],
    );
    assert!(word(a[4], "conf").await.contains("\npeerType=1\n"));
    assert!(word(a[0], "conf").await.contains("\npeerType=0\n"));
    let admin = server.admin_addr().expect("admin");
    let list = admin::ok(admin, "GET", "/zkd/members", None).await;
    assert_eq!(list["members"][3]["mode"], "observer");
    assert_eq!(list["members"][3]["type"], "observer");
    assert_eq!(list["members"][0]["type"], "participant");

    // The leader's AdminServer `observers` lists its two observers as ZooKeeper 3.9's leader
    // does (one object per observer, keys in its order); a follower lists none.
    let obsr = admin::ok(admin, "GET", "/commands/observers?member=3", None).await;
    assert_eq!(obsr["synced_observers"], json!(2), "{obsr}");
    assert_eq!(obsr["command"], json!("observers"));
    assert_eq!(obsr["error"], json!(null));
    let observers = obsr["observers"].as_array().expect("a list");
    assert_eq!(observers.len(), 2, "{obsr}");
    let keys = [
        "remote_socket_address",
        "sid",
        "established",
        "queued_packets",
        "queued_packets_size",
        "packets_received",
        "packets_sent",
        "requests",
        "last_zxid",
    ];
    for (o, sid) in observers.iter().zip([4, 5]) {
        let got: Vec<&str> = o
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut want = keys.to_vec();
        want.sort_unstable();
        let mut got_sorted = got.clone();
        got_sorted.sort_unstable();
        assert_eq!(got_sorted, want, "{o}");
        assert_eq!(o["sid"], json!(sid), "{o}");
        assert_eq!(
            o["remote_socket_address"],
            json!(format!("/127.0.0.1:{}", 2887 + sid)),
            "{o}"
        );
        for k in &keys[2..] {
            assert!(o[k].is_i64(), "{k} is a number: {o}");
        }
        assert!(
            o["established"].as_i64().unwrap() > 1_600_000_000_000,
            "{o}"
        );
    }
    let follower = admin::ok(admin, "GET", "/commands/observers?member=1", None).await;
    assert_eq!(follower["synced_observers"], json!(0));
    assert_eq!(follower["observers"], json!([]));

    // A session on observer 4: its writes apply, reads see the others' and a watch fires.
    let on_observer = session(a[3]).await;
    assert_eq!(on_observer.session_id >> 56, 4, "created by member 4");
    let config = on_observer
        .call(&get_data("/zookeeper/config"))
        .await
        .expect("config");
    let config = String::from_utf8_lossy(config.body.as_ref()).into_owned();
    let line = format!(
        "server.4=127.0.0.1:2891:3891:observer;127.0.0.1:{}\n",
        a[3].port()
    );
    assert!(config.contains(&line), "{config}");
    assert!(config.contains(":participant;"), "{config}");
    let mut events = on_observer.events().expect("event stream");
    succeeds(&on_observer, &create("/o", 0)).await;
    succeeds(&on_observer, &create("/o-eph", 1)).await;
    let on_voter = session(a[0]).await;
    succeeds(&on_voter, &get_data("/o")).await;
    succeeds(&on_observer, &watch_data("/o")).await;
    succeeds(&on_voter, &set_data("/o", b"w")).await;
    let e = tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("notification in time")
        .expect("notification");
    assert_eq!(
        (e.path.as_str(), e.event_type),
        ("/o", 3),
        "NodeDataChanged"
    );

    // Sessions move from an observer to a voter and back.
    let moved = move_to(&on_observer, a[1], false).await;
    let back = move_to(&moved, a[4], false).await;
    succeeds(&back, &get_data("/o-eph")).await;

    // Both observers stop: their clients drop, nothing else changes.
    server.stop_member(4).await.expect("stop observer 4");
    server.stop_member(5).await.expect("stop observer 5");
    dropped(&back).await;
    assert_eq!(
        modes(&server),
        ["follower", "follower", "leader", "stopped", "stopped"]
    );
    succeeds(&on_voter, &create("/quorum", 0)).await;
    assert!(word(a[2], "mntr")
        .await
        .contains("zk_synced_observers\t0\n"));
    let back = move_to(&back, a[0], false).await;
    assert_eq!(
        back.call(&get_data("/o-eph")).await.expect("get").err,
        0,
        "the session and its ephemeral outlived its observer"
    );
    server.start_member(4).await.expect("start observer 4");
    server.start_member(5).await.expect("start observer 5");

    // The leader stops: a voting member leads, never an observer, and observers keep their
    // clients.
    let watcher = session(a[4]).await;
    server.stop_member(3).await.expect("stop the leader");
    assert_eq!(
        modes(&server),
        ["follower", "leader", "stopped", "observer", "observer"]
    );
    succeeds(&watcher, &create("/after", 0)).await;
    // Three of five members run, one of three voters: no quorum. Observers go read-only
    // with the voter.
    server.stop_member(2).await.expect("stop voter 2");
    dropped(&watcher).await;
    assert_eq!(
        modes(&server),
        ["read-only", "stopped", "stopped", "read-only", "read-only"]
    );
    assert_eq!(mode_line(&word(a[3], "srvr").await), "Mode: read-only");
    assert_eq!(word(a[4], "isro").await, "ro");
    let ro = read_only_session(a[3]).await;
    assert!(ro.read_only);
    assert_eq!(
        ro.call(&create("/refused", 0)).await.expect("write").err,
        ErrorCode::NotReadOnly.code()
    );
    // Quorum is back with voters 1 and 3; member 1 saw epoch 2's writes, member 3 stopped
    // before them, so member 1 leads.
    server.start_member(3).await.expect("start voter 3");
    assert_eq!(
        modes(&server),
        ["leader", "stopped", "follower", "observer", "observer"]
    );
    let c = move_to(&back, a[3], false).await;
    succeeds(&c, &create("/back", 0)).await;
}

/// Each leader starts an epoch: zxids in replies, Stats, `srvr`, `/zkd/members` and the
/// persisted file names carry it, and a restart continues in the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_leader_starts_an_epoch_that_zxids_and_files_carry() {
    let dir = tempfile::tempdir().expect("temp dir");
    let start = || async {
        Server::start(Config {
            port: 0,
            ensemble: Some(EnsembleConfig::numbered(3, 0).expect("three members")),
            admin_port: Some(0),
            data_dir: Some(dir.path().to_path_buf()),
            ..Config::default()
        })
        .await
        .expect("ensemble starts")
    };
    let server = start().await;
    let a = addrs(&server);
    let c = session(a[0]).await;
    let first = c.call(&create("/first", 0)).await.expect("create");
    assert_eq!(
        first.zxid, 0x1_0000_0002,
        "epoch 1: the session took counter 1"
    );
    assert!(word(a[2], "srvr").await.contains("Zxid: 0x100000002\n"));

    server.stop_member(3).await.expect("stop the leader");
    let admin = server.admin_addr().expect("admin");
    let list = admin::ok(admin, "GET", "/zkd/members", None).await;
    assert_eq!(
        (list["leader"].clone(), list["epoch"].clone()),
        (2.into(), 2.into())
    );
    let second = c.call(&create("/second", 0)).await.expect("create");
    assert_eq!(second.zxid, 0x2_0000_0001, "epoch 2, its counter from 1");
    server.shutdown().await;

    let server = start().await;
    let c = session(addrs(&server)[0]).await;
    let third = c.call(&create("/third", 0)).await.expect("create");
    assert_eq!(
        third.zxid >> 32,
        3,
        "a restart elects a leader of the next epoch"
    );
    server.shutdown().await;
    let names: Vec<String> = std::fs::read_dir(dir.path().join("version-2"))
        .expect("version-2")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    // A log is named after its first zxid and a snapshot after its last (the one taken at
    // the first shutdown holds epoch 2's transaction). Each leader's epoch also starts with a
    // snapshot of its own, so older files may have been retired since: epoch 1's log is
    // covered by the snapshots of later epochs.
    for name in ["snapshot.200000001", "log.300000001"] {
        assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
    }
    assert!(
        names.iter().any(|n| n.starts_with("snapshot.3")),
        "no snapshot of epoch 3: {names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_over_http_and_per_member_admin_commands() {
    let server = ensemble(true).await;
    let admin = server.admin_addr().expect("admin listener");
    let a = addrs(&server);
    let list = admin::ok(admin, "GET", "/zkd/members", None).await;
    assert_eq!(list["leader"], 3);
    let members = list["members"].as_array().expect("members");
    assert_eq!(members.len(), 3);
    assert_eq!(members[1]["id"], 2);
    assert_eq!(members[1]["client_address"], a[1].to_string());
    assert_eq!(members[1]["mode"], "follower");
    assert_eq!(members[1]["state"], "running");

    let after = admin::ok(admin, "POST", "/zkd/members/3/stop", None).await;
    assert_eq!(after["leader"], 2);
    assert_eq!(after["members"][2]["state"], "stopped");
    let stats = admin::ok(admin, "GET", "/commands/srvr?member=2", None).await;
    assert_eq!(stats["server_stats"]["server_state"], "leader");
    let leader = admin::ok(admin, "GET", "/commands/leader?member=1", None).await;
    assert_eq!(
        (leader["is_leader"].clone(), leader["leader_id"].clone()),
        (false.into(), 2.into())
    );
    for (method, path, status) in [
        ("POST", "/zkd/members/3/stop", 409),
        ("POST", "/zkd/members/2/start", 409),
        ("POST", "/zkd/members/9/stop", 404),
        ("POST", "/zkd/members/one/stop", 400),
        ("GET", "/commands/srvr?member=7", 404),
    ] {
        admin::refused(admin, method, path, status).await;
    }
    admin::ok(admin, "POST", "/zkd/members/1/stop", None).await;
    let ro = admin::ok(admin, "GET", "/commands/is_read_only?member=2", None).await;
    assert_eq!(ro["read_only"], true);
    let back = admin::ok(admin, "POST", "/zkd/members/3/start", None).await;
    // Quorum is back. Member 3 stopped before member 2's epoch began, so member 2 has the
    // newer zxid and wins the election over the higher id.
    assert_eq!(back["members"][1]["mode"], "leader");
    assert_eq!(back["leader"], 2);

    // A standalone server has no members.
    let single = Server::start(Config {
        port: 0,
        admin_port: Some(0),
        ..Config::default()
    })
    .await
    .expect("standalone");
    let admin = single.admin_addr().expect("admin");
    let answer = admin::call(admin, "GET", "/zkd/members", None).await;
    assert_eq!(answer.status, 409, "{}", answer.body);
}

/// Kills the binary when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_binary_prints_one_listening_line_per_member_and_ctl_controls_them() {
    let bin = zkd_client_tests::certs::zkd_binary().unwrap_or_else(|e| panic!("{e}"));
    let refused = Command::new(&bin)
        .args(["--ensemble", "2", "--observers", "2", "--port", "0"])
        .output()
        .expect("zkd runs");
    let text = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(
        text.contains(
            "--observers: 2 observers in an ensemble of 2 members would leave no \
                       voting member"
        ),
        "{text}"
    );
    // The failover timing needs an ensemble and is one of two words.
    for (args, says) in [
        (
            ["--election-timing", "zookeeper", "--port", "0"],
            "--election-timing needs an ensemble",
        ),
        (
            ["--election-timing", "fast", "--ensemble", "3"],
            "give instant or zookeeper",
        ),
    ] {
        let refused = Command::new(&bin).args(args).output().expect("zkd runs");
        let text = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{text}");
        assert!(text.contains(says), "{text}");
    }
    let mut child = Command::new(&bin)
        .args([
            "--ensemble",
            "4",
            "--observers",
            "1",
            "--port",
            "0",
            "--admin-port",
            "0",
            "--log",
            "warn",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("zkd starts");
    let stdout = child.stdout.take().expect("stdout");
    let running = Running(child);
    let lines: Vec<String> = BufReader::new(stdout)
        .lines()
        .take(5)
        .map(|l| l.expect("a line"))
        .collect();
    let ports: Vec<&str> = lines[..4]
        .iter()
        .map(|l| {
            l.strip_prefix("zkd listening on 127.0.0.1:")
                .unwrap_or_else(|| panic!("{l}"))
        })
        .collect();
    assert_eq!(
        ports
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        4,
        "{lines:?}"
    );
    let admin = lines[4].strip_prefix("zkd admin on ").expect("admin line");
    let ctl = |args: &[&str]| {
        let mut all = vec!["members"];
        all.extend_from_slice(args);
        crate::admin::zkd_ctl(admin, &all)
    };
    let (code, text) = ctl(&["stop", "1"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.starts_with("member 1 stopped\n"), "{text}");
    let (code, text) = ctl(&["list"]);
    assert_eq!(code, Some(0), "{text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "1",
            &format!("127.0.0.1:{}", ports[0]),
            "stopped",
            "stopped",
            "lockstep"
        ]
    );
    assert_eq!(rows[2][2], "leader", "member 3 led from the start");
    assert_eq!(
        rows[3][2], "observer",
        "--observers 1: the last member observes"
    );
    let (code, text) = ctl(&["stop", "1"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("member 1 is already stopped"), "{text}");
    // Members 2 and 3 hold the quorum; the observer is cut off from them, and so is member 1,
    // named in no group (stopped, it stays stopped).
    let (code, text) = crate::admin::zkd_ctl(admin, &["partition", "2,3", "/", "4"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.starts_with("partitioned: 2,3 / 4\n"), "{text}");
    let cut = cut_rows(&text);
    assert_eq!(cut, ["1", "4"], "{text}");
    let (code, text) = crate::admin::zkd_ctl(admin, &["partition", "2,x"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("\"x\" is not a member id"), "{text}");
    // One way: observer 4 no longer hears leader 3, and is cut off (instant elections).
    let (code, text) = crate::admin::zkd_ctl(admin, &["partition", "--one-way", "3>4"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.starts_with("partitioned: one way 3>4\n"), "{text}");
    let cut = cut_rows(&text);
    assert_eq!(cut, ["4"], "{text}");
    let (code, text) = crate::admin::zkd_ctl(admin, &["partition", "--one-way", "3-4"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("is not a FROM>TO pair"), "{text}");
    let (code, text) = crate::admin::zkd_ctl(admin, &["heal"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.starts_with("healed\n"), "{text}");
    assert!(!text.contains("cut off"), "{text}");
    drop(running);
}

/// The keys of a `mntr` answer (the text before each tab), with a learner's server id in a
/// per-learner key written `N` (the two ensembles number their leaders differently). Left
/// out: ZooKeeper's per-namespace summaries, named after the top-level znodes written, which
/// zkd does not track.
fn mntr_keys(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, _)| k)
        .filter(|k| !k.ends_with("_per_namespace"))
        // zkd's own counters (the slow-step count) are named apart, `zk_zkd_…`.
        .filter(|k| !k.starts_with("zk_zkd_"))
        .map(|k| match k.split_once("_learner_handler_") {
            Some((head, tail)) => {
                let field = head.trim_end_matches(|c: char| c.is_ascii_digit());
                format!("{field}N_learner_handler_{tail}")
            }
            None => k.to_string(),
        })
        .collect()
}

/// The `Zxid:` line of a `srvr` answer.
fn zxid_line(srvr: &str) -> impl Iterator<Item = String> + '_ {
    srvr.lines()
        .filter(|l| l.starts_with("Zxid: "))
        .map(str::to_string)
}

/// A leader's, a follower's and an observer's `mntr` print the keys the members of a
/// ZooKeeper ensemble of three voting servers and an observer print in those roles (values
/// differ), and the fresh leader's `srvr` the same zxid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mntr_keys_per_role_match_a_zookeeper_ensemble() {
    use zkd_testkit::oracle::{ensemble::serving_mode, four_letter_word, Launcher};
    let theirs = tokio::task::spawn_blocking(|| {
        let oracle = Launcher::new()
            .start_ensemble_with_observers(3, 1)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut by_role = std::collections::BTreeMap::new();
        let mut zxids = std::collections::BTreeSet::new();
        for m in oracle.members() {
            let role = serving_mode(m.addr).expect("serving");
            let mntr = four_letter_word(m.addr, "mntr").expect("mntr");
            if role == "leader" {
                let srvr = four_letter_word(m.addr, "srvr").expect("srvr");
                zxids.extend(zxid_line(&srvr));
            }
            by_role.insert(role, mntr_keys(&mntr));
        }
        (by_role, zxids)
    })
    .await
    .expect("oracle");
    let (theirs, their_zxids) = theirs;
    let server = with_observers(3, 1, false).await;
    let a = addrs(&server);
    // A fresh ensemble's leader is at its epoch's zxid 0: `Zxid: 0x100000000`. (ZooKeeper's
    // followers may still say 0x0 until something is committed; zkd's members share the
    // leader's.)
    let ours: std::collections::BTreeSet<String> = zxid_line(&word(a[2], "srvr").await).collect();
    assert_eq!(ours, their_zxids);
    assert_eq!(ours.first().map(String::as_str), Some("Zxid: 0x100000000"));
    for (addr, role) in [(a[2], "leader"), (a[0], "follower"), (a[3], "observer")] {
        let ours = mntr_keys(&word(addr, "mntr").await);
        let theirs = theirs.get(role).expect("the oracle has the role");
        let only_ours: Vec<_> = ours.difference(theirs).collect();
        let only_theirs: Vec<_> = theirs.difference(&ours).collect();
        assert!(
            only_ours.is_empty() && only_theirs.is_empty(),
            "{role}: only zkd prints {only_ours:?}; only ZooKeeper prints {only_theirs:?}"
        );
    }
}

/// A reconfig request sent as the superuser on `c`.
async fn reconfig(c: &RawClient, joining: Option<String>, leaving: Option<&str>) -> (i32, String) {
    let r = c
        .call(&Request::Reconfig(zkd_protocol::ReconfigRequest {
            joining_servers: joining,
            leaving_servers: leaving.map(str::to_string),
            new_members: None,
            cur_config_id: -1,
        }))
        .await
        .expect("reconfig answered");
    let text = if r.err == 0 {
        let body: zkd_protocol::GetDataResponse =
            zkd_protocol::from_bytes(r.body).expect("a getData body");
        String::from_utf8(body.data.unwrap_or_default().to_vec()).expect("utf-8")
    } else {
        String::new()
    };
    (r.err, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconfig_adds_a_new_member_that_starts_on_its_port_and_removes_one_that_keeps_serving() {
    let server = Server::start(Config {
        port: 0,
        ensemble: Some(EnsembleConfig::numbered(3, 0).expect("an ensemble")),
        admin_port: Some(0),
        reconfig_enabled: true,
        super_digest: Some("super:lK75jTNcA+U9vtVEw5vB51mj/w4=".into()),
        ..Config::default()
    })
    .await
    .expect("ensemble starts");
    let a = addrs(&server);
    let c = session(a[0]).await;
    let auth = Request::Auth(zkd_protocol::AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: Bytes::from_static(b"super:secret"),
    });
    succeeds(&c, &auth).await;
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = free.local_addr().expect("port").port();
    drop(free);
    // A fourth voter: it joins stopped, three of four still run.
    let joining = format!("server.4=127.0.0.1:2891:3891:participant;127.0.0.1:{port}");
    let (err, text) = reconfig(&c, Some(joining), None).await;
    assert_eq!(err, 0);
    assert!(
        text.contains(&format!(
            "\nserver.4=127.0.0.1:2891:3891:participant;127.0.0.1:{port}\nversion="
        )),
        "{text}"
    );
    assert_eq!(
        modes(&server),
        ["follower", "follower", "leader", "stopped"]
    );
    assert!(word(a[2], "mntr").await.contains("zk_quorum_size\t4\n"));
    // Started, it listens on its line's port and follows.
    let at = server.start_member(4).await.expect("member 4 starts");
    assert_eq!(at, SocketAddr::from(([127, 0, 0, 1], port)));
    assert_eq!(mode_line(&word(at, "srvr").await), "Mode: follower");
    let d = session(at).await;
    assert_eq!(d.session_id >> 56, 4);
    succeeds(&d, &create("/via-4", 0)).await;
    // Member 1 removed: it keeps serving, as a follower without a vote.
    let (err, text) = reconfig(&c, None, Some("1")).await;
    assert_eq!(err, 0);
    assert!(!text.contains("server.1="), "{text}");
    let members = server.members().expect("members");
    assert_eq!(
        members
            .iter()
            .map(|m| (m.id, m.in_config))
            .collect::<Vec<_>>(),
        [(1, false), (2, true), (3, true), (4, true)]
    );
    assert_eq!(mode_line(&word(a[0], "srvr").await), "Mode: follower");
    let mntr = word(a[2], "mntr").await;
    assert!(mntr.contains("zk_quorum_size\t3\n"), "{mntr}");
    assert!(
        mntr.contains("zk_synced_non_voting_followers\t1\n"),
        "{mntr}"
    );
    succeeds(&c, &create("/via-1", 0)).await;
    // Three voters (2, 3, 4): stopping member 1 costs nothing, stopping two voters the quorum.
    server.stop_member(1).await.expect("stop 1");
    // Stopped, a removed member cannot start again (a removed ZooKeeper server exits).
    let refused = server
        .start_member(1)
        .await
        .expect_err("member 1 was removed");
    assert!(
        refused.to_string().contains("not in the configuration"),
        "{refused}"
    );
    server.stop_member(2).await.expect("stop 2");
    assert_eq!(modes(&server), ["stopped", "stopped", "leader", "follower"]);
    server.stop_member(4).await.expect("stop 4");
    assert_eq!(
        modes(&server),
        ["stopped", "stopped", "read-only", "stopped"]
    );
    server.shutdown().await;
}

/// The member ids of the rows `zkd ctl` marks `cut off`.
fn cut_rows(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.ends_with("cut off"))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

/// The data a getData reply holds.
pub(crate) fn data_of(r: &Reply) -> Vec<u8> {
    assert_eq!(r.err, 0, "getData failed");
    let body: zkd_protocol::GetDataResponse = r.decode().expect("a getData body");
    body.data.unwrap_or_default().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_cuts_the_leader_off_and_healing_brings_it_back() {
    let server = ensemble(true).await;
    let admin = server.admin_addr().expect("admin listener");
    let a = addrs(&server);
    assert_eq!(modes(&server), ["follower", "follower", "leader"]);
    let c = session(a[0]).await;
    let made = succeeds(&c, &create("/p", 0)).await;
    let on_leader = session(a[2]).await;

    // The leader is cut off from the two others: they hold the quorum and elect member 2;
    // member 3 keeps running in read-only mode and drops its read-write client.
    server.partition(&[&[3]]).expect("partition");
    assert_eq!(modes(&server), ["follower", "leader", "read-only"]);
    assert_eq!(cut_flags(&server), [false, false, true]);
    dropped(&on_leader).await;

    // The majority writes on, in the new leader's epoch.
    let w = succeeds(&c, &set_data("/p", b"new")).await;
    assert!(
        w.zxid >> 32 > made.zxid >> 32,
        "a new epoch: {:x} after {:x}",
        w.zxid,
        made.zxid
    );

    // The cut member serves read-only clients what it had, and refuses writes.
    let ro = read_only_session(a[2]).await;
    assert!(ro.read_only);
    assert_eq!(
        data_of(&ro.call(&get_data("/p")).await.expect("read")),
        b"v"
    );
    assert_eq!(
        ro.call(&create("/q", 0)).await.expect("write").err,
        ErrorCode::NotReadOnly.code()
    );

    // Healing: member 3 applies what it missed and follows member 2.
    let healed = admin::ok(admin, "POST", "/zkd/heal", None).await;
    assert_eq!(healed["leader"], 2);
    assert_eq!(healed["members"][2]["cut"], false);
    assert_eq!(modes(&server), ["follower", "leader", "follower"]);
    dropped(&ro).await;
    let back = session(a[2]).await;
    assert_eq!(
        data_of(&back.call(&get_data("/p")).await.expect("read")),
        b"new"
    );

    // Over HTTP: split 1 / 2,3; member 1 alone is cut off and the leader stays.
    let split = admin::ok(admin, "POST", "/zkd/partition?groups=1/2,3", None).await;
    assert_eq!(split["leader"], 2);
    assert_eq!(split["members"][0]["cut"], true);
    assert_eq!(split["members"][0]["mode"], "read-only");
    // No group with a majority: every member is cut off and serves read-only.
    let apart = admin::ok(admin, "POST", "/zkd/partition?groups=1/2/3", None).await;
    assert!(apart["leader"].is_null(), "{apart}");
    assert_eq!(modes(&server), ["read-only", "read-only", "read-only"]);
    for (path, status) in [
        ("/zkd/partition?groups=1/9", 400),
        ("/zkd/partition?groups=1/1,2", 400),
        ("/zkd/partition?groups=1,2,3", 400),
        ("/zkd/partition?groups=a/b", 400),
        ("/zkd/partition", 400),
        ("/zkd/partition?one_way=3", 400),
        ("/zkd/partition?one_way=3%3E3", 400),
        ("/zkd/partition?one_way=3%3E9", 400),
    ] {
        admin::refused(admin, "POST", path, status).await;
    }
    // Healed, they elect as a fresh ZooKeeper ensemble would: members 2 and 3 have the same
    // newest zxid, and the higher id wins.
    server.heal().expect("heal");
    assert_eq!(modes(&server), ["follower", "follower", "leader"]);
}

/// Three members with local sessions on (`localSessionsEnabled`), upgrading or not.
async fn local_sessions(upgrading: bool) -> Server {
    let mut e = EnsembleConfig::numbered(3, 0).expect("an ensemble");
    e.local_sessions = true;
    e.local_sessions_upgrading = upgrading;
    Server::start(Config {
        port: 0,
        ensemble: Some(e),
        ..Config::default()
    })
    .await
    .expect("ensemble starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_sessions_stay_on_their_member_until_an_ephemeral_makes_them_global() {
    use zkd_testkit::raw::ClientError;
    let server = local_sessions(true).await;
    let a = addrs(&server);
    let local = session(a[0]).await;
    let global = session(a[0]).await;
    // A local session writes like any other, but costs no transaction: the create after it
    // has the zxid right after the ensemble's start.
    let made = succeeds(&local, &create("/l", 0)).await;
    // Its first ephemeral makes the second session global (a session transaction first).
    let eph = succeeds(&global, &create("/g", 1)).await;
    assert_eq!(
        eph.zxid,
        made.zxid + 2,
        "the upgrade took a zxid of its own"
    );

    // Another member does not know the local session while its member runs...
    let elsewhere = try_move(&local, a[1], false).await;
    assert!(
        matches!(elsewhere, Err(ClientError::Rejected)),
        "another member took a local session"
    );
    // ...and when member 1 stops, the local session ends with it, while the global one moves.
    server.stop_member(1).await.expect("stop 1");
    let moved = try_move(&local, a[1], false).await;
    assert!(
        matches!(moved, Err(ClientError::Rejected)),
        "a local session outlived its member"
    );
    let kept = move_to(&global, a[1], false).await;
    succeeds(&kept, &get_data("/g")).await;

    // Without upgrading, a local session cannot own an ephemeral.
    let strict = local_sessions(false).await;
    let s = session(addrs(&strict)[0]).await;
    assert_eq!(
        s.call(&create("/e", 1)).await.expect("create").err,
        ErrorCode::EphemeralOnLocalSession.code()
    );
    succeeds(&s, &create("/p", 0)).await;
}
