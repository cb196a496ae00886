//! `authorize`: the one decision, and `explain`, the same evaluation with every row's outcome.

use std::fmt;

use serde::Serialize;

use crate::action::Action;
use crate::actor::Actor;
use crate::grants::Grants;
use crate::ids::ActorKind;
use crate::ids::{AgentName, ChannelId, RepoSlug};
use crate::policy::{Condition, GrantTemplate, Policy, Rule};
use crate::resource::{ChannelVisibility, ConfigTier, Resource, ResourceType, ScopeKey};

/// Why a request was denied. For the audit line only: never in a reply. It names the actor's
/// missing fact, never the surface key a grant might have come through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Reason {
    /// No row answers this action on this resource type (and kind).
    NoRule {
        action: Action,
        resource_type: ResourceType,
    },
    MissingGrant {
        action: Action,
    },
    NotMember {
        channel: ChannelId,
    },
    NotAllChannels,
    NotSelf,
    NotOwner {
        repo: Option<RepoSlug>,
    },
    /// The actor's kind does not match its id's namespace (or a non-agent carries a principal).
    InconsistentActor,
    /// The rows that apply are for other actor kinds.
    ActorKind {
        kind: ActorKind,
    },
    /// The memory scope's origin visibility is not one the row selects (org writes).
    OriginVisibility {
        visibility: ChannelVisibility,
    },
    /// The repo is under `restrict.repos`.
    Restricted {
        repo: RepoSlug,
    },
    /// A row reads an attribute this resource does not carry (validation refuses such rows;
    /// this is the fail-closed answer should one ever serve).
    Unreadable,
}

impl Reason {
    /// What the failed condition is about, for the audit line: the channel, the repo, the
    /// grant, the actor kind or the visibility; `None` for a reason about nothing in
    /// particular.
    pub fn subject(&self) -> Option<String> {
        match self {
            Reason::NoRule { action, .. } | Reason::MissingGrant { action } => {
                Some(action.to_string())
            }
            Reason::NotMember { channel } => Some(channel.to_string()),
            Reason::NotOwner { repo } => repo.as_ref().map(ToString::to_string),
            Reason::Restricted { repo } => Some(repo.to_string()),
            Reason::ActorKind { kind } => Some(kind.as_str().to_owned()),
            Reason::OriginVisibility { visibility } => Some(visibility.to_string()),
            Reason::NotAllChannels
            | Reason::NotSelf
            | Reason::InconsistentActor
            | Reason::Unreadable => None,
        }
    }

    /// The reason token on an audit line.
    pub fn token(&self) -> &'static str {
        match self {
            Reason::NoRule { .. } => "no-rule",
            Reason::MissingGrant { .. } => "missing-grant",
            Reason::NotMember { .. } => "not-member",
            Reason::NotAllChannels => "not-all-channels",
            Reason::NotSelf => "not-self",
            Reason::NotOwner { .. } => "not-owner",
            Reason::InconsistentActor => "inconsistent-actor",
            Reason::ActorKind { .. } => "actor-kind",
            Reason::OriginVisibility { .. } => "origin-visibility",
            Reason::Restricted { .. } => "restricted",
            Reason::Unreadable => "unreadable",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::NoRule {
                action,
                resource_type,
            } => write!(f, "no rule for {action} on {resource_type}"),
            Reason::MissingGrant { action } => write!(f, "missing grant {action}"),
            Reason::NotMember { channel } => write!(f, "not a member of {channel}"),
            Reason::NotAllChannels => f.write_str("channels are not all"),
            Reason::NotSelf => f.write_str("not the actor's own"),
            Reason::NotOwner { repo: Some(r) } => write!(f, "repos do not include {r}"),
            Reason::NotOwner { repo: None } => f.write_str("the resource names no repo"),
            Reason::InconsistentActor => f.write_str("inconsistent actor"),
            Reason::ActorKind { kind } => {
                write!(f, "no applicable row for a {} actor", kind.as_str())
            }
            Reason::OriginVisibility { visibility } => {
                write!(f, "origin visibility {visibility} is not selected")
            }
            Reason::Restricted { repo } => write!(f, "{repo} is restricted"),
            Reason::Unreadable => f.write_str("a row reads an attribute the resource lacks"),
        }
    }
}

