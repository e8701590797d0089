//! The simulated ensemble inside one core: which member each connection came through, the
//! read-only rules, lagging members with replicas of their own, and dynamic reconfiguration.

pub(crate) mod lag;
pub(crate) mod membership;
pub(crate) mod quorum;
pub(crate) mod reconfig;
pub mod servers;

#[cfg(test)]
mod lag_tests;
#[cfg(test)]
mod quorum_tests;
#[cfg(test)]
mod reconfig_tests;
