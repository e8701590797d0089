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
    let mut c = session(server.local_addr()).await;
    let mut pipeline = Vec::new();
    for i in 0..WATCHES {
        let rec = PathWatchRequest {
            path: format!("/w{i}"),
            watch: true,
        };
        pipeline.extend_from_slice(&request(i as i32 + 1, 3, &rec));
    }
    c.write_all(&pipeline).await.expect("pipelined exists");
    for _ in 0..WATCHES {
        assert!(reply(&mut c).await.is_some(), "every exists answered");
    }

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
