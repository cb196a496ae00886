//! The `grants`, `groups` and `restrict` config blocks, the baselines, and the one resolver,
//! [`GrantsTable::resolve`], every surface asks for an actor's grants.
//!
//! Parsing is fail-closed: every fault fails the load naming the key and field. Nothing is
//! skipped, mapped or widened.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use toml::{Table, Value};

use crate::action::{Action, ActionError, CommandGroup, Effect};
use crate::actor::Actor;
use crate::decide::authorize;
use crate::grants::{ALL_GRANTS, GrantSet, Grants, NO_GRANTS};
use crate::groups::{
    DeclaredGroups, GroupFacts, GroupId, GroupKind, SLACK_GROUP_REFUSED, parse_groups,
    slack_group_fault,
};
use crate::ids::{
    ActorId, ActorKind, AgentName, Baseline, ChannelId, IdError, Namespace, RepoSlug, ScheduleName,
};
use crate::resource::{ConfigTier, Resource};
use crate::surface::Surface;

/// What is closed unless granted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Restrict {
    pub agents: BTreeSet<AgentName>,
    pub repos: BTreeSet<RepoSlug>,
}

/// A config fault: the key path (`grants."slack:U1".channels`) and what is wrong, with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct ConfigError {
    pub key: String,
    pub problem: ConfigProblem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigProblem {
    #[error(
        "`{0}` is not a configuration key; grants, groups and restrict are the only authorization keys (move these rights into [grants.\"<actor id>\"] or [grants.\"group:<name>\"] entries)"
    )]
    ForbiddenKey(String),
    #[error("must be a table")]
    NotATable,
    #[error("must be a list of strings")]
    NotAList,
    #[error("must be a string")]
    NotAString,
    #[error("{0}")]
    BadId(IdError),
    #[error(
        "unknown id prefix; a grants key starts with slack:, http:, mcp:, access:, access:svc:, schedule:, agent: or group:, or is a surface entry (slack:*, http:*, mcp:*, access:*)"
    )]
    UnknownPrefix,
    #[error("the name after the prefix is empty")]
    EmptyName,
    #[error(
        "`*` only stands for a whole surface: slack:*, http:*, mcp:* or access:*; schedules, service tokens and agents are named one by one, and the CLI holds everything"
    )]
    PartialWildcard,
    #[error("cli:local already holds everything; remove this entry")]
    CliEntry,
    #[error("unknown field `{field}`; the fields are {expected}{hint}")]
    UnknownField {
        field: String,
        expected: &'static str,
        hint: &'static str,
    },
    #[error("`{0}` is not \"all\"; write \"all\" (lower-case) for every value, or a list")]
    MisspelledAll(String),
    #[error("{0}")]
    BadAction(ActionError),
    #[error("{action} names agent `{agent}`, which no [agents.{agent}] table declares")]
    UnknownAgent { action: String, agent: String },
    #[error("`{0}` is not a declared agent; declare it as [agents.{0}] or remove it")]
    UnregisteredAgent(String),
    #[error("{0}")]
    Groups(String),
    #[error("{0} is not declared; list its members under [groups] as {1} = [\"<actor id>\", …]")]
    UndeclaredGroup(String, String),
    #[error(
        "a Slack user group's grants may not hold {0}: many workspaces let any member edit a user group (refused: {SLACK_GROUP_REFUSED}); grant it to a [groups] group or to people by id"
    )]
    SlackGroupGrant(String),
}

fn err(key: impl Into<String>, problem: ConfigProblem) -> ConfigError {
    ConfigError {
        key: key.into(),
        problem,
    }
}

/// A grants key: one actor, a whole surface, or a group.
#[derive(Debug, Clone, PartialEq, Eq)]
enum GrantsKey {
    Actor(ActorId),
    Surface(Surface),
    Group(GroupId),
}

