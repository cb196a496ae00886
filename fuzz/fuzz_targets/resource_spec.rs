#![no_main]
//! `resource_spec`: see `server::fuzzing::resource_spec`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::resource_spec(data));
