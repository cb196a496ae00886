//! `[agents]`: settings and named tables in one section, which serde's derive cannot say
//! (`flatten` does not combine with `deny_unknown_fields`). One hand-written visitor walks it
//! once: each setting is read with its type, each other key must be an `[agents.<name>]`
//! table, read as an [`AgentTable`] (every key of every back end, unknown keys denied) and
//! turned into the typed back-end enum after.
//!
//! Then the typed side: each table's `AgentSpec` (its `BackendSpec`, kind, parent, timeout and
//! caps), the section's `AgentLimits`, and their checks (a kind of one name, parents that never
//! lead back where they started, sandbox paths); and `declared_agent`, for every key that names
//! an agent.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use agents::{EchoBehaviour, OutputCaps, RequestVia};
use authz_core::AgentName;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use toml::Spanned;

use super::agent_network::{AgentNetwork, ModelEndpointTable, NetworkKey, agent_network};
use super::numbers::{Positive, Whole};
use super::{LoadError, Text};

/// The keys `[agents]` itself takes (besides `[agents.<name>]` tables).
pub const SETTINGS: [&str; 5] = [
    "default",
    "max_concurrent",
    "max_per_actor",
    "channel_directory_timeout_ms",
    "env_allow",
];

/// `[agents]` as written.
#[derive(Debug, Default)]
pub struct AgentsSection {
    pub default: Option<Spanned<String>>,
    pub max_concurrent: Option<Positive>,
    pub max_per_actor: Option<Positive>,
    pub channel_directory_timeout_ms: Option<Positive>,
    pub env_allow: Option<Vec<String>>,
    pub tables: BTreeMap<AgentName, AgentTable>,
}

impl<'de> Deserialize<'de> for AgentsSection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(AgentsVisitor)
    }
}

struct AgentsVisitor;

impl<'de> Visitor<'de> for AgentsVisitor {
    type Value = AgentsSection;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of settings and [agents.<name>] tables")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AgentsSection, A::Error> {
        let mut s = AgentsSection::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "default" => s.default = Some(map.next_value()?),
                "max_concurrent" => s.max_concurrent = Some(map.next_value()?),
                "max_per_actor" => s.max_per_actor = Some(map.next_value()?),
                "channel_directory_timeout_ms" => {
                    s.channel_directory_timeout_ms = Some(map.next_value()?)
                }
                "env_allow" => s.env_allow = Some(map.next_value()?),
                _ => {
                    let name = AgentName::parse(&key).map_err(de::Error::custom)?;
                    let table: AgentValue = map.next_value()?;
                    s.tables.insert(name, table.0);
                }
            }
        }
        Ok(s)
    }
}

/// An `[agents.<name>]` entry, which must be a table.
struct AgentValue(AgentTable);

