#![no_main]
//! `config`: see `server::fuzzing::config`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::config(data));
