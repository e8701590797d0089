//! Server configuration: every knob the `zkd` binary exposes as a flag.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use zkd_protocol::FourLetterWord;

use crate::core::{AuthConfig, CoreConfig};
use crate::SaslUsers;

/// Connection expiry buckets are this wide, and a connection that has not completed its
/// handshake is expired after this long (`zookeeper.nio.sessionlessCnxnTimeout`).
pub const SESSIONLESS_CNXN_TIMEOUT_MS: i64 = 10_000;

/// Events the history keeps by default (on: it explains a failed test after the fact). With
/// [`DEFAULT_HISTORY_BYTES`], a full history takes about 0.7 MiB, which stays in one core's
/// cache: larger rings are written over from main memory and cost about 5 % of a busy
/// server's throughput (BENCHMARKS.md).
pub const DEFAULT_HISTORY_EVENTS: usize = 4096;

/// Bytes of strings the history keeps by default.
pub const DEFAULT_HISTORY_BYTES: usize = 256 << 10;

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
    /// `user:base64(sha1(user:password))` of the super user, if any.
    pub super_digest: Option<String>,
    /// Whether TTL nodes (opcode 21) can be created (default true).
    pub ttl_enabled: bool,
    /// How often containers and TTL nodes are checked for reaping (default 1 s).
    pub reaper_interval: Duration,
    /// Which four-letter words are answered (default: the words that disclose no paths,
    /// sessions or addresses and change nothing, [`FourLetterWord::DEFAULT`]).
    pub four_letter_whitelist: FourLetterWhitelist,
    /// Log a herd warning when one change notifies at least this many watchers (default 100;
    /// 0 = off).
    pub herd_warn: u64,
    /// Log a slow-step warning, and count it (`zkd_slow_steps`), when one step holds the
    /// core's lock longer than this (default 1 s; zero = off).
    pub slow_step_warn: Duration,
    /// Events the history keeps (docs/history.md); a full history drops its oldest. 0 turns
    /// it off. Default [`DEFAULT_HISTORY_EVENTS`].
    pub history_events: usize,
    /// Bytes the history's strings (paths, addresses) may take. Default
    /// [`DEFAULT_HISTORY_BYTES`].
    pub history_bytes: usize,
    /// Bytes that may wait in one connection's outbound queue. A client that lets more pile
    /// up (it does not read its socket) is disconnected. Default 64 MiB.
    pub max_outbound_bytes: usize,
    /// Port of the admin HTTP listener (control plane and reports); `None` = no listener
    /// (default), `Some(0)` = a free port. Needs the `admin` cargo feature (on by default).
    pub admin_port: Option<u16>,
    /// Address the admin listener binds (default 127.0.0.1). Anything but loopback is logged
    /// as a warning: the admin API can end sessions and change the tree.
    pub admin_bind: IpAddr,
    /// Port of a second, read-only admin listener that serves only ZooKeeper's AdminServer
    /// commands (`/commands`, `/commands/<name>`), as `admin.serverPort` does: no control
    /// plane, no web view. `None` (default) = no such listener, `Some(0)` = a free port.
    pub admin_server_port: Option<u16>,
    /// Address the read-only AdminServer listener binds (default 127.0.0.1).
    pub admin_server_bind: IpAddr,
    /// Host names (or addresses) the admin and AdminServer listeners answer to besides
    /// `localhost`, loopback addresses and the address a request came in on (default none).
    /// A request whose `Host` header names anything else is refused with 403, so a web page
    /// that points its own name at this machine (DNS rebinding) cannot use the listeners.
    pub admin_allow_hosts: Vec<String>,
    /// Directory for snapshots and transaction logs in ZooKeeper's layout
    /// (`DIR/version-2/`); `None` (default) keeps everything in memory only.
    pub data_dir: Option<PathBuf>,
    /// Transactions between two automatic snapshots (default 100000).
    pub snap_count: u64,
    /// Time between two automatic snapshots, taken only when something changed; `None`
    /// (default) = no timed snapshots.
    pub snap_interval: Option<Duration>,
    /// When the transaction log is synced to disk (default `batch`).
    pub fsync: FsyncPolicy,
    /// A sync of the transaction log taking longer than this many milliseconds is logged as
    /// a warning and counted (`fsync.warningthresholdms`, default 1000).
    pub fsync_warning_threshold_ms: i64,
    /// Snapshots kept in the data directory, with the logs they need (default 3, minimum 1).
    pub snap_retain_count: usize,
    /// Start even when the data directory is damaged, giving up the transactions from the
    /// first damage on (the damaged and later files are set aside, and what was dropped is
    /// logged). Off by default: damage other than an incomplete final log entry stops the
    /// start.
    pub recover_truncate: bool,
    /// Nodes created at start (a fixture; see `fixture::from_json` for the JSON form). With a
    /// data directory they are created only when it holds no state yet.
    pub seed: Vec<crate::core::FixtureNode>,
    /// Port of the secure (TLS) client listener, on the same `bind` address; `None` = none
    /// (default), `Some(0)` = a free port. Needs `tls` and the `tls` cargo feature.
    pub secure_port: Option<u16>,
    /// Certificates for the secure port.
    pub tls: Option<TlsConfig>,
    /// Listen on the secure port only, with no plain client port (ZooKeeper with
    /// `secureClientPort` and no `clientPort`); `port` is then unused. Needs `secure_port`.
    pub secure_only: bool,
    /// Subject DN (as the x509 scheme writes it) of the x509 super user.
    pub x509_super_user: Option<String>,
    /// Users of SASL DIGEST-MD5 (opcode 102); `None` = SASL not configured.
    pub sasl_users: Option<SaslUsers>,
    /// SASL user name that is super user (`zookeeper.superUser`).
    pub sasl_super_user: Option<String>,
    /// Authentication schemes (`sasl`, `x509`, `digest`, `ip`) one of which a connection must
    /// have authenticated with before any request but auth and SASL is served; others are
    /// answered SESSIONCLOSEDREQUIRESASLAUTH and the connection is closed. Empty (default) =
    /// not enforced. ZooKeeper: `enforce.auth.enabled` with `enforce.auth.schemes`, or
    /// `sessionRequireClientSASLAuth=true` for `["sasl"]`.
    pub enforce_auth_schemes: Vec<String>,
    /// What drives session expiry, TTL expiry and the container reaper: real monotonic time
    /// (default), or a virtual clock that only the control plane's `advance` moves.
    pub clock: ClockMode,
    /// Bytes of input buffers all connections together may hold (partial requests not yet
    /// complete). A connection whose buffer would have to grow past it is closed. Each
    /// connection's buffer also stays within one largest frame plus 8 KiB. Default 256 MiB.
    pub max_total_input_bytes: usize,
    /// Bytes of unwritten replies and notifications all connections together may hold. Past
    /// it, the connections holding the most are dropped first. Default 256 MiB.
    pub max_total_outbound_bytes: usize,
    /// A simulated ensemble: several members, each with its own client listener, serving
    /// this one server's state (see [`EnsembleConfig`]). `None` (default) = one standalone
    /// server on `port`.
    pub ensemble: Option<EnsembleConfig>,
    /// Whether `reconfig` may change the ensemble's membership (`reconfigEnabled`, default
    /// false: the request is answered RECONFIGDISABLED). Only a superuser may reconfigure.
    pub reconfig_enabled: bool,
    /// The ZooKeeper release line to behave as where 3.8 and 3.9 differ (default 3.9).
    pub zookeeper_version: crate::ZookeeperVersion,
}

