//! `zkd [FLAGS]`: run the server with the given flags until SIGINT or SIGTERM.

use std::io::{IsTerminal as _, Write as _};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use zkd_server::{
    ClientAuth, ClockMode, Config, EnsembleConfig, FourLetterWhitelist, SaslUsers, Server,
    TlsConfig, ZookeeperVersion,
};

/// The server's flags.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Read a ZooKeeper configuration file (zoo.cfg format) with ZooKeeper's defaults; flags
    /// given on the command line override it.
    #[arg(long, value_name = "FILE", conflicts_with = "env_config")]
    config: Option<PathBuf>,

    /// Read the official ZooKeeper image's ZOO_* variables (and Confluent's ZOOKEEPER_*) as
    /// that image does; flags given on the command line override them.
    #[arg(long)]
    env_config: bool,

    /// TCP port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 2181)]
    port: u16,

    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,

    /// Tick length in ms; sessions expire on tick boundaries.
    #[arg(long, value_name = "MS", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    tick_time: u64,

    /// Smallest negotiated session timeout in ms [default: 2 × tick time].
    #[arg(long, value_name = "MS")]
    min_session_timeout: Option<u64>,

    /// Largest negotiated session timeout in ms [default: 20 × tick time].
    #[arg(long, value_name = "MS")]
    max_session_timeout: Option<u64>,

    /// Most concurrent connections from one client IP; 0 = unlimited.
    #[arg(long, default_value_t = 60)]
    max_client_cnxns: u32,

    /// Largest frame payload accepted, in bytes (jute.maxbuffer).
    #[arg(long, value_name = "BYTES", default_value_t = 0xFFFFF,
          value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    max_frame_len: u32,

    /// Super user as `user:base64(sha1(user:password))`; it passes every ACL check.
    #[arg(long, value_name = "USER:HASH")]
    super_digest: Option<String>,

    /// Let a superuser change an ensemble's membership with `reconfig` (ZooKeeper's
    /// `reconfigEnabled`); without it the request is answered RECONFIGDISABLED.
    #[arg(long)]
    reconfig_enabled: bool,

    /// Disable TTL nodes (creates with a TTL fail with UNIMPLEMENTED).
    #[arg(long)]
    no_ttl: bool,

    /// How often containers and TTL nodes are checked for removal, in ms.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    reaper_interval: u64,

    /// Four-letter words to answer: a comma-separated list, or `*` for all (`srvr` is always
    /// answered) [default: the words that disclose no paths, sessions or addresses and change
    /// nothing: ruok,isro,srvr,mntr,wchs,dirs,conf,gtmk,hash].
    #[arg(long = "4lw-whitelist", value_name = "WORDS")]
    four_letter_whitelist: Option<String>,

    /// Log a herd warning when one change notifies at least N watchers; 0 = off.
    #[arg(long, value_name = "N", default_value_t = 100)]
    herd_warn: u64,

    /// Log a slow-step warning (with the request's opcode and path) and count it in `mntr`'s
    /// `zk_zkd_slow_steps` when one step holds the core's lock longer than N ms; 0 = off.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    slow_step_warn_ms: u64,

    /// Events the history keeps (what every client did and what the server did to it, read
    /// with `zkd ctl history` or `GET /zkd/history`); the oldest are dropped when full.
    /// 0 turns the history off.
    #[arg(long, value_name = "N", default_value_t = zkd_server::DEFAULT_HISTORY_EVENTS)]
    history_events: usize,

    /// Bytes the history's strings (paths, addresses) may take.
    #[arg(long, value_name = "BYTES", default_value_t = zkd_server::DEFAULT_HISTORY_BYTES)]
    history_bytes: usize,

    /// Log filter: a level (`error`, `warn`, `info`, `debug`, `trace`) or tracing directives.
    /// Logs go to stderr.
    #[arg(long, value_name = "FILTER", default_value = "info")]
    log: String,

    /// Port of the admin HTTP listener (test control plane); 0 picks a free one. Off unless
    /// given.
    #[arg(long, value_name = "N")]
    admin_port: Option<u16>,

    /// Address the admin listener binds. Anything but loopback lets whoever reaches it end
    /// sessions and change the tree (a warning is logged).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    admin_bind: IpAddr,

    /// A host name (or address) the admin and AdminServer listeners answer to besides
    /// localhost, loopback addresses and the address they are reached on; repeat for more.
    /// Requests whose Host header names anything else are refused (403).
    #[arg(long = "admin-allow-host", value_name = "NAME")]
    admin_allow_host: Vec<String>,

    /// Port of a read-only listener serving only ZooKeeper's AdminServer commands
    /// (/commands); 0 picks a free one. Off unless given or set by a configuration's admin.*
    /// keys.
    #[arg(long, value_name = "N")]
    admin_server_port: Option<u16>,

    /// Address the AdminServer commands listener binds.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    admin_server_bind: IpAddr,

    /// Keep state across restarts in DIR (ZooKeeper's layout: DIR/version-2/snapshot.* and
    /// log.*). Without it everything stays in memory.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<std::path::PathBuf>,

    /// Transactions between two automatic snapshots (needs --data-dir).
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    snap_count: u64,

    /// Also snapshot every MS milliseconds when something changed (needs --data-dir).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    snap_interval: Option<u64>,

    /// When the transaction log is synced: `always` (before each reply; nothing
    /// acknowledged is ever lost), `batch` (within 100 ms; a power loss can lose the last
    /// 100 ms), `never` (left to the OS). A killed zkd loses nothing under any policy.
    #[arg(long, value_name = "POLICY", default_value = "batch")]
    fsync: zkd_server::FsyncPolicy,

    /// Snapshots kept in the data directory (with the logs they need).
    #[arg(long, value_name = "K", default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    snap_retain_count: u64,

    /// Start even though the data directory is damaged, giving up every transaction from
    /// the first damage on: the damaged log is cut there (the dropped bytes are kept beside
    /// it as dropped.log.<zxid>.from-<offset>), later logs and needed damaged snapshots are
    /// renamed dropped.<name>, and each is logged with the entries and bytes dropped.
    /// Without it such damage stops the start (exit 1).
    #[arg(long)]
    recover_truncate: bool,

    /// Start with the nodes of a JSON fixture (see docs/persistence.md). With --data-dir,
    /// only when the directory holds no state yet.
    #[arg(long, value_name = "FILE.json")]
    seed: Option<std::path::PathBuf>,
    /// Port of the secure (TLS) client listener, beside the plain one; 0 picks a free one.
    /// Needs --tls-cert and --tls-key.
    #[arg(long, value_name = "N")]
    secure_port: Option<u16>,

    /// Listen only on the secure port, with no plain client port (as ZooKeeper with
    /// secureClientPort and no clientPort). Needs --secure-port.
    #[arg(long, requires = "secure_port", conflicts_with = "port")]
    secure_only: bool,

    /// The server's certificate chain for the secure port (PEM, leaf first).
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,

    /// The server's private key for the secure port (PEM).
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,

    /// CA certificates (PEM) that client certificates are verified against; a client with a
    /// verified certificate is authenticated as x509:<subject DN>.
    #[arg(long, value_name = "FILE")]
    tls_client_ca: Option<PathBuf>,

    /// Whether the secure port asks for client certificates: need, want or none
    /// [default: need with --tls-client-ca, else none].
    #[arg(long, value_name = "need|want|none")]
    tls_client_auth: Option<ClientAuth>,

    /// Subject DN (as x509 ACLs write it, e.g. "CN=admin,O=example") of the x509 super user.
    #[arg(long, value_name = "DN")]
    x509_super_user: Option<String>,

    /// SASL DIGEST-MD5 users: a file of name:password lines, or a JAAS file whose Server
    /// section lists user_NAME="password" options.
    #[arg(long, value_name = "FILE")]
    sasl_users: Option<PathBuf>,

    /// Serve nothing but authentication to a connection until it has authenticated with one
    /// of these schemes (comma list: sasl, x509, digest, ip); other requests are answered
    /// SESSIONCLOSEDREQUIRESASLAUTH and the connection is closed, as ZooKeeper does with
    /// enforce.auth.schemes or sessionRequireClientSASLAuth. Off unless given.
    #[arg(long, value_name = "SCHEMES", value_delimiter = ',')]
    enforce_auth_schemes: Vec<String>,

    /// SASL user name that is super user.
    #[arg(long, value_name = "NAME")]
    sasl_super_user: Option<String>,

    /// What drives session expiry, TTLs and the reaper: `real` time, or a `manual` clock
    /// that only the admin API's clock advance moves.
    #[arg(long, value_name = "real|manual", default_value = "real", value_parser = parse_clock)]
    clock: ClockMode,

    /// Unwritten reply and notification bytes one connection may hold; a client that lets
    /// more pile up (it does not read) is disconnected.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_outbound_bytes: u64,

    /// Unwritten reply and notification bytes all connections together may hold; past it
    /// the connections holding the most are dropped first.
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 20,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_total_outbound_bytes: u64,

    /// Input buffer bytes (requests not yet complete) all connections together may hold; a
    /// connection whose buffer would grow past it is closed.
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 20,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_total_input_bytes: u64,

    /// Run a simulated ensemble of N members in this one process, all serving one state:
    /// member i listens on --port + i - 1 (each on a free port with --port 0); the voting
    /// member with the highest id starts as leader. One `zkd listening on` line is printed
    /// per member, in order.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=255))]
    ensemble: Option<u64>,

    /// With --ensemble: members that lost quorum close every client connection instead of
    /// serving clients that asked for read-only mode.
    #[arg(long, requires = "ensemble")]
    no_read_only: bool,

    /// With --ensemble: sessions start local to the member they connected to, as ZooKeeper's
    /// `localSessionsEnabled` makes them (they cannot move to another member until their
    /// first ephemeral makes them global, with --local-sessions-upgrading).
    #[arg(long, requires = "ensemble")]
    local_sessions: bool,

    /// With --local-sessions: a local session's first ephemeral makes it global
    /// (ZooKeeper's `localSessionsUpgradingEnabled`); without it that create fails with
    /// EPHEMERALONLOCALSESSION.
    #[arg(long, requires = "local_sessions")]
    local_sessions_upgrading: bool,

    /// With an ensemble (--ensemble or a zoo.cfg's server.N lines): how long members take to
    /// notice a lost leader or quorum and to elect. `instant`: at once, and a stopped
    /// leader's followers keep their clients (the default with --ensemble, for fast
    /// tests). `zookeeper`: as ZooKeeper does with this tickTime and syncLimit (the default
    /// with a zoo.cfg's ensemble).
    #[arg(long, value_name = "instant|zookeeper",
          value_parser = zkd_server::ElectionTiming::parse)]
    election_timing: Option<zkd_server::ElectionTiming>,

    /// With --ensemble: the last K members are observers, which serve clients but do not
    /// vote, are never elected and do not count for the quorum (at least one member votes).
    #[arg(long, value_name = "K", requires = "ensemble",
          value_parser = clap::value_parser!(u64).range(1..=254))]
    observers: Option<u64>,

    /// The Apache ZooKeeper release line to behave as where 3.8 and 3.9 differ: the reported
    /// version, the notification zxid, the watch types removeWatches/checkWatches take and the
    /// AdminServer commands.
    #[arg(long, value_name = "3.8|3.9", default_value = "3.9")]
    zookeeper_version: ZookeeperVersion,
}

