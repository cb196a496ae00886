//! The policy table: data rows with one-sided selectors and a closed set of five conditions.
//!
//! A row's resource kind is part of its [`Target`], so the kinded-resource rule is a type rule:
//! a memory-scope or config-scope row without a kind does not compile,
//!
//! ```compile_fail,E0308
//! use authz_core::policy::{ActionPattern, Rule, Target};
//! use authz_core::Action;
//! // `Target::MemoryScope` needs a `MemoryKind`: without one it is a function, not a target.
//! let _ = Rule::new("memory:write × memory-scope", ActionPattern::Exact(Action::parse("memory:write").unwrap()), Target::MemoryScope);
//! ```
//!
//! ```compile_fail,E0308
//! use authz_core::policy::{ActionPattern, Rule, Target};
//! use authz_core::{Action, MemoryKind};
//! // A config scope takes a config kind; a memory kind is a type error.
//! let _ = Rule::new("x", ActionPattern::Exact(Action::parse("config:write").unwrap()), Target::ConfigScope(MemoryKind::Org));
//! ```
//!
//! and a kind on any other resource does not compile either:
//!
//! ```compile_fail,E0618
//! use authz_core::policy::{ActionPattern, Rule, Target};
//! use authz_core::{Action, MemoryKind};
//! // `Target::Run` carries no kind: giving it one is calling a unit variant.
//! let _ = Rule::new("runs:read × run", ActionPattern::Exact(Action::parse("runs:read").unwrap()), Target::Run(MemoryKind::Org));
//! ```
//!
//! while the well-formed rows do:
//!
//! ```
//! use authz_core::policy::{ActionPattern, Condition, Rule, Target};
//! use authz_core::{Action, MemoryKind};
//! let _ = Rule::new("m", ActionPattern::Exact(Action::parse("memory:write").unwrap()), Target::MemoryScope(MemoryKind::User))
//!     .when([Condition::IsSelf]);
//! let _ = Rule::new("r", ActionPattern::Exact(Action::parse("runs:read").unwrap()), Target::Run)
//!     .when([Condition::MemberOf]);
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::sync::OnceLock;

use serde::Serialize;

use crate::action::{Action, CATALOGUE_ACTIONS, CommandGroup, Effect};
use crate::ids::ActorKind;
use crate::resource::{ChannelVisibility, ConfigKind, MemoryKind, ResourceKind, ResourceType};

/// Which resource a row is about, with the kind for kinded resources (and only for them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Target {
    Run,
    Channel,
    Repo,
    Agent,
    Command,
    MemoryScope(MemoryKind),
    ConfigScope(ConfigKind),
}

impl Target {
    pub fn resource_type(self) -> ResourceType {
        match self {
            Target::Run => ResourceType::Run,
            Target::Channel => ResourceType::Channel,
            Target::Repo => ResourceType::Repo,
            Target::Agent => ResourceType::Agent,
            Target::Command => ResourceType::Command,
            Target::MemoryScope(_) => ResourceType::MemoryScope,
            Target::ConfigScope(_) => ResourceType::ConfigScope,
        }
    }

    pub fn kind(self) -> Option<ResourceKind> {
        match self {
            Target::MemoryScope(k) => Some(ResourceKind::Memory(k)),
            Target::ConfigScope(k) => Some(ResourceKind::Config(k)),
            _ => None,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind() {
            Some(k) => write!(f, "{}{{{k}}}", self.resource_type()),
            None => write!(f, "{}", self.resource_type()),
        }
    }
}

/// The action a row answers for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum ActionPattern {
    Exact(Action),
    /// Every `agent:run:<name>` (the agent comes from the resource).
    AnyAgentRun,
}

impl ActionPattern {
    pub fn matches(&self, action: &Action) -> bool {
        match self {
            ActionPattern::Exact(a) => a == action,
            ActionPattern::AnyAgentRun => matches!(action, Action::AgentRun(_)),
        }
    }
}

impl fmt::Display for ActionPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActionPattern::Exact(a) => write!(f, "{a}"),
            ActionPattern::AnyAgentRun => f.write_str("agent:run:<name>"),
        }
    }
}

