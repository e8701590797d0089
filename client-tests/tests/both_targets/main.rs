//! End-to-end tests that hold for any ZooKeeper server: they start their server through
//! `Target::start` (embedded zkd by default, `ZKD_TEST_TARGET=zookeeper` for Apache ZooKeeper,
//! `ZKD_TEST_ADDR=host:port` for a running server), so scripts/test.sh runs this whole binary
//! against ZooKeeper 3.9.3 and 3.8.0 too. The few tests here that need a zkd-specific
//! configuration start an embedded zkd whatever the target.
//!
//! `rust_client`: the recipes and op-by-op checks through the `zookeeper-client` crate;
//! `acl_auth` and `watch_acl`: ACLs, authentication and the READ rule for watches;
//! `hostile`: malformed input over raw sockets.

mod acl_auth;
mod hostile;
mod rust_client;
mod watch_acl;
