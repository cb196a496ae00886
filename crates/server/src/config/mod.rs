//! The config file: which file, its TOML, every section this build reads as typed, serde-
//! derived sections (`sections.rs`; `[agents]` by one hand-written visitor, `agents.rs`), and
//! the grants table (parsed by authz-core from the same text). Every fault names the file,
//! the line and column (from the parser's spans), the key, and the fix.
//!
//! Secrets never come from this file: the server reads them from the environment or from
//! files this config names (`secrets.rs`).

mod agents;
mod numbers;
mod position;
mod sections;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ::agents::{EchoBehaviour, OutputCaps, RequestVia};
use authz_core::{AgentName, GrantsTable, NO_GRANTS, RepoSlug, ScheduleName};
use schedule::{CronSpec, Fires, ScheduleDecl};
use store::{ReplicaId, StoreSpec, StoreUrl};

use agents::{AgentTable, BackendKind};
use position::{dotted, key_segments, line_col, locate, path_at};
use sections::{FileSections, LogFormat, ScheduleSection};

/// The embedded default: what `switchboard` uses with no file at all.
pub const EMBEDDED_DEFAULT: &str = include_str!("../../../../config/switchboard.default.toml");

/// Where runs are kept when the config names no store: a SQLite file in the working directory.
pub const DEFAULT_STORE_URL: &str = "sqlite://./switchboard.db";

/// Where the config came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    EmbeddedDefault,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File(p) => write!(f, "{}", p.display()),
            Source::EmbeddedDefault => f.write_str("(embedded default)"),
        }
    }
}

/// A config load failure: the source, an optional position, and the message (which names the
/// key and the fix).
#[derive(Debug, thiserror::Error)]
#[error("{source_name}{position}: {message}")]
pub struct LoadError {
    pub source_name: String,
    pub position: String,
    pub message: String,
}

impl LoadError {
    fn new(source: &Source, position: Option<(usize, usize)>, message: impl Into<String>) -> Self {
        LoadError {
            source_name: source.to_string(),
            position: position
                .map(|(l, c)| format!(":{l}:{c}"))
                .unwrap_or_default(),
            message: message.into(),
        }
    }
}

/// A loaded, validated config.
#[derive(Debug)]
pub struct LoadedConfig {
    pub source: Source,
    pub agents: BTreeSet<AgentName>,
    pub default_agent: Option<AgentName>,
    pub table: GrantsTable,
    /// `[store]`: where runs are kept.
    pub store: StoreSpec,
    pub server: ServerConfig,
    pub ingress: IngressConfig,
    pub mcp: McpConfig,
    pub memory: MemoryConfig,
    pub limits: AgentLimits,
    /// Each declared agent's back end and limits.
    pub agent_specs: BTreeMap<AgentName, AgentSpec>,
    pub telemetry: TelemetryConfig,
    /// The configured `[[schedules]]` (the built-in ones come from the schedule crate).
    pub schedules: Vec<ScheduleDecl>,
    /// `[slack]`, when present (the surface also needs its secrets in the environment).
    pub slack: Option<SlackConfig>,
    /// `[access]`, when present.
    pub access: Option<AccessConfig>,
    /// `[agent_policy]` and `[[agent_grants]]`: what the broker decides tool calls with.
    pub tool_policy: ToolPolicyConfig,
    /// `[repos]`.
    pub repos: dispatch::RepoSettings,
    /// `[retention]`.
    pub retention: RetentionConfig,
}

/// `[retention]`: what the store prunes, how often, in what batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionConfig {
    pub rules: store::Retention,
    pub interval: Duration,
}

/// The org's agent policy rules and the configured grants (docs/broker.md).
#[derive(Debug, Clone, Default)]
pub struct ToolPolicyConfig {
    pub org_rules: Vec<broker::rules::ToolRule>,
    /// Per agent and per repo; `{workspace}` resolved per run.
    pub grants: Vec<broker::GrantSpec>,
    pub approval_timeout: Duration,
    /// The agent that answers `agent_review`.
    pub reviewer: Option<AgentName>,
}

/// `[access]`, checked. The surface is on when `issuer` and `audience` are both set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessConfig {
    pub issuer: Option<String>,
    pub audience: Option<String>,
    /// The key set: `jwks_url`, `jwks_file`, or `<issuer>/cdn-cgi/access/certs`.
    pub jwks: Option<access_api::JwksSource>,
    pub header: String,
    pub cookie: String,
    pub jwks_ttl: Duration,
}

impl AccessConfig {
    /// The verifier's settings, or what the surface still needs to be on.
    pub fn settings(&self) -> Result<access_api::AccessSettings, &'static str> {
        let (issuer, audience) = match (&self.issuer, &self.audience) {
            (Some(i), Some(a)) => (i.clone(), a.clone()),
            (None, Some(_)) => return Err("[access] issuer"),
            (Some(_), None) => return Err("[access] audience"),
            (None, None) => return Err("[access] issuer and audience"),
        };
        Ok(access_api::AccessSettings {
            issuer,
            audience,
            jwks: self.jwks.clone().ok_or("[access] jwks_url or jwks_file")?,
            header: self.header.clone(),
            cookie: self.cookie.clone(),
            jwks_ttl: self.jwks_ttl,
        })
    }
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

