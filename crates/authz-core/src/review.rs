//! Policy review: every change of decision between two grants tables, and every actor class a
//! table allows an action (`authz diff`, `authz who-can`), computed from the one decision.
//!
//! Exact, not sampled: a decision reads the actor's effective grants, kind, memberships and
//! id, and the resource, and nothing else. So every actor of the universe falls in one of the
//! finite classes built here, and every resource in one of the finite shapes:
//!
//! - **Actor classes**: each id a table names (a grants entry, a declared group's member, a
//!   schedule), an unlisted actor of each namespace (the baseline and the surface entry), an
//!   unlisted member of each learned group (`group:slack:S…`, `group:access:<name>`), each with
//!   and without a private channel the directory says it is in (Slack), and each agent alone
//!   and acting for each of those.
//! - **Resource shapes**, per class: runs, channels, memory and config scopes, repos, agents
//!   and commands, over the channels and repos the class's grants name in either table plus
//!   one unnamed of each surface (an unnamed channel or repo is alike for the class), every
//!   visibility, the class's own and someone else's, and each repo restricted as each table
//!   says.
//!
//! A class whose effective grants are equal in both tables, with `restrict` unchanged, decides
//! everything alike, and is passed over: a review of a 1,000-entry config evaluates the
//! classes its change touches.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::action::{Action, CATALOGUE_ACTIONS};
use crate::actor::Actor;
use crate::config::{GrantsTable, resolve_agent};
use crate::decide::authorize;
use crate::groups::{GroupFacts, GroupId, GroupKind};
use crate::ids::{ActorId, AgentName, ChannelId, CommandId, Namespace, RepoSlug, RunId};
use crate::resource::{ChannelVisibility, ConfigTier, Resource, RunFacts, ScopeKey};

/// The unlisted actor of each namespace a grants entry can name, and how it is called.
const UNLISTED: [(&str, &str); 5] = [
    ("slack:U0UNLISTED", "any unlisted Slack user"),
    ("http:unlisted-token", "any unlisted ingress token"),
    ("mcp:unlisted-token", "any unlisted MCP token"),
    ("access:unlisted-viewer", "any unlisted Access viewer"),
    (
        "access:svc:unlisted-service",
        "any unlisted Access service token",
    ),
];
/// An unlisted Slack user of a learned group, an Access viewer of an identity provider's.
const IN_GROUP: [&str; 2] = ["slack:U0INGROUP", "access:in-group-viewer"];
/// A private channel the Slack directory says a Slack class is in.
const MEMBER_OF: &str = "slack:G0MEMBER";
/// Someone else: the owner of a run that is not the class's own.
const SOMEONE_ELSE: &str = "slack:U0SOMEONEELSE";
/// A channel no grant of the class names, per surface: any two such channels of a class are
/// alike (a channel id is read only as a member of the class's channels).
pub const UNNAMED_CHANNELS: [&str; 6] = [
    "slack:C0UNNAMED",
    "http:unnamed",
    "mcp:unnamed",
    "access:unnamed",
    "schedule:unnamed",
    "cli:unnamed",
];
/// A repo no grant or restriction names.
pub const UNNAMED_REPO: &str = "unnamed/repo";

/// Who an actor class is, as the resolver needs it in each table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ActorClass {
    /// How a review names it: the id, or "any unlisted Slack user", "agent:coding for …".
    pub label: String,
    pub id: ActorId,
    pub groups: BTreeSet<GroupId>,
    pub memberships: BTreeSet<ChannelId>,
    /// A person of another workspace let in (Slack Connect): only its entry and the declared
    /// groups that list it.
    pub outsider: bool,
    pub principal: Option<Box<ActorClass>>,
}

impl ActorClass {
    fn of(id: ActorId, label: impl Into<String>) -> ActorClass {
        ActorClass {
            label: label.into(),
            id,
            groups: BTreeSet::new(),
            memberships: BTreeSet::new(),
            outsider: false,
            principal: None,
        }
    }

