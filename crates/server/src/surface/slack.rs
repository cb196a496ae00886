//! The Slack surface's plug-in: its state (built from `[slack]` and its secrets when the App
//! is built, connected by `serve`), its directory for `slack:` channels, its Events routes or
//! its Socket Mode connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use authz_core::{BoxFuture, ChannelDirectory, Namespace};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Routes, SurfaceLine, SurfacePlugin};
use crate::config::LoadedConfig;
use crate::slack_surface::SlackState;
use crate::{App, Secrets, summary};

/// Slack: signed events and interactions over HTTP, or Socket Mode.
pub(super) struct SlackSurface {
    /// Absent until `prepare`; then absent, off (and why), built, retrying, or on once `serve`
    /// connected it. Shared with the routes and the retry task, which read it per request.
    state: Arc<Mutex<SlackState>>,
}

impl Default for SlackSurface {
    fn default() -> Self {
        SlackSurface {
            state: Arc::new(Mutex::new(SlackState::Absent)),
        }
    }
}

/// Its state (a poisoned lock is still read: the state is replaced whole).
fn lock(state: &Mutex<SlackState>) -> MutexGuard<'_, SlackState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SlackSurface {
    fn state(&self) -> MutexGuard<'_, SlackState> {
        lock(&self.state)
    }

    /// Connects (`auth.test`) when it is configured, and in Socket Mode starts its connection
    /// until `stop`; `serve` does this before it binds the routes, so a one-shot command never
    /// calls Slack. Slack unreachable at start is tried again in the background, waiting
    /// twice as long each time up to a minute, until it answers or `stop`.
    async fn connect(&self, app: &App, stop: CancellationToken) -> Option<JoinHandle<()>> {
        let parts = Parts {
            registry: app.registry.clone(),
            services: app.services.clone(),
            directory: app.directory.clone(),
        };
        let attempt = self.state().attempt()?;
        let connected = parts.connect(attempt).await;
        if matches!(connected, SlackState::Retrying { .. }) {
            *self.state() = connected;
            let shared = self.state.clone();
            return Some(tokio::spawn(retry(shared, parts, stop)));
        }
        let (state, socket) = connected.start_socket(stop).await;
        *self.state() = state;
        socket
    }
}

/// What connecting needs from the App.
#[derive(Clone)]
struct Parts {
    registry: Arc<commands::Registry>,
    services: Arc<commands::Services>,
    directory: Arc<dyn ChannelDirectory>,
}

impl Parts {
    async fn connect(&self, state: SlackState) -> SlackState {
        state
            .connect(
                self.registry.clone(),
                self.services.clone(),
                self.directory.clone(),
            )
            .await
    }
}

/// Tries Slack again after each wait the state names, until it answers (then, in Socket
/// Mode, the socket runs until `stop`), refuses for good, or `stop`. While a try is under way
/// the state stays `Retrying`, so readers see what is happening, not an absence.
async fn retry(shared: Arc<Mutex<SlackState>>, parts: Parts, stop: CancellationToken) {
    loop {
        let wait = match &*lock(&shared) {
            SlackState::Retrying { next_in, .. } => *next_in,
            _ => return,
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stop.cancelled() => return,
        }
        let Some(attempt) = lock(&shared).attempt() else {
            return;
        };
        let connected = tokio::select! {
            connected = parts.connect(attempt) => connected,
            () = stop.cancelled() => return,
        };
        if matches!(connected, SlackState::Retrying { .. }) {
            *lock(&shared) = connected;
            continue;
        }
        if matches!(connected, SlackState::On { .. }) {
            tracing::info!("[slack] connected: Slack answered");
        }
        let (state, socket) = connected.start_socket(stop.clone()).await;
        *lock(&shared) = state;
        if let Some(socket) = socket {
            let _ = socket.await;
        }
        return;
    }
}

/// `POST /slack/events` or `/slack/interactions` as the surface stands when the request comes:
/// served once it is on, else 503 saying why (Slack still being reached, say).
async fn serve_as_now(
    shared: Arc<Mutex<SlackState>>,
    interactions: bool,
    request: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let now = {
        let state = lock(&shared);
        match state.surface() {
            Some((surface, slack::SlackMode::Events)) => Ok(surface.clone()),
            _ => Err(state.readiness()),
        }
    };
    match now {
        Ok(surface) if interactions => slack::handle_interactions(surface, request).await,
        Ok(surface) => slack::handle_events(surface, request).await,
        Err(why) => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            format!("{why}\n"),
        )
            .into_response(),
    }
}

impl SurfacePlugin for SlackSurface {
    fn prepare(
        &self,
        config: &LoadedConfig,
        secrets: &Secrets,
    ) -> Option<(Namespace, Arc<dyn ChannelDirectory>)> {
        let state = SlackState::build(config, secrets);
        let directory = state.directory();
        *self.state() = state;
        directory.map(|d| (Namespace::Slack, d as Arc<dyn ChannelDirectory>))
    }

    fn summary_line(&self, app: &App) -> SurfaceLine {
        summary::slack_line(&self.state(), app.config.slack.as_ref())
    }

    fn routes(&self, app: &App, _shutdown: &CancellationToken) -> Routes {
        let paths = &["/slack/events", "/slack/interactions"];
        // The state's lock is let go before the summary line takes it again.
        let mode = self.state().mode();
        match mode {
            // Served as the surface stands per request: it may connect after the server starts.
            Some(slack::SlackMode::Events) => {
                let (events, clicks) = (self.state.clone(), self.state.clone());
                Routes::On(
                    axum::Router::new()
                        .route(
                            "/slack/events",
                            axum::routing::post(move |r| serve_as_now(events.clone(), false, r)),
                        )
                        .route(
                            "/slack/interactions",
                            axum::routing::post(move |r| serve_as_now(clicks.clone(), true, r)),
                        ),
                )
            }
            Some(slack::SlackMode::Socket) => Routes::Off {
                paths,
                reason: "Slack reaches this server over Socket Mode ([slack] mode = \"socket\"); its events and clicks do not come over HTTP".to_owned(),
            },
            None => Routes::Off {
                paths,
                reason: super::off_reason(&self.summary_line(app)),
            },
        }
    }

    fn readiness(&self) -> Option<String> {
        Some(self.state().readiness())
    }

    fn span_route(&self, path: &str) -> Option<(&'static str, &'static str)> {
        match path {
            "/slack/events" => Some(("slack", "/slack/events")),
            "/slack/interactions" => Some(("slack", "/slack/interactions")),
            _ => None,
        }
    }

    fn start<'a>(
        &'a self,
        app: &'a App,
        _bound: SocketAddr,
        stop: CancellationToken,
    ) -> BoxFuture<'a, Vec<JoinHandle<()>>> {
        Box::pin(async move { self.connect(app, stop).await.into_iter().collect() })
    }
}
