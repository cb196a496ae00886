//! Tracing end to end: the app served on a real listener with the process's own subscriber
//! (the layers `telemetry::init` installs, here with a captured log writer and an in-memory
//! span exporter). Denied traces are dropped whole from the span log and the export; the span
//! log route opens only to `trace:read`; no line holds a token, a query, a body or a remote
//! error; audit lines go to their own file.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use authz_core::ChannelVisibility;
use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use server::config::{Source, TelemetryConfig, parse};
use server::telemetry::{self, SpanLog};
use server::{App, Overrides, Secrets};
use store::NewRun;
use test_support::log::CapturedLog;

const OPS: &str = "ops-token-PLANTED-0123456789";
const TRACER: &str = "tracer-token-PLANTED-0123456789";
const TOKENS: &str = r#"{
    "ops-token-PLANTED-0123456789": {"subject": "ops", "channel": "http:ops"},
    "tracer-token-PLANTED-0123456789": {"subject": "tracer"}
}"#;

/// The process's layers, with the log in memory and spans exported to memory.
struct Sinks {
    log: CapturedLog,
    span_log: SpanLog,
    exported: InMemorySpanExporter,
    provider: SdkTracerProvider,
}

impl Sinks {
    fn new() -> Sinks {
        let exported = InMemorySpanExporter::default();
        let provider = telemetry::provider_with(
            exported.clone(),
            "switchboard-test",
            Duration::from_millis(50),
        );
        Sinks {
            log: CapturedLog::default(),
            span_log: SpanLog::new(1000),
            exported,
            provider,
        }
    }

    /// Installs the layers as the process's subscriber, as `serve` does, where this test has
    /// the process to itself (nextest runs each test in its own); else for this thread only.
    /// A thread-local subscriber is not what the server runs under, and with one a run's
    /// spans were missed now and then (its events were not), which is no fault of the server.
    fn install(
        &self,
        config: &TelemetryConfig,
        audit: Option<std::fs::File>,
    ) -> Option<tracing::subscriber::DefaultGuard> {
        let build = |audit| {
            telemetry::subscriber(
                config,
                telemetry::filter_of("info"),
                self.log.clone(),
                audit,
                &self.span_log,
                Some(&self.provider),
            )
        };
        let audit_again = audit.as_ref().map(|f| f.try_clone().unwrap());
        match tracing::subscriber::set_global_default(build(audit)) {
            Ok(()) => None,
            Err(_) => Some(tracing::subscriber::set_default(build(audit_again))),
        }
    }

    fn spans(&self) -> Vec<SpanData> {
        self.provider.force_flush().unwrap();
        self.exported.get_finished_spans().unwrap()
    }
}