/// The action `has_grant` asks for: fixed, or `agent:run:{name}` filled from the agent resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum GrantTemplate {
    Action(Action),
    AgentRunOfResource,
}

/// The closed condition vocabulary. Each is evaluable on one resource and compilable to a
/// store predicate.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Condition {
    /// The actor's actions hold the action (or are `all`).
    HasGrant(GrantTemplate),
    /// The actor's channels contain the resource's channel (or are `all`), or the resource's
    /// stamped visibility is public.
    MemberOf,
    /// The resource's user is the actor or its principal.
    IsSelf,
    /// The actor's repos contain the resource's repo (or are `all`).
    OwnerOf,
    /// The actor's channels are `all`.
    AllChannels,
}

impl Condition {
    pub fn has_grant(action: &str) -> Result<Self, crate::action::ActionError> {
        Action::parse(action).map(|a| Condition::HasGrant(GrantTemplate::Action(a)))
    }

    /// True when a row on `target` may carry this condition (authz.md, "what each condition
    /// reads on each resource").
    pub fn readable_on(&self, target: Target) -> bool {
        use MemoryKind as M;
        match self {
            Condition::HasGrant(GrantTemplate::Action(_)) => true,
            Condition::HasGrant(GrantTemplate::AgentRunOfResource) => target == Target::Agent,
            Condition::MemberOf | Condition::AllChannels => matches!(
                target,
                Target::Run | Target::Channel | Target::MemoryScope(M::Channel)
            ),
            Condition::IsSelf => matches!(
                target,
                Target::Run | Target::MemoryScope(M::User) | Target::ConfigScope(ConfigKind::User)
            ),
            Condition::OwnerOf => matches!(
                target,
                Target::Run | Target::Repo | Target::MemoryScope(M::Repo)
            ),
        }
    }
}

impl Serialize for Condition {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::HasGrant(GrantTemplate::Action(a)) => write!(f, "has_grant({a})"),
            Condition::HasGrant(GrantTemplate::AgentRunOfResource) => {
                f.write_str("has_grant(agent:run:{name})")
            }
            Condition::MemberOf => f.write_str("member_of"),
            Condition::IsSelf => f.write_str("is_self"),
            Condition::OwnerOf => f.write_str("owner_of"),
            Condition::AllChannels => f.write_str("all_channels"),
        }
    }
}

/// One-sided selectors: which rows apply to a request. Each reads one side only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Selectors {
    /// The row applies only to actors of these kinds.
    pub actor_kinds: Option<Vec<ActorKind>>,
    /// The row applies only when the memory scope's origin has one of these visibilities.
    /// Point-only: never compiled into a predicate.
    pub origin_visibility: Option<Vec<ChannelVisibility>>,
    /// The row applies only to a repo that is not under `restrict.repos`.
    pub unrestricted_only: bool,
}

/// A row of the policy table. Conditions AND within a row; rows for the same (action, resource)
/// OR; no row is a deny.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// A stable, human-readable name: tests, audit explanations and faults name rows by it.
    pub id: String,
    pub action: ActionPattern,
    pub target: Target,
    pub selectors: Selectors,
    pub when: Vec<Condition>,
}

impl Rule {
    pub fn new(id: impl Into<String>, action: ActionPattern, target: Target) -> Self {
        Rule {
            id: id.into(),
            action,
            target,
            selectors: Selectors::default(),
            when: Vec::new(),
        }
    }

    pub fn when(mut self, conditions: impl IntoIterator<Item = Condition>) -> Self {
        self.when = conditions.into_iter().collect();
        self
    }

    pub fn actor_kinds(mut self, kinds: impl IntoIterator<Item = ActorKind>) -> Self {
        self.selectors.actor_kinds = Some(kinds.into_iter().collect());
        self
    }

    pub fn origin_visibility(mut self, vis: impl IntoIterator<Item = ChannelVisibility>) -> Self {
        self.selectors.origin_visibility = Some(vis.into_iter().collect());
        self
    }

    pub fn unrestricted_only(mut self) -> Self {
        self.selectors.unrestricted_only = true;
        self
    }