/// The members of a simulated ensemble (`--ensemble N`, or `server.N` lines of a zoo.cfg).
/// Every member listens on its own client port on [`Config::bind`]; all of them serve the
/// one state machine, so every change is still applied in one order. Member ids are
/// ZooKeeper's server ids (`myid`, 1..=255). Equally up to date at start, the voting member
/// with the highest id is elected leader, as in ZooKeeper. Observers serve clients like the
/// others but do not vote: the quorum is a majority of the voting members alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnsembleConfig {
    /// The members, each id once.
    pub members: Vec<MemberConfig>,
    /// Whether members that lost quorum serve clients that asked for read-only mode
    /// (`readonlymode.enabled`); when false they close client connections until quorum
    /// returns. On by default with `--ensemble`.
    pub read_only: bool,
    /// `initLimit` and `syncLimit` in ticks, as a zoo.cfg gives them; `conf` shows them. With
    /// [`ElectionTiming::ZooKeeper`], `syncLimit × tickTime` is how long a member takes to
    /// notice a lost leader or quorum. 10 and 5 by default, the values of the sample
    /// configuration ZooKeeper ships.
    pub init_limit: i32,
    pub sync_limit: i32,
    /// How long members take to notice a lost leader or quorum and to elect: at once
    /// (`--ensemble N`'s default, and [`EnsembleConfig::numbered`]'s) or as ZooKeeper does
    /// (the default of an ensemble a zoo.cfg's `server.N` lines describe).
    pub election_timing: ElectionTiming,
    /// ZooKeeper's `localSessionsEnabled`: a session starts local to the member it connected
    /// to, known to no other (it cannot move: a client that reconnects elsewhere is told it
    /// expired, and it ends when its member stops or changes how it serves), and costs no
    /// transaction. Off by default, as in ZooKeeper. Read-only members' sessions are local
    /// either way.
    pub local_sessions: bool,
    /// ZooKeeper's `localSessionsUpgradingEnabled`: a local session's first ephemeral makes
    /// it global (a session transaction first); without it that create fails with
    /// EPHEMERALONLOCALSESSION. Off by default, as in ZooKeeper.
    pub local_sessions_upgrading: bool,
    /// The version of a membership a reconfig made before this start (the zxid of that
    /// reconfig), when `members` come from its dynamic configuration file; `None` = the
    /// static membership (version 0, or the first epoch's zxid with reconfig enabled).
    pub kept_version: Option<i64>,
    /// Where each membership a reconfig commits is kept, as ZooKeeper's dynamic
    /// configuration file `zoo.cfg.dynamic.<version in hex>` (its `server.N=` lines, sorted;
    /// older ones are removed), so that a restart starts from it. `None` (default) = not kept;
    /// the `zkd` binary sets its data directory.
    pub membership_dir: Option<PathBuf>,
}

