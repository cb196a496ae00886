//! Grants: what one agent may do with one tool, over which paths or hosts, in which
//! mode, until when, and at what taint. A [`ToolGrants`] is the set `decide` reads, in id order.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::args::{self, ToolName};
pub use authz_core::Timestamp;

/// How sensitive what a tool returned is. Totally ordered; `Private` is the lowest and the
/// session's starting taint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataClass {
    #[default]
    Private,
    Sensitive,
    Secret,
}

impl DataClass {
    pub fn as_str(self) -> &'static str {
        match self {
            DataClass::Private => "private",
            DataClass::Sensitive => "sensitive",
            DataClass::Secret => "secret",
        }
    }
}

/// A grant's mode, most restrictive first (the winner's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Deny,
    Ask,
    Auto,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Deny => "deny",
            Mode::Ask => "ask",
            Mode::Auto => "auto",
        }
    }
}

/// A grant's id, unique in its set.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GrantId(String);

impl GrantId {
    pub fn new(id: impl Into<String>) -> Result<GrantId, GrantError> {
        let id = id.into();
        let ok = !id.is_empty()
            && id.len() <= 64
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if ok {
            Ok(GrantId(id))
        } else {
            Err(GrantError::Id(id))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GrantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// SHA-256 of a grant's canonical text: names exactly the grant that decided.
pub type Hash32 = [u8; 32];

/// One grant. Paths are absolute and normalised; the tool is a [`ToolName`], or for MCP
/// `mcp.<server>.<tool>` / `mcp.<server>.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub id: GrantId,
    pub tool: String,
    pub paths: Vec<String>,
    pub hosts: Vec<String>,
    pub mode: Mode,
    pub max_taint: DataClass,
    pub expires: Option<Timestamp>,
    pub result_class: DataClass,
    pub untrusted: bool,
}

impl Grant {
    /// SHA-256 over the fields in a fixed order, each length-prefixed, so no two grants share
    /// a canonical text.
    pub fn sha256(&self) -> Hash32 {
        let mut hash = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(bytes);
        };
        field(self.id.as_str().as_bytes());
        field(self.tool.as_bytes());
        field(&(self.paths.len() as u64).to_be_bytes());
        self.paths.iter().for_each(|p| field(p.as_bytes()));
        field(&(self.hosts.len() as u64).to_be_bytes());
        self.hosts.iter().for_each(|h| field(h.as_bytes()));
        field(self.mode.as_str().as_bytes());
        field(self.max_taint.as_str().as_bytes());
        match self.expires {
            Some(at) => field(&at.micros().to_be_bytes()),
            None => field(b"never"),
        }
        field(self.result_class.as_str().as_bytes());
        field(&[u8::from(self.untrusted)]);
        hash.finalize().into()
    }
}

/// Why a grant or a set of grants was refused at load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("grant id {0:?} must be 1-64 characters of [A-Za-z0-9_.-]")]
    Id(String),
    #[error("grant {0:?} appears twice; ids are unique")]
    Duplicate(String),
    #[error(
        "grant {id:?}: tool {tool:?} is not a tool; tools are read_file, write_file, shell, http_fetch, git, mcp.<server>.<tool> or mcp.<server>.*"
    )]
    Tool { id: String, tool: String },
    #[error("grant {id:?}: {problem}")]
    Shape { id: String, problem: &'static str },
    #[error(
        "grant {id:?}: path {path:?} must be absolute (or start with {{workspace}}) and stay under /"
    )]
    Path { id: String, path: String },
    #[error(
        "grant {id:?}: host {host:?} must be a host name or *.<domain>, with a port after a colon to name one alone (example.com:443)"
    )]
    Host { id: String, host: String },
    #[error(
        "grant {id:?}: expires {given:?} must be an RFC 3339 time like \"2026-12-31T18:00:00Z\""
    )]
    Expires { id: String, given: String },
}

