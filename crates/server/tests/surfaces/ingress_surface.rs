//! `POST /ingress` over real HTTP on loopback: the app built by the one composition root
//! (`server::App::build_with`) from a config with a SQLite store, the real registry and a real
//! dispatcher running echo agents, served by the server's own router.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use authz_core::{ChannelVisibility, Surface};
use commands::MemoryAudit;
use serde_json::{Value, json};
use store::{NewRun, RunRecord, Store, Timestamp, TokenHash};

const CONFIG: &str = r#"
[restrict]
agents = ["coding"]
repos = ["acme/secret"]

[agents]
default = "echo"
[agents.echo]
[agents.staller]
behaviour = "stall"
[agents.coding]

# deliberate change (d): runs:read and no channels; its token channel is http:ops.
[grants."http:reader"]
actions = ["runs:read"]

# one machine channel.
[grants."http:opsbot"]
actions = ["runs:read", "runs:write", "agent:run:echo", "agent:run:staller"]
channels = ["http:ops"]

# the fleet.
[grants."http:fleet"]
actions = ["runs:read", "help:read", "friction:write"]
channels = "all"

# may start echo; its runs go to http:<subject>.
[grants."http:ci"]
actions = ["agent:run:echo"]

# repo:exec alone runs the coding agent in a repo (not the restricted one).
[grants."http:builder"]
actions = ["repo:exec", "runs:read"]

# repo:exec and the restricted repo.
[grants."http:secret-builder"]
actions = ["repo:exec"]
repos = ["acme/secret"]
"#;

const TOKENS: [(&str, &str, Option<&str>); 7] = [
    ("reader-token-0123456789", "reader", Some("http:ops")),
    ("nobody-token-0123456789", "nobody", Some("http:ops")),
    ("opsbot-token-0123456789", "opsbot", Some("http:ops")),
    ("fleet-token-01234567890", "fleet", None),
    ("ci-token-012345678901234", "ci", None),
    ("builder-token-012345678", "builder", Some("http:builds")),
    (
        "secret-builder-token-0123",
        "secret-builder",
        Some("http:builds"),
    ),
];

struct Server {
    base: String,
    store: Arc<dyn Store>,
    audit: Arc<MemoryAudit>,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
    workspace: tempfile::TempDir,
}

/// The token map as the operator writes it: half the keys hashed, half plaintext (both forms
/// resolve), with fields other than subject and channel that must be ignored.
fn token_map() -> String {
    let mut map = serde_json::Map::new();
    for (i, (token, subject, channel)) in TOKENS.iter().enumerate() {
        let key = if i % 2 == 0 {
            token.to_string()
        } else {
            format!("sha256:{}", TokenHash::of(token).to_hex())
        };
        let mut entry = json!({"subject": subject, "grants": "all", "actions": "all"});
        if let Some(c) = channel {
            entry["channel"] = json!(c);
        }
        map.insert(key, entry);
    }
    Value::Object(map).to_string()
}

async fn start(tokens: Option<String>, max_body: usize) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let text = format!(
        "{CONFIG}\n[store]\nurl = \"sqlite://{}\"\n[server]\npublic_url = \"https://sb.example.com\"\ndata_dir = {:?}\n[ingress]\nmax_body_bytes = {max_body}\n",
        dir.path().join("sb.db").display(),
        workspace.path().display().to_string(),
    );
    let config = server::config::parse(server::Source::File("ingress.toml".into()), &text).unwrap();
    let secrets = server::Secrets::from_lookup(&config, |k| {
        (k == "SWITCHBOARD_INGRESS_TOKENS")
            .then(|| tokens.clone())
            .flatten()
    })
    .unwrap();
    let audit = Arc::new(MemoryAudit::default());
    let overrides = server::Overrides {
        audit: audit.clone(),
        ..server::Overrides::default()
    };
    let replica = store::ReplicaId::parse("ingress-test").unwrap();
    let app = server::App::build_with(config, secrets, replica, overrides)
        .await
        .unwrap();
    let store = app.store.clone();
    let router = server::router(&app, tokio_util::sync::CancellationToken::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _app = app;
        axum::serve(listener, router).await.unwrap();
    });
    Server {
        base: format!("http://{addr}"),
        store,
        audit,
        client: reqwest::Client::new(),
        _dir: dir,
        workspace,
    }
}

struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

impl Server {
    async fn post(
        &self,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let mut req = self
            .client
            .post(format!("{}{path}", self.base))
            .body(body.to_owned());
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        Answer {
            status: resp.status().as_u16(),
            content_type: resp
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default(),
            body: resp.text().await.unwrap(),
        }
    }

    /// A body of the given content type, replies as text.
    async fn post_typed(&self, token: &str, content_type: &str, body: &str) -> Answer {
        self.post(
            "/ingress",
            Some(token),
            &[("content-type", content_type)],
            body,
        )
        .await
    }

    /// A command or request as text, replies as JSON.
    async fn say(&self, token: &str, text: &str) -> Answer {
        self.post(
            "/ingress",
            Some(token),
            &[
                ("content-type", "text/plain"),
                ("accept", "application/json"),
            ],
            text,
        )
        .await
    }

    async fn listed(&self, token: &str) -> Vec<String> {
        let a = self.say(token, "runs list --status all --limit 100").await;
        assert_eq!(a.status, 200, "{}", a.body);
        a.json()["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn seed(&self, channel: &str, user: &str, vis: ChannelVisibility) -> RunRecord {
        self.store
            .create_run(NewRun::fixture(
                channel.parse().unwrap(),
                user.parse().unwrap(),
                vis,
                Timestamp::now(),
            ))
            .await
            .unwrap()
    }
}

impl Server {
    /// Repos configured with a local directory each, as `repo add --path` would.
    async fn add_repos(&self, repos: &[&str]) {
        for repo in repos {
            let local = self.workspace.path().join(repo.replace('/', "-"));
            std::fs::create_dir_all(&local).unwrap();
            // A git repository with one commit: a run starts from its HEAD.
            agents::testing::init_repository(&local).unwrap();
            store::repos::set(
                self.store.as_ref(),
                &repo.parse().unwrap(),
                &store::repos::RepoSource::Path(local.display().to_string()),
                &authz_core::ActorId::cli_local(),
                Timestamp::now(),
            )
            .await
            .unwrap();
        }
    }
}

fn token(subject: &str) -> &'static str {
    TOKENS.iter().find(|t| t.1 == subject).unwrap().0
}

#[tokio::test]
async fn without_a_token_map_the_route_is_503_and_says_so() {
    let s = start(None, 1024).await;
    let a = s
        .post("/ingress", Some("anything-at-all-123"), &[], "help")
        .await;
    assert_eq!(a.status, 503);
    assert!(a.body.contains("no token map is configured"), "{}", a.body);
}

#[tokio::test]
async fn bearer_body_and_content_type_faults_have_their_statuses() {
    let s = start(Some(token_map()), 1024).await;
    for t in [None, Some("not-a-known-token-123")] {
        let a = s
            .post("/ingress", t, &[("content-type", "text/plain")], "help")
            .await;
        assert_eq!(
            (a.status, a.body.as_str()),
            (401, ""),
            "no detail for {t:?}"
        );
    }
    let basic = s
        .post("/ingress", None, &[("authorization", "Basic abc")], "help")
        .await;
    assert_eq!(basic.status, 401);
    let ci = token("ci");
    let big = "x".repeat(2048);
    assert_eq!(s.post_typed(ci, "text/plain", &big).await.status, 413);
    let xml = s.post_typed(ci, "application/xml", "<help/>").await;
    assert_eq!(xml.status, 415);
    assert!(
        xml.body
            .contains("text/plain, as a form body (curl -d), or as application/json"),
        "{}",
        xml.body
    );
    let bad = s.post_typed(ci, "application/json", "{\"text\": ").await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.body
            .contains("not valid JSON (line 1 column 9): it ends too early"),
        "{}",
        bad.body
    );
    let no_text = s
        .post_typed(ci, "application/json", "{\"txt\": \"help\"}")
        .await;
    assert_eq!(no_text.status, 400);
    assert!(no_text.body.contains("needs a \"text\" field"));
    // JSON in, text out; text in, JSON out.
    let help = s
        .post_typed(
            token("fleet"),
            "application/json; charset=utf-8",
            "{\"text\": \"help\"}",
        )
        .await;
    assert_eq!(help.status, 200);
    assert!(help.content_type.starts_with("text/plain"));
    assert!(help.body.contains("runs list"), "{}", help.body);
    let help = s.say(token("fleet"), "help").await;
    assert_eq!(help.content_type, "application/json");
    help.json();
    let unknown = s.say(token("fleet"), "runs frobnicate").await;
    assert_eq!(unknown.status, 400);
}

