//! The embeddable server handle.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::control::member_lag::{self, MemberLagReport};
use crate::control::members;
use crate::control::net_faults::{self, NetFaultRule, NetFaultStatus};
use crate::control::{
    self, ClockReport, ControlError, FaultRule, FaultStatus, PauseOptions, SessionReport,
};
use crate::core::{Core, Lag};
use crate::engine::ensemble::MemberReport;
use crate::engine::history::{HistoryEvent, HistoryFilter, HistorySummary};
use crate::engine::{self, now_ms, ServerFailure, Shared};
use crate::net;
use crate::persist::{Persistence, SnapshotInfo};
use crate::Config;

/// A running server. Dropping it stops the server: the listener closes and every connection
/// is dropped. Servers share no global state, so one process can run many.
pub struct Server {
    addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    admin_server_addr: Option<SocketAddr>,
    secure_addr: Option<SocketAddr>,
    pub(crate) shared: Arc<Shared>,
    shutdown: CancellationToken,
    acceptor: Option<JoinHandle<()>>,
    secure_acceptor: Option<JoinHandle<()>>,
    ticker: Option<JoinHandle<()>>,
    admin: Option<JoinHandle<()>>,
    admin_server: Option<JoinHandle<()>>,
    pub(crate) persist: Option<Arc<Persistence>>,
    persister: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds the listener (and the admin listener when `config.admin_port` is set) and starts
    /// serving. Must be called inside a tokio runtime; the server's tasks run on that runtime.
    pub async fn start(config: Config) -> io::Result<Server> {
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // A standalone server has one client listener (none in secure-only mode); an
        // ensemble one per member, and the first member's address stands for the server.
        let mut members = Vec::new();
        let listener = match (&config.ensemble, config.secure_only) {
            (Some(e), _) => {
                for m in &e.members {
                    members.push((m.id, TcpListener::bind((config.bind, m.port)).await?));
                }
                None
            }
            (None, false) => Some(TcpListener::bind((config.bind, config.port)).await?),
            (None, true) => None,
        };
        #[cfg(feature = "tls")]
        let secure = match (config.secure_port, &config.tls) {
            (Some(port), Some(tls)) => {
                let setup = Arc::new(net::tls::TlsSetup::load(tls)?);
                Some((TcpListener::bind((config.bind, port)).await?, setup))
            }
            _ => None,
        };
        #[cfg(not(feature = "tls"))]
        let secure: Option<(TcpListener, ())> = None;
        // The clients' address: the plain listener's (the first member's), or in secure-only
        // mode the secure one's.
        let first_member = members.first().map(|(_, l)| l);
        let addr = match (&listener, first_member, &secure) {
            (Some(l), _, _) | (None, Some(l), _) | (None, None, Some((l, _))) => l.local_addr()?,
            (None, None, None) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "secure-only mode needs a secure port",
                ))
            }
        };
        #[cfg(feature = "admin")]
        let admin_listener = match config.admin_port {
            Some(port) => Some(crate::admin::bind(SocketAddr::new(config.admin_bind, port)).await?),
            None => None,
        };
        #[cfg(feature = "admin")]
        let admin_server_listener = match config.admin_server_port {
            Some(port) => Some(TcpListener::bind((config.admin_server_bind, port)).await?),
            None => None,
        };
        let mut core = Core::new(config.core_config(), now_ms());
        if config.clock == crate::ClockMode::Manual {
            core.use_exact_session_expiry();
        }
        let persist = Persistence::open(&config, &mut core, now_ms())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let mut store = persist.as_ref().map(|(p, _)| p.store());
        let mut seeded = false;
        if !config.seed.is_empty() {
            if core.last_zxid() == 0 {
                // A transaction log that cannot take the seed's creates stops the start.
                let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    core.apply_fixture(&config.seed, now_ms())
                }))
                .map_err(|payload| io::Error::other(engine::panic_message(&*payload)))?;
                for (zxid, record) in core.take_records() {
                    if let Some(s) = store.as_mut() {
                        s.store(zxid, record).map_err(io::Error::other)?;
                    }
                }
                if let Some(reason) = core.stopped() {
                    return Err(io::Error::other(reason.to_string()));
                }
                let n = applied.map_err(|e| {
                    io::Error::new(io::ErrorKind::InvalidInput, format!("seed: {e}"))
                })?;
                tracing::info!(nodes = n, "seeded the tree");
                seeded = true;
            } else {
                tracing::info!("seed not applied: the data directory already holds state");
            }
        }
        let plain_port = match (&listener, first_member) {
            (None, None) => 0,
            _ => addr.port(),
        };
        let shared = Arc::new(Shared::new(&config, plain_port, core, store));
        let shutdown = CancellationToken::new();
        let (persist, persister) = match persist {
            Some((p, snapshot_now)) => {
                let p = Arc::new(p);
                if config.fsync == crate::FsyncPolicy::Always {
                    p.start_group_commit(&shared)?;
                }
                if snapshot_now || seeded {
                    let (p2, s2) = (p.clone(), shared.clone());
                    let dir = p.dir_path().display().to_string();
                    tokio::task::spawn_blocking(move || p2.snapshot(&s2))
                        .await
                        .map_err(io::Error::other)?
                        .map_err(|reason| {
                            io::Error::other(crate::persist::DataDirWriteError { dir, reason })
                        })?;
                }
                let task = tokio::spawn(Persistence::run(
                    p.clone(),
                    shared.clone(),
                    config.fsync,
                    shutdown.clone(),
                ));
                (Some(p), Some(task))
            }
            None => (None, None),
        };
        let extras = engine::ServerExtras {
            secure_port: match &secure {
                Some((l, _)) => Some(l.local_addr()?.port()),
                None => None,
            },
            data_dir: persist
                .clone()
                .map(|p| Box::new(move || p.report()) as Box<dyn Fn() -> _ + Send + Sync>),
        };
        let _ = shared.extras.set(extras);
        let acceptor = listener.map(|listener| {
            tokio::spawn(net::accept_loop(
                listener,
                shared.clone(),
                shutdown.clone(),
                net::Transport::Plain,
                0,
            ))
        });
        if let Some(e) = &config.ensemble {
            net::member::start_all(&shared, members, e, config.tick_time, &shutdown)?;
        }
        #[cfg_attr(not(feature = "tls"), allow(unused_mut))]
        let (mut secure_addr, mut secure_acceptor) = (None, None);
        #[cfg(feature = "tls")]
        if let Some((listener, setup)) = secure {
            let at = listener.local_addr()?;
            secure_acceptor = Some(tokio::spawn(net::accept_loop(
                listener,
                shared.clone(),
                shutdown.clone(),
                net::Transport::Tls(setup),
                0,
            )));
            secure_addr = Some(at);
            tracing::info!(addr = %at, "zkd secure port serving");
        }
        let ticker = tokio::spawn(engine::ticker(shared.clone()));
        tracing::info!(%addr, "zkd serving");
        #[cfg_attr(not(feature = "admin"), allow(unused_mut))]
        let mut server = Server {
            addr,
            admin_addr: None,
            admin_server_addr: None,
            secure_addr,
            shared,
            shutdown,
            acceptor,
            secure_acceptor,
            ticker: Some(ticker),
            admin: None,
            admin_server: None,
            persist,
            persister,
        };
        #[cfg(feature = "admin")]
        {
            let state = crate::admin::AdminState::new(
                server.shared.clone(),
                addr,
                server.persist.clone(),
                server.shutdown.clone(),
                &config.admin_allow_hosts,
            );
            if let Some(listener) = admin_listener {
                let admin_addr = listener.local_addr()?;
                server.admin = Some(tokio::spawn(crate::admin::serve(
                    listener,
                    crate::admin::router(state.clone()),
                    server.shutdown.clone(),
                    "admin listener",
                )));
                server.admin_addr = Some(admin_addr);
                tracing::info!(addr = %admin_addr, "zkd admin serving");
            }
            if let Some(listener) = admin_server_listener {
                let at = listener.local_addr()?;
                server.admin_server = Some(tokio::spawn(crate::admin::serve(
                    listener,
                    crate::admin::commands_router(state, at.ip()),
                    server.shutdown.clone(),
                    "AdminServer listener",
                )));
                server.admin_server_addr = Some(at);
                tracing::info!(addr = %at, "zkd AdminServer commands serving");
            }
        }
        Ok(server)
    }

    /// The address clients connect to (with the real port when 0 was asked for): the plain
    /// client listener's, or in secure-only mode the secure listener's. On an ensemble, the
    /// first member's address (see [`Server::members`] for all of them).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether `reconfig` may change the membership (`Config::reconfig_enabled`).
    pub fn reconfig_enabled(&self) -> bool {
        self.shared
            .inspect(|core, _| core.config().reconfig_enabled)
            .unwrap_or(false)
    }

    /// The ensemble's members in id order: id, client address, mode, whether it runs.
    /// Fails on a standalone server.
    pub fn members(&self) -> Result<Vec<MemberReport>, ControlError> {
        members::list(&self.shared)
    }

    /// The connection string of an ensemble (`host:port,host:port,...`, every member in id
    /// order, stopped ones included), or of the standalone server.
    pub fn connect_string(&self) -> String {
        match self.members() {
            Ok(members) => members
                .iter()
                .map(|m| m.client_addr.to_string())
                .collect::<Vec<_>>()
                .join(","),
            Err(_) => self.addr.to_string(),
        }
    }

    /// Stops ensemble member `id`: its listener closes and its connections drop (clients
    /// fail over to other members and keep their sessions). A stopped leader is replaced
    /// by the running member with the lowest id; when a majority is stopped the remaining
    /// members drop their clients and, with read-only mode on, serve only clients that ask
    /// for read-only mode.
    pub async fn stop_member(&self, id: u64) -> Result<(), ControlError> {
        members::stop(&self.shared, id).await.map(|_| ())
    }

    /// Splits the ensemble's members into `groups` (members named in none form one more
    /// group): the group holding a majority of the voters keeps the quorum and elects a
    /// leader of its own if it must; every other member is cut off, keeping its clients only
    /// in read-only mode and applying no commit, until [`Server::heal`]. See
    /// docs/ensembles.md, "Partitions".
    pub fn partition(&self, groups: &[&[u64]]) -> Result<(), ControlError> {
        let groups: Vec<Vec<u64>> = groups.iter().map(|g| g.to_vec()).collect();
        crate::control::partition::partition(&self.shared, &groups, &[])
    }

    /// Cuts links one way: each `(from, to)` loses what member `from` sends member `to`
    /// (replacing any partition before, as [`Server::partition`] does). A follower that does
    /// not hear its leader, or that its leader does not hear, leaves it; a leader that
    /// hears too few followers loses its quorum. See docs/ensembles.md, "Partitions".
    pub fn cut_one_way(&self, links: &[(u64, u64)]) -> Result<(), ControlError> {
        crate::control::partition::partition(&self.shared, &[], links)
    }

    /// Ends a partition: cut members apply what they missed and serve again.
    pub fn heal(&self) -> Result<(), ControlError> {
        crate::control::partition::heal(&self.shared)
    }

    /// Tells ensemble member `id` to lag: `Lag::Ms(n)` applies each transaction n ms
    /// (session clock) after it committed, `Lag::Txns(k)` stays k transactions behind,
    /// `Lag::Stalled` applies nothing, `Lag::Lockstep` (or 0) is in step again. Its clients
    /// read its older view, their watches fire when it catches up, and `sync()` through it
    /// brings it up to date (see docs/protocol.md, "Lagging members and sync").
    pub fn set_member_lag(&self, id: u64, lag: Lag) -> Result<MemberLagReport, ControlError> {
        member_lag::set(&self.shared, id, lag)
    }

    /// Member `id`'s lag, the zxid it has applied and how many transactions it is behind.
    pub fn member_lag(&self, id: u64) -> Result<MemberLagReport, ControlError> {
        member_lag::get(&self.shared, id)
    }

    /// Starts a stopped ensemble member again on its old address; returns that address.
    pub async fn start_member(&self, id: u64) -> Result<SocketAddr, ControlError> {
        members::start(&self.shared, id, &self.shutdown).await
    }

    /// The address of the secure (TLS) client listener, if one was asked for in the `Config`.
    pub fn secure_addr(&self) -> Option<SocketAddr> {
        self.secure_addr
    }

    /// The address of the admin HTTP listener, if one was asked for in the `Config`.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The address of the read-only AdminServer listener (`/commands` only), if one was
    /// asked for with `Config::admin_server_port`.
    pub fn admin_server_addr(&self) -> Option<SocketAddr> {
        self.admin_server_addr
    }

    /// `Some` once the server has failed closed: a call into its core panicked, so it
    /// closed every connection and stopped listening rather than serve a possibly
    /// half-changed tree. It does not recover; start a new server.
    pub fn failure(&self) -> Option<ServerFailure> {
        self.shared.failure().cloned()
    }

    /// Resolves when the server fails closed (see [`Server::failure`]); pending for as long
    /// as it serves. The `zkd` binary exits non-zero when this resolves.
    pub async fn failed(&self) -> ServerFailure {
        self.shared.failed().await
    }

    /// Every live session, ordered by id (the control plane's session list).
    pub fn sessions(&self) -> Result<Vec<SessionReport>, ControlError> {
        control::sessions(&self.shared)
    }

    /// The server's history (docs/history.md): the events `filter` keeps, oldest first, at
    /// most `filter.limit` and 10 000 per call (page on with `after_seq` set to the last
    /// event's `seq`).
    pub fn history(&self, filter: &HistoryFilter) -> Result<Vec<HistoryEvent>, ControlError> {
        Ok(self.shared.history(filter)?.0)
    }

    /// How many events the history holds, how many it dropped, and its bounds.
    pub fn history_summary(&self) -> Result<HistorySummary, ControlError> {
        Ok(self
            .shared
            .history(&HistoryFilter {
                limit: Some(0),
                ..HistoryFilter::default()
            })?
            .1)
    }

    /// Everything the history holds, as JSON Lines (one event per line, as
    /// `GET /zkd/history` writes them), for a test to save when it fails.
    pub fn history_jsonl(&self) -> Result<String, ControlError> {
        let mut filter = HistoryFilter::default();
        let mut out = String::new();
        loop {
            let page = self.history(&filter)?;
            let Some(last) = page.last() else {
                return Ok(out);
            };
            filter.after_seq = Some(last.seq);
            out.push_str(&crate::to_json_lines(&page));
        }
    }

    /// Expires a session now, exactly as a timeout would: its ephemerals are deleted, watches
    /// fire, its connection is closed, and a client coming back with the id hears it expired.
    pub fn expire_session(&self, session_id: i64) -> Result<(), ControlError> {
        control::expire_session(&self.shared, session_id)
    }

    /// Closes a session's TCP connection only; the session lives on and its client can
    /// reconnect within its timeout.
    pub fn disconnect_session(&self, session_id: i64) -> Result<(), ControlError> {
        control::disconnect_session(&self.shared, session_id)
    }

    /// Stops reading requests and writing replies on every connection, and stops the
    /// ticker, as in a stop-the-world pause. See [`PauseOptions`] for a timed pause and for
    /// whether the session clock runs meanwhile (by default it does).
    pub fn pause(&self, options: PauseOptions) -> Result<(), ControlError> {
        control::pause(&self.shared, options)
    }

    /// Ends a pause: what fell due meanwhile happens first (session expiry if the clock
    /// ran), then connections read and write again.
    pub fn resume(&self) -> Result<(), ControlError> {
        control::resume(&self.shared)
    }

    /// Adds a fault rule, matched on every following request; returns its id.
    pub fn add_fault(&self, rule: FaultRule) -> Result<u64, ControlError> {
        control::add_fault(&self.shared, rule)
    }

    /// Every fault rule, with how often it fired.
    pub fn faults(&self) -> Result<Vec<FaultStatus>, ControlError> {
        control::faults(&self.shared)
    }

    /// Removes every fault rule; returns how many there were.
    pub fn clear_faults(&self) -> Result<usize, ControlError> {
        control::clear_faults(&self.shared)
    }

    /// Adds a network fault on client connections (a blackhole, lost replies or added
    /// latency; see [`crate::NetFault`]), on the open connections it matches at once and on those
    /// accepted later; returns its id. Its latency is on the session clock: under
    /// `ClockMode::Manual` only [`Server::advance_clock`] lets it pass.
    pub fn add_net_fault(&self, rule: NetFaultRule) -> Result<u64, ControlError> {
        net_faults::add(&self.shared, rule)
    }

    /// Every network fault rule, with the open connections it matches.
    pub fn net_faults(&self) -> Result<Vec<NetFaultStatus>, ControlError> {
        net_faults::list(&self.shared)
    }

    /// Removes one network fault rule: the connections a blackhole or lost replies held are
    /// closed (their clients reconnect), a latency ends.
    pub fn remove_net_fault(&self, id: u64) -> Result<(), ControlError> {
        net_faults::remove(&self.shared, id)
    }

    /// Removes every network fault rule, as [`Server::remove_net_fault`] does each; returns
    /// how many there were.
    pub fn clear_net_faults(&self) -> Result<usize, ControlError> {
        net_faults::clear(&self.shared)
    }

    /// Deletes every node except `/zookeeper`; with `expire_sessions`, expires every session
    /// first. Returns how many nodes were deleted.
    pub fn reset(&self, expire_sessions: bool) -> Result<usize, ControlError> {
        control::reset(&self.shared, expire_sessions)
    }

    /// Moves the manual clock (`Config::clock = ClockMode::Manual`) forward and runs the
    /// session expiries and reaping that fell due.
    pub fn advance_clock(&self, by: Duration) -> Result<ClockReport, ControlError> {
        control::advance_clock(&self.shared, by)
    }

    /// The session clock's mode and reading.
    pub fn clock(&self) -> ClockReport {
        control::clock(&self.shared)
    }

    /// Resolves once the server was told to stop from outside the handle (the test
    /// controller's `SHUTDOWN` command); the `zkd` binary exits then.
    pub async fn stopped(&self) {
        self.shutdown.cancelled().await
    }

    /// Writes a snapshot of the current state to the data directory now (the core is held
    /// only while the snapshot is encoded). Fails when no data directory is configured.
    pub async fn snapshot(&self) -> io::Result<SnapshotInfo> {
        let Some(p) = self.persist.clone() else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "no data directory is configured, so there is nowhere to write a snapshot",
            ));
        };
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || p.snapshot(&shared))
            .await
            .map_err(io::Error::other)?
            .map_err(io::Error::other)
    }

    /// Stops accepting, closes every connection and waits until all of it is done. With a
    /// data directory, a final snapshot is written.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.persister.take() {
            let _ = task.await;
        }
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
            let _ = ticker.await;
        }
        for admin in [self.admin.take(), self.admin_server.take()]
            .into_iter()
            .flatten()
        {
            admin.abort();
            let _ = admin.await;
        }
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.await;
        }
        self.shared.listeners.join_all().await;
        if let Some(acceptor) = self.secure_acceptor.take() {
            let _ = acceptor.await;
        }
        if let Some(p) = self.persist.take() {
            let shared = self.shared.clone();
            let done = tokio::task::spawn_blocking(move || {
                p.sync_log();
                p.snapshot(&shared)
            })
            .await;
            if let Ok(Err(e)) = done {
                tracing::error!("final snapshot failed: {e}");
            }
        }
        tracing::info!(addr = %self.addr, "zkd stopped");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
        // Aborting the acceptor drops its listener and its set of connection tasks, which
        // aborts those too.
        if let Some(acceptor) = self.acceptor.take() {
            acceptor.abort();
        }
        self.shared.listeners.abort_all();
        if let Some(acceptor) = self.secure_acceptor.take() {
            acceptor.abort();
        }
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
        }
        for admin in [self.admin.take(), self.admin_server.take()]
            .into_iter()
            .flatten()
        {
            admin.abort();
        }
        if let Some(task) = self.persister.take() {
            task.abort();
        }
        // Dropped without `shutdown`: no final snapshot, but what the log holds is synced.
        if let Some(p) = self.persist.take() {
            p.sync_log();
        }
    }
}
