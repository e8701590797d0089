//! The reference servers (ZooKeeper 3.8.0 and 3.9.3) start, answer four-letter words, and go
//! away when dropped; and the rows where the two releases differ, probed with raw frames on
//! each oracle and on zkd behaving as that release.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use zkd_testkit::oracle::Oracle;

fn four_letter_word(stream: &mut TcpStream, word: &[u8]) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(word).unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn oracle_answers_ruok_and_stops_on_drop() {
    let started = Instant::now();
    let oracle = Oracle::start().unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "oracle on {} started in {:?}",
        oracle.addr(),
        started.elapsed()
    );
    assert!(oracle.addr().ip().is_loopback());

    let mut stream = TcpStream::connect(oracle.addr()).unwrap();
    assert_eq!(four_letter_word(&mut stream, b"ruok"), "imok");

    // Whitelisted beyond the default `srvr`, and standalone.
    let mut stream = TcpStream::connect(oracle.addr()).unwrap();
    let srvr = four_letter_word(&mut stream, b"srvr");
    assert!(srvr.starts_with("Zookeeper version: 3."), "{srvr}");
    assert!(srvr.contains("Mode: standalone"), "{srvr}");

    let mut stream = TcpStream::connect(oracle.addr()).unwrap();
    let conf = four_letter_word(&mut stream, b"conf");
    assert!(conf.contains("tickTime=2000"), "{conf}");

    let addr = oracle.addr();
    let dir = oracle.dir().to_path_buf();
    drop(oracle);
    assert!(!dir.exists(), "temp dir {} left behind", dir.display());
    assert!(
        TcpStream::connect(addr).is_err(),
        "server still listening after drop"
    );
}

#[test]
fn extra_config_is_applied() {
    let oracle =
        Oracle::start_with(&[("maxSessionTimeout", "30000")]).unwrap_or_else(|e| panic!("{e}"));
    let mut stream = TcpStream::connect(oracle.addr()).unwrap();
    let conf = four_letter_word(&mut stream, b"conf");
    assert!(conf.contains("maxSessionTimeout=30000"), "{conf}");
}

#[test]
fn oracle_ensemble_elects_one_leader_and_serves_on_every_member() {
    use zkd_testkit::oracle::{ensemble::serving_mode, Launcher};
    let started = Instant::now();
    let ensemble = Launcher::new()
        .start_ensemble(3)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "ensemble {} serving in {:?}",
        ensemble.connect_string(),
        started.elapsed()
    );
    let mut modes: Vec<String> = ensemble
        .members()
        .iter()
        .map(|m| serving_mode(m.addr).expect("serving"))
        .collect();
    modes.sort();
    assert_eq!(modes, ["follower", "follower", "leader"]);
    assert_eq!(ensemble.connect_string().split(',').count(), 3);
    let addrs: Vec<_> = ensemble.members().iter().map(|m| m.addr).collect();
    drop(ensemble);
    for addr in addrs {
        assert!(TcpStream::connect(addr).is_err(), "{addr} still listening");
    }
}

/// What one probe of the release differences observed, field by field.
#[derive(Debug, PartialEq, Eq)]
struct VersionFacts {
    /// `srvr`'s version, up to the second `.` (`3.9`).
    srvr_release: String,
    /// The notification header zxid after another client's setData, as -1 or "the change's".
    notification_zxid: &'static str,
    /// checkWatches with WatcherType Persistent (4) and PersistentRecursive (5) on paths
    /// holding such watches.
    check_persistent: [i32; 2],
    /// removeWatches with WatcherType Persistent (4) and PersistentRecursive (5).
    remove_persistent: [i32; 2],
    /// removeWatches Any (3) afterwards, on both paths.
    remove_any_after: [i32; 2],
    /// removeWatches Any (3) on a path holding only a persistent watch, then again.
    remove_any_persistent: [i32; 2],
}

