//! Resources: what a handler is about to touch, with the attributes the rules read.

use std::fmt;

use serde::Serialize;

use crate::ids::{ActorId, AgentName, ChannelId, CommandId, RepoSlug, RunId};

/// A channel's visibility as stamped on a run. A missing stamp is `Unknown`, and `Unknown` is
/// never public and never a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelVisibility {
    Public,
    Private,
    Dm,
    Machine,
    #[default]
    Unknown,
}

impl ChannelVisibility {
    pub const ALL: [ChannelVisibility; 5] = [
        ChannelVisibility::Public,
        ChannelVisibility::Private,
        ChannelVisibility::Dm,
        ChannelVisibility::Machine,
        ChannelVisibility::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ChannelVisibility::Public => "public",
            ChannelVisibility::Private => "private",
            ChannelVisibility::Dm => "dm",
            ChannelVisibility::Machine => "machine",
            ChannelVisibility::Unknown => "unknown",
        }
    }

    /// Parses a stored or configured visibility word; anything else is `None` (the caller
    /// decides whether that is an error or `Unknown`).
    pub fn parse(s: &str) -> Option<Self> {
        ChannelVisibility::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl fmt::Display for ChannelVisibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The facts of a run that rules and predicates read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunFacts {
    pub id: RunId,
    pub channel_id: ChannelId,
    /// The principal's actor id.
    pub user_id: ActorId,
    pub repo: Option<RepoSlug>,
    pub channel_visibility: ChannelVisibility,
}

/// The kinds of memory scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    Org,
    User,
    Channel,
    Repo,
}

impl MemoryKind {
    pub const ALL: [MemoryKind; 4] = [
        MemoryKind::Org,
        MemoryKind::User,
        MemoryKind::Channel,
        MemoryKind::Repo,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Org => "org",
            MemoryKind::User => "user",
            MemoryKind::Channel => "channel",
            MemoryKind::Repo => "repo",
        }
    }
}

/// A memory scope with its key, typed by kind so a user scope always carries a user id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum ScopeKey {
    Org,
    User(ActorId),
    Channel(ChannelId),
    Repo(RepoSlug),
}

impl ScopeKey {
    pub fn kind(&self) -> MemoryKind {
        match self {
            ScopeKey::Org => MemoryKind::Org,
            ScopeKey::User(_) => MemoryKind::User,
            ScopeKey::Channel(_) => MemoryKind::Channel,
            ScopeKey::Repo(_) => MemoryKind::Repo,
        }
    }

    /// The stored key: `org`, `user:<actor id>`, `channel:<channel id>`, `repo:<owner/name>`.
    pub fn key(&self) -> String {
        match self {
            ScopeKey::Org => "org".to_owned(),
            ScopeKey::User(id) => format!("user:{id}"),
            ScopeKey::Channel(id) => format!("channel:{id}"),
            ScopeKey::Repo(slug) => format!("repo:{slug}"),
        }
    }
}

/// The kinds of config scope (the three config tiers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigKind {
    Channel,
    User,
    Org,
}

impl ConfigKind {
    pub const ALL: [ConfigKind; 3] = [ConfigKind::Channel, ConfigKind::User, ConfigKind::Org];

    pub fn as_str(self) -> &'static str {
        match self {
            ConfigKind::Channel => "channel",
            ConfigKind::User => "user",
            ConfigKind::Org => "org",
        }
    }
}

/// A config tier with its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum ConfigTier {
    Channel(ChannelId),
    User(ActorId),
    Org,
}

impl ConfigTier {
    pub fn kind(&self) -> ConfigKind {
        match self {
            ConfigTier::Channel(_) => ConfigKind::Channel,
            ConfigTier::User(_) => ConfigKind::User,
            ConfigTier::Org => ConfigKind::Org,
        }
    }
}

/// What a handler is about to touch. Nothing about a resource is inferred from the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Resource {
    Run(RunFacts),
    Channel {
        id: ChannelId,
        visibility: ChannelVisibility,
    },
    MemoryScope {
        scope: ScopeKey,
        /// The visibility of the channel the writing run came from.
        origin_visibility: ChannelVisibility,
    },
    Repo {
        slug: RepoSlug,
        /// Stamped from config's `restrict.repos`, never from the request.
        restricted: bool,
    },
    ConfigScope(ConfigTier),
    Agent {
        name: AgentName,
    },
    Command {
        id: CommandId,
    },
}

/// The resource types, without attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceType {
    Run,
    Channel,
    MemoryScope,
    Repo,
    ConfigScope,
    Agent,
    Command,
}

impl ResourceType {
    pub const COUNT: usize = 7;

    /// A dense index, `0..COUNT`.
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ResourceType::Run => "run",
            ResourceType::Channel => "channel",
            ResourceType::MemoryScope => "memory-scope",
            ResourceType::Repo => "repo",
            ResourceType::ConfigScope => "config-scope",
            ResourceType::Agent => "agent",
            ResourceType::Command => "command",
        }
    }
}

impl fmt::Display for ResourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of a kinded resource (memory and config scopes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum ResourceKind {
    Memory(MemoryKind),
    Config(ConfigKind),
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceKind::Memory(k) => f.write_str(k.as_str()),
            ResourceKind::Config(k) => f.write_str(k.as_str()),
        }
    }
}

impl Resource {
    pub fn resource_type(&self) -> ResourceType {
        match self {
            Resource::Run(_) => ResourceType::Run,
            Resource::Channel { .. } => ResourceType::Channel,
            Resource::MemoryScope { .. } => ResourceType::MemoryScope,
            Resource::Repo { .. } => ResourceType::Repo,
            Resource::ConfigScope(_) => ResourceType::ConfigScope,
            Resource::Agent { .. } => ResourceType::Agent,
            Resource::Command { .. } => ResourceType::Command,
        }
    }

    pub fn kind(&self) -> Option<ResourceKind> {
        match self {
            Resource::MemoryScope { scope, .. } => Some(ResourceKind::Memory(scope.kind())),
            Resource::ConfigScope(tier) => Some(ResourceKind::Config(tier.kind())),
            _ => None,
        }
    }
}
