//! Loading the config file: which file, TOML syntax, every section this build reads
//! (`[server]`, `[store]`, `[ingress]`, `[agents]` and each `[agents.<name>]`, `[grants.*]`,
//! `[restrict]`, `[telemetry]`), and the grants table (parsed by authz-core). Every error
//! names the file, the key and, where the text tells, the line and column.
//!
//! Sections whose surfaces are not part of this build (`[slack]`, `[mcp]`, `[access]`,
//! `[[schedules]]`, `[memory]`, `[agent_policy]`, `[[agent_grants]]`) may be present but
//! empty: a key in one fails the load, so nobody believes a surface is on when it is not.
//!
//! Secrets never come from this file: the server reads them from the environment or from
//! files this config names (`secrets.rs`).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agents::{EchoBehaviour, OutputCaps, RequestVia};
use authz_core::{AgentName, GrantSet, Grants, GrantsTable, ScheduleName};
use toml::{Table, Value};

/// The embedded default: what `switchboard` uses with no file at all.
pub const EMBEDDED_DEFAULT: &str = include_str!("../../../config/switchboard.default.toml");

/// Every top-level section the config file may hold (operations.md).
pub const SECTIONS: [&str; 14] = [
    "server",
    "store",
    "slack",
    "ingress",
    "mcp",
    "access",
    "agents",
    "grants",
    "restrict",
    "schedules",
    "memory",
    "agent_policy",
    "agent_grants",
    "telemetry",
];

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
    /// `[store] url`: `sqlite://…`, `postgres://…` or `memory:`.
    pub store_url: String,
    pub server: ServerConfig,
    pub ingress: IngressConfig,
    pub limits: AgentLimits,
    /// Each declared agent's back end and limits.
    pub agent_specs: BTreeMap<AgentName, AgentSpec>,
    pub telemetry: TelemetryConfig,
}

/// `[server]`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// This process's name among replicas; default: the host name.
    pub replica_id: Option<String>,
    /// Repo clones and agents' scratch space.
    pub data_dir: PathBuf,
    /// How long live runs may finish after a shutdown signal before they are interrupted.
    pub shutdown_grace: Duration,
    pub heartbeat: Duration,
    /// A replica whose heartbeat is older than this is dead; its live runs are tombstoned.
    pub lease: Duration,
    /// A file holding the agent-token secret (else `SWITCHBOARD_AGENT_TOKEN_SECRET`).
    pub agent_token_secret_file: Option<PathBuf>,
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
        }
    }
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
            max_concurrent: 16,
            max_per_actor: 4,
            channel_directory_timeout: Duration::from_millis(1500),
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
    pub timeout: Duration,
    pub caps: OutputCaps,
}

/// `[telemetry]`.
#[derive(Debug, Clone, Default)]
pub struct TelemetryConfig {
    /// `human` (default) or `json` log lines.
    pub json_logs: bool,
}

/// Where runs are kept when the config names no store: a SQLite file in the working directory.
pub const DEFAULT_STORE_URL: &str = "sqlite://./switchboard.db";

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

