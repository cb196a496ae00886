//! The app as `serve` builds it (SQLite store, real registry, real dispatcher), served on
//! loopback by the server's own router, and rmcp's own client pointed at it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use authz_core::{
    ActorId, BoxFuture, ChannelDirectory, ChannelId, ChannelVisibility, Membership, Origin, RunId,
    Surface, resolve_actor,
};
use commands::{Caller, MemoryAudit, Registry, Services};
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use store::{NewRun, RunRecord, Store, TokenHash};

pub const SECRET: &str = "mcp-test-agent-token-secret-0123456789";

pub const CONFIG: &str = r#"
[restrict]
agents = ["coding"]
repos = ["acme/secret"]

[agents]
default = "echo"
[agents.echo]
[agents.coding]
[agents.staller]
behaviour = "stall"
[agents.slow]
delay_ms = 4500
# Keeps its run live and leaves the token and MCP URL the dispatcher handed it.
[agents.holder]
backend = "command"
command = ["/bin/sh", "-c", "printf '%s\n%s' \"$SWITCHBOARD_AGENT_TOKEN\" \"$SWITCHBOARD_MCP_URL\" > \"token-$SWITCHBOARD_RUN_ID\"; exec /bin/sleep 60"]
# It calls back with the real URL on the host's network (no forwarder in a library's test binary).
network = "host"

# deliberate change (d): runs:read and no channels.
[grants."mcp:reader"]
actions = ["runs:read"]

# one machine channel, and may start echo.
[grants."mcp:opsbot"]
actions = ["runs:read", "runs:write", "agent:run:echo", "agent:run:staller", "agent:run:slow", "help:read"]
channels = ["mcp:ops"]

# the fleet.
[grants."mcp:fleet"]
actions = ["runs:read"]
channels = "all"

# a Slack user who may read runs (public ones and their own).
[grants."slack:UALICE"]
actions = ["runs:read"]

# an admin: writes config, repos and MCP servers in person.
[grants."slack:UADMIN"]
actions = ["runs:read", "config:read", "config:write", "mcp:read", "mcp:write", "repo:read", "repo:write"]
"#;

pub const TOKENS: [(&str, &str, Option<&str>); 4] = [
    ("reader-token-0123456789", "reader", None),
    ("opsbot-token-0123456789", "opsbot", Some("mcp:ops")),
    ("fleet-token-01234567890", "fleet", None),
    ("nobody-token-0123456789", "nobody", None),
];

/// `slack:C…` public, `slack:G…` private (unless the test has since made it public), the
/// rest as the static directory says.
#[derive(Default)]
pub struct Directory {
    made_public: std::sync::Mutex<Vec<String>>,
}

impl Directory {
    /// From now on the directory calls `channel` public (a private channel made public).
    pub fn make_public(&self, channel: &str) {
        self.made_public.lock().unwrap().push(channel.to_owned());
    }
}

impl ChannelDirectory for Directory {
    fn info<'a>(&'a self, channel: &'a ChannelId) -> BoxFuture<'a, ChannelVisibility> {
        let public_now = self
            .made_public
            .lock()
            .unwrap()
            .iter()
            .any(|c| c == channel.as_str());
        let v = if public_now || channel.as_str().starts_with("slack:C") {
            ChannelVisibility::Public
        } else if channel.as_str().starts_with("slack:G") {
            ChannelVisibility::Private
        } else {
            authz_core::static_visibility(channel)
        };
        Box::pin(std::future::ready(v))
    }

    fn is_member<'a>(&'a self, _: &'a ActorId, _: &'a ChannelId) -> BoxFuture<'a, Membership> {
        Box::pin(std::future::ready(Membership::Unknown))
    }
}

pub struct Server {
    pub url: String,
    pub store: Arc<dyn Store>,
    pub registry: Arc<Registry>,
    pub services: Arc<Services>,
    pub audit: Arc<MemoryAudit>,
    pub data: PathBuf,
    pub http: reqwest::Client,
    pub directory: Arc<Directory>,
    _dir: tempfile::TempDir,
}

pub fn token_map() -> String {
    let mut map = serde_json::Map::new();
    for (i, (token, subject, channel)) in TOKENS.iter().enumerate() {
        let key = if i % 2 == 0 {
            token.to_string()
        } else {
            format!("sha256:{}", TokenHash::of(token).to_hex())
        };
        let mut entry = json!({"subject": subject});
        if let Some(c) = channel {
            entry["channel"] = json!(c);
        }
        map.insert(key, entry);
    }
    Value::Object(map).to_string()
}

