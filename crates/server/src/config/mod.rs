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
mod agent_network;
mod agents;
mod faults;
mod ingress_section;
mod mcp_section;
mod memory_section;
mod numbers;
mod paths;
mod position;
mod repos_section;
mod retention_section;
mod sandbox_section;
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
pub use agent_network::{AgentNetwork, ModelEndpointSpec};
pub use agents::{AgentLimits, AgentSpec, BackendSpec};
pub use faults::{ConfigFaults, LoadError};
pub use ingress_section::IngressConfig;
pub use mcp_section::McpConfig;
pub use memory_section::MemoryConfig;
pub use paths::absolute;
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
use faults::Faults;
use mcp_section::mcp_config;
use memory_section::memory_config;
use position::{dotted, key_segments, line_col, locate, path_at};
use repos_section::repos;
use retention_section::retention;
use sandbox_section::sandbox_user;
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

/// A loaded, validated config.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub source: Source,
    pub agents: BTreeSet<AgentName>,
    pub default_agent: Option<AgentName>,
    pub table: GrantsTable,
    /// The hash of the sections a reload installs (`[grants]`, `[groups]`, `[restrict]`,
    /// `[agent_policy]`) as read, comments and layout aside: `sha256:<hex>`.
    pub policy_hash: String,
    /// The SHA-256 of the file's bytes as loaded: where a reload's watch starts.
    pub text_digest: [u8; 32],
    /// Every other top-level section's hash, by name: how a reload tells which sections it
    /// leaves for a restart.
    pub section_hashes: BTreeMap<String, String>,
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
    /// `[sandbox]`: who sandboxed programs are on the host when `serve` runs as root.
    pub sandbox_user: ::agents::sandbox::HostUser,
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
) -> Result<LoadedConfig, ConfigFaults> {
    let text = read_text(&source)?;
    parse_with(source, &text, surfaces)
}

/// The text of `source`'s file (or the embedded default).
pub fn read_text(source: &Source) -> Result<Cow<'static, str>, LoadError> {
    match source {
        Source::File(path) => std::fs::read_to_string(path).map(Cow::Owned).map_err(|e| {
            LoadError::new(
                source,
                None,
                None,
                format!("cannot read the config file: {e} (pass --config with an existing file, or omit it to use the embedded default)"),
            )
        }),
        Source::EmbeddedDefault => Ok(Cow::Borrowed(EMBEDDED_DEFAULT)),
    }
}

/// Top-level keys that look like authorization but are not: refused by name.
const FORBIDDEN: [&str; 3] = ["permissions", "admins", "scopes"];

/// The text being parsed, for faults with positions.
pub(crate) struct Text<'a> {
    source: &'a Source,
    text: &'a str,
}

impl<'a> Text<'a> {
    pub(crate) fn new(source: &'a Source, text: &'a str) -> Self {
        Text { source, text }
    }

    /// A fault at a byte offset: `file:line:col: key: message`.
    pub(crate) fn at(&self, offset: usize, message: impl std::fmt::Display) -> LoadError {
        LoadError::new(
            self.source,
            Some(line_col(self.text, offset)),
            path_at(self.text, offset),
            message.to_string(),
        )
    }

    /// A fault at a key path (the deepest part of it the text defines).
    pub(crate) fn key(&self, path: &[&str], message: impl std::fmt::Display) -> LoadError {
        let owned: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
        LoadError::new(
            self.source,
            locate(self.text, path),
            Some(dotted(&owned)),
            message.to_string(),
        )
    }

    /// A fault with no place in the file (the environment, a file it names).
    pub(crate) fn nowhere(&self, message: impl std::fmt::Display) -> LoadError {
        LoadError::new(self.source, None, None, message.to_string())
    }

    fn de(&self, e: &toml::de::Error) -> LoadError {
        match e.span() {
            Some(span) => self.at(span.start, e.message()),
            None => self.nowhere(e.message()),
        }
    }
}

