//! Validated identifiers. Every id that crosses a decision is a newtype built
//! through `parse`, so a decision never sees a malformed or un-namespaced id.

use std::fmt;
use std::sync::Arc;

use serde::{Serialize, Serializer};

/// Why a string is not a valid identifier. The message names the id and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{what} is empty")]
    Empty { what: &'static str },
    #[error(
        "{id:?} has no known namespace; an actor id starts with one of {}",
        Namespace::ALL.map(Namespace::prefix).join(", ")
    )]
    UnknownNamespace { id: String },
    #[error("{id:?} is not a valid {what}: {rule}")]
    Invalid {
        id: String,
        what: &'static str,
        rule: &'static str,
    },
}

const MAX_ID_LEN: usize = 256;

fn invalid(id: &str, what: &'static str, rule: &'static str) -> IdError {
    IdError::Invalid {
        id: id.to_owned(),
        what,
        rule,
    }
}

/// Characters allowed in a token-like subject (`http:<subject>`, `access:<sub>`, …).
fn is_subject_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@' | '+')
}

/// A short lower-case-friendly name: agents, schedules.
fn check_name(s: &str, what: &'static str) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty { what });
    }
    let first_ok = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok
        || s.len() > 64
        || !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(invalid(
            s,
            what,
            "use 1-64 letters, digits, '-' or '_', starting with a letter or digit",
        ));
    }
    Ok(())
}

/// The surface an actor id belongs to, read from its prefix. Each namespace says, in this one
/// place, the kind of actor it proves ([`ActorKind::of_namespace`]) and where its grants start
/// ([`Namespace::baseline`]), so a new surface's namespace is one row here and one in
/// `surface.rs`, and the resolver, the checks and the explanations follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Namespace {
    Slack,
    Http,
    Mcp,
    /// An Access browser session (`access:<sub>`).
    Access,
    /// An Access service token (`access:svc:<common_name>`).
    AccessSvc,
    Cli,
    Schedule,
    Agent,
}

impl Namespace {
    pub const ALL: [Namespace; 8] = [
        Namespace::Slack,
        Namespace::Http,
        Namespace::Mcp,
        Namespace::Access,
        Namespace::AccessSvc,
        Namespace::Cli,
        Namespace::Schedule,
        Namespace::Agent,
    ];

    pub fn prefix(self) -> &'static str {
        match self {
            Namespace::Slack => "slack:",
            Namespace::Http => "http:",
            Namespace::Mcp => "mcp:",
            Namespace::Access => "access:",
            Namespace::AccessSvc => "access:svc:",
            Namespace::Cli => "cli:",
            Namespace::Schedule => "schedule:",
            Namespace::Agent => "agent:",
        }
    }

    /// Where an id of this namespace's grants start before its entry.
    pub fn baseline(self) -> Baseline {
        match self {
            Namespace::Slack => Baseline::ChatPerson,
            Namespace::Access => Baseline::BrowserPerson,
            Namespace::Http | Namespace::Mcp | Namespace::AccessSvc | Namespace::Agent => {
                Baseline::EntryOnly
            }
            Namespace::Schedule => Baseline::Schedule,
            Namespace::Cli => Baseline::Everything,
        }
    }

    /// Whether a surface's channel directory may answer for this namespace's channels and
    /// members: only where the id alone leaves a channel unknown (a chat API's `slack:C…`).
    /// Every other namespace's channels are what their ids say, so no directory may widen them.
    pub fn takes_directory(self) -> bool {
        match self {
            Namespace::Slack => true,
            Namespace::Http
            | Namespace::Mcp
            | Namespace::Access
            | Namespace::AccessSvc
            | Namespace::Cli
            | Namespace::Schedule
            | Namespace::Agent => false,
        }
    }

    /// Splits `id` into its namespace and subject. The longest matching prefix wins, so
    /// `access:svc:x` is a service token, not a browser session.
    pub fn split(id: &str) -> Option<(Namespace, &str)> {
        Namespace::ALL
            .into_iter()
            .filter(|ns| id.starts_with(ns.prefix()))
            .max_by_key(|ns| ns.prefix().len())
            .map(|ns| (ns, &id[ns.prefix().len()..]))
    }
}

/// Where a namespace's grants start, before its entry in `[grants]` (the resolver in
/// `config.rs` reads this, never the namespace itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// A person in chat: the open chat commands and every unrestricted agent; an entry adds.
    ChatPerson,
    /// A person in a browser: every read command; an entry adds.
    BrowserPerson,
    /// A credential or an agent: exactly its entry, else nothing.
    EntryOnly,
    /// A schedule: its entry, else the grants the registry declared for it.
    Schedule,
    /// The local operator: everything.
    Everything,
}

impl Baseline {
    /// A person someone could ask for access (the 🚫 reply's "Ask …"): never a credential.
    pub fn is_remote_person(self) -> bool {
        matches!(self, Baseline::ChatPerson | Baseline::BrowserPerson)
    }
}

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

