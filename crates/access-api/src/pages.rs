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

use std::sync::Arc;

use authz_core::RunId;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use commands::identity::Capability;
use commands::{Answerer, ApprovalError, Caller, PendingApproval, Reply, ReplyKind, Wants};
use serde_json::{Map, Value, json};

use crate::html::{self, escape, utc};
use crate::{AccessApi, cross_site, feed, guard, is_live};

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

/// One row of the index; the feed's script builds the same row.
fn row(run: &Value) -> String {
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

/// What opens a run: an identity, or a capability token.
enum Opener {
    Viewer(Caller),
    Token(Capability, String),
}

/// Who may open run `id` on this request: the capability (live runs only), else the
/// viewer. `Err` is the response to give instead: 401, the 404 page, or the ended page.
async fn opener(
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
fn ended() -> Response {
    html::page(
        StatusCode::GONE,
        "Run ended",
        "<main><h1>This run has ended</h1><p>The link opened it only while it was live. Sign in to see the run.</p><p><a href=\"/runs\">All runs</a></p></main>",
        None,
    )
}

/// A run's three answers (the run, its events, its friction), or the response instead.
async fn run_answers(api: &AccessApi, opener: &Opener, id: &str) -> Result<[Value; 3], Response> {
    let replies = match opener {
        Opener::Token(cap, _) => [
            cap.run(&api.services),
            cap.events(&api.services).await,
            cap.friction(&api.services).await,
        ],
        Opener::Viewer(caller) => {
            let args = json!({"id": id});
            [
                ask(api, caller, "runs.get", args.clone()).await,
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
    let body = run_body(&run, &events, &friction, token, live, &waiting);
    html::page(
        StatusCode::OK,
        &format!("Run {}", text_of(&run, "id")),
        &body,
        live.then_some(feed::RUN_SCRIPT),
    )
}

/// `?token=…` to append to a run's own links.
fn token_suffix(token: Option<&str>) -> String {
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
fn answerer(opener: &Opener) -> Option<Answerer<'_>> {
    match opener {
        Opener::Token(cap, _) if cap.answers() => Some(Answerer::Capability),
        Opener::Token(..) => None,
        Opener::Viewer(caller) => Some(Answerer::Actor(&caller.actor.id)),
    }
}

/// The Approve / Deny forms, one per waiting ask (its text is the model's: escaped).
fn approval_forms(base: &str, suffix: &str, waiting: &[PendingApproval]) -> String {
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

fn run_body(
    run: &Value,
    events: &Value,
    friction: &Value,
    token: Option<&str>,
    live: bool,
    waiting: &[PendingApproval],
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
    out.push_str(&format!("</ol><h2>Friction <a class=\"muted\" href=\"{base}/friction{suffix}\">text</a></h2><ul id=\"friction\">"));
    out.push_str(&items(friction, "friction", "detail"));
    out.push_str("</ul></main>");
    out
}

/// The `<li>`s of a reply's list `list`: each entry's kind, then its `text` field, escaped.
fn items(reply: &Value, list: &str, text: &str) -> String {
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
enum RunPart {
    Events,
    Friction,
}

impl RunPart {
    /// The registry command that answers it for a viewer.
    fn command(self) -> &'static str {
        match self {
            RunPart::Events => "runs.events",
            RunPart::Friction => "runs.friction",
        }
    }

    /// The same answer, for a capability's holder.
    async fn of(self, cap: &Capability, services: &commands::Services) -> Reply {
        match self {
            RunPart::Events => cap.events(services).await,
            RunPart::Friction => cap.friction(services).await,
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

async fn run_text(
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
            api.invoke(&caller, part.command(), json!({"id": id}), Wants::Text)
                .await
        }
    };
    match reply.kind {
        ReplyKind::Ok => html::text(StatusCode::OK, format!("{}\n", reply.text)),
        _ => failure(&reply),
    }
}

/// `POST /runs/<id>/stop`: the form on a run's page (or a script). A stopped run sends the
/// browser back to its page; a finished one is 409.
pub async fn stop(
    State(api): State<Arc<AccessApi>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response {
    let headers = request.headers();
    if !guard::same_origin(headers, api.services.public_url.as_deref()) {
        return cross_site();
    }
    let token = param(query.as_deref(), "token");
    let reply = match opener(&api, &id, token.clone(), headers).await {
        Err(r) => return r,
        Ok(Opener::Token(cap, _)) => cap.stop(&api.services).await,
        Ok(Opener::Viewer(caller)) => ask(&api, &caller, "runs.stop", json!({"id": id})).await,
    };
    match reply.kind {
        ReplyKind::Ok => back_to_run(&id, token.as_deref()),
        ReplyKind::NotFound => html::not_found(),
        kind => not_done(
            crate::api::status_of(kind),
            "Not stopped",
            &id,
            &format!("<pre>{}</pre>", escape(&reply.text)),
        ),
    }
}

/// 303 back to the run's page (with its capability token, when it came with one).
fn back_to_run(id: &str, token: Option<&str>) -> Response {
    let to = format!("/runs/{id}{}", token_suffix(token));
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(&to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    html::secure(&mut r, None);
    r
}

/// A page saying what was not done (`why` is HTML, already escaped), linking back to the run.
fn not_done(status: StatusCode, title: &str, id: &str, why: &str) -> Response {
    html::page(
        status,
        title,
        &format!(
            "<main><h1>{title}</h1>{why}<p><a href=\"/runs/{}\">Back to the run</a></p></main>",
            escape(id)
        ),
        None,
    )
}

/// `POST /runs/<id>/approvals/<approval>` with `answer=approve|deny` (the run page's form): a
/// same-origin post by the run's principal or its capability link's holder. Answered, the
/// browser goes back to the run; an ask that is no longer waiting is 409, someone else's 403.
pub async fn approve(
    State(api): State<Arc<AccessApi>>,
    Path((id, approval)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    if !guard::same_origin(&parts.headers, api.services.public_url.as_deref()) {
        return cross_site();
    }
    let token = param(query.as_deref(), "token");
    let opener = match opener(&api, &id, token.clone(), &parts.headers).await {
        Ok(o) => o,
        Err(r) => return r,
    };
    let Ok(run_id) = RunId::parse(&id) else {
        return html::not_found();
    };
    let form = match axum::body::to_bytes(body, 4096).await {
        Ok(bytes) => bytes,
        Err(_) => return not_answered(StatusCode::PAYLOAD_TOO_LARGE, &id, "the form is too large"),
    };
    let approve = match param(std::str::from_utf8(&form).ok(), "answer").as_deref() {
        Some("approve") => true,
        Some("deny") => false,
        _ => {
            return not_answered(
                StatusCode::BAD_REQUEST,
                &id,
                "the form must say answer=approve or answer=deny",
            );
        }
    };
    let Some(by) = answerer(&opener) else {
        tracing::warn!(
            reason = "machine-link",
            "[access] a machine's link tried to answer an approval"
        );
        return not_answered(
            StatusCode::FORBIDDEN,
            &id,
            "this link watches and stops the run; only the person the run acts for answers its questions",
        );
    };
    match api
        .services
        .approvals
        .answer(&run_id, &approval, by, approve)
        .await
    {
        Ok(()) => back_to_run(&id, token.as_deref()),
        Err(e @ ApprovalError::NotPending) => {
            not_answered(StatusCode::CONFLICT, &id, &e.to_string())
        }
        Err(e @ ApprovalError::NotThePrincipal) => {
            tracing::warn!(
                reason = "not-the-principal",
                "[access] an approval was answered by someone else"
            );
            not_answered(StatusCode::FORBIDDEN, &id, &e.to_string())
        }
        Err(e @ ApprovalError::Unrecorded) => {
            not_answered(StatusCode::SERVICE_UNAVAILABLE, &id, &e.to_string())
        }
    }
}

fn not_answered(status: StatusCode, id: &str, why: &str) -> Response {
    not_done(
        status,
        "Not answered",
        id,
        &format!("<p>{}</p>", escape(why)),
    )
}

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
async fn firing_cell(api: &AccessApi, caller: &Caller, run: &str) -> String {
    let reply = ask(api, caller, "runs.get", json!({"id": run})).await;
    if reply.kind != ReplyKind::Ok {
        return String::new();
    }
    let live = if is_live(&reply.data) { " (live)" } else { "" };
    format!("<a href=\"/runs/{0}\">{0}</a>{live}", escape(run))
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