    /// True when the row answers for `action` on a resource of this type and kind.
    pub fn answers(&self, action: &Action, ty: ResourceType, kind: Option<ResourceKind>) -> bool {
        self.target.resource_type() == ty
            && self.target.kind() == kind
            && self.action.matches(action)
    }

    /// Rows whose selectors read the resource side cannot be compiled to a list predicate.
    pub fn is_point_only(&self) -> bool {
        self.selectors.origin_visibility.is_some()
            || self.selectors.unrestricted_only
            || self
                .when
                .contains(&Condition::HasGrant(GrantTemplate::AgentRunOfResource))
    }

    /// The row's content without its name, conditions in a canonical order: two rows with the
    /// same shape are duplicates.
    fn shape(&self) -> (ActionPattern, Target, Selectors, BTreeSet<Condition>) {
        let mut selectors = self.selectors.clone();
        if let Some(k) = &mut selectors.actor_kinds {
            k.sort();
            k.dedup();
        }
        if let Some(v) = &mut selectors.origin_visibility {
            v.sort();
            v.dedup();
        }
        (
            self.action.clone(),
            self.target,
            selectors,
            self.when.iter().cloned().collect(),
        )
    }
}

/// What is wrong with one row (or, for a missing row, with one declared action).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    #[error("action {0} is declared by no command and is not a non-command action")]
    UndeclaredAction(Action),
    #[error("condition {condition} cannot be read on {target}")]
    UnreadableCondition {
        condition: Condition,
        target: Target,
    },
    #[error("selector {selector} cannot be read on {target}")]
    UnreadableSelector {
        selector: &'static str,
        target: Target,
    },
    #[error("selector {0} is empty, so the row can never apply")]
    EmptySelector(&'static str),
    #[error("duplicates row `{0}`")]
    DuplicateRow(String),
    #[error("the row name is used twice")]
    DuplicateName,
    #[error("declared command action {0} has no row, so it is refused for everyone")]
    NoRows(Action),
}

/// A fault with the row it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy row `{row}`: {fault}")]
pub struct PolicyFault {
    pub row: String,
    pub fault: Fault,
}

/// Checks a table before it may serve: every row's action is declared (by a command or as a
/// non-command action), every condition and selector reads an attribute its resource carries,
/// no row is duplicated, and every declared command action has a row. Returns every fault.
pub fn validate_policy(
    rules: &[Rule],
    declared: &BTreeSet<Action>,
) -> Result<(), Vec<PolicyFault>> {
    let mut faults = Vec::new();
    let mut fault = |row: &str, fault: Fault| {
        faults.push(PolicyFault {
            row: row.to_owned(),
            fault,
        })
    };
    for (i, rule) in rules.iter().enumerate() {
        if let ActionPattern::Exact(a) = &rule.action
            && !a.is_non_command()
            && !declared.contains(a)
        {
            fault(&rule.id, Fault::UndeclaredAction(a.clone()));
        }
        for c in &rule.when {
            if !c.readable_on(rule.target) {
                fault(
                    &rule.id,
                    Fault::UnreadableCondition {
                        condition: c.clone(),
                        target: rule.target,
                    },
                );
            }
        }
        let s = &rule.selectors;
        if s.origin_visibility.is_some() && !matches!(rule.target, Target::MemoryScope(_)) {
            fault(
                &rule.id,
                Fault::UnreadableSelector {
                    selector: "origin_visibility",
                    target: rule.target,
                },
            );
        }
        if s.unrestricted_only && rule.target != Target::Repo {
            fault(
                &rule.id,
                Fault::UnreadableSelector {
                    selector: "unrestricted_only",
                    target: rule.target,
                },
            );
        }
        if s.actor_kinds.as_ref().is_some_and(Vec::is_empty) {
            fault(&rule.id, Fault::EmptySelector("actor_kinds"));
        }
        if s.origin_visibility.as_ref().is_some_and(Vec::is_empty) {
            fault(&rule.id, Fault::EmptySelector("origin_visibility"));
        }
        for earlier in rules.iter().take(i) {
            if earlier.shape() == rule.shape() {
                fault(&rule.id, Fault::DuplicateRow(earlier.id.clone()));
            } else if earlier.id == rule.id {
                fault(&rule.id, Fault::DuplicateName);
            }
        }
    }
    for action in declared {
        let has_row = rules
            .iter()
            .any(|r| matches!(&r.action, ActionPattern::Exact(a) if a == action));
        if !has_row {
            fault(
                &format!("{action} × command"),
                Fault::NoRows(action.clone()),
            );
        }
    }
    if faults.is_empty() {
        Ok(())
    } else {
        Err(faults)
    }
}