/// The file name a membership of `version` is kept under (see
/// [`EnsembleConfig::membership_dir`]): ZooKeeper's `zoo.cfg.dynamic.<hex>`.
pub fn dynamic_file_name(version: i64) -> String {
    format!("{DYNAMIC_FILE_PREFIX}{version:x}")
}

/// What every kept membership file's name starts with.
pub const DYNAMIC_FILE_PREFIX: &str = "zoo.cfg.dynamic.";

/// How long a simulated ensemble's members take to notice a lost leader or quorum and to
/// elect a new leader (docs/ensembles.md, "Failover timing").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ElectionTiming {
    /// Everything at once: a partition or a stopped leader takes effect in the call that
    /// makes it, and the followers of a stopped leader keep their clients. For fast tests.
    #[default]
    Instant,
    /// As ZooKeeper: a leader cut off from its quorum keeps its clients for `syncLimit ×
    /// tickTime`, then steps down; a follower that loses its leader notices after as long
    /// (at once when the leader stopped) and drops its clients; an election takes
    /// ZooKeeper's finalize wait (200 ms) once a majority looks for a leader.
    ZooKeeper,
}

impl ElectionTiming {
    /// `instant` or `zookeeper`, as `--election-timing` takes them.
    pub fn parse(text: &str) -> Result<ElectionTiming, String> {
        match text {
            "instant" => Ok(ElectionTiming::Instant),
            "zookeeper" => Ok(ElectionTiming::ZooKeeper),
            other => Err(format!(
                "election timing {other:?}: give instant or zookeeper"
            )),
        }
    }
}

/// One member of a simulated ensemble.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberConfig {
    /// The server id (1..=255).
    pub id: u64,
    /// Its client port; 0 picks a free one.
    pub port: u16,
    /// An observer (`server.N=...:observer`): it serves clients and applies every change,
    /// but takes no part in elections and does not count for the quorum.
    pub observer: bool,
}

impl EnsembleConfig {
    /// `initLimit` and `syncLimit` of an ensemble whose configuration does not give them.
    pub const DEFAULT_LIMITS: (i32, i32) = (10, 5);

