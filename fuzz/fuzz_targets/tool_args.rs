#![no_main]
//! `tool_args`: see `server::fuzzing::tool_args`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::tool_args(data));