fn parse_grants_key(key: &str, path: &str) -> Result<GrantsKey, ConfigError> {
    if let Some(surface) = Surface::WITH_ENTRIES
        .into_iter()
        .find(|s| s.entry_key() == Some(key))
    {
        return Ok(GrantsKey::Surface(surface));
    }
    if key.starts_with("group:") {
        return GroupId::parse(key)
            .map(GrantsKey::Group)
            .map_err(|e| err(path, ConfigProblem::BadId(e)));
    }
    if key.contains('*') {
        return Err(err(path, ConfigProblem::PartialWildcard));
    }
    match ActorId::parse(key) {
        Ok(id) if id.namespace() == Namespace::Cli => Err(err(path, ConfigProblem::CliEntry)),
        Ok(id) => Ok(GrantsKey::Actor(id)),
        Err(IdError::UnknownNamespace { .. }) | Err(IdError::Empty { .. }) => {
            Err(err(path, ConfigProblem::UnknownPrefix))
        }
        Err(e) => {
            let empty_subject =
                Namespace::split(key).is_some_and(|(_, subject)| subject.is_empty());
            Err(err(
                path,
                if empty_subject {
                    ConfigProblem::EmptyName
                } else {
                    ConfigProblem::BadId(e)
                },
            ))
        }
    }
}

/// The misspellings of `all` we refuse by name instead of reading them as a list.
fn looks_like_all(s: &str) -> bool {
    let l = s.trim().to_ascii_lowercase();
    matches!(
        l.as_str(),
        "all" | "*" | "any" | "every" | "everything" | "everyone"
    )
}

fn parse_axis<T: Ord + Clone>(
    value: &Value,
    path: &str,
    parse: impl Fn(&str, &str) -> Result<T, ConfigError>,
) -> Result<GrantSet<T>, ConfigError> {
    match value {
        Value::String(s) if s == "all" => Ok(GrantSet::All),
        Value::String(s) if looks_like_all(s) => {
            Err(err(path, ConfigProblem::MisspelledAll(s.clone())))
        }
        Value::Array(items) => {
            let mut set = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let item_path = format!("{path}[{i}]");
                let Value::String(s) = item else {
                    return Err(err(item_path, ConfigProblem::NotAString));
                };
                if looks_like_all(s) {
                    return Err(err(item_path, ConfigProblem::MisspelledAll(s.clone())));
                }
                set.insert(parse(s, &item_path)?);
            }
            Ok(GrantSet::Only(set))
        }
        _ => Err(err(path, ConfigProblem::NotAList)),
    }
}

fn parse_entry(
    value: &Value,
    path: &str,
    agents: &BTreeSet<AgentName>,
) -> Result<Grants, ConfigError> {
    let Value::Table(fields) = value else {
        return Err(err(path, ConfigProblem::NotATable));
    };
    let mut grants = NO_GRANTS;
    for (field, v) in fields {
        let field_path = format!("{path}.{field}");
        match field.as_str() {
            "actions" => {
                grants.actions =
                    parse_axis(v, &field_path, |s, p| parse_granted_action(s, p, agents))?
            }
            "channels" => {
                grants.channels = parse_axis(v, &field_path, |s, p| {
                    ChannelId::parse(s).map_err(|e| err(p, ConfigProblem::BadId(e)))
                })?
            }
            "repos" => {
                grants.repos = parse_axis(v, &field_path, |s, p| {
                    RepoSlug::parse(s).map_err(|e| err(p, ConfigProblem::BadId(e)))
                })?
            }
            other => {
                return Err(err(
                    field_path,
                    ConfigProblem::UnknownField {
                        field: other.to_owned(),
                        expected: "actions, channels, repos",
                        hint: if other == "agents" {
                            " (which agents an actor may run is an action: actions = [\"agent:run:<name>\"])"
                        } else {
                            ""
                        },
                    },
                ));
            }
        }
    }
    Ok(grants)
}

