//! `switchboard serve`: bind, recover, summarise, serve every surface, shut down gracefully.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use store::Store;
use tokio_util::sync::CancellationToken;

use crate::{App, LoadedConfig, Secrets, telemetry};

/// How long `/readyz` waits for the store.
const READY_TIMEOUT: Duration = Duration::from_secs(2);
/// How long interrupted runs get to be recorded after the grace.
const SETTLE: Duration = Duration::from_secs(5);

/// Whether the store answers (what `/readyz` reports).
pub async fn readiness(store: &dyn Store) -> Result<(), String> {
    match tokio::time::timeout(READY_TIMEOUT, store.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err("the store is not reachable".to_owned()),
        Err(_) => Err(format!(
            "the store did not answer within {}s",
            READY_TIMEOUT.as_secs()
        )),
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// What `/readyz` reads: the store, and each surface's line.
#[derive(Clone)]
struct Ready {
    store: Arc<dyn Store>,
    /// The policy in force (its hash is a line of the body).
    policy: Arc<commands::LivePolicy>,
    /// Each surface with the line its summary gave at start (`/ingress: on`).
    surfaces: Arc<[(Arc<dyn crate::surface::SurfacePlugin>, String)]>,
}

/// `ready` (or `not ready: …`, for the store alone), then one line per surface: on, or off
/// and why, or what it is doing (`slack: retrying: …`), then `policy: sha256:…`, the hash of
/// the policy in force (replicas that disagree show two). A surface never makes the server not
/// ready: one surface's outage must not take every replica out of rotation.
async fn readyz(State(ready): State<Ready>) -> (StatusCode, String) {
    let policy = format!("policy: {}\n", ready.policy.now().hash);
    let lines: String = ready
        .surfaces
        .iter()
        .map(|(surface, at_start)| {
            let line = surface.readiness().unwrap_or_else(|| at_start.clone());
            format!("{line}\n")
        })
        .collect();
    match readiness(ready.store.as_ref()).await {
        Ok(()) => (StatusCode::OK, format!("ready\n{lines}{policy}")),
        Err(why) => {
            tracing::warn!(reason = %why, "not ready");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n{lines}{policy}"),
            )
        }
    }
}

/// A surface's `/readyz` line from its start-up summary line.
fn ready_line(line: &crate::summary::SurfaceLine) -> String {
    let needs = line.note.strip_prefix("off: ").unwrap_or(&line.note);
    match line.on {
        true => format!("{}: on", line.surface),
        false => format!("{}: off: {needs}", line.surface),
    }
}

/// Ctrl-C or SIGTERM. The handlers are installed when this is called (inside the runtime),
/// not when the future is first polled: a signal that arrives as soon as the server answers
/// is a graceful stop, never the default handler's kill.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    let mut terminate = signal(SignalKind::terminate()).ok();
    async move {
        let interrupted = async {
            match interrupt.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let terminated = async {
            match terminate.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = interrupted => {}
            () = terminated => {}
        }
    }
}

/// Serves until `shutdown` resolves, then stops accepting, lets live runs finish up to the
/// grace, interrupts the rest and tombstones what is left. `ready` receives the bound address
/// once the server accepts connections.
pub async fn serve(
    app: App,
    listen: Option<SocketAddr>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(SocketAddr, &App),
) -> anyhow::Result<()> {
    preflight(&app.config, &app.secrets)?;
    let data_dir = &app.config.server.data_dir;
    dispatch::make_private_dir(data_dir).with_context(|| {
        format!(
            "creating the data directory {} ([server] data_dir)",
            data_dir.display()
        )
    })?;
    let addr = listen.unwrap_or(app.config.server.listen);
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("listening on {addr} failed; pass --listen HOST:PORT or set [server] listen")
    })?;
    let bound = listener.local_addr()?;
    let recovered = app.recover().await?;
    app.store
        .announce_server(
            &app.replica,
            env!("CARGO_PKG_VERSION"),
            app.services.clock.started_at,
            store::wall_clock(),
        )
        .await
        .context("recording this server in the store")?;
    let reloader = crate::reload::Reloader::of(&app);
    crate::reload::record(
        app.store.as_ref(),
        &app.replica,
        &app.services.policy.now().hash,
    )
    .await;
    if recovered > 0 {
        tracing::warn!(
            count = recovered,
            "tombstoned this replica's runs left live by the last process (interrupted)"
        );
    }
    let stop = CancellationToken::new();
    let mut background = Vec::new();
    // Each surface starts what it needs (a connection, a socket) before its routes are built.
    for surface in app.surfaces.clone() {
        background.extend(surface.start(&app, bound, stop.clone()).await);
    }
    background.extend(app.spawn_background(stop.clone()));
    // On SQLite, runs another process starts (`switchboard ask`) reach this server's feeds.
    background.extend(
        app.dispatcher
            .spawn_store_watch(dispatch::STORE_WATCH, stop.clone()),
    );
    background.push(app.spawn_schedule_timer(stop.clone()));
    background.push(app.spawn_pruning(stop.clone()));
    background.push(crate::reload::spawn(
        reloader,
        app.config.server.config_poll,
        stop.clone(),
    ));
    let router = router(&app, stop.clone());
    ready(bound, &app);
    let stopping = stop.clone();
    let dispatcher = app.dispatcher.clone();
    let grace = app.config.server.shutdown_grace;
    let drain = tokio::spawn(async move {
        shutdown.await;
        tracing::info!(
            grace_seconds = grace.as_secs(),
            "shutting down: no new requests; live runs may finish"
        );
        stopping.cancel();
        let interrupted = dispatcher.shutdown(grace, SETTLE).await;
        if interrupted > 0 {
            tracing::warn!(
                count = interrupted,
                "interrupted live runs at the end of the grace"
            );
        }
    });
    let serving =
        axum::serve(listener, router).with_graceful_shutdown(stop.clone().cancelled_owned());
    // Whatever ended the serving, the rest of the shutdown runs.
    let served = serving.await.context("serving HTTP");
    drain.await.ok();
    for task in background {
        task.await.ok();
    }
    // Anything still live of this replica (a run whose end could not be recorded) is
    // tombstoned now rather than left for another replica's sweep.
    let left = app
        .store
        .tombstone_orphans(
            &app.replica,
            store::wall_clock(),
            app.config.server.lease,
            true,
        )
        .await
        .map(|v| v.len())
        .unwrap_or(0);
    if left > 0 {
        tracing::warn!(count = left, "tombstoned runs still live at exit");
    }
    if let Err(e) = app.store.retire_server(&app.replica).await {
        tracing::warn!(error = %e.token(), "recording that this server stopped failed");
    }
    served
}

