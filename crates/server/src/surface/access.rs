//! The Access surface's plug-in: `/api` and the `/runs` pages while a verifier is built.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Routes, SurfaceLine, SurfacePlugin};
use crate::{App, summary};

/// `/api` and the `/runs` pages, behind Access JWTs.
pub(super) struct AccessSurface;

impl SurfacePlugin for AccessSurface {
    fn summary_line(&self, app: &App) -> SurfaceLine {
        summary::access_line(app)
    }

    fn routes(&self, app: &App, shutdown: &CancellationToken) -> Routes {
        let Some(verifier) = app.access.verifier() else {
            return Routes::Off {
                paths: &["/api", "/api/{*rest}", "/runs", "/runs/{*rest}"],
                reason: super::off_reason(&self.summary_line(app)),
            };
        };
        let access = Arc::new(access_api::AccessApi {
            registry: app.registry.clone(),
            services: app.services.clone(),
            verifier: verifier.clone(),
            shutdown: shutdown.clone(),
            keep_alive: access_api::KEEP_ALIVE,
            recheck: access_api::RECHECK,
            max_body_bytes: app.config.ingress.max_body_bytes,
        });
        Routes::On(access_api::router(access))
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
