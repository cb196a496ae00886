//! A surface defined here, in a test, and added to the App through `Overrides::surfaces`
//! without editing the server: `serve` starts it, binds its routes, names its requests' spans
//! and prints its summary line as it does the built-in ones. It reuses the `http` namespace:
//! its caller is a bearer token's, proved through `commands::identity`, and its text goes to
//! `Registry::handle` like every surface's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use authz_core::{BoxFuture, Surface};
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use commands::{Registry, Services};
use server::surface::{SurfaceLine, SurfacePlugin};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// `POST /echo-surface`: a bearer token's caller, its text handled by the registry.
#[derive(Default)]
struct EchoSurface {
    /// Set by `start`, cleared when its task sees the server stop.
    running: Arc<AtomicBool>,
}

#[derive(Clone)]
struct Wired {
    registry: Arc<Registry>,
    services: Arc<Services>,
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
    (200, handled.reply.text)
}

impl SurfacePlugin for EchoSurface {
    fn summary_line(&self, _app: &server::App) -> SurfaceLine {
        SurfaceLine {
            surface: "/echo-surface",
            on: true,
            note: "a test surface".to_owned(),
        }
    }

    fn routes(&self, app: &server::App, _shutdown: &CancellationToken) -> Option<Router> {
        let wired = Wired {
            registry: app.registry.clone(),
            services: app.services.clone(),
        };
        let route = post(|s: State<Wired>, h: HeaderMap, t: String| async move {
            let (status, body) = handle(s, h, t).await;
            (axum::http::StatusCode::from_u16(status).unwrap(), body)
        });
        Some(
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
"#;

#[tokio::test]
async fn a_surface_added_from_outside_the_server_is_served_summarised_and_traced() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{CONFIG}\n[store]\nurl = \"sqlite://{}\"\n[server]\ndata_dir = {:?}\n",
        dir.path().join("sb.db").display(),
        dir.path().join("data").display().to_string(),
    );
    let config = server::config::parse(server::Source::File("plugin.toml".into()), &text).unwrap();
    let tokens = r#"{"reader-token-0123456789": {"subject": "reader", "channel": "http:ops"}}"#;
    let secrets = server::Secrets::from_lookup(&config, |k| {
        (k == "SWITCHBOARD_INGRESS_TOKENS").then(|| tokens.to_owned())
    })
    .unwrap();
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
        summary.contains("/echo-surface") && summary.contains("a test surface"),
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
    assert!(body.contains("runs list"), "the registry's help: {body}");
    let refused = client.post(&url).body("help").send().await.unwrap();
    assert_eq!(refused.status(), 401, "no token, no caller");
    let named = |l: &server::telemetry::SpanLine| {
        l.name == "request"
            && l.fields.get("surface").map(String::as_str) == Some("echo")
            && l.fields.get("route").map(String::as_str) == Some("/echo-surface")
    };
    let mut traced = span_log.since(0);
    for _ in 0..100 {
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
}
