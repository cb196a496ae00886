//! The root span of every HTTP request: surface, route, actor (recorded by the registry when
//! it meets the caller), status and outcome. A request answered 401 or 403 is marked denied.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// The surface and route a path belongs to. Only known routes are named; anything else is
/// `other`, so a path someone typed a secret into never reaches a span.
fn surface_and_route(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/healthz" | "/readyz" => None,
        "/ingress" => Some(("http", "/ingress")),
        p if p == mcp::PATH || p.starts_with("/mcp/") => Some(("mcp", "/mcp")),
        "/admin/trace/log" => Some(("admin", "/admin/trace/log")),
        "/slack/events" => Some(("slack", "/slack/events")),
        "/slack/interactions" => Some(("slack", "/slack/interactions")),
        // Route templates only: a run id or a command id stays out of the span's name.
        p if p.starts_with("/api/") => Some(("access", "/api/{command}")),
        "/runs" | "/runs/stream" | "/runs/scheduled" => Some(("access", "/runs")),
        p if p.starts_with("/runs/") => Some(("access", "/runs/{id}")),
        _ => Some(("http", "other")),
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
pub async fn request_span(req: Request, next: Next) -> Response {
    let Some((surface, route)) = surface_and_route(req.uri().path()) else {
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
