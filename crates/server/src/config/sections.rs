//! The whole file as serde reads it: each section's raw type, from that section's own file
//! (every one denies unknown keys and checks what needs more than a type as it is read, so a
//! fault carries the parser's position), read one section at a time so that every fault is
//! found. The authorization keys are read by authz-core; any other top-level key is a plug-in
//! surface's, and one no surface reads is a fault (`super::check_top_level_keys`).

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::DeTable;

use super::Text;
use super::access_section::AccessSection;
use super::faults::{Damaged, Faults, read_section};
use super::ingress_section::IngressSection;
use super::mcp_section::McpSection;
use super::memory_section::MemorySection;
use super::repos_section::ReposSection;
use super::retention_section::RetentionSection;
use super::sandbox_section::SandboxSection;
use super::schedules_section::ScheduleSection;
use super::server_section::ServerSection;
use super::slack_section::SlackSection;
use super::store_section::StoreSection;
use super::telemetry_section::TelemetrySection;

/// The top-level keys `FileSections` reads, in its order (for the unknown-key fault).
pub const CORE_KEYS: [&str; 18] = [
    "server",
    "store",
    "ingress",
    "agents",
    "telemetry",
    "grants",
    "groups",
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
    "sandbox",
];

/// The whole file: the typed sections (the authorization keys are read by authz-core from the
/// same text, and any other top-level key by its plug-in surface).
#[derive(Debug, Default)]
pub struct FileSections {
    pub server: ServerSection,
    pub store: StoreSection,
    pub ingress: IngressSection,
    pub agents: super::agents::AgentsSection,
    pub telemetry: TelemetrySection,
    pub slack: Option<SlackSection>,
    pub mcp: McpSection,
    pub access: Option<AccessSection>,
    pub schedules: Vec<Spanned<ScheduleSection>>,
    pub memory: MemorySection,
    pub agent_policy: Option<broker::file::OrgPolicyToml>,
    pub agent_grants: Vec<Spanned<broker::GrantSpec>>,
    pub repos: ReposSection,
    pub retention: RetentionSection,
    pub sandbox: SandboxSection,
    /// The keys taken out of sections because their values were at fault: the checks of
    /// what they would have changed are skipped.
    pub damaged: Damaged,
}

impl FileSections {
    /// Each section of `doc` read on its own, so a fault in one leaves the others read (and
    /// every fault of each kept in `faults`); an absent section is its default.
    pub(super) fn read(t: &Text<'_>, doc: &DeTable<'_>, faults: &mut Faults) -> FileSections {
        fn typed<T: DeserializeOwned>(
            t: &Text<'_>,
            doc: &DeTable<'_>,
            key: &str,
            faults: &mut Faults,
            damaged: &mut Damaged,
        ) -> Option<T> {
            read_section(t, doc.get(key)?, faults, damaged)
        }
        let mut damaged = Damaged::default();
        let d = &mut damaged;
        FileSections {
            server: typed(t, doc, "server", faults, d).unwrap_or_default(),
            store: typed(t, doc, "store", faults, d).unwrap_or_default(),
            ingress: typed(t, doc, "ingress", faults, d).unwrap_or_default(),
            agents: typed(t, doc, "agents", faults, d).unwrap_or_default(),
            telemetry: typed(t, doc, "telemetry", faults, d).unwrap_or_default(),
            slack: typed(t, doc, "slack", faults, d),
            mcp: typed(t, doc, "mcp", faults, d).unwrap_or_default(),
            access: typed(t, doc, "access", faults, d),
            schedules: typed(t, doc, "schedules", faults, d).unwrap_or_default(),
            memory: typed(t, doc, "memory", faults, d).unwrap_or_default(),
            agent_policy: typed(t, doc, "agent_policy", faults, d),
            agent_grants: typed(t, doc, "agent_grants", faults, d).unwrap_or_default(),
            repos: typed(t, doc, "repos", faults, d).unwrap_or_default(),
            retention: typed(t, doc, "retention", faults, d).unwrap_or_default(),
            sandbox: typed(t, doc, "sandbox", faults, d).unwrap_or_default(),
            damaged,
        }
    }
}
