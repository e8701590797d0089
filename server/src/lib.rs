//! zkd: an in-memory, ZooKeeper-wire-compatible coordination server, as a library first.

#![forbid(unsafe_code)]

#[cfg(feature = "admin")]
mod admin;
mod config;
pub mod control;
pub mod core;
pub mod ensemble;
pub mod files;
#[cfg(feature = "json")]
pub mod fixture;
pub mod fourlw;
mod member_lag;
mod net;
mod persist;
mod sasl_users;
mod server;
mod zk_version;

pub use config::{
    ClientAuth, ClockMode, Config, EnsembleConfig, FourLetterWhitelist, FsyncPolicy, MemberConfig,
    TlsConfig,
};
pub use net::ServerFailure;
pub use persist::load::read_snapshot_file;
pub use persist::{check_data_dir, DirCheck, SnapshotInfo};
pub use sasl_users::SaslUsers;
pub use server::Server;
pub use zk_version::ZookeeperVersion;
