#![no_main]
//! `slack_signature`: see `server::fuzzing::slack_signature`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::slack_signature(data));
