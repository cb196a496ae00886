//! Actors: who is asking, as a surface proved it.

use std::borrow::Cow;

use serde::Serialize;

use crate::grants::Grants;
use crate::ids::{ActorId, ChannelId, Namespace};

/// The closed set of actor kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ActorKind {
    User,
    Service,
    Schedule,
    Agent,
}

impl ActorKind {
    pub const ALL: [ActorKind; 4] = [
        ActorKind::User,
        ActorKind::Service,
        ActorKind::Schedule,
        ActorKind::Agent,
    ];

    /// The one kind an id's namespace proves.
    pub fn of_namespace(ns: Namespace) -> ActorKind {
        match ns {
            Namespace::Slack | Namespace::Access | Namespace::Cli => ActorKind::User,
            Namespace::Http | Namespace::Mcp | Namespace::AccessSvc => ActorKind::Service,
            Namespace::Schedule => ActorKind::Schedule,
            Namespace::Agent => ActorKind::Agent,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::User => "user",
            ActorKind::Service => "service",
            ActorKind::Schedule => "schedule",
            ActorKind::Agent => "agent",
        }
    }
}

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

    /// Own grants, intersected axis by axis with the principal's when acting on behalf of one.
    pub fn effective_grants(&self) -> Cow<'_, Grants> {
        match &self.on_behalf_of {
            None => Cow::Borrowed(&self.grants),
            Some(p) => Cow::Owned(self.grants.intersect(&p.effective_grants())),
        }
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
