//! The Access surface over real HTTP on loopback: the app from the one composition root
//! (`server::App::build_with`) on SQLite, real RS256 tokens signed with RSA keys generated
//! here, and the key set served on loopback by this test.

mod api;
mod approvals;
mod feed;
mod pages;
mod tokens;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use access_api::AccessApi;
use access_api::testing::{JwksServer, SigningKey, claims, ends_within, now, read_until};
use authz_core::{
    ActorId, BoxFuture, ChannelDirectory, ChannelId, ChannelVisibility, Membership, Origin, RunId,
    StaticChannelDirectory, Surface, resolve_actor,
};
use commands::{Caller, MemoryAudit, Registry, Services};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use store::{Finish, NewRun, RunRecord, RunStatus, Store, TokenHash};
use test_support::http::{Answer, Loopback};
use tokio_util::sync::CancellationToken;

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "aud-switchboard";

const GRANTS: &str = r#"
[agents]
default = "echo"
[agents.echo]
[agents.staller]
behaviour = "stall"

# Deliberate change (b): an operator with writes on runs but no channels reads public runs
# and its own; the fleet operator reads everything.
[grants."access:alice"]
actions = ["runs:write"]

[grants."access:fleet"]
actions = ["runs:read", "runs:write"]
channels = "all"

[grants."http:opsbot"]
actions = ["runs:read", "runs:write", "agent:run:echo", "agent:run:staller", "agent:run:writer"]
channels = ["http:ops"]

# A person who asks the writer for notes in a Slack channel.
[grants."slack:UWRITER"]
actions = ["runs:read", "agent:run:writer"]

# The writer (an openai agent; its model is the test's, see Options::model_url) may write in
# its run's workspace once the person it acts for approves (fs.write asks by default).
[[agent_grants]]
id = "writer-notes"
agent = "writer"
tool = "write_file"
paths = ["{workspace}"]
mode = "auto"
"#;

const OPSBOT: &str = "opsbot-token-0123456789";

/// One key for the whole binary (making one takes a moment).
fn key() -> &'static SigningKey {
    static KEY: OnceLock<SigningKey> = OnceLock::new();
    KEY.get_or_init(|| SigningKey::generate("key-1"))
}

fn other_key() -> &'static SigningKey {
    static KEY: OnceLock<SigningKey> = OnceLock::new();
    KEY.get_or_init(|| SigningKey::generate("key-2"))
}

/// `slack:C…` channels are public here; the rest is what the id alone says.
struct PublicSlackChannels;

impl ChannelDirectory for PublicSlackChannels {
    fn info<'a>(&'a self, channel: &'a ChannelId) -> BoxFuture<'a, ChannelVisibility> {
        if channel.as_str().starts_with("slack:C") {
            return Box::pin(std::future::ready(ChannelVisibility::Public));
        }
        StaticChannelDirectory.info(channel)
    }

    fn is_member<'a>(&'a self, a: &'a ActorId, c: &'a ChannelId) -> BoxFuture<'a, Membership> {
        StaticChannelDirectory.is_member(a, c)
    }
}

/// Where a stored run is, and whose.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// A public Slack channel, a Slack user's run.
    Public,
    /// A private Slack channel alice is not in.
    Private,
    /// alice's own run, in her Access channel.
    AlicesOwn,
    /// The ops bot's machine channel.
    Machine,
}

impl Place {
    fn parts(self) -> (&'static str, &'static str, ChannelVisibility) {
        match self {
            Place::Public => ("slack:C1", "slack:U1", ChannelVisibility::Public),
            Place::Private => ("slack:G1", "slack:U2", ChannelVisibility::Private),
            Place::AlicesOwn => ("access:alice", "access:alice", ChannelVisibility::Dm),
            Place::Machine => ("http:ops", "http:opsbot", ChannelVisibility::Machine),
        }
    }
}

struct Harness {
    http: Loopback,
    jwks: JwksServer,
    store: Arc<dyn Store>,
    services: Arc<Services>,
    registry: Arc<Registry>,
    audit: Arc<MemoryAudit>,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

struct Options {
    ttl_seconds: u64,
    keep_alive: Duration,
    recheck: Duration,
    /// The writer agent's model (nothing listens at the default).
    model_url: String,
    /// The `[store]` section; default: a SQLite file of the harness's own.
    store: Option<String>,
    replica: &'static str,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ttl_seconds: 3600,
            keep_alive: Duration::from_secs(15),
            recheck: access_api::RECHECK,
            model_url: "http://127.0.0.1:9/v1".to_owned(),
            store: None,
            replica: "access-test",
        }
    }
}

