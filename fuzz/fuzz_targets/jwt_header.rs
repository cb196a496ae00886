#![no_main]
//! `jwt_header`: see `server::fuzzing::jwt_header`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::jwt_header(data));