/// A token's channel is where its runs are recorded, never a grant; reading runs needs the
/// channels axis (or is_self).
#[tokio::test]
async fn tokens_see_exactly_what_their_grants_allow() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let public = s
        .seed("slack:C1", "slack:U1", ChannelVisibility::Public)
        .await;
    let public2 = s
        .seed("slack:C2", "slack:U2", ChannelVisibility::Public)
        .await;
    let private = s
        .seed("slack:G1", "slack:U1", ChannelVisibility::Private)
        .await;
    let dm = s.seed("slack:D1", "slack:U1", ChannelVisibility::Dm).await;
    let ops = s
        .seed("http:ops", "http:someone", ChannelVisibility::Machine)
        .await;
    let ops2 = s
        .seed("http:ops", "http:other", ChannelVisibility::Machine)
        .await;
    let ci = s
        .seed("http:ci", "http:ci", ChannelVisibility::Machine)
        .await;
    let sched = s
        .seed(
            "schedule:nightly",
            "schedule:nightly",
            ChannelVisibility::Machine,
        )
        .await;
    let all = [&public, &public2, &private, &dm, &ops, &ops2, &ci, &sched];
    let ids = |runs: &[&RunRecord]| -> BTreeSet<String> {
        runs.iter().map(|r| r.id.to_string()).collect()
    };
    let set = |v: Vec<String>| -> BTreeSet<String> { v.into_iter().collect() };

    // runs:read, no channels, token channel http:ops: the public runs only.
    let reader = token("reader");
    assert_eq!(set(s.listed(reader).await), ids(&[&public, &public2]));
    let missing = s.say(reader, "runs get 01JZZZZZZZZZZZZZZZZZZZZZZZ").await;
    assert_eq!(missing.status, 404);
    for run in [&private, &dm, &ops, &ops2, &ci, &sched] {
        let a = s.say(reader, &format!("runs get {}", run.id)).await;
        assert_eq!(
            (a.status, &a.body),
            (404, &missing.body),
            "reader must not see {}",
            run.channel_id
        );
    }
    assert_eq!(
        s.say(reader, &format!("runs get {}", public.id))
            .await
            .status,
        200
    );

    // No grants entry at all: runs list is refused, every runs get is the missing-id 404.
    let nobody = token("nobody");
    let refused = s.say(nobody, "runs list --status all").await;
    assert_eq!(refused.status, 403);
    let refused_text = s.post_typed(nobody, "text/plain", "runs list").await;
    assert!(refused_text.body.starts_with("🚫"), "{}", refused_text.body);
    for run in all {
        let a = s.say(nobody, &format!("runs get {}", run.id)).await;
        assert_eq!(
            (a.status, &a.body),
            (404, &missing.body),
            "byte-identical to a missing id"
        );
        let t = s
            .post(
                "/ingress",
                Some(nobody),
                &[],
                &format!("runs get {}", run.id),
            )
            .await;
        let missing_text = s
            .post(
                "/ingress",
                Some(nobody),
                &[],
                "runs get 01JZZZZZZZZZZZZZZZZZZZZZZZ",
            )
            .await;
        assert_eq!((t.status, &t.body), (404, &missing_text.body));
    }

    // One machine channel: that channel and the public runs, nothing else.
    assert_eq!(
        set(s.listed(token("opsbot")).await),
        ids(&[&public, &public2, &ops, &ops2])
    );
    assert_eq!(
        s.say(token("opsbot"), &format!("runs get {}", ci.id))
            .await
            .status,
        404
    );

    // channels = "all": the fleet.
    assert_eq!(set(s.listed(token("fleet")).await), ids(&all));

    // Denials left audit lines, never a run id.
    let lines = s.audit.lines();
    assert!(
        lines
            .iter()
            .any(|l| l.actor == "http:nobody" && l.action == "runs:read")
    );
    for l in &lines {
        for run in all {
            assert!(!l.to_string().contains(run.id.as_str()));
        }
    }
}