fn parse_granted_action(
    s: &str,
    path: &str,
    agents: &BTreeSet<AgentName>,
) -> Result<Action, ConfigError> {
    let action = Action::parse(s).map_err(|e| err(path, ConfigProblem::BadAction(e)))?;
    if let Action::AgentRun(name) = &action
        && !agents.contains(name)
    {
        return Err(err(
            path,
            ConfigProblem::UnknownAgent {
                action: s.to_owned(),
                agent: name.to_string(),
            },
        ));
    }
    Ok(action)
}

fn parse_restrict(value: &Value, agents: &BTreeSet<AgentName>) -> Result<Restrict, ConfigError> {
    let Value::Table(fields) = value else {
        return Err(err("restrict", ConfigProblem::NotATable));
    };
    let mut restrict = Restrict::default();
    for (field, v) in fields {
        let path = format!("restrict.{field}");
        let Value::Array(items) = v else {
            if matches!(field.as_str(), "agents" | "repos") {
                return Err(err(path, ConfigProblem::NotAList));
            }
            return Err(unknown_restrict_field(path, field));
        };
        for (i, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{i}]");
            let Value::String(s) = item else {
                return Err(err(item_path, ConfigProblem::NotAString));
            };
            match field.as_str() {
                "agents" => {
                    let name = AgentName::parse(s)
                        .map_err(|e| err(&item_path, ConfigProblem::BadId(e)))?;
                    if !agents.contains(&name) {
                        return Err(err(item_path, ConfigProblem::UnregisteredAgent(s.clone())));
                    }
                    restrict.agents.insert(name);
                }
                "repos" => {
                    let slug =
                        RepoSlug::parse(s).map_err(|e| err(&item_path, ConfigProblem::BadId(e)))?;
                    restrict.repos.insert(slug);
                }
                _ => return Err(unknown_restrict_field(path, field)),
            }
        }
    }
    Ok(restrict)
}

fn unknown_restrict_field(path: String, field: &str) -> ConfigError {
    err(
        path,
        ConfigProblem::UnknownField {
            field: field.to_owned(),
            expected: "agents, repos",
            hint: "",
        },
    )
}

/// The open chat actions every Slack user holds (with `agent:run:<name>` for each unrestricted
/// agent): the `:read` of the chat groups, `memory:write` and `mcp:write`.
pub fn chat_open_actions() -> impl Iterator<Item = Action> {
    use CommandGroup::*;
    [Help, Status, Config, Repo, Friction, Memory, Mcp, Schedule]
        .into_iter()
        .map(|g| Action::command(g, Effect::Read))
        .chain([
            Action::command(Memory, Effect::Write),
            Action::command(Mcp, Effect::Write),
        ])
}

/// The grants table: config's entries, surface entries, groups, restrict, the declared agents
/// and the schedule registry's declared grants. The only source of any actor's grants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantsTable {
    entries: BTreeMap<ActorId, Grants>,
    surfaces: BTreeMap<Surface, Grants>,
    /// `[groups]`: each declared group's members.
    groups: DeclaredGroups,
    /// `[grants."group:…"]`: what each group's members gain.
    group_grants: BTreeMap<GroupId, Grants>,
    restrict: Restrict,
    agents: BTreeSet<AgentName>,
    schedules: BTreeMap<ScheduleName, Grants>,
}

/// Top-level keys that look like authorization but are not: refused by name.
const FORBIDDEN_TOP_LEVEL: [&str; 3] = ["permissions", "admins", "scopes"];

impl GrantsTable {
    /// A table with no entries and nothing restricted, for the given declared agents.
    pub fn empty(agents: BTreeSet<AgentName>) -> Self {
        GrantsTable {
            agents,
            ..GrantsTable::default()
        }
    }