/// `[server]`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// This process's name among replicas; default: the host name.
    pub replica_id: Option<ReplicaId>,
    /// Repo clones and agents' scratch space.
    pub data_dir: PathBuf,
    /// How long live runs may finish after a shutdown signal before they are interrupted.
    pub shutdown_grace: Duration,
    pub heartbeat: Duration,
    /// A replica whose heartbeat is older than this is dead; its live runs are tombstoned.
    pub lease: Duration,
    /// A file holding the agent-token secret (else `SWITCHBOARD_AGENT_TOKEN_SECRET`).
    pub agent_token_secret_file: Option<PathBuf>,
    /// Where people reach this server (`https://switchboard.example.com`): the base of the
    /// capability links handed to whoever starts a run. None: no links.
    pub public_url: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            replica_id: None,
            data_dir: PathBuf::from("./switchboard-data"),
            shutdown_grace: Duration::from_secs(10),
            heartbeat: Duration::from_secs(10),
            lease: Duration::from_secs(30),
            agent_token_secret_file: None,
            public_url: None,
        }
    }
}

/// `[mcp]`.
#[derive(Debug, Clone, Default)]
pub struct McpConfig {
    /// The surface is on when this is set and a token map exists.
    pub enabled: bool,
    pub settings: mcp::McpSettings,
    /// Where command agents reach `/mcp` (`SWITCHBOARD_MCP_URL`); default: this server's
    /// own address on loopback.
    pub agent_url: Option<String>,
}

/// `[memory]`.
#[derive(Debug, Clone, Default)]
pub struct MemoryConfig {
    pub settings: memory::MemorySettings,
    /// The agent whose back end the `model` extractor asks (set exactly when it is `model`).
    pub model_agent: Option<AgentName>,
}

/// `[ingress]`.
#[derive(Debug, Clone)]
pub struct IngressConfig {
    /// The token map as a JSON file (else `SWITCHBOARD_INGRESS_TOKENS`).
    pub tokens_file: Option<PathBuf>,
    pub max_body_bytes: usize,
}

impl Default for IngressConfig {
    fn default() -> Self {
        IngressConfig {
            tokens_file: None,
            max_body_bytes: 64 * 1024,
        }
    }
}

/// The limits in `[agents]`.
#[derive(Debug, Clone)]
pub struct AgentLimits {
    pub max_concurrent: usize,
    pub max_per_actor: usize,
    pub channel_directory_timeout: Duration,
    /// Environment variables a `command` agent inherits (everything else is scrubbed).
    pub env_allow: Vec<String>,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            max_concurrent: dispatch::DEFAULT_MAX_CONCURRENT,
            max_per_actor: dispatch::DEFAULT_MAX_PER_ACTOR,
            channel_directory_timeout: dispatch::DEFAULT_CHANNEL_DIRECTORY_TIMEOUT,
            env_allow: ["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER"]
                .map(String::from)
                .to_vec(),
        }
    }
}

/// An agent's back end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendSpec {
    Echo {
        behaviour: EchoBehaviour,
        delay: Duration,
    },
    Command {
        argv: Vec<String>,
        request_via: RequestVia,
        /// Under bubblewrap (the default; a project's deny_read sandboxes it regardless).
        sandbox: bool,
        /// Host paths bound in read-write and read-only, as written: absolute, or `~/…` (the
        /// server's `$HOME`, filled in when the agent is built).
        sandbox_bind: Vec<String>,
        sandbox_read_only: Vec<String>,
    },
    OpenAi {
        base_url: String,
        model: String,
        /// The environment variable holding the key; none sends no key (a local server).
        api_key_env: Option<String>,
        system_prompt: Option<String>,
    },
}

impl BackendSpec {
    /// Whether the back end works in a directory: each of its runs then gets one of its own.
    pub fn works_in_a_directory(&self) -> bool {
        matches!(self, BackendSpec::Command { .. }) || self.tool_model().is_some()
    }

    /// The model of a back end whose agent calls tools through the broker (`openai`); `None`
    /// for the others.
    pub fn tool_model(&self) -> Option<&str> {
        match self {
            BackendSpec::OpenAi { model, .. } => Some(model),
            BackendSpec::Echo { .. } | BackendSpec::Command { .. } => None,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            BackendSpec::Echo { .. } => "echo",
            BackendSpec::Command { .. } => "command",
            BackendSpec::OpenAi { .. } => "openai",
        }
    }
}

/// `[agents.<name>]`.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    pub backend: BackendSpec,
    /// The agent's kind for the broker's rules; `None` matches only rules that name no kind.
    pub kind: Option<String>,
    /// The agent that starts this one.
    pub parent: Option<AgentName>,
    pub timeout: Duration,
    pub caps: OutputCaps,
}

/// `[telemetry]`.
#[derive(Debug, Clone)]
pub struct TelemetryConfig {
    /// `human` (default) or `json` log lines.
    pub json_logs: bool,
    /// The OTLP/HTTP collector's base URL (`…/v1/traces` is appended); `None`: no export,
    /// and no network.
    pub otlp_endpoint: Option<String>,
    /// How many span lines `GET /admin/trace/log` keeps.
    pub span_log_capacity: usize,
    /// Audit lines go here (appended) instead of stderr.
    pub audit_file: Option<PathBuf>,
    /// `service.name` on exported spans.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            json_logs: false,
            otlp_endpoint: None,
            span_log_capacity: 1000,
            audit_file: None,
            service_name: "switchboard".to_owned(),
        }
    }
}