/// Ids are immutable and cloned often (into predicates, reasons, rows): `Arc<str>` makes a
/// clone a reference-count increment.
type Text = Arc<str>;

/// A platform-namespaced actor id (`slack:U024BE7LH`, `http:ops-bot`, `cli:local`, …),
/// validated on construction.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActorId {
    raw: Text,
    namespace: Namespace,
}

impl ActorId {
    pub fn parse(id: &str) -> Result<Self, IdError> {
        if id.is_empty() {
            return Err(IdError::Empty { what: "actor id" });
        }
        if id.len() > MAX_ID_LEN {
            return Err(invalid(id, "actor id", "longer than 256 characters"));
        }
        let Some((namespace, subject)) = Namespace::split(id) else {
            return Err(IdError::UnknownNamespace { id: id.to_owned() });
        };
        if subject.is_empty() {
            return Err(invalid(
                id,
                "actor id",
                "the part after the prefix is empty",
            ));
        }
        Self::check_subject(id, namespace, subject)?;
        Ok(ActorId {
            raw: id.into(),
            namespace,
        })
    }

    fn check_subject(id: &str, namespace: Namespace, subject: &str) -> Result<(), IdError> {
        match namespace {
            Namespace::Slack => {
                let user_like = subject.starts_with(['U', 'W'])
                    && subject.len() >= 2
                    && subject
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
                if !user_like {
                    return Err(invalid(
                        id,
                        "Slack user id",
                        "a Slack user id is U… or W… in upper-case letters and digits, like slack:U024BE7LH",
                    ));
                }
            }
            Namespace::Cli => {
                if subject != "local" {
                    return Err(invalid(
                        id,
                        "actor id",
                        "the only CLI identity is cli:local",
                    ));
                }
            }
            Namespace::Schedule => check_name(subject, "schedule name")?,
            Namespace::Agent => check_name(subject, "agent name")?,
            Namespace::Http | Namespace::Mcp | Namespace::Access | Namespace::AccessSvc => {
                if subject.len() > 128 || !subject.chars().all(is_subject_char) {
                    return Err(invalid(
                        id,
                        "actor id",
                        "a subject is 1-128 letters, digits, '.', '_', '-', '@' or '+'",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The fixed identity of the local binary.
    pub fn cli_local() -> Self {
        ActorId {
            raw: "cli:local".into(),
            namespace: Namespace::Cli,
        }
    }

    /// The actor id of an agent (`agent:<name>`).
    pub fn agent(name: &AgentName) -> Self {
        ActorId {
            raw: format!("agent:{}", name.as_str()).into(),
            namespace: Namespace::Agent,
        }
    }

    pub fn namespace(&self) -> Namespace {
        self.namespace
    }

    pub fn subject(&self) -> &str {
        self.raw
            .strip_prefix(self.namespace.prefix())
            .unwrap_or_default()
    }

    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

/// A channel id, namespaced like actor ids (`slack:C024BE91L`, `http:ops`, `cli:local`).
/// Unknown namespaces are allowed (the directory calls them `unknown`); the form is not.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelId(Text);

impl ChannelId {
    pub fn parse(id: &str) -> Result<Self, IdError> {
        const RULE: &str = "a channel id is <namespace>:<id>, like slack:C024BE91L or http:ops, in letters, digits and . _ - @ + :";
        if id.is_empty() {
            return Err(IdError::Empty { what: "channel id" });
        }
        if id.len() > MAX_ID_LEN {
            return Err(invalid(id, "channel id", "longer than 256 characters"));
        }
        let Some((ns, rest)) = id.split_once(':') else {
            return Err(invalid(id, "channel id", RULE));
        };
        let ns_ok = !ns.is_empty() && ns.chars().all(|c| c.is_ascii_lowercase());
        let rest_ok = !rest.is_empty() && rest.chars().all(|c| is_subject_char(c) || c == ':');
        if !ns_ok || !rest_ok {
            return Err(invalid(id, "channel id", RULE));
        }
        Ok(ChannelId(id.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The part before the first `:` (`slack`, `http`, …).
    pub fn namespace(&self) -> &str {
        self.0.split_once(':').map_or("", |(ns, _)| ns)
    }
}

/// A repository `owner/name`, stored lower-cased so comparisons are case-insensitive.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoSlug(Text);

impl RepoSlug {
    pub fn parse(slug: &str) -> Result<Self, IdError> {
        const RULE: &str = "a repo is owner/name, each part letters, digits, '.', '_' or '-'";
        if slug.is_empty() {
            return Err(IdError::Empty { what: "repo slug" });
        }
        let Some((owner, name)) = slug.split_once('/') else {
            return Err(invalid(slug, "repo slug", RULE));
        };
        let part_ok = |p: &str| {
            !p.is_empty()
                && p.len() <= 100
                && p != "."
                && p != ".."
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        };
        if !part_ok(owner) || !part_ok(name) {
            return Err(invalid(slug, "repo slug", RULE));
        }
        Ok(RepoSlug(slug.to_ascii_lowercase().into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The name of a declared agent (`coding`, `reviewer`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentName(Text);

impl AgentName {
    pub fn parse(name: &str) -> Result<Self, IdError> {
        check_name(name, "agent name")?;
        Ok(AgentName(name.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The name of a schedule in the schedule registry (`self-improvement`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScheduleName(Text);

impl ScheduleName {
    pub fn parse(name: &str) -> Result<Self, IdError> {
        check_name(name, "schedule name")?;
        Ok(ScheduleName(name.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The actor a firing of this schedule runs as.
    pub fn actor_id(&self) -> ActorId {
        ActorId {
            raw: format!("schedule:{}", self.0).into(),
            namespace: Namespace::Schedule,
        }
    }
}

/// A run id: opaque, time-sortable in practice (ULID), never a path.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(Text);

impl RunId {
    pub fn parse(id: &str) -> Result<Self, IdError> {
        if id.is_empty() {
            return Err(IdError::Empty { what: "run id" });
        }
        if id.len() > 64
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(invalid(
                id,
                "run id",
                "a run id is 1-64 letters, digits, '-' or '_'",
            ));
        }
        Ok(RunId(id.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A registry command's dotted id (`runs.list`, `admin.trace_log`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommandId(Text);

impl CommandId {
    pub fn parse(id: &str) -> Result<Self, IdError> {
        if id.is_empty() {
            return Err(IdError::Empty { what: "command id" });
        }
        let segment_ok = |s: &str| {
            s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        if id.len() > 64 || !id.split('.').all(segment_ok) {
            return Err(invalid(
                id,
                "command id",
                "a command id is dotted lower-case words, like runs.list",
            ));
        }
        Ok(CommandId(id.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! string_id_traits {
    ($($ty:ident),*) => {$(
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($ty), self.as_str())
            }
        }
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
        impl std::str::FromStr for $ty {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }
    )*};
}

string_id_traits!(
    ActorId,
    ChannelId,
    RepoSlug,
    AgentName,
    ScheduleName,
    RunId,
    CommandId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actor_ids_parse_by_namespace() {
        let cases = [
            ("slack:U024BE7LH", Namespace::Slack, "U024BE7LH"),
            ("slack:W1", Namespace::Slack, "W1"),
            ("http:ops-bot", Namespace::Http, "ops-bot"),
            ("mcp:agent.client", Namespace::Mcp, "agent.client"),
            ("access:3f2a-99", Namespace::Access, "3f2a-99"),
            (
                "access:svc:deploy.access",
                Namespace::AccessSvc,
                "deploy.access",
            ),
            ("cli:local", Namespace::Cli, "local"),
            (
                "schedule:self-improvement",
                Namespace::Schedule,
                "self-improvement",
            ),
            ("agent:coding", Namespace::Agent, "coding"),
        ];
        for (raw, ns, subject) in cases {
            let id = ActorId::parse(raw).unwrap();
            assert_eq!(id.namespace(), ns, "{raw}");
            assert_eq!(id.subject(), subject, "{raw}");
            assert_eq!(id.as_str(), raw);
        }
    }

    #[test]
    fn malformed_actor_ids_are_refused() {
        let bad = [
            "",
            "slack",
            "slack:",
            "slack:C024",
            "slack:u024",
            "slack:U*",
            "http:",
            "http:ops bot",
            "http:*",
            "mcp:a/b",
            "access:",
            "access:svc:",
            "cli:remote",
            "schedule:*",
            "agent:",
            "agent:-x",
            "unknown:x",
            "U024BE7LH",
            "http:\u{1b}[31m",
        ];
        for raw in bad {
            assert!(ActorId::parse(raw).is_err(), "{raw:?} parsed");
        }
        let long = format!("http:{}", "a".repeat(300));
        assert!(ActorId::parse(&long).is_err());
    }

    #[test]
    fn repo_slugs_are_lower_cased_and_validated() {
        assert_eq!(RepoSlug::parse("Acme/Web").unwrap().as_str(), "acme/web");
        for bad in ["", "acme", "acme/", "/web", "a/b/c", "acme/..", "acme/we b"] {
            assert!(RepoSlug::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn channel_ids_need_a_namespace() {
        for ok in [
            "slack:C024",
            "http:ops",
            "cli:local",
            "access:svc:cn",
            "x:y",
        ] {
            assert!(ChannelId::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "C024",
            ":x",
            "slack:",
            "Slack:C1",
            "slack:C 1",
            "slack:*",
        ] {
            assert!(ChannelId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn command_and_run_ids() {
        assert!(CommandId::parse("runs.list").is_ok());
        assert!(CommandId::parse("admin.trace_log").is_ok());
        for bad in ["", "Runs.list", "runs..list", "runs/list", ".x"] {
            assert!(CommandId::parse(bad).is_err(), "{bad:?}");
        }
        assert!(RunId::parse("01HZX3").is_ok());
        for bad in ["", "../etc", "a b", "a/b"] {
            assert!(RunId::parse(bad).is_err(), "{bad:?}");
        }
    }
}
