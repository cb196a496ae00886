//! The `/runs` pages: server-rendered HTML from the registry's JSON answers.
//!
//! - `/runs`: the viewer's live runs (`runs list`), kept current by the feed's script;
//!   `?all=1` the history, a page at a time from the store's cursor; `?stream=1` the feed.
//! - `/runs/<id>`: one run (`runs get`, `runs events`, `runs friction`), with its stop form
//!   while live, and an Approve / Deny form for each tool call waiting for the person it acts
//!   for; `/runs/<id>/events` and `/friction` as text; `POST /runs/<id>/stop`;
//!   `POST /runs/<id>/approvals/<approval>`.
//! - `/runs/scheduled`: the schedules, linking a firing's run only for a viewer who may read it.
//!
//! Every read is a registry command as the viewer, so the admission and the predicate are the
//! registry's; a not_found (missing, denied, or no `runs:read` at all) is the one 404 page.
//! With `?token=…` a page is the capability's: that run only, only while live.

mod actions;
mod changes;
mod index;
mod run;
mod scheduled;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use commands::{Caller, Reply, ReplyKind, Wants};
use serde_json::Value;

use crate::AccessApi;
use crate::html::{self, escape};

pub use actions::{approve, stop};
pub use index::index;
pub use run::{diff, events, friction, run};
pub use scheduled::scheduled;

/// How many runs a page of the index shows.
pub(crate) const PAGE: u32 = 50;

/// One query parameter, percent-decoded (the first, when repeated).
pub(crate) fn param(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

fn on(flag: Option<&str>) -> bool {
    matches!(flag, Some("1" | "true" | ""))
}

/// Runs `id` with `args` as the caller, for its data.
pub(crate) async fn ask(api: &AccessApi, caller: &Caller, id: &str, args: Value) -> Reply {
    api.invoke(caller, id, args, Wants::Data).await
}

/// A page for a reply that is not ok: the 404 page for a not_found (and for a viewer who
/// may not read runs at all), else the reply's text under its status.
fn failure(reply: &Reply) -> Response {
    match reply.kind {
        ReplyKind::NotFound | ReplyKind::Unauthorized => html::not_found(),
        kind => html::page(
            crate::api::status_of(kind),
            "Error",
            &format!(
                "<main><h1>Error</h1><pre>{}</pre></main>",
                escape(&reply.text)
            ),
            None,
        ),
    }
}

fn text_of(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn nav() -> &'static str {
    "<nav><a href=\"/runs\">Live</a><a href=\"/runs?all=1\">History</a><a href=\"/runs/scheduled\">Scheduled</a></nav>"
}

/// `GET /runs/assets/style.css`.
pub async fn style() -> Response {
    let mut r = html::STYLE.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/css; charset=utf-8"),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    r
}
