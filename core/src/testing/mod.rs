//! Test features applied in the core's one order (the control plane's session operations,
//! fault rules, fixtures), the consistency checks the fuzz program and the tests run after
//! every step (`Core::check_invariants`), and the tools of the tests that drive the core
//! directly: the `RecordingOutbox` (feature `test-support`) and the core's own test harness.

pub mod control_ops;
pub mod fault;
pub mod fixture_nodes;
pub(crate) mod invariants;
#[cfg(any(test, feature = "test-support"))]
pub mod recording;
#[cfg(any(test, feature = "test-support"))]
pub mod session;

#[cfg(test)]
mod control_tests;
#[cfg(test)]
pub(crate) mod harness;
#[cfg(test)]
mod hold_time_tests;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod work_tests;
