#![no_main]
//! `token_map`: see `server::fuzzing::token_map`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::token_map(data));
