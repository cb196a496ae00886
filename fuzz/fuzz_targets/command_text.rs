#![no_main]
//! `command_text`: see `server::fuzzing::command_text`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::command_text(data));