    /// `n` members with ids 1..=n: with `port` 0 each gets a free port, otherwise member
    /// `i` listens on `port + i - 1` (the `--ensemble N` scheme). Read-only mode on.
    pub fn numbered(n: u64, port: u16) -> Result<EnsembleConfig, String> {
        if !(1..=255).contains(&n) {
            return Err(format!("an ensemble has 1 to 255 members, not {n}"));
        }
        let members = (1..=n)
            .map(|id| {
                let port = if port == 0 {
                    Ok(0)
                } else {
                    u16::try_from(u64::from(port) + id - 1).map_err(|_| {
                        format!(
                            "member {id} would listen on port {} + {}, past 65535",
                            port,
                            id - 1
                        )
                    })
                };
                port.map(|port| MemberConfig {
                    id,
                    port,
                    observer: false,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(EnsembleConfig {
            members,
            read_only: true,
            init_limit: Self::DEFAULT_LIMITS.0,
            sync_limit: Self::DEFAULT_LIMITS.1,
            kept_version: None,
            membership_dir: None,
            local_sessions: false,
            local_sessions_upgrading: false,
            election_timing: ElectionTiming::Instant,
        })
    }

    /// ZooKeeper's failover timing ([`ElectionTiming::ZooKeeper`]) with `sync_limit` ticks.
    pub fn with_zookeeper_timing(mut self, sync_limit: i32) -> EnsembleConfig {
        self.sync_limit = sync_limit;
        self.election_timing = ElectionTiming::ZooKeeper;
        self
    }

    /// Makes the last `k` members (by id) observers (`--observers K`); at least one member
    /// must stay a voting one.
    pub fn with_observers(mut self, k: u64) -> Result<EnsembleConfig, String> {
        let n = self.members.len() as u64;
        if k >= n {
            return Err(format!(
                "{k} observers in an ensemble of {n} members would leave no voting member; \
                 at most {} can observe",
                n.saturating_sub(1)
            ));
        }
        self.members.sort_by_key(|m| m.id);
        let voters = (n - k) as usize;
        for (i, m) in self.members.iter_mut().enumerate() {
            m.observer = i >= voters;
        }
        Ok(self)
    }

    /// Checks the member list; the message says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.members.is_empty() {
            return Err("an ensemble needs at least one member".into());
        }
        if self.members.iter().all(|m| m.observer) {
            return Err(
                "an ensemble of observers only has no one to observe: at least one member \
                 must vote"
                    .into(),
            );
        }
        let mut ids = BTreeSet::new();
        let mut ports = BTreeSet::new();
        for m in &self.members {
            if !(1..=255).contains(&m.id) {
                return Err(format!("member id {} is outside 1..=255", m.id));
            }
            if !ids.insert(m.id) {
                return Err(format!("member id {} is given twice", m.id));
            }
            if m.port != 0 && !ports.insert(m.port) {
                return Err(format!(
                    "client port {} is given to two members; each member needs its own",
                    m.port
                ));
            }
        }
        Ok(())
    }
}

/// The session clock's source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClockMode {
    /// Monotonic real time.
    #[default]
    Real,
    /// A virtual clock, moved only by `advance_clock` / `POST /zkd/clock/advance`.
    Manual,
}

/// When the transaction log is synced to disk, and so what a crash can lose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Every transaction is synced before its reply is sent: nothing acknowledged is lost,
    /// even on power loss.
    Always,
    /// Every transaction is written to the OS before its reply is sent (a killed zkd loses
    /// nothing) and synced within 100 ms (power loss or an OS crash loses at most the last
    /// 100 ms of acknowledged writes).
    #[default]
    Batch,
    /// Written to the OS before the reply, never synced by zkd: a killed zkd loses nothing,
    /// an OS crash loses whatever the OS had not yet written back (Linux: typically up to
    /// 30 s).
    Never,
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "always" => Ok(FsyncPolicy::Always),
            "batch" => Ok(FsyncPolicy::Batch),
            "never" => Ok(FsyncPolicy::Never),
            _ => Err(format!(
                "unknown fsync policy {s:?}: expected always, batch or never"
            )),
        }
    }
}

/// Whether the secure port asks clients for a certificate (ZooKeeper's `ssl.clientAuth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// A verified client certificate is required.
    Need,
    /// A certificate is asked for; clients without one are admitted (without x509 identity).
    Want,
    /// No certificate is asked for.
    None,
}

impl std::str::FromStr for ClientAuth {
    type Err = String;
    fn from_str(s: &str) -> Result<ClientAuth, String> {
        match s.to_ascii_lowercase().as_str() {
            "need" => Ok(ClientAuth::Need),
            "want" => Ok(ClientAuth::Want),
            "none" => Ok(ClientAuth::None),
            _ => Err(format!("{s:?} is not one of need, want, none")),
        }
    }
}

/// PEM files of the secure port.
#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// The server's certificate chain (PEM, leaf first).
    pub cert: PathBuf,
    /// The server's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates client certificates are verified against (PEM bundle).
    pub client_ca: Option<PathBuf>,
    /// Whether to ask for client certificates; needs `client_ca` unless `None`.
    pub client_auth: ClientAuth,
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
            super_digest: None,
            ttl_enabled: true,
            reconfig_enabled: false,
            reaper_interval: Duration::from_millis(1000),
            four_letter_whitelist: FourLetterWhitelist::default(),
            herd_warn: 100,
            slow_step_warn: Duration::from_secs(1),
            history_events: DEFAULT_HISTORY_EVENTS,
            history_bytes: DEFAULT_HISTORY_BYTES,
            max_outbound_bytes: 64 << 20,
            admin_port: None,
            admin_bind: IpAddr::from([127, 0, 0, 1]),
            admin_server_port: None,
            admin_server_bind: IpAddr::from([127, 0, 0, 1]),
            admin_allow_hosts: Vec::new(),
            data_dir: None,
            snap_count: 100_000,
            snap_interval: None,
            fsync: FsyncPolicy::default(),
            fsync_warning_threshold_ms: 1000,
            snap_retain_count: 3,
            recover_truncate: false,
            seed: Vec::new(),
            clock: ClockMode::Real,
            max_total_input_bytes: 256 << 20,
            max_total_outbound_bytes: 256 << 20,
            secure_port: None,
            tls: None,
            secure_only: false,
            x509_super_user: None,
            sasl_users: None,
            sasl_super_user: None,
            ensemble: None,
            enforce_auth_schemes: Vec::new(),
            zookeeper_version: crate::ZookeeperVersion::default(),
        }
    }
}