/// A table that passed `validate_policy`. Only a validated table decides.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<Rule>,
    /// Row indexes by resource type, in table order: a decision scans only its type's rows.
    by_type: [Vec<usize>; ResourceType::COUNT],
}

impl Policy {
    pub fn new(rules: Vec<Rule>, declared: &BTreeSet<Action>) -> Result<Self, Vec<PolicyFault>> {
        validate_policy(&rules, declared)?;
        let mut by_type: [Vec<usize>; ResourceType::COUNT] = Default::default();
        for (i, rule) in rules.iter().enumerate() {
            if let Some(rows) = by_type.get_mut(rule.target.resource_type().index()) {
                rows.push(i);
            }
        }
        Ok(Policy { rules, by_type })
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rows that answer `action` on a resource of this type and kind, in table order.
    pub fn rows_for<'s: 'x, 'x>(
        &'s self,
        action: &'x Action,
        ty: ResourceType,
        kind: Option<ResourceKind>,
    ) -> impl Iterator<Item = &'s Rule> + 'x {
        self.by_type
            .get(ty.index())
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|&i| self.rules.get(i))
            .filter(move |r| r.target.kind() == kind && r.action.matches(action))
    }

    /// The built-in table, validated once against the catalogue's command actions. Should it
    /// ever fail validation (a test forbids it), the table is empty and everything is denied.
    pub fn builtin() -> &'static Policy {
        static BUILTIN: OnceLock<Policy> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            let declared: BTreeSet<Action> = CATALOGUE_ACTIONS.into_iter().collect();
            Policy::new(builtin_rules(), &declared).unwrap_or_default()
        })
    }
}

fn exact(action: &Action) -> ActionPattern {
    ActionPattern::Exact(action.clone())
}

fn grant(action: &Action) -> Condition {
    Condition::HasGrant(GrantTemplate::Action(action.clone()))
}

