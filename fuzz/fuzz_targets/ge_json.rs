//! libFuzzer target `ge_json`: the body is `rt2::fuzz::ge_json` (docs/FUZZING.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rt2::fuzz::ge_json(data));
