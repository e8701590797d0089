//! End-to-end tests live in `tests/`; the harness they share (target selection, the Apache
//! ZooKeeper launcher, the raw client) is the `zkd-testkit` crate.

#![forbid(unsafe_code)]

pub mod certs;
