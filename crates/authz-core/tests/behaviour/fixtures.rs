//! Small builders for actors, grants and resources.

use std::collections::BTreeSet;

use authz_core::{
    Action, Actor, ActorId, ActorKind, AgentName, ChannelId, GrantSet, Grants, GrantsTable,
    RepoSlug, Resource, parse_resource_spec,
};

fn axis<T: Ord + Clone>(s: &str, parse: impl Fn(&str) -> T) -> GrantSet<T> {
    match s {
        "all" => GrantSet::All,
        "" => GrantSet::none(),
        list => GrantSet::only(list.split(',').map(parse)),
    }
}

/// Grants from three comma lists (or "all", or "").
pub fn grants(actions: &str, channels: &str, repos: &str) -> Grants {
    Grants {
        actions: axis(actions, act),
        channels: axis(channels, |c| ChannelId::parse(c).unwrap()),
        repos: axis(repos, |r| RepoSlug::parse(r).unwrap()),
    }
}

pub fn act(s: &str) -> Action {
    Action::parse(s).unwrap()
}

pub fn id(s: &str) -> ActorId {
    ActorId::parse(s).unwrap()
}

pub fn agent_name(s: &str) -> AgentName {
    AgentName::parse(s).unwrap()
}

/// An actor built by hand, kind from its namespace, holding exactly these grants.
pub fn actor(raw: &str, actions: &str, channels: &str, repos: &str) -> Actor {
    let id = id(raw);
    Actor {
        kind: ActorKind::of_namespace(id.namespace()),
        id,
        grants: grants(actions, channels, repos),
        on_behalf_of: None,
        memberships: Default::default(),
        groups: Default::default(),
        group_facts: Default::default(),
        outsider: false,
        origin: None,
    }
}

pub fn table(toml_text: &str, agents: &[&str]) -> GrantsTable {
    let doc: toml::Table = toml::from_str(toml_text).unwrap();
    let agents: BTreeSet<AgentName> = agents.iter().map(|a| agent_name(a)).collect();
    GrantsTable::from_config(&doc, agents).unwrap()
}

pub fn resource(spec: &str) -> Resource {
    parse_resource_spec(spec, &table("[restrict]\nrepos = [\"acme/payments\"]", &[])).unwrap()
}
