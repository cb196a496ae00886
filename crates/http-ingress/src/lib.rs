//! # http-ingress: `POST /ingress`
//!
//! What it is: the machine surface. A bearer token is looked up in the shared token map
//! (`commands::tokens`: constant time, over hashes) and becomes the actor `http:<subject>`;
//! the body (`text/plain`, a form body as `curl -d` sends it, or JSON `{"text": …}`) goes to
//! `Registry::handle`: commands through the registry, other text to an agent run, recorded in
//! the token's `channel` or `http:<subject>`. Replies are the registry's, as text or JSON by
//! `Accept`. It depends on `commands` and `authz-core` only.
//!
//! What it must never do: decide anything (no id or channel comparisons; the token's channel
//! is where runs are recorded, never a grant), read a body before the bearer is proven, say
//! why a bearer was refused, or log a token, a body or a query string.
//!
//! Invariants: no token map → 503 saying so; a missing or unknown bearer → 401 with an empty
//! body; a body over the limit → 413; JSON that is not `{"text": string}` → 400 naming the
//! problem; any other content type → 415 naming the ones it takes. A denied point read is
//! the registry's not_found, byte-identical to a missing id.
//!
//! ## The request, step by step
//!
//! No token map → 503 saying so; `Authorization: Bearer` →
//! `commands::identity::bearer_caller(Surface::Http, …)` (the shared token map, constant-time
//! over hashes) → 401 with an empty body when missing or unknown; then the content type
//! (`text/plain` or none → text; `application/x-www-form-urlencoded`, what `curl -d` sends → the
//! text as written, or one decoded `text=` field; `application/json` → `{"text": …}`; else 415),
//! the body under `max_body_bytes` (413), JSON faults named (400); `Registry::handle` does the
//! rest. Statuses: 200, 202 (a run started), 400, 403, 404, 409, 429 (busy), 503. `?wait=<s>`
//! (at most `MAX_WAIT`) waits for a started run and answers with its result; the capability link
//! is kept only for a run still live after the wait.
//!
//! Tests: the route against the whole App is in
//! `crates/server/tests/app/ingress_surface.rs` (a denied point read byte-identical to a
//! missing id on every route), and generated requests on every route in
//! `crates/cli/tests/switchboard/http_pass.rs`.

use std::sync::Arc;
use std::time::Duration;

use authz_core::RunId;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use commands::identity::{bearer_caller, bearer_token};
use commands::{Registry, Reply, ReplyKind, RunOutcome, Services, Surface, Wants};
use serde_json::{Value, json};

/// The longest `?wait=` a caller may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// What the route needs. Without a token map in `services` the route answers 503.
pub struct Ingress {
    pub registry: Arc<Registry>,
    pub services: Arc<Services>,
    pub max_body_bytes: usize,
}

/// The `/ingress` route.
pub fn router(ingress: Arc<Ingress>) -> Router {
    Router::new()
        .route("/ingress", post(handle))
        .with_state(ingress)
}

/// What the route answers (503) when no token map is configured.
pub const OFF: &str = "the HTTP ingress is off: no token map is configured (set SWITCHBOARD_INGRESS_TOKENS or ingress.tokens_file)";

/// `?wait=<seconds>`: how long to wait for a started run to finish before answering.
fn wait_param(query: Option<&str>) -> Option<Duration> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("wait="))
        .and_then(|v| v.parse::<u64>().ok())
        .map(|s| Duration::from_secs(s).min(MAX_WAIT))
}