/// Picks the file: `--config`, else `SWITCHBOARD_CONFIG`, else `./switchboard.toml` if it
/// exists, else the embedded default.
pub fn choose(explicit: Option<&Path>) -> Source {
    if let Some(p) = explicit {
        return Source::File(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("SWITCHBOARD_CONFIG").filter(|p| !p.is_empty()) {
        return Source::File(PathBuf::from(p));
    }
    let local = Path::new("switchboard.toml");
    if local.exists() {
        return Source::File(local.to_path_buf());
    }
    Source::EmbeddedDefault
}

pub fn load(source: Source) -> Result<LoadedConfig, LoadError> {
    let text: Cow<'static, str> = match &source {
        Source::File(path) => std::fs::read_to_string(path).map(Cow::Owned).map_err(|e| {
            LoadError::new(
                &source,
                None,
                format!("cannot read the config file: {e} (pass --config with an existing file, or omit it to use the embedded default)"),
            )
        })?,
        Source::EmbeddedDefault => Cow::Borrowed(EMBEDDED_DEFAULT),
    };
    parse(source, &text)
}

/// Top-level keys that look like authorization but are not: refused by name.
const FORBIDDEN: [&str; 3] = ["permissions", "admins", "scopes"];

/// The text being parsed, for faults with positions.
struct Text<'a> {
    source: &'a Source,
    text: &'a str,
}

impl Text<'_> {
    /// A fault at a byte offset: `file:line:col: key: message`.
    fn at(&self, offset: usize, message: impl std::fmt::Display) -> LoadError {
        let key = path_at(self.text, offset)
            .map(|k| format!("{k}: "))
            .unwrap_or_default();
        LoadError::new(
            self.source,
            Some(line_col(self.text, offset)),
            format!("{key}{message}"),
        )
    }

    /// A fault at a key path (the deepest part of it the text defines).
    fn key(&self, path: &[&str], message: impl std::fmt::Display) -> LoadError {
        let owned: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
        LoadError::new(
            self.source,
            locate(self.text, path),
            format!("{}: {message}", dotted(&owned)),
        )
    }

    fn de(&self, e: &toml::de::Error) -> LoadError {
        match e.span() {
            Some(span) => self.at(span.start, e.message()),
            None => LoadError::new(self.source, None, e.message().to_owned()),
        }
    }
}

/// Parses config text. Public for tests and for `load`.
pub fn parse(source: Source, text: &str) -> Result<LoadedConfig, LoadError> {
    let t = Text {
        source: &source,
        text,
    };
    let doc: toml::Table = toml::from_str(text).map_err(|e| {
        let position = e.span().map(|s| line_col(text, s.start));
        LoadError::new(
            &source,
            position,
            format!("not valid TOML: {}", e.message()),
        )
    })?;
    if let Some(key) = FORBIDDEN.into_iter().find(|k| doc.contains_key(*k)) {
        let problem = authz_core::ConfigProblem::ForbiddenKey(key.to_owned());
        return Err(t.key(&[key], problem));
    }
    let sections: FileSections = toml::from_str(text).map_err(|e| t.de(&e))?;
    let agents_section = &sections.agents;
    let agents: BTreeSet<AgentName> = agents_section.tables.keys().cloned().collect();
    let default_agent = match &agents_section.default {
        None => None,
        Some(name) => Some(declared_agent(&t, name, &agents)?),
    };
    // authz-core names the key itself (`restrict.agents[0]`); the position is located here.
    let mut table = GrantsTable::from_config(&doc, agents.clone())
        .map_err(|e| LoadError::new(&source, locate(text, &key_segments(&e.key)), e.to_string()))?;
    let schedules = schedules(&t, &sections.schedules, &agents)?;
    for (decl, grants) in schedule::builtin() {
        table.declare_schedule(decl.name, grants);
    }
    for decl in &schedules {
        // A configured schedule declares nothing: its grants are its `[grants]` entry.
        table.declare_schedule(decl.name.clone(), NO_GRANTS);
    }
    let agent_specs = agents_section
        .tables
        .iter()
        .map(|(name, a)| Ok((name.clone(), agent_spec(&t, name, a)?)))
        .collect::<Result<BTreeMap<_, _>, LoadError>>()?;
    check_lineage(&t, &agents_section.tables, &agent_specs)?;
    let tool_policy = tool_policy(&t, &sections, &agents)?;
    let retention = retention(&t, &sections.retention)?;
    Ok(LoadedConfig {
        store: store_spec(&t, &sections.store)?,
        server: server(&t, &sections.server)?,
        ingress: IngressConfig {
            tokens_file: sections.ingress.tokens_file.clone(),
            max_body_bytes: sections
                .ingress
                .max_body_bytes
                .map_or(IngressConfig::default().max_body_bytes, |n| n.usize()),
        },
        mcp: mcp_config(&sections.mcp),
        memory: memory_config(&t, &sections.memory, &agents)?,
        limits: limits(agents_section),
        telemetry: telemetry_config(&t, &sections.telemetry)?,
        slack: sections
            .slack
            .as_ref()
            .map(|s| slack_config(&t, s))
            .transpose()?,
        access: sections
            .access
            .as_ref()
            .map(|s| access_config(&t, s))
            .transpose()?,
        source,
        agents,
        default_agent,
        table,
        agent_specs,
        schedules,
        tool_policy,
        repos: repos(&sections.repos),
        retention,
    })
}

