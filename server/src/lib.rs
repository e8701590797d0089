//! zkd: an in-memory, ZooKeeper-wire-compatible coordination server, as a library first.

pub mod core;
pub mod fourlw;
mod config;
mod net;
mod server;

pub use config::{Config, FourLetterWhitelist};
pub use server::Server;
