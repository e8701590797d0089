//! The tokio network layer around the deterministic core.
//!
//! * One [`Core`] behind one `std::sync::Mutex`, held only while calling into the core. The
//!   [`Outbox`] the core writes to pushes frames into per-connection unbounded channels while
//!   the lock is held, so every connection sees frames in the global order the core produced
//!   them.
//! * One task per connection (see [`conn`]): it answers a four-letter word, or performs the
//!   handshake and then runs a reader and a writer side by side. The writer drains everything
//!   queued into one vectored write per syscall.
//! * A ticker task calls [`Core::tick`] at [`Core::next_deadline`], and at least every
//!   tick / reaper interval.
//!
//! Outbound buffering is bounded per connection by [`crate::Config::max_outbound_bytes`]: the
//! outbox counts the bytes queued for each connection, and when a frame would push a
//! connection over the limit the connection is dropped at once (its queue is discarded, its
//! socket closed) instead of queueing more. Such a client was not reading its socket; it
//! reconnects like after any connection loss. Frames are shared `Bytes`, so a notification
//! fanned out to many connections is stored once however many queues hold it.

mod conn;
mod host;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::FourLetterWhitelist;
use crate::core::{ConnId, Core, Outbox};
use crate::fourlw::DEFAULT_TRACE_MASK;
use crate::Config;

/// Wall-clock milliseconds since the epoch, the core's notion of time.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What the core sends a connection.
pub(crate) enum Out {
    Frame(Bytes),
    /// Flush what came before, then close.
    Close,
}

/// The network layer's handle on one connection, kept in the registry while it is open.
pub(crate) struct ConnHandle {
    tx: mpsc::UnboundedSender<Out>,
    /// Bytes queued and not yet written.
    queued: Arc<AtomicUsize>,
    /// Drops the connection without flushing (outbound overflow).
    kill: CancellationToken,
    /// The core (or the reader) asked for a close: nothing more is queued or fed to the core.
    closing: bool,
}

/// What sits behind the lock.
pub(crate) struct State {
    pub(crate) core: Core,
    pub(crate) conns: HashMap<ConnId, ConnHandle>,
}

/// Settings the network layer needs.
pub(crate) struct NetConfig {
    pub(crate) max_frame_len: usize,
    pub(crate) max_outbound_bytes: usize,
    pub(crate) whitelist: FourLetterWhitelist,
    /// Longest wait between two ticks, in ms.
    pub(crate) tick_period_ms: i64,
    /// How long a connection may take to send its first complete frame.
    pub(crate) handshake_timeout: Duration,
}

/// State shared by all tasks of one server.
pub(crate) struct Shared {
    state: Mutex<State>,
    pub(crate) cfg: NetConfig,
    /// The trace mask `gtmk` shows and `stmk` sets.
    pub(crate) trace_mask: AtomicI64,
    /// When the ticker plans to wake next (epoch ms).
    planned_tick: AtomicI64,
    wake_ticker: Notify,
}

/// The [`Outbox`] handed to the core: the connection registry.
struct Registry<'a> {
    conns: &'a mut HashMap<ConnId, ConnHandle>,
    limit: usize,
}

impl Outbox for Registry<'_> {
    fn send(&mut self, conn: ConnId, frame: Bytes) {
        let Some(h) = self.conns.get_mut(&conn) else {
            return;
        };
        if h.closing {
            return;
        }
        let len = frame.len();
        let queued = h.queued.fetch_add(len, Ordering::Relaxed) + len;
        if queued > self.limit {
            tracing::info!(
                conn,
                queued,
                limit = self.limit,
                "closing connection: client is not reading its replies"
            );
            h.closing = true;
            h.kill.cancel();
            return;
        }
        if h.tx.send(Out::Frame(frame)).is_err() {
            h.closing = true;
        }
    }

    fn close(&mut self, conn: ConnId) {
        let Some(h) = self.conns.get_mut(&conn) else {
            return;
        };
        if !h.closing {
            h.closing = true;
            let _ = h.tx.send(Out::Close);
        }
    }
}

/// The receiving ends a connection task gets when it is registered.
pub(crate) struct ConnChannels {
    pub(crate) rx: mpsc::UnboundedReceiver<Out>,
    pub(crate) queued: Arc<AtomicUsize>,
    pub(crate) kill: CancellationToken,
}

impl Shared {
    pub(crate) fn new(config: &Config, core: Core) -> Shared {
        let tick_ms = i64::try_from(config.tick_time.as_millis()).unwrap_or(i64::MAX);
        let reaper_ms = i64::try_from(config.reaper_interval.as_millis()).unwrap_or(i64::MAX);
        Shared {
            state: Mutex::new(State {
                core,
                conns: HashMap::new(),
            }),
            cfg: NetConfig {
                max_frame_len: config.max_frame_len,
                max_outbound_bytes: config.max_outbound_bytes,
                whitelist: config.four_letter_whitelist.clone(),
                tick_period_ms: tick_ms.min(reaper_ms).max(1),
                handshake_timeout: Duration::from_millis(
                    crate::fourlw::SESSIONLESS_CNXN_TIMEOUT_MS as u64,
                ),
            },
            trace_mask: AtomicI64::new(DEFAULT_TRACE_MASK),
            planned_tick: AtomicI64::new(i64::MAX),
            wake_ticker: Notify::new(),
        }
    }