/// `[retention]`, its defaults where a key is absent; 0 days keeps a kind for ever.
fn retention(
    t: &Text<'_>,
    section: &sections::RetentionSection,
) -> Result<RetentionConfig, LoadError> {
    let default = store::Retention::default();
    let days = |key: Option<numbers::Whole>, default: Option<Duration>| match key {
        None => default,
        Some(numbers::Whole(0)) => None,
        Some(numbers::Whole(d)) => Some(Duration::from_secs(d.saturating_mul(24 * 3600))),
    };
    let batch = match section.batch {
        None => default.batch,
        Some(numbers::Whole(n)) if (1..=100_000).contains(&n) => n as u32,
        Some(_) => {
            return Err(t.key(
                &["retention", "batch"],
                "expected a number of rows from 1 to 100000, like batch = 500",
            ));
        }
    };
    let interval = match section.interval_minutes {
        None => Duration::from_secs(3600),
        Some(numbers::Whole(m)) if m >= 1 => Duration::from_secs(m.saturating_mul(60)),
        Some(_) => {
            return Err(t.key(
                &["retention", "interval_minutes"],
                "expected at least 1, like interval_minutes = 60",
            ));
        }
    };
    Ok(RetentionConfig {
        rules: store::Retention {
            slack_events: days(section.slack_event_days, default.slack_events),
            slack_threads: days(section.slack_thread_days, default.slack_threads),
            approvals: days(section.approval_days, default.approvals),
            firings: days(section.firing_days, default.firings),
            runs: days(section.run_days, default.runs),
            batch,
        },
        interval,
    })
}

/// `[repos]`, its defaults where a key is absent.
fn repos(section: &sections::ReposSection) -> dispatch::RepoSettings {
    let default = dispatch::RepoSettings::default();
    dispatch::RepoSettings {
        fetch_interval: section
            .fetch_interval_seconds
            .map_or(default.fetch_interval, |w| {
                std::time::Duration::from_secs(w.0)
            }),
        branch_retention: match section.branch_retention_days {
            None => default.branch_retention,
            Some(numbers::Whole(0)) => None,
            Some(numbers::Whole(days)) => Some(std::time::Duration::from_secs(
                days.saturating_mul(24 * 3600),
            )),
        },
    }
}

/// `[[schedules]]`: each a unique name (not a built-in one), a cron and zone that parse, and
/// what it runs: a command, or a prompt for a declared agent.
fn schedules(
    t: &Text<'_>,
    entries: &[toml::Spanned<ScheduleSection>],
    agents: &BTreeSet<AgentName>,
) -> Result<Vec<ScheduleDecl>, LoadError> {
    let builtin: Vec<ScheduleName> = schedule::builtin()
        .into_iter()
        .map(|(d, _)| d.name)
        .collect();
    let mut out: Vec<ScheduleDecl> = Vec::new();
    for entry in entries {
        let e = entry.get_ref();
        let name =
            ScheduleName::parse(e.name.get_ref()).map_err(|err| t.at(e.name.span().start, err))?;
        if builtin.contains(&name) || out.iter().any(|d| d.name == name) {
            return Err(t.at(
                e.name.span().start,
                format!(
                    "`{name}` is already a schedule; give each [[schedules]] entry its own name"
                ),
            ));
        }
        let zone = e.time_zone.as_ref();
        let cron = CronSpec::parse(e.cron.get_ref(), zone.map_or("UTC", |z| z.get_ref())).map_err(
            |err| {
                let at = match (&err, zone) {
                    (schedule::CronSpecError::Zone(_), Some(z)) => z.span().start,
                    _ => e.cron.span().start,
                };
                t.at(at, format!("schedule `{name}`: {err}"))
            },
        )?;
        let fires = match (&e.command, &e.agent, &e.prompt) {
            (Some(command), None, None) => Fires::Command(command.get_ref().trim().to_owned()),
            (None, Some(agent), Some(prompt)) => Fires::Prompt {
                agent: declared_agent(t, agent, agents)?,
                prompt: prompt.get_ref().clone(),
            },
            _ => {
                return Err(t.at(
                    entry.span().start,
                    format!("schedule `{name}` runs either `command = \"…\"` or `agent = \"…\"` with `prompt = \"…\"`, exactly one of them"),
                ));
            }
        };
        out.push(ScheduleDecl { name, cron, fires });
    }
    Ok(out)
}

