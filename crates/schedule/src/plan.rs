//! Building a firing's actor, once, from the grants table: `schedule:<name>` with the
//! registry's declared grants (or the `[grants]` entry that replaces them). A schedule whose
//! actor cannot fire what it declares is misconfigured: it sends nothing and says why.

use authz_core::GrantsTable;
use commands::{Caller, RawInput, Registry, Surface};

use crate::decl::{Fires, ScheduleDecl};

/// Why a schedule cannot fire, with the config key that would fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct Misconfigured {
    /// The key to change (`grants."schedule:nightly".actions`).
    pub key: String,
    pub reason: String,
}

/// The caller a firing runs as, or why there is none. Pure: no I/O, no clock.
pub fn plan(
    decl: &ScheduleDecl,
    table: &GrantsTable,
    registry: &Registry,
) -> Result<Caller, Misconfigured> {
    let id = decl.name.actor_id();
    let grants_key = format!("grants.\"{id}\".actions");
    let refuse = |reason: String| Misconfigured {
        key: grants_key.clone(),
        reason,
    };
    let caller = commands::identity::declared_caller(table, Surface::Schedule, id.clone())
        .map_err(|e| refuse(e.to_string()))?;
    // Every answer here is `authorize`'s (through the registry's admission or the table); the
    // config load has already refused an undeclared agent.
    match &decl.fires {
        Fires::Command(text) => admit_command(&caller, text, registry).map_err(refuse)?,
        Fires::Prompt { agent, .. } => {
            if !table.can_run_agent(&caller.actor, agent) {
                return Err(refuse(format!(
                    "{id} may not run agent `{agent}`; its grants need \"agent:run:{agent}\""
                )));
            }
        }
    }
    Ok(caller)
}

/// The command text names a registry command the schedule's actor is admitted to.
fn admit_command(caller: &Caller, text: &str, registry: &Registry) -> Result<(), String> {
    let words = commands::args::words(text).map_err(|e| format!("`{text}`: {e}"))?;
    let Some((command, _)) = registry.by_words(&words) else {
        return Err(format!("`{text}` is not a registry command"));
    };
    let raw = RawInput::Text(text.to_owned());
    if registry.admission(caller, command, &raw).is_allow() {
        Ok(())
    } else {
        Err(format!(
            "{} may not run `{}`; its grants need \"{}\"",
            caller.actor.id,
            command.text_form(),
            command.action
        ))
    }
}