/// Parses config text with no plug-in surface sections. Public for tests.
pub fn parse(source: Source, text: &str) -> Result<LoadedConfig, ConfigFaults> {
    parse_with(source, text, &[])
}

/// Faults for the top level: a key that looks like authorization and is not, a top-level key
/// that is neither a built-in section nor one of `surfaces`' (as serde's own unknown-field
/// fault would say), and a surface key read twice.
fn check_top_level_keys(
    t: &Text<'_>,
    doc: &toml::de::DeTable<'_>,
    surfaces: &[&dyn SurfaceSection],
    faults: &mut Faults,
) {
    for key in FORBIDDEN.into_iter().filter(|k| doc.contains_key(*k)) {
        let problem = authz_core::ConfigProblem::ForbiddenKey(key.to_owned());
        faults.push(t.key(&[key], problem));
    }
    let mut known: Vec<&str> = CORE_KEYS.to_vec();
    for s in surfaces {
        if known.contains(&s.key()) {
            faults.push(t.nowhere(format!(
                "two sections are read as [{}]; give the surface another key",
                s.key()
            )));
        }
        known.push(s.key());
    }
    let expected: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
    for key in doc.keys() {
        let key = key.get_ref();
        if !known.contains(&key.as_ref()) && !FORBIDDEN.contains(&key.as_ref()) {
            faults.push(t.key(
                &[key],
                format!(
                    "unknown field `{key}`, expected one of {}",
                    expected.join(", ")
                ),
            ));
        }
    }
}

/// The syntax of the whole file: every TOML fault the parser recovers past, or the document
/// both as spans (for the sections) and as a table (for authz-core's grants).
fn syntax<'i>(
    source: &Source,
    text: &'i str,
) -> Result<(toml::de::DeTable<'i>, toml::Table), ConfigFaults> {
    let fault = |e: &toml::de::Error| {
        LoadError::new(
            source,
            e.span().map(|s| line_col(text, s.start)),
            None,
            format!("not valid TOML: {}", e.message()),
        )
    };
    let (spans, errors) = toml::de::DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        return Err(ConfigFaults(errors.iter().map(fault).collect()));
    }
    let doc: toml::Table = toml::from_str(text).map_err(|e| fault(&e))?;
    Ok((spans.into_inner(), doc))
}

/// The sections a reload installs, in this order: what the policy hash covers.
pub const RELOADED_SECTIONS: [&str; 4] = ["grants", "groups", "restrict", "agent_policy"];

