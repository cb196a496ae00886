//! The Slack surface's plug-in: its Events routes, or its Socket Mode connection under `serve`.

use std::net::SocketAddr;

use authz_core::BoxFuture;
use axum::Router;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{SurfaceLine, SurfacePlugin};
use crate::{App, summary};

/// Slack: signed events and interactions over HTTP, or Socket Mode.
pub(super) struct SlackSurface;

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
