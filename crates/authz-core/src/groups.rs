//! Groups: the third kind of authorization key, beside grants and restrict.
//!
//! A group's grants (`[grants."group:<name>"]`) are added to each member's own, as a surface
//! entry's are. Three kinds, by where membership is learned:
//!
//! - `group:<name>`: declared in `[groups]`, its members listed by id (people and machine
//!   credentials of the six surfaces; never an agent, a schedule, `cli:local` or a group);
//! - `group:slack:S…`: a Slack user group, its members what the Slack directory says
//!   (`usergroups.users.list`) for the request; a failed lookup adds nothing;
//! - `group:access:<name>`: a group the identity provider put in the verified Access token's
//!   groups claim.
//!
//! Membership of the last two is a fact a surface supplies ([`GroupFacts`]), never read here.
//! A Slack group can be edited by any member in many workspaces, so its grants may hold none
//! of [`SLACK_GROUP_REFUSED`] and no axis of `all`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Serialize, Serializer};
use toml::Value;

use crate::action::{Action, CommandGroup, Effect};
use crate::grants::Grants;
use crate::ids::{ActorId, IdError, Namespace};

/// Where a group's members come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupKind {
    /// `[groups]`: members listed in the config.
    Declared,
    /// A Slack user group: members from Slack's directory.
    Slack,
    /// An identity provider's group, from the Access token's groups claim.
    Access,
}

/// A group's id as grants keys and explanations spell it: `group:oncall`,
/// `group:slack:S0614TZR7`, `group:access:platform-team`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId {
    kind: GroupKind,
    name: String,
}

const PREFIX: &str = "group:";
const MAX_GROUP_NAME: usize = 256;

fn bad(id: &str, rule: &'static str) -> IdError {
    IdError::Invalid {
        id: id.to_owned(),
        what: "group id",
        rule,
    }
}

impl GroupId {
    /// Parses `group:<name>`, `group:slack:S…` or `group:access:<name>`.
    pub fn parse(id: &str) -> Result<GroupId, IdError> {
        let rest = id
            .strip_prefix(PREFIX)
            .ok_or_else(|| bad(id, "a group id starts with group:"))?;
        if let Some(slack) = rest.strip_prefix("slack:") {
            return GroupId::slack(slack).map_err(|_| {
                bad(
                    id,
                    "a Slack user group is group:slack:<its id>, S followed by capital letters and digits",
                )
            });
        }
        if let Some(name) = rest.strip_prefix("access:") {
            return GroupId::access(name).map_err(|_| {
                bad(
                    id,
                    "an identity provider's group is group:access:<name>, 1-256 characters, no control characters",
                )
            });
        }
        GroupId::declared(rest)
    }

    /// A `[groups]` name: 1-64 letters, digits, `-` or `_` (never `slack` or `access`).
    pub fn declared(name: &str) -> Result<GroupId, IdError> {
        let ok_chars = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let first_ok = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric());
        if name.is_empty() {
            return Err(IdError::Empty { what: "group name" });
        }
        if !ok_chars || !first_ok || name.len() > 64 {
            return Err(bad(
                name,
                "use 1-64 letters, digits, '-' or '_', starting with a letter or digit",
            ));
        }
        if matches!(name, "slack" | "access") {
            return Err(bad(
                name,
                "slack and access name the kinds group:slack:<id> and group:access:<name>",
            ));
        }
        Ok(GroupId {
            kind: GroupKind::Declared,
            name: name.to_owned(),
        })
    }

    /// A Slack user group by its id (`S0614TZR7`).
    pub fn slack(id: &str) -> Result<GroupId, IdError> {
        let ok = id.len() >= 2
            && id.len() <= 32
            && id.starts_with('S')
            && id
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        if !ok {
            return Err(bad(
                id,
                "a Slack user group id is S followed by capital letters and digits",
            ));
        }
        Ok(GroupId {
            kind: GroupKind::Slack,
            name: id.to_owned(),
        })
    }

    /// An identity provider's group as a token's claim names it.
    pub fn access(name: &str) -> Result<GroupId, IdError> {
        if name.is_empty() {
            return Err(IdError::Empty { what: "group name" });
        }
        if name.len() > MAX_GROUP_NAME || name.chars().any(char::is_control) {
            return Err(bad(name, "1-256 characters, no control characters"));
        }
        Ok(GroupId {
            kind: GroupKind::Access,
            name: name.to_owned(),
        })
    }

    pub fn kind(&self) -> GroupKind {
        self.kind
    }

    /// The name after the kind's prefix (a Slack group's id).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether a fact of this group may count for `member`: a Slack group only for a Slack
    /// user, an identity provider's group only for an Access browser session. A declared
    /// group's members are listed, never a fact.
    pub fn may_contain(&self, member: &ActorId) -> bool {
        match self.kind {
            GroupKind::Declared => false,
            GroupKind::Slack => member.namespace() == Namespace::Slack,
            // A person's session only: a service token holds exactly its entry (and the
            // declared groups that list it), whatever its token says.
            GroupKind::Access => member.namespace() == Namespace::Access,
        }
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            GroupKind::Declared => "",
            GroupKind::Slack => "slack:",
            GroupKind::Access => "access:",
        };
        write!(f, "{PREFIX}{kind}{}", self.name)
    }
}

impl fmt::Debug for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GroupId({self})")
    }
}

impl Serialize for GroupId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What a surface learned about an actor's groups for one request: facts, never grants. The
/// resolver adds the grants of the groups the table names; the rest mean nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GroupFacts {
    /// Groups a directory or a verified token says the actor is in.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub member_of: BTreeSet<GroupId>,
    /// Groups whose membership could not be learned (a failed lookup): they grant nothing,
    /// and a refusal's audit line names them.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub unresolved: BTreeSet<GroupId>,
}

