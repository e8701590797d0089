//! Watches: the watch tables that decide who is notified of a change, and the herd detector
//! that measures how many watchers each change wakes.

pub mod herd_detector;
pub(crate) mod watches;
