//! # mcp: `/mcp`, every registry command as an MCP tool
//!
//! What it is: the agents' surface. rmcp's Streamable HTTP server in **stateless** mode (no
//! session is kept, so any replica answers any request), nested in the one axum router at
//! `/mcp`. A gate in front of it proves who is calling before any MCP message is read:
//!
//! - a bearer token from the shared token map → `mcp:<subject>`, its runs recorded in the
//!   token's channel or `mcp:<subject>` (`commands::identity::bearer_caller`);
//! - else a run-scoped agent token → `agent:<name>` acting for its run's principal, grants
//!   intersected, valid only while the run is live in the store (`agent_caller`).
//!
//! Tools are the registry's commands (`runs.list` → `runs_list`, schema from the command's
//! argument schema, `readOnlyHint` for `:read` actions) plus `ask`. `tools/list` shows only the
//! commands whose admission passes for this caller; `tools/call` goes through
//! `Registry::invoke`, so a refusal is the registry's reply as a tool result with
//! `isError: true`, exactly as any other surface renders it. It depends on `commands` and
//! `authz-core` only.
//!
//! What it must never do: decide anything itself (admission is the registry's, run starts the
//! launcher's), answer an MCP message from a caller it has not proved, say why a bearer was
//! refused, carry a deny reason in a protocol error, or log a token or arguments.
//!
//! Invariants: a `Host` outside `allowed_hosts` → 403; no bearer, an unknown one, a foreign
//! or expired agent token, or one whose run has ended → 401 with an empty body; a request
//! carrying an `Mcp-Session-Id` (this server never issues one) → 404 as an unknown session;
//! a body over the limit → 413, and one that is not a JSON-RPC 2.0 message → 400 with a
//! JSON-RPC error (the gate, before rmcp); `structuredContent` is always a JSON object; an
//! agent's runs are children of the run it acts in (`Caller::acting_in`).
//!
//! ## Modules
//!
//! | module | what it holds |
//! | --- | --- |
//! | `entry` | the gate, before rmcp: `Host` against `[mcp] allowed_hosts` (403; its own rule, a port-less entry matches any port; rmcp's host check is off), no token map → 503, then the bearer: `bearer_caller(Surface::Mcp)` from the shared map, else `agent_caller` (an agent token whose run is live in the store) → 401 with an empty body; any `Mcp-Session-Id` → 404 (none is issued); the body bounded (413) and checked to be one JSON-RPC 2.0 message (400 with `-32700` / `-32600`). The proven `Caller` rides in the request's extensions, which rmcp hands the handler |
//! | `tools` | `tools/list` = the commands whose `Registry::admission` passes (with empty arguments) plus `ask` when the caller may run some agent, paged by offset cursors; `tools/call` → `Registry::invoke(RawInput::Json)` |
//! | `result` | a registry reply as a tool result: the reply's text as content and its data as `structuredContent` (always an object), `isError` unless ok |
//! | `ask` | a bearer's run through `start_agent_run`; an agent's caller carries the run it acts in (`Caller::acting_in`, set only by `identity::agent_caller`), so any run it starts (`ask`, `repo test`, `repo build`) is that run's child (the launcher places it in its live parent's channel, with its stamp, for its principal, read from the store); `wait` bounded by `MAX_WAIT`, progress notifications when asked; the client's disconnect ends the wait and never the run |
//! | `waits` | the `ask` calls waiting for their runs, so a `notifications/cancelled` (its own POST on a stateless server) stops a wait of the same caller only |
//!
//! Tests: against the whole App in `crates/server/tests/app/mcp_surface.rs` (with its
//! helpers in `crates/server/tests/app/mcp_surface/common.rs`); the official Python SDK
//! against a running server in `scripts/mcp-client-check.sh`.

mod ask;
mod entry;
mod result;
mod tools;
mod waits;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use commands::{Caller, Registry, Services};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use entry::HostRule;

/// The entry point for the fuzz target `mcp_envelope` (`fuzz/`) and its corpus replay: a body
/// read as the gate reads it before rmcp sees it. It refuses or accepts; it may not panic.
#[doc(hidden)]
pub fn fuzz_envelope(body: &[u8]) -> bool {
    entry::read_message(body).is_ok()
}

/// Where the surface is mounted.
pub const PATH: &str = "/mcp";
/// The longest an `ask` with `wait: true` waits for its run.
pub const MAX_WAIT: Duration = Duration::from_secs(300);
/// The loopback hosts the surface accepts when `allowed_hosts` is not configured.
pub const DEFAULT_ALLOWED_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The surface's settings (from `[mcp]`).
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// `Host` values accepted (DNS-rebinding protection); an entry without a port matches
    /// any port.
    pub allowed_hosts: Vec<HostRule>,
    /// The largest request body read (413 past it).
    pub max_body_bytes: usize,
    /// How many tools one `tools/list` page holds.
    pub page_size: usize,
    /// How often `ask` with `wait: true` sends a progress notification (when the client
    /// asked for progress).
    pub progress_every: Duration,
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            allowed_hosts: DEFAULT_ALLOWED_HOSTS
                .iter()
                .filter_map(|h| HostRule::parse(h).ok())
                .collect(),
            max_body_bytes: 1024 * 1024,
            page_size: 100,
            progress_every: Duration::from_secs(2),
        }
    }
}

/// What the route needs. Without a token map in `services` the route answers 503.
pub struct Mcp {
    registry: Arc<Registry>,
    services: Arc<Services>,
    settings: McpSettings,
    waits: Arc<waits::Waits>,
}

impl Mcp {
    pub fn new(registry: Arc<Registry>, services: Arc<Services>, settings: McpSettings) -> Self {
        Mcp {
            registry,
            services,
            settings,
            waits: Arc::default(),
        }
    }
}

/// What the route answers (503) when no token map is configured.
pub const OFF: &str = "the MCP surface is off: no token map is configured (set SWITCHBOARD_INGRESS_TOKENS or ingress.tokens_file)";

/// Who a caller is, for matching a cancellation to the waits it may cancel: the bearer's
/// actor, or the agent in its run.
pub(crate) fn caller_key(caller: &Caller) -> String {
    match caller.acting_in() {
        Some(run) => format!("{}@{run}", caller.actor.id),
        None => caller.actor.id.to_string(),
    }
}

/// The `/mcp` route. `shutdown` ends open response streams when the server stops.
pub fn router(mcp: Arc<Mcp>, shutdown: CancellationToken) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // The gate checks `Host` (its rule: a port-less entry matches any port) before rmcp.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(mcp.settings.max_body_bytes)
        .with_cancellation_token(shutdown);
    let handler = tools::Handler::new(mcp.clone());
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service(PATH, service)
        .layer(axum::middleware::from_fn_with_state(mcp, entry::gate))
}
