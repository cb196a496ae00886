//! Surfaces as plug-ins: what a surface adds to the config file (its own section and the
//! environment variables of its secrets), to `serve` (its routes, what it starts), to the
//! start-up summary (its line: on, or off and what it needs), to the channel directory (the
//! directory of its namespace) and to the request spans (the route templates of the paths it
//! serves). `App::build` holds the built-in surfaces ([`builtin`]) and any a caller adds
//! through `Overrides::surfaces`; the config load ([`crate::load_config`]), `serve`, the
//! summary, the directory and the request-span middleware walk that one list, so adding a
//! surface edits none of them.
//!
//! What a surface must never do: decide anything itself (it proves its caller through
//! `commands::identity` and hands text to `Registry::handle`), or start its routes without
//! what it needs (its `routes` is `None` then, and its summary line says what it needs).
//!
//! The four built-in surfaces predate the section hook: their sections are typed fields of
//! `LoadedConfig` and their secrets fields of `Secrets`, read by name in `config/` and
//! `secrets.rs`; a new surface reads both through [`SurfacePlugin::section`].

use std::net::SocketAddr;
use std::sync::Arc;

use authz_core::{BoxFuture, ChannelDirectory, Namespace};
use axum::Router;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{LoadedConfig, SurfaceSection};
use crate::summary;
pub use crate::summary::SurfaceLine;
use crate::{App, Secrets};

/// One surface of the App.
pub trait SurfacePlugin: Send + Sync {
    /// Its own config section and secrets, read at load with the built-in sections; its typed
    /// section is then `app.config.surface_sections.get(key)`, its secrets
    /// `app.secrets.surface_secret(env)`.
    fn section(&self) -> Option<&dyn SurfaceSection> {
        None
    }

    /// The directory answering for its namespace's channels and members, if it has one (a
    /// chat surface's API); every other namespace's channels are what their ids establish.
    fn directory(
        &self,
        _config: &LoadedConfig,
        _secrets: &Secrets,
    ) -> Option<(Namespace, Arc<dyn ChannelDirectory>)> {
        None
    }

    /// Its line in the start-up summary: on and what it serves, or off and what it needs.
    fn summary_line(&self, app: &App) -> SurfaceLine;

    /// Its routes while it is on; `None` keeps it off.
    fn routes(&self, app: &App, shutdown: &CancellationToken) -> Option<Router>;

    /// The `(surface, route template)` a request to `path` is traced under, for a path this
    /// surface serves (a template keeps ids out of span names); `None` for any other path.
    fn span_route(&self, path: &str) -> Option<(&'static str, &'static str)>;

    /// What it starts under `serve`, once bound at `bound` and before the routes are built (a
    /// connection to check its credentials, a socket); its tasks run until `stop`.
    fn start<'a>(
        &'a self,
        _app: &'a App,
        _bound: SocketAddr,
        _stop: CancellationToken,
    ) -> BoxFuture<'a, Vec<JoinHandle<()>>> {
        Box::pin(std::future::ready(Vec::new()))
    }
}

/// The sections the surfaces of `surfaces` read from the config file.
pub fn sections(surfaces: &[Arc<dyn SurfacePlugin>]) -> Vec<&dyn SurfaceSection> {
    surfaces.iter().filter_map(|s| s.section()).collect()
}

/// The surfaces every build has, in the order `serve` starts them and the summary shows them.
pub fn builtin() -> Vec<Arc<dyn SurfacePlugin>> {
    // MCP before Slack: the URL agents reach `/mcp` at is set before Slack's socket can
    // start a run.
    vec![
        Arc::new(IngressSurface),
        Arc::new(McpSurface),
        Arc::new(SlackSurface),
        Arc::new(AccessSurface),
    ]
}

/// `POST /ingress`: bearer tokens from the token map.
struct IngressSurface;

impl SurfacePlugin for IngressSurface {
    fn summary_line(&self, app: &App) -> SurfaceLine {
        summary::ingress_line(app)
    }

    fn routes(&self, app: &App, _shutdown: &CancellationToken) -> Option<Router> {
        // Always served: without a token map the route answers 503 saying what it needs.
        let ingress = Arc::new(http_ingress::Ingress {
            registry: app.registry.clone(),
            services: app.services.clone(),
            max_body_bytes: app.config.ingress.max_body_bytes,
        });
        Some(http_ingress::router(ingress))
    }

