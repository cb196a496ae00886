//! Secrets: from the environment or from files the config names, never from the config file
//! itself. Nothing here is ever printed; errors name the variable or file and the fix.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use commands::TokenMap;

use crate::config::{BackendSpec, LoadedConfig};

/// The environment variable holding the ingress token map (JSON).
pub const INGRESS_TOKENS_ENV: &str = "SWITCHBOARD_INGRESS_TOKENS";
/// The environment variable holding the agent-token secret.
pub const AGENT_TOKEN_SECRET_ENV: &str = "SWITCHBOARD_AGENT_TOKEN_SECRET";
/// Other secrets the process knows of, redacted from agent text when set.
pub const SLACK_BOT_TOKEN_ENV: &str = "SLACK_BOT_TOKEN";
pub const SLACK_SIGNING_SECRET_ENV: &str = "SLACK_SIGNING_SECRET";
pub const SLACK_APP_TOKEN_ENV: &str = "SLACK_APP_TOKEN";

/// The Slack surface's secrets, each as set in the environment (an empty value is unset).
#[derive(Clone, Default)]
pub struct SlackSecrets {
    pub bot_token: Option<String>,
    pub signing_secret: Option<String>,
    pub app_token: Option<String>,
}

impl std::fmt::Debug for SlackSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SlackSecrets(…)")
    }
}

/// Where the ingress token map came from (for the start-up summary).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokensFrom {
    Env,
    File(String),
}

pub struct Secrets {
    /// The ingress token map and where it came from; `None` keeps the ingress off.
    pub ingress_tokens: Option<(Arc<TokenMap>, TokensFrom)>,
    pub agent_token_secret: Option<Vec<u8>>,
    /// `api_key_env` variable → its value, for the openai agents that name one.
    pub api_keys: BTreeMap<String, String>,
    /// The allow-listed environment `command` agents inherit.
    pub agent_env: Vec<(String, String)>,
    /// `SLACK_BOT_TOKEN`, `SLACK_SIGNING_SECRET`, `SLACK_APP_TOKEN`.
    pub slack: SlackSecrets,
    /// The plug-in surfaces' secrets (`SurfaceSection::secret_envs`) that are set, by variable.
    surface: BTreeMap<&'static str, String>,
    /// Every secret value, for redaction from agent text.
    redact: Vec<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(…)")
    }
}

impl Secrets {
    /// From this process's environment.
    pub fn from_env(config: &LoadedConfig) -> anyhow::Result<Self> {
        Self::from_lookup(config, |k| std::env::var(k).ok())
    }

    /// From any lookup (tests pass a map).
    pub fn from_lookup(
        config: &LoadedConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Self> {
        let mut redact = Vec::new();
        let token_json = match (&config.ingress.tokens_file, env(INGRESS_TOKENS_ENV)) {
            (_, Some(json)) if !json.trim().is_empty() => {
                Some((json, TokensFrom::Env, INGRESS_TOKENS_ENV.to_owned()))
            }
            (Some(file), _) => Some((
                read_secret_file(file, "[ingress] tokens_file")?,
                TokensFrom::File(file.display().to_string()),
                format!("{} ([ingress] tokens_file)", file.display()),
            )),
            _ => None,
        };
        let ingress_tokens = match token_json {
            Some((json, from, named)) => {
                let map = TokenMap::parse(&json).context(named)?;
                redact.extend(TokenMap::plaintext_tokens(&json));
                Some((Arc::new(map), from))
            }
            None => None,
        };
        let agent_token_secret = match (
            &config.server.agent_token_secret_file,
            env(AGENT_TOKEN_SECRET_ENV),
        ) {
            (_, Some(s)) if !s.is_empty() => Some(s.into_bytes()),
            (Some(file), _) => Some(
                read_secret_file(file, "[server] agent_token_secret_file")?
                    .trim()
                    .as_bytes()
                    .to_vec(),
            ),
            _ => None,
        };
        if let Some(s) = &agent_token_secret {
            redact.push(String::from_utf8_lossy(s).into_owned());
        }
        let mut api_keys = BTreeMap::new();
        for spec in config.agent_specs.values() {
            let BackendSpec::OpenAi {
                api_key_env: Some(var),
                ..
            } = &spec.backend
            else {
                continue;
            };
            if let Some(v) = env(var).filter(|v| !v.is_empty()) {
                redact.push(v.clone());
                api_keys.insert(var.clone(), v);
            }
        }
        let agent_env = config
            .limits
            .env_allow
            .iter()
            .filter_map(|k| env(k).map(|v| (k.clone(), v)))
            .collect();
        let set = |k: &str| {
            env(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let slack = SlackSecrets {
            bot_token: set(SLACK_BOT_TOKEN_ENV),
            signing_secret: set(SLACK_SIGNING_SECRET_ENV),
            app_token: set(SLACK_APP_TOKEN_ENV),
        };
        // The values as used (trimmed): what an agent could have seen and repeat.
        redact.extend(
            [&slack.bot_token, &slack.signing_secret, &slack.app_token]
                .into_iter()
                .flatten()
                .cloned(),
        );
        let surface: BTreeMap<&'static str, String> = config
            .surface_sections
            .secret_envs()
            .iter()
            .filter_map(|k| set(k).map(|v| (*k, v)))
            .collect();
        redact.extend(surface.values().cloned());
        Ok(Secrets {
            ingress_tokens,
            agent_token_secret,
            api_keys,
            agent_env,
            slack,
            surface,
            redact,
        })
    }

    /// A plug-in surface's secret, when its variable is set and not empty.
    pub fn surface_secret(&self, env: &str) -> Option<&str> {
        self.surface.get(env).map(String::as_str)
    }

    /// Every configured secret value (redacted from agent text by value).
    pub fn values_to_redact(&self) -> Vec<String> {
        self.redact.clone()
    }
}

fn read_secret_file(path: &Path, key: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| {
        format!(
            "reading {} ({key}); check the path and its permissions",
            path.display()
        )
    })
}
