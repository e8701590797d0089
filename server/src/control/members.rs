//! Stopping and starting a simulated ensemble's members, as control operations. Stopping a
//! member closes its listener and drops its connections; every mode change the
//! [`Membership`] reports (quorum lost or regained) drops the connections of the members it
//! names, under the core's lock, so a member's mode and the connections it admitted always
//! agree.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::ControlError;
use crate::engine::ensemble::{MemberId, MemberReport, Membership, Transition};
use crate::engine::Shared;
use crate::net::member;

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
    let now = shared.now();
    let mut wakers = Vec::new();
    let t = shared.with_state(|state| {
        let members = state.members.as_mut().ok_or(ControlError::NotAnEnsemble)?;
        if !members.contains(id) {
            return Err(ControlError::NoSuchMember(id));
        }
        members.set_clock(now.mono);
        let core = &state.core;
        let Some(t) = members.set_running(id, running, &|m| core.member_zxid(m)) else {
            return Err(if running {
                ControlError::MemberRunning(id)
            } else {
                ControlError::MemberStopped(id)
            });
        };
        state.history.member(id as u32, running);
        let dropped = state.follow_transition(&t, now, budget, shared.durability(), &mut wakers);
        tracing::info!(
            member = id,
            running,
            leader = ?t.leader_after,
            dropped_connections = dropped,
            "ensemble member {}",
            if running { "started" } else { "stopped" }
        );
        Ok(t)
    });
    crate::engine::wake(&mut wakers);
    t?
}

/// Ends member `id`'s accept loop, if it has one, and waits until it has let go of its port.
async fn end_accept_loop(shared: &Shared, id: MemberId) {
    let running = shared.listeners.lock().remove(&id);
    if let Some(r) = running {
        r.stop.cancel();
        let _ = r.task.await;
    }
}

/// Stops member `id`: its listener closes and its connections drop; if it led, another
/// member leads; if a majority is now stopped, the others drop their clients and serve
/// read-only clients only (or none).
pub(crate) async fn stop(shared: &Shared, id: MemberId) -> Result<Transition, ControlError> {
    let _serial = shared.listeners.ops.lock().await;
    let t = transition(shared, id, false)?;
    // Its accept loop lets go of the port before this returns, so a client that tries the
    // stopped member right after is refused, as by a stopped server.
    end_accept_loop(shared, id).await;
    Ok(t)
}

/// Starts member `id` again on the address it had (a member a reconfig added: on the address
/// its line gave): it listens, and if this brings quorum back, every member drops its
/// read-only clients and serves reads and writes again. A member a reconfig removed cannot
/// start until a reconfig adds it back.
pub(crate) async fn start(
    shared: &Arc<Shared>,
    id: MemberId,
    shutdown: &CancellationToken,
) -> Result<SocketAddr, ControlError> {
    let _serial = shared.listeners.ops.lock().await;
    let addr = shared
        .with_members(|m| {
            (
                m.contains(id),
                m.is_running(id),
                m.in_config(id),
                m.addr(id),
            )
        })?
        .ok_or(ControlError::NotAnEnsemble)?;
    let addr = match addr {
        (false, _, _, _) | (_, _, _, None) => return Err(ControlError::NoSuchMember(id)),
        (true, true, _, _) => return Err(ControlError::MemberRunning(id)),
        // A removed ZooKeeper server started again exits: its configuration does not name it.
        (true, false, false, _) => return Err(ControlError::MemberRemoved(id)),
        (true, false, true, Some(a)) => a,
    };
    // The old accept loop must have let go of the port.
    end_accept_loop(shared, id).await;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| ControlError::Bind(format!("cannot listen on {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| ControlError::Bind(format!("cannot read the address of {addr}: {e}")))?;
    if bound != addr {
        shared.with_state(|state| {
            if let Some(m) = state.members.as_mut() {
                m.set_addr(id, bound);
            }
        })?;
    }
    transition(shared, id, true)?;
    member::spawn(shared, id, listener, shutdown);
    Ok(bound)
}
