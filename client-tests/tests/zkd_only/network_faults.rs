//! Network faults on client connections (blackhole, lost replies, latency): latency timed by
//! the manual clock as seen by the unmodified `zookeeper-client` crate, a blackhole seen at
//! the socket (nothing read, no close until it is removed), the refusals of the Rust API, the
//! HTTP routes and `zkd ctl`, and kazoo on a three-member ensemble
//! (`client-tests/python/netfault_checks.py`).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkd_client_tests::zk_rust::within;
use zkd_server::{
    ClientAddr, ClockMode, Config, ControlError, EnsembleConfig, NetFault, NetFaultRule, Server,
};
use zookeeper_client as zk;

use crate::admin;

async fn standalone(clock: ClockMode) -> Server {
    Server::start(Config {
        port: 0,
        admin_port: Some(0),
        clock,
        ..Default::default()
    })
    .await
    .expect("a server")
}

fn every(fault: NetFault) -> NetFaultRule {
    NetFaultRule {
        fault,
        session: None,
        client: None,
        member: None,
    }
}

/// Under the manual clock a request and its reply each wait for the clock to move by the
/// latency: the reply comes once the clock moved twice the latency, however long that takes
/// in real time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_passes_on_the_manual_clock() {
    let server = standalone(ClockMode::Manual).await;
    let client = within(
        "session establishment",
        zk::Client::connector()
            .with_session_timeout(Duration::from_secs(30))
            .connect(&server.local_addr().to_string()),
    )
    .await
    .expect("connect");
    let id = server
        .add_net_fault(every(NetFault::Latency(1_000)))
        .expect("latency");
    let listed = server.net_faults().expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].id, listed[0].connections), (id, 1));
    let mut reply = Box::pin(client.check_stat("/"));
    let quiet = Duration::from_millis(300);
    for step in [999, 1, 999] {
        assert!(
            tokio::time::timeout(quiet, &mut reply).await.is_err(),
            "the reply came before the clock moved twice the latency"
        );
        server
            .advance_clock(Duration::from_millis(step))
            .expect("advance");
    }
    assert!(tokio::time::timeout(quiet, &mut reply).await.is_err());
    server
        .advance_clock(Duration::from_millis(1))
        .expect("advance");
    let stat = within("the reply after 2 s on the clock", reply).await;
    assert!(stat.expect("checkStat").is_some(), "/ exists");
    // Removed, the latency ends and the connection goes on.
    server.remove_net_fault(id).expect("remove");
    within("a request without latency", client.check_stat("/"))
        .await
        .expect("checkStat");
    server.shutdown().await;
}

/// A blackholed connection reads nothing (not even a four-letter word) and is not closed;
/// removing the blackhole closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackhole_answers_nothing_and_closes_only_when_removed() {
    let server = standalone(ClockMode::Real).await;
    let addr = server.local_addr();
    let id = server
        .add_net_fault(NetFaultRule {
            client: Some(ClientAddr::Ip(addr.ip())),
            ..every(NetFault::Blackhole)
        })
        .expect("blackhole");
    let mut socket = TcpStream::connect(addr).await.expect("connect");
    socket.write_all(b"ruok").await.expect("write");
    let mut buf = [0u8; 16];
    assert!(
        tokio::time::timeout(Duration::from_millis(500), socket.read(&mut buf))
            .await
            .is_err(),
        "a blackholed connection answered or closed"
    );
    assert_eq!(server.net_faults().expect("list")[0].connections, 1);
    server.remove_net_fault(id).expect("remove");
    let end = within("the close", socket.read(&mut buf)).await;
    assert!(
        matches!(end, Ok(0) | Err(_)),
        "read {end:?} instead of the close"
    );
    // A new connection is served again.
    let mut socket = TcpStream::connect(addr).await.expect("connect");
    socket.write_all(b"ruok").await.expect("write");
    let mut answer = Vec::new();
    within("imok", socket.read_to_end(&mut answer))
        .await
        .expect("read");
    assert_eq!(answer, b"imok");
    server.shutdown().await;
}