    /// Locks the core. A panic inside the core is caught where the core is called, so the
    /// lock is only poisoned by a bug in this module; the state is still used then.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the core with the registry as its outbox; afterwards wakes the ticker if
    /// the core's next deadline moved before the ticker's planned wake-up.
    pub(crate) fn with_core<R>(&self, f: impl FnOnce(&mut Core, &mut dyn Outbox) -> R) -> R {
        let mut guard = self.lock();
        let State { core, conns } = &mut *guard;
        let mut out = Registry {
            conns,
            limit: self.cfg.max_outbound_bytes,
        };
        let r = f(core, &mut out);
        self.check_deadline(core);
        r
    }

    /// Registers an accepted socket with the core; `None` = over the per-IP limit.
    fn open(&self, remote: SocketAddr) -> Option<(ConnId, ConnChannels)> {
        let mut guard = self.lock();
        let id = guard.core.open_connection(remote, now_ms())?;
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let kill = CancellationToken::new();
        guard.conns.insert(
            id,
            ConnHandle {
                tx,
                queued: queued.clone(),
                kill: kill.clone(),
                closing: false,
            },
        );
        Some((id, ConnChannels { rx, queued, kill }))
    }

    /// Feeds `frames` (payloads after the handshake) to the core in order, all under one
    /// lock. Returns false once the connection is closing (stop reading).
    pub(crate) fn requests(&self, id: ConnId, frames: Vec<Bytes>) -> bool {
        let mut guard = self.lock();
        let State { core, conns } = &mut *guard;
        let now = now_ms();
        for frame in frames {
            if conns.get(&id).is_none_or(|h| h.closing) {
                break;
            }
            let mut out = Registry {
                conns,
                limit: self.cfg.max_outbound_bytes,
            };
            let call = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                core.request(id, frame, now, &mut out)
            }));
            if call.is_err() {
                tracing::error!(
                    conn = id,
                    "request handling panicked; closing the connection"
                );
                out.close(id);
                break;
            }
        }
        self.check_deadline(core);
        conns.get(&id).is_some_and(|h| !h.closing)
    }

    /// Asks for `id` to be closed after what is queued has been written.
    pub(crate) fn close(&self, id: ConnId) {
        let mut guard = self.lock();
        let mut out = Registry {
            conns: &mut guard.conns,
            limit: self.cfg.max_outbound_bytes,
        };
        out.close(id);
    }

    /// The socket of `id` is gone: forget it here and in the core.
    pub(crate) fn closed(&self, id: ConnId) {
        let mut guard = self.lock();
        guard.conns.remove(&id);
        let core = &mut guard.core;
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| core.connection_closed(id)))
            .is_err()
        {
            tracing::error!(conn = id, "connection_closed panicked");
        }
    }

    fn check_deadline(&self, core: &Core) {
        if let Some(d) = core.next_deadline() {
            if d < self.planned_tick.load(Ordering::Relaxed) {
                self.wake_ticker.notify_one();
            }
        }
    }
}

/// Accepts connections until `shutdown`; then stops every connection task and returns.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) {
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, remote)) => {
                    let _ = stream.set_nodelay(true);
                    match shared.open(remote) {
                        Some((id, channels)) => {
                            tracing::debug!(conn = id, %remote, "accepted connection");
                            tasks.spawn(conn::run(shared.clone(), id, stream, remote, channels));
                        }
                        None => {
                            tracing::info!(%remote, "too many connections from this address; closing");
                        }
                    }
                }
                Err(e) => {
                    // Usually out of file descriptors; back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(e) = done {
                    if e.is_panic() {
                        tracing::error!("connection task panicked");
                    }
                }
            }
        }
    }
    drop(listener);
    tasks.shutdown().await;
}

/// Calls [`Core::tick`] at the core's next deadline, and at least every tick period.
pub(crate) async fn ticker(shared: Arc<Shared>) {
    let period = shared.cfg.tick_period_ms;
    loop {
        let now = now_ms();
        let next = {
            let mut guard = shared.lock();
            let State { core, conns } = &mut *guard;
            let mut out = Registry {
                conns,
                limit: shared.cfg.max_outbound_bytes,
            };
            let call =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| core.tick(now, &mut out)));
            if call.is_err() {
                tracing::error!("tick panicked");
            }
            core.next_deadline()
        };
        let wake = next
            .map_or(now + period, |d| d.min(now + period))
            .max(now + 1);
        shared.planned_tick.store(wake, Ordering::Relaxed);
        let sleep = Duration::from_millis(u64::try_from(wake - now).unwrap_or(1));
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = shared.wake_ticker.notified() => {}
        }
    }
}