async fn start(options: Options) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let jwks = JwksServer::start(&[key()]).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let text = format!(
        "{GRANTS}\n[agents.writer]\nbackend = \"openai\"\nbase_url = \"{model}\"\nmodel = \"scripted\"\n{store}\n[server]\ndata_dir = {data:?}\npublic_url = \"http://{addr}\"\n[access]\nissuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\njwks_url = \"{url}\"\njwks_ttl_seconds = {ttl}\n",
        model = options.model_url,
        store = options.store.clone().unwrap_or_else(|| format!(
            "[store]\nurl = \"sqlite://{}\"",
            dir.path().join("sb.db").display()
        )),
        data = dir.path().join("data").display().to_string(),
        url = jwks.url(),
        ttl = options.ttl_seconds,
    );
    let config = server::config::parse(server::Source::File("access.toml".into()), &text).unwrap();
    let tokens = json!({OPSBOT: {"subject": "opsbot", "channel": "http:ops"}}).to_string();
    let secrets = server::Secrets::from_lookup(&config, |k| {
        (k == "SWITCHBOARD_INGRESS_TOKENS").then(|| tokens.clone())
    })
    .unwrap();
    let audit = Arc::new(MemoryAudit::default());
    let overrides = server::Overrides {
        audit: audit.clone(),
        directory: Some(Arc::new(PublicSlackChannels)),
        ..server::Overrides::default()
    };
    let replica = store::ReplicaId::parse(options.replica).unwrap();
    let app = server::App::build_with(config, secrets, replica, overrides)
        .await
        .unwrap();
    let verifier = app.access.verifier().expect("[access] is on").clone();
    let shutdown = CancellationToken::new();
    let access = Arc::new(AccessApi {
        registry: app.registry.clone(),
        services: app.services.clone(),
        verifier: verifier.clone(),
        shutdown: shutdown.clone(),
        keep_alive: options.keep_alive,
        recheck: options.recheck,
        max_body_bytes: 64 * 1024,
    });
    let ingress = Arc::new(http_ingress::Ingress {
        registry: app.registry.clone(),
        services: app.services.clone(),
        max_body_bytes: 64 * 1024,
    });
    let router = access_api::router(access).merge(http_ingress::router(ingress));
    let harness = Harness {
        http: Loopback::new(addr),
        jwks,
        store: app.store.clone(),
        services: app.services.clone(),
        registry: app.registry.clone(),
        audit,
        shutdown: shutdown.clone(),
        _dir: dir,
    };
    tokio::spawn(async move {
        let _app = app;
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
            .unwrap();
    });
    harness
}

fn token_for(sub: &str) -> String {
    key().sign(&claims(ISSUER, AUDIENCE, sub))
}

impl Harness {
    async fn get(&self, path: &str, token: Option<&str>) -> Answer {
        let jwt: Vec<(&str, &str)> = token
            .map(|t| ("cf-access-jwt-assertion", t))
            .into_iter()
            .collect();
        self.http.get(path, &jwt).await
    }

    async fn post(
        &self,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let mut all: Vec<(&str, &str)> = token
            .map(|t| ("cf-access-jwt-assertion", t))
            .into_iter()
            .collect();
        all.extend_from_slice(headers);
        self.http.post(path, &all, body.to_owned()).await
    }

    /// A run stored directly at `place`: finished with `answer`, or queued (live) without.
    async fn stored_run(&self, place: Place, answer: Option<&str>) -> RunRecord {
        self.store_run(place, answer, None).await
    }

    /// A queued run at `place` that the capability token `token` opens.
    async fn stored_run_opened_by(&self, place: Place, token: &str) -> RunRecord {
        self.store_run(place, None, Some(token)).await
    }

    async fn store_run(
        &self,
        place: Place,
        answer: Option<&str>,
        token: Option<&str>,
    ) -> RunRecord {
        let (channel, user, visibility) = place.parts();
        let mut new = NewRun::fixture(
            ChannelId::parse(channel).unwrap(),
            ActorId::parse(user).unwrap(),
            visibility,
            store::wall_clock(),
        );
        new.capability_token = token.map(TokenHash::of);
        let run = self.store.create_run(new).await.unwrap();
        let Some(answer) = answer else {
            return run;
        };
        let done = Finish {
            status: RunStatus::Completed,
            answer: Some(answer.to_owned()),
            error: None,
            at: store::wall_clock(),
        };
        self.store.finish_run(&run.id, done).await.unwrap()
    }

    /// A streaming GET (a feed) as the holder of `token`.
    async fn open(&self, path: &str, token: &str) -> reqwest::Response {
        self.http
            .client
            .get(format!("{}{path}", self.http.base))
            .header("cf-access-jwt-assertion", token)
            .send()
            .await
            .unwrap()
    }

    /// `POST /ingress` as the ops bot, its JSON reply.
    async fn ingress(&self, path: &str, body: &str) -> Value {
        let reply = self
            .http
            .client
            .post(format!("{}{path}", self.http.base))
            .header("authorization", format!("Bearer {OPSBOT}"))
            .header("accept", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        serde_json::from_str(&reply.text().await.unwrap()).unwrap()
    }

    /// A person asks `agent` for `text` in Slack channel `channel` (so its capability link is
    /// a person's): the run's id and its link.
    async fn person_asks(&self, user: &str, channel: &str, text: &str) -> (RunId, String) {
        let actor = resolve_actor(ActorId::parse(user).unwrap(), &self.services.table())
            .with_origin(Origin {
                channel_id: ChannelId::parse(channel).unwrap(),
                thread_key: None,
            });
        let handled = commands::start_agent_run(
            &Caller::new(actor, Surface::Slack),
            text,
            None,
            &self.services,
        )
        .await;
        let run = handled.run.unwrap_or_else(|| panic!("{:?}", handled.reply));
        (run.id().clone(), run.link(&self.http.base))
    }

    /// Starts a staller run as `user` in `channel` through the dispatcher (so it is live).
    async fn live_run(&self, user: &str, channel: &str) -> RunId {
        let actor = resolve_actor(ActorId::parse(user).unwrap(), &self.services.table())
            .with_origin(Origin {
                channel_id: ChannelId::parse(channel).unwrap(),
                thread_key: None,
            });
        let caller = Caller::new(actor, Surface::Slack);
        let handled = commands::start_agent_run(
            &caller,
            "wait for me",
            Some(authz_core::AgentName::parse("staller").unwrap()),
            &self.services,
        )
        .await;
        handled
            .run
            .unwrap_or_else(|| panic!("{:?}", handled.reply))
            .id()
            .clone()
    }
}

async fn wait_status(h: &Harness, id: &RunId, want: RunStatus) {
    for _ in 0..600 {
        if h.store.get_run(id).await.unwrap().unwrap().status == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {id} never became {want}");
}
