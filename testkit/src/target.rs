//! Chooses the server an end-to-end test runs against: an embedded zkd (default), a real
//! Apache ZooKeeper started by the harness (`ZKD_TEST_TARGET=zookeeper`), or any running
//! server (`ZKD_TEST_ADDR=host:port`). `ZKD_ZOOKEEPER_VERSION=3.8|3.9` (default 3.9) picks the
//! release both behave as: the embedded zkd's `zookeeper_version` and the oracle's release.

use std::net::SocketAddr;

use crate::oracle::Oracle;

/// A running server for one test. Dropping it stops whatever the harness started.
pub struct Target {
    addr: SocketAddr,
    kind: TargetKind,
    _guard: Guard,
}

/// Which implementation a [`Target`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    Zkd,
    ZooKeeper,
    External,
}

enum Guard {
    Zkd(zkd_server::Server),
    Oracle(Oracle),
    None,
}

impl Target {
    /// Starts the server selected by the environment (see the module docs).
    pub async fn start() -> Target {
        if let Ok(addr) = std::env::var("ZKD_TEST_ADDR") {
            let addr = addr
                .parse()
                .unwrap_or_else(|e| panic!("ZKD_TEST_ADDR={addr:?} is not host:port: {e}"));
            return Target {
                addr,
                kind: TargetKind::External,
                _guard: Guard::None,
            };
        }
        match std::env::var("ZKD_TEST_TARGET").as_deref() {
            Ok("zookeeper") => Self::start_zookeeper().await,
            Ok("zkd") | Err(_) => Self::start_zkd().await,
            Ok(other) => panic!("ZKD_TEST_TARGET={other:?}: expected `zkd` or `zookeeper`"),
        }
    }

    /// Starts an embedded zkd on a free loopback port, answering every four-letter word like
    /// the oracle does, behaving as the release `ZKD_ZOOKEEPER_VERSION` names.
    pub async fn start_zkd() -> Target {
        Self::start_zkd_with(zkd_server::Config {
            four_letter_whitelist: zkd_server::FourLetterWhitelist::All,
            zookeeper_version: crate::oracle::version_from_env(),
            ..whole_history(zkd_server::Config::default())
        })
        .await
    }

    /// Starts an embedded zkd with the given configuration (its port is forced to 0).
    pub async fn start_zkd_with(mut config: zkd_server::Config) -> Target {
        config.port = 0;
        let server = zkd_server::Server::start(config)
            .await
            .unwrap_or_else(|e| panic!("embedded zkd failed to start: {e}"));
        Target {
            addr: server.local_addr(),
            kind: TargetKind::Zkd,
            _guard: Guard::Zkd(server),
        }
    }

    /// Starts a real Apache ZooKeeper (the release `ZKD_ZOOKEEPER_VERSION` names) on a free
    /// loopback port.
    pub async fn start_zookeeper() -> Target {
        let oracle = Oracle::start().unwrap_or_else(|e| panic!("{e}"));
        Target {
            addr: oracle.addr(),
            kind: TargetKind::ZooKeeper,
            _guard: Guard::Oracle(oracle),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `host:port`, the connection string clients take.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    pub fn kind(&self) -> TargetKind {
        self.kind
    }

    /// The real ZooKeeper, when the harness started one.
    pub fn oracle(&self) -> Option<&Oracle> {
        match &self._guard {
            Guard::Oracle(o) => Some(o),
            _ => None,
        }
    }

    /// The embedded server, when the target is zkd.
    pub fn zkd(&self) -> Option<&zkd_server::Server> {
        match &self._guard {
            Guard::Zkd(s) => Some(s),
            _ => None,
        }
    }
}

/// An embedded zkd with `config` on a free client port and with the admin listener on a free
/// port; returns it and the admin address.
pub async fn zkd_with_admin(config: zkd_server::Config) -> (zkd_server::Server, SocketAddr) {
    let server = zkd_server::Server::start(zkd_server::Config {
        port: 0,
        admin_port: Some(0),
        ..config
    })
    .await
    .expect("embedded zkd with an admin listener");
    let admin = server.admin_addr().expect("admin address");
    (server, admin)
}

/// `config` with a history that holds a whole client suite (a million events, 64 MiB of
/// strings), so that the recipe checks read all of what the suite did. The rings grow only as
/// events come, so a short test pays for what it records.
pub fn whole_history(config: zkd_server::Config) -> zkd_server::Config {
    zkd_server::Config {
        history_events: 1 << 20,
        history_bytes: 64 << 20,
        ..config
    }
}
