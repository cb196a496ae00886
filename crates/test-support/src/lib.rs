//! What the workspace's tests share, so each exists once: a Postgres schema of a test's own
//! ([`postgres`]), a scripted OpenAI-compatible model on loopback ([`model`]), a scripted
//! Anthropic Messages API for the real Claude Code CLI ([`anthropic`]), a fake
//! Slack Web API with Slack's request signing ([`slack`]), log lines kept in memory
//! ([`log`]), and a loopback HTTP client for a served App ([`http`]).
//!
//! Must never: depend on a workspace crate. Any crate may dev-depend on this one, so a
//! dependency from here back into the workspace would make a dev-dependency cycle (tidy
//! checks `cargo metadata` for them). It is never a normal dependency of a shipped crate.
//!
//! Invariant: what a fake here says is what the real peer says (Slack's envelopes and
//! signature scheme, the chat-completions stream), written from the peer's description, not
//! from the code under test.
// Test support: a broken fixture stops the test that uses it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

pub mod anthropic;
pub mod http;
pub mod log;
pub mod model;
pub mod postgres;
pub mod slack;
