#![no_main]
//! `slack_envelope`: see `server::fuzzing::slack_envelope`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::slack_envelope(data));
