//! The composition root: secrets, the app on a real listener, health, readiness, the
//! start-up summary and graceful shutdown.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common;

use server::config::{Source, parse};
use server::{App, Secrets};
use store::RunStatus;

const TOKENS: &str = r#"{"ops-token-0123456789": {"subject": "ops", "channel": "http:ops"}}"#;

fn config(dir: &std::path::Path, extra: &str) -> server::LoadedConfig {
    let text = format!(
        r#"
[server]
data_dir = "{data}"
shutdown_grace_seconds = 1
[store]
url = "sqlite://{db}"
[agents]
default = "echo"
[agents.echo]
[agents.staller]
behaviour = "stall"
[grants."http:ops"]
actions = ["runs:read", "agent:run:*"]
channels = ["http:ops"]
{extra}
"#,
        data = dir.join("data").display(),
        db = dir.join("sb.db").display()
    );
    parse(Source::File("test.toml".into()), &text).unwrap()
}

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

/// Fault 10: a token's channel decides its runs' stamp, so it must be a machine channel of a
/// token surface; a `slack:G…` one would stamp them private. The load fails naming the
/// token's subject, never the token. (Before: accepted.)
#[test]
fn a_token_channel_outside_the_token_surfaces_fails_the_load_naming_the_subject() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), "");
    for channel in ["slack:G123", "slack:C1", "access:alice", "cli:local"] {
        let tokens =
            format!(r#"{{"ops-token-0123456789": {{"subject": "ops", "channel": "{channel}"}}}}"#);
        let e = Secrets::from_lookup(&c, env(&[("SWITCHBOARD_INGRESS_TOKENS", &tokens)]))
            .err()
            .unwrap();
        let text = format!("{e:#}");
        assert!(
            text.starts_with(
                "SWITCHBOARD_INGRESS_TOKENS: token map entry for subject \"ops\": channel"
            ),
            "{text}"
        );
        assert!(
            text.contains(channel) && !text.contains("ops-token-0123456789"),
            "{text}"
        );
    }
}

#[test]
fn secrets_come_from_the_environment_or_named_files_and_faults_name_them() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), "");
    let s = Secrets::from_lookup(
        &c,
        env(&[
            ("SWITCHBOARD_INGRESS_TOKENS", TOKENS),
            ("PATH", "/bin"),
            ("AWS_SECRET", "x"),
        ]),
    )
    .unwrap();
    assert_eq!(s.ingress_tokens.as_ref().unwrap().0.len(), 1);
    assert_eq!(
        s.agent_env,
        vec![("PATH".to_owned(), "/bin".to_owned())],
        "only the allow-list"
    );
    assert!(
        s.values_to_redact()
            .contains(&"ops-token-0123456789".to_owned())
    );
    assert_eq!(format!("{s:?}"), "Secrets(…)");
    // A Slack secret set with a trailing newline (as `$(cat file)` in a unit file may leave
    // it) is redacted as Slack uses it, trimmed, so the bare value never reaches agent text.
    let slack = Secrets::from_lookup(
        &c,
        env(&[("SLACK_SIGNING_SECRET", "signing-secret-0123\n")]),
    )
    .unwrap();
    assert!(
        slack
            .values_to_redact()
            .contains(&"signing-secret-0123".to_owned()),
        "{:?}",
        slack.values_to_redact().len()
    );

    let file = dir.path().join("tokens.json");
    std::fs::write(&file, TOKENS).unwrap();
    let with_file = config(
        dir.path(),
        &format!("[ingress]\ntokens_file = \"{}\"", file.display()),
    );
    let s = Secrets::from_lookup(&with_file, env(&[])).unwrap();
    assert!(
        matches!(&s.ingress_tokens, Some((_, server::secrets::TokensFrom::File(f))) if f.ends_with("tokens.json"))
    );

    let e = Secrets::from_lookup(
        &c,
        env(&[(
            "SWITCHBOARD_INGRESS_TOKENS",
            "{\"ops-token-0123456789\": 3}",
        )]),
    )
    .unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.starts_with("SWITCHBOARD_INGRESS_TOKENS: token map entry #1"),
        "{msg}"
    );
    assert!(!msg.contains("ops-token-0123456789"), "{msg}");
    let missing = config(
        dir.path(),
        "[ingress]\ntokens_file = \"/nonexistent/tokens.json\"",
    );
    let msg = format!(
        "{:#}",
        Secrets::from_lookup(&missing, env(&[])).unwrap_err()
    );
    assert!(
        msg.contains("/nonexistent/tokens.json ([ingress] tokens_file)"),
        "{msg}"
    );
    let openai = config(
        dir.path(),
        "[agents.gpt]\nbackend = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\napi_key_env = \"MY_KEY\"",
    );
    let s =
        Secrets::from_lookup(&openai, env(&[("MY_KEY", "sk-abcdefghijklmnopqrstuvwx")])).unwrap();
    assert_eq!(
        s.api_keys.get("MY_KEY").map(String::as_str),
        Some("sk-abcdefghijklmnopqrstuvwx")
    );
}