    fn span_route(&self, path: &str) -> Option<(&'static str, &'static str)> {
        (path == "/ingress").then_some(("http", "/ingress"))
    }
}

/// `/mcp`: commands as MCP tools, for bearer tokens and agents' run-scoped tokens.
struct McpSurface;

impl SurfacePlugin for McpSurface {
    fn summary_line(&self, app: &App) -> SurfaceLine {
        summary::mcp_line(app)
    }

    fn routes(&self, app: &App, shutdown: &CancellationToken) -> Option<Router> {
        // Enabled without a token map, the route answers 503 saying what it needs.
        app.config.mcp.enabled.then(|| {
            let mcp = Arc::new(mcp::Mcp::new(
                app.registry.clone(),
                app.services.clone(),
                app.config.mcp.settings.clone(),
            ));
            mcp::router(mcp, shutdown.clone())
        })
    }

    fn span_route(&self, path: &str) -> Option<(&'static str, &'static str)> {
        (path == mcp::PATH || path.starts_with("/mcp/")).then_some(("mcp", "/mcp"))
    }

    fn start<'a>(
        &'a self,
        app: &'a App,
        bound: SocketAddr,
        _stop: CancellationToken,
    ) -> BoxFuture<'a, Vec<JoinHandle<()>>> {
        if app.mcp_is_on() {
            // Command agents are children of this process: loopback reaches it.
            let host = if bound.ip().is_unspecified() {
                std::net::IpAddr::from([127, 0, 0, 1])
            } else {
                bound.ip()
            };
            let url = format!(
                "http://{}{}",
                SocketAddr::new(host, bound.port()),
                mcp::PATH
            );
            app.dispatcher.set_mcp_url(url);
        }
        Box::pin(std::future::ready(Vec::new()))
    }
}

/// `/api` and the `/runs` pages, behind Access JWTs.
struct AccessSurface;

impl SurfacePlugin for AccessSurface {
    fn summary_line(&self, app: &App) -> SurfaceLine {
        summary::access_line(app)
    }

    fn routes(&self, app: &App, shutdown: &CancellationToken) -> Option<Router> {
        let verifier = app.access.verifier()?;
        let access = Arc::new(access_api::AccessApi {
            registry: app.registry.clone(),
            services: app.services.clone(),
            verifier: verifier.clone(),
            shutdown: shutdown.clone(),
            keep_alive: access_api::KEEP_ALIVE,
            recheck: access_api::RECHECK,
            max_body_bytes: app.config.ingress.max_body_bytes,
        });
        Some(access_api::router(access))
    }

    fn span_route(&self, path: &str) -> Option<(&'static str, &'static str)> {
        // Route templates only: a run id or a command id stays out of the span's name.
        match path {
            p if p.starts_with("/api/") => Some(("access", "/api/{command}")),
            "/runs" | "/runs/stream" | "/runs/scheduled" => Some(("access", "/runs")),
            p if p.starts_with("/runs/") => Some(("access", "/runs/{id}")),
            _ => None,
        }
    }
}

/// Slack: signed events and interactions over HTTP, or Socket Mode.
struct SlackSurface;

impl SurfacePlugin for SlackSurface {
    fn summary_line(&self, app: &App) -> SurfaceLine {
        summary::slack_line(app)
    }

    fn routes(&self, app: &App, _shutdown: &CancellationToken) -> Option<Router> {
        match app.slack_surface() {
            Some((surface, slack::SlackMode::Events)) => Some(slack::router(surface)),
            _ => None,
        }
    }

    fn span_route(&self, path: &str) -> Option<(&'static str, &'static str)> {
        match path {
            "/slack/events" => Some(("slack", "/slack/events")),
            "/slack/interactions" => Some(("slack", "/slack/interactions")),
            _ => None,
        }
    }

    fn start<'a>(
        &'a self,
        app: &'a App,
        _bound: SocketAddr,
        stop: CancellationToken,
    ) -> BoxFuture<'a, Vec<JoinHandle<()>>> {
        Box::pin(async move { app.connect_slack(stop).await.into_iter().collect() })
    }
}