/// Parses config text. Public for tests and for `load`.
pub fn parse(source: Source, text: &str) -> Result<LoadedConfig, LoadError> {
    let doc: Table = toml::from_str(text).map_err(|e| {
        let position = e.span().map(|s| line_col(text, s.start));
        LoadError::new(
            &source,
            position,
            format!("not valid TOML: {}", e.message()),
        )
    })?;
    let locate = |path: &[&str]| locate(text, path);
    for key in doc.keys() {
        let known = SECTIONS.contains(&key.as_str());
        let authz_looking = matches!(key.as_str(), "permissions" | "admins" | "scopes");
        if !known && !authz_looking {
            return Err(LoadError::new(
                &source,
                locate(&[key]),
                format!(
                    "unknown top-level key `{key}`; the sections are {}",
                    SECTIONS.join(", ")
                ),
            ));
        }
    }
    let (agents, default_agent) = parse_agents(&doc).map_err(|(path, msg)| {
        let segments: Vec<&str> = path.iter().map(String::as_str).collect();
        LoadError::new(&source, locate(&segments), msg)
    })?;
    let mut table = GrantsTable::from_config(&doc, agents.clone())
        .map_err(|e| LoadError::new(&source, locate(&key_segments(&e.key)), e.to_string()))?;
    for (name, grants) in builtin_schedules() {
        table.declare_schedule(name, grants);
    }
    let fault = |(path, msg): KeyFault| {
        let segments: Vec<&str> = path.iter().map(String::as_str).collect();
        LoadError::new(&source, locate(&segments), msg)
    };
    let store_url = parse_store(&doc).map_err(fault)?;
    let server = parse_server(&doc).map_err(fault)?;
    let ingress = parse_ingress(&doc).map_err(fault)?;
    let (limits, agent_specs) = parse_agent_specs(&doc).map_err(fault)?;
    let telemetry = parse_telemetry(&doc).map_err(fault)?;
    for section in UNBUILT_SECTIONS {
        check_unbuilt(&doc, section).map_err(fault)?;
    }
    Ok(LoadedConfig {
        source,
        agents,
        default_agent,
        table,
        store_url,
        server,
        ingress,
        limits,
        agent_specs,
        telemetry,
    })
}

/// Sections of surfaces this build does not have, and what brings them.
const UNBUILT_SECTIONS: [(&str, &str); 7] = [
    ("slack", "the Slack surface"),
    ("mcp", "the MCP surface"),
    ("access", "the Access /api surface"),
    ("schedules", "the scheduler"),
    ("memory", "memory"),
    ("agent_policy", "the tool broker"),
    ("agent_grants", "the tool broker"),
];

fn check_unbuilt(doc: &Table, (section, what): (&str, &str)) -> Result<(), KeyFault> {
    // Where the fault points: the section's first key, or the section itself.
    let at = match doc.get(section) {
        None => return Ok(()),
        Some(Value::Table(t)) if t.is_empty() => return Ok(()),
        Some(Value::Array(a)) if a.is_empty() => return Ok(()),
        Some(Value::Table(t)) => {
            let mut at = vec![section.to_owned()];
            at.extend(t.keys().next().cloned());
            at
        }
        Some(_) => vec![section.to_owned()],
    };
    Err((
        at,
        format!(
            "[{section}] is read by {what}, which is not part of this build; remove the section (or leave it empty) until it lands"
        ),
    ))
}

/// A table of one section, with typed getters whose faults name the key.
struct Section<'a> {
    table: &'a Table,
    path: Vec<String>,
}

impl<'a> Section<'a> {
    fn of(doc: &'a Table, name: &str) -> Result<Option<Self>, KeyFault> {
        match doc.get(name) {
            None => Ok(None),
            Some(Value::Table(table)) => Ok(Some(Section {
                table,
                path: vec![name.to_owned()],
            })),
            Some(_) => Err((
                vec![name.to_owned()],
                format!("{name}: must be a table ([{name}])"),
            )),
        }
    }

    fn dotted(&self) -> String {
        self.path.join(".")
    }

    fn at(&self, key: &str) -> Vec<String> {
        let mut p = self.path.clone();
        p.push(key.to_owned());
        p
    }

    fn fault(&self, key: &str, msg: impl std::fmt::Display) -> KeyFault {
        (self.at(key), format!("{}.{key}: {msg}", self.dotted()))
    }