    /// Reads `grants` and `restrict` from a parsed config document. `agents` are the names
    /// declared under `[agents.<name>]`.
    pub fn from_config(doc: &Table, agents: BTreeSet<AgentName>) -> Result<Self, ConfigError> {
        for key in FORBIDDEN_TOP_LEVEL {
            if doc.contains_key(key) {
                return Err(err(key, ConfigProblem::ForbiddenKey(key.to_owned())));
            }
        }
        let mut table = GrantsTable::empty(agents);
        if let Some(restrict) = doc.get("restrict") {
            table.restrict = parse_restrict(restrict, &table.agents)?;
        }
        if let Some(groups) = doc.get("groups") {
            table.groups =
                parse_groups(groups).map_err(|f| err(f.key, ConfigProblem::Groups(f.problem)))?;
        }
        let Some(grants) = doc.get("grants") else {
            return Ok(table);
        };
        let Value::Table(grants) = grants else {
            return Err(err("grants", ConfigProblem::NotATable));
        };
        for (key, value) in grants {
            let path = format!("grants.{key:?}");
            let key = parse_grants_key(key, &path)?;
            let entry = parse_entry(value, &path, &table.agents)?;
            match key {
                GrantsKey::Surface(s) => {
                    table.surfaces.insert(s, entry);
                }
                GrantsKey::Actor(id) => {
                    table.entries.insert(id, entry);
                }
                GrantsKey::Group(group) => {
                    table.check_group_entry(&group, &entry, &path)?;
                    table.group_grants.insert(group, entry);
                }
            }
        }
        Ok(table)
    }

    /// A group's grants entry: a declared group must be in `[groups]`; a Slack group's may
    /// hold nothing a workspace member could hand themself.
    fn check_group_entry(
        &self,
        group: &GroupId,
        entry: &Grants,
        path: &str,
    ) -> Result<(), ConfigError> {
        match group.kind() {
            GroupKind::Declared if !self.groups.contains_key(group) => Err(err(
                path,
                ConfigProblem::UndeclaredGroup(group.to_string(), group.name().to_owned()),
            )),
            GroupKind::Slack => match slack_group_fault(entry) {
                Some(held) => Err(err(path, ConfigProblem::SlackGroupGrant(held))),
                None => Ok(()),
            },
            GroupKind::Declared | GroupKind::Access => Ok(()),
        }
    }

    /// Declares a schedule's grants, as the schedule registry does. A `grants` entry for
    /// `schedule:<name>` replaces them whole.
    pub fn declare_schedule(&mut self, name: ScheduleName, grants: Grants) {
        self.schedules.insert(name, grants);
    }

    pub fn restrict(&self) -> &Restrict {
        &self.restrict
    }

    pub fn agents(&self) -> &BTreeSet<AgentName> {
        &self.agents
    }

    /// The configured entries, one per actor id, as written.
    pub fn entries(&self) -> &BTreeMap<ActorId, Grants> {
        &self.entries
    }

    pub fn surface_entries(&self) -> &BTreeMap<Surface, Grants> {
        &self.surfaces
    }

    pub fn schedules(&self) -> &BTreeMap<ScheduleName, Grants> {
        &self.schedules
    }

    /// `[groups]`: each declared group's members.
    pub fn declared_groups(&self) -> &DeclaredGroups {
        &self.groups
    }

    /// The groups' grants entries, by group.
    pub fn group_entries(&self) -> &BTreeMap<GroupId, Grants> {
        &self.group_grants
    }

    /// The Slack user groups whose grants the table names: the ones a Slack request's
    /// directory is asked about.
    pub fn slack_groups(&self) -> impl Iterator<Item = &GroupId> {
        self.group_grants
            .keys()
            .filter(|g| g.kind() == GroupKind::Slack)
    }

    /// The groups whose grants `id` holds: the declared groups listing it, and the groups of
    /// `facts` that may contain it and that the table grants something. Never for an agent, a
    /// schedule or the CLI (parsing refuses them as members; facts about them are ignored).
    pub fn groups_of(&self, id: &ActorId, facts: &GroupFacts) -> BTreeSet<GroupId> {
        let declared = self
            .groups
            .iter()
            .filter(|(_, members)| members.contains(id))
            .map(|(g, _)| g.clone());
        let learned = facts
            .member_of
            .iter()
            .filter(|g| g.may_contain(id) && self.group_grants.contains_key(*g))
            .cloned();
        declared.chain(learned).collect()
    }

