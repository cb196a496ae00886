//! Where a request comes from: the one spelling of a surface, used by the registry, the
//! dispatcher, the store and the grants table alike, with what each surface alone establishes
//! (its grants entry, its channels' visibility). A new surface is a row here and its
//! namespace's row in `ids.rs`.

use std::fmt;

use serde::Serialize;

use crate::ids::{ActorId, ChannelId, Namespace};
use crate::resource::ChannelVisibility;

/// One of the six ways in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Surface {
    Slack,
    Http,
    Mcp,
    Access,
    Cli,
    Schedule,
}

impl Surface {
    pub const ALL: [Surface; 6] = [
        Surface::Slack,
        Surface::Http,
        Surface::Mcp,
        Surface::Access,
        Surface::Cli,
        Surface::Schedule,
    ];

    /// The surfaces that have a grants entry of their own (`slack:*`, `http:*`, `mcp:*`,
    /// `access:*`); the CLI holds everything and schedules are named one by one.
    pub const WITH_ENTRIES: [Surface; 4] =
        [Surface::Slack, Surface::Http, Surface::Mcp, Surface::Access];

    /// `slack`, `http`, `mcp`, `access`, `cli`, `schedule`: how runs record it.
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Slack => "slack",
            Surface::Http => "http",
            Surface::Mcp => "mcp",
            Surface::Access => "access",
            Surface::Cli => "cli",
            Surface::Schedule => "schedule",
        }
    }

    pub fn parse(word: &str) -> Option<Surface> {
        Surface::ALL.into_iter().find(|s| s.as_str() == word)
    }

    /// The grants key of this surface's entry (`slack:*`), if it has one.
    pub fn entry_key(self) -> Option<&'static str> {
        match self {
            Surface::Slack => Some("slack:*"),
            Surface::Http => Some("http:*"),
            Surface::Mcp => Some("mcp:*"),
            Surface::Access => Some("access:*"),
            Surface::Cli | Surface::Schedule => None,
        }
    }

    /// The surface an id of `ns` proves itself through (`access:svc:` ids are Access's);
    /// `None` for an agent, which reaches whichever surface its run's token opens.
    pub fn of_namespace(ns: Namespace) -> Option<Surface> {
        match ns {
            Namespace::Slack => Some(Surface::Slack),
            Namespace::Http => Some(Surface::Http),
            Namespace::Mcp => Some(Surface::Mcp),
            Namespace::Access | Namespace::AccessSvc => Some(Surface::Access),
            Namespace::Cli => Some(Surface::Cli),
            Namespace::Schedule => Some(Surface::Schedule),
            Namespace::Agent => None,
        }
    }

    /// The surface entry an actor id receives, if any. `access:svc:` ids receive none, and
    /// neither do the CLI, schedules or agents.
    pub fn entry_of(id: &ActorId) -> Option<Surface> {
        let ns = id.namespace();
        Surface::of_namespace(ns).filter(|s| ns != Namespace::AccessSvc && s.entry_key().is_some())
    }

    /// The surface whose namespace a channel id is in (`access:svc:…` is Access's).
    pub fn of_channel(channel: &ChannelId) -> Option<Surface> {
        Surface::parse(channel.namespace())
    }

    /// What a channel id of this surface's namespace establishes alone (`rest` follows
    /// `<surface>:`): `http:*`, `mcp:*`, `cli:*`, `schedule:*` and `access:svc:*` are machine
    /// channels; `slack:D…` is a DM and `slack:G…` private; `access:<sub>` is that person's
    /// DM; a Slack `C…` channel is unknown (only the Slack API can tell public from private).
    pub fn channel_visibility(self, rest: &str) -> ChannelVisibility {
        match self {
            Surface::Http | Surface::Mcp | Surface::Cli | Surface::Schedule => {
                ChannelVisibility::Machine
            }
            Surface::Access if rest.starts_with("svc:") => ChannelVisibility::Machine,
            Surface::Access => ChannelVisibility::Dm,
            Surface::Slack if rest.starts_with('D') => ChannelVisibility::Dm,
            Surface::Slack if rest.starts_with('G') => ChannelVisibility::Private,
            Surface::Slack => ChannelVisibility::Unknown,
        }
    }

    /// The surfaces whose bearer tokens come from the token map, and so whose tokens may name
    /// a run channel of their own namespace.
    pub fn takes_bearer_tokens(self) -> bool {
        matches!(self, Surface::Http | Surface::Mcp)
    }
}

impl fmt::Display for Surface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_surface_round_trips_and_only_four_have_entries() {
        for s in Surface::ALL {
            assert_eq!(Surface::parse(s.as_str()), Some(s));
            assert_eq!(s.entry_key().is_some(), Surface::WITH_ENTRIES.contains(&s));
        }
        assert_eq!(Surface::parse("SLACK"), None);
        assert_eq!(Surface::parse("test"), None);
        let id = |s: &str| s.parse::<ActorId>().unwrap();
        assert_eq!(Surface::entry_of(&id("access:svc:deploy")), None);
        assert_eq!(
            Surface::entry_of(&id("access:alice@example.com")),
            Some(Surface::Access)
        );
        assert_eq!(Surface::entry_of(&id("cli:local")), None);
        assert_eq!(
            Surface::of_namespace(Namespace::AccessSvc),
            Some(Surface::Access)
        );
        for ns in Namespace::ALL {
            let home = Surface::of_namespace(ns);
            assert_eq!(home.is_none(), ns == Namespace::Agent, "{ns:?}");
            assert!(
                home.is_none_or(|s| ns.prefix().starts_with(s.as_str())),
                "{ns:?}"
            );
        }
    }
}
