//! libFuzzer target `npy`: the body is `rt2::fuzz::npy` (docs/FUZZING.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rt2::fuzz::npy(data));
