#![no_main]
//! `slack_interaction`: see `server::fuzzing::slack_interaction`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::slack_interaction(data));
