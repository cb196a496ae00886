//! `/runs/<id>`: one run's page (its record, events, friction, stop form and asks), and its
//! events and friction as text; opened by a viewer who may read it or by its capability token.

use std::sync::Arc;

use authz_core::RunId;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use commands::identity::Capability;
use commands::{Answerer, Caller, PendingApproval, Reply, ReplyKind, Wants};
use serde_json::{Value, json};

use super::{ask, changes, failure, nav, param, text_of};
use crate::html::{self, escape, utc};
use crate::{AccessApi, feed, is_live};

/// What opens a run: an identity, or a capability token.
pub(super) enum Opener {
    Viewer(Caller),
    Token(Capability, String),
}

/// Who may open run `id` on this request: the capability (live runs only), else the
/// viewer. `Err` is the response to give instead: 401, the 404 page, or the ended page.
pub(super) async fn opener(
    api: &AccessApi,
    id: &str,
    token: Option<String>,
    headers: &HeaderMap,
) -> Result<Opener, Response> {
    let Some(token) = token else {
        return api.caller(headers).await.map(|(c, _)| Opener::Viewer(c));
    };
    let Ok(run_id) = RunId::parse(id) else {
        return Err(html::not_found());
    };
    match Capability::open(&api.services, &run_id, &token).await {
        Some(cap) if cap.is_live() => Ok(Opener::Token(cap, token)),
        Some(_) => Err(ended()),
        None => {
            tracing::warn!(
                reason = "capability-refused",
                "[access] a capability token did not open its run"
            );
            Err(html::not_found())
        }
    }
}

/// The page a capability link shows once its run has ended.
pub(super) fn ended() -> Response {
    html::page(
        StatusCode::GONE,
        "Run ended",
        "<main><h1>This run has ended</h1><p>The link opened it only while it was live. Sign in to see the run.</p><p><a href=\"/runs\">All runs</a></p></main>",
        None,
    )
}

/// A run's three answers (the run, its events, its friction), or the response instead.
pub(super) async fn run_answers(
    api: &AccessApi,
    opener: &Opener,
    id: &str,
) -> Result<[Value; 3], Response> {
    let replies = match opener {
        Opener::Token(cap, _) => [
            cap.run(&api.services),
            cap.events(&api.services).await,
            cap.friction(&api.services).await,
        ],
        Opener::Viewer(caller) => {
            // One decision per page: a run the viewer may not read is refused (and audited)
            // once, by its first read, and not asked about again.
            let args = json!({"id": id});
            let run = ask(api, caller, "runs.get", args.clone()).await;
            if run.kind != ReplyKind::Ok {
                return Err(failure(&run));
            }
            [
                run,
                ask(api, caller, "runs.events", args.clone()).await,
                ask(api, caller, "runs.friction", args).await,
            ]
        }
    };
    if let Some(bad) = replies.iter().find(|r| r.kind != ReplyKind::Ok) {
        return Err(failure(bad));
    }
    Ok(replies.map(|r| r.data))
}

/// `GET /runs/<id>` (`?stream=1` is its feed).
pub async fn run(
    State(api): State<Arc<AccessApi>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let opener = match opener(&api, &id, param(query.as_deref(), "token"), &headers).await {
        Ok(o) => o,
        Err(r) => return r,
    };
    let [run, events, friction] = match run_answers(&api, &opener, &id).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let token = match &opener {
        Opener::Token(_, t) => Some(t.as_str()),
        Opener::Viewer(_) => None,
    };
    let live = is_live(&run);
    let waiting = match (RunId::parse(&id), answerer(&opener)) {
        (Ok(run_id), Some(by)) if live => api.services.approvals.pending(&run_id, by).await,
        _ => Vec::new(),
    };
    // What a finished run in a repo changed, as the viewer's `runs diff` (a capability opens
    // only a live run, whose changes are not kept yet).
    let changes = match &opener {
        Opener::Viewer(caller) if !live && run.get("repo").is_some_and(|r| !r.is_null()) => {
            let args = json!({"id": id, "limit": changes::PAGE_LINES});
            let reply = ask(&api, caller, "runs.diff", args).await;
            Some(changes::section(
                &reply,
                &format!("/runs/{}", escape(&id)),
                "",
            ))
        }
        _ => None,
    };
    let body = run_body(&run, &events, &friction, token, live, &waiting, changes);
    html::page(
        StatusCode::OK,
        &format!("Run {}", text_of(&run, "id")),
        &body,
        live.then_some(feed::RUN_SCRIPT),
    )
}

