//! Test kit shared by the end-to-end tests and the benchmarks: which server a test talks to
//! (`target`), the Apache ZooKeeper launcher (`oracle`), a raw protocol client (`raw`),
//! hand-built frames for malformed-input tests (`frame`), a raw HTTP GET (`http`) and calls
//! to the admin listener (`admin_http`).

#![forbid(unsafe_code)]

pub mod admin_http;
pub mod frame;
pub mod http;
pub mod oracle;
pub mod raw;
pub mod target;
