#![no_main]
//! libFuzzer entry point of the `core` target; the checks are in `fuzz/src/core_program.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkd_fuzz::core_program::run(data));