#[tokio::test]
async fn an_openai_agent_whose_key_is_missing_fails_the_start_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        "[agents.gpt]\nbackend = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\napi_key_env = \"MY_KEY\"",
    );
    let secrets = Secrets::from_lookup(&c, env(&[])).unwrap();
    let e = App::build(c, secrets, store::ReplicaId::parse("r").unwrap())
        .await
        .err()
        .unwrap();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("agents.gpt.api_key_env names MY_KEY, which is not set"),
        "{msg}"
    );
}

async fn start(
    c: server::LoadedConfig,
    secrets: Secrets,
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
    String,
) {
    let app = App::build(c, secrets, store::ReplicaId::parse("test-replica").unwrap())
        .await
        .unwrap();
    let s = common::serve(app).await;
    (s.addr, s.stop, s.handle, s.summary)
}

#[tokio::test]
async fn the_summary_says_what_is_off_and_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), "");
    let (addr, stop, handle, summary) = start(
        c,
        Secrets::from_lookup(&config(dir.path(), ""), env(&[])).unwrap(),
    )
    .await;
    assert!(summary.contains("off /ingress"), "{summary}");
    assert!(
        summary.contains("needs a token map: SWITCHBOARD_INGRESS_TOKENS or [ingress] tokens_file")
    );
    assert!(
        summary.contains("agents  echo (echo, default), staller (echo)"),
        "{summary}"
    );
    assert!(summary.contains("off slack"));
    assert!(
        summary
            .lines()
            .any(|l| l.starts_with("  off sandbox") && l.contains("no program runs under it")),
        "{summary}"
    );
    assert!(
        summary.contains("on  schedules          1 schedule (self-improvement); fired in process"),
        "{summary}"
    );
    assert!(
        summary
            .contains("memory  rules extractor; block ≤ 20 records, 4000 chars; reflection ≤ 30s"),
        "{summary}"
    );
    assert!(
        summary.contains("off /mcp               needs [mcp] enabled = true and a token map"),
        "{summary}"
    );
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/ingress"))
        .bearer_auth("ops-token-0123456789")
        .body("help")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    stop.send(()).unwrap();
    handle.await.unwrap().unwrap();
}

#[tokio::test]
async fn health_readiness_ingress_and_a_graceful_shutdown_that_interrupts_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), "");
    let secrets = Secrets::from_lookup(&c, env(&[("SWITCHBOARD_INGRESS_TOKENS", TOKENS)])).unwrap();
    let (addr, stop, handle, summary) = start(c, secrets).await;
    assert!(
        summary.contains("on  /ingress           1 bearer token from SWITCHBOARD_INGRESS_TOKENS"),
        "{summary}"
    );
    let client = reqwest::Client::new();
    let get = |path: &str| client.get(format!("http://{addr}{path}")).send();
    let h = get("/healthz").await.unwrap();
    assert_eq!(
        (h.status().as_u16(), h.text().await.unwrap()),
        (200, "ok\n".to_owned())
    );
    let r = get("/readyz").await.unwrap();
    let ready = r.text().await.unwrap();
    // Ready, then one line per surface.
    assert_eq!(ready.lines().next(), Some("ready"), "{ready}");
    assert!(ready.contains("\n/ingress: on\n"), "{ready}");
    assert!(ready.contains("\nslack: off"), "{ready}");
    let post = |body: &'static str| {
        client
            .post(format!("http://{addr}/ingress"))
            .bearer_auth("ops-token-0123456789")
            .header("accept", "application/json")
            .body(body)
            .send()
    };
    let quick = post("@echo quick one").await.unwrap();
    assert_eq!(quick.status().as_u16(), 202);
    let stalled = post("@staller never ends").await.unwrap();
    assert_eq!(stalled.status().as_u16(), 202);
    let body: serde_json::Value = serde_json::from_str(&stalled.text().await.unwrap()).unwrap();
    let id: String = body["run_id"].as_str().unwrap().into();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let began = Instant::now();
    stop.send(()).unwrap();
    handle.await.unwrap().unwrap();
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "live runs got the grace: {took:?}"
    );
    assert!(
        took < Duration::from_secs(8),
        "then were interrupted: {took:?}"
    );
    let store = store::open(&format!("sqlite://{}", dir.path().join("sb.db").display()))
        .await
        .unwrap();
    let run = store.get_run(&id.parse().unwrap()).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Interrupted);
    assert!(
        !store.events(&run.id).await.unwrap().is_empty(),
        "its events are kept"
    );
    assert!(
        client
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .is_err(),
        "no longer accepting"
    );
}

