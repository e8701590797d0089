//! The fuzz targets' checks, one module per target, each with `run(input)` that panics on a
//! finding. The libFuzzer entry points in `fuzz_targets/` call them, and the server's
//! `fuzz_replay` test includes these files to replay saved inputs in the normal test suite.

pub mod core_program;
pub mod frame;
pub mod request;
