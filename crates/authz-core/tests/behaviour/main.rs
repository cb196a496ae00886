//! authz-core behaviour: the decision, the predicate differential, config parsing and the
//! baselines, the channel directory. One test binary for the crate.
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod authorize;
mod config;
mod differential;
mod directory;
mod fixtures;
mod review;
mod validate;
