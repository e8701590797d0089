#![no_main]
//! libFuzzer entry point of the `request` target; the checks are in `fuzz/src/request.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkd_fuzz::request::run(data));
