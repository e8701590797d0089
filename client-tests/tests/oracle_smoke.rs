//! The reference server starts, answers four-letter words, and goes away when dropped.

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
