//! A surface defined here, in a test, and added to the App through `Overrides::surfaces`
//! without editing the server: the config load reads its own section (`[echo_surface]`, with
//! file, line and column on every fault) and its secret (`ECHO_SURFACE_TOKEN`), the channel
//! directory asks it about its namespace, and `serve` starts it, binds its routes, names its
//! requests' spans and prints its summary line as it does the built-in ones; without its
//! secret its routes stay off and its line says what it needs. It reuses the `http`
//! namespace: its caller is a bearer token's, proved through `commands::identity`, and its
//! text goes to `Registry::handle` like every surface's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use std::collections::BTreeSet;

use authz_core::{
    ActorId, BoxFuture, ChannelDirectory, ChannelId, ChannelVisibility, Membership, Namespace,
    Surface,
};
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use commands::{Registry, Services};
use serde::Deserialize;
use server::config::{LoadError, SectionText, SectionValue, SurfaceSection};
use server::surface::{Routes, SurfaceLine, SurfacePlugin};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// `POST /echo-surface`: a bearer token's caller, its text handled by the registry.
#[derive(Default)]
struct EchoSurface {
    /// Set by `start`, cleared when its task sees the server stop.
    running: Arc<AtomicBool>,
    /// Claims `http:`'s channels for its directory, which the build must refuse (their ids
    /// alone say what they are); by default it answers for `slack:`, free while Slack is off.
    claims_http: bool,
}

/// Its secret: without it the surface stays off.
const SECRET_ENV: &str = "ECHO_SURFACE_TOKEN";

/// `[echo_surface]` as the file spells it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EchoSection {
    greeting: toml::Spanned<String>,
}

/// `[echo_surface]`, checked: what its replies start with.
struct EchoConfig {
    greeting: String,
}

impl SurfaceSection for EchoSurface {
    fn key(&self) -> &'static str {
        "echo_surface"
    }

    fn secret_envs(&self) -> &'static [&'static str] {
        &[SECRET_ENV]
    }

    fn read(&self, section: &SectionText<'_>) -> Result<Option<SectionValue>, LoadError> {
        let Some(raw) = section.typed::<EchoSection>()? else {
            return Ok(None);
        };
        if raw.greeting.get_ref().trim().is_empty() {
            return Err(section.fault_at(
                raw.greeting.span().start,
                "must not be empty; write what its replies start with",
            ));
        }
        Ok(Some(Arc::new(EchoConfig {
            greeting: raw.greeting.into_inner(),
        })))
    }
}

/// Its channel directory: every channel it answers for is private (for a Slack `C…` channel
/// the id alone says unknown).
struct EchoDirectory;

impl ChannelDirectory for EchoDirectory {
    fn info<'a>(&'a self, _channel: &'a ChannelId) -> BoxFuture<'a, ChannelVisibility> {
        Box::pin(std::future::ready(ChannelVisibility::Private))
    }

    fn is_member<'a>(&'a self, _: &'a ActorId, _: &'a ChannelId) -> BoxFuture<'a, Membership> {
        Box::pin(std::future::ready(Membership::Unknown))
    }

    fn memberships<'a>(&'a self, _: &'a ActorId) -> BoxFuture<'a, BTreeSet<ChannelId>> {
        Box::pin(std::future::ready(BTreeSet::new()))
    }
}

#[derive(Clone)]
struct Wired {
    registry: Arc<Registry>,
    services: Arc<Services>,
    greeting: String,
}

async fn handle(State(w): State<Wired>, headers: HeaderMap, text: String) -> (u16, String) {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(commands::identity::bearer_token);
    let caller =
        token.and_then(|t| commands::identity::bearer_caller(&w.services, Surface::Http, t));
    let Some(caller) = caller else {
        return (401, "unauthorized".to_owned());
    };
    let handled = w.registry.handle(&caller, &text, &w.services).await;
    (200, format!("{}\n{}", w.greeting, handled.reply.text))
}

impl EchoSurface {
    /// Its section, when the file has one and its secret is set.
    fn configured<'a>(&self, app: &'a server::App) -> Option<&'a EchoConfig> {
        app.secrets.surface_secret(SECRET_ENV)?;
        app.config
            .surface_sections
            .get::<EchoConfig>("echo_surface")
    }
}

impl SurfacePlugin for EchoSurface {
    fn section(&self) -> Option<&dyn SurfaceSection> {
        Some(self)
    }

