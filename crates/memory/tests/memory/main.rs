//! Agent memory's behaviour, one test binary: `reflection` (the write gate row by row through
//! `Memory::reflect` on a real SQLite store) and `gate_props` (never wider than the origin
//! allows, over generated runs).
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod gate_props;
mod reflection;
