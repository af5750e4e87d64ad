//! libFuzzer target `ge_text`: the body is `rt2::fuzz::ge_text` (docs/FUZZING.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rt2::fuzz::ge_text(data));
