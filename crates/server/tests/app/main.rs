//! The whole App, as `serve` wires it (the crate's one test binary, one link): every surface
//! (each adapter over real HTTP on loopback or through its port, the command registry and the
//! conformance matrix, the scheduler, and a surface plugged in from here), the composition
//! root (config, secrets, health, the summary, shutdown), telemetry, agent memory through the
//! App, and the fuzz corpora replayed. The surfaces' tests live here, not in the adapters' own
//! crates, because the App that wires them is this crate: an adapter that dev-depended on
//! `server` would make a dependency cycle. An adapter's own tests use its ports with fakes.
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod access_surface;
mod agent_memory;
mod common;
mod composition;
mod fuzz_corpus;
mod ingress_surface;
mod mcp_surface;
mod plugin_surface;
mod registry_behaviour;
mod schedule_surface;
mod slack_surface;
mod telemetry;
