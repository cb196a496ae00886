//! The Slack surface's wiring: built from `[slack]` and its secrets without touching the
//! network (so a one-shot command never calls Slack), connected by `serve` (`auth.test`).

use std::sync::Arc;

use slack::{SlackApi, SlackChannelDirectory, SlackMode, SlackSurface};

use crate::config::{LoadedConfig, SlackConfig};
use crate::secrets::{SLACK_APP_TOKEN_ENV, SLACK_BOT_TOKEN_ENV, SLACK_SIGNING_SECRET_ENV, Secrets};

/// Where the Slack surface stands in this process.
pub enum SlackState {
    /// No `[slack]` section.
    Absent,
    /// `[slack]` is present but secrets are missing: the variables to set.
    Missing(Vec<&'static str>),
    /// The client and the directory, not yet connected.
    Built(Box<Built>),
    /// Connected: `auth.test` answered.
    On {
        surface: Arc<SlackSurface>,
        mode: SlackMode,
        missing_scopes: Vec<&'static str>,
        app_token: Option<String>,
    },
    /// `auth.test` could not reach Slack (or Slack failed on its side): `serve` tries again
    /// after `next_in`, doubling up to a minute; `why` says what happened.
    Retrying {
        built: Box<Built>,
        why: String,
        next_in: std::time::Duration,
    },
    /// Slack refused the token or the address, or Socket Mode could not connect: the surface
    /// is off, saying why.
    Failed(String),
}

/// The longest wait between two tries to reach Slack.
pub const MAX_RETRY: std::time::Duration = std::time::Duration::from_secs(60);

/// What `connect` needs.
#[derive(Clone)]
pub struct Built {
    pub config: SlackConfig,
    pub api: SlackApi,
    pub directory: Arc<SlackChannelDirectory>,
    signing_secret: String,
    app_token: Option<String>,
}

impl SlackState {
    /// A copy to connect with while this state stays what readers see (`Built`, `Retrying`);
    /// `None` for any other.
    pub fn attempt(&self) -> Option<SlackState> {
        match self {
            SlackState::Built(b) => Some(SlackState::Built(b.clone())),
            SlackState::Retrying {
                built,
                why,
                next_in,
            } => Some(SlackState::Retrying {
                built: built.clone(),
                why: why.clone(),
                next_in: *next_in,
            }),
            _ => None,
        }
    }

    /// From the config and the environment's secrets; no I/O.
    pub fn build(config: &LoadedConfig, secrets: &Secrets) -> SlackState {
        let Some(c) = &config.slack else {
            return SlackState::Absent;
        };
        let s = &secrets.slack;
        let mut missing = Vec::new();
        if s.bot_token.is_none() {
            missing.push(SLACK_BOT_TOKEN_ENV);
        }
        if s.signing_secret.is_none() {
            missing.push(SLACK_SIGNING_SECRET_ENV);
        }
        if c.mode == SlackMode::Socket && s.app_token.is_none() {
            missing.push(SLACK_APP_TOKEN_ENV);
        }
        let (Some(bot), Some(signing), true) =
            (&s.bot_token, &s.signing_secret, missing.is_empty())
        else {
            return SlackState::Missing(missing);
        };
        let api = match SlackApi::new(&c.api_url, bot) {
            Ok(api) => api,
            Err(fault) => {
                return SlackState::Failed(format!(
                    "the Slack client could not be built ({fault})"
                ));
            }
        };
        let directory = Arc::new(SlackChannelDirectory::new(
            api.clone(),
            c.directory_ttl,
            slack::system_clock(),
        ));
        SlackState::Built(Box::new(Built {
            config: c.clone(),
            api,
            directory,
            signing_secret: signing.clone(),
            app_token: s.app_token.clone(),
        }))
    }

    /// The directory the dispatcher stamps with, when the surface is configured.
    pub fn directory(&self) -> Option<Arc<SlackChannelDirectory>> {
        match self {
            SlackState::Built(b) | SlackState::Retrying { built: b, .. } => {
                Some(b.directory.clone())
            }
            _ => None,
        }
    }