    /// Fails on the first key not in `known`.
    fn only(&self, known: &[&str]) -> Result<(), KeyFault> {
        for key in self.table.keys() {
            if !known.contains(&key.as_str()) {
                return Err(self.fault(
                    key,
                    format!(
                        "unknown key; [{}] takes {}",
                        self.dotted(),
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn string(&self, key: &str) -> Result<Option<&'a str>, KeyFault> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(self.fault(key, "must be a string")),
        }
    }

    fn positive(&self, key: &str) -> Result<Option<u64>, KeyFault> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::Integer(n)) if *n > 0 => Ok(u64::try_from(*n).ok()),
            Some(_) => Err(self.fault(key, "must be a whole number above 0")),
        }
    }

    fn whole(&self, key: &str) -> Result<Option<u64>, KeyFault> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::Integer(n)) if *n >= 0 => Ok(u64::try_from(*n).ok()),
            Some(_) => Err(self.fault(key, "must be a whole number, 0 or more")),
        }
    }

    fn strings(&self, key: &str) -> Result<Option<Vec<String>>, KeyFault> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| self.fault(key, "must be a list of strings")),
            Some(_) => Err(self.fault(key, "must be a list of strings")),
        }
    }

    fn seconds(&self, key: &str) -> Result<Option<Duration>, KeyFault> {
        Ok(self.positive(key)?.map(Duration::from_secs))
    }

    fn millis(&self, key: &str) -> Result<Option<Duration>, KeyFault> {
        Ok(self.positive(key)?.map(Duration::from_millis))
    }

    fn usize(&self, key: &str) -> Result<Option<usize>, KeyFault> {
        Ok(self.positive(key)?.and_then(|n| usize::try_from(n).ok()))
    }
}

fn parse_server(doc: &Table) -> Result<ServerConfig, KeyFault> {
    let mut c = ServerConfig::default();
    let Some(s) = Section::of(doc, "server")? else {
        return Ok(c);
    };
    s.only(&[
        "listen",
        "replica_id",
        "data_dir",
        "shutdown_grace_seconds",
        "heartbeat_seconds",
        "lease_seconds",
        "agent_token_secret_file",
    ])?;
    if let Some(listen) = s.string("listen")? {
        c.listen = listen.parse().map_err(|_| {
            s.fault("listen", format!("{listen:?} is not an address; use host:port with an IP, like \"127.0.0.1:8080\" or \"0.0.0.0:8080\""))
        })?;
    }
    if let Some(id) = s.string("replica_id")? {
        store::ReplicaId::parse(id).map_err(|e| s.fault("replica_id", e))?;
        c.replica_id = Some(id.to_owned());
    }
    if let Some(dir) = s.string("data_dir")? {
        c.data_dir = PathBuf::from(dir);
    }
    c.shutdown_grace = s
        .seconds("shutdown_grace_seconds")?
        .unwrap_or(c.shutdown_grace);
    c.heartbeat = s.seconds("heartbeat_seconds")?.unwrap_or(c.heartbeat);
    c.lease = s.seconds("lease_seconds")?.unwrap_or(c.lease);
    if c.lease <= c.heartbeat {
        return Err(s.fault(
            "lease_seconds",
            "must be longer than heartbeat_seconds (three heartbeats is a good lease)",
        ));
    }
    c.agent_token_secret_file = s.string("agent_token_secret_file")?.map(PathBuf::from);
    Ok(c)
}

fn parse_ingress(doc: &Table) -> Result<IngressConfig, KeyFault> {
    let mut c = IngressConfig::default();
    let Some(s) = Section::of(doc, "ingress")? else {
        return Ok(c);
    };
    s.only(&["tokens_file", "max_body_bytes"])?;
    c.tokens_file = s.string("tokens_file")?.map(PathBuf::from);
    c.max_body_bytes = s.usize("max_body_bytes")?.unwrap_or(c.max_body_bytes);
    Ok(c)
}

fn parse_telemetry(doc: &Table) -> Result<TelemetryConfig, KeyFault> {
    let Some(s) = Section::of(doc, "telemetry")? else {
        return Ok(TelemetryConfig::default());
    };
    s.only(&["log_format"])?;
    let json_logs = match s.string("log_format")? {
        None | Some("human") => false,
        Some("json") => true,
        Some(other) => {
            return Err(s.fault(
                "log_format",
                format!("{other:?}: use \"human\" or \"json\""),
            ));
        }
    };
    Ok(TelemetryConfig { json_logs })
}