/// The rows of the built-in policy table (authz.md, "The rows"), in the order they are tried.
pub fn builtin_rules() -> Vec<Rule> {
    use CommandGroup::*;
    use Effect::*;
    let a = Action::command;
    let mut rows = Vec::new();

    // What governs later runs (config values, repos, MCP servers) is written by people,
    // services and schedules, never by an agent: nothing a run does changes what any run is
    // governed by.
    let not_an_agent = [ActorKind::User, ActorKind::Service, ActorKind::Schedule];
    let governs = [a(Config, Write), a(Repo, Write), a(Mcp, Write)];
    // Every command action × command: [has_grant(action)], plus a person's own config scope.
    for action in CATALOGUE_ACTIONS {
        if action == a(Config, Write) {
            rows.push(
                Rule::new(
                    "config:write × command (a person)",
                    exact(&action),
                    Target::Command,
                )
                .actor_kinds([ActorKind::User]),
            );
        }
        let row = Rule::new(
            format!("{action} × command"),
            exact(&action),
            Target::Command,
        )
        .when([grant(&action)]);
        rows.push(if governs.contains(&action) {
            row.actor_kinds(not_an_agent)
        } else {
            row
        });
    }
    rows.push(
        Rule::new(
            "trace:read × command",
            exact(&Action::TraceRead),
            Target::Command,
        )
        .when([grant(&Action::TraceRead)]),
    );

    // Config tiers.
    let config_write = a(Config, Write);
    rows.push(
        Rule::new(
            "config:write × config-scope{channel}",
            exact(&config_write),
            Target::ConfigScope(ConfigKind::Channel),
        )
        .actor_kinds(not_an_agent)
        .when([grant(&config_write)]),
    );
    rows.push(
        Rule::new(
            "config:write × config-scope{user} (own scope)",
            exact(&config_write),
            Target::ConfigScope(ConfigKind::User),
        )
        .actor_kinds(not_an_agent)
        .when([Condition::IsSelf]),
    );
    rows.push(
        Rule::new(
            "config:write × config-scope{user} (grant)",
            exact(&config_write),
            Target::ConfigScope(ConfigKind::User),
        )
        .actor_kinds(not_an_agent)
        .when([grant(&config_write)]),
    );
    rows.push(
        Rule::new(
            "config:write × config-scope{org}",
            exact(&config_write),
            Target::ConfigScope(ConfigKind::Org),
        )
        .actor_kinds(not_an_agent)
        .when([grant(&config_write)]),
    );

    // MCP server tiers.
    let mcp_write = a(Mcp, Write);
    for (kind, person_grant) in [
        (ConfigKind::Channel, config_write.clone()),
        (ConfigKind::Org, a(Repo, Write)),
    ] {
        let target = Target::ConfigScope(kind);
        rows.push(
            Rule::new(format!("mcp:write × {target}"), exact(&mcp_write), target)
                .actor_kinds(not_an_agent)
                .when([grant(&person_grant)]),
        );
        rows.push(
            Rule::new(
                format!("mcp:write × {target} (service)"),
                exact(&mcp_write),
                target,
            )
            .actor_kinds([ActorKind::Service])
            .when([grant(&mcp_write)]),
        );
    }

    // Agents.
    let repo_exec = a(Repo, Exec);
    rows.push(
        Rule::new(
            "repo:exec × agent (may run it)",
            exact(&repo_exec),
            Target::Agent,
        )
        .when([Condition::HasGrant(GrantTemplate::AgentRunOfResource)]),
    );
    rows.push(
        Rule::new(
            "repo:exec × agent (exec grant)",
            exact(&repo_exec),
            Target::Agent,
        )
        .when([grant(&repo_exec)]),
    );
    rows.push(
        Rule::new(
            "agent:run:<name> × agent",
            ActionPattern::AnyAgentRun,
            Target::Agent,
        )
        .when([Condition::HasGrant(GrantTemplate::AgentRunOfResource)]),
    );

    // Run reads and writes: the grant, and membership, the fleet, or the run being one's own.
    for action in [a(Runs, Read), a(Runs, Write), a(Friction, Read)] {
        for (name, condition) in [
            ("member", Condition::MemberOf),
            ("all channels", Condition::AllChannels),
            ("own run", Condition::IsSelf),
        ] {
            rows.push(
                Rule::new(
                    format!("{action} × run ({name})"),
                    exact(&action),
                    Target::Run,
                )
                .when([grant(&action), condition]),
            );
        }
    }

    // Repos: restricted ones only for owners; everything else open.
    rows.push(
        Rule::new(
            "repo:use × repo (owner)",
            exact(&Action::RepoUse),
            Target::Repo,
        )
        .when([Condition::OwnerOf]),
    );
    rows.push(
        Rule::new(
            "repo:use × repo (unrestricted)",
            exact(&Action::RepoUse),
            Target::Repo,
        )
        .unrestricted_only(),
    );

    // Memory writes (reflection) and forgetting shared records.
    let memory_write = a(Memory, Write);
    for (kind, condition) in [
        (MemoryKind::User, Condition::IsSelf),
        (MemoryKind::Channel, Condition::MemberOf),
        (MemoryKind::Repo, Condition::OwnerOf),
    ] {
        let target = Target::MemoryScope(kind);
        rows.push(
            Rule::new(
                format!("memory:write × {target}"),
                exact(&memory_write),
                target,
            )
            .when([condition]),
        );
    }
    rows.push(
        Rule::new(
            "memory:write × memory-scope{org}",
            exact(&memory_write),
            Target::MemoryScope(MemoryKind::Org),
        )
        .origin_visibility([ChannelVisibility::Public, ChannelVisibility::Machine]),
    );
    let repo_write = a(Repo, Write);
    for kind in [MemoryKind::Org, MemoryKind::Channel, MemoryKind::Repo] {
        let target = Target::MemoryScope(kind);
        rows.push(
            Rule::new(format!("repo:write × {target}"), exact(&repo_write), target)
                .when([grant(&repo_write)]),
        );
    }
    rows
}
