#![no_main]
//! libFuzzer entry point of the `frame` target; the checks are in `fuzz/src/frame.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkd_fuzz::frame::run(data));