#[tokio::test]
async fn text_that_is_not_a_command_starts_a_run_in_the_tokens_channel() {
    let s = start(Some(token_map()), 64 * 1024).await;
    // No token channel: recorded in http:<subject>, machine; its own run is visible by is_self.
    let started = s.say(token("ci"), "summarise the deploy").await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.json()["run_id"].as_str().unwrap().to_owned();
    let run = s
        .store
        .get_run(&id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.channel_id.as_str(), "http:ci");
    assert_eq!(run.channel_visibility, ChannelVisibility::Machine);
    assert_eq!(run.user_id.as_str(), "http:ci");
    assert_eq!(run.surface, Surface::Http);
    // ?wait answers with the run's answer.
    let waited = s
        .post(
            "/ingress?wait=10",
            Some(token("ci")),
            &[("content-type", "text/plain")],
            "what is this?",
        )
        .await;
    assert_eq!(waited.status, 200, "{}", waited.body);
    assert!(
        waited.body.contains("request: what is this?"),
        "{}",
        waited.body
    );
    // The fleet sees it; the ops bot (http:ops only) does not; the reader neither.
    assert!(s.listed(token("fleet")).await.contains(&id));
    assert!(!s.listed(token("opsbot")).await.contains(&id));
    assert!(!s.listed(token("reader")).await.contains(&id));
    // A token channel: http:ops; the ops bot sees the runs it starts there.
    let ops = s.say(token("opsbot"), "@echo hello ops").await;
    assert_eq!(ops.status, 202, "{}", ops.body);
    let ops_id = ops.json()["run_id"].as_str().unwrap().to_owned();
    let ops_run = s
        .store
        .get_run(&ops_id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ops_run.channel_id.as_str(), "http:ops");
    assert!(s.listed(token("opsbot")).await.contains(&ops_id));
    // An agent the token may not run: 🚫 and an audit line, nothing recorded.
    let before = s.listed(token("fleet")).await.len();
    let denied = s
        .post("/ingress", Some(token("reader")), &[], "do something")
        .await;
    assert_eq!(denied.status, 403);
    assert_eq!(
        denied.body,
        "🚫 You don't have permission to run the `echo` agent.\n"
    );
    assert!(
        s.audit
            .lines()
            .iter()
            .any(|l| l.action == "agent:run:echo" && l.actor == "http:reader")
    );
    assert_eq!(s.listed(token("fleet")).await.len(), before);
}

#[tokio::test]
async fn runs_stop_over_the_ingress_stops_a_live_run() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let bot = token("opsbot");
    let started = s.say(bot, "@staller wait for me").await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.json()["run_id"].as_str().unwrap().to_owned();
    // The reader may not stop it (not_found, as if missing).
    assert_eq!(
        s.say(token("reader"), &format!("runs stop {id}"))
            .await
            .status,
        404
    );
    let stop = s.say(bot, &format!("runs stop {id}")).await;
    assert_eq!(stop.status, 200, "{}", stop.body);
    let mut status = String::new();
    for _ in 0..100 {
        let got = s
            .say(token("fleet"), &format!("runs get {id}"))
            .await
            .json();
        status = got["status"].as_str().unwrap_or_default().to_owned();
        if status == "stopped" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, "stopped");
    let again = s.say(bot, &format!("runs stop {id}")).await;
    assert_eq!(again.status, 409, "{}", again.body);
}

#[tokio::test]
async fn repo_exec_alone_runs_the_coding_agent_in_the_repo() {
    let s = start(Some(token_map()), 64 * 1024).await;
    s.add_repos(&["acme/web", "acme/secret"]).await;
    let a = s.say(token("builder"), "repo test acme/web").await;
    assert_eq!(a.status, 200, "{}", a.body);
    let id = a.json()["run_id"].as_str().unwrap().to_owned();
    let run = s
        .store
        .get_run(&id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.agent, "coding");
    assert_eq!(run.repo.as_ref().map(|r| r.as_str()), Some("acme/web"));
    assert_eq!(run.channel_id.as_str(), "http:builds");
    // The requester is told where to watch, as for any run it starts.
    let link = a.json()["link"].as_str().unwrap_or_default().to_owned();
    assert!(
        link.starts_with(&format!("https://sb.example.com/runs/{id}?token=sbm_")),
        "{}",
        a.body
    );
    // Without repo:exec (nor agent:run:coding): refused before anything starts.
    assert_eq!(s.say(token("ci"), "repo test acme/web").await.status, 403);
}