/// Serves the app with `[mcp]` as given (`extra` is appended to the `[mcp]` table).
pub async fn start(tokens: Option<String>, mcp_extra: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let text = format!(
        "{CONFIG}\n[store]\nurl = \"sqlite://{}\"\n[server]\ndata_dir = {:?}\npublic_url = \"http://{addr}\"\n[mcp]\nenabled = true\nagent_url = \"http://{addr}/mcp\"\n{mcp_extra}\n",
        dir.path().join("sb.db").display(),
        data.display().to_string(),
    );
    let config = server::config::parse(server::Source::File("mcp.toml".into()), &text).unwrap();
    let secrets = server::Secrets::from_lookup(&config, |k| match k {
        "SWITCHBOARD_INGRESS_TOKENS" => tokens.clone(),
        "SWITCHBOARD_AGENT_TOKEN_SECRET" => Some(SECRET.to_owned()),
        _ => None,
    })
    .unwrap();
    let audit = Arc::new(MemoryAudit::default());
    let directory = Arc::new(Directory::default());
    let overrides = server::Overrides {
        audit: audit.clone(),
        directory: Some(directory.clone()),
        ..server::Overrides::default()
    };
    let replica = store::ReplicaId::parse("mcp-test").unwrap();
    let app = server::App::build_with(config, secrets, replica, overrides)
        .await
        .unwrap();
    let (store, registry, services) = (
        app.store.clone(),
        app.registry.clone(),
        app.services.clone(),
    );
    let router = server::router(&app, tokio_util::sync::CancellationToken::new());
    tokio::spawn(async move {
        let _app = app;
        axum::serve(listener, router).await.unwrap();
    });
    Server {
        url: format!("http://{addr}/mcp"),
        store,
        registry,
        services,
        audit,
        data,
        http: reqwest::Client::new(),
        directory,
        _dir: dir,
    }
}

pub type Client = RunningService<RoleClient, ()>;

impl Server {
    /// rmcp's client, initialized, with `token` as its bearer.
    pub async fn client(&self, token: &str) -> Client {
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(self.url.as_str()).auth_header(token),
        );
        ().serve(transport).await.unwrap()
    }

    pub async fn seed(&self, channel: &str, user: &str, vis: ChannelVisibility) -> RunRecord {
        self.store
            .create_run(NewRun {
                surface: Surface::Slack,
                ..NewRun::fixture(
                    channel.parse().unwrap(),
                    user.parse().unwrap(),
                    vis,
                    store::wall_clock(),
                )
            })
            .await
            .unwrap()
    }

    /// A Slack user's request in a channel, as the Slack surface would hand it over.
    pub async fn slack_says(&self, user: &str, channel: &str, text: &str) -> commands::Handled {
        let caller = Caller::new(
            resolve_actor(user.parse().unwrap(), &self.services.table()).with_origin(Origin {
                channel_id: channel.parse().unwrap(),
                thread_key: Some("1700000000.000100".into()),
            }),
            Surface::Slack,
        );
        self.registry.handle(&caller, text, &self.services).await
    }

    /// The token and MCP URL the holder agent of run `id` was handed.
    pub async fn holder_env(&self, id: &RunId) -> (String, String) {
        // Written in the run's own workspace.
        let file = self
            .data
            .join("runs")
            .join(id.as_str())
            .join("work")
            .join(format!("token-{id}"));
        for _ in 0..500 {
            if let Ok(text) = std::fs::read_to_string(&file)
                && let Some((token, url)) = text.split_once('\n')
            {
                return (token.to_owned(), url.to_owned());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the holder agent of {id} never wrote its token");
    }

    pub async fn run(&self, id: &str) -> RunRecord {
        self.store
            .get_run(&RunId::parse(id).unwrap())
            .await
            .unwrap()
            .unwrap()
    }

    /// Every run in the store with `status`, newest first (up to 1000).
    pub async fn runs(&self, status: store::StatusFilter) -> Vec<RunRecord> {
        self.store
            .list_runs(&store::ListRuns {
                visible_to: authz_core::Predicate::All,
                status,
                limit: 1000,
                before: None,
            })
            .await
            .unwrap()
            .runs
    }

    pub async fn run_count(&self) -> usize {
        self.runs(store::StatusFilter::All).await.len()
    }

    /// The newest live run, once there is one.
    pub async fn first_live_run(&self) -> RunRecord {
        for _ in 0..500 {
            if let Some(r) = self
                .runs(store::StatusFilter::Live)
                .await
                .into_iter()
                .next()
            {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no run went live");
    }

    /// A raw POST to `/mcp`.
    pub async fn post(&self, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_owned());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }
}

pub fn names(tools: &[Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap()
}

pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn listed_ids(r: &CallToolResult) -> Vec<String> {
    let s = r.structured_content.as_ref().unwrap();
    s["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("no runs in {s}"))
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}
