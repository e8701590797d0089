//! The embeddable server handle (placeholder until the network layer lands).

use std::net::SocketAddr;

use crate::Config;

/// A running server. Dropping it stops the server.
pub struct Server {
    addr: SocketAddr,
}

impl Server {
    pub async fn start(config: Config) -> std::io::Result<Server> {
        let _ = config;
        Err(std::io::Error::other("zkd network layer not written yet"))
    }
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}
