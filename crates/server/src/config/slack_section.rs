//! `[slack]`: the raw section, its typed config and its checks.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::numbers::Positive;
use super::urls::secret_safe_fault;
use super::{LoadError, Text};

/// `[slack]`: present turns the surface on (with its secrets in the environment).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackSection {
    pub mode: Option<SlackModeKey>,
    pub api_url: Option<Spanned<String>>,
    pub directory_ttl_seconds: Option<Positive>,
    pub allow_external_users: Option<bool>,
}

/// `[slack] mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SlackModeKey {
    Events,
    Socket,
}

/// `[slack]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackConfig {
    pub mode: slack::SlackMode,
    /// The Web API's base URL; the method name is appended.
    pub api_url: String,
    /// How long the directory trusts a channel's visibility and a user's memberships.
    pub directory_ttl: Duration,
    /// What becomes of a person of another workspace (Slack Connect).
    pub outsiders: slack::Outsiders,
}

impl Default for SlackConfig {
    fn default() -> Self {
        SlackConfig {
            mode: slack::SlackMode::Events,
            api_url: slack::DEFAULT_API_URL.to_owned(),
            directory_ttl: Duration::from_secs(600),
            outsiders: slack::Outsiders::Refused,
        }
    }
}

/// `[slack]`: the mode, an http(s) API base URL, a TTL above 0.
pub(super) fn slack_config(t: &Text<'_>, section: &SlackSection) -> Result<SlackConfig, LoadError> {
    let mut c = SlackConfig::default();
    if let Some(mode) = section.mode {
        c.mode = match mode {
            SlackModeKey::Events => slack::SlackMode::Events,
            SlackModeKey::Socket => slack::SlackMode::Socket,
        };
    }
    if let Some(url) = &section.api_url {
        if let Some(why) = secret_safe_fault(url.get_ref()) {
            return Err(t.at(
                url.span().start,
                format!("must be the Web API's https base URL, like \"https://slack.com/api/\"; here {why} (the method name is appended; the bot token travels with every call, so plain http is accepted on loopback only)"),
            ));
        }
        c.api_url = url.get_ref().clone();
    }
    if let Some(n) = section.directory_ttl_seconds {
        c.directory_ttl = n.seconds();
    }
    if section.allow_external_users == Some(true) {
        c.outsiders = slack::Outsiders::OwnEntryOnly;
    }
    Ok(c)
}
