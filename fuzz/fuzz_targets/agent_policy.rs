#![no_main]
//! `agent_policy`: see `server::fuzzing::agent_policy`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::agent_policy(data));