impl Config {
    /// The effective minimum session timeout.
    pub fn min_session_timeout(&self) -> Duration {
        self.min_session_timeout.unwrap_or(self.tick_time * 2)
    }

    /// The effective maximum session timeout.
    pub fn max_session_timeout(&self) -> Duration {
        self.max_session_timeout.unwrap_or(self.tick_time * 20)
    }

    /// Checks the settings for contradictions; the message says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.tick_time.as_millis() == 0 {
            return Err("tick time must be at least 1 ms".into());
        }
        self.check_time_ranges()?;
        if self.min_session_timeout() < self.tick_time {
            return Err(format!(
                "minimum session timeout ({} ms) is below one tick ({} ms): sessions expire on \
                 tick boundaries, so no shorter timeout can be kept; raise the minimum session \
                 timeout or lower the tick time",
                self.min_session_timeout().as_millis(),
                self.tick_time.as_millis()
            ));
        }
        if self.min_session_timeout() > self.max_session_timeout() {
            return Err(format!(
                "minimum session timeout ({} ms) is larger than the maximum ({} ms): \
                 minSessionTimeout must not be larger than maxSessionTimeout \
                 (--min-session-timeout, --max-session-timeout)",
                self.min_session_timeout().as_millis(),
                self.max_session_timeout().as_millis()
            ));
        }
        if self.max_frame_len == 0 || self.max_frame_len > i32::MAX as usize {
            return Err(format!(
                "max frame length {} is outside 1..=2147483647",
                self.max_frame_len
            ));
        }
        if self.max_total_input_bytes < self.max_frame_len.saturating_add(4) {
            return Err(format!(
                "the server-wide input limit ({} bytes) is smaller than one largest frame \
                 ({} bytes plus its 4-byte length)",
                self.max_total_input_bytes, self.max_frame_len
            ));
        }
        if self.max_outbound_bytes == 0 || self.max_total_outbound_bytes == 0 {
            return Err("outbound limits must be at least 1 byte".into());
        }
        if self.reaper_interval.as_millis() == 0 {
            return Err("reaper interval must be at least 1 ms".into());
        }
        if (self.admin_port.is_some() || self.admin_server_port.is_some())
            && !cfg!(feature = "admin")
        {
            return Err("an admin port was asked for, but zkd-server was built without its \"admin\" feature".into());
        }
        for host in &self.admin_allow_hosts {
            if !valid_allow_host(host) {
                return Err(format!(
                    "admin allowed host {host:?} is not a host name or address (letters, digits, \
                     '-' and '.', or an IP address; no port, scheme or path)"
                ));
            }
        }
        if self.snap_count == 0 {
            return Err("snap count must be at least 1".into());
        }
        if self.snap_interval.is_some_and(|d| d.is_zero()) {
            return Err("snap interval must be at least 1 ms".into());
        }
        if self.snap_retain_count == 0 {
            return Err("snapshots to retain must be at least 1".into());
        }
        if self.secure_only && self.secure_port.is_none() {
            return Err("secure-only mode needs a secure port (--secure-port)".into());
        }
        if self.secure_port.is_some() {
            if !cfg!(feature = "tls") {
                return Err("a secure port was asked for, but zkd-server was built without its \"tls\" feature".into());
            }
            let Some(tls) = &self.tls else {
                return Err(
                    "a secure port needs a server certificate and key (--tls-cert, --tls-key)"
                        .into(),
                );
            };
            if tls.client_auth != ClientAuth::None && tls.client_ca.is_none() {
                return Err("client certificate verification (need or want) needs a CA bundle (--tls-client-ca)".into());
            }
        }
        if let Some(e) = &self.ensemble {
            e.validate()?;
            if self.secure_port.is_some() {
                return Err("a secure port cannot be combined with an ensemble yet".into());
            }
        }
        for scheme in &self.enforce_auth_schemes {
            let available = match scheme.as_str() {
                "digest" | "ip" => true,
                "x509" => self.secure_port.is_some(),
                "sasl" => self.sasl_users.is_some(),
                _ => false,
            };
            if !available {
                return Err(format!(
                    "authentication scheme {scheme:?} cannot be enforced: it is not available \
                     (digest and ip always are, x509 with a secure port, sasl with SASL users)"
                ));
            }
        }
        if let Some(d) = &self.super_digest {
            if !d.contains(':') {
                return Err(format!("super digest {d:?} is not of the form user:hash"));
            }
        }
        self.check_ports()
    }

    /// Every listener zkd will open, as (address, port, what it is and which option sets
    /// it); ports of 0 (a free one each) are left out.
    fn listeners(&self) -> Vec<(IpAddr, u16, String)> {
        let mut all = Vec::new();
        match (&self.ensemble, self.secure_only) {
            (Some(e), _) => {
                for m in &e.members {
                    all.push((
                        self.bind,
                        m.port,
                        format!(
                            "member {}'s client port (member i listens on --port + i - 1, or \
                             on its server.{} line's port)",
                            m.id, m.id
                        ),
                    ));
                }
            }
            (None, false) => all.push((
                self.bind,
                self.port,
                "the client port (--port, clientPort)".into(),
            )),
            (None, true) => {}
        }
        if let Some(p) = self.secure_port {
            all.push((
                self.bind,
                p,
                "the secure client port (--secure-port, secureClientPort)".into(),
            ));
        }
        if let Some(p) = self.admin_port {
            all.push((
                self.admin_bind,
                p,
                "the control plane's port (--admin-port)".into(),
            ));
        }
        if let Some(p) = self.admin_server_port {
            all.push((
                self.admin_server_bind,
                p,
                "the AdminServer's port (--admin-server-port, admin.serverPort)".into(),
            ));
        }
        all.retain(|(_, port, _)| *port != 0);
        all
    }

    /// No two listeners on one port of one address (an unspecified address, 0.0.0.0 or ::,
    /// overlaps every other): the clash is named before anything is bound, rather than as
    /// the second bind's "address in use".
    fn check_ports(&self) -> Result<(), String> {
        let all = self.listeners();
        let overlap = |a: IpAddr, b: IpAddr| a == b || a.is_unspecified() || b.is_unspecified();
        // At most 255 members and three more listeners: the pairs stay few.
        for (i, (a_ip, a_port, a_what)) in all.iter().enumerate() {
            for (b_ip, b_port, b_what) in &all[i + 1..] {
                if a_port == b_port && overlap(*a_ip, *b_ip) {
                    return Err(format!(
                        "port {a_port} is given twice: {a_what} on {a_ip} and {b_what} on \
                         {b_ip}; give each listener a port of its own"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every time value, given or derived, must fit the 32-bit milliseconds the protocol
    /// and ZooKeeper's settings use (session timeouts travel as an int of ms): larger ones
    /// would wrap (a tick of 2147483647 ms made every session timeout -2). The message names
    /// the flag, the zoo.cfg key and the container variable.
    fn check_time_ranges(&self) -> Result<(), String> {
        const MAX: u128 = i32::MAX as u128;
        let ms = |d: Duration| d.as_millis();
        let too_long = |what: &str, names: &str, value: u128| {
            format!(
                "{what} of {value} ms is too long ({names}): time values must fit 32-bit \
                 milliseconds, at most {MAX} ms (about 24.8 days)"
            )
        };
        if ms(self.tick_time) > MAX {
            return Err(too_long(
                "a tick time",
                "--tick-time, tickTime, ZOO_TICK_TIME",
                ms(self.tick_time),
            ));
        }
        for (given, ticks, what, names) in [
            (
                self.max_session_timeout,
                20,
                "a maximum session timeout",
                "--max-session-timeout, maxSessionTimeout",
            ),
            (
                self.min_session_timeout,
                2,
                "a minimum session timeout",
                "--min-session-timeout, minSessionTimeout",
            ),
        ] {
            match given {
                Some(d) if ms(d) > MAX => return Err(too_long(what, names, ms(d))),
                Some(_) => {}
                None if ms(self.tick_time) * ticks > MAX => {
                    return Err(format!(
                        "a tick time of {} ms is too long (--tick-time, tickTime, \
                         ZOO_TICK_TIME): {what} defaults to {ticks} ticks, {} ms, which does \
                         not fit 32-bit milliseconds (at most {MAX} ms); use a tick of at most \
                         {} ms or set the timeout ({names})",
                        ms(self.tick_time),
                        ms(self.tick_time) * ticks,
                        MAX / ticks
                    ))
                }
                None => {}
            }
        }
        if ms(self.reaper_interval) > MAX {
            return Err(too_long(
                "a reaper interval",
                "--reaper-interval, znode.container.checkIntervalMs",
                ms(self.reaper_interval),
            ));
        }
        if let Some(d) = self.snap_interval.filter(|d| ms(*d) > MAX) {
            return Err(too_long("a snapshot interval", "--snap-interval", ms(d)));
        }
        Ok(())
    }

    /// The core's settings.
    pub fn core_config(&self) -> CoreConfig {
        CoreConfig {
            tick_ms: millis(self.tick_time),
            min_session_timeout_ms: millis(self.min_session_timeout()),
            max_session_timeout_ms: millis(self.max_session_timeout()),
            max_client_cnxns: self.max_client_cnxns,
            super_digest: self.super_digest.clone(),
            ttl_enabled: self.ttl_enabled,
            reaper_interval_ms: millis(self.reaper_interval),
            herd_warn: self.herd_warn,
            zookeeper_version: self.zookeeper_version,
            auth: AuthConfig {
                x509: self.secure_port.is_some(),
                x509_super_user: self.x509_super_user.clone(),
                sasl_users: self.sasl_users.clone().map(Arc::new),
                sasl_super_user: self.sasl_super_user.clone(),
                nonce_seed: random_seed(),
                enforce_schemes: self.enforce_auth_schemes.clone(),
            },
            reconfig_enabled: self.reconfig_enabled,
        }
    }
}

/// 16 random bytes (zero only if the system has no random source).
fn random_seed() -> [u8; 16] {
    let mut seed = [0u8; 16];
    if getrandom::getrandom(&mut seed).is_err() {
        tracing::warn!("no system random source: SASL nonces are predictable");
    }
    seed
}

/// Whether `host` can name this server in a `Host` header: a DNS name (letters, digits, `-`
/// and `.`) or an IP address, without port, scheme or path.
fn valid_allow_host(host: &str) -> bool {
    let name = host.strip_suffix('.').unwrap_or(host);
    host.parse::<IpAddr>().is_ok()
        || (!name.is_empty()
            && name.len() <= 253
            && name.split('.').all(|l| {
                !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            }))
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The four-letter words a server answers (`4lw.commands.whitelist`). `srvr` is always
/// answered, as in ZooKeeper (its status scripts rely on it); the others get "… is not in the
/// whitelist".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FourLetterWhitelist {
    /// Every word (`*`).
    All,
    /// Only these words.
    Only(BTreeSet<FourLetterWord>),
}

impl Default for FourLetterWhitelist {
    /// The words that disclose no paths, session ids or client addresses and change no state.
    fn default() -> Self {
        FourLetterWhitelist::Only(FourLetterWord::DEFAULT.into_iter().collect())
    }
}

impl FourLetterWhitelist {
    /// Parses a comma-separated list; `*` anywhere in it means all words. Blank entries are
    /// ignored; an entry that is not a four-letter word is an error naming it.
    pub fn parse(list: &str) -> Result<FourLetterWhitelist, String> {
        let mut words = BTreeSet::new();
        let mut all = false;
        for w in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            if w == "*" {
                all = true;
                continue;
            }
            let word = w.parse::<FourLetterWord>().map_err(|_| {
                format!(
                    "unknown four-letter word {w:?} in the whitelist (known words: {})",
                    FourLetterWord::ALL.map(FourLetterWord::as_str).join(", ")
                )
            })?;
            words.insert(word);
        }
        Ok(if all {
            FourLetterWhitelist::All
        } else {
            FourLetterWhitelist::Only(words)
        })
    }

    /// Whether `word` is answered.
    pub fn allows(&self, word: FourLetterWord) -> bool {
        match self {
            FourLetterWhitelist::All => true,
            FourLetterWhitelist::Only(words) => {
                word == FourLetterWord::Srvr || words.contains(&word)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitelist_parsing() {
        use FourLetterWord as W;
        assert_eq!(
            FourLetterWhitelist::parse("*"),
            Ok(FourLetterWhitelist::All)
        );
        assert_eq!(
            FourLetterWhitelist::parse("ruok, *"),
            Ok(FourLetterWhitelist::All)
        );
        let w = FourLetterWhitelist::parse(" ruok , mntr,,").expect("valid list");
        assert!(w.allows(W::Ruok) && w.allows(W::Mntr));
        assert!(!w.allows(W::Stat) && w.allows(W::Srvr));
        let none = FourLetterWhitelist::parse("").expect("empty list");
        assert!(none.allows(W::Srvr) && !none.allows(W::Ruok));
        let err = FourLetterWhitelist::parse("ruok,kill").expect_err("unknown word");
        assert!(err.contains("\"kill\""), "{err}");
    }

    #[test]
    fn time_values_that_overflow_32_bit_milliseconds_are_refused() {
        let tick = |ms: u64| Config {
            tick_time: Duration::from_millis(ms),
            ..Config::default()
        };
        let e = tick(2_147_483_647).validate().expect_err("overflows");
        assert!(e.contains("tickTime") && e.contains("--tick-time"), "{e}");
        // 20 ticks must fit: the largest tick with default timeouts.
        assert!(tick(107_374_182).validate().is_ok());
        assert!(tick(107_374_183).validate().is_err());
        let c = Config {
            max_session_timeout: Some(Duration::from_millis(1 << 31)),
            ..Config::default()
        };
        let e = c.validate().expect_err("overflows");
        assert!(e.contains("maxSessionTimeout"), "{e}");
        let c = Config {
            reaper_interval: Duration::from_millis(u64::MAX),
            ..Config::default()
        };
        assert!(c.validate().is_err());
        let c = Config {
            snap_interval: Some(Duration::from_millis(u64::MAX)),
            ..Config::default()
        };
        assert!(c.validate().unwrap_err().contains("--snap-interval"));
    }

    #[test]
    fn default_whitelist_holds_only_words_that_disclose_nothing() {
        use FourLetterWord as W;
        let d = FourLetterWhitelist::default();
        for w in [W::Ruok, W::Srvr, W::Mntr, W::Conf, W::Wchs] {
            assert!(d.allows(w), "{w}");
        }
        for w in [
            W::Dump,
            W::Cons,
            W::Stat,
            W::Wchc,
            W::Wchp,
            W::Envi,
            W::Crst,
            W::Srst,
            W::Stmk,
        ] {
            assert!(!d.allows(w), "{w}");
        }
    }

    #[test]
    fn timeouts_default_to_tick_multiples() {
        let c = Config {
            tick_time: Duration::from_millis(500),
            ..Config::default()
        };
        let core = c.core_config();
        assert_eq!(core.tick_ms, 500);
        assert_eq!(core.min_session_timeout_ms, 1000);
        assert_eq!(core.max_session_timeout_ms, 10_000);
        assert_eq!(core.reaper_interval_ms, 1000);
        assert!(core.ttl_enabled);
    }

    #[test]
    #[cfg(feature = "admin")]
    fn ports_given_twice_are_named_before_binding() {
        let ensemble = Config {
            port: 27700,
            admin_port: Some(27701),
            ensemble: Some(EnsembleConfig::numbered(3, 27700).unwrap()),
            ..Config::default()
        };
        let e = ensemble.validate().unwrap_err();
        assert_eq!(
            e,
            "port 27701 is given twice: member 2's client port (member i listens on --port + \
             i - 1, or on its server.2 line's port) on 127.0.0.1 and the control plane's port \
             (--admin-port) on 127.0.0.1; give each listener a port of its own"
        );
        let plain = Config {
            port: 2181,
            admin_server_port: Some(2181),
            admin_server_bind: "0.0.0.0".parse().unwrap(),
            ..Config::default()
        };
        let e = plain.validate().unwrap_err();
        assert!(
            e.starts_with("port 2181 is given twice: the client port (--port, clientPort)")
                && e.contains(
                    "the AdminServer's port (--admin-server-port, admin.serverPort) on 0.0.0.0"
                ),
            "{e}"
        );
        // Different addresses, free ports (0) and different ports are fine.
        let apart = Config {
            port: 2181,
            admin_port: Some(2181),
            admin_bind: "127.0.0.2".parse().unwrap(),
            admin_server_port: Some(0),
            ..Config::default()
        };
        assert_eq!(apart.validate(), Ok(()));
        let free = Config {
            port: 0,
            admin_port: Some(0),
            admin_server_port: Some(0),
            ensemble: Some(EnsembleConfig::numbered(3, 0).unwrap()),
            ..Config::default()
        };
        assert_eq!(free.validate(), Ok(()));
    }

    #[test]
    fn validation() {
        assert!(Config::default().validate().is_ok());
        for floor_breach in [0, 1, 1999] {
            let bad = Config {
                min_session_timeout: Some(Duration::from_millis(floor_breach)),
                ..Config::default()
            };
            let err = bad.validate().unwrap_err();
            assert!(err.contains("below one tick (2000 ms)"), "{err}");
        }
        let at_floor = Config {
            min_session_timeout: Some(Duration::from_millis(2000)),
            ..Config::default()
        };
        assert!(at_floor.validate().is_ok());
        let bad = Config {
            min_session_timeout: Some(Duration::from_secs(50)),
            ..Config::default()
        };
        assert!(bad.validate().is_err());
        let bad = Config {
            max_frame_len: 0,
            ..Config::default()
        };
        assert!(bad.validate().is_err());
        let bad = Config {
            super_digest: Some("nocolon".into()),
            ..Config::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn the_last_members_observe_and_at_least_one_votes() {
        let e = EnsembleConfig::numbered(5, 0)
            .and_then(|e| e.with_observers(2))
            .expect("three voters, two observers");
        let observers: Vec<bool> = e.members.iter().map(|m| m.observer).collect();
        assert_eq!(observers, [false, false, false, true, true]);
        assert!(e.validate().is_ok());
        let err = EnsembleConfig::numbered(2, 0)
            .and_then(|e| e.with_observers(2))
            .unwrap_err();
        assert!(err.contains("would leave no voting member"), "{err}");
        let mut all = EnsembleConfig::numbered(2, 0).expect("two");
        all.members.iter_mut().for_each(|m| m.observer = true);
        assert!(all.validate().unwrap_err().contains("at least one member"));
    }
}
