//! Progress lines on stderr for long runs, at most one per second per phase.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A labelled progress reporter; silent when disabled.
pub struct Progress {
    label: String,
    enabled: bool,
    last: Mutex<Option<Instant>>,
}

impl Progress {
    pub fn new(label: impl Into<String>, enabled: bool) -> Progress {
        Progress {
            label: label.into(),
            enabled,
            last: Mutex::new(None),
        }
    }

    pub fn silent() -> Progress {
        Progress::new("", false)
    }

    /// Prints a line now.
    pub fn say(&self, msg: impl AsRef<str>) {
        if self.enabled {
            eprintln!("[{}] {}", self.label, msg.as_ref());
        }
    }

    /// Prints a line if none was printed in the last second.
    /// Reports step `index` (from 0) of `of`: `what 3/10: text`.
    pub fn step(&self, what: &str, index: usize, of: usize, text: impl std::fmt::Display) {
        self.say(format!("{what} {}/{of}: {text}", index + 1));
    }

    pub fn tick(&self, msg: impl FnOnce() -> String) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if let Ok(mut last) = self.last.lock() {
            if last.is_some_and(|t| now - t < Duration::from_secs(1)) {
                return;
            }
            *last = Some(now);
        }
        eprintln!("[{}] {}", self.label, msg());
    }

    /// The same reporter with a longer label.
    pub fn sub(&self, more: impl AsRef<str>) -> Progress {
        Progress::new(format!("{} {}", self.label, more.as_ref()), self.enabled)
    }
}
