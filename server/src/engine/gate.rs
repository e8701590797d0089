//! Traffic gates of the control plane: the stop-the-world pause (connections stop reading
//! requests and writing frames, the ticker stops) and the refusal of new connections.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::watch;

/// Whether traffic is paused, with a way to wait for the end of a pause.
pub(crate) struct Gate {
    paused: watch::Sender<bool>,
    /// Bumped by every pause, so a timed resume only ends the pause that armed it.
    generation: AtomicU64,
    /// New connections are closed at once while set.
    reject: AtomicBool,
}

impl Gate {
    pub(crate) fn new() -> Gate {
        Gate {
            paused: watch::Sender::new(false),
            generation: AtomicU64::new(0),
            reject: AtomicBool::new(false),
        }
    }

    pub(crate) fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Returns at once unless paused; otherwise when the pause ends.
    pub(crate) async fn wait(&self) {
        if !self.is_paused() {
            return;
        }
        let mut rx = self.paused.subscribe();
        let _ = rx.wait_for(|p| !*p).await;
    }

    /// Starts a pause; its generation, or `None` if already paused.
    pub(crate) fn pause(&self) -> Option<u64> {
        let mut started = None;
        self.paused.send_if_modified(|p| {
            if *p {
                false
            } else {
                *p = true;
                started = Some(self.generation.fetch_add(1, Ordering::SeqCst) + 1);
                true
            }
        });
        started
    }

    /// The generation of the current (or last) pause.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Ends the pause; false if there was none.
    pub(crate) fn resume(&self) -> bool {
        self.paused
            .send_if_modified(|p| std::mem::replace(p, false))
    }

    pub(crate) fn rejecting(&self) -> bool {
        self.reject.load(Ordering::Relaxed)
    }

    // Only the admin routes ask for this one.
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub(crate) fn set_rejecting(&self, on: bool) {
        self.reject.store(on, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_returns_when_resumed() {
        let g = std::sync::Arc::new(Gate::new());
        g.wait().await;
        assert_eq!(g.pause(), Some(1));
        assert_eq!(g.pause(), None, "already paused");
        let waiter = tokio::spawn({
            let g = g.clone();
            async move { g.wait().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        assert!(g.resume());
        waiter.await.unwrap();
        assert!(!g.resume(), "not paused any more");
    }
}