/// The answer of `authorize`. Named `Verdict` so it never meets the broker's `Decision`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Deny(Reason),
}

impl Verdict {
    pub fn is_allow(&self) -> bool {
        matches!(self, Verdict::Allow)
    }
}

/// What one row said about one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum RowOutcome {
    Allowed,
    /// A selector kept the row from applying.
    NotSelected {
        reason: Reason,
    },
    /// The row applied and this condition failed.
    ConditionFailed {
        condition: Condition,
        reason: Reason,
    },
}

/// One row tried, with its outcome.
#[derive(Debug, Clone, Serialize)]
pub struct RowTrace<'p> {
    pub rule: &'p Rule,
    #[serde(flatten)]
    pub outcome: RowOutcome,
}

/// `explain`'s answer: the verdict and every row tried, in table order.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation<'p> {
    pub verdict: Verdict,
    pub rows: Vec<RowTrace<'p>>,
}

impl Policy {
    /// The decision over this table. An inconsistent actor is denied before anything else.
    pub fn authorize(&self, actor: &Actor, action: &Action, resource: &Resource) -> Verdict {
        if !actor.is_consistent() {
            return Verdict::Deny(Reason::InconsistentActor);
        }
        let grants = actor.effective_grants();
        let held = Held::new(&grants);
        let mut first = Fallback::default();
        for rule in self.rows_for_resource(action, resource) {
            match evaluate_row(rule, actor, &held, resource) {
                RowResult::Allowed => return Verdict::Allow,
                other => first.note(other),
            }
        }
        Verdict::Deny(first.into_reason(action, resource))
    }

    /// The same evaluation as `authorize`, keeping every row's outcome.
    pub fn explain(&self, actor: &Actor, action: &Action, resource: &Resource) -> Explanation<'_> {
        if !actor.is_consistent() {
            return Explanation {
                verdict: Verdict::Deny(Reason::InconsistentActor),
                rows: Vec::new(),
            };
        }
        let grants = actor.effective_grants();
        let held = Held::new(&grants);
        let mut first = Fallback::default();
        let mut allowed = false;
        let mut rows = Vec::new();
        for rule in self.rows_for_resource(action, resource) {
            let result = evaluate_row(rule, actor, &held, resource);
            let outcome = result.outcome();
            allowed |= outcome == RowOutcome::Allowed;
            first.note(result);
            rows.push(RowTrace { rule, outcome });
        }
        let verdict = if allowed {
            Verdict::Allow
        } else {
            Verdict::Deny(first.into_reason(action, resource))
        };
        Explanation { verdict, rows }
    }

    fn rows_for_resource<'s: 'x, 'x>(
        &'s self,
        action: &'x Action,
        resource: &Resource,
    ) -> impl Iterator<Item = &'s Rule> + 'x {
        self.rows_for(action, resource.resource_type(), resource.kind())
    }
}