/// The keys `[agents]` itself takes (besides `[agents.<name>]` tables).
const AGENTS_KEYS: [&str; 5] = [
    "default",
    "max_concurrent",
    "max_per_actor",
    "channel_directory_timeout_ms",
    "env_allow",
];

const AGENT_KEYS: [&str; 14] = [
    "backend",
    "timeout_seconds",
    "max_event_bytes",
    "max_output_bytes",
    "max_answer_bytes",
    "behaviour",
    "delay_ms",
    "command",
    "request_via",
    "base_url",
    "model",
    "api_key_env",
    "system_prompt",
    "description",
];

fn parse_agent_specs(
    doc: &Table,
) -> Result<(AgentLimits, BTreeMap<AgentName, AgentSpec>), KeyFault> {
    let mut limits = AgentLimits::default();
    let mut specs = BTreeMap::new();
    let Some(s) = Section::of(doc, "agents")? else {
        return Ok((limits, specs));
    };
    for (key, value) in s.table {
        if AGENTS_KEYS.contains(&key.as_str()) {
            continue;
        }
        let Value::Table(table) = value else {
            return Err(s.fault(
                key,
                format!(
                    "unknown key; [agents] takes {} and [agents.<name>] tables",
                    AGENTS_KEYS.join(", ")
                ),
            ));
        };
        let Ok(name) = AgentName::parse(key) else {
            continue; // parse_agents has named this fault already
        };
        let agent = Section {
            table,
            path: vec!["agents".to_owned(), key.clone()],
        };
        specs.insert(name, parse_agent(&agent)?);
    }
    limits.max_concurrent = s.usize("max_concurrent")?.unwrap_or(limits.max_concurrent);
    limits.max_per_actor = s.usize("max_per_actor")?.unwrap_or(limits.max_per_actor);
    limits.channel_directory_timeout = s
        .millis("channel_directory_timeout_ms")?
        .unwrap_or(limits.channel_directory_timeout);
    if let Some(allow) = s.strings("env_allow")? {
        limits.env_allow = allow;
    }
    Ok((limits, specs))
}

fn parse_agent(a: &Section<'_>) -> Result<AgentSpec, KeyFault> {
    a.only(&AGENT_KEYS)?;
    let defaults = OutputCaps::default();
    let caps = OutputCaps {
        event_bytes: a.usize("max_event_bytes")?.unwrap_or(defaults.event_bytes),
        total_bytes: a.usize("max_output_bytes")?.unwrap_or(defaults.total_bytes),
        answer_bytes: a
            .usize("max_answer_bytes")?
            .unwrap_or(defaults.answer_bytes),
    };
    let kind = a.string("backend")?.unwrap_or("echo");
    let backend_keys: &[&str] = match kind {
        "echo" => &["behaviour", "delay_ms"],
        "command" => &["command", "request_via"],
        "openai" => &["base_url", "model", "api_key_env", "system_prompt"],
        other => {
            return Err(a.fault(
                "backend",
                format!("{other:?}: use \"echo\", \"command\" or \"openai\""),
            ));
        }
    };
    let all_backend_keys = [
        "behaviour",
        "delay_ms",
        "command",
        "request_via",
        "base_url",
        "model",
        "api_key_env",
        "system_prompt",
    ];
    for key in all_backend_keys {
        if a.table.contains_key(key) && !backend_keys.contains(&key) {
            return Err(a.fault(
                key,
                format!(
                    "is not a setting of the {kind} back end; it takes {}",
                    backend_keys.join(", ")
                ),
            ));
        }
    }
    let backend =
        match kind {
            "command" => BackendSpec::Command {
                argv: match a.strings("command")? {
                    Some(v) if !v.is_empty() && !v[0].trim().is_empty() => v,
                    _ => return Err(a.fault(
                        "command",
                        "name the program and its arguments, like command = [\"claude\", \"-p\"]",
                    )),
                },
                request_via: match a.string("request_via")? {
                    None | Some("stdin") => RequestVia::Stdin,
                    Some("argument") => RequestVia::Argument,
                    Some(other) => {
                        return Err(a.fault(
                            "request_via",
                            format!("{other:?}: use \"stdin\" or \"argument\""),
                        ));
                    }
                },
            },
            "openai" => BackendSpec::OpenAi {
                base_url: a
                    .string("base_url")?
                    .ok_or_else(|| {
                        a.fault(
                            "base_url",
                            "is required, like base_url = \"https://api.openai.com/v1\"",
                        )
                    })?
                    .to_owned(),
                model: a
                    .string("model")?
                    .ok_or_else(|| a.fault("model", "is required, like model = \"gpt-4o-mini\""))?
                    .to_owned(),
                api_key_env: a.string("api_key_env")?.map(str::to_owned),
                system_prompt: a.string("system_prompt")?.map(str::to_owned),
            },
            _ => BackendSpec::Echo {
                behaviour: match a.string("behaviour")? {
                    None => EchoBehaviour::Answer,
                    Some(b) => EchoBehaviour::parse(b).ok_or_else(|| {
                        a.fault(
                            "behaviour",
                            format!("{b:?}: use \"answer\", \"fail\" or \"stall\""),
                        )
                    })?,
                },
                delay: a
                    .whole("delay_ms")?
                    .map_or(Duration::ZERO, Duration::from_millis),
            },
        };
    let _ = a.string("description")?;
    Ok(AgentSpec {
        backend,
        timeout: a
            .seconds("timeout_seconds")?
            .unwrap_or(Duration::from_secs(600)),
        caps,
    })
}

