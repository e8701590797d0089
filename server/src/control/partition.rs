//! Partitions of a simulated ensemble, as control operations: the members split into groups;
//! the group holding a majority of the voters keeps the quorum (electing a leader of its own
//! if its leader is elsewhere, in a new epoch), and every member outside it is cut off: it
//! keeps its listener but counts for no quorum and applies no commit until the partition
//! heals, serving only read-only clients (with read-only mode on) from what it had, or none.
//! Healing brings the cut members back: they apply what they missed (their clients' watches
//! fire) and serve as followers again. Changes take effect at once; ZooKeeper's members
//! notice a partition only after their `syncLimit` timeouts.

use super::ControlError;
use crate::core::Lag;
use crate::engine::ensemble::{MemberId, Transition};
use crate::engine::{Shared, State};

/// Reads groups as `zkd ctl partition` and `POST /zkd/partition?groups=` take them: member
/// ids separated by commas, groups by `/` (spaces ignored), as in `1 / 2,3`.
#[cfg(feature = "admin")]
pub fn parse_groups(text: &str) -> Result<Vec<Vec<MemberId>>, ControlError> {
    let bad = |what: &str| {
        ControlError::BadPartition(format!(
            "{what} in partition {text:?}: give groups of member ids separated by '/', the ids \
             of a group by ',', as in 1 / 2,3"
        ))
    };
    let mut groups = Vec::new();
    for group in text.split('/') {
        let mut ids = Vec::new();
        for id in group.split(',') {
            let id = id.trim();
            if id.is_empty() {
                return Err(bad("an empty member id"));
            }
            ids.push(
                id.parse::<MemberId>()
                    .map_err(|_| bad(&format!("{id:?} is not a member id")))?,
            );
        }
        groups.push(ids);
    }
    Ok(groups)
}

/// Splits the members into `groups` (see the module's description); a new partition
/// replaces the one before.
pub(crate) fn partition(shared: &Shared, groups: &[Vec<MemberId>]) -> Result<(), ControlError> {
    change(shared, |state| {
        let members = state.members.as_mut().ok_or(ControlError::NotAnEnsemble)?;
        let core = &state.core;
        let t = members
            .partition(groups, &|m| core.member_zxid(m))
            .map_err(ControlError::BadPartition)?;
        let text: Vec<String> = groups
            .iter()
            .map(|g| g.iter().map(u64::to_string).collect::<Vec<_>>().join(","))
            .collect();
        state.history.partition(Some(&text.join("/")));
        Ok(t)
    })
}

/// Ends a partition: the cut members apply what they missed and serve again.
pub(crate) fn heal(shared: &Shared) -> Result<(), ControlError> {
    change(shared, |state| {
        let members = state.members.as_mut().ok_or(ControlError::NotAnEnsemble)?;
        let core = &state.core;
        let t = members.heal(&|m| core.member_zxid(m));
        state.history.partition(None);
        Ok(t)
    })
}

/// Applies a membership change under the core's lock and follows it through: the cut
/// members stall (and the others, healed, catch up), then [`State::follow_transition`].
fn change(
    shared: &Shared,
    f: impl FnOnce(&mut State) -> Result<Transition, ControlError>,
) -> Result<(), ControlError> {
    let budget = &shared.outbound;
    let durable = shared.durability();
    let now = shared.now();
    let mut wakers = Vec::new();
    let r = shared.with_state(|state| {
        let t = f(state)?;
        let Some(members) = state.members.as_ref() else {
            return Err(ControlError::NotAnEnsemble);
        };
        let cut = members.cut_ids();
        let ids: Vec<MemberId> = members.ids().collect();
        state.call(budget, durable, &mut wakers, |core, out| {
            for id in ids {
                let stalled = core.member_lag(id) == Lag::Stalled;
                match (cut.contains(&id), stalled) {
                    (true, false) => core.set_member_lag(id, Lag::Stalled, now, out),
                    (false, true) => core.set_member_lag(id, Lag::Lockstep, now, out),
                    _ => {}
                }
            }
        });
        let dropped = state.follow_transition(&t, now, budget, durable, &mut wakers);
        tracing::info!(
            cut = ?cut,
            leader = ?t.leader_after,
            dropped_connections = dropped,
            "ensemble partition changed"
        );
        Ok(())
    });
    crate::engine::wake(&mut wakers);
    r?
}
