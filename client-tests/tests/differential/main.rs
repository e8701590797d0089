//! zkd side by side with Apache ZooKeeper (3.8.0 and 3.9.3, started by the test kit) in the
//! same test: `programs`, the differential tester's random multi-session programs;
//! `ensemble_programs`, random programs with member faults on zkd `--ensemble 3` and three
//! ZooKeeper 3.8.0 servers (with partitions cut between the ZooKeeper servers' network
//! namespaces); `netns_ensemble`, those namespaces and their cuts; `failover_timing`,
//! step-down, notice and election times with ZooKeeper's timing; `admin_commands`, every
//! AdminServer command; `oracle_smoke`, the
//! rows where the releases differ; `persistence`, data directories each server writes and the
//! other loads; `secure`, TLS and SASL with unmodified clients; `kazoo_own_suite`, kazoo's
//! own SASL, SSL and cluster tests; `wide_parent_probe`, a wide cached parent emptied by a big
//! multi, single deletes and a reset while `ruok` and a kazoo session are watched. Each test
//! starts both servers itself, so this binary does not read `ZKD_TEST_TARGET`.

mod admin_commands;
mod ensemble_programs;
mod failover_timing;
mod kazoo_own_suite;
mod netns_ensemble;
mod oracle_smoke;
mod persistence;
mod programs;
mod secure;
mod wide_parent_probe;
