//! The config file: which file, its TOML, every section this build reads as typed, and the
//! grants table (parsed by authz-core from the same text). Each section has a file of its own
//! (`server_section.rs`, `slack_section.rs`, …; `[agents]` in `agents.rs`, read by one
//! hand-written visitor) holding its raw serde type, its typed config, its checks and their
//! tests; `sections.rs` gathers the raw types into `FileSections`, and `urls.rs` holds the URL
//! checks they share. A plug-in surface reads its own section through `SurfaceSection`
//! (`surface_section.rs`) with the same guarantees. Every fault names the file, the line and
//! column (from the parser's spans), the key, and the fix.
//!
//! Secrets never come from this file: the server reads them from the environment or from
//! files this config names (`secrets.rs`).

mod access_section;
mod agents;
mod ingress_section;
mod mcp_section;
mod memory_section;
mod numbers;
mod position;
mod repos_section;
mod retention_section;
mod schedules_section;
mod sections;
mod server_section;
mod slack_section;
mod store_section;
mod surface_section;
mod telemetry_section;
mod tool_policy_section;
mod urls;

pub use access_section::AccessConfig;
pub use agents::{AgentLimits, AgentSpec, BackendSpec};
pub use ingress_section::IngressConfig;
pub use mcp_section::McpConfig;
pub use memory_section::MemoryConfig;
pub use retention_section::RetentionConfig;
pub use server_section::ServerConfig;
pub use slack_section::SlackConfig;
pub use surface_section::{SectionText, SectionValue, SurfaceSection, SurfaceSections};
pub use telemetry_section::TelemetryConfig;
pub use tool_policy_section::ToolPolicyConfig;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use authz_core::{AgentName, GrantsTable, NO_GRANTS};
use schedule::ScheduleDecl;
use store::StoreSpec;

use access_section::access_config;
use agents::{agent_spec, check_lineage, declared_agent, limits};
use mcp_section::mcp_config;
use memory_section::memory_config;
use position::{dotted, key_segments, line_col, locate, path_at};
use repos_section::repos;
use retention_section::retention;
use schedules_section::schedules;
use sections::{CORE_KEYS, FileSections};
use server_section::server;
use slack_section::slack_config;
use store_section::store_spec;
use telemetry_section::telemetry_config;
use tool_policy_section::tool_policy;

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
    /// The plug-in surfaces' sections, each as its surface read it.
    pub surface_sections: SurfaceSections,
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

/// Reads the config file of `source`, with the sections of `surfaces` beside the built-in ones.
pub fn load_with(
    source: Source,
    surfaces: &[&dyn SurfaceSection],
) -> Result<LoadedConfig, LoadError> {
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
    parse_with(source, &text, surfaces)
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

/// Parses config text with no plug-in surface sections. Public for tests.
pub fn parse(source: Source, text: &str) -> Result<LoadedConfig, LoadError> {
    parse_with(source, text, &[])
}

/// A top-level key that is neither a built-in section nor one of `surfaces`' fails the load,
/// as serde's own unknown-field fault would, before any section is read; so does a surface
/// key read twice.
fn check_top_level_keys(
    t: &Text<'_>,
    doc: &toml::Table,
    surfaces: &[&dyn SurfaceSection],
) -> Result<(), LoadError> {
    let mut known: Vec<&str> = CORE_KEYS.to_vec();
    for s in surfaces {
        if known.contains(&s.key()) {
            return Err(LoadError::new(
                t.source,
                None,
                format!(
                    "two sections are read as [{}]; give the surface another key",
                    s.key()
                ),
            ));
        }
        known.push(s.key());
    }
    match doc.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(key) => {
            let expected: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
            Err(t.key(
                &[key],
                format!(
                    "unknown field `{key}`, expected one of {}",
                    expected.join(", ")
                ),
            ))
        }
    }
}

/// Parses config text, with the sections of `surfaces` beside the built-in ones.
pub fn parse_with(
    source: Source,
    text: &str,
    surfaces: &[&dyn SurfaceSection],
) -> Result<LoadedConfig, LoadError> {
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
    check_top_level_keys(&t, &doc, surfaces)?;
    let sections: FileSections = toml::from_str(text).map_err(|e| t.de(&e))?;
    let surface_sections = SurfaceSections::read(&t, surfaces)?;
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
        surface_sections,
    })
}

#[cfg(test)]
mod tests;
