//! `[[schedules]]`: the raw entry and its checks into the schedule crate's `ScheduleDecl`.

use std::collections::BTreeSet;

use authz_core::{AgentName, ScheduleName};
use schedule::{CronSpec, Fires, ScheduleDecl};
use serde::Deserialize;
use toml::Spanned;

use super::agents::declared_agent;
use super::faults::Faults;
use super::{LoadError, Text};

/// One `[[schedules]]` entry: a name, a cron in a zone, and either a command or an agent
/// prompt. Checked in `config::schedules_section`, each fault at its value's position.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSection {
    pub name: Spanned<String>,
    pub cron: Spanned<String>,
    pub time_zone: Option<Spanned<String>>,
    pub command: Option<Spanned<String>>,
    pub agent: Option<Spanned<String>>,
    pub prompt: Option<Spanned<String>>,
}

/// `[[schedules]]`: each a unique name (not a built-in one), a cron and zone that parse, and
/// what it runs: a command, or a prompt for a declared agent.
pub(super) fn schedules(
    t: &Text<'_>,
    entries: &[toml::Spanned<ScheduleSection>],
    agents: &BTreeSet<AgentName>,
    faults: &mut Faults,
) -> Option<Vec<ScheduleDecl>> {
    let builtin: Vec<ScheduleName> = schedule::builtin()
        .into_iter()
        .map(|(d, _)| d.name)
        .collect();
    let mut out: Vec<ScheduleDecl> = Vec::new();
    let mut clean = true;
    for entry in entries {
        match entry_decl(t, entry, agents, &builtin, &out) {
            Ok(decl) => out.push(decl),
            Err(e) => {
                faults.push(e);
                clean = false;
            }
        }
    }
    clean.then_some(out)
}

/// One `[[schedules]]` entry, checked against the schedules before it.
fn entry_decl(
    t: &Text<'_>,
    entry: &toml::Spanned<ScheduleSection>,
    agents: &BTreeSet<AgentName>,
    builtin: &[ScheduleName],
    out: &[ScheduleDecl],
) -> Result<ScheduleDecl, LoadError> {
    let e = entry.get_ref();
    let name =
        ScheduleName::parse(e.name.get_ref()).map_err(|err| t.at(e.name.span().start, err))?;
    if builtin.contains(&name) || out.iter().any(|d| d.name == name) {
        return Err(t.at(
            e.name.span().start,
            format!("`{name}` is already a schedule; give each [[schedules]] entry its own name"),
        ));
    }
    let zone = e.time_zone.as_ref();
    let cron =
        CronSpec::parse(e.cron.get_ref(), zone.map_or("UTC", |z| z.get_ref())).map_err(|err| {
            let at = match (&err, zone) {
                (schedule::CronSpecError::Zone(_), Some(z)) => z.span().start,
                _ => e.cron.span().start,
            };
            t.at(at, format!("schedule `{name}`: {err}"))
        })?;
    let fires = match (&e.command, &e.agent, &e.prompt) {
        (Some(command), None, None) => Fires::Command(command.get_ref().trim().to_owned()),
        (None, Some(agent), Some(prompt)) => Fires::Prompt {
            agent: declared_agent(t, agent, agents)?,
            prompt: prompt.get_ref().clone(),
        },
        _ => {
            return Err(t.at(
                    entry.span().start,
                    format!("schedule `{name}` runs either `command = \"…\"` or `agent = \"…\"` with `prompt = \"…\"`, exactly one of them"),
                ));
        }
    };
    Ok(ScheduleDecl { name, cron, fires })
}