    /// The actor this class is under `table`.
    pub fn resolve(&self, table: &GrantsTable) -> Actor {
        if self.id.namespace() == Namespace::Agent {
            let principal = self.principal.as_deref().map(|p| p.resolve(table));
            return match AgentName::parse(self.id.subject()) {
                Ok(name) => resolve_agent(&name, principal, table),
                Err(_) => table.resolve(self.id.clone(), GroupFacts::default(), false),
            };
        }
        let facts = GroupFacts {
            member_of: self.groups.clone(),
            unresolved: BTreeSet::new(),
        };
        table
            .resolve(self.id.clone(), facts, self.outsider)
            .with_memberships(self.memberships.iter().cloned())
    }
}

/// `base`, or `base` with a number after it, whichever no table names: a stand-in for "any
/// unlisted actor" is never one a config holds grants for (a planted entry for the stand-in
/// would make every unlisted actor look alike to it).
fn fresh(base: &str, taken: &BTreeSet<ActorId>) -> Option<ActorId> {
    (0..1000)
        .map(|n| match n {
            0 => base.to_owned(),
            n => format!("{base}{n}"),
        })
        .filter_map(|raw| ActorId::parse(&raw).ok())
        .find(|id| !taken.contains(id))
}

/// Every actor class of either table (`tables` is one or two).
pub fn actor_classes(tables: &[&GrantsTable]) -> Vec<ActorClass> {
    actor_classes_with(tables, &BTreeSet::new(), None)
}

/// [`actor_classes`], with `ids` among the named ones and, for each Slack class, a variant in
/// the private channel `member_of` (a resource's own user and channel, for `who_can`).
fn actor_classes_with(
    tables: &[&GrantsTable],
    ids: &BTreeSet<ActorId>,
    member_of: Option<&ChannelId>,
) -> Vec<ActorClass> {
    let mut named: BTreeSet<ActorId> = BTreeSet::new();
    let mut learned: BTreeSet<GroupId> = BTreeSet::new();
    let mut agents: BTreeSet<AgentName> = BTreeSet::new();
    for t in tables {
        named.extend(t.entries().keys().cloned());
        named.extend(t.declared_groups().values().flatten().cloned());
        named.extend(t.schedules().keys().map(|s| s.actor_id()));
        learned.extend(
            t.group_entries()
                .keys()
                .filter(|g| g.kind() != GroupKind::Declared)
                .cloned(),
        );
        agents.extend(t.agents().iter().cloned());
    }
    named.extend(ids.iter().cloned());
    named.retain(|id| id.namespace() != Namespace::Agent);
    named.insert(ActorId::cli_local());
    let mut people: Vec<ActorClass> = named
        .iter()
        .map(|id| ActorClass::of(id.clone(), id.as_str()))
        .collect();
    // A Slack id a table names may also write from another workspace (Slack Connect).
    people.extend(
        named
            .iter()
            .filter(|id| id.namespace() == Namespace::Slack)
            .map(|id| {
                let mut c = ActorClass::of(id.clone(), format!("{id} (from another workspace)"));
                c.outsider = true;
                c
            }),
    );
    for (raw, label) in UNLISTED {
        if let Some(id) = fresh(raw, &named) {
            people.push(ActorClass::of(id, label));
        }
    }
    for group in &learned {
        let raw = match group.kind() {
            GroupKind::Slack => IN_GROUP[0],
            _ => IN_GROUP[1],
        };
        if let Some(id) = fresh(raw, &named) {
            let mut class = ActorClass::of(id, format!("a member of {group}"));
            class.groups.insert(group.clone());
            people.push(class);
        }
    }
    // Slack users in a private channel the directory says they are in.
    let channels: Vec<ChannelId> = ChannelId::parse(MEMBER_OF)
        .ok()
        .into_iter()
        .chain(member_of.cloned())
        .collect();
    let with_membership: Vec<ActorClass> = people
        .iter()
        .filter(|c| c.id.namespace() == Namespace::Slack && !c.outsider)
        .flat_map(|c| {
            channels.iter().map(move |channel| {
                let mut m = c.clone();
                m.memberships.insert(channel.clone());
                m.label = format!("{} (in the private channel {channel}, per Slack)", c.label);
                m
            })
        })
        .collect();
    people.extend(with_membership);
    let mut classes = people.clone();
    for name in &agents {
        let id = ActorId::agent(name);
        classes.push(ActorClass::of(
            id.clone(),
            format!("{id} (acting for nobody)"),
        ));
        for p in &people {
            let mut a = ActorClass::of(id.clone(), format!("{id} for {}", p.label));
            a.principal = Some(Box::new(p.clone()));
            classes.push(a);
        }
    }
    classes
}

