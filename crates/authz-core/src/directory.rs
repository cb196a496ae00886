//! The channel directory seam: where a run's visibility stamp comes from. Consulted at
//! dispatch, never at authorize time.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;

use crate::groups::{GroupFacts, GroupId};
use crate::ids::{ActorId, ChannelId, Namespace};
use crate::resource::ChannelVisibility;
use crate::surface::Surface;

/// How long a directory's answer is waited for before it counts as unknown: a run's channel at
/// dispatch (the default of `[agents] channel_directory_timeout_ms`), a request's memberships
/// on a chat surface (not configurable). Written once here, for both.
pub const DIRECTORY_ANSWER_BOUND: core::time::Duration = core::time::Duration::from_millis(1500);

/// A boxed future, so the directory can be used as `Arc<dyn ChannelDirectory>` without an
/// async runtime or macro crate here.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Whether an actor is a member of a channel, as far as the directory knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Membership {
    Yes,
    No,
    /// Never a member for any decision.
    Unknown,
}

/// Channel facts for the dispatcher. Implementations never fail: any fault is `Unknown`.
pub trait ChannelDirectory: Send + Sync {
    fn info<'a>(&'a self, channel: &'a ChannelId) -> BoxFuture<'a, ChannelVisibility>;
    fn is_member<'a>(
        &'a self,
        actor: &'a ActorId,
        channel: &'a ChannelId,
    ) -> BoxFuture<'a, Membership>;
    /// The channels `actor` is a member of that only the directory can tell (a Slack user's
    /// private channels shared with the bot), supplied as that request's memberships
    /// ([`crate::Actor::with_memberships`]). A failed lookup is the empty set: it adds
    /// nothing, so it denies. The default knows of none.
    fn memberships<'a>(&'a self, _actor: &'a ActorId) -> BoxFuture<'a, BTreeSet<ChannelId>> {
        Box::pin(std::future::ready(BTreeSet::new()))
    }

    /// Which of the `wanted` groups `actor` is in, as the directory knows them (a Slack
    /// user's user groups), supplied as that request's group facts. A group it could not
    /// look up is `unresolved`: it grants nothing. The default can look up none.
    fn groups<'a>(
        &'a self,
        _actor: &'a ActorId,
        wanted: &'a [GroupId],
    ) -> BoxFuture<'a, GroupFacts> {
        let unresolved = wanted.iter().cloned().collect();
        Box::pin(std::future::ready(GroupFacts {
            member_of: BTreeSet::new(),
            unresolved,
        }))
    }
}

/// What a channel id alone establishes: each surface says it for the channels of its own
/// namespace ([`Surface::channel_visibility`]); an id of no surface is unknown.
pub fn static_visibility(channel: &ChannelId) -> ChannelVisibility {
    channel
        .as_str()
        .split_once(':')
        .and_then(|(ns, rest)| Surface::parse(ns).map(|s| s.channel_visibility(rest)))
        .unwrap_or(ChannelVisibility::Unknown)
}

/// The directory of the id mapping alone: the dispatcher's default until the Slack one exists.
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticChannelDirectory;

impl ChannelDirectory for StaticChannelDirectory {
    fn info<'a>(&'a self, channel: &'a ChannelId) -> BoxFuture<'a, ChannelVisibility> {
        Box::pin(std::future::ready(static_visibility(channel)))
    }

    fn is_member<'a>(
        &'a self,
        _actor: &'a ActorId,
        _channel: &'a ChannelId,
    ) -> BoxFuture<'a, Membership> {
        Box::pin(std::future::ready(Membership::Unknown))
    }
}
/// The channel directory chosen per namespace: each chat surface answers for its own channels
/// and its own users' memberships (Slack's directory for `slack:` ids); a channel or an actor
/// of any other namespace gets what the id alone establishes ([`StaticChannelDirectory`]).
#[derive(Clone, Default)]
pub struct DirectoryByNamespace {
    by_namespace: BTreeMap<Namespace, Arc<dyn ChannelDirectory>>,
}

impl DirectoryByNamespace {
    pub fn new() -> Self {
        Self::default()
    }

    /// `directory` answers for the channels and actors of `namespace`.
    pub fn with(mut self, namespace: Namespace, directory: Arc<dyn ChannelDirectory>) -> Self {
        self.by_namespace.insert(namespace, directory);
        self
    }

    /// The directory of the channel id's own namespace, split as an actor id is (so
    /// `access:svc:x` is `access:svc:`'s, never `access:`'s).
    fn of_channel(&self, channel: &ChannelId) -> Option<&Arc<dyn ChannelDirectory>> {
        let (namespace, _) = Namespace::split(channel.as_str())?;
        self.by_namespace.get(&namespace)
    }
}

impl ChannelDirectory for DirectoryByNamespace {
    fn info<'a>(&'a self, channel: &'a ChannelId) -> BoxFuture<'a, ChannelVisibility> {
        match self.of_channel(channel) {
            Some(d) => d.info(channel),
            None => StaticChannelDirectory.info(channel),
        }
    }

    fn is_member<'a>(
        &'a self,
        actor: &'a ActorId,
        channel: &'a ChannelId,
    ) -> BoxFuture<'a, Membership> {
        match self.of_channel(channel) {
            Some(d) => d.is_member(actor, channel),
            None => StaticChannelDirectory.is_member(actor, channel),
        }
    }

    fn memberships<'a>(&'a self, actor: &'a ActorId) -> BoxFuture<'a, BTreeSet<ChannelId>> {
        match self.by_namespace.get(&actor.namespace()) {
            Some(d) => d.memberships(actor),
            None => StaticChannelDirectory.memberships(actor),
        }
    }

    fn groups<'a>(
        &'a self,
        actor: &'a ActorId,
        wanted: &'a [GroupId],
    ) -> BoxFuture<'a, GroupFacts> {
        match self.by_namespace.get(&actor.namespace()) {
            Some(d) => d.groups(actor, wanted),
            None => StaticChannelDirectory.groups(actor, wanted),
        }
    }
}
