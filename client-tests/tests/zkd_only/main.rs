//! End-to-end tests of what only zkd has or does its own way: embedding, the simulated
//! ensemble (and its failover on ZooKeeper's timing) and lagging members, network faults on connections, the admin listener (control
//! plane, tree export, metrics, the herd detector, the web view in headless chromium), zkd's
//! reaper and four-letter-word defaults. Each test starts its own embedded server; none of them runs against ZooKeeper.
//!
//! One binary for all of them, so the server is linked once: `cargo test -p zkd-client-tests
//! --test zkd_only [MODULE::]`.

mod admin;

mod control_plane;
mod embedding;
mod ensemble;
mod failover_timing;
mod four_letter_defaults;
mod herd;
mod history;
mod lagging_member;
mod network_faults;
mod python_checks;
mod readme_pattern;
mod reaping;
mod slow_steps;
mod tree_export;
mod web_view;
