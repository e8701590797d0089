//! Helpers for the end-to-end tests that drive a server through the `zookeeper-client` crate.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use zkd_testkit::target::Target;
use zookeeper_client as zk;

/// Upper bound for any single wait in these tests (covers a session expiry with room to spare).
pub const WAIT: Duration = Duration::from_secs(20);

/// Short session timeout used where a test lets a session expire: 2 × the default tickTime.
pub const SHORT_SESSION: Duration = Duration::from_secs(4);

/// How long a test keeps listening for events that must *not* arrive.
pub const QUIET: Duration = Duration::from_millis(400);

/// Awaits `fut`, failing the test if it takes longer than [`WAIT`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {WAIT:?} waiting for {what}"),
    }
}

/// Opens a session with default options.
pub async fn connect(target: &Target) -> zk::Client {
    connect_with(target, zk::Client::connector()).await
}

/// Opens a session with a custom connector (session timeout, detached, ...).
pub async fn connect_with(target: &Target, connector: zk::Connector) -> zk::Client {
    let addr = target.connect_string();
    within(
        "session establishment",
        connector.with_fail_eagerly().connect(&addr),
    )
    .await
    .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"))
}

/// Opens a session with [`SHORT_SESSION`] that is *not* closed when its last handle is dropped:
/// dropping it only closes the TCP connection, so the server has to expire the session.
pub async fn connect_detached(target: &Target) -> zk::Client {
    let connector = zk::Client::connector()
        .with_session_timeout(SHORT_SESSION)
        .with_detached();
    connect_with(target, connector).await
}

/// Adds a persistent (or persistent-recursive) watch on `path`.
pub async fn add_watch(
    client: &zk::Client,
    path: &str,
    mode: zk::AddWatchMode,
) -> zk::PersistentWatcher {
    within("addWatch", client.watch(path, mode)).await.unwrap()
}

pub fn opts(mode: zk::CreateMode) -> zk::CreateOptions<'static> {
    mode.with_acls(zk::Acls::anyone_all())
}

/// A persistent node with the given ACL.
pub fn with_acl(acl: &[zk::Acl]) -> zk::CreateOptions<'_> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::new(acl))
}

pub fn persistent() -> zk::CreateOptions<'static> {
    opts(zk::CreateMode::Persistent)
}

pub fn ephemeral() -> zk::CreateOptions<'static> {
    opts(zk::CreateMode::Ephemeral)
}

pub fn persistent_sequential() -> zk::CreateOptions<'static> {
    opts(zk::CreateMode::PersistentSequential)
}

pub fn ephemeral_sequential() -> zk::CreateOptions<'static> {
    opts(zk::CreateMode::EphemeralSequential)
}

/// A private subtree for one test, so that tests can also share one external server.
pub struct Ns {
    pub root: String,
}

impl Ns {
    /// Creates `/rust-client-<name>-<unique>` as a persistent node.
    pub async fn create(client: &zk::Client, name: &str) -> Ns {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let unique = format!(
            "{}-{:x}-{}",
            std::process::id(),
            nanos,
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let root = format!("/rust-client-{name}-{unique}");
        within(
            "namespace creation",
            client.create(&root, b"", &persistent()),
        )
        .await
        .unwrap_or_else(|e| panic!("creating {root}: {e}"));
        Ns { root }
    }

    /// Absolute path of `rel` inside the namespace.
    pub fn path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.root)
    }
}

/// Receives the next message, failing the test on timeout or a closed channel.
pub async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>, what: &str) -> T {
    within(what, rx.recv())
        .await
        .unwrap_or_else(|| panic!("channel closed while waiting for {what}"))
}

/// Asserts that nothing arrives on `rx` for [`QUIET`].
pub async fn assert_quiet<T: std::fmt::Debug>(rx: &mut mpsc::UnboundedReceiver<T>, context: &str) {
    if let Ok(Some(unexpected)) = tokio::time::timeout(QUIET, rx.recv()).await {
        panic!("{context}: unexpected message {unexpected:?}");
    }
}

/// Sorted children of `path`.
pub async fn sorted_children(client: &zk::Client, path: &str) -> Vec<String> {
    let mut children = within("getChildren", client.list_children(path))
        .await
        .unwrap_or_else(|e| panic!("listing {path}: {e}"));
    children.sort();
    children
}

/// Polls `cond` (every 50 ms) until it holds, failing the test after [`WAIT`].
pub async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    within(what, async {
        while !cond().await {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}
