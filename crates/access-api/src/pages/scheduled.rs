//! `/runs/scheduled`: the schedules, linking a firing's run only for a viewer who may read it.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use commands::{Caller, ReplyKind};
use serde_json::{Value, json};

use super::{ask, failure, nav, text_of};
use crate::html::{self, escape};
use crate::{AccessApi, is_live};

/// `GET /runs/scheduled`.
pub async fn scheduled(State(api): State<Arc<AccessApi>>, headers: HeaderMap) -> Response {
    let (caller, _) = match api.caller(&headers).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let reply = ask(&api, &caller, "schedule.list", json!({})).await;
    if reply.kind != ReplyKind::Ok {
        return failure(&reply);
    }
    let mut rows = String::new();
    for s in reply
        .data
        .get("schedules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let last = s.get("last").filter(|l| !l.is_null());
        let firing = match last.and_then(|l| l.get("run_id")).and_then(Value::as_str) {
            Some(run) => firing_cell(&api, &caller, run).await,
            None => String::new(),
        };
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&text_of(s, "name")),
            escape(&text_of(s, "cron")),
            escape(&text_of(s, "time_zone")),
            escape(
                &s.get("next")
                    .map(|n| text_of(n, "local"))
                    .unwrap_or_default()
            ),
            escape(&text_of(s, "runs")),
            escape(&last.map(|l| text_of(l, "status")).unwrap_or_default()),
            firing,
        ));
    }
    let body = format!(
        "<main><h1>Scheduled</h1>{}<table><thead><tr><th>Name</th><th>Cron</th><th>Next</th><th>Runs</th><th>Last</th><th>Run</th></tr></thead><tbody>{rows}</tbody></table></main>",
        nav()
    );
    html::page(StatusCode::OK, "Scheduled", &body, None)
}

/// A firing's run: a link for a viewer who may read it (marked live while it is), nothing
/// for anyone else.
pub(super) async fn firing_cell(api: &AccessApi, caller: &Caller, run: &str) -> String {
    let reply = ask(api, caller, "runs.get", json!({"id": run})).await;
    if reply.kind != ReplyKind::Ok {
        return String::new();
    }
    let live = if is_live(&reply.data) { " (live)" } else { "" };
    format!("<a href=\"/runs/{0}\">{0}</a>{live}", escape(run))
}
