//! The registry and the catalogue, end to end against a real store.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)] // a test binary: a failed expectation panics

mod catalogue;
mod harness;
mod matrix;
mod ports;
mod registry;
