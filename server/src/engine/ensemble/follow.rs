//! Following a membership change through in the engine, under the core's lock: what reaches
//! each member (a member that hears no commit stalls, one whose writes reach no leader with
//! a quorum holds them), session time following the quorum, a new leader's epoch, and the
//! clients of members whose way of serving changed dropped (their local sessions end).

use std::sync::Arc;
use std::task::Waker;

use super::{MemberId, Transition};
use crate::core::{Lag, Now};
use crate::engine::outbound::OutBudget;
use crate::engine::{durable, State};

/// Follows `t`, which the membership just reported, through the core and the connections;
/// returns how many connections dropped.
pub(crate) fn follow(
    state: &mut State,
    t: &Transition,
    now: Now,
    budget: &Arc<OutBudget>,
    durable: Option<&durable::Durability>,
    wakers: &mut Vec<Waker>,
) -> usize {
    let Some(members) = state.members.as_mut() else {
        return 0;
    };
    let flows = members.take_flow_changes();
    let connected = members.connected_ids();
    let quorum = members.has_quorum();
    let dropping = &t.drop_connections;
    state.call(budget, durable, wakers, |core, out| {
        for (id, before, after) in &flows {
            if before.stall != after.stall {
                let stalled = core.member_lag(*id) == Lag::Stalled;
                match (after.stall, stalled) {
                    (true, false) => core.set_member_lag(*id, Lag::Stalled, now, out),
                    (false, true) => core.set_member_lag(*id, Lag::Lockstep, now, out),
                    _ => {}
                }
            }
        }
        for (id, before, after) in &flows {
            if before.hold != after.hold {
                // Writes held for a member that drops its clients never run; those of one
                // that reaches a leader again run now.
                let replay = !dropping.contains(id);
                core.set_member_holding(*id, after.hold, replay, now, out);
            }
        }
        core.set_running_members(connected);
        core.set_quorum(quorum, now);
    });
    if t.leader_after.is_some() && t.leader_after != t.leader_before {
        state.new_epoch(now);
    }
    state.end_local_sessions(dropping, budget, durable, wakers);
    state.drop_connections_of(dropping, budget)
}

/// Runs the steps of the members' timing that fell due by `now` and follows them through;
/// `None` when none did, else the leader after and how many connections dropped.
pub(crate) fn advance(
    state: &mut State,
    now: Now,
    budget: &Arc<OutBudget>,
    durable: Option<&durable::Durability>,
    wakers: &mut Vec<Waker>,
) -> Option<(Option<MemberId>, usize)> {
    let members = state.members.as_mut()?;
    let core = &state.core;
    let t = members.advance(now.mono, &|m| core.member_zxid(m))?;
    let dropped = follow(state, &t, now, budget, durable, wakers);
    tracing::info!(
        leader = ?t.leader_after,
        dropped_connections = dropped,
        "ensemble members noticed a lost leader or quorum, or elected"
    );
    Some((t.leader_after, dropped))
}
