//! Surfaces as plug-ins: what a surface adds to the config file (its own section and the
//! environment variables of its secrets), to `serve` (its routes, what it starts), to the
//! start-up summary (its line: on, or off and what it needs), to `App::build` (what it builds
//! from its config without I/O, and the directory of its namespace: `prepare`) and to the
//! request spans (the route templates of the paths it
//! serves). `App::build` holds the built-in surfaces ([`builtin`]) and any a caller adds
//! through `Overrides::surfaces`; `serve`, the summary, the directory and the request-span
//! middleware walk that one list, so adding a surface edits none of them. The config is read
//! before the App exists: [`crate::load_config`] reads the built-in surfaces' sections, and a
//! caller adding a surface passes its section to `config::load_with` (`App::build` refuses a
//! surface whose section the load did not read).
//!
//! What a surface must never do: decide anything itself (it proves its caller through
//! `commands::identity` and hands text to `Registry::handle`), or start its routes without
//! what it needs: its `routes` is then [`Routes::Off`], every path it owns answers 503 with
//! a one-line reason, and its summary line says what it needs.
//!
//! The four built-in surfaces predate the section hook: their sections are typed fields of
//! `LoadedConfig` and their secrets fields of `Secrets`, read by name in `config/` and
//! `secrets.rs`; a new surface reads both through [`SurfacePlugin::section`].

mod access;
mod ingress;
mod mcp;
mod slack;

use std::net::SocketAddr;
use std::sync::Arc;

use authz_core::{BoxFuture, ChannelDirectory, Namespace};
use axum::Router;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{LoadedConfig, SurfaceSection};
pub use crate::summary::SurfaceLine;
use crate::{App, Secrets};
use access::AccessSurface;
use ingress::IngressSurface;
use mcp::McpSurface;
use slack::SlackSurface;

/// One surface of the App.
pub trait SurfacePlugin: Send + Sync {
    /// Its own config section and secrets, read at load (`load_config` for a built-in
    /// surface, `config::load_with` for an added one); its typed section is then
    /// `app.config.surface_sections.get(key)`, its secrets `app.secrets.surface_secret(env)`.
    fn section(&self) -> Option<&dyn SurfaceSection> {
        None
    }

    /// Builds what it needs from the config and its secrets, without I/O (a client, a
    /// directory), each time an App is built with it (a surface added to two Apps is prepared
    /// for each; one holding state keeps the latest); returns the directory answering for its
    /// namespace's channels and members, if it has one (a chat surface's API). Every other
    /// namespace's channels are what their ids establish. Only a namespace that takes a
    /// directory (`Namespace::takes_directory`) may be claimed, by one surface: any other
    /// claim fails the build.
    fn prepare(
        &self,
        _config: &LoadedConfig,
        _secrets: &Secrets,
    ) -> Option<(Namespace, Arc<dyn ChannelDirectory>)> {
        None
    }

    /// Its line in the start-up summary: on and what it serves, or off and what it needs.
    fn summary_line(&self, app: &App) -> SurfaceLine;

    /// Its line on `/readyz` when it changes while the server runs (`slack: retrying: …`);
    /// `None` keeps the line its summary gave at start. Never a reason for not being ready:
    /// one surface's outage takes no replica out of rotation.
    fn readiness(&self) -> Option<String> {
        None
    }

    /// Its routes while it is on; while it is off, the paths it owns and why, which `serve`
    /// answers with 503 and that one line (never a bare 404).
    fn routes(&self, app: &App, shutdown: &CancellationToken) -> Routes;

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

/// What a surface serves.
pub enum Routes {
    /// On: its router.
    On(Router),
    /// Off: each of `paths` (axum path templates, `/runs/{*rest}` for a whole tree) answers
    /// every method with 503 and `reason`, one line saying what the surface needs.
    Off {
        paths: &'static [&'static str],
        reason: String,
    },
}

impl Routes {
    /// The router `serve` merges: the surface's own, or its paths answering 503.
    pub fn into_router(self) -> Router {
        match self {
            Routes::On(router) => router,
            Routes::Off { paths, reason } => {
                let body = format!("{}\n", reason.replace('\n', " "));
                paths.iter().fold(Router::new(), |router, path| {
                    let body = body.clone();
                    router.route(
                        path,
                        axum::routing::any(move || async move {
                            (
                                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                                [(
                                    axum::http::header::CONTENT_TYPE,
                                    "text/plain; charset=utf-8",
                                )],
                                body,
                            )
                        }),
                    )
                })
            }
        }
    }
}

/// The reason an off surface's paths answer with: `<surface> is off on this server: <what
/// its summary line says it needs>`.
pub fn off_reason(line: &SurfaceLine) -> String {
    let needs = line.note.strip_prefix("off: ").unwrap_or(&line.note);
    format!("{} is off on this server: {needs}", line.surface)
}

/// The sections the surfaces of `surfaces` read from the config file.
pub fn sections(surfaces: &[Arc<dyn SurfacePlugin>]) -> Vec<&dyn SurfaceSection> {
    surfaces.iter().filter_map(|s| s.section()).collect()
}

/// Refuses a surface whose section the config load did not read: its section would be
/// missing though the file may hold it.
pub fn check_sections_were_read(
    surfaces: &[Arc<dyn SurfacePlugin>],
    config: &LoadedConfig,
) -> anyhow::Result<()> {
    match sections(surfaces)
        .into_iter()
        .find(|s| !config.surface_sections.were_read(s.key()))
    {
        None => Ok(()),
        Some(s) => anyhow::bail!(
            "the surface reading [{}] was added but the config was loaded without its section; load it with config::load_with and that surface's section",
            s.key()
        ),
    }
}

/// The surfaces every build has, in the order `serve` starts them and the summary shows them.
pub fn builtin() -> Vec<Arc<dyn SurfacePlugin>> {
    // MCP before Slack: the URL agents reach `/mcp` at is set before Slack's socket can
    // start a run.
    vec![
        Arc::new(IngressSurface),
        Arc::new(McpSurface),
        Arc::new(SlackSurface::default()),
        Arc::new(AccessSurface),
    ]
}
