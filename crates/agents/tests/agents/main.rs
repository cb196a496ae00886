//! The agent back ends and the tool loop, end to end (one test binary, a module each): each
//! back end against real processes and a scripted model on loopback, every tool call through
//! the broker's gate, and programs under bubblewrap.
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod backends;
mod netproxy;
mod sandbox;
mod tool_loop;