/// `sha256:<hex>` of the reloaded sections' values as JSON with sorted keys: two files that
/// say the same policy in other words (comments, order, layout) hash alike.
fn policy_hash(doc: &toml::Table) -> String {
    let sections: BTreeMap<&str, Option<&toml::Value>> = RELOADED_SECTIONS
        .iter()
        .map(|k| (*k, doc.get(*k)))
        .collect();
    let canonical = serde_json::to_string(&sections).unwrap_or_default();
    format!("sha256:{}", sha256_hex(&canonical))
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The agents `[agents.<name>]` declares, read from the document itself, so a fault in one
/// agent's table does not make every key naming the others a fault too.
fn declared_agents(doc: &toml::Table) -> BTreeSet<AgentName> {
    let Some(toml::Value::Table(agents)) = doc.get("agents") else {
        return BTreeSet::new();
    };
    agents
        .iter()
        .filter(|(k, v)| v.is_table() && !agents::SETTINGS.contains(&k.as_str()))
        .filter_map(|(k, _)| AgentName::parse(k).ok())
        .collect()
}

/// The grants table authz-core reads from the document. Every entry at fault is named: the
/// entry is taken out and the table read again (a key refused by name at the top level is
/// left to `check_top_level_keys`, which names it once).
fn grants_table(
    t: &Text<'_>,
    doc: &toml::Table,
    agents: &BTreeSet<AgentName>,
    faults: &mut Faults,
) -> Option<GrantsTable> {
    let mut doc = doc.clone();
    for key in FORBIDDEN {
        doc.remove(key);
    }
    let mut clean = true;
    // Each pass takes an entry out, so the passes end.
    for _ in 0..=doc.len() + 256 {
        let e = match GrantsTable::from_config(&doc, agents.clone()) {
            Ok(table) => return clean.then_some(table),
            Err(e) => e,
        };
        clean = false;
        // authz-core names the key itself (`restrict.agents[0]`); the position is located here.
        let segments = key_segments(&e.key);
        faults.push(LoadError::new(
            t.source,
            locate(t.text, &segments),
            Some(e.key.clone()),
            e.problem.to_string(),
        ));
        let taken = match segments.as_slice() {
            [section, entry, ..] => doc
                .get_mut(*section)
                .and_then(toml::Value::as_table_mut)
                .and_then(|table| table.remove(*entry))
                .is_some(),
            _ => false,
        };
        let taken = taken || segments.first().is_some_and(|s| doc.remove(*s).is_some());
        if !taken {
            return None;
        }
    }
    None
}

/// Parses config text, with the sections of `surfaces` beside the built-in ones. Every fault
/// of the file is reported, not only the first; with none, every path it names is made
/// absolute under the working directory (`paths.rs`).
pub fn parse_with(
    source: Source,
    text: &str,
    surfaces: &[&dyn SurfaceSection],
) -> Result<LoadedConfig, ConfigFaults> {
    let (spans, doc) = syntax(&source, text)?;
    let t = Text::new(&source, text);
    let mut faults = Faults::default();
    check_top_level_keys(&t, &spans, surfaces, &mut faults);
    let sections = FileSections::read(&t, &spans, &mut faults);
    let surface_sections = SurfaceSections::read(&t, surfaces, &mut faults);
    let agents = declared_agents(&doc);
    let agents_section = &sections.agents;
    let default_agent = match &agents_section.default {
        None => Some(None),
        Some(name) => faults.take(declared_agent(&t, name, &agents)).map(Some),
    };
    let table = grants_table(&t, &doc, &agents, &mut faults);
    // A section a key was taken out of is not checked further (its checks would see a
    // default put in for the bad value, and report its echo).
    let whole = |section: &str| !sections.damaged.under(section);
    let schedules = match whole("schedules") {
        true => schedules(&t, &sections.schedules, &agents, &mut faults),
        false => None,
    };
    let agent_specs: BTreeMap<AgentName, AgentSpec> = agents_section
        .tables
        .iter()
        .filter(|(name, _)| whole(&format!("agents.{name}")))
        .filter_map(|(name, a)| Some((name.clone(), faults.take(agent_spec(&t, name, a))?)))
        .collect();
    faults.take(check_lineage(
        &t,
        &agents,
        &agents_section.tables,
        &agent_specs,
    ));
    let checked = Checked {
        tool_policy: (whole("agent_grants") && whole("agent_policy"))
            .then(|| faults.take(tool_policy(&t, &sections, &agents)))
            .flatten(),
        retention: whole("retention")
            .then(|| faults.take(retention(&t, &sections.retention)))
            .flatten(),
        sandbox_user: whole("sandbox")
            .then(|| faults.take(sandbox_user(&t, &sections.sandbox)))
            .flatten(),
        store: whole("store")
            .then(|| faults.take(store_spec(&t, &sections.store)))
            .flatten(),
        server: whole("server")
            .then(|| faults.take(server(&t, &sections.server)))
            .flatten(),
        memory: whole("memory")
            .then(|| faults.take(memory_config(&t, &sections.memory, &agents)))
            .flatten(),
        telemetry: whole("telemetry")
            .then(|| faults.take(telemetry_config(&t, &sections.telemetry)))
            .flatten(),
        slack: whole("slack")
            .then(|| {
                faults.take(
                    sections
                        .slack
                        .as_ref()
                        .map(|s| slack_config(&t, s))
                        .transpose(),
                )
            })
            .flatten(),
        access: whole("access")
            .then(|| {
                faults.take(
                    sections
                        .access
                        .as_ref()
                        .map(|s| access_config(&t, s))
                        .transpose(),
                )
            })
            .flatten(),
    };
    let dir = std::env::current_dir().map_err(|e| {
        t.nowhere(format!(
            "the working directory cannot be read ({e}), and the config's relative paths are read from it; start switchboard from a directory that exists"
        ))
    });
    let dir = faults.take(dir);
    let (true, Some(default_agent), Some(mut table), Some(schedules), Some(checked), Some(dir)) = (
        faults.is_empty(),
        default_agent,
        table,
        schedules,
        checked.all(),
        dir,
    ) else {
        return Err(faults.into_faults());
    };
    for (decl, grants) in schedule::builtin() {
        table.declare_schedule(decl.name, grants);
    }
    for decl in &schedules {
        // A configured schedule declares nothing: its grants are its `[grants]` entry.
        table.declare_schedule(decl.name.clone(), NO_GRANTS);
    }
    let config = LoadedConfig {
        policy_hash: policy_hash(&doc),
        text_digest: {
            use sha2::Digest;
            sha2::Sha256::digest(text.as_bytes()).into()
        },
        section_hashes: doc
            .iter()
            .filter(|(k, _)| !RELOADED_SECTIONS.contains(&k.as_str()))
            .map(|(k, v)| {
                (
                    k.clone(),
                    sha256_hex(&serde_json::to_string(v).unwrap_or_default()),
                )
            })
            .collect(),
        store: checked.store,
        server: checked.server,
        ingress: IngressConfig {
            tokens_file: sections.ingress.tokens_file.clone(),
            max_body_bytes: sections
                .ingress
                .max_body_bytes
                .map_or(IngressConfig::default().max_body_bytes, |n| n.usize()),
        },
        mcp: mcp_config(&sections.mcp),
        memory: checked.memory,
        limits: limits(agents_section),
        telemetry: checked.telemetry,
        slack: checked.slack,
        access: checked.access,
        source,
        agents,
        default_agent,
        table,
        agent_specs,
        schedules,
        tool_policy: checked.tool_policy,
        repos: repos(&sections.repos),
        retention: checked.retention,
        sandbox_user: checked.sandbox_user,
        surface_sections,
    };
    Ok(paths::made_absolute(config, &dir))
}

/// The sections' checked values, each `None` where its check found a fault.
struct Checked {
    tool_policy: Option<ToolPolicyConfig>,
    retention: Option<RetentionConfig>,
    sandbox_user: Option<::agents::sandbox::HostUser>,
    store: Option<StoreSpec>,
    server: Option<ServerConfig>,
    memory: Option<MemoryConfig>,
    telemetry: Option<TelemetryConfig>,
    slack: Option<Option<SlackConfig>>,
    access: Option<Option<AccessConfig>>,
}

/// Every section's value, once none had a fault.
struct AllChecked {
    tool_policy: ToolPolicyConfig,
    retention: RetentionConfig,
    sandbox_user: ::agents::sandbox::HostUser,
    store: StoreSpec,
    server: ServerConfig,
    memory: MemoryConfig,
    telemetry: TelemetryConfig,
    slack: Option<SlackConfig>,
    access: Option<AccessConfig>,
}

impl Checked {
    fn all(self) -> Option<AllChecked> {
        Some(AllChecked {
            tool_policy: self.tool_policy?,
            retention: self.retention?,
            sandbox_user: self.sandbox_user?,
            store: self.store?,
            server: self.server?,
            memory: self.memory?,
            telemetry: self.telemetry?,
            slack: self.slack?,
            access: self.access?,
        })
    }
}

#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod tests;
