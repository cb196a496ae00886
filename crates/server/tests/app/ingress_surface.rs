//! `POST /ingress` over real HTTP on loopback: the app built by the one composition root
//! (`server::App::build_with`) from a config with a SQLite store, the real registry and a real
//! dispatcher running echo agents, served by the server's own router.

mod reads;
mod repos;
mod requests;
mod runs;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use authz_core::{ChannelVisibility, Surface};
use commands::MemoryAudit;
use serde_json::{Value, json};
use store::{NewRun, RunRecord, Store, TokenHash};
use test_support::http::{Answer, Loopback};

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
    store: Arc<dyn Store>,
    audit: Arc<MemoryAudit>,
    http: Loopback,
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
        store,
        audit,
        http: Loopback::new(addr),
        _dir: dir,
        workspace,
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
        let bearer = token.map(|t| format!("Bearer {t}"));
        let mut all: Vec<(&str, &str)> = bearer
            .iter()
            .map(|b| ("authorization", b.as_str()))
            .collect();
        all.extend_from_slice(headers);
        self.http.post(path, &all, body.to_owned()).await
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
                store::wall_clock(),
            ))
            .await
            .unwrap()
    }
}

fn token(subject: &str) -> &'static str {
    TOKENS.iter().find(|t| t.1 == subject).unwrap().0
}
