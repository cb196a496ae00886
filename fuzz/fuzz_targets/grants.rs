#![no_main]
//! `grants`: see `server::fuzzing::grants`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::grants(data));
