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
    /// Absent until `prepare`; then absent, off (and why), built, or on once `serve`
    /// connected it.
    state: Mutex<SlackState>,
}

impl Default for SlackSurface {
    fn default() -> Self {
        SlackSurface {
            state: Mutex::new(SlackState::Absent),
        }
    }
}

impl SlackSurface {
    /// Its state (a poisoned lock is still read: the state is replaced whole).
    fn state(&self) -> MutexGuard<'_, SlackState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Connects (`auth.test`) when it is configured, and in Socket Mode starts its connection
    /// until `stop`; `serve` does this before it binds the routes, so a one-shot command never
    /// calls Slack.
    async fn connect(&self, app: &App, stop: CancellationToken) -> Option<JoinHandle<()>> {
        let state = std::mem::replace(&mut *self.state(), SlackState::Absent);
        let connected = state
            .connect(
                app.registry.clone(),
                app.services.clone(),
                app.directory.clone(),
            )
            .await;
        let (state, socket) = connected.start_socket(stop).await;
        *self.state() = state;
        socket
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
        let surface = self.state().surface().map(|(s, mode)| (s.clone(), mode));
        match surface {
            Some((surface, slack::SlackMode::Events)) => Routes::On(slack::router(surface)),
            Some((_, slack::SlackMode::Socket)) => Routes::Off {
                paths,
                reason: "Slack reaches this server over Socket Mode ([slack] mode = \"socket\"); its events and clicks do not come over HTTP".to_owned(),
            },
            None => Routes::Off {
                paths,
                reason: super::off_reason(&self.summary_line(app)),
            },
        }
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
