//! The test control plane as Rust operations on a running server: list, expire and
//! disconnect sessions, pause and resume traffic, fault rules, network faults on connections
//! ([`net_faults`]), reset, the virtual clock, and stopping, starting ([`members`]),
//! lagging ([`member_lag`]) and partitioning ([`partition`]) ensemble members.
//! [`crate::Server`]'s methods and the admin HTTP routes both call these, so both take
//! effect the same way: through the core, in the one order of client requests.

pub(crate) mod member_lag;
pub(crate) mod members;
pub(crate) mod net_faults;
pub(crate) mod partition;
#[cfg(test)]
mod reset_tests;

use std::sync::Arc;
use std::time::Duration;

use crate::core::{SessionOpError, RESET_SLICE};
use crate::engine::{CoreFailed, Shared};
use crate::ClockMode;

pub use crate::control::member_lag::MemberLagReport;
pub use crate::control::net_faults::{
    ClientAddr, NetFault, NetFaultRule, NetFaultStatus, MAX_LATENCY_MS, MAX_NET_FAULTS,
};
pub use crate::core::Lag;
pub use crate::core::{FaultAction, FaultRule, FaultStatus, SessionReport, MAX_FAULT_RULES};

/// Whether the session clock runs during a pause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PauseClock {
    /// The clock runs on (default), as during a long stop-the-world GC pause: sessions
    /// whose clients gave up expire when the pause ends.
    #[default]
    Runs,
    /// The clock stops for the pause: every deadline moves later by the pause's length.
    Frozen,
}

/// How to pause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PauseOptions {
    /// End the pause by itself after this long; `None` = until `resume`.
    pub duration: Option<Duration>,
    pub clock: PauseClock,
}

/// The session clock as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReport {
    pub mode: ClockMode,
    /// Session-clock reading in ms (starts at the wall time the server started).
    pub now_ms: i64,
    /// Milliseconds the session clock has moved since the server started.
    pub elapsed_ms: i64,
    /// Whether traffic is paused.
    pub paused: bool,
}

/// Why a control operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlError {
    NoSuchSession(i64),
    NotConnected(i64),
    AlreadyPaused,
    NotPaused,
    ClockNotManual,
    TooManyFaults(String),
    NoSuchFault(u64),
    /// No network fault rule with this id.
    NoSuchNetFault(u64),
    /// A network fault rule that cannot be taken, and why.
    BadNetFault(String),
    /// A member operation on a server that is not a simulated ensemble.
    NotAnEnsemble,
    NoSuchMember(u64),
    /// Start of a member that runs.
    MemberRunning(u64),
    /// Stop of a member that is stopped.
    MemberStopped(u64),
    /// Start of a stopped member that a reconfig removed from the configuration.
    MemberRemoved(u64),
    /// A member's listener could not be bound again.
    Bind(String),
    /// A partition that cannot be made, and why.
    BadPartition(String),
    Failed,
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::NoSuchSession(id) => write!(f, "no session {}", hex(*id)),
            ControlError::NotConnected(id) => {
                write!(f, "session {} has no connection to close", hex(*id))
            }
            ControlError::AlreadyPaused => f.write_str("the server is already paused"),
            ControlError::NotPaused => f.write_str("the server is not paused"),
            ControlError::ClockNotManual => f.write_str(
                "the clock is real time; start the server with the manual clock (--clock manual) to move it",
            ),
            ControlError::TooManyFaults(msg) => f.write_str(msg),
            ControlError::NoSuchFault(id) => write!(f, "no fault rule {id}"),
            ControlError::NoSuchNetFault(id) => write!(f, "no network fault {id}"),
            ControlError::BadNetFault(msg) => f.write_str(msg),
            ControlError::NotAnEnsemble => f.write_str(
                "this server is not an ensemble; start it with --ensemble N to have members",
            ),
            ControlError::NoSuchMember(id) => write!(f, "no member {id}"),
            ControlError::MemberRunning(id) => write!(f, "member {id} is already running"),
            ControlError::MemberStopped(id) => write!(f, "member {id} is already stopped"),
            ControlError::MemberRemoved(id) => write!(
                f,
                "member {id} is not in the configuration (a reconfig removed it), so it cannot \
                 start, as a removed ZooKeeper server cannot; add it back with reconfig first"
            ),
            ControlError::Bind(msg) | ControlError::BadPartition(msg) => f.write_str(msg),
            ControlError::Failed => f.write_str(
                "the server failed closed after an internal error and serves nothing more",
            ),
        }
    }
}

