//! zkd: an in-memory, ZooKeeper-wire-compatible coordination server, as a library first.

#![forbid(unsafe_code)]

/// The deterministic core, under the name the server's modules use for it.
pub(crate) use zkd_core as core;

#[cfg(feature = "admin")]
mod admin;
mod config;
pub mod control;
pub mod ensemble;
#[cfg(feature = "json")]
pub mod files;
pub mod fixture;
pub mod fourlw;
mod member_lag;
mod net;
mod persist;
mod server;
mod version_string;

pub use config::{
    ClientAuth, ClockMode, Config, EnsembleConfig, FourLetterWhitelist, FsyncPolicy, MemberConfig,
    TlsConfig,
};
pub use net::ServerFailure;
pub use persist::load::read_snapshot_file;
pub use persist::{check_data_dir, DirCheck, SnapshotInfo};
pub use server::Server;
pub use version_string::{version_string, VersionString};
pub use zkd_core::{SaslUsers, ZookeeperVersion};
