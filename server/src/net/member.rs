//! The client listeners of a simulated ensemble's members, and stopping and starting them.
//!
//! Each member has its own accept loop (tagging its connections with the member's id) under a
//! stop token that is a child of the server's shutdown token. Stopping a member closes its
//! listener and drops its connections; every mode change the [`Membership`] reports (quorum
//! lost or regained) drops the connections of the members it names, under the core's lock,
//! so a member's mode and the connections it admitted always agree.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{accept_loop, outbound, Shared, Transport};
use crate::control::ControlError;
use crate::ensemble::{MemberId, MemberReport, Membership, Transition};

/// One member's accept loop.
struct Running {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

/// Every member's accept loop, by member id (stopped members keep their finished task until
/// they start again).
#[derive(Default)]
pub(crate) struct Listeners {
    tasks: Mutex<HashMap<MemberId, Running>>,
    /// Held through each start and stop, so two of them never interleave.
    ops: tokio::sync::Mutex<()>,
}

impl Listeners {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MemberId, Running>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for every member's accept loop to end (after the server's shutdown token was
    /// cancelled).
    pub(crate) async fn join_all(&self) {
        let tasks: Vec<Running> = self.lock().drain().map(|(_, r)| r).collect();
        for r in tasks {
            r.stop.cancel();
            let _ = r.task.await;
        }
    }

    /// Stops every accept loop at once, without waiting (dropping the server).
    pub(crate) fn abort_all(&self) {
        for (_, r) in self.lock().drain() {
            r.stop.cancel();
            r.task.abort();
        }
    }
}

/// Installs the membership and starts each member's accept loop on its bound listener.
pub(crate) fn start_all(
    shared: &Arc<Shared>,
    listeners: Vec<(MemberId, TcpListener)>,
    read_only: bool,
    shutdown: &CancellationToken,
) -> std::io::Result<()> {
    let mut addrs = Vec::with_capacity(listeners.len());
    for (id, l) in &listeners {
        addrs.push((*id, l.local_addr()?));
    }
    let membership = Membership::new(addrs, read_only);
    let text = membership.config_text();
    let now = shared.now();
    shared
        .with_state(|state| {
            state.core.set_config_text(&text, now.wall);
            state.members = Some(membership);
        })
        .map_err(|_| std::io::Error::other("the server failed while starting"))?;
    for (id, listener) in listeners {
        spawn(shared, id, listener, shutdown);
    }
    Ok(())
}

fn spawn(shared: &Arc<Shared>, id: MemberId, listener: TcpListener, shutdown: &CancellationToken) {
    let stop = shutdown.child_token();
    let task = tokio::spawn(accept_loop(
        listener,
        shared.clone(),
        stop.clone(),
        Transport::Plain,
        id,
    ));
    shared.listeners.lock().insert(id, Running { stop, task });
}

/// Every member: id, client address, mode, whether it runs.
pub(crate) fn list(shared: &Shared) -> Result<Vec<MemberReport>, ControlError> {
    shared
        .with_members(Membership::report)?
        .ok_or(ControlError::NotAnEnsemble)
}

/// Marks `id` running or stopped and drops the connections the change ends, under the
/// core's lock.
fn transition(shared: &Shared, id: MemberId, running: bool) -> Result<Transition, ControlError> {
    let budget = &shared.outbound;
    shared.with_state(|state| {
        let members = state.members.as_mut().ok_or(ControlError::NotAnEnsemble)?;
        if !members.contains(id) {
            return Err(ControlError::NoSuchMember(id));
        }
        let Some(t) = members.set_running(id, running) else {
            return Err(if running {
                ControlError::MemberRunning(id)
            } else {
                ControlError::MemberStopped(id)
            });
        };
        let mut dropped = 0usize;
        for h in state.conns.values_mut() {
            if t.drop_connections.contains(&h.member) && !h.closing {
                outbound::drop_connection(h, budget);
                dropped += 1;
            }
        }
        tracing::info!(
            member = id,
            running,
            leader = ?t.leader_after,
            dropped_connections = dropped,
            "ensemble member {}",
            if running { "started" } else { "stopped" }
        );
        Ok(t)
    })?
}

/// Stops member `id`: its listener closes and its connections drop; if it led, another
/// member leads; if a majority is now stopped, the others drop their clients and serve
/// read-only clients only (or none).
pub(crate) async fn stop(shared: &Shared, id: MemberId) -> Result<Transition, ControlError> {
    let _serial = shared.listeners.ops.lock().await;
    let t = transition(shared, id, false)?;
    if let Some(r) = shared.listeners.lock().get(&id) {
        r.stop.cancel();
    }
    Ok(t)
}

/// Starts member `id` again on the address it had: it listens, and if this brings quorum
/// back, every member drops its read-only clients and serves reads and writes again.
pub(crate) async fn start(
    shared: &Arc<Shared>,
    id: MemberId,
    shutdown: &CancellationToken,
) -> Result<SocketAddr, ControlError> {
    let _serial = shared.listeners.ops.lock().await;
    let addr = shared
        .with_members(|m| (m.contains(id), m.is_running(id), m.addr(id)))?
        .ok_or(ControlError::NotAnEnsemble)?;
    let addr = match addr {
        (false, _, _) | (_, _, None) => return Err(ControlError::NoSuchMember(id)),
        (true, true, _) => return Err(ControlError::MemberRunning(id)),
        (true, false, Some(a)) => a,
    };
    // The old accept loop must have let go of the port.
    let old = shared.listeners.lock().remove(&id);
    if let Some(r) = old {
        r.stop.cancel();
        let _ = r.task.await;
    }
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| ControlError::Bind(format!("cannot listen on {addr} again: {e}")))?;
    transition(shared, id, true)?;
    spawn(shared, id, listener, shutdown);
    Ok(addr)
}