impl std::error::Error for ControlError {}

impl From<CoreFailed> for ControlError {
    fn from(_: CoreFailed) -> ControlError {
        ControlError::Failed
    }
}

/// A session id as ZooKeeper prints it: `0x` and lower-case hex.
pub fn hex(id: i64) -> String {
    format!("0x{id:x}")
}

fn session_err(sid: i64, e: SessionOpError) -> ControlError {
    match e {
        SessionOpError::NoSuchSession => ControlError::NoSuchSession(sid),
        SessionOpError::NotConnected => ControlError::NotConnected(sid),
    }
}

/// Every live session, by id; listed a chunk at a time, releasing the core's lock in
/// between, so that a server with many sessions keeps serving its clients.
pub(crate) fn sessions(shared: &Shared) -> Result<Vec<SessionReport>, ControlError> {
    let mut ids = shared.inspect(|core, _| core.session_ids())?;
    ids.sort_unstable();
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(256) {
        let now = shared.now();
        out.extend(shared.inspect(|core, _| core.sessions_report_for(chunk, now))?);
    }
    Ok(out)
}

pub(crate) fn expire_session(shared: &Shared, sid: i64) -> Result<(), ControlError> {
    shared.record_control("expire", sid, "");
    let now = shared.now();
    shared
        .with_core(|core, out| core.expire_session(sid, now, out))?
        .map_err(|e| session_err(sid, e))
}

/// Between two slices of a control operation: the core's lock is not fair, so a moment off
/// it lets a waiting request, connection or tick take its turn before the next slice.
fn let_others_in() {
    std::thread::sleep(Duration::from_micros(100));
}

/// Sessions expired, or connections closed, per hold of the core's lock when a control
/// operation acts on all of them.
const SLICE: usize = 256;

/// Expires every session (in id order), a slice at a time, releasing the core's lock in
/// between; returns how many expired. Sessions made meanwhile live on.
pub(crate) fn expire_all_sessions(shared: &Shared) -> Result<usize, ControlError> {
    let mut ids = shared.inspect(|core, _| core.session_ids())?;
    ids.sort_unstable();
    let mut expired = 0;
    for chunk in ids.chunks(SLICE) {
        let now = shared.now();
        expired += shared.with_core(|core, out| core.expire_sessions(chunk, now, out))?;
        let_others_in();
    }
    Ok(expired)
}

pub(crate) fn disconnect_session(shared: &Shared, sid: i64) -> Result<(), ControlError> {
    shared.record_control("disconnect", sid, "");
    shared
        .with_core(|core, out| core.disconnect_session(sid, out))?
        .map_err(|e| session_err(sid, e))
}

/// Closes every client connection, a slice at a time, releasing the core's lock in between;
/// returns how many were closed. Sessions live on.
// Only the admin routes ask for this one.
#[cfg_attr(not(feature = "admin"), allow(dead_code))]
pub(crate) fn disconnect_all(shared: &Shared) -> Result<usize, ControlError> {
    let mut conns = shared.inspect(|core, _| core.connection_ids())?;
    conns.sort_unstable();
    let mut closed = 0;
    for chunk in conns.chunks(SLICE) {
        closed += shared.with_core(|core, out| core.disconnect_connections(chunk, out))?;
        let_others_in();
    }
    Ok(closed)
}

/// Starts a pause. A timed pause ends by itself (unless resumed and paused again before).
pub(crate) fn pause(shared: &Arc<Shared>, opts: PauseOptions) -> Result<(), ControlError> {
    shared.failure_check()?;
    let generation = shared.gate.pause().ok_or(ControlError::AlreadyPaused)?;
    let detail = format!(
        "{}{}",
        opts.duration
            .map_or(String::new(), |d| format!("ms={} ", d.as_millis())),
        if opts.clock == PauseClock::Frozen {
            "clock=freeze"
        } else {
            "clock=runs"
        }
    );
    shared.record_control("pause", 0, &detail);
    if opts.clock == PauseClock::Frozen {
        shared.clock.freeze();
    }
    tracing::info!(?opts, "traffic paused by control");
    if let Some(d) = opts.duration {
        let shared = shared.clone();
        tokio::spawn(async move {
            tokio::time::sleep(d).await;
            if shared.gate.generation() == generation && shared.gate.is_paused() {
                let _ = resume(&shared);
            }
        });
    }
    Ok(())
}

