//! libFuzzer target `rim_json`: the body is `rt2::fuzz::rim_json` (docs/FUZZING.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rt2::fuzz::rim_json(data));
