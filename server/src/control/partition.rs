//! Partitions of a simulated ensemble, as control operations: the members split into groups,
//! or links are cut one way; the side holding a majority of the voters keeps the quorum
//! (electing a leader of its own if its leader is elsewhere, in a new epoch), and every
//! member outside it is cut off: it keeps its listener but counts for no quorum and applies
//! no commit until the partition heals, serving only read-only clients (with read-only mode
//! on) from what it had, or none. Healing brings the cut members back: they apply what they
//! missed (their clients' watches fire) and serve as followers again. With instant
//! elections this happens at once; with ZooKeeper's timing members notice after their
//! `syncLimit × tickTime` timeouts and elect after an election's time (see
//! [`crate::engine::ensemble`]).

use super::ControlError;
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

/// Reads one-way cuts as `zkd ctl partition --one-way` and `POST /zkd/partition?one_way=`
/// take them: `FROM>TO` pairs (what member FROM sends member TO is lost) separated by commas
/// (spaces ignored), as in `3>1,3>2`.
#[cfg(feature = "admin")]
pub fn parse_one_way(text: &str) -> Result<Vec<(MemberId, MemberId)>, ControlError> {
    let bad = |what: &str| {
        ControlError::BadPartition(format!(
            "{what} in one-way cuts {text:?}: give FROM>TO pairs of member ids separated by \
             ',', as in 3>1,3>2 (what member 3 sends member 1 and member 2 is lost)"
        ))
    };
    let id = |s: &str| {
        let s = s.trim();
        s.parse::<MemberId>()
            .map_err(|_| bad(&format!("{s:?} is not a member id")))
    };
    let mut cuts = Vec::new();
    for pair in text.split(',') {
        let Some((from, to)) = pair.split_once('>') else {
            return Err(bad(&format!("{:?} is not a FROM>TO pair", pair.trim())));
        };
        cuts.push((id(from)?, id(to)?));
    }
    Ok(cuts)
}

/// Splits the members into `groups` and cuts the links `one_way` names, each one way (see
/// the module's description); a new partition replaces the one before.
pub(crate) fn partition(
    shared: &Shared,
    groups: &[Vec<MemberId>],
    one_way: &[(MemberId, MemberId)],
) -> Result<(), ControlError> {
    change(shared, |state| {
        let members = state.members.as_mut().ok_or(ControlError::NotAnEnsemble)?;
        let core = &state.core;
        let t = members
            .partition(groups, one_way, &|m| core.member_zxid(m))
            .map_err(ControlError::BadPartition)?;
        let mut text: Vec<String> = groups
            .iter()
            .map(|g| g.iter().map(u64::to_string).collect::<Vec<_>>().join(","))
            .collect::<Vec<_>>();
        text.retain(|g| !g.is_empty());
        let mut text = text.join("/");
        if !one_way.is_empty() {
            let cuts: Vec<String> = one_way.iter().map(|(a, b)| format!("{a}>{b}")).collect();
            text = format!("{text} one-way {}", cuts.join(","))
                .trim()
                .to_string();
        }
        state.history.partition(Some(&text));
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

/// Applies a membership change under the core's lock at the clock's time and follows it
/// through ([`follow`]).
fn change(
    shared: &Shared,
    f: impl FnOnce(&mut State) -> Result<Transition, ControlError>,
) -> Result<(), ControlError> {
    let budget = &shared.outbound;
    let durable = shared.durability();
    let now = shared.now();
    let mut wakers = Vec::new();
    let r = shared.with_state(|state| {
        if let Some(m) = state.members.as_mut() {
            m.set_clock(now.mono);
        }
        let t = f(state)?;
        let Some(members) = state.members.as_ref() else {
            return Err(ControlError::NotAnEnsemble);
        };
        let cut = members.cut_ids();
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
