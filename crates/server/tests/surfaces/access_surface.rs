//! The Access surface over real HTTP on loopback: the app from the one composition root
//! (`server::App::build_with`) on SQLite, real RS256 tokens signed with RSA keys generated
//! here, and the key set served on loopback by this test.

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
use store::{Finish, NewRun, RunRecord, RunStatus, Store, Timestamp, TokenHash};
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
    base: String,
    client: reqwest::Client,
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
        base: format!("http://{addr}"),
        client: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
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

#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: u16,
    content_type: String,
    content_length: Option<String>,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

async fn answer(resp: reqwest::Response) -> Answer {
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (content_type, content_length) = (
        header("content-type").unwrap_or_default(),
        header("content-length"),
    );
    Answer {
        status: resp.status().as_u16(),
        content_type,
        content_length,
        body: resp.text().await.unwrap(),
    }
}

impl Harness {
    async fn get(&self, path: &str, token: Option<&str>) -> Answer {
        let mut req = self.client.get(format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.header("cf-access-jwt-assertion", t);
        }
        answer(req.send().await.unwrap()).await
    }

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
            req = req.header("cf-access-jwt-assertion", t);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        answer(req.send().await.unwrap()).await
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
            Timestamp::now(),
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
            at: Timestamp::now(),
        };
        self.store.finish_run(&run.id, done).await.unwrap()
    }

    /// A streaming GET (a feed) as the holder of `token`.
    async fn open(&self, path: &str, token: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.base))
            .header("cf-access-jwt-assertion", token)
            .send()
            .await
            .unwrap()
    }

    /// `POST /ingress` as the ops bot, its JSON reply.
    async fn ingress(&self, path: &str, body: &str) -> Value {
        let reply = self
            .client
            .post(format!("{}{path}", self.base))
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
        let actor = resolve_actor(ActorId::parse(user).unwrap(), &self.services.table).with_origin(
            Origin {
                channel_id: ChannelId::parse(channel).unwrap(),
                thread_key: None,
            },
        );
        let handled = commands::start_agent_run(
            &Caller::new(actor, Surface::Slack),
            text,
            None,
            &self.services,
        )
        .await;
        let run = handled.run.unwrap_or_else(|| panic!("{:?}", handled.reply));
        (run.id().clone(), run.link(&self.base))
    }

    /// Starts a staller run as `user` in `channel` through the dispatcher (so it is live).
    async fn live_run(&self, user: &str, channel: &str) -> RunId {
        let actor = resolve_actor(ActorId::parse(user).unwrap(), &self.services.table).with_origin(
            Origin {
                channel_id: ChannelId::parse(channel).unwrap(),
                thread_key: None,
            },
        );
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

// ---------------------------------------------------------------- identity

/// Every way a token can be wrong is the same 401; the good forms pass.
#[tokio::test]
async fn tokens_are_verified_and_every_refusal_looks_alike() {
    let h = start(Options::default()).await;
    let good = |sub: &str| claims(ISSUER, AUDIENCE, sub);
    let with = |mut c: Value, k: &str, v: Value| {
        c[k] = v;
        c
    };
    let hs256 = {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(key().kid.clone());
        jsonwebtoken::encode(
            &header,
            &good("mallory"),
            &EncodingKey::from_secret(&key().public_der).unwrap(),
        )
        .unwrap()
    };
    let none = {
        use base64::Engine;
        let b = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.",
            b(json!({"alg": "none", "kid": key().kid})),
            b(good("mallory"))
        )
    };
    let unknown_kid = {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some("not-a-key".into());
        jsonwebtoken::encode(&header, &good("mallory"), &key().encoding).unwrap()
    };
    let refused: Vec<(&str, String)> = vec![
        (
            "expired",
            key().sign(&with(good("a"), "exp", json!(now() - 3600))),
        ),
        (
            "not yet valid",
            key().sign(&with(good("a"), "nbf", json!(now() + 3600))),
        ),
        (
            "wrong audience",
            key().sign(&with(good("a"), "aud", json!(["someone-else"]))),
        ),
        (
            "wrong issuer",
            key().sign(&with(good("a"), "iss", json!("https://evil.test"))),
        ),
        ("alg none", none),
        ("HS256 with the public key as secret", hs256),
        ("unknown kid", unknown_kid),
        (
            "signed by a key not in the set",
            other_key().sign(&good("a")),
        ),
        ("a tampered payload", {
            let t = token_for("alice");
            let mut parts: Vec<String> = t.split('.').map(str::to_owned).collect();
            let forged = token_for("fleet");
            parts[1] = forged.split('.').nth(1).unwrap().to_owned();
            parts.join(".")
        }),
        ("malformed header", "not.a.jwt".to_owned()),
        ("garbage", "garbage".to_owned()),
        (
            "no subject",
            key().sign(&json!({"iss": ISSUER, "aud": AUDIENCE, "exp": now() + 60})),
        ),
        (
            "a session posing as a service token",
            token_for("svc:deploy"),
        ),
        (
            "no exp",
            key().sign(&json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "a"})),
        ),
    ];
    let baseline = h.get("/api/runs.list", None).await;
    assert_eq!(baseline.status, 401);
    for (case, token) in &refused {
        let a = h.get("/api/runs.list", Some(token)).await;
        assert_eq!(a, baseline, "{case}");
    }
    // Good tokens: the header, the cookie alone, an `aud` string, a service token.
    let a = h.get("/api/runs.list", Some(&token_for("alice"))).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let cookie = h
        .client
        .get(format!("{}/api/runs.list", h.base))
        .header(
            "cookie",
            format!("theme=dark; CF_Authorization={}", token_for("alice")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(cookie.status(), 200);
    let aud_string = key().sign(&with(good("alice"), "aud", json!(AUDIENCE)));
    assert_eq!(h.get("/api/runs.list", Some(&aud_string)).await.status, 200);
    let service = key().sign(&json!({"iss": ISSUER, "aud": [AUDIENCE], "sub": "", "common_name": "deploy.access", "exp": now() + 60}));
    // A service token holds nothing until granted: its runs.list is a 🚫, which proves who it is.
    let s = h.get("/api/runs.list", Some(&service)).await;
    assert_eq!(s.status, 403, "{}", s.body);
    let line = h.audit.lines().into_iter().last().unwrap();
    assert_eq!(line.actor.as_str(), "access:svc:deploy.access");
}

/// One identity per request: two `CF_Authorization` cookies (a sibling subdomain can set one
/// beside the viewer's), in one header or two, or the assertion header twice, are refused
/// like a bad token, whichever comes first and even when both are good.
#[tokio::test]
async fn two_tokens_in_one_request_are_refused() {
    let h = start(Options::default()).await;
    let (alice, mallory) = (token_for("alice"), token_for("mallory"));
    let send = |headers: Vec<(&'static str, String)>| {
        let mut req = h.client.get(format!("{}/api/runs.list", h.base));
        for (k, v) in headers {
            req = req.header(k, v);
        }
        async move { answer(req.send().await.unwrap()).await }
    };
    let baseline = h.get("/api/runs.list", None).await;
    assert_eq!(baseline.status, 401);
    let cases: Vec<(&str, Vec<(&'static str, String)>)> = vec![
        (
            "two cookies in one header",
            vec![(
                "cookie",
                format!("CF_Authorization={mallory}; theme=dark; CF_Authorization={alice}"),
            )],
        ),
        (
            "two cookie headers",
            vec![
                ("cookie", format!("CF_Authorization={alice}")),
                ("cookie", format!("CF_Authorization={mallory}")),
            ],
        ),
        (
            "the same good cookie twice",
            vec![(
                "cookie",
                format!("CF_Authorization={alice}; CF_Authorization={alice}"),
            )],
        ),
        (
            "the header twice",
            vec![
                ("cf-access-jwt-assertion", alice.clone()),
                ("cf-access-jwt-assertion", mallory.clone()),
            ],
        ),
    ];
    for (case, headers) in cases {
        assert_eq!(send(headers).await, baseline, "{case}");
    }
    // The header stands over a cookie (a sibling site can set a cookie, not a header): a
    // service token's header with a session's cookie is the service token (a 🚫 for it).
    let service = key().sign(&json!({"iss": ISSUER, "aud": [AUDIENCE], "sub": "", "common_name": "deploy.access", "exp": now() + 60}));
    let one = send(vec![
        ("cf-access-jwt-assertion", service),
        ("cookie", format!("CF_Authorization={alice}")),
    ])
    .await;
    assert_eq!(one.status, 403, "{}", one.body);
    let line = h.audit.lines().into_iter().last().unwrap();
    assert_eq!(line.actor.as_str(), "access:svc:deploy.access");
}

/// An unknown `kid` fetches the key set once; a second unknown `kid` within the minute does not.
#[tokio::test]
async fn unknown_kids_fetch_at_most_once_a_minute() {
    let h = start(Options::default()).await;
    let with_kid = |kid: &str| {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, &claims(ISSUER, AUDIENCE, "a"), &key().encoding).unwrap()
    };
    assert_eq!(h.jwks.hits(), 0);
    assert_eq!(
        h.get("/api/runs.list", Some(&with_kid("nope-1")))
            .await
            .status,
        401
    );
    assert_eq!(h.jwks.hits(), 1, "the first unknown kid fetches");
    for i in 0..20 {
        let a = h
            .get("/api/runs.list", Some(&with_kid(&format!("flood-{i}"))))
            .await;
        assert_eq!(a.status, 401);
    }
    assert_eq!(
        h.jwks.hits(),
        1,
        "a flood of unknown kids costs the issuer nothing more"
    );
    assert_eq!(
        h.get("/api/runs.list", Some(&token_for("alice")))
            .await
            .status,
        200
    );
    assert_eq!(h.jwks.hits(), 1);
}

/// The key set's endpoint down: within the TTL the keys already held still verify (a token
/// never seen before included), a token of a `kid` they lack is refused; past the TTL every
/// token is refused (a key set that cannot be fetched again is not kept).
#[tokio::test]
async fn a_key_set_endpoint_down_serves_the_held_keys_then_fails_closed() {
    let h = start(Options {
        ttl_seconds: 2,
        ..Options::default()
    })
    .await;
    let fresh = |sub: &str| {
        let mut c = claims(ISSUER, AUDIENCE, sub);
        c["jti"] = serde_json::json!(format!("{sub}-{}", h.jwks.hits()));
        key().sign(&c)
    };
    assert_eq!(
        h.get("/api/runs.list", Some(&fresh("alice"))).await.status,
        200
    );
    h.jwks.set_down(true);
    assert_eq!(
        h.get("/api/runs.list", Some(&fresh("bob"))).await.status,
        200
    );
    let foreign = other_key().sign(&claims(ISSUER, AUDIENCE, "carol"));
    assert_eq!(h.get("/api/runs.list", Some(&foreign)).await.status, 401);
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    assert_eq!(
        h.get("/api/runs.list", Some(&fresh("dave"))).await.status,
        401
    );
}

/// A token verified before a rotation is refused once the refreshed set lacks its key.
#[tokio::test]
async fn a_key_removed_from_the_set_stops_verifying_after_the_ttl() {
    let h = start(Options {
        ttl_seconds: 1,
        ..Options::default()
    })
    .await;
    let token = token_for("alice");
    assert_eq!(h.get("/api/runs.list", Some(&token)).await.status, 200);
    assert_eq!(h.get("/api/runs.list", Some(&token)).await.status, 200);
    assert_eq!(h.jwks.hits(), 1, "a verified token is remembered");
    h.jwks.replace(&[other_key()]);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(h.get("/api/runs.list", Some(&token)).await.status, 401);
    let new = other_key().sign(&claims(ISSUER, AUDIENCE, "alice"));
    assert_eq!(h.get("/api/runs.list", Some(&new)).await.status, 200);
}

// ---------------------------------------------------------------- /api

/// Deliberate change (b) over `/api`: a private run is the same 404 as an unknown id for an
/// operator without all channels, on every point read; lists hold only what it may read.
#[tokio::test]
async fn api_reads_are_the_registrys_with_byte_identical_not_found() {
    let h = start(Options::default()).await;
    let public = h.stored_run(Place::Public, Some("ok")).await;
    let private = h.stored_run(Place::Private, Some("secret")).await;
    let own = h.stored_run(Place::AlicesOwn, Some("mine")).await;
    let machine = h.stored_run(Place::Machine, Some("ops")).await;
    let alice = token_for("alice");
    let fleet = token_for("fleet");
    let unknown = "01JZZZZZZZZZZZZZZZZZZZZZZZ";
    for command in ["runs.get", "runs.events", "runs.friction"] {
        let denied = h
            .get(&format!("/api/{command}?id={}", private.id), Some(&alice))
            .await;
        let missing = h
            .get(&format!("/api/{command}?id={unknown}"), Some(&alice))
            .await;
        assert_eq!(denied.status, 404, "{command}");
        assert_eq!(
            denied, missing,
            "{command}: a denied read is an unknown id, byte for byte"
        );
        let fleet_reads = h
            .get(&format!("/api/{command}?id={}", private.id), Some(&fleet))
            .await;
        assert_eq!(fleet_reads.status, 200, "{command}");
    }
    // is-self: the run's own user reads it.
    let mine = h
        .get(&format!("/api/runs.get?id={}", own.id), Some(&alice))
        .await;
    assert_eq!(
        (mine.status, mine.json()["answer"].as_str()),
        (200, Some("mine"))
    );
    let ids = |a: &Answer| -> Vec<String> {
        a.json()["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let listed = ids(&h.get("/api/runs.list?status=all", Some(&alice)).await);
    assert!(listed.contains(&public.id.to_string()) && listed.contains(&own.id.to_string()));
    assert!(!listed.contains(&private.id.to_string()) && !listed.contains(&machine.id.to_string()));
    let all = ids(&h.get("/api/runs.list?status=all", Some(&fleet)).await);
    assert_eq!(all.len(), 4);
    // The same JSON as the CLI's --json: the registry's data.
    let caller = Caller::new(
        resolve_actor(ActorId::parse("access:fleet").unwrap(), &h.services.table),
        Surface::Access,
    );
    let direct = h
        .registry
        .invoke(
            &caller,
            commands::RawInput::Json {
                id: "runs.get".into(),
                args: json!({"id": public.id.as_str()})
                    .as_object()
                    .cloned()
                    .unwrap(),
            },
            &h.services,
        )
        .await;
    assert_eq!(
        h.get(&format!("/api/runs.get?id={}", public.id), Some(&fleet))
            .await
            .json(),
        direct.data
    );
}

/// The bad-input table of `/api`.
#[tokio::test]
async fn api_bad_input_gets_a_clear_status_and_changes_nothing() {
    let h = start(Options::default()).await;
    let alice = token_for("alice");
    let same_origin = [
        ("sec-fetch-site", "same-origin"),
        ("content-type", "application/json"),
    ];
    let rows: Vec<(&str, &str, Option<&str>, u16, &str)> = vec![
        ("GET", "/api/nope.nothing", None, 404, "unknown"),
        (
            "GET",
            "/api/config.set?key=greeting&value=hi&org=true",
            None,
            405,
            "POST /api/config.set",
        ),
        ("GET", "/api/runs.list?status=sideways", None, 400, "usage"),
        ("GET", "/api/runs.list?bogus=1", None, 400, "bogus"),
        ("GET", "/api/runs.list?limit=1&limit=2", None, 400, "twice"),
        ("GET", "/api/runs.get", None, 400, "usage"),
        ("POST", "/api/runs.list", Some("[1,2]"), 400, "JSON object"),
        (
            "POST",
            "/api/runs.list",
            Some("{\"status\":"),
            400,
            "not valid JSON",
        ),
        (
            "POST",
            "/api/runs.list",
            Some("{\"limit\": true}"),
            400,
            "number",
        ),
        (
            "POST",
            "/api/config.set",
            Some("{\"key\":\"greeting\",\"value\":\"hi\",\"org\":true}"),
            403,
            "unauthorized",
        ),
        ("POST", "/api/nope.nothing", Some("{}"), 404, "unknown"),
    ];
    for (method, path, body, status, says) in rows {
        let a = match method {
            "GET" => h.get(path, Some(&alice)).await,
            _ => {
                h.post(path, Some(&alice), &same_origin, body.unwrap())
                    .await
            }
        };
        assert_eq!(a.status, status, "{method} {path}: {}", a.body);
        assert_eq!(a.content_type, "application/json", "{method} {path}");
        assert!(
            a.body.to_lowercase().contains(&says.to_lowercase()),
            "{method} {path}: {}",
            a.body
        );
    }
    // A cross-site post is refused before anything is read; a script's post (no Origin) works.
    let evil = h
        .post(
            "/api/runs.list",
            Some(&alice),
            &[
                ("origin", "https://evil.example"),
                ("content-type", "application/json"),
            ],
            "{}",
        )
        .await;
    assert_eq!(evil.status, 403);
    let script = h
        .post("/api/runs.list", Some(&alice), &[], "{\"status\": \"all\"}")
        .await;
    assert_eq!(script.status, 200, "{}", script.body);
    // The fleet operator may not set org config either (config:write is not granted); a
    // service token with nothing is 🚫 on reads too.
    let oversized = h
        .post("/api/runs.list", Some(&alice), &[], &"x".repeat(70 * 1024))
        .await;
    assert_eq!(oversized.status, 413);
}

// ---------------------------------------------------------------- /runs pages

/// Deliberate change (b) over the pages, byte-identical 404s, escaping, and the headers.
/// Every `/api` answer, the refusals and the framework's own among them, carries the pages'
/// protective headers: nosniff, no referrer, a policy that runs and frames nothing.
#[tokio::test]
async fn api_answers_carry_the_pages_protective_headers() {
    let h = start(Options::default()).await;
    let alice = token_for("alice");
    let url = format!("{}/api/runs.list", h.base);
    let requests = [
        h.client.get(&url).header("cf-access-jwt-assertion", &alice),
        h.client.get(&url),
        h.client
            .post(&url)
            .header("cf-access-jwt-assertion", &alice)
            .header("content-type", "application/json")
            .body("{not json"),
        h.client
            .delete(&url)
            .header("cf-access-jwt-assertion", &alice),
    ];
    let mut statuses = Vec::new();
    for req in requests {
        let r = req.send().await.unwrap();
        statuses.push(r.status().as_u16());
        let header = |n: &str| {
            r.headers()
                .get(n)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        };
        assert_eq!(
            header("x-content-type-options"),
            "nosniff",
            "{}",
            r.status()
        );
        assert_eq!(header("referrer-policy"), "no-referrer", "{}", r.status());
        let csp = header("content-security-policy");
        assert!(
            csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
            "{}: {csp}",
            r.status()
        );
    }
    assert_eq!(statuses[0], 200);
    assert!(statuses[1..].iter().all(|s| *s >= 400), "{statuses:?}");
}

#[tokio::test]
async fn pages_show_only_what_the_viewer_may_read_and_escape_agent_text() {
    let h = start(Options::default()).await;
    let xss = h
        .stored_run(Place::Public, Some("<script>alert('pwned')</script>"))
        .await;
    let private = h.stored_run(Place::Private, Some("secret")).await;
    let alice = token_for("alice");
    let page = h.get(&format!("/runs/{}", xss.id), Some(&alice)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body
            .contains("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;")
    );
    assert!(!page.body.contains("<script>alert"));
    let r = h
        .client
        .get(format!("{}/runs/{}", h.base, xss.id))
        .header("cf-access-jwt-assertion", &alice)
        .send()
        .await
        .unwrap();
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'none'"),
        "{csp}"
    );
    assert_eq!(r.headers()["referrer-policy"], "no-referrer");
    // The private run: the 404 page of an unknown id, status, headers and bytes.
    for suffix in ["", "/events", "/friction"] {
        let denied = h
            .get(&format!("/runs/{}{suffix}", private.id), Some(&alice))
            .await;
        let missing = h
            .get(
                &format!("/runs/01JZZZZZZZZZZZZZZZZZZZZZZZ{suffix}"),
                Some(&alice),
            )
            .await;
        let malformed = h
            .get(&format!("/runs/nonsense{suffix}"), Some(&alice))
            .await;
        assert_eq!(denied.status, 404, "{suffix}");
        assert_eq!(denied, missing, "{suffix}");
        assert_eq!(denied, malformed, "{suffix}");
    }
    let history = h.get("/runs?all=1", Some(&alice)).await;
    assert!(history.body.contains(xss.id.as_str()));
    assert!(!history.body.contains(private.id.as_str()));
    let fleet = h
        .get(&format!("/runs/{}", private.id), Some(&token_for("fleet")))
        .await;
    assert_eq!(fleet.status, 200);
    // A viewer with no runs:read: an empty index and 404s.
    let svc = key().sign(&json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "", "common_name": "nobody", "exp": now() + 60}));
    let empty = h.get("/runs?all=1", Some(&svc)).await;
    assert_eq!(empty.status, 200);
    assert!(!empty.body.contains(xss.id.as_str()) && empty.body.contains("No runs."));
    assert_eq!(
        h.get(&format!("/runs/{}", xss.id), Some(&svc)).await,
        h.get("/runs/01JZZZZZZZZZZZZZZZZZZZZZZZ", Some(&alice))
            .await
    );
    // Unauthenticated pages are the one 401.
    assert_eq!(h.get("/runs", None).await.status, 401);
}

