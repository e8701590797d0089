//! Server configuration: every knob the `zkd` binary exposes as a flag.

use std::net::IpAddr;
use std::time::Duration;

/// Configuration for one server instance.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to bind (default 127.0.0.1).
    pub bind: IpAddr,
    /// TCP port; 0 picks a free one.
    pub port: u16,
    /// Tick length; session expiry happens on tick boundaries.
    pub tick_time: Duration,
    /// Lower bound for negotiated session timeouts (default 2 × tick).
    pub min_session_timeout: Option<Duration>,
    /// Upper bound for negotiated session timeouts (default 20 × tick).
    pub max_session_timeout: Option<Duration>,
    /// Maximum concurrent connections per client IP; 0 = unlimited.
    pub max_client_cnxns: u32,
    /// Largest frame payload accepted (jute.maxbuffer).
    pub max_frame_len: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 2181,
            tick_time: Duration::from_millis(2000),
            min_session_timeout: None,
            max_session_timeout: None,
            max_client_cnxns: 60,
            max_frame_len: 0xFFFFF,
        }
    }
}
