//! The `grants` and `restrict` config blocks, the baselines, and the one resolver,
//! `grants_for`, every surface asks for an actor's grants.
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
        "`{0}` is not a configuration key; grants and restrict are the only authorization keys (move these rights into [grants.\"<actor id>\"] entries)"
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
        "unknown id prefix; a grants key starts with slack:, http:, mcp:, access:, access:svc:, schedule: or agent:, or is a surface entry (slack:*, http:*, mcp:*, access:*)"
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
}

fn err(key: impl Into<String>, problem: ConfigProblem) -> ConfigError {
    ConfigError {
        key: key.into(),
        problem,
    }
}

/// A grants key: one actor, or a whole surface.
#[derive(Debug, Clone, PartialEq, Eq)]
enum GrantsKey {
    Actor(ActorId),
    Surface(Surface),
}

fn parse_grants_key(key: &str, path: &str) -> Result<GrantsKey, ConfigError> {
    if let Some(surface) = Surface::WITH_ENTRIES
        .into_iter()
        .find(|s| s.entry_key() == Some(key))
    {
        return Ok(GrantsKey::Surface(surface));
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

/// The grants table: config's entries, surface entries, restrict, the declared agents and the
/// schedule registry's declared grants. The only source of any actor's grants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantsTable {
    entries: BTreeMap<ActorId, Grants>,
    surfaces: BTreeMap<Surface, Grants>,
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
            }
        }
        Ok(table)
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

    fn chat_person_baseline(&self) -> Grants {
        let unrestricted = self
            .agents
            .iter()
            .filter(|a| !self.restrict.agents.contains(*a))
            .map(|a| Action::AgentRun(a.clone()));
        Grants::actions(chat_open_actions().chain(unrestricted))
    }

    fn browser_person_baseline() -> Grants {
        Grants::actions(CommandGroup::ALL.map(|g| Action::command(g, Effect::Read)))
    }

    fn surface(&self, id: &ActorId) -> Grants {
        Surface::entry_of(id)
            .and_then(|s| self.surfaces.get(&s))
            .cloned()
            .unwrap_or(NO_GRANTS)
    }

    fn entry(&self, id: &ActorId) -> Option<&Grants> {
        self.entries.get(id)
    }

    /// The one resolver: the namespace baseline, then the entry (added for people, exact for
    /// credentials, replacing for schedules and agents), then the surface entry, unioned.
    /// An agent here is one acting for nobody; see [`resolve_agent`] for one with a principal.
    pub fn grants_for(&self, id: &ActorId) -> Grants {
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

/// Builds the actor a surface proved: kind from the id's namespace, grants from the table.
/// For an agent this is one acting for nobody (its entry, or nothing).
pub fn resolve_actor(id: ActorId, table: &GrantsTable) -> Actor {
    Actor {
        kind: ActorKind::of_namespace(id.namespace()),
        grants: table.grants_for(&id),
        id,
        on_behalf_of: None,
        memberships: Default::default(),
        origin: None,
    }
}

/// A person of another workspace the surface let in (a Slack Connect user, when the operator
/// allows them): they hold only what their own grants entry names. The namespace baseline
/// and the surface entry (`slack:*`) are for the workspace's own members, so neither applies.
pub fn resolve_outsider(id: ActorId, table: &GrantsTable) -> Actor {
    Actor {
        kind: ActorKind::of_namespace(id.namespace()),
        grants: table.entry(&id).cloned().unwrap_or(NO_GRANTS),
        id,
        on_behalf_of: None,
        memberships: Default::default(),
        origin: None,
    }
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
    }
}
