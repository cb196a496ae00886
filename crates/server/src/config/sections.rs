//! The typed sections of the config file, derived with serde: every section denies unknown
//! keys, and the values that need more than a type (an address, a positive number, a store
//! URL) are checked as they are read, so a fault carries the parser's position.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, Deserializer};
use store::{ReplicaId, StoreUrl};
use toml::Spanned;

use super::numbers::{Positive, Whole};

/// `host:port` with an IP.
#[derive(Debug, Clone, Copy)]
pub struct Listen(pub SocketAddr);

impl<'de> Deserialize<'de> for Listen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map(Listen).map_err(|_| {
            de::Error::custom(format!(
                "{s:?} is not an address; use host:port with an IP, like \"127.0.0.1:8080\" or \"0.0.0.0:8080\""
            ))
        })
    }
}

/// A replica id: 1-128 letters, digits, `-`, `_` or `.`.
#[derive(Debug, Clone)]
pub struct Replica(pub ReplicaId);

impl<'de> Deserialize<'de> for Replica {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ReplicaId::parse(&s).map(Replica).map_err(de::Error::custom)
    }
}

/// A store URL, checked where it is read (`store::StoreUrl`, the one place URLs are checked).
#[derive(Debug, Clone)]
pub struct Url(pub StoreUrl);

impl<'de> Deserialize<'de> for Url {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        StoreUrl::parse(&s).map(Url).map_err(|_| {
            de::Error::custom(
                "must be sqlite://path/to/switchboard.db, postgres://user@host/db or memory:",
            )
        })
    }
}

/// `[server]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub listen: Option<Listen>,
    pub replica_id: Option<Replica>,
    pub data_dir: Option<PathBuf>,
    pub shutdown_grace_seconds: Option<Positive>,
    pub heartbeat_seconds: Option<Positive>,
    pub lease_seconds: Option<Spanned<Positive>>,
    pub agent_token_secret_file: Option<PathBuf>,
    pub public_url: Option<Spanned<String>>,
}

/// `[slack]`: present turns the surface on (with its secrets in the environment).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackSection {
    pub mode: Option<SlackModeKey>,
    pub api_url: Option<Spanned<String>>,
    pub directory_ttl_seconds: Option<Positive>,
    pub allow_external_users: Option<bool>,
}

/// `[access]`: on when `issuer` and `audience` are both set.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessSection {
    pub issuer: Option<Spanned<String>>,
    pub audience: Option<Spanned<String>>,
    pub jwks_url: Option<Spanned<String>>,
    pub jwks_file: Option<Spanned<PathBuf>>,
    pub header: Option<Spanned<String>>,
    pub cookie: Option<Spanned<String>>,
    pub jwks_ttl_seconds: Option<Positive>,
}

/// `[slack] mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SlackModeKey {
    Events,
    Socket,
}

/// `[store]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    pub url: Option<Url>,
    /// Postgres only: a schema of Switchboard's own (created if missing).
    pub schema: Option<Spanned<String>>,
    pub max_connections: Option<Positive>,
}

/// `[ingress]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngressSection {
    pub tokens_file: Option<PathBuf>,
    pub max_body_bytes: Option<Positive>,
}

/// An `[mcp] allowed_hosts` entry, checked as it is read.
#[derive(Debug, Clone)]
pub struct Host(pub mcp::HostRule);

impl<'de> Deserialize<'de> for Host {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        mcp::HostRule::parse(&s)
            .map(Host)
            .map_err(de::Error::custom)
    }
}

/// An `http://` or `https://` URL (where agents reach `/mcp`).
#[derive(Debug, Clone)]
pub struct HttpUrl(pub String);

impl<'de> Deserialize<'de> for HttpUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let rest = s
            .strip_prefix("http://")
            .or_else(|| s.strip_prefix("https://"))
            .unwrap_or_default();
        if rest.is_empty() || rest.starts_with('/') || s.chars().any(char::is_whitespace) {
            return Err(de::Error::custom(format!(
                "{s:?} is not an http(s) URL; write it like \"http://127.0.0.1:8080/mcp\""
            )));
        }
        Ok(HttpUrl(s))
    }
}

/// `[mcp]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    #[serde(default)]
    pub enabled: bool,
    pub allowed_hosts: Option<Vec<Host>>,
    pub max_body_bytes: Option<Positive>,
    pub tools_page_size: Option<Positive>,
    pub agent_url: Option<HttpUrl>,
}

/// `[memory] extractor`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExtractorName {
    #[default]
    Rules,
    Model,
}

/// `[memory]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySection {
    pub extractor: Option<ExtractorName>,
    pub model_agent: Option<Spanned<String>>,
    pub context_max_records: Option<Spanned<Positive>>,
    pub context_max_chars: Option<Positive>,
    pub reflection_timeout_seconds: Option<Positive>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

/// `[telemetry]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySection {
    pub log_format: Option<LogFormat>,
    pub otlp_endpoint: Option<Spanned<String>>,
    pub span_log_capacity: Option<Positive>,
    pub audit_file: Option<PathBuf>,
    pub service_name: Option<Spanned<String>>,
}

/// One `[[schedules]]` entry: a name, a cron in a zone, and either a command or an agent
/// prompt. Checked in `config::schedules`, each fault at its value's position.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSection {
    pub name: Spanned<String>,
    pub cron: Spanned<String>,
    pub time_zone: Option<Spanned<String>>,
    pub command: Option<Spanned<String>>,
    pub agent: Option<Spanned<String>>,
    pub prompt: Option<Spanned<String>>,
}

/// The whole file: the typed sections, and the authorization keys (read by authz-core from
/// the same text).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSections {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub store: StoreSection,
    #[serde(default)]
    pub ingress: IngressSection,
    #[serde(default)]
    pub agents: super::agents::AgentsSection,
    #[serde(default)]
    pub telemetry: TelemetrySection,
    /// Read by authz-core (`GrantsTable::from_config`) from the same text.
    #[serde(rename = "grants")]
    _grants: Option<de::IgnoredAny>,
    #[serde(rename = "restrict")]
    _restrict: Option<de::IgnoredAny>,
    pub slack: Option<SlackSection>,
    #[serde(default)]
    pub mcp: McpSection,
    pub access: Option<AccessSection>,
    #[serde(default)]
    pub schedules: Vec<Spanned<ScheduleSection>>,
    #[serde(default)]
    pub memory: MemorySection,
    pub agent_policy: Option<broker::file::OrgPolicyToml>,
    #[serde(default)]
    pub agent_grants: Vec<Spanned<broker::GrantSpec>>,
    #[serde(default)]
    pub repos: ReposSection,
    #[serde(default)]
    pub retention: RetentionSection,
}

/// `[retention]`: how long records are kept past their use, in days (0: kept for ever).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionSection {
    pub slack_event_days: Option<Whole>,
    pub slack_thread_days: Option<Whole>,
    pub approval_days: Option<Whole>,
    pub firing_days: Option<Whole>,
    pub run_days: Option<Whole>,
    /// How often a replica prunes.
    pub interval_minutes: Option<Whole>,
    /// The most rows of each kind one pass deletes.
    pub batch: Option<Whole>,
}

/// `[repos]`: how URL repos are refetched and run branches kept.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReposSection {
    /// A URL repo is fetched again before a run when its last fetch is older than this
    /// (0: before every run).
    pub fetch_interval_seconds: Option<Whole>,
    /// A run's branch is deleted once the run is older than this many days (0: kept).
    pub branch_retention_days: Option<Whole>,
}