/// The process's layers feeding only `log` (no export; the log lines discarded).
fn span_log_only(log: &SpanLog) -> tracing::subscriber::DefaultGuard {
    let sub = telemetry::subscriber(
        &TelemetryConfig::default(),
        telemetry::filter_of("info"),
        CapturedLog::default(),
        None,
        log,
        None,
    );
    tracing::subscriber::set_default(sub)
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn str_attr(span: &SpanData, key: &str) -> Option<String> {
    attr(span, key).map(|v| v.as_str().into_owned())
}

fn config_text(dir: &std::path::Path, agents: &str, telemetry: &str) -> String {
    format!(
        r#"
[server]
data_dir = "{data}"
[store]
url = "sqlite://{db}"
[mcp]
enabled = true
[agents]
default = "echo"
[agents.echo]
{agents}
[grants."http:ops"]
actions = ["runs:read", "agent:run:*"]
channels = ["http:ops"]
[grants."mcp:ops"]
actions = ["runs:read"]
channels = ["http:ops"]
[grants."http:tracer"]
actions = ["trace:read"]
[telemetry]
{telemetry}
"#,
        data = dir.join("data").display(),
        db = dir.join("sb.db").display()
    )
}

async fn serve(
    text: &str,
    tokens: bool,
    span_log: &SpanLog,
) -> (common::Serving, Arc<dyn store::Store>) {
    let c = parse(Source::File("test.toml".into()), text).unwrap();
    let env: HashMap<&str, &str> = if tokens {
        [("SWITCHBOARD_INGRESS_TOKENS", TOKENS)].into()
    } else {
        HashMap::new()
    };
    let secrets = Secrets::from_lookup(&c, |k| env.get(k).map(|v| (*v).to_owned())).unwrap();
    let overrides = Overrides {
        span_log: Some(span_log.clone()),
        ..Overrides::default()
    };
    let app = App::build_with(
        c,
        secrets,
        store::ReplicaId::parse("trace").unwrap(),
        overrides,
    )
    .await
    .unwrap();
    let store = app.store.clone();
    (common::serve(app).await, store)
}

/// A run in a machine channel the ops token holds no grant for.
async fn hidden_run(store: &Arc<dyn store::Store>) -> String {
    let run = store
        .create_run(NewRun::fixture(
            "http:billing".parse().unwrap(),
            "http:billing-bot".parse().unwrap(),
            ChannelVisibility::Machine,
            store::wall_clock(),
        ))
        .await
        .unwrap();
    run.id.to_string()
}

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn ingress(&self, token: Option<&str>, path_and_query: &str, body: &str) -> u16 {
        let mut req = self
            .http
            .post(format!("{}{path_and_query}", self.base))
            .body(body.to_owned());
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap().status().as_u16()
    }

    async fn mcp_call(&self, token: &str, tool: &str, args: &str) -> (u16, String) {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
        );
        let r = self
            .http
            .post(format!("{}/mcp", self.base))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    async fn trace_log(&self, token: Option<&str>, query: &str) -> (u16, String) {
        let mut req = self
            .http
            .get(format!("{}/admin/trace/log{query}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}

/// The span log's lines as the route serves them, one JSON object a line.
fn span_log_text(log: &SpanLog) -> String {
    log.since(0)
        .iter()
        .map(|l| serde_json::to_string(l).unwrap() + "\n")
        .collect()
}

/// The request roots of the span log, as JSON.
fn roots(lines: &str) -> Vec<serde_json::Value> {
    lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["name"] == "request" && l["parent"].is_null())
        // The span log's own allowed reads: an earlier poll's is in a later one's answer
        // (a refused read of it still counts, and must not be there).
        .filter(|l| !(l["fields"]["route"] == "/admin/trace/log" && l["fields"]["outcome"] == "ok"))
        .collect()
}

/// Allowed requests reach the span log and the export; a 401, a 403, a 404 a denial caused
/// (over the ingress and over MCP) reach neither, children and all. The span log route
/// itself: 401 without a bearer, 403 without trace:read.
#[tokio::test]
async fn denied_requests_leave_no_span_line_and_no_exported_span() {
    let dir = tempfile::tempdir().unwrap();
    let sinks = Sinks::new();
    let _guard = sinks.install(&TelemetryConfig::default(), None);
    let (serving, store) = serve(&config_text(dir.path(), "", ""), true, &sinks.span_log).await;
    let c = Client {
        http: reqwest::Client::new(),
        base: format!("http://{}", serving.addr),
    };
    let hidden = hidden_run(&store).await;
    // Allowed: one ingress command, one MCP tool call.
    assert_eq!(c.ingress(Some(OPS), "/ingress", "runs list").await, 200);
    let (status, body) = c.mcp_call(OPS, "runs_list", "{}").await;
    assert_eq!(status, 200, "{body}");

    // Denied, five ways.
    assert_eq!(c.ingress(None, "/ingress", "runs list").await, 401);
    assert_eq!(
        c.ingress(Some(OPS), "/ingress", "schedule fire self-improvement")
            .await,
        403
    );
    assert_eq!(
        c.ingress(Some(OPS), "/ingress", &format!("runs get {hidden}"))
            .await,
        404
    );
    let (_, body) = c
        .mcp_call(OPS, "runs_get", &format!(r#"{{"id":"{hidden}"}}"#))
        .await;
    assert!(body.contains("not found"), "{body}");
    assert_eq!(c.trace_log(None, "").await.0, 401);
    assert_eq!(c.trace_log(Some(OPS), "").await.0, 403);
    // The span log, read by a bearer holding trace:read.
    // rmcp's task for a call may end after its response: its trace closes then. That task
    // drains for up to 2 s once cancelled (5 s once its transport closed), so wait past both;
    // on a loaded CI machine (two cores, the whole suite beside it) 10 s was once not enough.
    let mut lines = String::new();
    for _ in 0..600 {
        let (status, now) = c.trace_log(Some(TRACER), "?since=0").await;
        assert_eq!(status, 200);
        lines = now;
        if roots(&lines).len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let roots = roots(&lines);
    let summary: Vec<String> = roots
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {}",
                r["fields"]["surface"],
                r["fields"]["route"],
                r["fields"]["actor"],
                r["fields"]["outcome"]
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            r#""http" "/ingress" "http:ops" "ok""#,
            r#""mcp" "/mcp" "mcp:ops" "ok""#,
        ],
        "only the allowed requests: {lines}"
    );
    for line in lines.lines() {
        assert!(
            !line.contains(&hidden),
            "no line names the hidden run: {line}"
        );
        assert!(!line.contains("denied"), "{line}");
    }
    // The export: the same two request traces, nothing of the denied ones.
    serving.stop.send(()).unwrap();
    serving.handle.await.unwrap().unwrap();
    // Once the server has stopped every trace has closed, the denied call's late ones too:
    // the whole span log still holds only the allowed requests.
    let all_lines = span_log_text(&sinks.span_log);
    assert_eq!(
        self::roots(&all_lines).len(),
        2,
        "only the allowed requests: {all_lines}"
    );
    assert!(
        !all_lines.contains(&hidden) && !all_lines.contains("denied"),
        "{all_lines}"
    );
    let spans = sinks.spans();
    let exported_roots: std::collections::BTreeSet<(Option<String>, Option<String>)> = spans
        .iter()
        .filter(|s| s.name == "request")
        .map(|s| (str_attr(s, "route"), str_attr(s, "outcome")))
        .collect();
    assert_eq!(
        exported_roots,
        [
            (Some("/admin/trace/log".into()), Some("ok".into())),
            (Some("/ingress".into()), Some("ok".into())),
            (Some("/mcp".into()), Some("ok".into())),
        ]
        .into(),
        "no denied root: {spans:?}"
    );
    // The denied MCP call had children too (rmcp's); only the allowed call's are exported.
    let children: Vec<&SpanData> = spans.iter().filter(|s| s.name == "serve_inner").collect();
    assert_eq!(children.len(), 1, "{children:?}");
    let mcp_root = spans
        .iter()
        .find(|s| str_attr(s, "route").as_deref() == Some("/mcp"))
        .unwrap();
    assert_eq!(children[0].parent_span_id, mcp_root.span_context.span_id());
    assert_eq!(str_attr(mcp_root, "actor").as_deref(), Some("mcp:ops"));
    for s in &spans {
        assert!(attr(s, "denied").is_none(), "{s:?}");
        assert!(!format!("{s:?}").contains(&hidden));
    }
}

/// A trace is dropped whole when any span of it is marked, however deep: the root, its
/// children and grandchildren never reach the span log or the exporter. A sibling trace
/// that was not marked reaches both, children included.
#[test]
fn a_denied_trace_is_dropped_whole_children_included() {
    let sinks = Sinks::new();
    let _guard = sinks.install(&TelemetryConfig::default(), None);
    for (route, deny_deep) in [("/denied", true), ("/allowed", false)] {
        let root = commands::trace::request_span("http", route);
        let _root = root.enter();
        let child = tracing::info_span!("child");
        let _child = child.enter();
        let grandchild = tracing::info_span!("grandchild");
        let _g = grandchild.enter();
        if deny_deep {
            commands::trace::mark_denied();
        }
    }
    // A 401 is marked on the root itself, after its children closed.
    {
        let root = commands::trace::request_span("http", "/unauthorized");
        root.in_scope(|| drop(tracing::info_span!("child").entered()));
        root.record("denied", true);
    }
    let spans = sinks.spans();
    let mut names: Vec<(String, Option<String>)> = spans
        .iter()
        .map(|s| (s.name.to_string(), str_attr(s, "route")))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("child".to_owned(), None),
            ("grandchild".to_owned(), None),
            ("request".to_owned(), Some("/allowed".to_owned())),
        ]
    );
    let lines: Vec<String> = sinks
        .span_log
        .since(0)
        .iter()
        .map(|l| format!("{} {:?}", l.name, l.fields.get("route")))
        .collect();
    assert_eq!(
        lines,
        [
            "grandchild None",
            "child None",
            "request Some(\"/allowed\")"
        ]
    );
}

#[test]
fn the_span_log_is_bounded_and_read_after_an_instant() {
    let log = SpanLog::new(3);
    let _guard = span_log_only(&log);
    for i in 0..5 {
        drop(commands::trace::request_span("cli", &format!("r{i}")).entered());
    }
    let kept: Vec<String> = log
        .since(0)
        .iter()
        .map(|l| l.fields["route"].clone())
        .collect();
    assert_eq!(kept, ["r2", "r3", "r4"], "the oldest lines go first");
    let last = log.since(0)[2].at;
    assert!(log.since(last).is_empty());
}

/// The span log route: 503 without a token map (saying what it needs), and its one
/// parameter checked.
#[tokio::test]
async fn the_span_log_route_needs_a_token_map_and_takes_only_since() {
    let dir = tempfile::tempdir().unwrap();
    let log = SpanLog::new(10);
    let text = config_text(dir.path(), "", "");
    let (off, _) = serve(&text, false, &log).await;
    let c = Client {
        http: reqwest::Client::new(),
        base: format!("http://{}", off.addr),
    };
    assert!(
        off.summary.contains("traces  human logs; audit lines with the log; span log of 1000 lines at /admin/trace/log (trace:read); no span export ([telemetry] otlp_endpoint)"),
        "{}",
        off.summary
    );
    let (status, body) = c.trace_log(Some(TRACER), "").await;
    assert_eq!(status, 503);
    assert!(body.contains("needs a token map"), "{body}");
    off.stop.send(()).unwrap();
    off.handle.await.unwrap().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (on, _) = serve(&config_text(dir.path(), "", ""), true, &log).await;
    let c = Client {
        http: reqwest::Client::new(),
        base: format!("http://{}", on.addr),
    };
    for (query, want) in [
        ("?since=0", 200),
        ("", 200),
        ("?since=yesterday", 400),
        ("?limit=5", 400),
    ] {
        assert_eq!(c.trace_log(Some(TRACER), query).await.0, want, "{query}");
    }
    assert_eq!(c.trace_log(Some("Bearer-but-not-a-token"), "").await.0, 401);
}

/// Planted secrets — the bearer tokens, a wrong bearer, a query string, request bodies, and
/// an agent back end's remote error text — reach no log line, no span line and no exported
/// span: with text logs, and (below) with JSON logs.
#[tokio::test]
async fn no_line_holds_a_token_a_query_a_body_or_a_remote_error() {
    no_line_holds_a_planted_secret(false).await;
}

#[tokio::test]
async fn no_json_line_holds_a_token_a_query_a_body_or_a_remote_error() {
    no_line_holds_a_planted_secret(true).await;
}

/// One log format per test, so each has its process's subscriber to itself ([`Sinks::install`]).
async fn no_line_holds_a_planted_secret(json: bool) {
    // A model endpoint that fails with a body of its own.
    let remote = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let remote_addr = remote.local_addr().unwrap();
    tokio::spawn(async move {
        let app = axum::Router::new().fallback(|| async {
            (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "upstream exploded: PLANTED-REMOTE-ERROR",
            )
        });
        axum::serve(remote, app).await.unwrap();
    });
    let dir = tempfile::tempdir().unwrap();
    let agents = format!(
        "[agents.remote]\nbackend = \"openai\"\nbase_url = \"http://{remote_addr}/v1\"\nmodel = \"m\"\n"
    );
    {
        let sinks = Sinks::new();
        let config = TelemetryConfig {
            json_logs: json,
            ..TelemetryConfig::default()
        };
        let _guard = sinks.install(&config, None);
        let dir = dir.path().join(format!("json-{json}"));
        std::fs::create_dir_all(&dir).unwrap();
        let (serving, _) = serve(&config_text(&dir, &agents, ""), true, &sinks.span_log).await;
        let c = Client {
            http: reqwest::Client::new(),
            base: format!("http://{}", serving.addr),
        };
        assert_eq!(
            c.ingress(
                Some(OPS),
                "/ingress?token=PLANTED-QUERY&wait=30",
                "@echo PLANTED-BODY-ONE"
            )
            .await,
            200
        );
        assert_eq!(
            c.ingress(Some(OPS), "/ingress?wait=30", "@remote PLANTED-BODY-TWO")
                .await,
            200
        );
        assert_eq!(
            c.ingress(
                Some("PLANTED-WRONG-TOKEN-0123456789"),
                "/ingress",
                "runs list"
            )
            .await,
            401
        );
        assert_eq!(
            c.ingress(Some(OPS), "/ingress", "runs get PLANTED-BODY-THREE")
                .await,
            404
        );
        assert_eq!(
            c.trace_log(Some(TRACER), "?since=0&PLANTED-QUERY-TWO")
                .await
                .0,
            400
        );
        // A run's trace ends after its reply went out (its reflection is part of it), so
        // its spans reach the log a moment after the request that waited for it returned.
        // Polled up to 10 s: on a loaded machine the run's end can come seconds later.
        let mut span_lines = String::new();
        for _ in 0..500 {
            let (status, lines) = c.trace_log(Some(TRACER), "?since=0").await;
            assert_eq!(status, 200);
            span_lines = lines;
            if span_lines.contains("\"name\":\"backend\"") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        serving.stop.send(()).unwrap();
        serving.handle.await.unwrap().unwrap();
        let exported = format!("{:?}", sinks.spans());
        // Every trace has closed now, the other run's too: the whole span log.
        let kept = span_log_text(&sinks.span_log);
        let log = sinks.log.text();
        assert!(log.contains("run finished"), "the log was captured: {log}");
        assert!(
            span_lines.contains("\"name\":\"backend\"") && kept.contains("\"name\":\"backend\""),
            "run spans were kept: {kept}"
        );
        assert!(exported.contains("store.finish_run"), "spans were exported");
        for (sink, text) in [
            ("log", &log),
            ("span log", &span_lines),
            ("span log after shutdown", &kept),
            ("export", &exported),
        ] {
            assert!(
                !text.contains("PLANTED"),
                "json={json}: the {sink} holds a planted secret:\n{text}"
            );
        }
    }
}

/// Serves with `config`'s telemetry (its audit file appended to), answers one refused request
/// and one run, and stops; the sinks, to read.
async fn a_refusal_and_a_run(dir: &std::path::Path, config: &TelemetryConfig) -> Sinks {
    let sinks = Sinks::new();
    let audit = config.audit_file.as_ref().map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap()
    });
    let _guard = sinks.install(config, audit);
    let (serving, _) = serve(&config_text(dir, "", ""), true, &sinks.span_log).await;
    let c = Client {
        http: reqwest::Client::new(),
        base: format!("http://{}", serving.addr),
    };
    assert_eq!(
        c.ingress(Some(OPS), "/ingress", "schedule fire self-improvement")
            .await,
        403
    );
    assert_eq!(
        c.ingress(Some(OPS), "/ingress?wait=30", "@echo hi").await,
        200
    );
    serving.stop.send(()).unwrap();
    serving.handle.await.unwrap().unwrap();
    sinks
}

/// With `audit_file`, audit lines go to that file (appended) and not to the log.
#[tokio::test]
async fn audit_lines_go_to_their_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let audit_path = dir.path().join("audit.log");
    std::fs::write(&audit_path, "an earlier line\n").unwrap();
    let config = TelemetryConfig {
        audit_file: Some(audit_path.clone()),
        ..TelemetryConfig::default()
    };
    let sinks = a_refusal_and_a_run(dir.path(), &config).await;
    let audit = std::fs::read_to_string(&audit_path).unwrap();
    assert!(audit.starts_with("an earlier line\n"), "appended: {audit}");
    assert!(
        audit.contains("[authz] deny actor=http:ops action=schedule:exec resource=command reason=missing-grant subject=schedule:exec surface=http (missing grant schedule:exec)"),
        "{audit}"
    );
    assert_eq!(audit.lines().count(), 2, "audit lines only: {audit}");
    let log = sinks.log.text();
    assert!(!log.contains("[authz] deny"), "{log}");
    assert!(
        log.contains("run started"),
        "the rest of the log is there: {log}"
    );
}

/// Span lines name their trace by a number of its own: 1, 2, 3, … in this process.
#[test]
fn every_trace_has_a_number_of_its_own() {
    let log = SpanLog::new(100);
    let _guard = span_log_only(&log);
    for i in 0..3 {
        let root = commands::trace::request_span("cli", &format!("r{i}"));
        root.in_scope(|| drop(tracing::info_span!("child").entered()));
    }
    let lines = log.since(0);
    let traces: Vec<(u64, &str)> = lines.iter().map(|l| (l.trace, l.name)).collect();
    assert_eq!(
        traces,
        [
            (1, "child"),
            (1, "request"),
            (2, "child"),
            (2, "request"),
            (3, "child"),
            (3, "request")
        ]
    );
}

mod json_lines;
