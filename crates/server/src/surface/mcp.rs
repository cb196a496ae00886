//! The MCP surface's plug-in: `/mcp`, and the URL agents reach it at once `serve` is bound.

use std::net::SocketAddr;
use std::sync::Arc;

use authz_core::BoxFuture;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Routes, SurfaceLine, SurfacePlugin};
use crate::{App, summary};

/// `/mcp`: commands as MCP tools, for bearer tokens and agents' run-scoped tokens.
pub(super) struct McpSurface;

impl SurfacePlugin for McpSurface {
    fn summary_line(&self, app: &App) -> SurfaceLine {
        summary::mcp_line(app)
    }

    fn routes(&self, app: &App, shutdown: &CancellationToken) -> Routes {
        // Enabled without a token map, the route itself answers 503 saying what it needs.
        if !app.config.mcp.enabled {
            return Routes::Off {
                paths: &[mcp::PATH, "/mcp/{*rest}"],
                reason: super::off_reason(&self.summary_line(app)),
            };
        }
        let mcp = Arc::new(mcp::Mcp::new(
            app.registry.clone(),
            app.services.clone(),
            app.config.mcp.settings.clone(),
        ));
        Routes::On(mcp::router(mcp, shutdown.clone()))
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
