#![no_main]
//! `policy_rules`: see `server::fuzzing::policy_rules`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::policy_rules(data));