/// A failed check, borrowing what it names: the owned `Reason` is built only for the one
/// reported, so a deny costs no more than it must.
#[derive(Clone, Copy)]
enum Miss<'a> {
    MissingGrant(&'a Action),
    MissingAgentRun(&'a AgentName),
    NotMember(&'a ChannelId),
    NotAllChannels,
    NotSelf,
    NotOwner(Option<&'a RepoSlug>),
    ActorKind(ActorKind),
    OriginVisibility(ChannelVisibility),
    Restricted(&'a RepoSlug),
    Unreadable,
}

impl Miss<'_> {
    fn reason(self) -> Reason {
        match self {
            Miss::MissingGrant(a) => Reason::MissingGrant { action: a.clone() },
            Miss::MissingAgentRun(n) => Reason::MissingGrant {
                action: Action::AgentRun(n.clone()),
            },
            Miss::NotMember(c) => Reason::NotMember { channel: c.clone() },
            Miss::NotAllChannels => Reason::NotAllChannels,
            Miss::NotSelf => Reason::NotSelf,
            Miss::NotOwner(r) => Reason::NotOwner { repo: r.cloned() },
            Miss::ActorKind(kind) => Reason::ActorKind { kind },
            Miss::OriginVisibility(visibility) => Reason::OriginVisibility { visibility },
            Miss::Restricted(r) => Reason::Restricted { repo: r.clone() },
            Miss::Unreadable => Reason::Unreadable,
        }
    }
}

/// One row's result before it is rendered as a `RowOutcome`.
enum RowResult<'a> {
    Allowed,
    NotSelected(Miss<'a>),
    Failed(&'a Condition, Miss<'a>),
}

impl RowResult<'_> {
    fn outcome(&self) -> RowOutcome {
        match self {
            RowResult::Allowed => RowOutcome::Allowed,
            RowResult::NotSelected(m) => RowOutcome::NotSelected { reason: m.reason() },
            RowResult::Failed(c, m) => RowOutcome::ConditionFailed {
                condition: (*c).clone(),
                reason: m.reason(),
            },
        }
    }
}

/// The deny reason: the first failed condition of a row that applied, else the first selector
/// that kept a row out, else "no rule".
#[derive(Default)]
struct Fallback<'a> {
    condition: Option<Miss<'a>>,
    selector: Option<Miss<'a>>,
}

impl<'a> Fallback<'a> {
    fn note(&mut self, result: RowResult<'a>) {
        match result {
            RowResult::Allowed => {}
            RowResult::NotSelected(m) => {
                self.selector.get_or_insert(m);
            }
            RowResult::Failed(_, m) => {
                self.condition.get_or_insert(m);
            }
        }
    }

    fn into_reason(self, action: &Action, resource: &Resource) -> Reason {
        match self.condition.or(self.selector) {
            Some(m) => m.reason(),
            None => Reason::NoRule {
                action: action.clone(),
                resource_type: resource.resource_type(),
            },
        }
    }
}

/// `authorize` over the built-in table: the only decision function command code, the
/// dispatcher and reflection call.
pub fn authorize(actor: &Actor, action: &Action, resource: &Resource) -> Verdict {
    Policy::builtin().authorize(actor, action, resource)
}

/// `explain` over the built-in table.
pub fn explain(actor: &Actor, action: &Action, resource: &Resource) -> Explanation<'static> {
    Policy::builtin().explain(actor, action, resource)
}

/// The effective grants of one decision, remembering the last action asked of them: the rows
/// an action selects mostly open with the same `has_grant`, so a deny that tries them all
/// searches the action set once, not once a row.
struct Held<'a> {
    grants: &'a Grants,
    last: std::cell::Cell<Option<(&'a Action, bool)>>,
}

impl<'a> Held<'a> {
    fn new(grants: &'a Grants) -> Self {
        Held {
            grants,
            last: std::cell::Cell::new(None),
        }
    }

    fn action(&self, action: &'a Action) -> bool {
        if let Some((asked, held)) = self.last.get()
            && asked == action
        {
            return held;
        }
        let held = self.grants.actions.holds(action);
        self.last.set(Some((action, held)));
        held
    }
}

fn evaluate_row<'a>(
    rule: &'a Rule,
    actor: &'a Actor,
    held: &Held<'a>,
    resource: &'a Resource,
) -> RowResult<'a> {
    if let Some(miss) = unselected(rule, actor, resource) {
        return RowResult::NotSelected(miss);
    }
    for condition in &rule.when {
        if let Err(miss) = holds(condition, actor, held, resource) {
            return RowResult::Failed(condition, miss);
        }
    }
    RowResult::Allowed
}

