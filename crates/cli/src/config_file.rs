//! Loading the config file: which file, TOML syntax, the top-level sections, the declared
//! agents, and the grants table (parsed by authz-core). Every error names the file, the key
//! and, where the text tells, the line and column.
//!
//! Only the authorization parts are read so far; the other sections are recognised by name and
//! left for the parts that use them.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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

/// A loaded, validated config (the authorization parts).
#[derive(Debug)]
pub struct LoadedConfig {
    pub source: Source,
    pub agents: BTreeSet<AgentName>,
    pub default_agent: Option<AgentName>,
    pub table: GrantsTable,
    /// `[store] url`: `sqlite://…`, `postgres://…` or `memory:`.
    pub store_url: String,
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
    let store_url = parse_store(&doc).map_err(|(path, msg)| {
        let segments: Vec<&str> = path.iter().map(String::as_str).collect();
        LoadError::new(&source, locate(&segments), msg)
    })?;
    Ok(LoadedConfig {
        source,
        agents,
        default_agent,
        table,
        store_url,
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
            (_, Value::Table(_)) => {
                let name =
                    AgentName::parse(key).map_err(|e| (at(key), format!("agents.{key}: {e}")))?;
                agents.insert(name);
            }
            (_, _) => {
                return Err((
                    at(key),
                    format!("agents.{key}: must be a table; declare an agent as [agents.{key}]"),
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
        let (key, value) = table.get_key_value(*segment)?;
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
        assert_eq!(c.default_agent.unwrap().as_str(), "coding");
        for (text, want) in [
            ("agents = 3", "agents: must be a table"),
            ("[agents]\ncoding = \"x\"", "agents.coding: must be a table"),
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
