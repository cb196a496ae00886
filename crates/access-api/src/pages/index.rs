//! `/runs`: the viewer's live runs, or the history a page at a time, or the feed.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use commands::ReplyKind;
use serde_json::{Map, Value, json};

use super::{PAGE, ask, failure, nav, on, param, text_of};
use crate::html::{self, escape, utc};
use crate::{AccessApi, feed};

/// One row of the index; the feed's script builds the same row.
pub(super) fn row(run: &Value) -> String {
    let id = text_of(run, "id");
    let status = text_of(run, "status");
    format!(
        "<tr id=\"run-{id}\"><td class=\"id\"><a href=\"/runs/{id}\">{id}</a></td><td class=\"status-{status}\">{status}</td><td>{agent}</td><td>{channel}</td><td>{surface}</td><td>{created}</td></tr>",
        id = escape(&id),
        status = escape(&status),
        agent = escape(&text_of(run, "agent")),
        channel = escape(&text_of(run, "channel")),
        surface = escape(&text_of(run, "surface")),
        created = utc(run.get("created_at").and_then(Value::as_i64).unwrap_or(0)),
    )
}

/// `GET /runs`.
pub async fn index(
    State(api): State<Arc<AccessApi>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let query = query.as_deref();
    if on(param(query, "stream").as_deref()) {
        return feed::index_stream(State(api), headers).await;
    }
    let (caller, _) = match api.caller(&headers).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let history = on(param(query, "all").as_deref());
    let mut args = Map::new();
    args.insert("status".into(), json!(if history { "all" } else { "live" }));
    args.insert("limit".into(), json!(PAGE.to_string()));
    if let (true, Some(before)) = (history, param(query, "before")) {
        args.insert("before".into(), Value::String(before));
    }
    let args = Value::Object(args);
    let reply = ask(&api, &caller, "runs.list", args).await;
    let (runs, next) = match reply.kind {
        ReplyKind::Ok => (
            reply
                .data
                .get("runs")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            reply
                .data
                .get("next")
                .and_then(Value::as_str)
                .map(str::to_owned),
        ),
        // No runs:read: an empty index, never a refusal that says what exists.
        ReplyKind::Unauthorized => (vec![], None),
        _ => return failure(&reply),
    };
    let rows: String = runs.iter().map(row).collect();
    let (title, empty) = if history {
        ("History", "No runs.")
    } else {
        ("Live runs", "No live runs.")
    };
    let older = match next {
        Some(cursor) if history => format!(
            "<p><a id=\"older\" href=\"/runs?all=1&amp;before={}\">Older runs →</a></p>",
            escape(&form_urlencoded::byte_serialize(cursor.as_bytes()).collect::<String>())
        ),
        _ => String::new(),
    };
    let body = format!(
        "<main data-live=\"{live}\"><h1>{title}</h1>{nav}<p id=\"empty\" class=\"muted\"{hidden}>{empty}</p><table><thead><tr><th>Run</th><th>Status</th><th>Agent</th><th>Channel</th><th>Surface</th><th>Started</th></tr></thead><tbody id=\"runs\">{rows}</tbody></table>{older}</main>",
        live = u8::from(!history),
        nav = nav(),
        hidden = if runs.is_empty() { "" } else { " hidden" },
    );
    html::page(
        StatusCode::OK,
        title,
        &body,
        (!history).then_some(feed::INDEX_SCRIPT),
    )
}
