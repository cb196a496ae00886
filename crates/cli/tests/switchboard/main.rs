//! The `switchboard` binary end to end (one test binary, one link): each module drives the
//! real binary, as a user or an operator would, against real stores, real peers on loopback
//! and, for the replica suites, two `serve` processes on one Postgres.
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

mod access_replicas;
mod agent_boundary;
mod agent_network;
mod ask_tools;
mod claude_code;
mod cli;
mod config_check;
mod docs_examples;
mod first_steps;
mod full_disk;
mod groups;
mod http_pass;
mod one_cli;
mod otlp_export;
mod private_files;
mod registry_cli;
mod reload;
mod replica_faults;
mod review;
mod run_diff;
mod serve;
mod slack_replicas;
mod sqlite_feed;
mod workspaces;
