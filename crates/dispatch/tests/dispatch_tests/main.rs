//! The dispatcher end to end (one test binary, a module each): a run's life over a real store,
//! and the reviewer agent that answers asks.
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
#![allow(clippy::field_reassign_with_default)] // Options are built step by step per test.

mod dispatch;
mod reviewer;
