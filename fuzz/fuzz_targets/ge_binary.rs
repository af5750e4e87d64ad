//! libFuzzer target `ge_binary`: the body is `rt2::fuzz::ge_binary` (docs/FUZZING.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rt2::fuzz::ge_binary(data));