    /// The mode it serves in, once it is configured.
    pub fn mode(&self) -> Option<SlackMode> {
        match self {
            SlackState::Built(b) | SlackState::Retrying { built: b, .. } => Some(b.config.mode),
            SlackState::On { mode, .. } => Some(*mode),
            _ => None,
        }
    }

    /// Its line for `/readyz`: on, retrying and why, or off and why.
    pub fn readiness(&self) -> String {
        match self {
            SlackState::On { .. } => "slack: on".to_owned(),
            SlackState::Retrying { why, .. } => format!("slack: retrying: {why}"),
            SlackState::Built(_) => "slack: connecting".to_owned(),
            SlackState::Failed(why) => format!("slack: off: {why}"),
            SlackState::Missing(vars) => format!("slack: off: needs {}", vars.join(", ")),
            SlackState::Absent => "slack: off".to_owned(),
        }
    }

    /// The surface, when it is on.
    pub fn surface(&self) -> Option<(&Arc<SlackSurface>, SlackMode)> {
        match self {
            SlackState::On { surface, mode, .. } => Some((surface, *mode)),
            _ => None,
        }
    }

    /// Asks `auth.test` for the bot's id and scopes and builds the surface; a failure turns
    /// the surface off with the reason (never the token).
    pub async fn connect(
        self,
        registry: Arc<commands::Registry>,
        services: Arc<commands::Services>,
        directory: Arc<dyn authz_core::ChannelDirectory>,
    ) -> SlackState {
        let (b, tried) = match self {
            SlackState::Built(b) => (b, None),
            SlackState::Retrying { built, next_in, .. } => (built, Some(next_in)),
            other => return other,
        };
        let identity = match b.api.auth_test().await {
            Ok(id) => id,
            // Slack unreachable (or failing on its side): tried again, never blamed on the
            // token, which Slack has not read.
            Err(fault) if fault.is_transient() => {
                let next_in = tried.map_or(std::time::Duration::from_secs(1), |t| {
                    (t * 2).min(MAX_RETRY)
                });
                let why = format!(
                    "Slack unreachable, retrying in {} s: {fault}",
                    next_in.as_secs()
                );
                tracing::warn!("[slack] {why}");
                return SlackState::Retrying {
                    built: b,
                    why,
                    next_in,
                };
            }
            Err(fault) => {
                // The URL is not repeated: a proxy's may carry credentials.
                let why = if fault.is_token_refused() {
                    format!(
                        "Slack refused the bot token (auth.test: {fault}): check SLACK_BOT_TOKEN"
                    )
                } else {
                    format!("auth.test failed ({fault}): check [slack] api_url and SLACK_BOT_TOKEN")
                };
                tracing::error!("[slack] the surface is off: {why}");
                return SlackState::Failed(why);
            }
        };
        if !identity.missing_scopes.is_empty() {
            tracing::warn!(
                "[slack] the bot token lacks the scopes {}: add them in the app's OAuth settings and reinstall it (docs/slack.md)",
                identity.missing_scopes.join(", ")
            );
        }
        let surface = Arc::new(SlackSurface::new(
            registry,
            services,
            b.api.clone(),
            directory,
            slack::SigningSecret::new(&b.signing_secret),
            &identity,
            b.config.outsiders,
        ));
        SlackState::On {
            surface,
            mode: b.config.mode,
            missing_scopes: identity.missing_scopes,
            app_token: b.app_token,
        }
    }

    /// Starts Socket Mode when that is the mode; a connection that fails turns the surface
    /// off with the reason.
    pub async fn start_socket(
        self,
        stop: tokio_util::sync::CancellationToken,
    ) -> (SlackState, Option<tokio::task::JoinHandle<()>>) {
        let SlackState::On {
            surface,
            mode: SlackMode::Socket,
            app_token: Some(token),
            ..
        } = &self
        else {
            return (self, None);
        };
        match slack::start_socket_mode(surface.clone(), token, stop).await {
            Ok(task) => (self, Some(task)),
            Err(e) => {
                tracing::error!("[slack] the surface is off: {e}");
                (SlackState::Failed(e.to_string()), None)
            }
        }
    }
}
