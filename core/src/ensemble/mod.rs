//! The simulated ensemble inside one core: which member each connection came through, the
//! read-only rules, and lagging members with replicas of their own.

pub(crate) mod lag;
pub(crate) mod membership;
pub(crate) mod quorum;

#[cfg(test)]
mod lag_tests;
#[cfg(test)]
mod quorum_tests;