/// An http(s) URL with a host and no query or fragment, as written (a trailing `/` kept).
fn is_base_url(url: &str) -> bool {
    // No user part in the host (`http://localhost:80@elsewhere/` goes elsewhere), and no
    // backslash, which URL parsers read as a slash.
    let authority_ok = |r: &str| {
        !r.split('/')
            .next()
            .unwrap_or_default()
            .contains(['@', '\\'])
    };
    url.strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .is_some_and(|r| {
            !(r.is_empty() || r.starts_with('/') || r.contains(['?', '#', ' '])) && authority_ok(r)
        })
}

/// Whether `url` is a base URL a secret may be sent to: https, or http on loopback only.
fn is_secret_safe_base_url(url: &str) -> bool {
    is_base_url(url) && (url.starts_with("https://") || is_loopback_http(url))
}

/// `[slack]`: the mode, an http(s) API base URL, a TTL above 0.
fn slack_config(t: &Text<'_>, section: &sections::SlackSection) -> Result<SlackConfig, LoadError> {
    let mut c = SlackConfig::default();
    if let Some(mode) = section.mode {
        c.mode = match mode {
            sections::SlackModeKey::Events => slack::SlackMode::Events,
            sections::SlackModeKey::Socket => slack::SlackMode::Socket,
        };
    }
    if let Some(url) = &section.api_url {
        if !is_secret_safe_base_url(url.get_ref()) {
            return Err(t.at(
                url.span().start,
                "must be the Web API's https base URL, like \"https://slack.com/api/\" (the method name is appended; the bot token travels with every call, so plain http is accepted on loopback only)",
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

/// Whether an http URL's host is loopback (tests and sidecars may skip TLS there).
fn is_loopback_http(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn non_empty(t: &Text<'_>, v: &Option<toml::Spanned<String>>) -> Result<Option<String>, LoadError> {
    match v {
        None => Ok(None),
        Some(s) if s.get_ref().trim().is_empty() => Err(t.at(
            s.span().start,
            "must not be empty; remove the key to leave it unset",
        )),
        Some(s) => Ok(Some(s.get_ref().clone())),
    }
}

/// `[access]`: an https key-set URL (http on loopback only) or a file, not both; a header
/// name and a cookie name that are names; a TTL of at least a second.
fn access_config(t: &Text<'_>, s: &sections::AccessSection) -> Result<AccessConfig, LoadError> {
    let issuer = non_empty(t, &s.issuer)?;
    let audience = non_empty(t, &s.audience)?;
    let jwks = match (&s.jwks_url, &s.jwks_file) {
        (Some(url), Some(_)) => {
            return Err(t.at(url.span().start, "set jwks_url or jwks_file, not both"));
        }
        (Some(url), None) => {
            let u = url.get_ref();
            if !is_secret_safe_base_url(u) {
                return Err(t.at(
                    url.span().start,
                    "must be the issuer's https key-set URL, like \"https://acme.cloudflareaccess.com/cdn-cgi/access/certs\" (http only on a loopback host)",
                ));
            }
            Some(access_api::JwksSource::Url(u.clone()))
        }
        (None, Some(file)) => Some(access_api::JwksSource::File(file.get_ref().clone())),
        (None, None) => match &issuer {
            Some(i) if i.starts_with("https://") && is_base_url(i) => {
                Some(access_api::JwksSource::Url(format!(
                    "{}/cdn-cgi/access/certs",
                    i.trim_end_matches('/')
                )))
            }
            Some(_) => {
                let at = s.issuer.as_ref().map_or(0, |i| i.span().start);
                return Err(t.at(
                    at,
                    "is not an https URL, so the key set cannot be found from it; set jwks_url or jwks_file",
                ));
            }
            None => None,
        },
    };
    let header = match &s.header {
        Some(h) if axum::http::HeaderName::from_bytes(h.get_ref().as_bytes()).is_err() => {
            return Err(t.at(
                h.span().start,
                "must be an HTTP header name, like \"Cf-Access-Jwt-Assertion\"",
            ));
        }
        Some(h) => h.get_ref().to_ascii_lowercase(),
        None => "cf-access-jwt-assertion".to_owned(),
    };
    let cookie = match &s.cookie {
        Some(c)
            if c.get_ref().is_empty()
                || !c
                    .get_ref()
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b)) =>
        {
            return Err(t.at(
                c.span().start,
                "must be a cookie name (letters, digits, `_`, `-`, `.`), like \"CF_Authorization\"",
            ));
        }
        Some(c) => c.get_ref().clone(),
        None => "CF_Authorization".to_owned(),
    };
    Ok(AccessConfig {
        issuer,
        audience,
        jwks,
        header,
        cookie,
        jwks_ttl: s
            .jwks_ttl_seconds
            .map_or(Duration::from_secs(3600), |n| n.seconds()),
    })
}

/// `[telemetry]`: the endpoint must be an http(s) URL with a host; a capacity above 0.
fn telemetry_config(
    t: &Text<'_>,
    section: &sections::TelemetrySection,
) -> Result<TelemetryConfig, LoadError> {
    let mut c = TelemetryConfig {
        json_logs: section.log_format == Some(LogFormat::Json),
        audit_file: section.audit_file.clone(),
        ..TelemetryConfig::default()
    };
    if let Some(endpoint) = &section.otlp_endpoint {
        let url = endpoint.get_ref().trim_end_matches('/');
        if !is_base_url(url) {
            return Err(t.at(
                endpoint.span().start,
                "must be the collector's http(s) base URL, like \"http://127.0.0.1:4318\" (/v1/traces is appended)",
            ));
        }
        c.otlp_endpoint = Some(url.to_owned());
    }
    if let Some(n) = section.span_log_capacity {
        c.span_log_capacity = n.usize();
    }
    if let Some(name) = &section.service_name {
        if name.get_ref().trim().is_empty() {
            return Err(t.at(name.span().start, "must not be empty"));
        }
        c.service_name = name.get_ref().clone();
    }
    Ok(c)
}

fn mcp_config(section: &sections::McpSection) -> McpConfig {
    let mut settings = mcp::McpSettings::default();
    if let Some(hosts) = &section.allowed_hosts {
        settings.allowed_hosts = hosts.iter().map(|h| h.0.clone()).collect();
    }
    if let Some(n) = section.max_body_bytes {
        settings.max_body_bytes = n.usize();
    }
    if let Some(n) = section.tools_page_size {
        settings.page_size = n.usize();
    }
    McpConfig {
        enabled: section.enabled,
        settings,
        agent_url: section.agent_url.as_ref().map(|u| u.0.clone()),
    }
}

/// A config value naming an agent: it must be one `[agents.<name>]` declares.
fn declared_agent(
    t: &Text<'_>,
    name: &toml::Spanned<String>,
    agents: &BTreeSet<AgentName>,
) -> Result<AgentName, LoadError> {
    AgentName::parse(name.get_ref())
        .ok()
        .filter(|n| agents.contains(n))
        .ok_or_else(|| {
            t.at(
                name.span().start,
                format!(
                    "`{0}` is not a declared agent; declare [agents.{0}] or name one that is",
                    name.get_ref()
                ),
            )
        })
}

/// The most records a context block may hold: the store's page bound.
const MAX_CONTEXT_RECORDS: u64 = 1_000;

fn memory_config(
    t: &Text<'_>,
    section: &sections::MemorySection,
    agents: &BTreeSet<AgentName>,
) -> Result<MemoryConfig, LoadError> {
    let mut settings = memory::MemorySettings::default();
    let model = section.extractor == Some(sections::ExtractorName::Model);
    if model {
        settings.extractor = memory::ExtractorKind::Model;
    }
    let model_agent = match (&section.model_agent, model) {
        (None, false) => None,
        (None, true) => {
            return Err(t.key(
                &["memory", "extractor"],
                "the model extractor needs `model_agent`, the declared agent whose back end it asks, like model_agent = \"assistant\"",
            ));
        }
        (Some(name), false) => {
            return Err(t.at(
                name.span().start,
                "is read only by the model extractor; set extractor = \"model\" or remove it",
            ));
        }
        (Some(name), true) => Some(declared_agent(t, name, agents)?),
    };
    if let Some(n) = &section.context_max_records {
        if n.get_ref().0 > MAX_CONTEXT_RECORDS {
            return Err(t.at(
                n.span().start,
                format!("must be at most {MAX_CONTEXT_RECORDS}"),
            ));
        }
        settings.context_max_records = u32::try_from(n.get_ref().0).unwrap_or(1_000);
    }
    if let Some(n) = section.context_max_chars {
        settings.context_max_chars = n.usize();
    }
    if let Some(n) = section.reflection_timeout_seconds {
        settings.reflection_timeout = n.seconds();
    }
    Ok(MemoryConfig {
        settings,
        model_agent,
    })
}

/// `[agent_policy]` and `[[agent_grants]]`: the org's rules, and grants checked whole at
/// load (a unique id, a declared agent, a repo slug, a tool, paths and hosts of its shape, an
/// expiry that parses) so a run never meets a grant it cannot read.
fn tool_policy(
    t: &Text<'_>,
    s: &FileSections,
    agents: &BTreeSet<AgentName>,
) -> Result<ToolPolicyConfig, LoadError> {
    let mut seen = BTreeSet::new();
    for spanned in &s.agent_grants {
        let spec = spanned.get_ref();
        let at = spanned.span().start;
        if !seen.insert(spec.id.clone()) {
            return Err(t.at(
                at,
                format!("grant id {:?} appears twice; ids are unique", spec.id),
            ));
        }
        if let Some(agent) = &spec.agent {
            let declared = AgentName::parse(agent).is_ok_and(|a| agents.contains(&a));
            if !declared {
                return Err(t.at(
                    at,
                    format!("grant {:?}: agent {agent:?} is not a declared agent; declare [agents.{agent}] or remove agent", spec.id),
                ));
            }
        }
        if let Some(repo) = &spec.repo {
            RepoSlug::parse(repo)
                .map_err(|e| t.at(at, format!("grant {:?}: repo: {e}", spec.id)))?;
        }
        spec.resolve(std::path::Path::new("/workspace"))
            .map_err(|e| t.at(at, e.to_string()))?;
    }
    let org = s.agent_policy.clone().unwrap_or_default();
    let approval_timeout = match org.approval_timeout_seconds {
        None => Duration::from_secs(300),
        Some(0) => {
            return Err(t.key(
                &["agent_policy", "approval_timeout_seconds"],
                "must be at least 1 (an ask nobody can answer in time is refused)",
            ));
        }
        Some(n) => Duration::from_secs(n),
    };
    let reviewer = match &org.reviewer {
        None => None,
        Some(name) => Some(
            AgentName::parse(name)
                .ok()
                .filter(|a| agents.contains(a))
                .ok_or_else(|| {
                    t.key(
                        &["agent_policy", "reviewer"],
                        format!("`{name}` is not a declared agent; declare [agents.{name}] or remove reviewer"),
                    )
                })?,
        ),
    };
    Ok(ToolPolicyConfig {
        reviewer,
        org_rules: org.rules(),
        grants: s.agent_grants.iter().map(|g| g.get_ref().clone()).collect(),
        approval_timeout,
    })
}

fn server(t: &Text<'_>, s: &sections::ServerSection) -> Result<ServerConfig, LoadError> {
    let d = ServerConfig::default();
    let heartbeat = s.heartbeat_seconds.map_or(d.heartbeat, |n| n.seconds());
    let lease = match &s.lease_seconds {
        None => d.lease,
        Some(l) => {
            let lease = l.get_ref().seconds();
            if lease <= heartbeat {
                return Err(t.at(
                    l.span().start,
                    "must be longer than heartbeat_seconds (three heartbeats is a good lease)",
                ));
            }
            lease
        }
    };
    if lease <= heartbeat {
        return Err(t.key(
            &["server", "heartbeat_seconds"],
            "must be shorter than lease_seconds (30 by default)",
        ));
    }
    Ok(ServerConfig {
        listen: s.listen.map_or(d.listen, |l| l.0),
        replica_id: s.replica_id.clone().map(|r| r.0),
        data_dir: s.data_dir.clone().unwrap_or(d.data_dir),
        shutdown_grace: s
            .shutdown_grace_seconds
            .map_or(d.shutdown_grace, |n| n.seconds()),
        heartbeat,
        lease,
        agent_token_secret_file: s.agent_token_secret_file.clone(),
        public_url: match &s.public_url {
            None => None,
            Some(url) if is_base_url(url.get_ref()) => {
                Some(url.get_ref().trim_end_matches('/').to_owned())
            }
            Some(url) => {
                return Err(t.at(
                    url.span().start,
                    "must be where people reach this server, an http(s) URL like \"https://switchboard.example.com\"",
                ));
            }
        },
    })
}

fn store_spec(t: &Text<'_>, s: &sections::StoreSection) -> Result<StoreSpec, LoadError> {
    let url = match &s.url {
        Some(u) => u.0.clone(),
        None => StoreUrl::parse(DEFAULT_STORE_URL)
            .map_err(|e| LoadError::new(t.source, None, e.to_string()))?,
    };
    if let (Some(schema), false) = (&s.schema, matches!(url, StoreUrl::Postgres(_))) {
        return Err(t.at(
            schema.span().start,
            "only a postgres:// store has schemas; remove it, or use a postgres URL",
        ));
    }
    Ok(StoreSpec {
        url,
        schema: s.schema.as_ref().map(|v| v.get_ref().clone()),
        max_connections: s
            .max_connections
            .map(|n| u32::try_from(n.0).unwrap_or(u32::MAX)),
    })
}

fn limits(a: &agents::AgentsSection) -> AgentLimits {
    let d = AgentLimits::default();
    AgentLimits {
        max_concurrent: a.max_concurrent.map_or(d.max_concurrent, |n| n.usize()),
        max_per_actor: a.max_per_actor.map_or(d.max_per_actor, |n| n.usize()),
        channel_directory_timeout: a
            .channel_directory_timeout_ms
            .map_or(d.channel_directory_timeout, |n| n.millis()),
        env_allow: a.env_allow.clone().unwrap_or(d.env_allow),
    }
}

/// `kind`: one name of `[a-z0-9_-]`, as the broker's rules name agent kinds.
fn agent_kind(t: &Text<'_>, a: &AgentTable) -> Result<Option<String>, LoadError> {
    let Some(kind) = &a.kind else {
        return Ok(None);
    };
    broker::rules::NamePattern::parse(kind.get_ref(), broker::rules::Charset::Lower)
        .ok()
        .filter(|p| matches!(p, broker::rules::NamePattern::Exact(name) if !name.contains('.')))
        .ok_or_else(|| {
            t.at(
                kind.span().start,
                "an agent kind is one name of [a-z0-9_-], like kind = \"main\" or kind = \"reviewer\"",
            )
        })?;
    Ok(Some(kind.get_ref().clone()))
}

/// Each `parent` names another declared agent, and following parents never comes back to
/// where it started.
fn check_lineage(
    t: &Text<'_>,
    tables: &BTreeMap<AgentName, AgentTable>,
    specs: &BTreeMap<AgentName, AgentSpec>,
) -> Result<(), LoadError> {
    for (name, spec) in specs {
        let Some(parent) = &spec.parent else { continue };
        let at = tables
            .get(name)
            .and_then(|a| a.parent.as_ref())
            .map_or(0, |p| p.span().start);
        if parent == name {
            return Err(t.at(at, "an agent cannot be its own parent"));
        }
        if !specs.contains_key(parent) {
            return Err(t.at(
                at,
                format!("names {parent}, which is not a declared agent; declare [agents.{parent}] or remove parent"),
            ));
        }
        let mut seen = vec![name];
        let mut next = Some(parent);
        while let Some(current) = next {
            if seen.contains(&current) {
                return Err(t.at(
                    at,
                    format!(
                        "agent {name}'s parents lead back to {current}: parents cannot form a cycle"
                    ),
                ));
            }
            seen.push(current);
            next = specs.get(current).and_then(|s| s.parent.as_ref());
        }
    }
    Ok(())
}

/// `sandbox_bind` / `sandbox_read_only`: each an absolute path or one under `~/`, with no `..`.
fn bind_paths(
    t: &Text<'_>,
    paths: Option<&toml::Spanned<Vec<toml::Spanned<String>>>>,
) -> Result<Vec<String>, LoadError> {
    let Some(paths) = paths else {
        return Ok(Vec::new());
    };
    paths
        .get_ref()
        .iter()
        .map(|p| {
            let text = p.get_ref();
            let rest = text.strip_prefix("~/").unwrap_or(text);
            let rooted = text.starts_with('/') || text.starts_with("~/");
            let climbs = rest.split('/').any(|part| part == "..");
            if !rooted || climbs || rest.trim_matches('/').is_empty() {
                return Err(t.at(
                    p.span().start,
                    format!(
                        "`{text}` must be an absolute path or one under ~/, without `..`, naming more than the root, like \"~/.claude\""
                    ),
                ));
            }
            Ok(text.clone())
        })
        .collect()
}

/// An agent's table as the typed back end it names (`echo` by default), refusing keys of
/// another back end and naming a missing one.
fn agent_spec(t: &Text<'_>, name: &AgentName, a: &AgentTable) -> Result<AgentSpec, LoadError> {
    let kind = a.backend.unwrap_or(BackendKind::Echo);
    let own = kind.own_keys();
    if let Some((key, at)) = a.backend_keys().into_iter().find(|(k, _)| !own.contains(k)) {
        return Err(t.at(
            at,
            format!(
                "`{key}` is not a setting of the {} back end; it takes {}",
                kind.as_str(),
                own.join(", ")
            ),
        ));
    }
    let missing = |key: &str, example: &str| {
        t.key(
            &["agents", name.as_str(), key],
            format!(
                "is required by the {} back end, like {example}",
                kind.as_str()
            ),
        )
    };
    let backend = match kind {
        BackendKind::Echo => BackendSpec::Echo {
            behaviour: a
                .behaviour
                .as_ref()
                .map_or(EchoBehaviour::Answer, |b| (*b.get_ref()).into()),
            delay: a
                .delay_ms
                .as_ref()
                .map_or(Duration::ZERO, |d| Duration::from_millis(d.get_ref().0)),
        },
        BackendKind::Command => {
            let argv = a
                .command
                .as_ref()
                .ok_or_else(|| missing("command", "command = [\"claude\", \"-p\"]"))?;
            if argv.get_ref().first().is_none_or(|p| p.trim().is_empty()) {
                return Err(t.at(
                    argv.span().start,
                    "name the program and its arguments, like command = [\"claude\", \"-p\"]",
                ));
            }
            BackendSpec::Command {
                argv: argv.get_ref().clone(),
                request_via: a
                    .request_via
                    .as_ref()
                    .map_or(RequestVia::Stdin, |v| (*v.get_ref()).into()),
                sandbox: a.sandbox.as_ref().is_none_or(|v| *v.get_ref()),
                sandbox_bind: bind_paths(t, a.sandbox_bind.as_ref())?,
                sandbox_read_only: bind_paths(t, a.sandbox_read_only.as_ref())?,
            }
        }
        BackendKind::Openai => BackendSpec::OpenAi {
            base_url: a
                .base_url
                .as_ref()
                .ok_or_else(|| missing("base_url", "base_url = \"https://api.openai.com/v1\""))?
                .get_ref()
                .clone(),
            model: a
                .model
                .as_ref()
                .ok_or_else(|| missing("model", "model = \"gpt-4o-mini\""))?
                .get_ref()
                .clone(),
            api_key_env: a.api_key_env.as_ref().map(|v| v.get_ref().clone()),
            system_prompt: a.system_prompt.as_ref().map(|v| v.get_ref().clone()),
        },
    };
    let caps = OutputCaps::default();
    Ok(AgentSpec {
        backend,
        kind: agent_kind(t, a)?,
        parent: a
            .parent
            .as_ref()
            .map(|p| AgentName::parse(p.get_ref()).map_err(|e| t.at(p.span().start, e.to_string())))
            .transpose()?,
        timeout: a
            .timeout_seconds
            .map_or(Duration::from_secs(600), |n| n.seconds()),
        caps: OutputCaps {
            event_bytes: a.max_event_bytes.map_or(caps.event_bytes, |n| n.usize()),
            total_bytes: a.max_output_bytes.map_or(caps.total_bytes, |n| n.usize()),
            answer_bytes: a.max_answer_bytes.map_or(caps.answer_bytes, |n| n.usize()),
        },
    })
}

#[cfg(test)]
mod tests;