/// The selector that keeps `rule` from applying, if any.
fn unselected<'a>(rule: &'a Rule, actor: &'a Actor, resource: &'a Resource) -> Option<Miss<'a>> {
    let s = &rule.selectors;
    if let Some(kinds) = &s.actor_kinds
        && !kinds.contains(&actor.kind)
    {
        return Some(Miss::ActorKind(actor.kind));
    }
    if let Some(allowed) = &s.origin_visibility {
        let origin = match resource {
            Resource::MemoryScope {
                origin_visibility, ..
            } => *origin_visibility,
            _ => ChannelVisibility::Unknown,
        };
        if !allowed.contains(&origin) {
            return Some(Miss::OriginVisibility(origin));
        }
    }
    if s.unrestricted_only {
        match resource {
            Resource::Repo {
                restricted: false, ..
            } => {}
            Resource::Repo { slug, .. } => return Some(Miss::Restricted(slug)),
            // Validation forbids the selector elsewhere; fail closed if it ever appears.
            _ => return Some(Miss::Unreadable),
        }
    }
    None
}

/// Evaluates one condition on one resource. A condition on an attribute the resource cannot
/// carry fails (validation refuses such rows before they can serve).
fn holds<'a>(
    condition: &'a Condition,
    actor: &'a Actor,
    held: &Held<'a>,
    resource: &'a Resource,
) -> Result<(), Miss<'a>> {
    let grants = held.grants;
    match condition {
        Condition::HasGrant(GrantTemplate::Action(action)) => {
            check(held.action(action), Miss::MissingGrant(action))
        }
        Condition::HasGrant(GrantTemplate::AgentRunOfResource) => match resource {
            Resource::Agent { name } => {
                let held = grants.actions.holds(&Action::AgentRun(name.clone()));
                check(held, Miss::MissingAgentRun(name))
            }
            _ => Err(Miss::Unreadable),
        },
        Condition::MemberOf => match resource {
            Resource::Run(run) => member(grants, &run.channel_id, run.channel_visibility),
            Resource::Channel { id, visibility } => member(grants, id, *visibility),
            // Grant half only: a public origin never makes a memory scope public.
            Resource::MemoryScope {
                scope: ScopeKey::Channel(id),
                ..
            } => member(grants, id, ChannelVisibility::Unknown),
            _ => Err(Miss::Unreadable),
        },
        Condition::AllChannels => match resource {
            Resource::Run(_)
            | Resource::Channel { .. }
            | Resource::MemoryScope {
                scope: ScopeKey::Channel(_),
                ..
            } => check(grants.channels.is_all(), Miss::NotAllChannels),
            _ => Err(Miss::Unreadable),
        },
        Condition::IsSelf => {
            let user = match resource {
                Resource::Run(run) => &run.user_id,
                Resource::MemoryScope {
                    scope: ScopeKey::User(id),
                    ..
                } => id,
                Resource::ConfigScope(ConfigTier::User(id)) => id,
                _ => return Err(Miss::Unreadable),
            };
            check(actor.self_ids().any(|id| id == user), Miss::NotSelf)
        }
        Condition::OwnerOf => {
            let repo = match resource {
                Resource::Run(run) => run.repo.as_ref(),
                Resource::Repo { slug, .. } => Some(slug),
                Resource::MemoryScope {
                    scope: ScopeKey::Repo(slug),
                    ..
                } => Some(slug),
                _ => return Err(Miss::Unreadable),
            };
            let owns = grants.repos.is_all() || repo.is_some_and(|r| grants.repos.contains(r));
            check(owns, Miss::NotOwner(repo))
        }
    }
}

fn member<'a>(
    grants: &Grants,
    channel: &'a ChannelId,
    visibility: ChannelVisibility,
) -> Result<(), Miss<'a>> {
    let is_member = grants.channels.contains(channel) || visibility == ChannelVisibility::Public;
    check(is_member, Miss::NotMember(channel))
}

fn check(ok: bool, miss: Miss<'_>) -> Result<(), Miss<'_>> {
    if ok { Ok(()) } else { Err(miss) }
}
