//! The closed action vocabulary: command groups × read/write/exec, and the non-command
//! actions `agent:run:<name>`, `agent:run:*`, `repo:use`, `memory:write`, `trace:read`.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::ids::{AgentName, IdError};

/// The command groups. Each registry command declares one `<group>:<effect>` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CommandGroup {
    Help,
    Status,
    Config,
    Repo,
    Friction,
    Memory,
    Mcp,
    Schedule,
    Runs,
}

impl CommandGroup {
    pub const ALL: [CommandGroup; 9] = [
        CommandGroup::Help,
        CommandGroup::Status,
        CommandGroup::Config,
        CommandGroup::Repo,
        CommandGroup::Friction,
        CommandGroup::Memory,
        CommandGroup::Mcp,
        CommandGroup::Schedule,
        CommandGroup::Runs,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CommandGroup::Help => "help",
            CommandGroup::Status => "status",
            CommandGroup::Config => "config",
            CommandGroup::Repo => "repo",
            CommandGroup::Friction => "friction",
            CommandGroup::Memory => "memory",
            CommandGroup::Mcp => "mcp",
            CommandGroup::Schedule => "schedule",
            CommandGroup::Runs => "runs",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        CommandGroup::ALL.into_iter().find(|g| g.as_str() == s)
    }
}

/// What a command does. Write never implies exec; nothing implies a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Effect {
    Read,
    Write,
    Exec,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Exec => "exec",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "read" => Some(Effect::Read),
            "write" => Some(Effect::Write),
            "exec" => Some(Effect::Exec),
            _ => None,
        }
    }
}

/// One action of the closed vocabulary.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// `<group>:<effect>`, the action a registry command declares. `memory:write` is both a
    /// command action (`memory forget`) and the reflection write.
    Command(CommandGroup, Effect),
    /// `agent:run:<name>`: start the named agent.
    AgentRun(AgentName),
    /// `agent:run:*`: every agent. Satisfies every `agent:run:<name>`.
    AgentRunAny,
    /// `repo:use`: act inside a repo's workspace.
    RepoUse,
    /// `trace:read`: open the span log. Held by no baseline.
    TraceRead,
}

/// Why a string is not an action of the vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    #[error(
        "{0:?} is not an action; actions are <group>:read|write|exec for the groups help, status, config, repo, friction, memory, mcp, schedule, runs, or agent:run:<name>, agent:run:*, repo:use, memory:write, trace:read"
    )]
    Unknown(String),
    #[error("{action:?} names an invalid agent: {source}")]
    BadAgent { action: String, source: IdError },
}

impl Action {
    pub const fn command(group: CommandGroup, effect: Effect) -> Self {
        Action::Command(group, effect)
    }

    pub fn parse(s: &str) -> Result<Self, ActionError> {
        if let Some(name) = s.strip_prefix("agent:run:") {
            if name == "*" {
                return Ok(Action::AgentRunAny);
            }
            return AgentName::parse(name)
                .map(Action::AgentRun)
                .map_err(|source| ActionError::BadAgent {
                    action: s.to_owned(),
                    source,
                });
        }
        match s {
            "repo:use" => return Ok(Action::RepoUse),
            "trace:read" => return Ok(Action::TraceRead),
            _ => {}
        }
        let parsed = s.split_once(':').and_then(|(group, effect)| {
            Some(Action::Command(
                CommandGroup::parse(group)?,
                Effect::parse(effect)?,
            ))
        });
        parsed.ok_or_else(|| ActionError::Unknown(s.to_owned()))
    }

    /// True for the actions no registry command declares.
    pub fn is_non_command(&self) -> bool {
        !matches!(self, Action::Command(..))
            || *self == Action::Command(CommandGroup::Memory, Effect::Write)
    }
}

/// Every command action the catalogue declares (commands.md), in a stable order. The built-in
/// policy table has a row for each; the registry's own declared set is checked against the table
/// by `validate_policy` at start-up.
pub const CATALOGUE_ACTIONS: [Action; 17] = {
    use CommandGroup::*;
    use Effect::*;
    [
        Action::command(Help, Read),
        Action::command(Status, Read),
        Action::command(Runs, Read),
        Action::command(Runs, Write),
        Action::command(Friction, Read),
        Action::command(Friction, Write),
        Action::command(Config, Read),
        Action::command(Config, Write),
        Action::command(Repo, Read),
        Action::command(Repo, Write),
        Action::command(Repo, Exec),
        Action::command(Memory, Read),
        Action::command(Memory, Write),
        Action::command(Mcp, Read),
        Action::command(Mcp, Write),
        Action::command(Schedule, Read),
        Action::command(Schedule, Exec),
    ]
};

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Command(g, e) => write!(f, "{}:{}", g.as_str(), e.as_str()),
            Action::AgentRun(name) => write!(f, "agent:run:{name}"),
            Action::AgentRunAny => f.write_str("agent:run:*"),
            Action::RepoUse => f.write_str("repo:use"),
            Action::TraceRead => f.write_str("trace:read"),
        }
    }
}

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Action({self})")
    }
}

impl Serialize for Action {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::str::FromStr for Action {
    type Err = ActionError;
    fn from_str(s: &str) -> Result<Self, ActionError> {
        Action::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vocabulary_word_round_trips() {
        let mut words: Vec<String> = Vec::new();
        for g in CommandGroup::ALL {
            for e in ["read", "write", "exec"] {
                words.push(format!("{}:{e}", g.as_str()));
            }
        }
        words.extend(
            ["agent:run:coding", "agent:run:*", "repo:use", "trace:read"].map(String::from),
        );
        for w in words {
            assert_eq!(Action::parse(&w).unwrap().to_string(), w);
        }
    }

    #[test]
    fn words_outside_the_vocabulary_are_refused() {
        for bad in [
            "",
            "runs",
            "runs:",
            "runs:delete",
            "Runs:read",
            "admin:read",
            "agent:run:",
            "agent:run:a b",
            "agent:*",
            "*",
            "all",
            "repo:use:x",
            "trace:write",
        ] {
            assert!(Action::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn catalogue_actions_are_command_actions() {
        for a in CATALOGUE_ACTIONS {
            assert!(matches!(a, Action::Command(..)), "{a}");
        }
        assert!(Action::parse("memory:write").unwrap().is_non_command());
        assert!(!Action::parse("runs:read").unwrap().is_non_command());
        assert!(Action::parse("repo:use").unwrap().is_non_command());
    }
}
