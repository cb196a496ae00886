//! Actors: who is asking, as a surface proved it.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde::Serialize;

use crate::grants::{GrantSet, Grants};
use crate::groups::{GroupFacts, GroupId};
use crate::ids::{ActorId, ActorKind, ChannelId};

/// Where a chat actor spoke: context for channel-scoped commands, never authority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    pub channel_id: ChannelId,
    pub thread_key: Option<String>,
}

/// Who is asking. Built by `resolve_actor`/`resolve_agent` from the grants table; the fields are
/// public so tests can build inconsistent actors, which `authorize` denies first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Actor {
    pub kind: ActorKind,
    pub id: ActorId,
    /// The actor's own grants (for an agent: before intersection with its principal).
    pub grants: Grants,
    /// Agents only: the principal whose run it is.
    pub on_behalf_of: Option<Box<Actor>>,
    pub origin: Option<Origin>,
    /// Channels the actor is a member of, as a surface's directory learned them for this
    /// request (a Slack user's private channels shared with the bot). Facts about the actor,
    /// never grants: `member_of` reads them beside the granted channels, and nothing else
    /// does. Empty unless a surface supplied them ([`Actor::with_memberships`]).
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub memberships: BTreeSet<ChannelId>,
    /// The groups whose grants the resolver added to `grants` (declared groups listing the
    /// id, and the groups of `group_facts` the table names): for explanations only, since
    /// `grants` already holds what they give.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub groups: BTreeSet<GroupId>,
    /// The group facts the surface supplied, kept so a reloaded table resolves the same
    /// actor again ([`crate::GrantsTable::resolve_again`]) and a refusal names a failed lookup.
    #[serde(skip_serializing_if = "GroupFacts::is_empty")]
    pub group_facts: GroupFacts,
    /// A person of another workspace the surface let in: only their own entry and the
    /// declared groups that list them, never a baseline, surface entry or directory's group.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub outsider: bool,
}

impl Actor {
    /// True when the kind matches the id's namespace, only agents carry a principal, and the
    /// principal is itself consistent and not an agent.
    pub fn is_consistent(&self) -> bool {
        if self.kind != ActorKind::of_namespace(self.id.namespace()) {
            return false;
        }
        match (&self.on_behalf_of, self.kind) {
            (None, _) => true,
            (Some(p), ActorKind::Agent) => p.kind != ActorKind::Agent && p.is_consistent(),
            (Some(_), _) => false,
        }
    }

    /// Own grants with the actor's memberships among its channels, intersected axis by axis
    /// with the principal's when acting on behalf of one. A membership widens only the
    /// channels `member_of` reads: it never makes the channel axis `all`.
    pub fn effective_grants(&self) -> Cow<'_, Grants> {
        let own = if self.memberships.is_empty() {
            Cow::Borrowed(&self.grants)
        } else {
            Cow::Owned(Grants {
                channels: self
                    .grants
                    .channels
                    .union(&GrantSet::only(self.memberships.iter().cloned())),
                ..self.grants.clone()
            })
        };
        match &self.on_behalf_of {
            None => own,
            Some(p) => Cow::Owned(own.intersect(&p.effective_grants())),
        }
    }

    /// This actor with membership facts a surface's directory supplied for one request
    /// (pure: the directory did the lookup). Adds to any it already has; grants unchanged.
    pub fn with_memberships(mut self, channels: impl IntoIterator<Item = ChannelId>) -> Self {
        self.memberships.extend(channels);
        self
    }

    /// Whether this actor is a person asking for itself: a user (a Slack member, an Access
    /// browser session, the local operator), never a machine credential (a bearer token, an
    /// Access service token), a schedule, or an agent, whoever it acts for.
    pub fn is_person(&self) -> bool {
        self.kind == ActorKind::User && self.on_behalf_of.is_none()
    }

    /// Whom a run this actor asks for is for: an agent's principal, else the actor itself.
    pub fn principal(&self) -> &Actor {
        self.on_behalf_of.as_deref().unwrap_or(self)
    }

    /// The ids `is_self` accepts: the actor's own and its principal's.
    pub fn self_ids(&self) -> impl Iterator<Item = &ActorId> {
        std::iter::once(&self.id).chain(self.on_behalf_of.as_deref().map(|p| &p.id))
    }

    pub fn with_origin(mut self, origin: Origin) -> Self {
        self.origin = Some(origin);
        self
    }
}
