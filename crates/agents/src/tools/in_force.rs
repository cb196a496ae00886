//! The policy a live run's next tool call decides under: the one in force when the call came,
//! so a reload between two calls reaches the second (its org rules, its principal's grants,
//! its repo's restriction), and never changes a call already being decided.

use authz_core::{Action, Actor, ActorId, Resource, authorize};
use broker::rules::{RuleTable, ToolRule};

/// What a reload may change between two calls of a run: the agent (its principal's grants
/// and groups), the repo's restriction, and the org's rules.
pub struct PolicyNow {
    pub agent: Actor,
    pub repo: Option<Resource>,
    pub org_rules: Vec<ToolRule>,
}

/// The policy in force, as the gate reads it before each decision: a run started before a
/// reload decides its next call under the new policy.
pub trait PolicyWatch: Send + Sync {
    /// Bumped by every reload; the gate resolves again only when it changed.
    fn generation(&self) -> u64;
    /// `agent` resolved again and `repo` stamped again under the policy in force, with its
    /// org rules.
    fn now(&self, agent: &Actor, repo: Option<&Resource>) -> PolicyNow;
}

/// What the gate decides one call under.
pub(super) struct InForce {
    pub(super) agent: Actor,
    pub(super) repo: Option<Resource>,
    pub(super) table: RuleTable,
    generation: u64,
}

impl InForce {
    pub(super) fn new(
        agent: Actor,
        repo: Option<Resource>,
        table: RuleTable,
        watch: Option<&dyn PolicyWatch>,
    ) -> InForce {
        InForce {
            agent,
            repo,
            table,
            // Under a watch, resolved again at the first call: the agent, its repo and the
            // rules were gathered before the gate was made (a clone, a queue, MCP servers),
            // and a reload may have come meanwhile. No generation is ever this one.
            generation: watch.map_or(0, |_| u64::MAX),
        }
    }

    /// This policy resolved again under `watch`'s, when a reload happened since: the same
    /// run's project and own rules, the org's new ones.
    pub(super) fn after_reload(&self, watch: &dyn PolicyWatch) -> Option<InForce> {
        let generation = watch.generation();
        (generation != self.generation).then(|| {
            let now = watch.now(&self.agent, self.repo.as_ref());
            InForce {
                agent: now.agent,
                repo: now.repo,
                table: self.table.with_org(now.org_rules),
                generation,
            }
        })
    }

    /// Whom the run acts for, when it acts for someone.
    pub(super) fn principal(&self) -> Option<&ActorId> {
        self.agent.on_behalf_of.as_ref().map(|p| &p.id)
    }

    /// Whether the run's principal may use the run's repository (always true outside one).
    pub(super) fn may_use_repo(&self) -> bool {
        self.repo
            .as_ref()
            .is_none_or(|repo| authorize(&self.agent, &Action::RepoUse, repo).is_allow())
    }
}
