//! Test kit shared by the end-to-end tests and the benchmarks: which server a test talks to
//! (`target`), the Apache ZooKeeper launcher (`oracle`), a raw protocol client (`raw`),
//! hand-built frames for malformed-input tests (`frame`), HTTP calls, plain or raw (`http`), a
//! process's resident memory (`proc_status`), and a command run under another (`under`).

#![forbid(unsafe_code)]

pub mod frame;
pub mod http;
pub mod oracle;
pub mod proc_status;
pub mod raw;
pub mod target;
pub mod under;
