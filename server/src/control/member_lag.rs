//! Telling an ensemble member to lag, as a control operation: [`crate::Server`]'s method
//! and the admin route both call [`set`], which checks the member and goes through the core
//! in the one order of client requests (see docs/protocol.md, "Lagging members and sync").

use crate::control::ControlError;
use crate::core::Lag;
use crate::engine::Shared;

/// One member's lag as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberLagReport {
    pub id: u64,
    pub lag: Lag,
    /// The last zxid the member has applied.
    pub zxid: i64,
    /// Transactions committed that it has not applied yet.
    pub behind: i64,
}

/// Fails unless `id` is a member of this server's ensemble.
fn check_member(shared: &Shared, id: u64) -> Result<(), ControlError> {
    match shared.with_members(|m| m.contains(id))? {
        None => Err(ControlError::NotAnEnsemble),
        Some(false) => Err(ControlError::NoSuchMember(id)),
        Some(true) => Ok(()),
    }
}

/// Sets how far member `id` lags (`Lag::Lockstep`, or 0 ms / 0 transactions: in step).
pub(crate) fn set(shared: &Shared, id: u64, lag: Lag) -> Result<MemberLagReport, ControlError> {
    check_member(shared, id)?;
    shared.record_control("member_lag", 0, &format!("member={id} {lag:?}"));
    let now = shared.now();
    Ok(shared.with_core(|core, out| {
        core.set_member_lag(id, lag, now, out);
        report(core, id)
    })?)
}

/// Member `id`'s lag, applied zxid and distance behind.
pub(crate) fn get(shared: &Shared, id: u64) -> Result<MemberLagReport, ControlError> {
    check_member(shared, id)?;
    Ok(shared.with_core(|core, _| report(core, id))?)
}

fn report(core: &crate::core::Core, id: u64) -> MemberLagReport {
    let zxid = core.member_zxid(id);
    MemberLagReport {
        id,
        lag: core.member_lag(id),
        zxid,
        behind: i64::try_from(core.member_behind(id)).unwrap_or(i64::MAX),
    }
}
