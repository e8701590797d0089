//! What reaches each member after a membership change, under the core's lock: a member that
//! hears no commit stalls, one whose writes reach no leader with a quorum holds them (see
//! [`super::Flow`]); and the timed steps of ZooKeeper's failover timing, run when they fall
//! due and followed through like any other change ([`State::follow_transition`]).

use std::sync::Arc;
use std::task::Waker;

use super::MemberId;
use crate::core::{Lag, Now};
use crate::engine::outbound::OutBudget;
use crate::engine::{durable, State};

/// Hands the core each member's changed flow: stalled or in step, writes held or let go.
/// Writes held for a member in `dropping` (it drops its clients) never run; those of one
/// that reaches a leader again run now.
pub(crate) fn apply_flows(
    state: &mut State,
    dropping: &[MemberId],
    now: Now,
    budget: &Arc<OutBudget>,
    durable: Option<&durable::Durability>,
    wakers: &mut Vec<Waker>,
) {
    let Some(members) = state.members.as_mut() else {
        return;
    };
    let flows = members.take_flow_changes();
    if flows.is_empty() {
        return;
    }
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
                let replay = !dropping.contains(id);
                core.set_member_holding(*id, after.hold, replay, now, out);
            }
        }
    });
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
    let dropped = state.follow_transition(&t, now, budget, durable, wakers);
    tracing::info!(
        leader = ?t.leader_after,
        dropped_connections = dropped,
        "ensemble members noticed a lost leader or quorum, or elected"
    );
    Some((t.leader_after, dropped))
}
