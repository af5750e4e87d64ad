//! libFuzzer target `capture_script`: the body is `rt2::fuzz::capture_script` (docs/FUZZING.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rt2::fuzz::capture_script(data));
