//! `GET /api/<command id>?<args>` (`:read` commands only) and `POST /api/<command id>` with a
//! JSON object of arguments (any command): `Registry::invoke`, answering the registry's JSON —
//! the same JSON as the CLI's `--json`.
//!
//! Statuses: ok 200; not_found and unknown commands 404 (a denied point read is the not_found
//! reply, byte for byte); 🚫 403; usage 400; a write over GET 405; a finished run asked to
//! stop 409; busy 429; unavailable 503; a failure 500.

use std::sync::Arc;

use authz_core::{Action, Effect, Verdict};
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use commands::{Caller, RawInput, Reply, ReplyKind, Wants, reply_texts};
use serde_json::{Map, Value};

use crate::{AccessApi, cross_site, guard};

/// The status a reply answers with.
pub fn status_of(kind: ReplyKind) -> StatusCode {
    match kind {
        ReplyKind::Ok => StatusCode::OK,
        ReplyKind::NotFound | ReplyKind::UnknownCommand => StatusCode::NOT_FOUND,
        ReplyKind::Unauthorized => StatusCode::FORBIDDEN,
        ReplyKind::Conflict => StatusCode::CONFLICT,
        ReplyKind::Usage => StatusCode::BAD_REQUEST,
        ReplyKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ReplyKind::Busy => StatusCode::TOO_MANY_REQUESTS,
        ReplyKind::Failed => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn json(status: StatusCode, data: &Value) -> Response {
    let mut r = Response::new(Body::from(data.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn reply(reply: &Reply) -> Response {
    json(status_of(reply.kind), &reply.data)
}

/// `GET /api/<id>?<args>`: a `:read` command, its arguments from the query.
pub async fn get(
    State(api): State<Arc<AccessApi>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response {
    let (caller, _) = match api.caller(request.headers()).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let Some(command) = api.registry.by_id(&id) else {
        return reply(&Reply::of(
            ReplyKind::UnknownCommand,
            reply_texts::unknown_command(&id),
        ));
    };
    if !matches!(command.action, Action::Command(_, Effect::Read)) {
        let mut r = reply(&Reply::of(
            ReplyKind::Usage,
            format!("`{id}` changes something: send it as POST /api/{id} with a JSON body"),
        ));
        *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let args = match command.args.object_from_query(&pairs) {
        Ok(a) => a,
        // Authorized before parsed, as every surface: a caller who may not run the command
        // gets its refusal, not a usage hint.
        Err(e) => return usage_or_refusal(&api, &caller, &id, &e.to_string()).await,
    };
    invoke(&api, &caller, &id, args).await
}

/// `POST /api/<id>` with a JSON object of arguments (an empty body is no arguments).
pub async fn post(
    State(api): State<Arc<AccessApi>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    if !guard::same_origin(request.headers(), api.services.public_url.as_deref()) {
        return cross_site();
    }
    let (caller, _) = match api.caller(request.headers()).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let body = match axum::body::to_bytes(request.into_body(), api.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            let text = format!("the body is over the limit of {} bytes", api.max_body_bytes);
            return json(
                StatusCode::PAYLOAD_TOO_LARGE,
                &Reply::of(ReplyKind::Usage, text).data,
            );
        }
    };
    let args = match body_args(&body) {
        Ok(a) => a,
        Err(problem) => {
            if api.registry.by_id(&id).is_none() {
                return reply(&Reply::of(
                    ReplyKind::UnknownCommand,
                    reply_texts::unknown_command(&id),
                ));
            }
            return usage_or_refusal(&api, &caller, &id, &problem).await;
        }
    };
    invoke(&api, &caller, &id, args).await
}

/// A POST body as the arguments object, or what is wrong with it.
fn body_args(body: &[u8]) -> Result<Map<String, Value>, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => {
            Err("the body must be a JSON object of arguments, like {\"id\": \"…\"}".to_owned())
        }
        Err(e) => Err(format!(
            "the body is not valid JSON (line {} column {})",
            e.line(),
            e.column()
        )),
    }
}

async fn invoke(api: &AccessApi, caller: &Caller, id: &str, args: Map<String, Value>) -> Response {
    reply(
        &api.invoke(caller, id, Value::Object(args), Wants::Data)
            .await,
    )
}

/// Arguments that did not read: the command's refusal when the caller may not run it, else
/// a usage reply naming the problem.
async fn usage_or_refusal(api: &AccessApi, caller: &Caller, id: &str, problem: &str) -> Response {
    let Some(command) = api.registry.by_id(id) else {
        return reply(&Reply::of(
            ReplyKind::UnknownCommand,
            reply_texts::unknown_command(id),
        ));
    };
    let raw = RawInput::Json {
        id: id.to_owned(),
        args: Map::new(),
    };
    if let Verdict::Deny(_) = api.registry.admission(caller, command, &raw) {
        // The registry refuses it before reading any argument, with its audit line.
        return invoke(api, caller, id, Map::new()).await;
    }
    reply(&Reply::of(
        ReplyKind::Usage,
        reply_texts::usage_error(problem, &command.usage()),
    ))
}

#[cfg(test)]
mod tests {
    use super::body_args;

    #[test]
    fn post_bodies_are_one_json_object() {
        assert!(body_args(b"").unwrap().is_empty());
        assert!(body_args(b" \n").unwrap().is_empty());
        assert_eq!(body_args(br#"{"id":"x"}"#).unwrap()["id"], "x");
        for (body, want) in [
            (&b"[1]"[..], "must be a JSON object"),
            (b"\"x\"", "must be a JSON object"),
            (b"{\"id\":", "not valid JSON (line 1 column 6)"),
            (b"\xff", "not valid JSON"),
        ] {
            let e = body_args(body).unwrap_err();
            assert!(e.contains(want), "{body:?}: {e}");
        }
    }
}
