//! The whole file as serde reads it: each section's raw type, from that section's own file
//! (every one denies unknown keys and checks what needs more than a type as it is read, so a
//! fault carries the parser's position), and the authorization keys, read by authz-core. Any
//! other top-level key is kept aside for the plug-in surfaces; one no surface reads fails the
//! load first (`super::check_top_level_keys`).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de;
use toml::Spanned;

use super::access_section::AccessSection;
use super::ingress_section::IngressSection;
use super::mcp_section::McpSection;
use super::memory_section::MemorySection;
use super::repos_section::ReposSection;
use super::retention_section::RetentionSection;
use super::schedules_section::ScheduleSection;
use super::server_section::ServerSection;
use super::slack_section::SlackSection;
use super::store_section::StoreSection;
use super::telemetry_section::TelemetrySection;

/// The top-level keys `FileSections` reads, in its order (for the unknown-key fault).
pub const CORE_KEYS: [&str; 16] = [
    "server",
    "store",
    "ingress",
    "agents",
    "telemetry",
    "grants",
    "restrict",
    "slack",
    "mcp",
    "access",
    "schedules",
    "memory",
    "agent_policy",
    "agent_grants",
    "repos",
    "retention",
];

/// The whole file: the typed sections, and the authorization keys (read by authz-core from
/// the same text).
#[derive(Debug, Default, Deserialize)]
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
    /// Every other top-level key: a plug-in surface's section (one no surface reads failed the
    /// load before this type was read).
    #[serde(flatten)]
    pub _others: BTreeMap<String, de::IgnoredAny>,
}