/// Every action the tables can decide: the catalogue's, `trace:read`, `repo:use`,
/// `agent:run:*` and `agent:run:<name>` of each declared agent.
pub fn actions(tables: &[&GrantsTable]) -> Vec<Action> {
    let mut out: BTreeSet<Action> = CATALOGUE_ACTIONS.into_iter().collect();
    out.extend([Action::TraceRead, Action::RepoUse, Action::AgentRunAny]);
    for t in tables {
        out.extend(t.agents().iter().cloned().map(Action::AgentRun));
    }
    out.into_iter().collect()
}

/// A resource shape: the resource with its repo's restriction left for each table to stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape(Resource);

impl Shape {
    /// The resource under `table` (a repo stamped restricted as the table says).
    pub fn in_table(&self, table: &GrantsTable) -> Resource {
        match &self.0 {
            Resource::Repo { slug, .. } => table.repo(slug.clone()),
            other => other.clone(),
        }
    }

    pub fn resource(&self) -> &Resource {
        &self.0
    }
}

/// The channels a class tells apart: those its actors' grants and memberships name, and one
/// unnamed of each surface.
pub fn named_channels(actors: &[&Actor]) -> BTreeSet<ChannelId> {
    let mut channels: BTreeSet<ChannelId> = UNNAMED_CHANNELS
        .iter()
        .filter_map(|c| ChannelId::parse(c).ok())
        .collect();
    for a in actors {
        let mut grants = vec![a.effective_grants().into_owned()];
        grants.extend(
            a.on_behalf_of
                .as_deref()
                .map(|p| p.effective_grants().into_owned()),
        );
        for g in grants {
            channels.extend(g.channels.items().into_iter().flatten().cloned());
        }
        channels.extend(a.memberships.iter().cloned());
    }
    channels
}

/// The repos a class tells apart: those its actors' grants name, those either table
/// restricts, and one unnamed.
pub fn named_repos(actors: &[&Actor], tables: &[&GrantsTable]) -> BTreeSet<RepoSlug> {
    let mut repos: BTreeSet<RepoSlug> = RepoSlug::parse(UNNAMED_REPO).into_iter().collect();
    for a in actors {
        repos.extend(
            a.effective_grants()
                .repos
                .items()
                .into_iter()
                .flatten()
                .cloned(),
        );
    }
    for t in tables {
        repos.extend(t.restrict().repos.iter().cloned());
    }
    repos
}

/// The owners a class tells apart: its principal (or itself), itself, and someone else.
pub fn named_users(class: &ActorClass, actors: &[&Actor]) -> BTreeSet<ActorId> {
    let mut users: BTreeSet<ActorId> = BTreeSet::new();
    users.insert(class.id.clone());
    users.extend(actors.iter().map(|a| a.principal().id.clone()));
    users.extend(fresh(SOMEONE_ELSE, &users));
    users
}

