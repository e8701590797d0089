//! zkd: an in-memory, ZooKeeper-wire-compatible coordination server, as a library first.

#![forbid(unsafe_code)]

//!
//! The modules form layers, each importing only from the ones below it (checked by
//! `scripts/check-layers.sh`, where the order is declared):
//! `core` (the deterministic state machine, the `zkd-core` crate), `files`, `config` and
//! `fixture` (plain data), `engine` (the core behind its lock, clocks, gate, latencies, members,
//! fail-closed), `reports` and `persist`, `net`, `control`, `admin`, and `server` (the
//! embedding handle).

/// The deterministic core, under the name the server's modules use for it.
pub(crate) use zkd_core as core;

#[cfg(feature = "admin")]
mod admin;
mod config;
mod control;
mod engine;
pub mod files;
#[cfg(feature = "json")]
pub mod fixture;
#[cfg(feature = "json")]
mod history_guard;
mod net;
mod persist;
mod reports;
mod server;
#[cfg(test)]
mod tests;
mod version_string;

pub use config::{
    dynamic_file_name, ClientAuth, ClockMode, Config, ElectionTiming, EnsembleConfig,
    FourLetterWhitelist, FsyncPolicy, MemberConfig, TlsConfig, DEFAULT_HISTORY_BYTES,
    DEFAULT_HISTORY_EVENTS, DYNAMIC_FILE_PREFIX,
};
pub use control::{
    ClientAddr, ClockReport, ControlError, FaultAction, FaultRule, FaultStatus, Lag,
    MemberLagReport, NetFault, NetFaultRule, NetFaultStatus, PauseClock, PauseOptions,
    SessionReport, MAX_FAULT_RULES, MAX_LATENCY_MS, MAX_NET_FAULTS,
};
pub use engine::ensemble::{MemberMode, MemberReport};
pub use engine::history::event::{err_name, event_name, op_name, to_json_lines};
pub use engine::history::{HistoryEvent, HistoryFilter, HistorySummary, RequestEvent, What};
pub use engine::ServerFailure;
#[cfg(feature = "json")]
pub use history_guard::HistoryGuard;
pub use persist::load::read_snapshot_file;
pub use persist::{check_data_dir, DataDirWriteError, DirCheck, SnapshotInfo};
#[cfg(feature = "json")]
pub use reports::{recipe_checks, timeline};
pub use reports::{BUILD_COMMIT, BUILD_DATE};
pub use server::Server;
pub use version_string::{version_string, VersionString};
pub use zkd_core::{SaslUsers, ZookeeperVersion};
