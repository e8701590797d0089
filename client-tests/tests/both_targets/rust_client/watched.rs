//! What a task that keeps re-reading and re-watching a node reports to its test: each read, each
//! watch event, the node gone, or a failure; and the waits on those reports.

use super::*;

/// One report of a watching task; `V` is what a read returns.
#[derive(Debug)]
pub enum Watched<V> {
    Read(V),
    Event { event: zk::EventType, path: String },
    Gone,
    Failed(String),
}

/// Receives the next report and returns its read, failing on anything else.
pub async fn expect_read<V: std::fmt::Debug>(
    rx: &mut mpsc::UnboundedReceiver<Watched<V>>,
    what: &str,
) -> V {
    match recv(rx, what).await {
        Watched::Read(value) => value,
        Watched::Failed(error) => panic!("{what}: watching task failed: {error}"),
        other => panic!("{what}: expected a read, got {other:?}"),
    }
}

/// Receives the next report and asserts that it is `event` on `path`.
pub async fn expect_watched_event<V: std::fmt::Debug>(
    rx: &mut mpsc::UnboundedReceiver<Watched<V>>,
    event: zk::EventType,
    path: &str,
    what: &str,
) {
    match recv(rx, what).await {
        Watched::Event {
            event: got,
            path: got_path,
        } => assert_eq!((got, got_path.as_str()), (event, path), "{what}"),
        Watched::Failed(error) => panic!("{what}: watching task failed: {error}"),
        other => panic!("{what}: expected {event:?}, got {other:?}"),
    }
}

/// Sends the event a watcher delivered as a report.
pub fn send_event<V>(tx: &mpsc::UnboundedSender<Watched<V>>, event: zk::WatchedEvent) {
    let _ = tx.send(Watched::Event {
        event: event.event_type,
        path: event.path,
    });
}