/// Every resource shape a class tells apart (see the module doc).
fn shapes_for(class: &ActorClass, actors: &[&Actor], tables: &[&GrantsTable]) -> Vec<Shape> {
    let channels = named_channels(actors);
    let repos = named_repos(actors, tables);
    let users = named_users(class, actors);
    let mut agents: BTreeSet<AgentName> = BTreeSet::new();
    for t in tables {
        agents.extend(t.agents().iter().cloned());
    }
    let mut out = Vec::new();
    let vis = ChannelVisibility::ALL;
    let run_id = RunId::parse("r1").ok();
    for c in &channels {
        for v in vis {
            out.push(Resource::Channel {
                id: c.clone(),
                visibility: v,
            });
            for u in &users {
                for repo in repos.iter().map(Some).chain([None]) {
                    if let Some(id) = &run_id {
                        out.push(Resource::Run(RunFacts {
                            id: id.clone(),
                            channel_id: c.clone(),
                            user_id: u.clone(),
                            repo: repo.cloned(),
                            channel_visibility: v,
                        }));
                    }
                }
            }
        }
        out.push(Resource::ConfigScope(ConfigTier::Channel(c.clone())));
    }
    let mut scopes: Vec<ScopeKey> = vec![ScopeKey::Org];
    scopes.extend(users.iter().cloned().map(ScopeKey::User));
    scopes.extend(channels.iter().cloned().map(ScopeKey::Channel));
    scopes.extend(repos.iter().cloned().map(ScopeKey::Repo));
    for scope in scopes {
        for v in vis {
            out.push(Resource::MemoryScope {
                scope: scope.clone(),
                origin_visibility: v,
            });
        }
    }
    out.extend(
        users
            .iter()
            .cloned()
            .map(|u| Resource::ConfigScope(ConfigTier::User(u))),
    );
    out.push(Resource::ConfigScope(ConfigTier::Org));
    out.extend(repos.iter().cloned().map(|slug| Resource::Repo {
        slug,
        restricted: false,
    }));
    out.extend(agents.into_iter().map(|name| Resource::Agent { name }));
    out.extend(
        CommandId::parse("any")
            .ok()
            .map(|id| Resource::Command { id }),
    );
    out.into_iter().map(Shape).collect()
}

/// One change of decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// `granted` (denied before, allowed now) or `revoked`.
    pub change: &'static str,
    /// The actor class, as the review names it.
    pub actor: String,
    /// Its id (for an unlisted class, the stand-in the review decided for).
    pub actor_id: String,
    /// The principal, for an agent acting for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<String>,
    pub action: String,
    /// The resource shape as a resource spec (`authz explain --resource`).
    pub resource: String,
}

/// Every change of decision from `old` to `new`, over every actor class × action × shape.
pub fn diff(old: &GrantsTable, new: &GrantsTable) -> Vec<Change> {
    let tables = [old, new];
    let actions = actions(&tables);
    // The repos whose restriction changed: the only resources two tables stamp apart.
    let restamped: BTreeSet<&RepoSlug> = old
        .restrict()
        .repos
        .symmetric_difference(&new.restrict().repos)
        .collect();
    let mut out = Vec::new();
    for class in actor_classes(&tables) {
        let (a, b) = (class.resolve(old), class.resolve(new));
        // An actor alike in both decides alike on every resource both tables stamp alike.
        let alike = a.kind == b.kind
            && a.effective_grants() == b.effective_grants()
            && a.is_consistent() == b.is_consistent();
        if alike && restamped.is_empty() {
            continue;
        }
        for shape in shapes_for(&class, &[&a, &b], &tables) {
            let (ra, rb) = (shape.in_table(old), shape.in_table(new));
            if alike && ra == rb {
                continue;
            }
            for action in &actions {
                let before = authorize(&a, action, &ra).is_allow();
                let after = authorize(&b, action, &rb).is_allow();
                if before != after {
                    out.push(Change {
                        change: if after { "granted" } else { "revoked" },
                        actor: class.label.clone(),
                        actor_id: class.id.to_string(),
                        on_behalf_of: class.principal.as_ref().map(|p| p.id.to_string()),
                        action: action.to_string(),
                        resource: spec_of(shape.resource()),
                    });
                }
            }
        }
    }
    out
}

