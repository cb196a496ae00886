//! The store's behaviour: one contract suite over every back end (memory, SQLite, Postgres),
//! the SQL differential against point `authorize`, and what only databases can show.
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod differential;
mod runs;
mod sql;
mod state;
mod support;