impl Grant {
    /// Checks that the grant's fields make sense for its tool, so that a grant that could
    /// never match (or would match too much) is refused at load, not silently ignored.
    pub fn validate(&self) -> Result<(), GrantError> {
        let id = self.id.as_str().to_owned();
        let shape = |problem| GrantError::Shape {
            id: id.clone(),
            problem,
        };
        for path in &self.paths {
            if args::normalise(path).as_deref() != Some(path.as_str()) {
                return Err(GrantError::Path {
                    id,
                    path: path.clone(),
                });
            }
        }
        for host in &self.hosts {
            if !host_pattern_ok(host) {
                return Err(GrantError::Host {
                    id,
                    host: host.clone(),
                });
            }
        }
        let tool = match ToolName::parse(&self.tool) {
            Some(tool) => Some(tool),
            None if mcp_pattern_ok(&self.tool) => None,
            None => {
                return Err(GrantError::Tool {
                    id,
                    tool: self.tool.clone(),
                });
            }
        };
        match tool {
            Some(ToolName::ReadFile | ToolName::WriteFile | ToolName::Git)
                if self.paths.is_empty() =>
            {
                Err(shape("a file or git grant needs paths"))
            }
            Some(ToolName::HttpFetch) if self.hosts.is_empty() || !self.paths.is_empty() => {
                Err(shape("an http_fetch grant takes hosts and no paths"))
            }
            Some(ToolName::ReadFile | ToolName::WriteFile | ToolName::Git | ToolName::Shell)
                if !self.hosts.is_empty() =>
            {
                Err(shape("only an http_fetch grant takes hosts"))
            }
            Some(ToolName::Mcp) => Err(shape(
                "an MCP grant names mcp.<server>.<tool> or mcp.<server>.*",
            )),
            None if !self.paths.is_empty() || !self.hosts.is_empty() => {
                Err(shape("an MCP grant takes no paths or hosts"))
            }
            _ => Ok(()),
        }
    }
}

fn mcp_pattern_ok(tool: &str) -> bool {
    let Some((server, name)) = tool.strip_prefix("mcp.").and_then(|t| t.split_once('.')) else {
        return false;
    };
    args::is_name(server) && (name == "*" || args::is_name(name))
}

fn host_pattern_ok(host: &str) -> bool {
    let (host, _) = args::split_port(host);
    let name = host.strip_prefix("*.").unwrap_or(host);
    !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// The grants of one run, in id order, each with its SHA-256 computed once, and indexed by the
/// tool they name so `decide` reads only the grants M1 can keep. Duplicate ids fail the load.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolGrants {
    entries: Vec<(Arc<Grant>, Hash32)>,
    by_tool: HashMap<String, Vec<usize>>,
}

impl ToolGrants {
    pub fn new(grants: impl IntoIterator<Item = Grant>) -> Result<ToolGrants, GrantError> {
        let mut by_id = BTreeMap::new();
        for grant in grants {
            grant.validate()?;
            if by_id.contains_key(&grant.id) {
                return Err(GrantError::Duplicate(grant.id.as_str().to_owned()));
            }
            by_id.insert(grant.id.clone(), grant);
        }
        let entries: Vec<(Arc<Grant>, Hash32)> = by_id
            .into_values()
            .map(|grant| {
                let sha = grant.sha256();
                (Arc::new(grant), sha)
            })
            .collect();
        let mut by_tool: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, (grant, _)) in entries.iter().enumerate() {
            by_tool.entry(grant.tool.clone()).or_default().push(i);
        }
        Ok(ToolGrants { entries, by_tool })
    }

    /// Every grant, in id order.
    pub fn grants(&self) -> impl Iterator<Item = &Grant> {
        self.entries.iter().map(|(grant, _)| grant.as_ref())
    }

    /// The grants whose `tool` is exactly `tool`, in id order, with their SHA-256.
    pub(crate) fn naming<'s>(
        &'s self,
        tool: &str,
    ) -> impl Iterator<Item = (&'s Arc<Grant>, &'s Hash32)> + use<'s> {
        self.by_tool
            .get(tool)
            .into_iter()
            .flatten()
            .filter_map(|&i| self.entries.get(i))
            .map(|(grant, sha)| (grant, sha))
    }
}

