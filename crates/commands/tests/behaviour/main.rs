//! The registry and the catalogue, end to end against a real store.
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod catalogue;
mod harness;
mod matrix;
mod ports;
mod registry;
