//! zkd: an in-memory, ZooKeeper-wire-compatible coordination server, as a library first.

pub mod core;
mod config;
mod server;

pub use config::Config;
pub use server::Server;