impl GroupFacts {
    pub fn is_empty(&self) -> bool {
        self.member_of.is_empty() && self.unresolved.is_empty()
    }
}

/// The actions a Slack user group's grants may never hold (with `all` on any axis): any
/// workspace member may be able to add themself to the group.
pub fn slack_group_refused() -> [Action; 3] {
    [
        Action::command(CommandGroup::Config, Effect::Write),
        Action::command(CommandGroup::Repo, Effect::Write),
        Action::TraceRead,
    ]
}

/// The names [`slack_group_refused`] refuses, for messages and docs.
pub const SLACK_GROUP_REFUSED: &str = "all, config:write, repo:write, trace:read";

/// Why a Slack group's grants entry is refused, if it is: the first refused thing it holds.
pub fn slack_group_fault(grants: &Grants) -> Option<String> {
    if grants.actions.is_all() {
        return Some("actions = \"all\"".to_owned());
    }
    if grants.channels.is_all() {
        return Some("channels = \"all\"".to_owned());
    }
    if grants.repos.is_all() {
        return Some("repos = \"all\"".to_owned());
    }
    slack_group_refused()
        .into_iter()
        .find(|a| grants.actions.holds(a))
        .map(|a| a.to_string())
}

/// Why a `[groups]` member is refused, if it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberProblem {
    #[error("groups do not nest: list the members of {0} here instead")]
    Nested(String),
    #[error(
        "an agent is never a group member: it acts for its principal, whose groups already bound it"
    )]
    Agent,
    #[error(
        "a schedule is never a group member: it holds what its grants entry or declaration says"
    )]
    Schedule,
    #[error("cli:local already holds everything")]
    Cli,
    #[error("{0}")]
    BadId(IdError),
}

/// One `[groups]` member: a person or machine credential of the six surfaces.
pub fn parse_member(s: &str) -> Result<ActorId, MemberProblem> {
    if s.starts_with(PREFIX) {
        return Err(MemberProblem::Nested(s.to_owned()));
    }
    let id = ActorId::parse(s).map_err(MemberProblem::BadId)?;
    match id.namespace() {
        Namespace::Agent => Err(MemberProblem::Agent),
        Namespace::Schedule => Err(MemberProblem::Schedule),
        Namespace::Cli => Err(MemberProblem::Cli),
        Namespace::Slack
        | Namespace::Http
        | Namespace::Mcp
        | Namespace::Access
        | Namespace::AccessSvc => Ok(id),
    }
}

/// `[groups]`, read: each declared group's members.
pub type DeclaredGroups = BTreeMap<GroupId, BTreeSet<ActorId>>;

/// Why `[groups]` does not read: the key path and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupsFault {
    pub key: String,
    pub problem: String,
}

/// Reads `[groups]`: `name = ["<actor id>", …]`.
pub fn parse_groups(value: &Value) -> Result<DeclaredGroups, GroupsFault> {
    let fault = |key: String, problem: String| GroupsFault { key, problem };
    let Value::Table(groups) = value else {
        return Err(fault("groups".into(), "must be a table".into()));
    };
    let mut out = DeclaredGroups::new();
    for (name, members) in groups {
        let key = format!("groups.{name:?}");
        let id = GroupId::declared(name).map_err(|e| fault(key.clone(), e.to_string()))?;
        let Value::Array(items) = members else {
            return Err(fault(key, "must be a list of actor ids".into()));
        };
        let mut set = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let item_key = format!("{key}[{i}]");
            let Value::String(s) = item else {
                return Err(fault(item_key, "must be a string".into()));
            };
            set.insert(parse_member(s).map_err(|e| fault(item_key, e.to_string()))?);
        }
        out.insert(id, set);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_ids_read_one_way_and_print_as_written() {
        for ok in [
            "group:oncall",
            "group:on-call_2",
            "group:slack:S0614TZR7",
            "group:access:Platform Team",
            "group:access:eng@example.com",
        ] {
            assert_eq!(GroupId::parse(ok).unwrap().to_string(), ok);
        }
        for bad in [
            "oncall",
            "group:",
            "group:slack",
            "group:access",
            "group:slack:",
            "group:slack:U024BE7LH",
            "group:slack:s0614",
            "group:access:",
            "group:access:a\nb",
            "group:on call",
            "group:-x",
            "group:a:b",
        ] {
            assert!(GroupId::parse(bad).is_err(), "{bad:?} read");
        }
    }

    #[test]
    fn members_are_people_and_credentials_of_the_surfaces_only() {
        for ok in [
            "slack:U024BE7LH",
            "access:alice@example.com",
            "access:svc:deploy",
            "http:ops-bot",
            "mcp:agent-1",
        ] {
            assert!(parse_member(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("group:oncall", "nest"),
            ("agent:coding", "agent"),
            ("schedule:nightly", "schedule"),
            ("cli:local", "cli:local"),
            ("nobody:x", "namespace"),
        ] {
            let e = parse_member(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_slack_groups_facts_count_only_for_slack_users() {
        let s = GroupId::parse("group:slack:S1").unwrap();
        let a = GroupId::parse("group:access:eng").unwrap();
        let u = ActorId::parse("slack:U1").unwrap();
        let b = ActorId::parse("access:bob@example.com").unwrap();
        let svc = ActorId::parse("access:svc:deploy").unwrap();
        assert!(s.may_contain(&u) && !s.may_contain(&b));
        assert!(a.may_contain(&b) && !a.may_contain(&svc) && !a.may_contain(&u));
        assert!(!GroupId::parse("group:x").unwrap().may_contain(&u));
    }
}