    fn prepare(
        &self,
        _config: &server::LoadedConfig,
        _secrets: &server::Secrets,
    ) -> Option<(Namespace, Arc<dyn ChannelDirectory>)> {
        let namespace = match self.claims_http {
            true => Namespace::Http,
            false => Namespace::Slack,
        };
        Some((namespace, Arc::new(EchoDirectory)))
    }

    fn summary_line(&self, app: &server::App) -> SurfaceLine {
        let (on, note) = match self.configured(app) {
            Some(c) => (true, format!("a test surface greeting {:?}", c.greeting)),
            None => (false, format!("off: needs [echo_surface] and {SECRET_ENV}")),
        };
        SurfaceLine {
            surface: "/echo-surface",
            on,
            note,
        }
    }

    fn routes(&self, app: &server::App, _shutdown: &CancellationToken) -> Routes {
        let Some(configured) = self.configured(app) else {
            return Routes::Off {
                paths: &["/echo-surface"],
                reason: server::surface::off_reason(&self.summary_line(app)),
            };
        };
        let wired = Wired {
            registry: app.registry.clone(),
            services: app.services.clone(),
            greeting: configured.greeting.clone(),
        };
        let route = post(|s: State<Wired>, h: HeaderMap, t: String| async move {
            let (status, body) = handle(s, h, t).await;
            (axum::http::StatusCode::from_u16(status).unwrap(), body)
        });
        Routes::On(
            Router::new()
                .route("/echo-surface", route)
                .with_state(wired),
        )
    }

    fn span_route(&self, path: &str) -> Option<(&'static str, &'static str)> {
        (path == "/echo-surface").then_some(("echo", "/echo-surface"))
    }

    fn start<'a>(
        &'a self,
        _app: &'a server::App,
        _bound: std::net::SocketAddr,
        stop: CancellationToken,
    ) -> BoxFuture<'a, Vec<JoinHandle<()>>> {
        self.running.store(true, Ordering::SeqCst);
        let running = self.running.clone();
        let task = tokio::spawn(async move {
            stop.cancelled().await;
            running.store(false, Ordering::SeqCst);
        });
        Box::pin(std::future::ready(vec![task]))
    }
}

const CONFIG: &str = r#"
[agents]
default = "echo"
[agents.echo]
[grants."http:reader"]
actions = ["runs:read", "help:read"]
channels = ["http:ops"]
[echo_surface]
greeting = "hello from echo"
"#;

/// The config text with a store and data directory under `dir`.
fn config_text(dir: &std::path::Path) -> String {
    format!(
        "{CONFIG}\n[store]\nurl = \"sqlite://{}\"\n[server]\ndata_dir = {:?}\n",
        dir.join("sb.db").display(),
        dir.join("data").display().to_string(),
    )
}

fn parse_with_echo(text: &str) -> Result<server::LoadedConfig, server::config::ConfigFaults> {
    let echo: Arc<dyn SurfacePlugin> = Arc::new(EchoSurface::default());
    let sections = server::surface::sections(std::slice::from_ref(&echo));
    server::config::parse_with(server::Source::File("plugin.toml".into()), text, &sections)
}

