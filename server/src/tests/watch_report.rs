//! The watch reports (`wchc`, `wchp`) of a connection holding many watches: its paths are
//! copied in slices, a bounded number of table entries per turn of the core's lock, and the
//! report still lists every watch once.

use tokio::io::AsyncWriteExt;
use zkd_protocol::records::PathWatchRequest;

use super::fail_closed::session;
use super::shared_body::{reply, request};
use crate::reports::{self, Needs};
use crate::{Config, Server};

/// Watches one connection sets (exists with a watch on absent nodes).
const WATCHES: usize = 40_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connections_many_watches_are_copied_in_slices() {
    let server = Server::start(Config {
        port: 0,
        ..Config::default()
    })
    .await
    .expect("start");
    let _c = watcher(&server, WATCHES).await;

    let shared = server.shared.clone();
    let view = tokio::task::spawn_blocking(move || {
        let needs = Needs {
            watches: true,
            ..Needs::default()
        };
        reports::gather(
            &shared,
            shared.first_member(),
            needs,
            crate::engine::now_ms(),
        )
    })
    .await
    .expect("gathered")
    .expect("serving");
    let copy = view.watch_copy;
    assert!(
        copy.most_paths <= reports::PATHS_PER_TURN && copy.turns >= 3,
        "{WATCHES} watches of one connection copied in {} turns, at most {} entries in one",
        copy.turns,
        copy.most_paths
    );
    let mut paths = view.data_watches[0].paths.clone();
    assert_eq!(view.data_watches.len(), 1);
    paths.dedup();
    assert_eq!(paths.len(), WATCHES, "every watch listed once");
}

/// Sets `n` watches on one new session of `server`; the session's socket.
async fn watcher(server: &Server, n: usize) -> tokio::net::TcpStream {
    let mut c = session(server.local_addr()).await;
    let mut pipeline = Vec::new();
    for i in 0..n {
        let rec = PathWatchRequest {
            path: format!("/w{i}"),
            watch: true,
        };
        pipeline.extend_from_slice(&request(i as i32 + 1, 3, &rec));
    }
    c.write_all(&pipeline).await.expect("pipelined exists");
    for _ in 0..n {
        assert!(reply(&mut c).await.is_some(), "every exists answered");
    }
    c
}

/// A four-letter word's answer (everything until the server closes).
async fn word(server: &Server, w: &[u8]) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut s = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .expect("connect");
    s.write_all(w).await.expect("word");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(super::fail_closed::WAIT, s.read_to_end(&mut answer)).await;
    answer
}

/// A four-letter answer counts against the outbound limits like queued replies: one longer
/// than a connection may hold unwritten is not sent (the connection is closed, the reason
/// logged), while shorter answers are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_four_letter_answer_over_the_outbound_limit_is_not_sent() {
    let server = Server::start(Config {
        port: 0,
        max_outbound_bytes: 256 << 10,
        four_letter_whitelist: crate::FourLetterWhitelist::parse("wchc,wchp,wchs").expect("words"),
        ..Config::default()
    })
    .await
    .expect("start");
    let _c = watcher(&server, 40_000).await;
    assert!(
        word(&server, b"wchc").await.is_empty(),
        "a 40 000-path wchc (over 256 KiB) is not answered"
    );
    assert!(word(&server, b"wchp").await.is_empty());
    let wchs = String::from_utf8(word(&server, b"wchs").await).expect("text");
    assert!(wchs.contains("40000"), "{wchs}");
    assert_eq!(server.shared.outbound.total(), 0, "nothing held");
}