impl<'de> Deserialize<'de> for AgentValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AgentValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    "an [agents.<name>] table (the settings of [agents] are {})",
                    SETTINGS.join(", ")
                )
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<AgentValue, A::Error> {
                AgentTable::deserialize(de::value::MapAccessDeserializer::new(map)).map(AgentValue)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Echo,
    Command,
    #[serde(rename = "claude-code")]
    ClaudeCode,
    Openai,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Echo => "echo",
            BackendKind::Command => "command",
            BackendKind::ClaudeCode => "claude-code",
            BackendKind::Openai => "openai",
        }
    }

    /// The keys only this back end takes.
    pub fn own_keys(self) -> &'static [&'static str] {
        match self {
            BackendKind::Echo => &["behaviour", "delay_ms"],
            BackendKind::Command => &[
                "command",
                "request_via",
                "sandbox",
                "sandbox_bind",
                "sandbox_read_only",
                "network",
                "model_endpoint",
            ],
            BackendKind::ClaudeCode => &[
                "program",
                "model",
                "sandbox_bind",
                "sandbox_read_only",
                "model_endpoint",
            ],
            BackendKind::Openai => &["base_url", "model", "api_key_env", "system_prompt"],
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Behaviour {
    Answer,
    Fail,
    Stall,
}

impl From<Behaviour> for EchoBehaviour {
    fn from(b: Behaviour) -> Self {
        match b {
            Behaviour::Answer => EchoBehaviour::Answer,
            Behaviour::Fail => EchoBehaviour::Fail,
            Behaviour::Stall => EchoBehaviour::Stall,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    Stdin,
    Argument,
}

impl From<Via> for RequestVia {
    fn from(v: Via) -> Self {
        match v {
            Via::Stdin => RequestVia::Stdin,
            Via::Argument => RequestVia::Argument,
        }
    }
}

/// One `[agents.<name>]` table as written: the keys every back end takes, and each back end's
/// own (checked against `backend` after reading, with their positions).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentTable {
    pub backend: Option<BackendKind>,
    pub timeout_seconds: Option<Positive>,
    pub max_event_bytes: Option<Positive>,
    pub max_output_bytes: Option<Positive>,
    pub max_answer_bytes: Option<Positive>,
    /// For people reading the file; read only so it is a known key.
    #[serde(rename = "description")]
    _description: Option<String>,
    pub behaviour: Option<Spanned<Behaviour>>,
    pub delay_ms: Option<Spanned<Whole>>,
    pub command: Option<Spanned<Vec<String>>>,
    /// Claude Code's program (`claude` on the agent's PATH by default).
    pub program: Option<Spanned<String>>,
    pub request_via: Option<Spanned<Via>>,
    pub sandbox: Option<Spanned<bool>>,
    /// Host paths bound into the sandbox read-write (`~/.claude`) and read-only.
    pub sandbox_bind: Option<Spanned<Vec<Spanned<String>>>>,
    pub sandbox_read_only: Option<Spanned<Vec<Spanned<String>>>>,
    /// `"broker"` (the default, sandboxed) or `"host"`.
    pub network: Option<Spanned<NetworkKey>>,
    /// The model endpoint the broker's proxy lets the agent reach, with the real key.
    pub model_endpoint: Option<Spanned<ModelEndpointTable>>,
    /// The agent's kind for the broker's rules (`main`, `reviewer`, …).
    pub kind: Option<Spanned<String>>,
    /// The agent that starts this one (its kind's parent), when it is a sub-agent.
    pub parent: Option<Spanned<String>>,
    pub base_url: Option<Spanned<String>>,
    pub model: Option<Spanned<String>>,
    pub api_key_env: Option<Spanned<String>>,
    pub system_prompt: Option<Spanned<String>>,
}

impl AgentTable {
    /// The back-end keys present, with where each starts.
    pub fn backend_keys(&self) -> Vec<(&'static str, usize)> {
        let at = |present: Option<usize>, key: &'static str| present.map(|p| (key, p));
        [
            at(self.behaviour.as_ref().map(|s| s.span().start), "behaviour"),
            at(self.delay_ms.as_ref().map(|s| s.span().start), "delay_ms"),
            at(self.command.as_ref().map(|s| s.span().start), "command"),
            at(self.program.as_ref().map(|s| s.span().start), "program"),
            at(
                self.request_via.as_ref().map(|s| s.span().start),
                "request_via",
            ),
            at(self.sandbox.as_ref().map(|s| s.span().start), "sandbox"),
            at(
                self.sandbox_bind.as_ref().map(|s| s.span().start),
                "sandbox_bind",
            ),
            at(
                self.sandbox_read_only.as_ref().map(|s| s.span().start),
                "sandbox_read_only",
            ),
            at(self.network.as_ref().map(|s| s.span().start), "network"),
            at(
                self.model_endpoint.as_ref().map(|s| s.span().start),
                "model_endpoint",
            ),
            at(self.base_url.as_ref().map(|s| s.span().start), "base_url"),
            at(self.model.as_ref().map(|s| s.span().start), "model"),
            at(
                self.api_key_env.as_ref().map(|s| s.span().start),
                "api_key_env",
            ),
            at(
                self.system_prompt.as_ref().map(|s| s.span().start),
                "system_prompt",
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
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
        /// Through the broker's per-run proxy (the default when sandboxed), or the host's.
        network: AgentNetwork,
        /// `backend = "claude-code"`: the program is Claude Code, every tool call through the
        /// broker (always sandboxed, on the broker's network).
        claude_code: Option<ClaudeCodeSpec>,
    },
    OpenAi {
        base_url: String,
        model: String,
        /// The environment variable holding the key; none sends no key (a local server).
        api_key_env: Option<String>,
        system_prompt: Option<String>,
    },
}

/// What `backend = "claude-code"` adds to a command agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeCodeSpec {
    /// `model`: given to Claude Code as `--model`, and what the broker's rules match.
    pub model: Option<String>,
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

    /// The model the broker's rules match for a Claude Code agent (its config's, never what
    /// the process reports); `None` for any other back end.
    pub fn claude_code_model(&self) -> Option<Option<&str>> {
        match self {
            BackendSpec::Command {
                claude_code: Some(c),
                ..
            } => Some(c.model.as_deref()),
            _ => None,
        }
    }

    /// Whether the agent's network goes through the broker (a sandboxed command agent's,
    /// unless it says `network = "host"`; a Claude Code agent's always): its runs get a broker
    /// gate for it.
    pub fn network_through_broker(&self) -> bool {
        matches!(self, BackendSpec::Command { network, .. } if network.through_broker())
    }

    pub fn kind(&self) -> &'static str {
        match self {
            BackendSpec::Echo { .. } => "echo",
            BackendSpec::Command {
                claude_code: Some(_),
                ..
            } => "claude-code",
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

pub(super) fn limits(a: &AgentsSection) -> AgentLimits {
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
pub(super) fn check_lineage(
    t: &Text<'_>,
    declared: &BTreeSet<AgentName>,
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
        if !declared.contains(parent) {
            return Err(t.at(
                at,
                format!("names {parent}, which is not a declared agent; declare [agents.{parent}] or remove parent"),
            ));
        }
        // A parent whose own table has a fault is named there; its lineage is not followed.
        let mut seen = vec![name];
        let mut next = specs.contains_key(parent).then_some(parent);
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

/// `backend = "claude-code"`: Claude Code started with its hooks, sandboxed, on the broker's
/// network, reaching its model endpoint (Anthropic's API by default, the key from
/// `ANTHROPIC_API_KEY`) through the gateway.
fn claude_code_spec(t: &Text<'_>, a: &AgentTable) -> Result<BackendSpec, LoadError> {
    let program = match &a.program {
        Some(p) if p.get_ref().trim().is_empty() => {
            return Err(t.at(
                p.span().start,
                "name Claude Code's program, like program = \"claude\" or \"/opt/claude-code/bin/claude\"",
            ));
        }
        Some(p) => p.get_ref().clone(),
        None => "claude".to_owned(),
    };
    let model = a.model.as_ref().map(|m| m.get_ref().clone());
    let settings = agents::claude_code::ClaudeCodeSettings {
        model: model.clone(),
        hook_timeout: Duration::ZERO,
    };
    let network = agent_network(t, None, a.model_endpoint.as_ref(), true)?;
    let network = match network {
        AgentNetwork::Broker { model: Some(m) }
            if m.api != agents::netproxy::ModelApi::Anthropic =>
        {
            return Err(t.at(
                a.model_endpoint.as_ref().map_or(0, |m| m.span().start),
                "Claude Code speaks Anthropic's API: model_endpoint's api must be \"anthropic\"",
            ));
        }
        AgentNetwork::Broker { model: None } => AgentNetwork::Broker {
            model: Some(super::agent_network::ModelEndpointSpec {
                api: agents::netproxy::ModelApi::Anthropic,
                url: url::Url::parse("https://api.anthropic.com")
                    .map_err(|e| t.at(0, e.to_string()))?,
                key_env: Some("ANTHROPIC_API_KEY".to_owned()),
            }),
        },
        other => other,
    };
    Ok(BackendSpec::Command {
        argv: std::iter::once(program)
            .chain(settings.arguments())
            .collect(),
        request_via: RequestVia::Stdin,
        sandbox: true,
        sandbox_bind: bind_paths(t, a.sandbox_bind.as_ref())?,
        sandbox_read_only: bind_paths(t, a.sandbox_read_only.as_ref())?,
        network,
        claude_code: Some(ClaudeCodeSpec { model }),
    })
}

/// An agent's table as the typed back end it names (`echo` by default), refusing keys of
/// another back end and naming a missing one.
pub(super) fn agent_spec(
    t: &Text<'_>,
    name: &AgentName,
    a: &AgentTable,
) -> Result<AgentSpec, LoadError> {
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
            let sandbox = a.sandbox.as_ref().is_none_or(|v| *v.get_ref());
            BackendSpec::Command {
                argv: argv.get_ref().clone(),
                request_via: a
                    .request_via
                    .as_ref()
                    .map_or(RequestVia::Stdin, |v| (*v.get_ref()).into()),
                sandbox,
                sandbox_bind: bind_paths(t, a.sandbox_bind.as_ref())?,
                sandbox_read_only: bind_paths(t, a.sandbox_read_only.as_ref())?,
                network: agent_network(t, a.network.as_ref(), a.model_endpoint.as_ref(), sandbox)?,
                claude_code: None,
            }
        }
        BackendKind::ClaudeCode => claude_code_spec(t, a)?,
        BackendKind::Openai => BackendSpec::OpenAi {
            base_url: {
                let url = a.base_url.as_ref().ok_or_else(|| {
                    missing("base_url", "base_url = \"https://api.openai.com/v1\"")
                })?;
                if let Some(why) = super::urls::base_url_fault(url.get_ref()) {
                    return Err(t.at(
                        url.span().start,
                        format!("must be the endpoint's http(s) base URL, like \"https://api.openai.com/v1\" (/chat/completions is appended); here {why}"),
                    ));
                }
                url.get_ref().clone()
            },
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

/// A config value naming an agent: it must be one `[agents.<name>]` declares.
pub(super) fn declared_agent(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::ok;

    #[test]
    fn agents_are_declared_by_tables_and_read_as_their_back_ends() {
        let c = ok(r#"
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
sandbox = true
sandbox_bind = ["~/.claude", "/var/lib/claude"]
sandbox_read_only = ["/opt/node"]
kind = "main"
timeout_seconds = 900
description = "Claude Code, headless"
[agents.local]
backend = "openai"
base_url = "http://127.0.0.1:8081/v1"
model = "qwen"
kind = "reviewer"
parent = "claude"
[agents.demo]
behaviour = "stall"
delay_ms = 200
max_event_bytes = 100
"#);
        assert_eq!(c.agents.len(), 3);
        assert!(
            c.agent_specs.keys().eq(c.agents.iter()),
            "every declared agent has its spec"
        );
        assert_eq!(c.default_agent.unwrap().as_str(), "claude");
        assert_eq!(c.limits.max_per_actor, 2);
        assert_eq!(
            c.limits.channel_directory_timeout,
            Duration::from_millis(500)
        );
        assert_eq!(c.limits.env_allow, vec!["PATH".to_owned()]);
        let spec = |n: &str| &c.agent_specs[&AgentName::parse(n).unwrap()];
        assert_eq!(
            spec("claude").backend,
            BackendSpec::Command {
                argv: vec!["claude".into(), "-p".into()],
                request_via: RequestVia::Argument,
                sandbox: true,
                sandbox_bind: vec!["~/.claude".into(), "/var/lib/claude".into()],
                sandbox_read_only: vec!["/opt/node".into()],
                network: AgentNetwork::Broker { model: None },
                claude_code: None,
            }
        );
        assert_eq!(spec("claude").kind.as_deref(), Some("main"));
        assert_eq!(spec("claude").parent, None);
        assert_eq!(spec("local").kind.as_deref(), Some("reviewer"));
        assert_eq!(
            spec("local").parent.as_ref().map(AgentName::as_str),
            Some("claude")
        );
        assert_eq!(spec("demo").kind, None);
        assert_eq!(spec("claude").timeout, Duration::from_secs(900));
        assert_eq!(spec("local").backend.kind(), "openai");
        assert_eq!(
            spec("demo").backend,
            BackendSpec::Echo {
                behaviour: EchoBehaviour::Stall,
                delay: Duration::from_millis(200)
            },
            "backend defaults to echo"
        );
        assert_eq!(spec("demo").caps.event_bytes, 100);
    }

    #[test]
    fn a_command_agent_is_sandboxed_unless_it_says_sandbox_false() {
        let c = ok(r#"
[agents.plain]
backend = "command"
command = ["claude", "-p"]
[agents.open]
backend = "command"
command = ["claude", "-p"]
sandbox = false
"#);
        let sandbox = |n: &str| match &c.agent_specs[&AgentName::parse(n).unwrap()].backend {
            BackendSpec::Command { sandbox, .. } => *sandbox,
            other => panic!("{other:?}"),
        };
        assert!(sandbox("plain"), "on by default");
        assert!(!sandbox("open"));
    }

    #[test]
    fn a_claude_code_agent_is_claude_code_sandboxed_on_the_brokers_network() {
        let c = ok(r#"
[agents.cc]
backend = "claude-code"
model = "claude-sonnet-4-5"
[agents.local]
backend = "claude-code"
program = "/opt/claude/bin/claude"
model_endpoint = { api = "anthropic", url = "http://127.0.0.1:9000" }
"#);
        let spec = |n: &str| &c.agent_specs[&AgentName::parse(n).unwrap()].backend;
        let BackendSpec::Command {
            argv,
            sandbox,
            network: AgentNetwork::Broker {
                model: Some(endpoint),
            },
            claude_code: Some(claude),
            request_via,
            ..
        } = spec("cc")
        else {
            panic!("{:?}", spec("cc"));
        };
        assert_eq!(argv.first().map(String::as_str), Some("claude"));
        assert!(
            argv.windows(2)
                .any(|w| w == ["--model", "claude-sonnet-4-5"])
        );
        assert!(*sandbox);
        assert_eq!(*request_via, RequestVia::Stdin);
        assert_eq!(endpoint.url.as_str(), "https://api.anthropic.com/");
        assert_eq!(endpoint.key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        assert_eq!(claude.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(spec("cc").kind(), "claude-code");
        assert_eq!(
            spec("cc").claude_code_model(),
            Some(Some("claude-sonnet-4-5"))
        );
        assert!(spec("cc").network_through_broker());
        let BackendSpec::Command { argv, network, .. } = spec("local") else {
            panic!();
        };
        assert_eq!(
            argv.first().map(String::as_str),
            Some("/opt/claude/bin/claude")
        );
        assert!(!argv.contains(&"--model".to_owned()));
        assert!(matches!(network, AgentNetwork::Broker { model: Some(m) } if m.key_env.is_none()));
    }

    /// What a claude-code table may not say: each refused with its file, line, key and fix.
    #[test]
    fn a_claude_code_agent_refuses_what_would_loosen_it() {
        let table = [
            (
                "command = [\"claude\"]",
                "`command` is not a setting of the claude-code back end",
            ),
            (
                "sandbox = false",
                "`sandbox` is not a setting of the claude-code back end",
            ),
            (
                "network = \"host\"",
                "`network` is not a setting of the claude-code back end",
            ),
            (
                "request_via = \"argument\"",
                "`request_via` is not a setting",
            ),
            ("program = \"  \"", "name Claude Code's program"),
            (
                "model_endpoint = { api = \"openai\", url = \"https://api.openai.com\" }",
                "api must be \"anthropic\"",
            ),
            (
                "model_endpoint = { api = \"anthropic\", url = \"http://example.com\" }",
                "https",
            ),
        ];
        for (line, says) in table {
            let e = crate::config::tests::err(&format!(
                "[agents.cc]\nbackend = \"claude-code\"\n{line}\n"
            ));
            assert!(e.starts_with("t.toml:3:"), "{line}: {e}");
            assert!(e.contains(says), "{line}: {e}");
        }
    }
}