/// Ends a pause: the clock thaws, the core catches up on what fell due (expiring sessions
/// whose clients gave up, if the clock ran), and only then do connections read again.
pub(crate) fn resume(shared: &Shared) -> Result<(), ControlError> {
    if !shared.gate.is_paused() {
        return Err(ControlError::NotPaused);
    }
    shared.clock.thaw();
    shared.record_control("resume", 0, "");
    let now = shared.now();
    let ticked = shared.tick(now).map(|_| ());
    if !shared.gate.resume() {
        return Err(ControlError::NotPaused);
    }
    tracing::info!("traffic resumed by control");
    Ok(ticked?)
}

pub(crate) fn add_fault(shared: &Shared, rule: FaultRule) -> Result<u64, ControlError> {
    shared.record_control("fault_add", 0, &format!("{rule:?}"));
    shared
        .with_core(|core, _| core.add_fault(rule))?
        .map_err(ControlError::TooManyFaults)
}

pub(crate) fn faults(shared: &Shared) -> Result<Vec<FaultStatus>, ControlError> {
    Ok(shared.with_core(|core, _| core.faults())?)
}

pub(crate) fn clear_faults(shared: &Shared) -> Result<usize, ControlError> {
    shared.record_control("faults_clear", 0, "");
    Ok(shared.with_core(|core, _| core.clear_faults())?)
}

// Only the admin routes ask for this one.
#[cfg_attr(not(feature = "admin"), allow(dead_code))]
pub(crate) fn remove_fault(shared: &Shared, id: u64) -> Result<(), ControlError> {
    shared.record_control("fault_remove", 0, &format!("id={id}"));
    if shared.with_core(|core, _| core.remove_fault(id))? {
        Ok(())
    } else {
        Err(ControlError::NoSuchFault(id))
    }
}

/// Deletes every node but `/zookeeper` (and expires every session first if asked); returns
/// how many nodes were deleted. The nodes go a slice at a time ([`RESET_SLICE`], deepest
/// first, each slice a transaction of its own), with the core's lock released between
/// slices, so clients are served while a big tree is deleted. Nodes created meanwhile are
/// deleted too, up to as many again as there were at the start: the reset ends even while
/// clients keep creating.
pub(crate) fn reset(shared: &Shared, expire_sessions: bool) -> Result<usize, ControlError> {
    let detail = if expire_sessions {
        "expire_sessions=true"
    } else {
        ""
    };
    shared.record_control("reset", 0, detail);
    if expire_sessions {
        expire_all_sessions(shared)?;
    }
    let at_start = shared.inspect(|core, _| core.reset_pending())?;
    let most = at_start.saturating_mul(2).max(RESET_SLICE);
    let mut deleted = 0;
    while deleted < most {
        let now = shared.now();
        let slice = RESET_SLICE.min(most - deleted);
        match shared.with_core(|core, out| core.reset_slice(slice, now, out))? {
            0 => break,
            n => deleted += n,
        }
        let_others_in();
    }
    Ok(deleted)
}

/// Moves the manual clock forward and runs everything that fell due, in order.
pub(crate) fn advance_clock(shared: &Shared, by: Duration) -> Result<ClockReport, ControlError> {
    shared.failure_check()?;
    let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
    shared
        .clock
        .advance(ms)
        .ok_or(ControlError::ClockNotManual)?;
    shared.record_control("clock_advance", 0, &format!("ms={ms}"));
    let now = shared.now();
    shared.tick(now)?;
    Ok(clock(shared))
}

pub(crate) fn clock(shared: &Shared) -> ClockReport {
    ClockReport {
        mode: shared.clock.mode(),
        now_ms: shared.clock.mono(),
        elapsed_ms: shared.clock.elapsed(),
        paused: shared.gate.is_paused(),
    }
}

/// Refuses (`true`) or accepts again (`false`) new client connections.
// Only the admin routes ask for this one.
#[cfg_attr(not(feature = "admin"), allow(dead_code))]
pub(crate) fn reject_connections(shared: &Shared, on: bool) {
    shared.gate.set_rejecting(on);
}