/// `?token=…` to append to a run's own links.
pub(super) fn token_suffix(token: Option<&str>) -> String {
    token
        .map(|t| {
            format!(
                "?token={}",
                form_urlencoded::byte_serialize(t.as_bytes()).collect::<String>()
            )
        })
        .unwrap_or_default()
}

/// Who the opener answers an approval as: a signed-in actor (it counts when it is the run's
/// principal), or a link made for a person. A link made for a machine or an agent answers
/// nothing: it watches and stops the run.
pub(super) fn answerer(opener: &Opener) -> Option<Answerer<'_>> {
    match opener {
        Opener::Token(cap, _) if cap.answers() => Some(Answerer::Capability),
        Opener::Token(..) => None,
        Opener::Viewer(caller) => Some(Answerer::Actor(&caller.actor.id)),
    }
}

/// The Approve / Deny forms, one per waiting ask (its text is the model's: escaped).
pub(super) fn approval_forms(base: &str, suffix: &str, waiting: &[PendingApproval]) -> String {
    if waiting.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h2>Waiting for your answer</h2>");
    for ask in waiting {
        // Whole: the broker asks only about a call it can show whole.
        let arguments = &ask.arguments;
        out.push_str(&format!(
            "<form class=\"approval\" method=\"post\" action=\"{base}/approvals/{id}{suffix}\"><p>The agent asks to <code>{action}</code> with <code>{tool}</code>:</p><pre>{arguments}</pre><button name=\"answer\" value=\"approve\" type=\"submit\">Approve</button> <button name=\"answer\" value=\"deny\" type=\"submit\">Deny</button></form>",
            id = escape(&ask.id),
            action = escape(&ask.action),
            tool = escape(&ask.tool),
            arguments = escape(arguments),
        ));
    }
    out
}

pub(super) fn run_body(
    run: &Value,
    events: &Value,
    friction: &Value,
    token: Option<&str>,
    live: bool,
    waiting: &[PendingApproval],
    changes: Option<String>,
) -> String {
    let id = text_of(run, "id");
    let suffix = escape(&token_suffix(token));
    let base = format!("/runs/{}", escape(&id));
    let field = |label: &str, key: &str| {
        let value = escape(&text_of(run, key));
        // The status cell is coloured by the stylesheet's `status-<status>` classes.
        let class = if key == "status" {
            format!(" class=\"status-{value}\"")
        } else {
            String::new()
        };
        format!("<tr><th>{label}</th><td id=\"run-{key}\"{class}>{value}</td></tr>")
    };
    let mut out = format!(
        "<main id=\"run\" data-stream=\"{base}/stream{suffix}\"><h1>Run <span class=\"id\">{}</span></h1>",
        escape(&id)
    );
    if token.is_none() {
        out.push_str(nav());
    }
    out.push_str("<table>");
    for (label, key) in [
        ("Status", "status"),
        ("Agent", "agent"),
        ("Channel", "channel"),
        ("Visibility", "visibility"),
        ("User", "user"),
        ("Repo", "repo"),
        ("Surface", "surface"),
    ] {
        out.push_str(&field(label, key));
    }
    out.push_str(&format!(
        "<tr><th>Started</th><td>{}</td></tr></table>",
        utc(run.get("created_at").and_then(Value::as_i64).unwrap_or(0))
    ));
    if live {
        out.push_str(&format!(
            "<form method=\"post\" action=\"{base}/stop{suffix}\"><button id=\"stop\" type=\"submit\">Stop this run</button></form>"
        ));
    }
    out.push_str(&approval_forms(&base, &suffix, waiting));
    out.push_str(&format!(
        "<h2>Request</h2><pre id=\"request\">{}</pre>",
        escape(&text_of(run, "request"))
    ));
    if let Some(answer) = run.get("answer").and_then(Value::as_str) {
        out.push_str(&format!(
            "<h2>Answer</h2><pre id=\"answer\">{}</pre>",
            escape(answer)
        ));
    }
    if let Some(error) = run.get("error").and_then(Value::as_str) {
        out.push_str(&format!(
            "<h2>Error</h2><pre id=\"error\">{}</pre>",
            escape(error)
        ));
    }
    out.push_str(&format!("<h2>Events <a class=\"muted\" href=\"{base}/events{suffix}\">text</a></h2><ol id=\"events\">"));
    out.push_str(&items(events, "events", "body"));
    out.push_str("</ol>");
    out.push_str(&changes.unwrap_or_default());
    out.push_str(&format!("<h2>Friction <a class=\"muted\" href=\"{base}/friction{suffix}\">text</a></h2><ul id=\"friction\">"));
    out.push_str(&items(friction, "friction", "detail"));
    out.push_str("</ul></main>");
    out
}

