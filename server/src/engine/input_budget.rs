//! The server-wide input budget: bytes of input buffer all connections hold, against
//! `--max-total-input-bytes` (each connection's buffer is the network layer's).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes of input buffer capacity all connections of one server hold, against a limit.
#[derive(Debug)]
pub(crate) struct InputBudget {
    used: AtomicUsize,
    pub(crate) limit: usize,
}

impl InputBudget {
    pub(crate) fn new(limit: usize) -> InputBudget {
        InputBudget {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    /// Bytes currently held.
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    pub(crate) fn take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                u.checked_add(n).filter(|t| *t <= self.limit)
            })
            .is_ok()
    }

    /// Counts `n` more bytes whatever the limit (an allocator that gave more than asked).
    pub(crate) fn add_unchecked(&self, n: usize) {
        self.used.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::Relaxed);
    }
}