/// Probes the rows of the release difference table (docs/protocol.md, "ZooKeeper versions")
/// with raw frames on `addr`.
async fn probe_version_facts(addr: std::net::SocketAddr) -> VersionFacts {
    use zkd_protocol::{
        add_watch_mode, watcher_type, AddWatchRequest, PathWatchRequest, Request, SetDataRequest,
        WatchTypeRequest,
    };
    use zkd_testkit::raw::{create, RawClient};
    let watcher = RawClient::connect(addr, 10_000).await.expect("session");
    let writer = RawClient::connect(addr, 10_000).await.expect("session");
    let mut events = watcher.events().expect("events");
    for p in ["/v", "/p", "/r", "/q"] {
        let r = writer.call(&create(p, None, 0)).await.expect("create");
        assert_eq!(r.err, 0, "create {p}");
    }
    let get = Request::GetData(PathWatchRequest {
        path: "/v".into(),
        watch: true,
    });
    assert_eq!(watcher.call(&get).await.expect("getData").err, 0);
    let set = Request::SetData(SetDataRequest {
        path: "/v".into(),
        data: Some(bytes::Bytes::from_static(b"x")),
        version: -1,
    });
    let set_reply = writer.call(&set).await.expect("setData");
    assert_eq!(set_reply.err, 0);
    let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .expect("notification in time")
        .expect("notification");
    assert_eq!(event.path, "/v");
    let notification_zxid = match event.zxid {
        -1 => "-1",
        z if z == set_reply.zxid => "the change's",
        _ => "other",
    };
    let add = |path: &str, mode| {
        Request::AddWatch(AddWatchRequest {
            path: path.into(),
            mode,
        })
    };
    for (path, mode) in [
        ("/p", add_watch_mode::PERSISTENT),
        ("/r", add_watch_mode::PERSISTENT_RECURSIVE),
    ] {
        assert_eq!(watcher.call(&add(path, mode)).await.unwrap().err, 0);
    }
    let typed = |path: &str, watcher_type| WatchTypeRequest {
        path: path.into(),
        watcher_type,
    };
    let mut check_persistent = [0; 2];
    let mut remove_persistent = [0; 2];
    let mut remove_any_after = [0; 2];
    let pairs = [
        ("/p", watcher_type::PERSISTENT),
        ("/r", watcher_type::PERSISTENT_RECURSIVE),
    ];
    for (i, (path, t)) in pairs.into_iter().enumerate() {
        let check = Request::CheckWatches(typed(path, t));
        check_persistent[i] = watcher.call(&check).await.expect("checkWatches").err;
        let remove = Request::RemoveWatches(typed(path, t));
        remove_persistent[i] = watcher.call(&remove).await.expect("removeWatches").err;
    }
    for (i, (path, _)) in pairs.into_iter().enumerate() {
        let any = Request::RemoveWatches(typed(path, watcher_type::ANY));
        remove_any_after[i] = watcher.call(&any).await.expect("removeWatches").err;
    }
    let q = add("/q", add_watch_mode::PERSISTENT);
    assert_eq!(watcher.call(&q).await.unwrap().err, 0);
    let mut remove_any_persistent = [0; 2];
    for slot in &mut remove_any_persistent {
        let any = Request::RemoveWatches(typed("/q", watcher_type::ANY));
        *slot = watcher.call(&any).await.expect("removeWatches").err;
    }
    let srvr = zkd_testkit::oracle::four_letter_word(addr, "srvr").expect("srvr");
    let version = srvr
        .strip_prefix("Zookeeper version: ")
        .unwrap_or_else(|| panic!("{srvr}"));
    let srvr_release = version.split('.').take(2).collect::<Vec<_>>().join(".");
    watcher.abort().await;
    writer.abort().await;
    VersionFacts {
        srvr_release,
        notification_zxid,
        check_persistent,
        remove_persistent,
        remove_any_after,
        remove_any_persistent,
    }
}

