//! The broker's behaviour, one test binary: `policy` (decide and redecide, case by case) and
//! `property` (both against the oracle in `support/oracle.rs`, and the path and host readings).
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod policy;
mod property;
mod support;