async fn handle(State(ingress): State<Arc<Ingress>>, request: Request) -> Response {
    let wait = wait_param(request.uri().query());
    if ingress.services.tokens.is_none() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, OFF);
    }
    let Some(caller) =
        bearer(request.headers()).and_then(|t| bearer_caller(&ingress.services, Surface::Http, t))
    else {
        return unauthorized();
    };
    let wants_json = accepts_json(request.headers());
    let wants = if wants_json { Wants::Data } else { Wants::Text };
    let Some(kind) = content_kind(request.headers()) else {
        return plain(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the request as text/plain, as a form body (curl -d), or as application/json {\"text\": \"…\"}",
        );
    };
    let body = match axum::body::to_bytes(request.into_body(), ingress.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            let msg = format!(
                "the body is over the limit of {} bytes",
                ingress.max_body_bytes
            );
            return plain(StatusCode::PAYLOAD_TOO_LARGE, &msg);
        }
    };
    let text = match request_text(kind, &body) {
        Ok(t) => t,
        Err(problem) => return plain(StatusCode::BAD_REQUEST, &problem),
    };
    let handled = ingress
        .registry
        .handle_for(&caller, &text, &ingress.services, wants)
        .await;
    let (reply, started) = match (handled.run, wait) {
        (Some(run), Some(wait)) => {
            let id = run.id().clone();
            // Only the starter ever sees the link: kept for a run still live after the wait.
            let link = ingress
                .services
                .public_url
                .as_deref()
                .map(|base| run.link(base));
            match tokio::time::timeout(wait, run.finished()).await {
                Ok(Some(done)) => (finished_reply(&done), false),
                _ => (still_running(&id, link), true),
            }
        }
        (run, _) => (handled.reply, run.is_some()),
    };
    // The request's root span (the server's) records the status and the outcome; a refused
    // request's trace is dropped whole, leaving only its audit line (operations.md).
    let status = status_of(reply.kind, started);
    render(status, &reply, wants_json)
}

/// The bearer token of an `Authorization` header, if it is one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    bearer_token(headers.get(header::AUTHORIZATION)?.to_str().ok()?)
}

fn unauthorized() -> Response {
    let mut r = StatusCode::UNAUTHORIZED.into_response();
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ContentKind {
    Text,
    /// `application/x-www-form-urlencoded`, which `curl -d` sends.
    Form,
    Json,
}

/// `text/plain` (or no content type) → text; a form body → form; `application/json` → JSON;
/// else `None` (415).
fn content_kind(headers: &HeaderMap) -> Option<ContentKind> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Some(ContentKind::Text);
    };
    let essence = value
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "text/plain" => Some(ContentKind::Text),
        "application/x-www-form-urlencoded" => Some(ContentKind::Form),
        "application/json" => Some(ContentKind::Json),
        _ => None,
    }
}

/// A form body's text. `curl -d 'runs list'` sends its data as written, unencoded, under the
/// form content type; a browser form or `curl --data-urlencode text=…` sends one encoded
/// `text` field. So a body that is exactly one `text=` field is decoded, and any other body
/// is the text as written (a `+` or `%` in it is kept, not decoded).
fn form_text(body: &str) -> Result<String, String> {
    let Some(encoded) = body.strip_prefix("text=").filter(|v| !v.contains('&')) else {
        return Ok(body.to_owned());
    };
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| "the form field `text` has a bad %-escape".to_owned())?;
                out.push(hex);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| "the form field `text` is not UTF-8 text".to_owned())
}

/// The request text, or the problem with the body.
fn request_text(kind: ContentKind, body: &Bytes) -> Result<String, String> {
    let text = match kind {
        ContentKind::Text => std::str::from_utf8(body)
            .map_err(|_| "the body is not UTF-8 text".to_owned())?
            .to_owned(),
        ContentKind::Form => form_text(
            std::str::from_utf8(body).map_err(|_| "the body is not UTF-8 text".to_owned())?,
        )?,
        ContentKind::Json => {
            let v: Value = serde_json::from_slice(body).map_err(|e| {
                format!(
                    "the body is not valid JSON (line {} column {}): {}",
                    e.line(),
                    e.column(),
                    json_problem(&e)
                )
            })?;
            match v.get("text") {
                Some(Value::String(t)) => t.clone(),
                Some(_) => return Err("\"text\" must be a string".to_owned()),
                None => {
                    return Err(
                        "the JSON body needs a \"text\" field: {\"text\": \"runs list\"}"
                            .to_owned(),
                    );
                }
            }
        }
    };
    if text.trim().is_empty() {
        return Err(
            "the request is empty; send a command (try `help`) or a request for an agent"
                .to_owned(),
        );
    }
    Ok(text)
}

