//! The accept loops of a simulated ensemble's members, by member id, as the engine keeps them
//! (the network layer starts them, the control plane stops and starts them again).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ensemble::MemberId;

/// One member's accept loop.
pub(crate) struct Running {
    pub(crate) stop: CancellationToken,
    pub(crate) task: JoinHandle<()>,
}

/// Every running member's accept loop, by member id (stopping a member removes its loop
/// once it has ended).
#[derive(Default)]
pub(crate) struct Listeners {
    tasks: Mutex<HashMap<MemberId, Running>>,
    /// Held through each start and stop, so two of them never interleave.
    pub(crate) ops: tokio::sync::Mutex<()>,
}

impl Listeners {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MemberId, Running>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for every member's accept loop to end (after the server's shutdown token was
    /// cancelled).
    pub(crate) async fn join_all(&self) {
        let tasks: Vec<Running> = self.lock().drain().map(|(_, r)| r).collect();
        for r in tasks {
            r.stop.cancel();
            let _ = r.task.await;
        }
    }

    /// Stops every accept loop at once, without waiting (dropping the server).
    pub(crate) fn abort_all(&self) {
        for (_, r) in self.lock().drain() {
            r.stop.cancel();
            r.task.abort();
        }
    }
}