/// `[store]`: `url` only.
fn parse_store(doc: &Table) -> Result<String, KeyFault> {
    let Some(section) = doc.get("store") else {
        return Ok(DEFAULT_STORE_URL.to_owned());
    };
    let Value::Table(section) = section else {
        return Err((
            vec!["store".into()],
            "store: must be a table with url = \"sqlite://…\"".into(),
        ));
    };
    let mut url = DEFAULT_STORE_URL.to_owned();
    for (key, value) in section {
        let at = vec!["store".to_owned(), key.clone()];
        match (key.as_str(), value) {
            ("url", Value::String(u)) if u == "memory:" || u.starts_with("sqlite:") || u.starts_with("postgres://") || u.starts_with("postgresql://") => url = u.clone(),
            ("url", _) => return Err((at, "store.url: must be sqlite://path/to/switchboard.db, postgres://user@host/db or memory:".into())),
            (other, _) => return Err((at, format!("store.{other}: unknown key; [store] takes url"))),
        }
    }
    Ok(url)
}

/// The schedules the schedule registry declares built in, with their grants. (They move to the
/// schedule crate when it exists; the grants are the registry's, replaced whole by a grants
/// entry for `schedule:<name>`.)
pub fn builtin_schedules() -> Vec<(ScheduleName, Grants)> {
    let self_improvement = Grants {
        actions: GrantSet::only(
            ["friction:read", "friction:write"]
                .into_iter()
                .filter_map(|a| a.parse().ok()),
        ),
        channels: GrantSet::All,
        repos: GrantSet::none(),
    };
    ScheduleName::parse("self-improvement")
        .map(|n| vec![(n, self_improvement)])
        .unwrap_or_default()
}

type KeyFault = (Vec<String>, String);

