#![no_main]
//! `mcp_envelope`: see `server::fuzzing::mcp_envelope`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::mcp_envelope(data));
