//! `[agents]`: settings and named tables in one section, which serde's derive cannot say
//! (`flatten` does not combine with `deny_unknown_fields`). One hand-written visitor walks it
//! once: each setting is read with its type, each other key must be an `[agents.<name>]`
//! table, read as an [`AgentTable`] (every key of every back end, unknown keys denied) and
//! turned into the typed back-end enum after.

use std::collections::BTreeMap;
use std::fmt;

use agents::{EchoBehaviour, RequestVia};
use authz_core::AgentName;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use toml::Spanned;

use super::numbers::{Positive, Whole};

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
    Openai,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Echo => "echo",
            BackendKind::Command => "command",
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
    pub request_via: Option<Spanned<Via>>,
    pub sandbox: Option<Spanned<bool>>,
    /// Host paths bound into the sandbox read-write (`~/.claude`) and read-only.
    pub sandbox_bind: Option<Spanned<Vec<Spanned<String>>>>,
    pub sandbox_read_only: Option<Spanned<Vec<Spanned<String>>>>,
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
