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
        let ingress_tokens = match token_map(config, &env)? {
            Some((map, from, plaintext)) => {
                redact.extend(plaintext);
                Some((map, from))
            }
            None => None,
        };
        let agent_token_secret = agent_token_secret(config, &env)?;
        if let Some(s) = &agent_token_secret {
            redact.push(String::from_utf8_lossy(s).into_owned());
        }
        let mut api_keys = BTreeMap::new();
        for spec in config.agent_specs.values() {
            let var = match &spec.backend {
                BackendSpec::OpenAi {
                    api_key_env: Some(var),
                    ..
                } => var,
                BackendSpec::Command {
                    network:
                        crate::config::AgentNetwork::Broker {
                            model:
                                Some(crate::config::ModelEndpointSpec {
                                    key_env: Some(var), ..
                                }),
                        },
                    ..
                } => var,
                _ => continue,
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

/// The ingress token map (`SWITCHBOARD_INGRESS_TOKENS`, else `[ingress] tokens_file`), where it
/// came from and its plaintext tokens (for redaction); `None` when neither is set.
#[allow(clippy::type_complexity)]
pub fn token_map(
    config: &LoadedConfig,
    env: &impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<(Arc<TokenMap>, TokensFrom, Vec<String>)>> {
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
    let Some((json, from, named)) = token_json else {
        return Ok(None);
    };
    let map = TokenMap::parse(&json).context(named)?;
    Ok(Some((
        Arc::new(map),
        from,
        TokenMap::plaintext_tokens(&json),
    )))
}

/// The fewest bytes an agent-token secret may have: it signs every agent's tokens.
pub const AGENT_SECRET_MIN_BYTES: usize = 32;

/// Words of the placeholders shipped in `deploy/` and the docs: a secret holding one was
/// copied, not made.
const PLACEHOLDER_WORDS: [&str; 5] = [
    "replace-with",
    "change-me",
    "changeme",
    "placeholder",
    "your-secret",
];

/// What is wrong with an agent-token secret, if anything: fewer than 32 bytes, or a shipped
/// placeholder.
pub fn agent_secret_fault(secret: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(secret).to_lowercase();
    if PLACEHOLDER_WORDS.iter().any(|w| text.contains(w)) {
        return Some(
            "is a placeholder copied from an example, not a secret; make one with `openssl rand -base64 32`"
                .to_owned(),
        );
    }
    (secret.len() < AGENT_SECRET_MIN_BYTES).then(|| {
        format!(
            "is only {} bytes long; it signs every agent's tokens, so use at least {AGENT_SECRET_MIN_BYTES}: make one with `openssl rand -base64 32`",
            secret.len()
        )
    })
}

/// The agent-token secret (`SWITCHBOARD_AGENT_TOKEN_SECRET`, else `[server]
/// agent_token_secret_file`), refused when short or a placeholder; `None` when neither is set.
pub fn agent_token_secret(
    config: &LoadedConfig,
    env: &impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<Vec<u8>>> {
    let (secret, named) = match (
        &config.server.agent_token_secret_file,
        env(AGENT_TOKEN_SECRET_ENV),
    ) {
        // As used: trimmed (a secret set with a trailing newline is the same secret), and a
        // value of only spaces is unset.
        (_, Some(s)) if !s.trim().is_empty() => (
            s.trim().as_bytes().to_vec(),
            AGENT_TOKEN_SECRET_ENV.to_owned(),
        ),
        (Some(file), _) => (
            read_secret_file(file, "[server] agent_token_secret_file")?
                .trim()
                .as_bytes()
                .to_vec(),
            format!("{} ([server] agent_token_secret_file)", file.display()),
        ),
        _ => return Ok(None),
    };
    match agent_secret_fault(&secret) {
        Some(fault) => anyhow::bail!("the agent-token secret in {named} {fault}"),
        None => Ok(Some(secret)),
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