/// One actor class `who_can` found allowed, and what gave it the action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Allowed {
    pub actor: String,
    pub actor_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<String>,
    /// The baseline, entries and groups holding the action (of the principal, for an agent);
    /// empty when no grant is needed (a run of one's own, an unrestricted repo).
    pub granted_by: Vec<String>,
}

/// Every actor class of `table` that `action` on `resource` is allowed for; with no resource,
/// on at least one shape of the class.
pub fn who_can(table: &GrantsTable, action: &Action, resource: Option<&Resource>) -> Vec<Allowed> {
    let tables = [table];
    // The resource's own user, and the members of its channel, are classes of their own here.
    let (user, channel) = resource.map(named_in).unwrap_or_default();
    actor_classes_with(&tables, &user.into_iter().collect(), channel.as_ref())
        .into_iter()
        .filter_map(|class| {
            let actor = class.resolve(table);
            let allowed = match resource {
                Some(r) => authorize(&actor, action, r).is_allow(),
                None => shapes_for(&class, &[&actor], &tables)
                    .iter()
                    .any(|s| authorize(&actor, action, &s.in_table(table)).is_allow()),
            };
            allowed.then(|| Allowed {
                granted_by: table
                    .sources_holding(actor.principal(), action)
                    .into_iter()
                    .map(|s| s.from)
                    .collect(),
                actor: class.label.clone(),
                actor_id: class.id.to_string(),
                on_behalf_of: class.principal.as_ref().map(|p| p.id.to_string()),
            })
        })
        .collect()
}

/// The user and the channel a resource names (for `who_can`'s own-resource and member rows).
fn named_in(r: &Resource) -> (Option<ActorId>, Option<ChannelId>) {
    match r {
        Resource::Run(run) => (Some(run.user_id.clone()), Some(run.channel_id.clone())),
        Resource::Channel { id, .. } => (None, Some(id.clone())),
        Resource::MemoryScope {
            scope: ScopeKey::User(u),
            ..
        }
        | Resource::ConfigScope(ConfigTier::User(u)) => (Some(u.clone()), None),
        Resource::MemoryScope {
            scope: ScopeKey::Channel(c),
            ..
        }
        | Resource::ConfigScope(ConfigTier::Channel(c)) => (None, Some(c.clone())),
        _ => (None, None),
    }
}

/// The resource spec `parse_resource_spec` reads back (a repo's restriction is the table's).
pub fn spec_of(r: &Resource) -> String {
    match r {
        Resource::Run(run) => {
            let mut pairs = vec![
                format!("id={}", run.id),
                format!("channel={}", run.channel_id),
                format!("user={}", run.user_id),
                format!("visibility={}", run.channel_visibility),
            ];
            pairs.extend(run.repo.as_ref().map(|r| format!("repo={r}")));
            format!("run:{}", pairs.join(","))
        }
        Resource::Channel { id, visibility } => format!("channel:id={id},visibility={visibility}"),
        Resource::MemoryScope {
            scope,
            origin_visibility,
        } => {
            let (kind, key) = match scope {
                ScopeKey::Org => ("org", "org".to_owned()),
                ScopeKey::User(u) => ("user", u.to_string()),
                ScopeKey::Channel(c) => ("channel", c.to_string()),
                ScopeKey::Repo(r) => ("repo", r.to_string()),
            };
            format!("memory-scope:kind={kind},key={key},origin={origin_visibility}")
        }
        Resource::Repo { slug, .. } => format!("repo:slug={slug}"),
        Resource::ConfigScope(ConfigTier::Channel(c)) => {
            format!("config-scope:tier=channel,id={c}")
        }
        Resource::ConfigScope(ConfigTier::User(u)) => format!("config-scope:tier=user,id={u}"),
        Resource::ConfigScope(ConfigTier::Org) => "config-scope:tier=org".to_owned(),
        Resource::Agent { name } => format!("agent:name={name}"),
        Resource::Command { id } => format!("command:id={id}"),
    }
}