    fn grants_of_groups(&self, groups: &BTreeSet<GroupId>) -> Grants {
        groups
            .iter()
            .filter_map(|g| self.group_grants.get(g))
            .fold(NO_GRANTS, |acc, g| acc.union(g))
    }

    pub(crate) fn chat_person_baseline(&self) -> Grants {
        let unrestricted = self
            .agents
            .iter()
            .filter(|a| !self.restrict.agents.contains(*a))
            .map(|a| Action::AgentRun(a.clone()));
        Grants::actions(chat_open_actions().chain(unrestricted))
    }

    pub(crate) fn browser_person_baseline() -> Grants {
        Grants::actions(CommandGroup::ALL.map(|g| Action::command(g, Effect::Read)))
    }

    pub(crate) fn surface(&self, id: &ActorId) -> Grants {
        Surface::entry_of(id)
            .and_then(|s| self.surfaces.get(&s))
            .cloned()
            .unwrap_or(NO_GRANTS)
    }

    pub(crate) fn entry(&self, id: &ActorId) -> Option<&Grants> {
        self.entries.get(id)
    }

    /// What the table alone gives `id`: [`GrantsTable::own_grants`] and the grants of the
    /// declared groups listing it. An agent here is one acting for nobody; see
    /// [`resolve_agent`] for one with a principal.
    pub fn grants_for(&self, id: &ActorId) -> Grants {
        let groups = self.groups_of(id, &GroupFacts::default());
        self.own_grants(id).union(&self.grants_of_groups(&groups))
    }

    /// The namespace baseline, then the entry (added for people, exact for credentials,
    /// replacing for schedules and agents), then the surface entry, unioned: every grant but
    /// a group's.
    pub fn own_grants(&self, id: &ActorId) -> Grants {
        let entry = self.entry(id);
        let own = match id.namespace().baseline() {
            Baseline::ChatPerson => entry.map_or_else(
                || self.chat_person_baseline(),
                |e| self.chat_person_baseline().union(e),
            ),
            Baseline::BrowserPerson => {
                let base = Self::browser_person_baseline();
                entry.map_or(base.clone(), |e| base.union(e))
            }
            Baseline::EntryOnly => entry.cloned().unwrap_or(NO_GRANTS),
            Baseline::Schedule => entry.cloned().unwrap_or_else(|| {
                ScheduleName::parse(id.subject())
                    .ok()
                    .and_then(|n| self.schedules.get(&n).cloned())
                    .unwrap_or(NO_GRANTS)
            }),
            Baseline::Everything => ALL_GRANTS,
        };
        own.union(&self.surface(id))
    }

    /// The repo resource for `slug`, its `restricted` stamped from `restrict.repos`.
    pub fn repo(&self, slug: RepoSlug) -> Resource {
        let restricted = self.restrict.repos.contains(&slug);
        Resource::Repo { slug, restricted }
    }

