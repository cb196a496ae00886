//! `GET /admin/trace/log?since=<µs>`: the span log's lines after `since`, as JSON lines. It
//! opens only to an ingress bearer whose actor holds `trace:read` (no baseline holds it):
//! 503 with no token map, 401 with no bearer or an unknown one, 403 with one lacking it.

use std::sync::Arc;

use authz_core::{Action, CommandId, Resource, Verdict, authorize};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use commands::identity::{bearer_caller, bearer_token};
use commands::{AuditLine, Refusal, Services, Surface};

use super::span_log::SpanLog;

/// The route's path.
pub const PATH: &str = "/admin/trace/log";

struct TraceLog {
    services: Arc<Services>,
    log: SpanLog,
}

/// The span log route, reading `log`.
pub fn trace_log_route(services: Arc<Services>, log: SpanLog) -> Router {
    Router::new()
        .route(PATH, get(trace_log))
        .with_state(Arc::new(TraceLog { services, log }))
}

/// `since` from the query: absent is 0; anything but a whole number is refused.
fn since_of(uri: &Uri) -> Result<i64, ()> {
    let Some(query) = uri.query() else {
        return Ok(0);
    };
    let mut since = 0;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("since", v)) => since = v.parse().map_err(|_| ())?,
            _ => return Err(()),
        }
    }
    Ok(since)
}

async fn trace_log(State(s): State<Arc<TraceLog>>, headers: HeaderMap, uri: Uri) -> Response {
    if s.services.tokens.is_none() {
        let why = "the span log needs a token map: SWITCHBOARD_INGRESS_TOKENS or [ingress] tokens_file, and a token whose actor holds trace:read\n";
        return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    }
    let caller = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .and_then(|token| bearer_caller(&s.services, Surface::Http, token));
    let Some(caller) = caller else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    commands::trace::record_actor(&caller);
    let resource = match CommandId::parse("trace.log") {
        Ok(id) => Resource::Command { id },
        Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    let verdict = authorize(&caller.actor, &Action::TraceRead, &resource);
    if let Verdict::Deny(_) = verdict {
        let refusal = Refusal {
            action: Action::TraceRead,
            resource,
            verdict,
        };
        s.services.audit.deny(AuditLine::new(&caller, &refusal));
        commands::trace::mark_denied();
        return StatusCode::FORBIDDEN.into_response();
    }
    let Ok(since) = since_of(&uri) else {
        return (
            StatusCode::BAD_REQUEST,
            "the only parameter is since=<microseconds since the epoch>\n",
        )
            .into_response();
    };
    let mut body = String::new();
    for line in s.log.since(since) {
        if let Ok(json) = serde_json::to_string(&line) {
            body.push_str(&json);
            body.push('\n');
        }
    }
    ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_a_whole_number_or_absent() {
        let uri = |q: &str| q.parse::<Uri>().unwrap();
        assert_eq!(since_of(&uri("/admin/trace/log")), Ok(0));
        assert_eq!(since_of(&uri("/admin/trace/log?since=42")), Ok(42));
        for bad in [
            "?since=x",
            "?since=",
            "?token=abc",
            "?since=1&x=2",
            "?since=1.5",
        ] {
            assert_eq!(
                since_of(&uri(&format!("/admin/trace/log{bad}"))),
                Err(()),
                "{bad}"
            );
        }
    }
}