/// A grant as configured (`[[agent_grants]]`): paths may start with `{workspace}`, replaced by
/// [`GrantSpec::resolve`] with the run's absolute workspace before `decide` sees them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantSpec {
    pub id: String,
    /// The agent this grant is for; absent means every agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// The repo whose workspace this grant is for; absent means every workspace.
    #[serde(default)]
    pub repo: Option<String>,
    pub tool: String,
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default)]
    pub hosts: Vec<String>,
    pub mode: Mode,
    /// Absent: `private`, so a session that has read anything labelled higher loses the grant
    /// (fail closed; a grant that should survive taint says so).
    #[serde(default)]
    pub max_taint: DataClass,
    /// An RFC 3339 instant, `"2026-12-31T18:00:00Z"`; the grant is gone from that instant on.
    #[serde(default)]
    pub expires: Option<String>,
    #[serde(default)]
    pub result_class: DataClass,
    #[serde(default)]
    pub untrusted: bool,
}

impl GrantSpec {
    /// The grant for one run, with `{workspace}` replaced by `workspace` and paths normalised.
    pub fn resolve(&self, workspace: &Path) -> Result<Grant, GrantError> {
        let id = GrantId::new(self.id.clone())?;
        let workspace = workspace.to_string_lossy();
        let paths = self
            .paths
            .iter()
            .map(|path| {
                let expanded = match path.strip_prefix("{workspace}") {
                    Some(rest) => format!("{workspace}/{rest}"),
                    None => path.clone(),
                };
                args::normalise(&expanded).ok_or_else(|| GrantError::Path {
                    id: self.id.clone(),
                    path: path.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let expires = self
            .expires
            .as_deref()
            .map(|text| {
                Timestamp::parse_rfc3339(text).ok_or_else(|| GrantError::Expires {
                    id: self.id.clone(),
                    given: text.to_owned(),
                })
            })
            .transpose()?;
        let grant = Grant {
            id,
            tool: self.tool.clone(),
            paths,
            hosts: self.hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            mode: self.mode,
            max_taint: self.max_taint,
            expires,
            result_class: self.result_class,
            untrusted: self.untrusted,
        };
        grant.validate()?;
        Ok(grant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(id: &str, tool: &str, paths: &[&str], hosts: &[&str]) -> Grant {
        Grant {
            id: GrantId::new(id).unwrap(),
            tool: tool.into(),
            paths: paths.iter().map(|p| p.to_string()).collect(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            mode: Mode::Auto,
            max_taint: DataClass::Private,
            expires: None,
            result_class: DataClass::Private,
            untrusted: false,
        }
    }

    #[test]
    fn bad_grants_are_refused_at_load() {
        let cases = [
            grant("a", "read_file", &[], &[]),
            grant("a", "read_file", &["w"], &[]),
            grant("a", "read_file", &["/w/../.."], &[]),
            grant("a", "read_file", &["/w/"], &[]),
            grant("a", "http_fetch", &[], &[]),
            grant("a", "http_fetch", &["/w"], &["a.com"]),
            grant("a", "http_fetch", &[], &["a.com:0"]),
            grant("a", "http_fetch", &[], &["a.com:99999"]),
            grant("a", "http_fetch", &[], &["a.com:"]),
            grant("a", "http_fetch", &[], &["a.com:https"]),
            grant("a", "http_fetch", &[], &[":443"]),
            grant("a", "http_fetch", &[], &["a.com:80:80"]),
            grant("a", "http_fetch", &[], &["*"]),
            grant("a", "shell", &[], &["a.com"]),
            grant("a", "restrict_self", &[], &[]),
            grant("a", "mcp", &[], &[]),
            grant("a", "mcp.gh", &[], &[]),
            grant("a", "mcp.gh.x.y", &[], &[]),
            grant("a", "mcp.gh.*", &["/w"], &[]),
        ];
        for case in cases {
            assert!(case.validate().is_err(), "{case:?} was accepted");
        }
        for host in ["a.com:8443", "*.a.com:443", "127.0.0.1:5432", "a.com"] {
            let ok = grant("a", "http_fetch", &[], &[host]);
            assert!(ok.validate().is_ok(), "{host} was refused");
        }
        assert!(GrantId::new("").is_err());
        assert!(GrantId::new("a b").is_err());
        let twice = ToolGrants::new([grant("a", "shell", &[], &[]), grant("a", "shell", &[], &[])]);
        assert_eq!(twice, Err(GrantError::Duplicate("a".into())));
    }

    #[test]
    fn grants_iterate_in_id_order_and_hash_by_every_field() {
        let set = ToolGrants::new([
            grant("b", "shell", &[], &[]),
            grant("a", "mcp.gh.*", &[], &[]),
        ])
        .unwrap();
        let ids: Vec<&str> = set.grants().map(|g| g.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        let base = grant("a", "read_file", &["/w"], &[]);
        let mut other = base.clone();
        other.untrusted = true;
        assert_ne!(base.sha256(), other.sha256());
        let mut moved = base.clone();
        moved.paths = vec!["/w".into(), "/x".into()];
        assert_ne!(base.sha256(), moved.sha256());
        assert_eq!(base.sha256(), base.clone().sha256());
    }

    #[test]
    fn rfc3339_instants() {
        let at = |t: &str| Timestamp::parse_rfc3339(t).map(Timestamp::micros);
        assert_eq!(at("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(at("2026-12-03T05:31:35Z"), Some(1_796_275_895_000_000));
        assert_eq!(at("2026-12-03T06:31:35+01:00"), Some(1_796_275_895_000_000));
        assert_eq!(at("2026-12-03t05:31:35.25z"), Some(1_796_275_895_250_000));
        assert_eq!(at("2000-02-29T00:00:00-00:30"), Some(951_784_200_000_000));
        for bad in [
            "",
            "2026-12-03",
            "2026-12-03 05:31:35Z",
            "2026-12-03T05:31:35",
            "2026-13-03T05:31:35Z",
            "2026-02-29T00:00:00Z",
            "2026-12-03T24:00:00Z",
            "2026-12-03T05:31:35.Z",
            "2026-12-03T05:31:35+0100",
            "2026-12-03T05:31:35+01:00x",
            "+026-12-03T05:31:35Z",
        ] {
            assert_eq!(at(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn workspace_paths_are_resolved() {
        let spec: GrantSpec = toml::from_str(
            r#"id = "ws"
tool = "read_file"
paths = ["{workspace}", "{workspace}/docs/../src"]
mode = "auto"
expires = "2026-12-31T18:00:00Z""#,
        )
        .unwrap();
        let grant = spec.resolve(Path::new("/runs/r1/ws")).unwrap();
        assert_eq!(grant.paths, ["/runs/r1/ws", "/runs/r1/ws/src"]);
        assert_eq!(
            grant.expires,
            Timestamp::parse_rfc3339("2026-12-31T18:00:00Z")
        );
        let late = GrantSpec {
            expires: Some("next tuesday".into()),
            ..spec.clone()
        };
        assert!(matches!(
            late.resolve(Path::new("/w")),
            Err(GrantError::Expires { .. })
        ));
        let unknown: Result<GrantSpec, _> =
            toml::from_str("id = \"x\"\ntool = \"shell\"\nmode = \"auto\"\nwhen = 1");
        assert!(unknown.is_err());
    }
}
