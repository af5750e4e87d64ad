//! libFuzzer target `lower_run`: the body is `rt2::fuzz::lower_run` (docs/FUZZING.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rt2::fuzz::lower_run(data));
