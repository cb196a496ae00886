//! Every surface against the whole App, as `serve` wires it (one binary, one link): each
//! adapter over real HTTP on loopback or through its port, the command registry and the
//! conformance matrix, and the scheduler. They live here, not in the adapters' own crates,
//! because the App that wires them is this crate: an adapter that dev-depended on `server`
//! would make a dependency cycle. An adapter's own tests use its ports with fakes.
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod access_surface;
mod ingress_surface;
mod mcp_surface;
mod plugin_surface;
mod registry_behaviour;
mod schedule_surface;
mod slack_surface;