/// What `serve` refuses to start with, checked before anything is opened. With a Postgres
/// store (replicas), agent tokens must verify on every replica, so `/mcp` needs the shared
/// secret: a per-process random one would refuse an agent whose run lives elsewhere.
pub fn preflight(config: &LoadedConfig, secrets: &Secrets) -> anyhow::Result<()> {
    let postgres = matches!(config.store.url, store::StoreUrl::Postgres(_));
    if postgres && crate::mcp_is_on(config, secrets) && secrets.agent_token_secret.is_none() {
        anyhow::bail!(
            "[mcp] is on with a Postgres store, but no agent-token secret is set: agents' tokens must verify on every replica. Set SWITCHBOARD_AGENT_TOKEN_SECRET (32+ random bytes, the same on every replica) or [server] agent_token_secret_file, or set [mcp] enabled = false"
        );
    }
    Ok(())
}

/// The router of every surface this build has (the health checks, the trace log, and each
/// of `app.surfaces` that is on). `shutdown` ends long-lived streams (`/mcp`, the feed).
pub fn router(app: &App, shutdown: CancellationToken) -> Router {
    let ready = Ready {
        store: app.store.clone(),
        policy: app.services.policy.clone(),
        surfaces: app
            .surfaces
            .iter()
            .map(|s| (s.clone(), ready_line(&s.summary_line(app))))
            .collect(),
    };
    let mut router = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(ready)
        .merge(telemetry::trace_log_route(
            app.services.clone(),
            app.span_log.clone(),
        ));
    for surface in &app.surfaces {
        router = router.merge(surface.routes(app, &shutdown).into_router());
    }
    let spans: Arc<[Arc<dyn crate::surface::SurfacePlugin>]> = app.surfaces.clone().into();
    router.layer(axum::middleware::from_fn_with_state(
        spans,
        telemetry::request_span,
    ))
}