#[tokio::test]
async fn a_surface_added_from_outside_the_server_is_served_summarised_and_traced() {
    let dir = tempfile::tempdir().unwrap();
    let config = parse_with_echo(&config_text(dir.path())).unwrap();
    let tokens = r#"{"reader-token-0123456789": {"subject": "reader", "channel": "http:ops"}}"#;
    let secrets = server::Secrets::from_lookup(&config, |k| match k {
        "SWITCHBOARD_INGRESS_TOKENS" => Some(tokens.to_owned()),
        SECRET_ENV => Some("echo-secret-value".to_owned()),
        _ => None,
    })
    .unwrap();
    assert!(
        secrets
            .values_to_redact()
            .contains(&"echo-secret-value".to_owned()),
        "its secret is redacted from agent text like every other"
    );
    let echo = Arc::new(EchoSurface::default());
    // The process's layers, on this (the test's only) thread, feeding a span log.
    let span_log = server::telemetry::SpanLog::new(100);
    let _spans = tracing::subscriber::set_default(server::telemetry::subscriber(
        &server::config::TelemetryConfig::default(),
        server::telemetry::filter_of("info"),
        test_support::log::CapturedLog::default(),
        None,
        &span_log,
        None,
    ));
    let overrides = server::Overrides {
        surfaces: vec![echo.clone()],
        span_log: Some(span_log.clone()),
        ..server::Overrides::default()
    };
    let replica = store::ReplicaId::parse("plugin-test").unwrap();
    let app = server::App::build_with(config, secrets, replica, overrides)
        .await
        .unwrap();
    let chat = ChannelId::parse("slack:C024").unwrap();
    assert_eq!(
        app.directory.info(&chat).await,
        ChannelVisibility::Private,
        "its directory answers for its namespace"
    );
    let ops = ChannelId::parse("http:ops").unwrap();
    assert_eq!(app.directory.info(&ops).await, ChannelVisibility::Machine);
    let dm = ChannelId::parse("access:alice").unwrap();
    assert_eq!(app.directory.info(&dm).await, ChannelVisibility::Dm);
    let stop = CancellationToken::new();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let shutdown = {
        let stop = stop.clone();
        async move { stop.cancelled().await }
    };
    let serving = tokio::spawn(server::serve(
        app,
        Some("127.0.0.1:0".parse().unwrap()),
        shutdown,
        move |addr, app| {
            let summary = server::summary(app, addr).to_string();
            let _ = ready_tx.send((addr, summary));
        },
    ));
    let (addr, summary) = ready_rx.await.unwrap();
    assert!(
        summary.contains("/echo-surface")
            && summary.contains("a test surface greeting \"hello from echo\""),
        "{summary}"
    );
    assert!(echo.running.load(Ordering::SeqCst), "its start ran");

    let client = reqwest::Client::new();
    let url = format!("http://{addr}/echo-surface");
    let ok = client
        .post(&url)
        .bearer_auth("reader-token-0123456789")
        .body("help")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let body = ok.text().await.unwrap();
    assert!(
        body.starts_with("hello from echo\n") && body.contains("runs list"),
        "its section's greeting, then the registry's help: {body}"
    );
    let refused = client.post(&url).body("help").send().await.unwrap();
    assert_eq!(refused.status(), 401, "no token, no caller");
    let named = |l: &server::telemetry::SpanLine| {
        l.name == "request"
            && l.fields.get("surface").map(String::as_str) == Some("echo")
            && l.fields.get("route").map(String::as_str) == Some("/echo-surface")
    };
    let mut traced = span_log.since(0);
    for _ in 0..1500 {
        if traced.iter().any(named) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        traced = span_log.since(0);
    }
    // The allowed request's span carries the surface and route; the refused one is marked
    // denied (a 401) and its trace dropped whole, as every surface's is.
    assert_eq!(
        traced.iter().filter(|l| named(l)).count(),
        1,
        "its request's span carries its surface and route: {traced:?}"
    );

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(30), serving)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        !echo.running.load(Ordering::SeqCst),
        "its task saw the stop"
    );
    // Once served, every request's trace has closed: still only the allowed one's.
    let all = span_log.since(0);
    assert_eq!(all.iter().filter(|l| named(l)).count(), 1, "{all:?}");
}

/// Its section is read with the guarantees of a built-in one: each fault names the file, the
/// line and column, the key and the fix; a key no surface reads fails the load.
#[test]
fn its_section_faults_name_file_line_column_and_key() {
    let cases: &[(&str, &str)] = &[
        (
            "[echo_surface]\ngreetin = \"hi\"\n",
            "plugin.toml:2:1: echo_surface.greetin: unknown field `greetin`, expected `greeting`",
        ),
        (
            "[echo_surface]\ngreeting = \"  \"\n",
            "plugin.toml:2:12: echo_surface.greeting: must not be empty",
        ),
        (
            "[echo_surface]\ngreeting = 3\n",
            "plugin.toml:2:12: echo_surface.greeting: invalid type: integer `3`, expected a string",
        ),
        (
            "[echo_surface]\n",
            "plugin.toml:1:1: echo_surface: missing field `greeting`",
        ),
        (
            "[echo_surfac]\ngreeting = \"hi\"\n",
            "plugin.toml:1:2: echo_surfac: unknown field `echo_surfac`, expected one of `server`",
        ),
        (
            "echo_surface = 1\n",
            "plugin.toml:1:16: echo_surface: invalid type: integer `1`",
        ),
    ];
    for (text, want) in cases {
        let err = parse_with_echo(text).map(|_| ()).unwrap_err().to_string();
        assert!(err.starts_with(want), "{text:?}\n got: {err}\nwant: {want}");
    }
    let unread = server::config::parse(
        server::Source::File("plugin.toml".into()),
        "[echo_surface]\ngreeting = \"hi\"\n",
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        unread.starts_with("plugin.toml:1:2: echo_surface: unknown field `echo_surface`"),
        "without the surface its section is an unknown key: {unread}"
    );
    let listed = parse_with_echo("[nope]\n")
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(listed.contains("`sandbox`, `echo_surface`"), "{listed}");
    // Two surfaces reading one key is refused, whatever the file says.
    let (one, two) = (EchoSurface::default(), EchoSurface::default());
    let twice = server::config::parse_with(
        server::Source::File("plugin.toml".into()),
        "",
        &[&one as &dyn SurfaceSection, &two],
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        twice.contains("two sections are read as [echo_surface]"),
        "{twice}"
    );
}