/// Fault 5: `repo test|build` of a restricted repo is refused to a token whose repos axis does
/// not name it, though `repo:exec` admitted the command: 🚫, one audit line for `repo:use`,
/// nothing recorded. A token that owns the repo runs it.
#[tokio::test]
async fn a_restricted_repo_is_refused_to_a_token_that_does_not_own_it() {
    let s = start(Some(token_map()), 64 * 1024).await;
    s.add_repos(&["acme/web", "acme/secret"]).await;
    for verb in ["test", "build"] {
        let refused = s
            .post_typed(
                token("builder"),
                "text/plain",
                &format!("repo {verb} acme/secret"),
            )
            .await;
        assert_eq!(
            (refused.status, refused.body.as_str()),
            (
                403,
                format!("🚫 You don't have permission to use `repo {verb}`.\n").as_str()
            )
        );
    }
    let lines = s.audit.lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for l in &lines {
        assert_eq!(
            l.to_string(),
            "[authz] deny actor=http:builder action=repo:use resource=repo reason=not-owner surface=http"
        );
    }
    assert!(
        s.listed(token("fleet")).await.is_empty(),
        "nothing was recorded"
    );
    let allowed = s
        .say(token("secret-builder"), "repo test acme/secret")
        .await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    assert_eq!(s.listed(token("fleet")).await.len(), 1);
}

/// A request names its repo in its text (`in <owner/name>: …`), or the channel's
/// `repo.default` names it; a repo the token may not use reads exactly as one that is not
/// configured, and its refusal is audited.
#[tokio::test]
async fn a_request_names_its_repo_in_its_text_or_by_its_channels_default() {
    let s = start(Some(token_map()), 64 * 1024).await;
    s.add_repos(&["acme/web", "acme/secret"]).await;
    let run_of = |body: &str| {
        let reply: serde_json::Value = serde_json::from_str(body).unwrap();
        reply["run_id"]
            .as_str()
            .unwrap()
            .parse::<authz_core::RunId>()
            .unwrap()
    };
    let started = s
        .say(token("opsbot"), "in acme/web: fix the flaky test")
        .await;
    assert_eq!(started.status, 202, "{}", started.body);
    let run = s
        .store
        .get_run(&run_of(&started.body))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.repo.unwrap().as_str(), "acme/web");
    assert_eq!(run.request, "fix the flaky test");
    let secret = s.say(token("opsbot"), "in acme/secret: read it").await;
    let ghost = s.say(token("opsbot"), "in acme/ghost: read it").await;
    assert_eq!(secret.status, ghost.status);
    assert_eq!(secret.body.replace("secret", "ghost"), ghost.body);
    assert!(
        ghost.body.contains("repo acme/ghost is not configured"),
        "{}",
        ghost.body
    );
    assert!(
        s.audit
            .lines()
            .iter()
            .any(|l| l.to_string().contains("action=repo:use")
                && l.to_string().contains("actor=http:opsbot")),
        "{:?}",
        s.audit.lines()
    );
    // The channel's default repo, set by the local operator.
    store::ConfigStore::set_config(
        s.store.as_ref(),
        store::ConfigValue {
            tier: authz_core::ConfigTier::Channel("http:ops".parse().unwrap()),
            key: "repo.default".into(),
            value: "acme/web".into(),
            updated_by: authz_core::ActorId::cli_local(),
            updated_at: Timestamp::now(),
        },
    )
    .await
    .unwrap();
    let defaulted = s.say(token("opsbot"), "hello").await;
    assert_eq!(defaulted.status, 202, "{}", defaulted.body);
    let run = s
        .store
        .get_run(&run_of(&defaulted.body))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.repo.unwrap().as_str(), "acme/web");
}