    /// People holding `all` actions, for the 🚫 reply's "Ask …". Never a surface key, never a
    /// credential.
    pub fn admins_hint(&self) -> Vec<ActorId> {
        self.entries
            .iter()
            .filter(|(id, g)| id.namespace().baseline().is_remote_person() && g.actions.is_all())
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub fn can_edit_channel_config(&self, actor: &Actor, channel: &ChannelId) -> bool {
        authorize(
            actor,
            &Action::command(CommandGroup::Config, Effect::Write),
            &Resource::ConfigScope(ConfigTier::Channel(channel.clone())),
        )
        .is_allow()
    }

    pub fn can_run_agent(&self, actor: &Actor, name: &AgentName) -> bool {
        authorize(
            actor,
            &Action::AgentRun(name.clone()),
            &Resource::Agent { name: name.clone() },
        )
        .is_allow()
    }

    pub fn can_use_repo(&self, actor: &Actor, slug: &RepoSlug) -> bool {
        authorize(actor, &Action::RepoUse, &self.repo(slug.clone())).is_allow()
    }

    /// The restricted agents this actor may not run.
    pub fn restricted_agents_for(&self, actor: &Actor) -> Vec<AgentName> {
        self.restrict
            .agents
            .iter()
            .filter(|a| !self.can_run_agent(actor, a))
            .cloned()
            .collect()
    }
}

impl GrantsTable {
    /// The one resolver: the actor a surface proved, with the group facts it learned for the
    /// request. Kind from the id's namespace; grants its own ([`GrantsTable::own_grants`])
    /// and its groups' ([`GrantsTable::groups_of`]). An outsider holds only its own entry and
    /// the declared groups that list it. For an agent this is one acting for nobody.
    pub fn resolve(&self, id: ActorId, facts: GroupFacts, outsider: bool) -> Actor {
        let (own, groups) = if outsider {
            let own = self.entry(&id).cloned().unwrap_or(NO_GRANTS);
            (own, self.groups_of(&id, &GroupFacts::default()))
        } else {
            (self.own_grants(&id), self.groups_of(&id, &facts))
        };
        Actor {
            kind: ActorKind::of_namespace(id.namespace()),
            grants: own.union(&self.grants_of_groups(&groups)),
            id,
            on_behalf_of: None,
            memberships: Default::default(),
            origin: None,
            groups,
            group_facts: facts,
            outsider,
        }
    }

    /// `actor` resolved again under this table, from the same facts (its id, group facts,
    /// standing, memberships, origin and principal): what a reload makes of an actor already
    /// proved, so its next decision is under the policy in force.
    pub fn resolve_again(&self, actor: &Actor) -> Actor {
        // An actor `authorize` denies whole stays so: never made consistent by resolving.
        if !actor.is_consistent() {
            return Actor {
                grants: NO_GRANTS,
                ..actor.clone()
            };
        }
        let mut again = match (&actor.on_behalf_of, actor.id.namespace()) {
            (principal, Namespace::Agent) => {
                match AgentName::parse(actor.id.subject()) {
                    Ok(name) => {
                        let principal = principal.as_deref().map(|p| self.resolve_again(p));
                        resolve_agent(&name, principal, self)
                    }
                    // An agent id whose name does not read holds nothing.
                    Err(_) => Actor {
                        grants: NO_GRANTS,
                        ..actor.clone()
                    },
                }
            }
            _ => self.resolve(actor.id.clone(), actor.group_facts.clone(), actor.outsider),
        };
        again.memberships = actor.memberships.clone();
        again.origin = actor.origin.clone();
        again
    }
}

/// Builds the actor a surface proved with no group facts: kind from the id's namespace,
/// grants from the table (its declared groups' included). For an agent this is one acting
/// for nobody (its entry, or nothing).
pub fn resolve_actor(id: ActorId, table: &GrantsTable) -> Actor {
    table.resolve(id, GroupFacts::default(), false)
}

/// A person of another workspace the surface let in (a Slack Connect user, when the operator
/// allows them): they hold only what their own grants entry names, and the declared groups
/// that list them by id. The namespace baseline, the surface entry (`slack:*`) and Slack's
/// user groups are for the workspace's own members, so none applies.
pub fn resolve_outsider(id: ActorId, table: &GrantsTable) -> Actor {
    table.resolve(id, GroupFacts::default(), true)
}

/// An agent acting for `principal`: its own grants are `all` (or its entry, which replaces the
/// baseline), and its effective grants are those intersected with the principal's. Without a
/// principal it holds its entry or nothing.
pub fn resolve_agent(name: &AgentName, principal: Option<Actor>, table: &GrantsTable) -> Actor {
    let id = ActorId::agent(name);
    let grants = match (table.entry(&id), &principal) {
        (Some(entry), _) => entry.clone(),
        (None, Some(_)) => ALL_GRANTS,
        (None, None) => NO_GRANTS,
    };
    Actor {
        kind: ActorKind::Agent,
        id,
        grants,
        on_behalf_of: principal.map(Box::new),
        memberships: Default::default(),
        origin: None,
        groups: Default::default(),
        group_facts: Default::default(),
        outsider: false,
    }
}
