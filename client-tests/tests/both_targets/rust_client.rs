//! End-to-end tests driving the server through the unmodified `zookeeper-client` crate: the
//! classic ZooKeeper recipes (leader election, locks, configuration, membership, barriers,
//! queues) with several sessions each, and an op-by-op check of errors, Stat fields and watches.
//!
//! Every test starts its own server through [`Target::start`] and keeps its nodes under a
//! private namespace, so the file also runs against one shared external server.

mod watched;

mod barrier;
mod config;
mod election;
mod listing;
mod lock;
mod membership;
mod multi;
mod nodes;
mod queue;
mod sessions;
mod watches;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use watched::*;
use zkd_client_tests::zk_rust::*;
use zkd_testkit::target::Target;
use zookeeper_client as zk;

/// Sequence number of a sequential node name (`prefix` followed by ten digits).
pub(crate) fn suffix(name: &str) -> i64 {
    let digits = &name[name.len() - 10..];
    assert!(
        digits.bytes().all(|b| b.is_ascii_digit()),
        "{name:?} does not end in ten digits"
    );
    digits.parse().unwrap()
}

pub(crate) fn err_text(e: zk::Error) -> String {
    e.to_string()
}

/// The longest session timeout a server with the default tick (2 s) grants. A session that
/// ends well within [`WAIT`] while holding this timeout was closed, not expired.
pub(crate) const LONG_SESSION: Duration = Duration::from_secs(40);

/// Opens a session with [`LONG_SESSION`].
pub(crate) async fn connect_long(target: &Target) -> zk::Client {
    connect_with(
        target,
        zk::Client::connector().with_session_timeout(LONG_SESSION),
    )
    .await
}

/// Resuming the session `info` fails: it is gone (closed or expired).
pub(crate) async fn assert_cannot_resume(target: &Target, info: zk::SessionInfo) {
    let result = zk::Client::connector()
        .with_session(info)
        .with_fail_eagerly()
        .connect(&target.connect_string())
        .await
        .map(|c| c.session_id());
    assert_eq!(result, Err(zk::Error::SessionExpired));
}

/// A fresh target, a client connected to it, and a private namespace `name` made by that client.
pub(crate) async fn start(name: &str) -> (Target, zk::Client, Ns) {
    let target = Target::start().await;
    let client = connect(&target).await;
    let ns = Ns::create(&client, name).await;
    (target, client, ns)
}

/// Like [`start`], with a second session.
pub(crate) async fn start_pair(name: &str) -> (Target, zk::Client, zk::Client, Ns) {
    let (target, first, ns) = start(name).await;
    let second = connect(&target).await;
    (target, first, second, ns)
}

/// Creates the empty persistent node `rel` in `ns` and returns its path.
pub(crate) async fn mkdir(client: &zk::Client, ns: &Ns, rel: &str) -> String {
    let path = ns.path(rel);
    client.create(&path, b"", &persistent()).await.unwrap();
    path
}
