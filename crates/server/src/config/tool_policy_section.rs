//! `[agent_policy]` and `[[agent_grants]]`: the typed config the broker decides tool calls with
//! and its checks (the raw tables are the broker crate's own types, read in `FileSections`).

use std::collections::BTreeSet;
use std::time::Duration;

use authz_core::{AgentName, RepoSlug};

use super::{FileSections, LoadError, Text};

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

/// `[agent_policy]` and `[[agent_grants]]`: the org's rules, and grants checked whole at
/// load (a unique id, a declared agent, a repo slug, a tool, paths and hosts of its shape, an
/// expiry that parses) so a run never meets a grant it cannot read.
pub(super) fn tool_policy(
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
