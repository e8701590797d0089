//! End-to-end tests live in `tests/`, grouped into a few binaries so the server is linked a
//! few times rather than once per file: `zkd_only`, `both_targets` (also run against Apache
//! ZooKeeper), `external_suites`, `differential` and `soak`. What several of them share is
//! here (the TLS certificates, the `zookeeper-client` helpers); the harness every test uses
//! (target selection, the Apache ZooKeeper launcher, the raw client) is the `zkd-testkit` crate.

#![forbid(unsafe_code)]

pub mod certs;
pub mod zk_rust;
pub mod zkd_process;