/// History pages follow the store's cursor.
#[tokio::test]
async fn history_pages_link_to_older_runs() {
    let h = start(Options::default()).await;
    let mut ids = Vec::new();
    for _ in 0..55 {
        ids.push(h.stored_run(Place::Public, Some("ok")).await.id);
    }
    let alice = token_for("alice");
    let first = h.get("/runs?all=1", Some(&alice)).await;
    let href = first
        .body
        .split("id=\"older\" href=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .replace("&amp;", "&");
    let second = h.get(&href, Some(&alice)).await;
    let shown = |body: &str| ids.iter().filter(|id| body.contains(id.as_str())).count();
    assert_eq!((shown(&first.body), shown(&second.body)), (50, 5));
    assert!(!second.body.contains("id=\"older\""));
}

/// Stop from the page: same-origin only, 303 back to the run, 409 once finished.
#[tokio::test]
async fn stop_is_a_same_origin_post_and_409_for_a_finished_run() {
    let h = start(Options::default()).await;
    let fleet = token_for("fleet");
    let id = h.live_run("slack:U1", "slack:C1").await;
    let page = h.get(&format!("/runs/{id}"), Some(&fleet)).await;
    assert!(page.body.contains("id=\"stop\""), "{}", page.body);
    let path = format!("/runs/{id}/stop");
    let evil = h
        .post(
            &path,
            Some(&fleet),
            &[("origin", "https://evil.example"), ("host", "x")],
            "",
        )
        .await;
    assert_eq!(evil.status, 403);
    let stopped = h
        .post(
            &path,
            Some(&fleet),
            &[("sec-fetch-site", "same-origin")],
            "",
        )
        .await;
    assert_eq!(stopped.status, 303, "{}", stopped.body);
    wait_status(&h, &id, RunStatus::Stopped).await;
    let again = h
        .post(
            &path,
            Some(&fleet),
            &[("sec-fetch-site", "same-origin")],
            "",
        )
        .await;
    assert_eq!(again.status, 409, "{}", again.body);
    // alice may not read the private run: its stop is the unknown-id 404, and it runs on.
    let private = h.live_run("slack:U2", "slack:G1").await;
    let refused = h
        .post(
            &format!("/runs/{private}/stop"),
            Some(&token_for("alice")),
            &[],
            "",
        )
        .await;
    assert_eq!(
        refused,
        h.get(
            "/runs/01JZZZZZZZZZZZZZZZZZZZZZZZ",
            Some(&token_for("alice"))
        )
        .await
    );
    let still = h.store.get_run(&private).await.unwrap().unwrap();
    assert!(still.status.is_live() && still.stop_requested_at.is_none());
}

async fn wait_status(h: &Harness, id: &RunId, want: RunStatus) {
    for _ in 0..100 {
        if h.store.get_run(id).await.unwrap().unwrap().status == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {id} never became {want}");
}

/// The capability link: returned only to the starter, opens its own run while live, then a
/// page saying it ended; any other run's id is the unknown-id 404.
#[tokio::test]
async fn capability_links_open_their_own_live_run_only() {
    let h = start(Options::default()).await;
    let started = h.ingress("/ingress", "@staller wait for me").await;
    let link = started["link"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    let id = started["run_id"].as_str().unwrap().to_owned();
    assert!(
        link.starts_with(&format!("{}/runs/{id}?token=", h.base)),
        "{link}"
    );
    let token = link.split("token=").nth(1).unwrap().to_owned();
    let run = h
        .store
        .get_run(&RunId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(run.capability_token.as_ref().unwrap().matches(&token));
    let path = link.trim_start_matches(&h.base).to_owned();
    let page = h.get(&path, None).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("id=\"stop\"")
            && page.body.contains(&format!("/runs/{id}/stream?token="))
    );
    let r = h.client.get(&link).send().await.unwrap();
    assert_eq!(r.headers()["referrer-policy"], "no-referrer");
    // `?wait=` that ends with the run still live keeps the link for its starter.
    let waited = h.ingress("/ingress?wait=1", "@staller wait again").await;
    assert_eq!(waited["status"], "running", "{waited}");
    let waited_id = waited["run_id"].as_str().unwrap();
    assert!(
        waited["link"]
            .as_str()
            .is_some_and(|l| l.contains(waited_id)),
        "{waited}"
    );
    let other = h.stored_run_opened_by(Place::Public, "other-token").await;
    let unknown = h
        .get(
            "/runs/01JZZZZZZZZZZZZZZZZZZZZZZZ",
            Some(&token_for("alice")),
        )
        .await;
    assert_eq!(
        h.get(&format!("/runs/{}?token={token}", other.id), None)
            .await,
        unknown
    );
    assert_eq!(
        h.get(&format!("/runs/{id}?token=wrong"), None).await,
        unknown
    );
    assert_eq!(
        h.get(&format!("/runs/{id}/events?token={token}"), None)
            .await
            .status,
        200
    );
    // Stop through the link, then it opens nothing but the ended page.
    let stop = h
        .post(
            &format!("/runs/{id}/stop?token={token}"),
            None,
            &[("sec-fetch-site", "same-origin")],
            "",
        )
        .await;
    assert_eq!(stop.status, 303);
    wait_status(&h, &RunId::parse(&id).unwrap(), RunStatus::Stopped).await;
    let ended = h.get(&path, None).await;
    assert_eq!(ended.status, 410);
    assert!(ended.body.contains("This run has ended"));
    assert_eq!(
        h.get(&format!("/runs/{id}/events?token={token}"), None)
            .await
            .status,
        410
    );
    // A stop or an answer through the link of an ended run: 410 too, as docs/access.md says.
    for action in ["stop", "approvals/0000000000000000"] {
        let late = h
            .post(
                &format!("/runs/{id}/{action}?token={token}"),
                None,
                &[
                    ("sec-fetch-site", "same-origin"),
                    ("content-type", "application/x-www-form-urlencoded"),
                ],
                "answer=approve",
            )
            .await;
        assert_eq!(late.status, 410, "{action}: {}", late.body);
    }
}

/// Schedules are listed; a firing's run is linked only for a viewer who may read it.
#[tokio::test]
async fn scheduled_links_a_firing_only_for_a_reader() {
    let h = start(Options::default()).await;
    let cli = Caller::new(
        resolve_actor(ActorId::parse("cli:local").unwrap(), &h.services.table),
        Surface::Cli,
    );
    let fired = h
        .registry
        .handle(&cli, "schedule fire self-improvement", &h.services)
        .await;
    assert_eq!(
        fired.reply.kind,
        commands::ReplyKind::Ok,
        "{:?}",
        fired.reply
    );
    let run = fired.reply.data["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", fired.reply.data))
        .to_owned();
    let fleet = h.get("/runs/scheduled", Some(&token_for("fleet"))).await;
    assert!(fleet.body.contains("self-improvement"));
    assert!(
        fleet.body.contains(&format!("href=\"/runs/{run}\"")),
        "{}",
        fleet.body
    );
    let alice = h.get("/runs/scheduled", Some(&token_for("alice"))).await;
    assert!(alice.body.contains("self-improvement"));
    assert!(!alice.body.contains(&run), "{}", alice.body);
}

// ---------------------------------------------------------------- the feed

/// The feed carries only runs the viewer may read: a private run never becomes a byte.
#[tokio::test]
async fn the_feed_carries_only_readable_runs_with_keep_alives() {
    let h = start(Options {
        keep_alive: Duration::from_millis(200),
        ..Options::default()
    })
    .await;
    let alice = token_for("alice");
    let mut feed = h.open("/runs/stream", &alice).await;
    assert_eq!(feed.status(), 200);
    assert_eq!(feed.headers()["content-type"], "text/event-stream");
    let opening = read_until(&mut feed, "event: sync", Duration::from_secs(5)).await;
    assert!(opening.contains("event: sync"), "{opening}");
    let private = h.live_run("slack:U2", "slack:G1").await;
    let public = h.live_run("slack:U1", "slack:C1").await;
    let mut seen = read_until(&mut feed, public.as_str(), Duration::from_secs(5)).await;
    seen.push_str(&read_until(&mut feed, "\n:", Duration::from_secs(2)).await);
    assert!(
        seen.contains("event: upsert") && seen.contains(public.as_str()),
        "{seen}"
    );
    assert!(
        !seen.contains(private.as_str()),
        "a private run reached a viewer who may not read it"
    );
    // A line starting with `:` is an SSE comment: the keep-alive.
    assert!(
        seen.lines().any(|l| l.starts_with(':')),
        "no keep-alive: {seen}"
    );
    // The fleet's feed sees both; its stream ends on shutdown.
    let mut fleet = h.open("/runs?stream=1", &token_for("fleet")).await;
    let sync = read_until(&mut fleet, "\n\n", Duration::from_secs(5)).await;
    assert!(
        sync.contains(private.as_str()) && sync.contains(public.as_str()),
        "{sync}"
    );
    h.shutdown.cancel();
    assert!(
        ends_within(&mut fleet, Duration::from_secs(5)).await,
        "the feed did not end on shutdown"
    );
}

/// A feed closes at the viewer's `exp`.
#[tokio::test]
async fn the_feed_closes_at_the_tokens_expiry() {
    let h = start(Options::default()).await;
    let mut c = claims(ISSUER, AUDIENCE, "alice");
    c["exp"] = json!(now() + 2);
    let short = key().sign(&c);
    let mut feed = h.open("/runs/stream", &short).await;
    assert_eq!(feed.status(), 200);
    assert!(
        ends_within(&mut feed, Duration::from_secs(8)).await,
        "the feed outlived its token"
    );
}

/// A run's feed: its events and its end, for a reader; the unknown-id 404 for anyone else.
#[tokio::test]
async fn a_runs_feed_is_for_its_readers_and_ends_with_the_run() {
    let h = start(Options::default()).await;
    let private = h.live_run("slack:U2", "slack:G1").await;
    let denied = h
        .get(
            &format!("/runs/{private}/stream"),
            Some(&token_for("alice")),
        )
        .await;
    let missing = h
        .get(
            "/runs/01JZZZZZZZZZZZZZZZZZZZZZZZ/stream",
            Some(&token_for("alice")),
        )
        .await;
    assert_eq!(denied, missing);
    let mut feed = h
        .open(&format!("/runs/{private}/stream"), &token_for("fleet"))
        .await;
    assert_eq!(feed.status(), 200);
    let cli = Caller::new(
        resolve_actor(ActorId::parse("cli:local").unwrap(), &h.services.table),
        Surface::Cli,
    );
    let stop = h
        .registry
        .handle(&cli, &format!("runs stop {private}"), &h.services)
        .await;
    assert_eq!(stop.reply.kind, commands::ReplyKind::Ok);
    let seen = read_until(&mut feed, "event: finished", Duration::from_secs(5)).await;
    assert!(seen.contains("event: finished"), "{seen}");
    assert!(
        ends_within(&mut feed, Duration::from_secs(5)).await,
        "a run's feed outlived the run"
    );
}

/// A token whose `exp` is 2^64 − 1 (valid for ever) is served: its `/api` answer and its
/// feed, with no overflow adding the leeway or the feed's deadline (the feed closed with no
/// answer before).
#[tokio::test]
async fn a_token_that_never_expires_is_served_without_an_overflow() {
    let h = start(Options::default()).await;
    let mut c = claims(ISSUER, AUDIENCE, "alice");
    c["exp"] = json!(u64::MAX);
    let forever = key().sign(&c);
    assert_eq!(h.get("/api/runs.list", Some(&forever)).await.status, 200);
    let mut feed = h.open("/runs/stream", &forever).await;
    assert_eq!(feed.status(), 200);
    let opening = read_until(&mut feed, "event: sync", Duration::from_secs(5)).await;
    assert!(opening.contains("event: sync"), "{opening}");
    let run = h.live_run("slack:U1", "slack:C1").await;
    let mut run_feed = h.open(&format!("/runs/{run}/stream"), &forever).await;
    assert_eq!(run_feed.status(), 200);
    h.shutdown.cancel();
    assert!(ends_within(&mut run_feed, Duration::from_secs(5)).await);
}

/// A run's feed (a capability link's, or a reader's) ends when the store says the run ended,
/// even when the notification of its end never arrives (lost between replicas): the feed
/// reads its run's status at each recheck.
#[tokio::test]
async fn a_runs_feed_ends_with_the_run_even_when_its_notification_is_lost() {
    let h = start(Options {
        recheck: Duration::from_millis(200),
        ..Options::default()
    })
    .await;
    let token = "sbp_feed-recheck-0123456789";
    let run = h.stored_run_opened_by(Place::Public, token).await;
    let mut feed = h
        .client
        .get(format!("{}/runs/{}/stream?token={token}", h.base, run.id))
        .send()
        .await
        .unwrap();
    assert_eq!(feed.status(), 200);
    // Ended in the store alone: no live update is sent.
    let done = store::Finish {
        status: RunStatus::Completed,
        answer: Some("done".into()),
        error: None,
        at: Timestamp::now(),
    };
    h.store.finish_run(&run.id, done).await.unwrap();
    let seen = read_until(&mut feed, "event: finished", Duration::from_secs(5)).await;
    assert!(
        seen.contains("event: finished") && seen.contains("completed"),
        "{seen}"
    );
    assert!(
        ends_within(&mut feed, Duration::from_secs(5)).await,
        "the feed outlived its run"
    );
}

// ---------------------------------------------------------------- the log

/// Refusals log a reason token, never the token itself.
#[test]
fn refusal_log_lines_carry_a_reason_and_never_the_token() {
    let captured = test_support::log::CapturedLog::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = captured.install();
    let expired = {
        let mut c = claims(ISSUER, AUDIENCE, "alice");
        c["exp"] = json!(now() - 3600);
        key().sign(&c)
    };
    runtime.block_on(async {
        let h = start(Options::default()).await;
        assert_eq!(h.get("/api/runs.list", Some(&expired)).await.status, 401);
    });
    let log = captured.text();
    assert!(
        log.contains("[access]") && log.contains("reason=expired"),
        "{log}"
    );
    let signature = expired.rsplit('.').next().unwrap();
    assert!(
        !log.contains(signature) && !log.contains(&expired[..40]),
        "the token reached the log"
    );
}

/// The writer's model: it asks to write `<b>hi</b>` (9 bytes) in its workspace.
async fn writing_model() -> String {
    agents::testing::writing_model("<b>hi</b>").await.unwrap()
}

/// The run page at `path` once the writer's ask reached it (its form shown).
async fn asking_page(h: &Harness, path: &str) -> Answer {
    let mut page = h.get(path, None).await;
    for _ in 0..200 {
        if page.body.contains("Waiting for your answer") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        page = h.get(path, None).await;
    }
    assert!(
        page.body
            .contains("The agent asks to <code>fs.write</code>"),
        "{}",
        page.body
    );
    page
}

/// The form's action on a run page: `/runs/<id>/approvals/<approval>?token=…`.
fn approval_action(page: &str) -> Option<String> {
    let start = page.find("/approvals/")?;
    let from = page[..start].rfind("action=\"")? + "action=\"".len();
    let end = from + page[from..].find('"')?;
    Some(page[from..end].replace("&amp;", "&"))
}

/// A tool call waiting for a person under `serve` is answered on the run's page: only by its
/// principal (here, through the capability link of the person who asked), same-origin, once;
/// the agent reads the answer and the run finishes with it.
#[tokio::test]
async fn the_run_page_answers_a_tool_call_waiting_for_its_person() {
    for (answer, want) in [
        ("approve", "tool said: wrote 9 bytes to "),
        (
            "deny",
            "tool said: refused: fs.write needs a person's approval: refused",
        ),
    ] {
        let h = start(Options {
            model_url: writing_model().await,
            ..Options::default()
        })
        .await;
        let (run_id, link) = h
            .person_asks("slack:UWRITER", "slack:C1", "@writer take notes")
            .await;
        let id = run_id.to_string();
        let path = link.trim_start_matches(&h.base).to_owned();
        let page = asking_page(&h, &path).await;
        assert!(
            page.body.contains("&lt;b&gt;hi&lt;/b&gt;"),
            "the model's text is escaped"
        );
        let action = approval_action(&page.body).unwrap();
        // Another signed-in person who may read the run sees no form, and cannot answer.
        let fleet = token_for("fleet");
        let theirs = h.get(&format!("/runs/{id}"), Some(&fleet)).await;
        assert_eq!(theirs.status, 200);
        assert!(
            !theirs.body.contains("Waiting for your answer"),
            "{}",
            theirs.body
        );
        let by_token = action.split('?').next().unwrap();
        let same_origin = [("sec-fetch-site", "same-origin")];
        let refused = h
            .post(by_token, Some(&fleet), &same_origin, "answer=approve")
            .await;
        assert_eq!(refused.status, 403, "{}", refused.body);
        // Cross-site and malformed answers change nothing.
        let cross = h
            .post(
                &action,
                None,
                &[("sec-fetch-site", "cross-site")],
                "answer=approve",
            )
            .await;
        assert_eq!(cross.status, 403);
        let malformed = h.post(&action, None, &same_origin, "answer=maybe").await;
        assert_eq!(malformed.status, 400);
        // The principal's answer (through the capability link) counts, once.
        let body = format!("answer={answer}");
        let answered = h.post(&action, None, &same_origin, &body).await;
        assert_eq!(answered.status, 303, "{}", answered.body);
        let again = h.post(&action, None, &same_origin, &body).await;
        assert_eq!(again.status, 409);
        wait_status(&h, &run_id, RunStatus::Completed).await;
        let run = h.store.get_run(&run_id).await.unwrap().unwrap();
        assert!(
            run.answer.as_deref().unwrap_or_default().starts_with(want),
            "{:?}",
            run.answer
        );
        h.shutdown.cancel();
    }
}

/// A run a machine asked for (an ingress token) has nobody to ask: its agent's ask is
/// refused at once, not after the approval timeout, and the run goes on with the refusal.
#[tokio::test]
async fn a_machines_run_has_nobody_to_ask_and_its_link_answers_nothing() {
    let h = start(Options {
        model_url: writing_model().await,
        ..Options::default()
    })
    .await;
    let begun = std::time::Instant::now();
    let waited = h.ingress("/ingress?wait=30", "@writer take notes").await;
    assert_eq!(waited["status"], "completed", "{waited}");
    assert!(
        waited["answer"]
            .as_str()
            .unwrap()
            .starts_with("tool said: refused: fs.write needs a person's approval: nobody to ask"),
        "{waited}"
    );
    assert!(begun.elapsed() < Duration::from_secs(20), "the ask waited");

    // A link made for a machine opens the run and stops it, and answers no ask, even one a
    // person's run has waiting; the same link made for a person answers it.
    for (token, counts) in [
        ("sbm_machine-link-0123456789", false),
        ("sbp_person-link-0123456789", true),
    ] {
        let run = h.stored_run_opened_by(Place::Public, token).await;
        let ask = store::ApprovalRecord {
            id: format!("ask-{}", &token[..3]),
            run_id: run.id.clone(),
            principal: Some(ActorId::parse("slack:U1").unwrap()),
            action: "fs.write".into(),
            tool: "write_file".into(),
            arguments: "{}".into(),
            state: store::ApprovalState::Open,
            asked_at: Timestamp::now(),
        };
        h.store.open_approval(&ask).await.unwrap();
        let page = h
            .get(&format!("/runs/{}?token={token}", run.id), None)
            .await;
        assert_eq!(page.status, 200, "{}", page.body);
        assert_eq!(
            page.body.contains("Waiting for your answer"),
            counts,
            "{}",
            page.body
        );
        let answered = h
            .post(
                &format!("/runs/{}/approvals/{}?token={token}", run.id, ask.id),
                None,
                &[("sec-fetch-site", "same-origin")],
                "answer=approve",
            )
            .await;
        let want = if counts { 303 } else { 403 };
        assert_eq!(answered.status, want, "{token}: {}", answered.body);
        let state = h.store.approval_state(&ask.id).await.unwrap();
        let want = if counts {
            store::ApprovalState::Approved
        } else {
            store::ApprovalState::Open
        };
        assert_eq!(state, Some(want), "{token}");
    }
}

/// A refusal's log line names no run: a machine's link answering, and a viewer who is not the
/// run's principal answering, are each one warning with a reason token and no run id.
#[tokio::test]
async fn a_refused_answers_log_line_names_no_run() {
    #[derive(Clone, Default)]
    struct Buf(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    // A current-thread runtime: the server's tasks log on this thread.
    let _guard = tracing::subscriber::set_default(subscriber);
    let h = start(Options::default()).await;
    let mut ids = Vec::new();
    for (token, answerer) in [
        ("sbm_machine-link-0123456789", None),
        ("sbp_person-link-0123456789", Some(token_for("bob"))),
    ] {
        let run = h.stored_run_opened_by(Place::Public, token).await;
        let ask = store::ApprovalRecord {
            id: format!("ask-{}", &token[..3]),
            run_id: run.id.clone(),
            principal: Some(ActorId::parse("access:alice").unwrap()),
            action: "fs.write".into(),
            tool: "write_file".into(),
            arguments: "{}".into(),
            state: store::ApprovalState::Open,
            asked_at: Timestamp::now(),
        };
        h.store.open_approval(&ask).await.unwrap();
        let path = match &answerer {
            None => format!("/runs/{}/approvals/{}?token={token}", run.id, ask.id),
            Some(_) => format!("/runs/{}/approvals/{}", run.id, ask.id),
        };
        let answered = h
            .post(
                &path,
                answerer.as_deref(),
                &[("sec-fetch-site", "same-origin")],
                "answer=approve",
            )
            .await;
        assert_eq!(answered.status, 403, "{path}: {}", answered.body);
        ids.push(run.id.to_string());
    }
    let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    for reason in ["machine-link", "not-the-principal"] {
        let line = out
            .lines()
            .find(|l| l.contains(reason))
            .unwrap_or_else(|| panic!("no {reason} line in {out}"));
        for id in &ids {
            assert!(!line.contains(id.as_str()), "{line}");
        }
    }
}

/// Two replicas on one Postgres database: the run asks on the replica it is live on, and its
/// page, served by the other replica, shows the ask and takes the answer, which reaches the
/// agent. (Behind a load balancer, either replica may get the page and the answer.)
#[tokio::test]
async fn a_tool_call_is_answered_through_another_replica_on_postgres() {
    let store = test_support::postgres::store_section("approvals");
    let model_url = writing_model().await;
    let running = start(Options {
        model_url: model_url.clone(),
        store: Some(store.clone()),
        replica: "replica-a",
        ..Options::default()
    })
    .await;
    let answering = start(Options {
        model_url,
        store: Some(store),
        replica: "replica-b",
        ..Options::default()
    })
    .await;
    let (run_id, link) = running
        .person_asks("slack:UWRITER", "slack:C1", "@writer take notes")
        .await;
    let id = run_id.to_string();
    // The same capability link, on the other replica.
    let path = link.trim_start_matches(&running.base).to_owned();
    let page = asking_page(&answering, &path).await;
    let action = approval_action(&page.body).unwrap();
    let answered = answering
        .post(
            &action,
            None,
            &[("sec-fetch-site", "same-origin")],
            "answer=approve",
        )
        .await;
    assert_eq!(answered.status, 303, "{}", answered.body);
    assert_eq!(run_id.to_string(), id);
    wait_status(&running, &run_id, RunStatus::Completed).await;
    let run = running.store.get_run(&run_id).await.unwrap().unwrap();
    assert!(
        run.answer
            .as_deref()
            .unwrap_or_default()
            .starts_with("tool said: wrote 9 bytes to "),
        "{:?}",
        run.answer
    );
    running.shutdown.cancel();
    answering.shutdown.cancel();
}