fn json_problem(e: &serde_json::Error) -> &'static str {
    use serde_json::error::Category;
    match e.classify() {
        Category::Eof => "it ends too early",
        Category::Syntax => "a syntax error",
        Category::Data => "a value of the wrong type",
        Category::Io => "it could not be read",
    }
}

fn accepts_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"))
}

/// The HTTP status of a reply; a started run is 202.
fn status_of(kind: ReplyKind, started: bool) -> StatusCode {
    match kind {
        ReplyKind::Ok if started => StatusCode::ACCEPTED,
        ReplyKind::Ok => StatusCode::OK,
        ReplyKind::NotFound => StatusCode::NOT_FOUND,
        ReplyKind::Unauthorized => StatusCode::FORBIDDEN,
        ReplyKind::Conflict => StatusCode::CONFLICT,
        ReplyKind::Usage | ReplyKind::UnknownCommand => StatusCode::BAD_REQUEST,
        ReplyKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ReplyKind::Busy => StatusCode::TOO_MANY_REQUESTS,
        ReplyKind::Failed => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn render(status: StatusCode, reply: &Reply, json: bool) -> Response {
    let (content_type, body) = if json {
        ("application/json", reply.data.to_string())
    } else {
        ("text/plain; charset=utf-8", format!("{}\n", reply.text))
    };
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn plain(status: StatusCode, text: &str) -> Response {
    render(status, &Reply::of(ReplyKind::Failed, text), false)
}

/// A run that finished while the caller waited.
fn finished_reply(run: &RunOutcome) -> Reply {
    Reply::ok(run.text(), run.json())
}

fn still_running(id: &RunId, link: Option<String>) -> Reply {
    let mut text = format!("run {id} is still running; follow it with `runs get {id}`");
    let mut data = json!({"run_id": id.as_str(), "status": "running"});
    if let Some(link) = link {
        text.push_str(&format!("\nFollow it live: {link}"));
        if let Some(fields) = data.as_object_mut() {
            fields.insert("link".to_owned(), Value::String(link));
        }
    }
    Reply::ok(text, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_text_or_json_with_a_text_field() {
        let b = |s: &str| Bytes::from(s.to_owned());
        assert_eq!(
            request_text(ContentKind::Text, &b("runs list")).unwrap(),
            "runs list"
        );
        assert_eq!(
            request_text(ContentKind::Json, &b(r#"{"text":"help"}"#)).unwrap(),
            "help"
        );
        for (kind, body, want) in [
            (
                ContentKind::Json,
                "{\"text\":",
                "not valid JSON (line 1 column 8): it ends too early",
            ),
            (
                ContentKind::Json,
                "{\"text\": 3}",
                "\"text\" must be a string",
            ),
            (ContentKind::Json, "{}", "needs a \"text\" field"),
            (ContentKind::Json, "[1, 2", "not valid JSON"),
            (ContentKind::Text, "  ", "the request is empty"),
        ] {
            let e = request_text(kind, &b(body)).unwrap_err();
            assert!(e.contains(want), "{body}: {e}");
        }
        assert!(request_text(ContentKind::Text, &Bytes::from_static(&[0xff, 0xfe])).is_err());
    }

    #[test]
    fn form_bodies_are_the_text_as_written_or_one_encoded_text_field() {
        let b = |s: &str| Bytes::from(s.to_owned());
        for (body, want) in [
            ("hello", "hello"),
            ("runs list --status all", "runs list --status all"),
            ("config set greeting a+b%", "config set greeting a+b%"),
            ("text=runs+list%20--status+all", "runs list --status all"),
            ("text=caf%C3%A9", "café"),
            ("text=a&other=b", "text=a&other=b"),
            ("remember: x=1", "remember: x=1"),
        ] {
            assert_eq!(
                request_text(ContentKind::Form, &b(body)).unwrap(),
                want,
                "{body}"
            );
        }
        for (body, want) in [
            ("text=%zz", "bad %-escape"),
            ("text=%4", "bad %-escape"),
            ("text=%ff", "not UTF-8"),
            ("text=", "the request is empty"),
        ] {
            let e = request_text(ContentKind::Form, &b(body)).unwrap_err();
            assert!(e.contains(want), "{body}: {e}");
        }
    }
}
