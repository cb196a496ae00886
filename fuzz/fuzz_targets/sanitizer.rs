#![no_main]
//! `sanitizer`: see `server::fuzzing::sanitizer`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzzing::sanitizer(data));
