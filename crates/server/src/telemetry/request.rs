//! The root span of every HTTP request: surface, route, actor (recorded by the registry when
//! it meets the caller), status and outcome. A request answered 401 or 403 is marked denied.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::surface::SurfacePlugin;

/// The surface and route a path belongs to: the server's own routes, then each surface's
/// (`SurfacePlugin::span_route`). Only known routes are named; anything else is `other`, so a
/// path someone typed a secret into never reaches a span.
fn surface_and_route(
    surfaces: &[Arc<dyn SurfacePlugin>],
    path: &str,
) -> Option<(&'static str, &'static str)> {
    match path {
        "/healthz" | "/readyz" => None,
        "/admin/trace/log" => Some(("admin", "/admin/trace/log")),
        _ => Some(
            surfaces
                .iter()
                .find_map(|s| s.span_route(path))
                .unwrap_or(("http", "other")),
        ),
    }
}

/// A span line's view of a status.
fn outcome(status: u16) -> &'static str {
    match status {
        401 | 403 => "denied",
        200..=399 => "ok",
        400..=499 => "client_error",
        _ => "server_error",
    }
}

/// Axum middleware: one root span per request (health checks excepted).
pub async fn request_span(
    State(surfaces): State<Arc<[Arc<dyn SurfacePlugin>]>>,
    req: Request,
    next: Next,
) -> Response {
    let Some((surface, route)) = surface_and_route(&surfaces, req.uri().path()) else {
        return next.run(req).await;
    };
    let span = commands::trace::request_span(surface, route);
    let response = next.run(req).instrument(span.clone()).await;
    let status = response.status().as_u16();
    span.record("status", status);
    span.record("outcome", outcome(status));
    if matches!(status, 401 | 403) {
        span.record("denied", true);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_routes_are_named_and_never_a_query_or_an_unknown_path() {
        let builtin = crate::surface::builtin();
        let surface_and_route = |path| surface_and_route(&builtin, path);
        assert_eq!(surface_and_route("/healthz"), None);
        assert_eq!(surface_and_route("/ingress"), Some(("http", "/ingress")));
        assert_eq!(surface_and_route("/mcp"), Some(("mcp", "/mcp")));
        assert_eq!(
            surface_and_route("/slack/events"),
            Some(("slack", "/slack/events"))
        );
        assert_eq!(
            surface_and_route("/slack/interactions"),
            Some(("slack", "/slack/interactions"))
        );
        assert_eq!(surface_and_route("/slack/other"), Some(("http", "other")));
        assert_eq!(
            surface_and_route("/api/runs.get"),
            Some(("access", "/api/{command}"))
        );
        assert_eq!(
            surface_and_route("/runs/01JABCDEFGHJKMNPQRSTVWXYZ0/stop"),
            Some(("access", "/runs/{id}"))
        );
        assert_eq!(
            surface_and_route("/xoxb-planted-secret"),
            Some(("http", "other"))
        );
        assert_eq!(outcome(403), "denied");
        assert_eq!(outcome(404), "client_error");
    }
}
