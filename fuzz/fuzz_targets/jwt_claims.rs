#![no_main]
//! `jwt_claims`: see `server::fuzzing::jwt_claims`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::jwt_claims(data));
