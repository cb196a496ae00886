//! The ingress surface's plug-in: `POST /ingress`, bearer tokens from the token map.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Routes, SurfaceLine, SurfacePlugin};
use crate::{App, summary};

/// `POST /ingress`: bearer tokens from the token map.
pub(super) struct IngressSurface;

impl SurfacePlugin for IngressSurface {
    fn summary_line(&self, app: &App) -> SurfaceLine {
        summary::ingress_line(app)
    }

    fn routes(&self, app: &App, _shutdown: &CancellationToken) -> Routes {
        // Always served: without a token map the route answers 503 saying what it needs.
        let ingress = Arc::new(http_ingress::Ingress {
            registry: app.registry.clone(),
            services: app.services.clone(),
            max_body_bytes: app.config.ingress.max_body_bytes,
        });
        Routes::On(http_ingress::router(ingress))
    }

    fn span_route(&self, path: &str) -> Option<(&'static str, &'static str)> {
        (path == "/ingress").then_some(("http", "/ingress"))
    }
}