fn parse_clock(text: &str) -> Result<ClockMode, String> {
    match text {
        "real" => Ok(ClockMode::Real),
        "manual" => Ok(ClockMode::Manual),
        other => Err(format!("{other:?} is not a clock; expected real or manual")),
    }
}

impl ServeArgs {
    /// The `--config` file, if any.
    pub(crate) fn config_file(&self) -> Option<&std::path::Path> {
        self.config.as_deref()
    }

    /// Whether `--env-config` was given.
    pub(crate) fn env_config(&self) -> bool {
        self.env_config
    }

    fn config(&self) -> Result<Config, String> {
        let four_letter_whitelist = match &self.four_letter_whitelist {
            Some(list) => FourLetterWhitelist::parse(list)?,
            None => FourLetterWhitelist::default(),
        };
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsConfig {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
                client_auth: self
                    .tls_client_auth
                    .unwrap_or(if self.tls_client_ca.is_some() {
                        ClientAuth::Need
                    } else {
                        ClientAuth::None
                    }),
            }),
            (None, None) => None,
            _ => return Err("--tls-cert and --tls-key go together".into()),
        };
        if self.secure_port.is_none() && (tls.is_some() || self.tls_client_ca.is_some()) {
            return Err("TLS settings were given without --secure-port".into());
        }
        let sasl_users = match &self.sasl_users {
            Some(path) => {
                let text =
                    zkd_server::files::read_capped_text(path, zkd_server::files::SMALL_FILE_CAP)
                        .map_err(|e| format!("--sasl-users: {e}"))?;
                Some(
                    SaslUsers::parse(&text, "Server")
                        .map_err(|e| format!("--sasl-users {}: {e}", path.display()))?,
                )
            }
            None => None,
        };
        let ensemble = match self.ensemble {
            Some(n) => {
                let mut e = EnsembleConfig::numbered(n, self.port)?;
                if let Some(k) = self.observers {
                    e = e
                        .with_observers(k)
                        .map_err(|m| format!("--observers: {m}"))?;
                }
                e.read_only = !self.no_read_only;
                e.local_sessions = self.local_sessions;
                e.local_sessions_upgrading = self.local_sessions_upgrading;
                Some(e)
            }
            None => None,
        };
        Ok(Config {
            ensemble,
            bind: self.bind,
            port: self.port,
            tick_time: Duration::from_millis(self.tick_time),
            min_session_timeout: self.min_session_timeout.map(Duration::from_millis),
            max_session_timeout: self.max_session_timeout.map(Duration::from_millis),
            max_client_cnxns: self.max_client_cnxns,
            max_frame_len: self.max_frame_len as usize,
            super_digest: self.super_digest.clone(),
            reconfig_enabled: self.reconfig_enabled,
            ttl_enabled: !self.no_ttl,
            reaper_interval: Duration::from_millis(self.reaper_interval),
            four_letter_whitelist,
            herd_warn: self.herd_warn,
            slow_step_warn: Duration::from_millis(self.slow_step_warn_ms),
            history_events: self.history_events,
            history_bytes: self.history_bytes,
            admin_port: self.admin_port,
            admin_bind: self.admin_bind,
            admin_server_port: self.admin_server_port,
            admin_server_bind: self.admin_server_bind,
            admin_allow_hosts: self.admin_allow_host.clone(),
            data_dir: self.data_dir.clone(),
            snap_count: self.snap_count,
            snap_interval: self.snap_interval.map(Duration::from_millis),
            fsync: self.fsync,
            snap_retain_count: usize::try_from(self.snap_retain_count).unwrap_or(usize::MAX),
            recover_truncate: self.recover_truncate,
            clock: self.clock,
            max_outbound_bytes: bytes(self.max_outbound_bytes),
            max_total_outbound_bytes: bytes(self.max_total_outbound_bytes),
            max_total_input_bytes: bytes(self.max_total_input_bytes),
            secure_port: self.secure_port,
            tls,
            secure_only: self.secure_only,
            x509_super_user: self.x509_super_user.clone(),
            sasl_users,
            sasl_super_user: self.sasl_super_user.clone(),
            enforce_auth_schemes: self.enforce_auth_schemes.clone(),
            zookeeper_version: self.zookeeper_version,
            ..Config::default()
        })
    }
}