/// Fault 1: `curl -d` sends a form content type with the text as written; the README's
/// examples use it. A body that is one encoded `text` field (an HTML form, `curl
/// --data-urlencode text=…`) is decoded.
#[tokio::test]
async fn a_form_body_is_the_command_text_as_curl_d_sends_it() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let form = "application/x-www-form-urlencoded";
    let started = s.post_typed(token("opsbot"), form, "hello").await;
    assert_eq!(started.status, 202, "{}", started.body);
    assert!(started.body.starts_with("started run "), "{}", started.body);
    let listed = s
        .post_typed(token("opsbot"), form, "runs list --status all")
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(listed.body.starts_with("ID "), "{}", listed.body);
    assert!(listed.body.contains("http:ops"), "{}", listed.body);
    let as_json = |body: &str| {
        let s = &s;
        let body = body.to_owned();
        async move {
            s.post(
                "/ingress",
                Some(token("opsbot")),
                &[("content-type", form), ("accept", "application/json")],
                &body,
            )
            .await
        }
    };
    let plain = as_json("runs list --status all").await;
    let encoded = as_json("text=runs+list+--status+all").await;
    assert_eq!(
        (plain.status, encoded.status),
        (200, 200),
        "{}",
        encoded.body
    );
    assert_eq!(
        plain.json()["runs"][0]["id"],
        encoded.json()["runs"][0]["id"]
    );
}

/// Fault 2, on the ingress: text whose first word is a command group gets the registry's
/// reply, never an agent run.
#[tokio::test]
async fn mistyped_command_text_over_the_ingress_gets_the_registrys_reply() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let fleet = token("fleet");
    let proposed = s
        .post_typed(fleet, "text/plain", "friction propose don't retry")
        .await;
    assert_eq!(proposed.status, 200, "{}", proposed.body);
    for (text, status, want) in [
        (
            "friction propose \"don't retry",
            400,
            "the command text has an unclosed quote",
        ),
        (
            "runs list \u{7}",
            400,
            "command text contains control characters",
        ),
        ("runs lst", 400, "unknown command `runs`"),
    ] {
        let a = s.post_typed(fleet, "text/plain", text).await;
        assert_eq!(a.status, status, "{text:?}: {}", a.body);
        assert!(a.body.starts_with(want), "{text:?}: {}", a.body);
    }
    assert!(s.listed(fleet).await.is_empty(), "no agent run was started");
}

/// Fault 3, on the ingress: a caller with no grants learns no agent's name.
#[tokio::test]
async fn an_unknown_agent_names_no_agent_to_a_token_with_no_grants() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let a = s
        .post_typed(token("nobody"), "text/plain", "@nosuch hi")
        .await;
    assert_eq!(
        (a.status, a.body.as_str()),
        (400, "there is no agent `nosuch` you can run\n")
    );
    let ci = s.post_typed(token("ci"), "text/plain", "@nosuch hi").await;
    assert_eq!(ci.body, "there is no agent `nosuch`; you can run echo\n");
}

/// Fault 7: a denied point read is the missing id's reply byte for byte — status, content
/// type and body — on every route (text and JSON replies) and every point read.
#[tokio::test]
async fn a_denied_point_read_is_byte_identical_to_a_missing_id_on_every_route() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let private = s
        .seed("slack:G1", "slack:U1", ChannelVisibility::Private)
        .await;
    let missing = "01JZZZZZZZZZZZZZZZZZZZZZZZ";
    for accept in ["text/plain", "application/json", "*/*"] {
        for verb in ["get", "events", "friction", "stop"] {
            for who in ["reader", "nobody", "opsbot"] {
                let ask = |id: String| {
                    let s = &s;
                    async move {
                        s.post(
                            "/ingress",
                            Some(token(who)),
                            &[("content-type", "text/plain"), ("accept", accept)],
                            &format!("runs {verb} {id}"),
                        )
                        .await
                    }
                };
                let denied = ask(private.id.to_string()).await;
                let absent = ask(missing.to_owned()).await;
                assert_eq!(denied.status, 404, "{who} {verb} {accept}: {}", denied.body);
                assert_eq!(
                    (denied.status, &denied.content_type, &denied.body),
                    (absent.status, &absent.content_type, &absent.body),
                    "{who} runs {verb}, Accept {accept}"
                );
            }
        }
    }
}