/// `[agents.<name>]` tables declare agents; `agents.default` names the default one.
fn parse_agents(doc: &Table) -> Result<(BTreeSet<AgentName>, Option<AgentName>), KeyFault> {
    let mut agents = BTreeSet::new();
    let Some(section) = doc.get("agents") else {
        return Ok((agents, None));
    };
    let at = |k: &str| vec!["agents".to_owned(), k.to_owned()];
    let Value::Table(section) = section else {
        return Err((
            vec!["agents".into()],
            "agents: must be a table of [agents.<name>] tables".into(),
        ));
    };
    let mut default = None;
    for (key, value) in section {
        match (key.as_str(), value) {
            ("default", Value::String(name)) => default = Some(name.clone()),
            ("default", _) => {
                return Err((
                    at(key),
                    "agents.default: must be a string naming an agent, like default = \"echo\""
                        .into(),
                ));
            }
            (k, _) if AGENTS_KEYS.contains(&k) => {}
            (_, Value::Table(_)) => {
                let name =
                    AgentName::parse(key).map_err(|e| (at(key), format!("agents.{key}: {e}")))?;
                agents.insert(name);
            }
            (_, _) => {
                return Err((
                    at(key),
                    format!(
                        "agents.{key}: unknown key; [agents] takes {} and [agents.<name>] tables (declare an agent as [agents.{key}])",
                        AGENTS_KEYS.join(", ")
                    ),
                ));
            }
        }
    }
    let default = match default {
        None => None,
        Some(name) => {
            let parsed = AgentName::parse(&name).ok().filter(|n| agents.contains(n));
            Some(parsed.ok_or_else(|| {
                (at("default"), format!("agents.default: `{name}` is not a declared agent; declare [agents.{name}] or name one that is"))
            })?)
        }
    };
    Ok((agents, default))
}

/// `grants."slack:U1".channels[0]` → `["grants", "slack:U1", "channels"]`.
fn key_segments(key: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = key;
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            out.push(&quoted[..end]);
            rest = quoted.get(end + 1..).unwrap_or_default();
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            if end > 0 {
                out.push(&rest[..end]);
            }
            rest = &rest[end..];
            if rest.starts_with('[') {
                break;
            }
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    out
}