/// A byte count as `usize` (saturating on 32-bit targets).
fn bytes(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Runs the server until a signal; the exit code says how it ended. `matches` tells which
/// flags were given on the command line (they override a configuration file).
pub fn run(args: ServeArgs, matches: &clap::ArgMatches) -> ExitCode {
    // Directives `target=level` and a bare default level, comma-separated (no regular
    // expressions or span filters: the matcher is small, and so is the code it brings in).
    let filter = match args.log.parse::<Targets>() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("zkd: invalid --log filter {:?}: {e}", args.log);
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal()),
        )
        .with(filter)
        .init();

    if let Err(e) = crate::alloc::tune() {
        tracing::warn!("cannot tune the allocator ({e}); freed memory may stay resident");
    }

    let mut config = match args.config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zkd: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let zookeeper_mode = match crate::config_file::apply(
        args.config_file(),
        args.env_config(),
        matches,
        &mut config,
    ) {
        Ok(mode) => mode.is_some(),
        Err(e) => {
            eprintln!("zkd: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(timing) = args.election_timing {
        match config.ensemble.as_mut() {
            Some(e) => e.election_timing = timing,
            None => {
                eprintln!(
                    "zkd: invalid configuration: --election-timing needs an ensemble \
                     (--ensemble N or server.N lines in a zoo.cfg)"
                );
                return ExitCode::from(2);
            }
        }
    }
    match crate::kept_membership::apply(&mut config) {
        Ok(Some(line)) => tracing::info!("{line}"),
        Ok(None) => {}
        Err(e) => {
            eprintln!("zkd: cannot load the data directory: {e}");
            return ExitCode::FAILURE;
        }
    }
    if let Some(path) = &args.seed {
        match zkd_server::fixture::read_file(path) {
            Ok(nodes) => config.seed = nodes,
            Err(e) => {
                eprintln!("zkd: invalid --seed: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if let Err(e) = config.validate() {
        eprintln!("zkd: invalid configuration: {e}");
        return ExitCode::from(2);
    }

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("zkd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(config, zookeeper_mode))
}

/// Runs the server; `zookeeper_lines` adds the start-up lines ZooKeeper logs, which container
/// tooling waits for.
async fn serve(config: Config, zookeeper_lines: bool) -> ExitCode {
    let (bind, port, secure_only) = (config.bind, config.port, config.secure_only);
    let server = match Server::start(config).await {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            eprintln!("zkd: cannot load the data directory: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            eprintln!("zkd: cannot start: {e}");
            return ExitCode::from(2);
        }
        Err(e)
            if e.get_ref()
                .is_some_and(|e| e.is::<zkd_server::DataDirWriteError>()) =>
        {
            eprintln!("zkd: cannot start: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            let at = std::net::SocketAddr::new(bind, port);
            eprintln!("zkd: cannot listen on {at}: {e}");
            return ExitCode::FAILURE;
        }
    };
    {
        let mut stdout = std::io::stdout().lock();
        match server.members() {
            Ok(members) => {
                for m in members {
                    let _ = writeln!(stdout, "zkd listening on {}", m.client_addr);
                }
            }
            Err(_) if !secure_only => {
                let _ = writeln!(stdout, "zkd listening on {}", server.local_addr());
            }
            Err(_) => {}
        }
        if let Some(secure) = server.secure_addr() {
            let _ = writeln!(stdout, "zkd secure listening on {secure}");
        }
        if let Some(admin) = server.admin_addr() {
            let _ = writeln!(stdout, "zkd admin on {admin}");
        }
        if let Some(at) = server.admin_server_addr() {
            let _ = writeln!(stdout, "zkd admin server on {at}");
        }
        if zookeeper_lines {
            crate::config_file::print_zookeeper_lines(&mut stdout, &server, secure_only);
        }
        let _ = stdout.flush();
    }
    // Start-up is over: its code need not stay resident (see `trim`).
    match crate::trim::drop_code_pages() {
        Ok(bytes) => tracing::debug!(bytes, "dropped the start-up code's pages"),
        Err(e) => tracing::debug!(error = %e, "cannot drop the start-up code's pages"),
    }
    let signals = watch_signals();
    tokio::select! {
        _ = signalled(signals) => {
            server.shutdown().await;
            ExitCode::SUCCESS
        }
        () = server.stopped() => {
            tracing::info!("stopped by the test controller's SHUTDOWN command");
            exit_after_grace("stopped by the test controller");
            server.shutdown().await;
            ExitCode::SUCCESS
        }
        failure = server.failed() => {
            tracing::error!("exiting: {failure}");
            eprintln!("zkd: {failure}");
            exit_after_grace("failed");
            server.shutdown().await;
            ExitCode::FAILURE
        }
    }
}

/// Watches for SIGINT and SIGTERM on a thread of its own, with a runtime of its own: when a
/// step holds the core's lock, every worker thread of the server's runtime may be waiting for
/// that lock, and a signal that runtime would have to notice would go unnoticed. On the
/// first signal the thread logs it, tells the receiver, and gives the graceful shutdown
/// [`SHUTDOWN_GRACE`]; then, or at a second signal, it ends the process (see
/// [`exit_after_grace`] for why that is safe). `None` if the thread cannot start.
fn watch_signals() -> Option<tokio::sync::oneshot::Receiver<&'static str>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("zkd-signals".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot start the signal watcher's runtime");
                    return;
                }
            };
            rt.block_on(async move {
                let signal = wait_for_signal().await;
                tracing::info!("{signal}: shutting down");
                let _ = tx.send(signal);
                tokio::select! {
                    () = tokio::time::sleep(SHUTDOWN_GRACE) => grace_over(signal),
                    again = wait_for_signal() => {
                        tracing::error!("{again} again: exiting now, without the final snapshot");
                        std::process::exit(EXIT_GRACE_OVER);
                    }
                }
            });
        });
    match spawned {
        Ok(_) => Some(rx),
        Err(e) => {
            tracing::warn!(error = %e, "cannot start the signal watcher");
            None
        }
    }
}

/// The signal the watcher saw; without the watcher, waits for one here, with the grace
/// period as its own thread.
async fn signalled(watcher: Option<tokio::sync::oneshot::Receiver<&'static str>>) -> &'static str {
    if let Some(rx) = watcher {
        if let Ok(signal) = rx.await {
            return signal;
        }
    }
    let signal = wait_for_signal().await;
    tracing::info!("{signal}: shutting down");
    exit_after_grace(signal);
    signal
}

/// How long a graceful shutdown may take before the process exits anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The exit status when the graceful shutdown did not finish within [`SHUTDOWN_GRACE`].
const EXIT_GRACE_OVER: i32 = 3;

/// Starts a plain thread that ends the process [`SHUTDOWN_GRACE`] from now, whatever the
/// runtime is doing: a step that holds the core's lock (a huge request, a reset of a huge
/// tree) blocks the graceful shutdown, which needs that lock, and could block the runtime's
/// own threads with it. Exiting is safe: a step that never finished acknowledged nothing, and
/// whatever was acknowledged before is in the transaction log already (synced under
/// `always`; written, and so kept by the operating system, under `batch` and `never`).
/// Only the final snapshot is skipped, and the next start replays the log instead.
fn exit_after_grace(why: &'static str) {
    let spawned = std::thread::Builder::new()
        .name("zkd-exit-grace".into())
        .spawn(move || {
            std::thread::sleep(SHUTDOWN_GRACE);
            grace_over(why);
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the shutdown grace timer");
    }
}

/// Ends the process once the grace period is over, saying so.
fn grace_over(why: &str) -> ! {
    tracing::error!(
        "{why}: the graceful shutdown did not finish within {} s (a step holds the core's \
         lock); exiting now without the final snapshot, with status {}",
        SHUTDOWN_GRACE.as_secs(),
        EXIT_GRACE_OVER
    );
    eprintln!(
        "zkd: the graceful shutdown did not finish within {} s; exiting without the final \
         snapshot",
        SHUTDOWN_GRACE.as_secs()
    );
    std::process::exit(EXIT_GRACE_OVER);
}

/// Waits for SIGINT or SIGTERM and names it.
async fn wait_for_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = ctrl_c() => "interrupted",
                _ = term.recv() => "terminated",
            },
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch for SIGTERM");
                ctrl_c().await;
                "interrupted"
            }
        }
    }
    #[cfg(not(unix))]
    {
        ctrl_c().await;
        "interrupted"
    }
}

/// Waits for Ctrl-C; if it cannot be watched, waits forever (SIGTERM still works).
async fn ctrl_c() {
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::warn!(error = %e, "cannot watch for SIGINT");
        std::future::pending::<()>().await;
    }
}
