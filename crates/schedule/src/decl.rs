//! What the schedule registry declares: a name, a cron slot in a zone, what a firing runs,
//! and (through the grants table) what its actor `schedule:<name>` holds.

use authz_core::{AgentName, GrantSet, Grants, ScheduleName};

use crate::cron::CronSpec;

/// What one firing runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fires {
    /// Registry command text, recorded as a run whose answer is the command's reply.
    Command(String),
    /// An ordinary agent run of `agent` on `prompt`.
    Prompt { agent: AgentName, prompt: String },
}

impl Fires {
    /// `friction report --days 7`, or `agent coding: <prompt>`.
    pub fn describe(&self) -> String {
        match self {
            Fires::Command(text) => text.clone(),
            Fires::Prompt { agent, prompt } => format!("agent {agent}: {prompt}"),
        }
    }
}

/// One declared schedule.
#[derive(Debug, Clone)]
pub struct ScheduleDecl {
    pub name: ScheduleName,
    pub cron: CronSpec,
    pub fires: Fires,
}

/// The built-in self-improvement schedule's name.
pub const SELF_IMPROVEMENT: &str = "self-improvement";

/// The schedules built in, with the grants the registry declares for each actor (replaced
/// whole by a `[grants."schedule:<name>"]` entry). Self-improvement reads the fleet's
/// friction weekly (deliberate change (a): channels all, so it sees every channel's runs).
pub fn builtin() -> Vec<(ScheduleDecl, Grants)> {
    let grants = Grants {
        actions: GrantSet::only(
            ["friction:read", "friction:write"]
                .into_iter()
                .filter_map(|a| a.parse().ok()),
        ),
        channels: GrantSet::All,
        repos: GrantSet::none(),
    };
    let decl = ScheduleName::parse(SELF_IMPROVEMENT)
        .ok()
        .zip(CronSpec::parse("0 9 * * MON", "UTC").ok())
        .map(|(name, cron)| ScheduleDecl {
            name,
            cron,
            fires: Fires::Command("friction report --days 7".to_owned()),
        });
    decl.map(|d| vec![(d, grants)]).unwrap_or_default()
}