/// The line and column of the deepest key along `path` that the text defines.
fn locate(text: &str, path: &[&str]) -> Option<(usize, usize)> {
    let root = toml::de::DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut found = None;
    for segment in path {
        // A missing key is located at the deepest table that holds it.
        let Some((key, value)) = table.get_key_value(*segment) else {
            break;
        };
        found = Some(line_col(text, key.span().start));
        match value.get_ref() {
            toml::de::DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    found
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(Source::File("t.toml".into()), text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn the_embedded_default_and_the_example_load() {
        parse(Source::EmbeddedDefault, EMBEDDED_DEFAULT).unwrap();
        let example = include_str!("../../../config/switchboard.example.toml");
        let default = parse(Source::EmbeddedDefault, EMBEDDED_DEFAULT).unwrap();
        assert_eq!(
            default.default_agent.as_ref().map(|a| a.as_str()),
            Some("echo")
        );
        assert_eq!(default.server.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(default.store_url, DEFAULT_STORE_URL);
        let loaded = parse(Source::File("example".into()), example).unwrap();
        assert!(
            !loaded.table.entries().is_empty(),
            "the example shows grants"
        );
        assert!(!loaded.table.restrict().agents.is_empty(), "and restrict");
    }

    #[test]
    fn errors_name_file_line_column_and_key() {
        assert_eq!(
            err("[server]\n\n[permissions]\nx = 1\n"),
            "t.toml:3:2: permissions: `permissions` is not a configuration key; grants and restrict are the only authorization keys (move these rights into [grants.\"<actor id>\"] entries)"
        );
        let e = err("[grants.\"slack:U1\"]\nactions = [\"runs:read\"]\nchannels = \"All\"\n");
        assert!(
            e.starts_with("t.toml:3:1: grants.\"slack:U1\".channels: `All` is not \"all\""),
            "{e}"
        );
        let e = err("[agents.coding]\n[grants.\"slack:U1\"]\nagents = [\"coding\"]\n");
        assert!(
            e.starts_with("t.toml:3:1: grants.\"slack:U1\".agents: unknown field `agents`"),
            "{e}"
        );
        let e = err("[serverr]\nlisten = 1\n");
        assert!(
            e.starts_with("t.toml:1:2: unknown top-level key `serverr`"),
            "{e}"
        );
        let e = err("[grants\nx = 1");
        assert!(e.starts_with("t.toml:1:"), "{e}");
        assert!(e.contains("not valid TOML"), "{e}");
    }

    #[test]
    fn agents_are_declared_by_tables() {
        let c = parse(Source::EmbeddedDefault, "[agents]\ndefault = \"coding\"\n[agents.coding]\n[agents.reviewer]\nbackend = \"echo\"\n").unwrap();
        assert_eq!(c.agents.len(), 2);
        assert!(
            c.agent_specs.keys().eq(c.agents.iter()),
            "every declared agent has its spec"
        );
        assert_eq!(c.default_agent.unwrap().as_str(), "coding");
        for (text, want) in [
            ("agents = 3", "agents: must be a table"),
            (
                "[agents]\ncoding = \"x\"",
                "agents.coding: unknown key; [agents] takes default",
            ),
            (
                "[agents]\ndefault = \"ghost\"",
                "`ghost` is not a declared agent",
            ),
            ("[agents]\ndefault = 1", "agents.default: must be a string"),
            ("[agents.\"bad name\"]", "not a valid agent name"),
        ] {
            let e = err(text);
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn the_store_section_names_its_faults() {
        assert_eq!(
            parse(Source::EmbeddedDefault, "").unwrap().store_url,
            DEFAULT_STORE_URL
        );
        let pg = parse(
            Source::EmbeddedDefault,
            "[store]\nurl = \"postgres://sb@db/sb\"",
        )
        .unwrap();
        assert_eq!(pg.store_url, "postgres://sb@db/sb");
        for (text, want) in [
            (
                "[store]\nurl = \"mysql://x\"",
                "t.toml:2:1: store.url: must be sqlite://",
            ),
            ("[store]\nurl = 5", "t.toml:2:1: store.url: must be"),
            (
                "[store]\npath = \"x.db\"",
                "t.toml:2:1: store.path: unknown key; [store] takes url",
            ),
            (
                "store = \"sqlite://x\"",
                "t.toml:1:1: store: must be a table",
            ),
        ] {
            let e = err(text);
            assert!(e.starts_with(want), "{text}: {e}");
        }
    }

    #[test]
    fn the_server_ingress_agents_and_telemetry_sections_are_read() {
        let c = parse(
            Source::EmbeddedDefault,
            r#"
[server]
listen = "0.0.0.0:9000"
replica_id = "web-1"
shutdown_grace_seconds = 3
[ingress]
tokens_file = "/etc/switchboard/tokens.json"
max_body_bytes = 1024
[agents]
default = "claude"
max_concurrent = 8
max_per_actor = 2
channel_directory_timeout_ms = 500
env_allow = ["PATH"]
[agents.claude]
backend = "command"
command = ["claude", "-p"]
request_via = "argument"
timeout_seconds = 900
[agents.local]
backend = "openai"
base_url = "http://127.0.0.1:8081/v1"
model = "qwen"
[agents.demo]
behaviour = "stall"
delay_ms = 200
[telemetry]
log_format = "json"
"#,
        )
        .unwrap();
        assert_eq!(c.server.listen.to_string(), "0.0.0.0:9000");
        assert_eq!(c.server.shutdown_grace, Duration::from_secs(3));
        assert_eq!(c.ingress.max_body_bytes, 1024);
        assert_eq!(c.limits.max_per_actor, 2);
        assert_eq!(
            c.limits.channel_directory_timeout,
            Duration::from_millis(500)
        );
        let claude = &c.agent_specs[&AgentName::parse("claude").unwrap()];
        assert_eq!(
            claude.backend,
            BackendSpec::Command {
                argv: vec!["claude".into(), "-p".into()],
                request_via: RequestVia::Argument
            }
        );
        assert_eq!(
            c.agent_specs[&AgentName::parse("local").unwrap()]
                .backend
                .kind(),
            "openai"
        );
        assert_eq!(
            c.agent_specs[&AgentName::parse("demo").unwrap()].backend,
            BackendSpec::Echo {
                behaviour: EchoBehaviour::Stall,
                delay: Duration::from_millis(200)
            }
        );
        assert!(c.telemetry.json_logs);
    }

    #[test]
    fn unknown_and_malformed_keys_fail_with_their_position() {
        for (text, want) in [
            (
                "[server]
listen = \"localhost\"",
                "t.toml:2:1: server.listen: \"localhost\" is not an address",
            ),
            (
                "[server]
port = 1",
                "t.toml:2:1: server.port: unknown key; [server] takes listen",
            ),
            (
                "[server]
heartbeat_seconds = 30
lease_seconds = 30",
                "t.toml:3:1: server.lease_seconds: must be longer",
            ),
            (
                "[ingress]
tokens = \"x\"",
                "t.toml:2:1: ingress.tokens: unknown key",
            ),
            (
                "[ingress]
max_body_bytes = -1",
                "t.toml:2:1: ingress.max_body_bytes: must be a whole number above 0",
            ),
            (
                "[agents]
max_concurent = 3",
                "t.toml:2:1: agents.max_concurent: unknown key",
            ),
            (
                "[agents.a]
backend = \"gpt\"",
                "t.toml:2:1: agents.a.backend: \"gpt\": use",
            ),
            (
                "[agents.a]
backend = \"command\"",
                "t.toml:1:9: agents.a.command: name the program",
            ),
            (
                "[agents.a]
backend = \"echo\"
model = \"m\"",
                "t.toml:3:1: agents.a.model: is not a setting of the echo back end",
            ),
            (
                "[agents.a]
backend = \"openai\"
model = \"m\"",
                "t.toml:1:9: agents.a.base_url: is required",
            ),
            (
                "[agents.a]
timeout = 3",
                "t.toml:2:1: agents.a.timeout: unknown key",
            ),
            (
                "[agents.a]
behaviour = \"explode\"",
                "t.toml:2:1: agents.a.behaviour: \"explode\"",
            ),
            (
                "[telemetry]
otlp_endpoint = \"http://x\"",
                "t.toml:2:1: telemetry.otlp_endpoint: unknown key",
            ),
            (
                "[slack]
mode = \"socket\"",
                "t.toml:2:1: [slack] is read by the Slack surface, which is not part of this build",
            ),
            (
                "[[agent_grants]]
id = \"x\"",
                "t.toml:1:3: [agent_grants] is read by the tool broker",
            ),
        ] {
            let e = err(text);
            assert!(e.starts_with(want), "{text}\n  got:  {e}\n  want: {want}");
        }
        parse(Source::EmbeddedDefault, "[slack]\n[mcp]\n").unwrap();
    }

    #[test]
    fn key_segments_split_quoted_ids() {
        assert_eq!(
            key_segments("grants.\"slack:U1\".channels[0]"),
            vec!["grants", "slack:U1", "channels"]
        );
        assert_eq!(
            key_segments("restrict.agents[1]"),
            vec!["restrict", "agents"]
        );
        assert_eq!(key_segments("permissions"), vec!["permissions"]);
    }

    #[test]
    fn the_builtin_schedule_holds_the_fleet_friction_grants() {
        let c = parse(Source::EmbeddedDefault, "").unwrap();
        let id = "schedule:self-improvement".parse().unwrap();
        let g = c.table.grants_for(&id);
        assert!(g.channels.is_all());
        assert!(g.actions.holds(&"friction:read".parse().unwrap()));
        let replaced = parse(
            Source::EmbeddedDefault,
            "[grants.\"schedule:self-improvement\"]\nactions = [\"help:read\"]",
        )
        .unwrap();
        assert!(
            replaced.table.grants_for(&id).channels.is_empty(),
            "an entry replaces it whole"
        );
    }
}