#[tokio::test]
async fn readiness_fails_when_the_store_does_not_answer() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("r.db").display());
    let s = store::SqliteStore::open(&store::StoreSpec::parse(&url).unwrap())
        .await
        .unwrap();
    assert_eq!(server::readiness(&s).await, Ok(()));
    s.pool().close().await;
    assert_eq!(
        server::readiness(&s).await,
        Err("the store is not reachable".to_owned())
    );
}

#[tokio::test]
async fn mcp_enabled_without_a_token_map_is_off_and_answers_503() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), "[mcp]\nenabled = true");
    let secrets = Secrets::from_lookup(&c, env(&[])).unwrap();
    let (addr, stop, handle, summary) = start(c, secrets).await;
    assert!(
        summary.contains("off /mcp               [mcp] enabled, but it needs a token map"),
        "{summary}"
    );
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .bearer_auth("ops-token-0123456789")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert!(r.text().await.unwrap().contains("no token map"));
    stop.send(()).unwrap();
    handle.await.unwrap().unwrap();
}

/// A surface that is off answers 503 on every route it owns, for any method, with one line
/// saying what it needs; never a bare 404 (the ingress answers 503 without a token map too).
#[tokio::test]
async fn every_route_of_an_off_surface_answers_503_with_one_line_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), "");
    let secrets = Secrets::from_lookup(&c, env(&[])).unwrap();
    let (addr, stop, handle, _) = start(c, secrets).await;
    let client = reqwest::Client::new();
    let cases = [
        (
            "POST",
            "/mcp",
            "/mcp is off on this server: needs [mcp] enabled = true",
        ),
        ("GET", "/mcp", "/mcp is off on this server"),
        ("DELETE", "/mcp", "/mcp is off on this server"),
        (
            "POST",
            "/slack/events",
            "slack is off on this server: needs a [slack] section",
        ),
        ("POST", "/slack/interactions", "slack is off on this server"),
        (
            "GET",
            "/runs",
            "/api /runs is off on this server: needs an [access] section",
        ),
        (
            "GET",
            "/runs/001K20YSMQQ46EVV1GGA9W3EM0",
            "/api /runs is off on this server",
        ),
        ("GET", "/runs/stream", "/api /runs is off on this server"),
        ("GET", "/api/runs.list", "/api /runs is off on this server"),
        ("POST", "/api/runs.stop", "/api /runs is off on this server"),
        ("POST", "/ingress", "the HTTP ingress is off: no token map"),
    ];
    for (method, path, said) in cases {
        let r = client
            .request(method.parse().unwrap(), format!("http://{addr}{path}"))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 503, "{method} {path}");
        let body = r.text().await.unwrap();
        assert!(body.starts_with(said), "{method} {path}: {body:?}");
        assert_eq!(
            body.trim_end().lines().count(),
            1,
            "{method} {path}: {body:?}"
        );
    }
    // A path no surface owns is still not found.
    let r = client
        .get(format!("http://{addr}/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    stop.send(()).unwrap();
    handle.await.unwrap().unwrap();
}

/// With /mcp on, `serve` tells command agents where it is: its own bound address.
#[tokio::test]
async fn mcp_on_shows_in_the_summary_and_command_agents_get_its_url() {
    let dir = tempfile::tempdir().unwrap();
    let extra = "[mcp]\nenabled = true\n[agents.where]\nbackend = \"command\"\ncommand = [\"/bin/sh\", \"-c\", \"printf %s \\\"$SWITCHBOARD_MCP_URL\\\"\"]\nnetwork = \"host\"";
    let c = config(dir.path(), extra);
    let secrets = Secrets::from_lookup(&c, env(&[("SWITCHBOARD_INGRESS_TOKENS", TOKENS)])).unwrap();
    let (addr, stop, handle, summary) = start(c, secrets).await;
    assert!(
        summary.contains("on  /mcp               stateless Streamable HTTP; 1 bearer token and run-scoped agent tokens; hosts localhost, 127.0.0.1, [::1]"),
        "{summary}"
    );
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/ingress?wait=30"))
        .bearer_auth("ops-token-0123456789")
        .header("accept", "application/json")
        .body("@where are you")
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(v["answer"], format!("http://{addr}/mcp"), "{v}");
    stop.send(()).unwrap();
    handle.await.unwrap().unwrap();
}

/// Replicas share a Postgres store, so an agent token must verify on all of them: with /mcp
/// on, `serve` refuses to start without the shared secret, and says which keys set it.
#[test]
fn mcp_on_postgres_needs_a_shared_agent_token_secret() {
    let text = "[store]\nurl = \"postgres://sb@db.internal/switchboard\"\n[mcp]\nenabled = true\n";
    let c = parse(Source::File("pg.toml".into()), text).unwrap();
    let without = Secrets::from_lookup(&c, env(&[("SWITCHBOARD_INGRESS_TOKENS", TOKENS)])).unwrap();
    let e = server::preflight(&c, &without).unwrap_err().to_string();
    assert!(e.contains("SWITCHBOARD_AGENT_TOKEN_SECRET"), "{e}");
    assert!(e.contains("[server] agent_token_secret_file"), "{e}");
    let with = Secrets::from_lookup(
        &c,
        env(&[
            ("SWITCHBOARD_INGRESS_TOKENS", TOKENS),
            (
                "SWITCHBOARD_AGENT_TOKEN_SECRET",
                "a-shared-secret-of-enough-length-0123",
            ),
        ]),
    )
    .unwrap();
    assert!(server::preflight(&c, &with).is_ok());
    // Off, or on SQLite (one process), there is nothing to share.
    let off = parse(
        Source::File("pg.toml".into()),
        "[store]\nurl = \"postgres://sb@db.internal/switchboard\"\n",
    )
    .unwrap();
    let off_secrets =
        Secrets::from_lookup(&off, env(&[("SWITCHBOARD_INGRESS_TOKENS", TOKENS)])).unwrap();
    assert!(server::preflight(&off, &off_secrets).is_ok());
    let dir = tempfile::tempdir().unwrap();
    let sqlite = config(dir.path(), "[mcp]\nenabled = true");
    let sqlite_secrets =
        Secrets::from_lookup(&sqlite, env(&[("SWITCHBOARD_INGRESS_TOKENS", TOKENS)])).unwrap();
    assert!(server::preflight(&sqlite, &sqlite_secrets).is_ok());
}

/// `schedule fire` over the ingress, by a token holding `schedule:exec`: the firing runs as
/// `schedule:<name>` in its own channel, never as the token; the reply is the run id and
/// status, never the firing's output, which the token reads (or not) under its own grants.
#[tokio::test]
async fn schedule_fire_over_the_ingress_runs_as_the_schedule_never_as_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = r#"{"cron-token-0123456789": {"subject": "cron"}, "ops-token-0123456789": {"subject": "ops", "channel": "http:ops"}}"#;
    let extra = "[grants.\"http:cron\"]\nactions = [\"schedule:exec\"]\n";
    let c = config(dir.path(), extra);
    let secrets = Secrets::from_lookup(&c, env(&[("SWITCHBOARD_INGRESS_TOKENS", tokens)])).unwrap();
    let (addr, stop, handle, _) = start(c, secrets).await;
    let client = reqwest::Client::new();
    let say = |token: &'static str, text: &'static str| {
        client
            .post(format!("http://{addr}/ingress"))
            .bearer_auth(token)
            .header("accept", "application/json")
            .body(text)
            .send()
    };
    let fired = say("cron-token-0123456789", "schedule fire self-improvement")
        .await
        .unwrap();
    assert_eq!(fired.status().as_u16(), 200);
    let body: serde_json::Value = serde_json::from_str(&fired.text().await.unwrap()).unwrap();
    assert_eq!(body["status"], "completed", "{body}");
    assert!(
        !body.to_string().contains("runs analysed"),
        "never the firing's output: {body}"
    );
    let id = body["run_id"].as_str().unwrap().to_owned();
    // The token without schedule:exec is refused by the same row.
    let refused = say("ops-token-0123456789", "schedule fire self-improvement")
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    // The cron token holds no runs:read: the firing's run is not_found to it.
    let get = client
        .post(format!("http://{addr}/ingress"))
        .bearer_auth("cron-token-0123456789")
        .body(format!("runs get {id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 404);
    stop.send(()).unwrap();
    handle.await.unwrap().unwrap();
    let store = store::open(&format!("sqlite://{}", dir.path().join("sb.db").display()))
        .await
        .unwrap();
    let run = store.get_run(&id.parse().unwrap()).await.unwrap().unwrap();
    assert_eq!(run.user_id.as_str(), "schedule:self-improvement");
    assert_eq!(run.channel_id.as_str(), "schedule:self-improvement");
    assert_eq!(run.surface, authz_core::Surface::Schedule);
    assert_eq!(run.request, "friction report --days 7");
    assert!(run.answer.unwrap().starts_with("🔍 "));
    let firings = store
        .recent_firings(&"self-improvement".parse().unwrap(), 5)
        .await
        .unwrap();
    assert_eq!(firings.len(), 1);
    assert!(firings[0].slot.is_manual());
    assert_eq!(firings[0].run_id.as_ref(), Some(&run.id));
}

/// The summary names the programs bubblewrap runs and the command agents that opted out.
#[tokio::test]
async fn the_summary_names_sandboxed_and_unsandboxed_command_agents() {
    let dir = tempfile::tempdir().unwrap();
    let extra = "[agents.boxed]\nbackend = \"command\"\ncommand = [\"/bin/true\"]\n\
                 [agents.hosted]\nbackend = \"command\"\ncommand = [\"/bin/true\"]\nnetwork = \"host\"\n\
                 [agents.open]\nbackend = \"command\"\ncommand = [\"/bin/true\"]\nsandbox = false\n";
    let c = config(dir.path(), extra);
    let secrets = Secrets::from_lookup(&c, env(&[])).unwrap();
    let (_addr, stop, handle, summary) = start(c, secrets).await;
    let line = summary
        .lines()
        .find(|l| l.contains(" sandbox "))
        .unwrap_or_else(|| panic!("no sandbox line: {summary}"));
    assert!(
        line.starts_with("  on  sandbox") && line.contains("bubblewrap runs command agents boxed"),
        "{line}"
    );
    assert!(
        line.contains("NOT sandboxed (sandbox = false): open"),
        "{line}"
    );
    assert!(
        line.contains("(each sandbox: /tmp 128 MiB, 256 processes)"),
        "{line}"
    );
    // Whose traffic the broker decides, and whose it does not; a test binary is no forwarder.
    let network = summary
        .lines()
        .find(|l| l.contains(" network "))
        .unwrap_or_else(|| panic!("no network line: {summary}"));
    assert!(
        network.starts_with("  on  network")
            && network.contains("command agents boxed: no network but the run's proxy")
            && network.contains(
                "NOT decided, the host's network: hosted (network = \"host\"), open (sandbox = false)"
            )
            && network.contains("BROKEN: this process is not the switchboard binary"),
        "{network}"
    );
    let workspaces = summary
        .lines()
        .find(|l| l.contains(" workspaces "))
        .unwrap_or_else(|| panic!("no workspaces line: {summary}"));
    assert!(
        workspaces.contains("one per run in ")
            && workspaces.contains("URL repos fetched again after 60 s; run branches kept 30 days"),
        "{workspaces}"
    );
    stop.send(()).unwrap();
    handle.await.unwrap().unwrap();
}