/// The `<li>`s of a reply's list `list`: each entry's kind, then its `text` field, escaped.
pub(super) fn items(reply: &Value, list: &str, text: &str) -> String {
    reply
        .get(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "<li><span class=\"muted\">{}</span> {}</li>",
                escape(&text_of(e, "kind")),
                escape(&text_of(e, text))
            )
        })
        .collect()
}

/// The two parts of a run served as text.
#[derive(Debug, Clone, Copy)]
pub(super) enum RunPart {
    Events,
    Friction,
    /// The whole diff (`runs diff` up to its cap).
    Diff,
}

impl RunPart {
    /// The registry command that answers it for a viewer.
    fn command(self) -> &'static str {
        match self {
            RunPart::Events => "runs.events",
            RunPart::Friction => "runs.friction",
            RunPart::Diff => "runs.diff",
        }
    }

    /// Its arguments for run `id`.
    fn args(self, id: &str) -> Value {
        match self {
            RunPart::Diff => json!({"id": id, "limit": commands::run_changes::MAX_DIFF_LINES}),
            RunPart::Events | RunPart::Friction => json!({"id": id}),
        }
    }

    /// The same answer, for a capability's holder.
    async fn of(self, cap: &Capability, services: &commands::Services) -> Reply {
        match self {
            RunPart::Events => cap.events(services).await,
            RunPart::Friction => cap.friction(services).await,
            RunPart::Diff => cap.changes(),
        }
    }
}

/// `GET /runs/<id>/events` as text.
pub async fn events(
    State(api): State<Arc<AccessApi>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let token = param(query.as_deref(), "token");
    run_text(&api, &id, token, &headers, RunPart::Events).await
}

/// `GET /runs/<id>/diff`: the run's whole diff as text (`runs diff` up to its cap).
pub async fn diff(
    State(api): State<Arc<AccessApi>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let token = param(query.as_deref(), "token");
    run_text(&api, &id, token, &headers, RunPart::Diff).await
}

/// `GET /runs/<id>/friction` as text.
pub async fn friction(
    State(api): State<Arc<AccessApi>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let token = param(query.as_deref(), "token");
    run_text(&api, &id, token, &headers, RunPart::Friction).await
}

pub(super) async fn run_text(
    api: &AccessApi,
    id: &str,
    token: Option<String>,
    headers: &HeaderMap,
    part: RunPart,
) -> Response {
    let reply = match opener(api, id, token, headers).await {
        Err(r) => return r,
        Ok(Opener::Token(cap, _)) => part.of(&cap, &api.services).await,
        Ok(Opener::Viewer(caller)) => {
            api.invoke(&caller, part.command(), part.args(id), Wants::Text)
                .await
        }
    };
    match reply.kind {
        ReplyKind::Ok => html::text(StatusCode::OK, format!("{}\n", reply.text)),
        // A text route answers text: a run the viewer may not read and one that does not
        // exist read the same, byte for byte (the registry's not-found text).
        ReplyKind::NotFound | ReplyKind::Unauthorized => {
            html::text(StatusCode::NOT_FOUND, format!("{}\n", reply.text))
        }
        _ => failure(&reply),
    }
}