/// Bad rules are refused with a sentence: by the Rust API (with the error that says why), by
/// the routes (with the HTTP status to match) and by `zkd ctl` (exit status 1); the routes
/// sit behind the admin listener's cross-site checks like every control route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_rules_are_refused_everywhere() {
    let server = standalone(ClockMode::Real).await;
    let refusals = [
        (
            every(NetFault::Latency(0)),
            "latency 0 ms would change nothing; give ms of at least 1",
        ),
        (
            NetFaultRule {
                member: Some(2),
                ..every(NetFault::Blackhole)
            },
            "this server is not an ensemble; start it with --ensemble N to have members",
        ),
        (
            NetFaultRule {
                session: Some(0x77),
                ..every(NetFault::DropReplies)
            },
            "no session 0x77",
        ),
    ];
    for (rule, says) in refusals {
        let e = server.add_net_fault(rule).expect_err("refused");
        assert_eq!(e.to_string(), says);
    }
    assert_eq!(
        server.remove_net_fault(4),
        Err(ControlError::NoSuchNetFault(4))
    );
    assert_eq!(server.clear_net_faults(), Ok(0));

    let http = server.admin_addr().expect("admin");
    for (method, path, body, status, says) in [
        (
            "POST",
            "/zkd/net-faults",
            r#"{"action":"cut"}"#,
            400,
            "unknown network fault",
        ),
        (
            "POST",
            "/zkd/net-faults",
            r#"{"action":"latency","ms":4000000}"#,
            400,
            "an hour",
        ),
        (
            "POST",
            "/zkd/net-faults",
            r#"{"action":"blackhole","member":1}"#,
            409,
            "not an ensemble",
        ),
        (
            "POST",
            "/zkd/net-faults",
            r#"{"action":"blackhole","session":"0x5"}"#,
            404,
            "no session 0x5",
        ),
        ("POST", "/zkd/net-faults", "{", 400, "malformed JSON body"),
        ("DELETE", "/zkd/net-faults/7", "", 404, "no network fault 7"),
        ("DELETE", "/zkd/net-faults/x", "", 400, "is not a number"),
    ] {
        let body = (!body.is_empty()).then_some(body);
        let a = admin::call(http, method, path, body).await;
        assert_eq!(a.status, status, "{method} {path} {body:?}: {}", a.body);
        assert!(admin::error_text(&a).contains(says), "{}", a.body);
    }
    let (status, text) = admin::raw(
        http,
        "POST",
        "/zkd/net-faults",
        &["Origin: http://evil.example", "Content-Type: text/plain"],
    )
    .await;
    assert_eq!(status, 403, "{text}");
    assert!(server.net_faults().expect("list").is_empty());

    let admin = http.to_string();
    let ctl = |args: &[&str]| {
        let mut all = vec!["net-fault"];
        all.extend_from_slice(args);
        crate::admin::zkd_ctl(&admin, &all)
    };
    let (code, text) = ctl(&["add", "latency", "--ms", "250ms", "--client", "127.0.0.1"]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        text,
        "added #1 latency ms=250 client=127.0.0.1, holds 0 connections\n"
    );
    let (code, text) = ctl(&["add", "latency", "--ms", "soon"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("\"soon\" is not a duration"), "{text}");
    let (code, text) = ctl(&["add", "blackhole", "--client", "1.2.3.4.5"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("the server refused (400): client \"1.2.3.4.5\" is not an IP address"),
        "{text}"
    );
    let (code, text) = ctl(&["remove", "9"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("(404): no network fault 9"), "{text}");
    let (code, text) = ctl(&["list"]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        text,
        "#1 latency ms=250 client=127.0.0.1, holds 0 connections\n"
    );
    let (code, text) = ctl(&["clear"]);
    assert_eq!(
        (code, text.as_str()),
        (Some(0), "removed 1 network faults\n")
    );
    server.shutdown().await;
}

/// kazoo, unmodified, on `zkd --ensemble 3`: a blackholed connection is left for another
/// member within the session timeout and the session lives; blackholed on every member past
/// it, the session expires by the server's clock; a write whose reply is dropped is applied;
/// latency adds to the round trip (`client-tests/python/netfault_checks.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_under_network_faults() {
    let server = Server::start(Config {
        port: 0,
        admin_port: Some(0),
        ensemble: Some(EnsembleConfig::numbered(3, 0).expect("three members")),
        ..Default::default()
    })
    .await
    .expect("a three-member ensemble");
    crate::python_checks::run_on_ensemble(&server, "netfault_checks.py", 300, "4 passed, 0 failed")
        .await;
    server.shutdown().await;
}
