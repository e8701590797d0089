//! Harness shared by the end-to-end tests: which server a test talks to, and how to start it.

pub mod oracle;
pub mod raw;
pub mod target;