/// Without its secret it is built but off: its path answers 503 with one line saying what it
/// needs (never a bare 404), and so does its summary line.
#[tokio::test]
async fn without_its_secret_it_stays_off_and_says_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let config = parse_with_echo(&config_text(dir.path())).unwrap();
    let secrets = server::Secrets::from_lookup(&config, |_| None).unwrap();
    let echo = Arc::new(EchoSurface::default());
    let overrides = server::Overrides {
        surfaces: vec![echo.clone()],
        ..server::Overrides::default()
    };
    let replica = store::ReplicaId::parse("plugin-off").unwrap();
    let app = server::App::build_with(config, secrets, replica, overrides)
        .await
        .unwrap();
    // Served, its path answers 503 and says why, for any method.
    let serving = crate::common::serve(app).await;
    for method in [reqwest::Method::POST, reqwest::Method::GET] {
        let refused = reqwest::Client::new()
            .request(
                method.clone(),
                format!("http://{}/echo-surface", serving.addr),
            )
            .bearer_auth("reader-token-0123456789")
            .body("hello")
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 503, "{method}");
        let said = refused.text().await.unwrap();
        assert_eq!(
            said,
            "/echo-surface is off on this server: needs [echo_surface] and ECHO_SURFACE_TOKEN\n"
        );
    }
    let summary = serving.summary.clone();
    serving.stop.send(()).unwrap();
    serving.handle.await.unwrap().unwrap();
    let line = summary
        .lines()
        .find(|l| l.contains("/echo-surface"))
        .unwrap_or_else(|| panic!("its line: {summary}"));
    assert!(
        line.contains("off") && line.contains("needs [echo_surface] and ECHO_SURFACE_TOKEN"),
        "{line}"
    );
}

/// A surface added to the App whose section the config load did not read is refused, and so
/// are two surfaces answering for one namespace's channels and a directory for a namespace
/// that takes none: none passes silently.
#[tokio::test]
async fn an_unread_section_or_a_second_directory_for_a_namespace_fails_the_build() {
    let dir = tempfile::tempdir().unwrap();
    let build = |config: server::LoadedConfig, surfaces: Vec<Arc<dyn SurfacePlugin>>| async {
        let secrets = server::Secrets::from_lookup(&config, |_| None).unwrap();
        let overrides = server::Overrides {
            surfaces,
            ..server::Overrides::default()
        };
        let replica = store::ReplicaId::parse("plugin-refused").unwrap();
        server::App::build_with(config, secrets, replica, overrides)
            .await
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let text =
        config_text(dir.path()).replace("[echo_surface]\ngreeting = \"hello from echo\"\n", "");
    let unread = server::config::parse(server::Source::File("plugin.toml".into()), &text).unwrap();
    let err = build(unread, vec![Arc::new(EchoSurface::default())]).await;
    assert!(
        err.contains("[echo_surface]") && err.contains("config::load_with"),
        "{err}"
    );
    let twice: Vec<Arc<dyn SurfacePlugin>> = vec![
        Arc::new(EchoSurface::default()),
        Arc::new(EchoSurface::default()),
    ];
    let err = build(parse_with_echo(&text).unwrap(), twice).await;
    assert!(
        err.contains("two surfaces answer for the channels of slack:"),
        "{err}"
    );
    // A directory for a namespace whose ids alone say what its channels are would let a
    // plug-in widen them (every `http:` channel public, say): refused.
    let widening = EchoSurface {
        claims_http: true,
        ..EchoSurface::default()
    };
    let err = build(parse_with_echo(&text).unwrap(), vec![Arc::new(widening)]).await;
    assert!(
        err.contains("http:") && err.contains("takes no directory"),
        "{err}"
    );
}