/// The rows of the table, as each release answers them.
fn expected_facts(version: zkd_testkit::oracle::ZookeeperVersion) -> VersionFacts {
    use zkd_testkit::oracle::ZookeeperVersion as V;
    const MARSHALLING_ERROR: i32 = -5;
    const NO_WATCHER: i32 = -121;
    match version {
        V::V3_9 => VersionFacts {
            srvr_release: "3.9".into(),
            notification_zxid: "the change's",
            check_persistent: [0, 0],
            remove_persistent: [0, 0],
            remove_any_after: [NO_WATCHER, NO_WATCHER],
            remove_any_persistent: [0, NO_WATCHER],
        },
        V::V3_8 => VersionFacts {
            srvr_release: "3.8".into(),
            notification_zxid: "-1",
            check_persistent: [MARSHALLING_ERROR, MARSHALLING_ERROR],
            remove_persistent: [MARSHALLING_ERROR, MARSHALLING_ERROR],
            // Any removes the persistent watches that 4 and 5 could not.
            remove_any_after: [0, 0],
            remove_any_persistent: [0, NO_WATCHER],
        },
    }
}

/// Each release's oracle and zkd behaving as that release answer every row of the table the
/// same way, with raw frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_release_difference_matches_its_oracle_on_zkd() {
    use zkd_testkit::oracle::{Launcher, ZookeeperVersion};
    for version in ZookeeperVersion::ALL {
        let oracle = Launcher::new()
            .version(version)
            .start()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(oracle.version(), version);
        let facts = probe_version_facts(oracle.addr()).await;
        assert_eq!(facts, expected_facts(version), "ZooKeeper oracle {version}");
        drop(oracle);
        let zkd = zkd_server::Server::start(zkd_server::Config {
            port: 0,
            four_letter_whitelist: zkd_server::FourLetterWhitelist::All,
            zookeeper_version: version,
            ..zkd_server::Config::default()
        })
        .await
        .expect("zkd");
        let facts = probe_version_facts(zkd.local_addr()).await;
        assert_eq!(
            facts,
            expected_facts(version),
            "zkd --zookeeper-version {version}"
        );
    }
}

/// The NodeDeleted events a persistent-recursive watcher gets when a session holding
/// `count` ephemerals under `/e` closes, in arrival order.
async fn deletion_order(addr: std::net::SocketAddr, count: usize) -> Vec<String> {
    use zkd_protocol::{add_watch_mode, AddWatchRequest, Request};
    use zkd_testkit::raw::{create, RawClient};
    let owner = RawClient::connect(addr, 10_000).await.expect("session");
    let watcher = RawClient::connect(addr, 10_000).await.expect("session");
    let mut events = watcher.events().expect("events");
    assert_eq!(owner.call(&create("/e", None, 0)).await.unwrap().err, 0);
    for i in 0..count {
        // Names of different lengths and hashes; sequential ones too.
        let path = format!("/e/{}{}", ["n", "lock-", "x"][i % 3], i * 7919 % 1000);
        assert_eq!(owner.call(&create(&path, None, 1)).await.unwrap().err, 0);
        let seq = create("/e/s-", None, 3);
        assert_eq!(owner.call(&seq).await.unwrap().err, 0);
    }
    let add = Request::AddWatch(AddWatchRequest {
        path: "/e".into(),
        mode: add_watch_mode::PERSISTENT_RECURSIVE,
    });
    assert_eq!(watcher.call(&add).await.unwrap().err, 0);
    owner.close().await.expect("close");
    let mut order = Vec::new();
    while order.len() < 2 * count {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("events in time")
            .expect("event");
        order.push(event.path);
    }
    watcher.abort().await;
    order
}

/// A closed session's ephemerals are deleted, and their watchers notified, in the order
/// ZooKeeper walks its hash set of them — on both releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_sessions_ephemerals_go_in_zookeepers_order() {
    use zkd_testkit::oracle::{Launcher, ZookeeperVersion};
    for (count, version) in [(3, ZookeeperVersion::V3_8), (10, ZookeeperVersion::V3_9)] {
        let oracle = Launcher::new()
            .version(version)
            .start()
            .unwrap_or_else(|e| panic!("{e}"));
        let theirs = deletion_order(oracle.addr(), count).await;
        drop(oracle);
        for version in ZookeeperVersion::ALL {
            let zkd = zkd_server::Server::start(zkd_server::Config {
                port: 0,
                zookeeper_version: version,
                ..zkd_server::Config::default()
            })
            .await
            .expect("zkd");
            let ours = deletion_order(zkd.local_addr(), count).await;
            assert_eq!(ours, theirs, "zkd {version}, {count} ephemerals");
        }
    }
}
