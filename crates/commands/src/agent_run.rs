//! Text that is not a command: an agent run through the `RunLauncher` port, recorded in the
//! caller's origin channel, and what its refusals answer.

use authz_core::{AgentName, ChannelId, Resource, Surface};
use serde_json::Value;
use store::RunRecord;

use crate::deny::{Denial, deny};
use crate::ports::{LaunchError, RunRequest};
use crate::{Caller, Handled, Reply, ReplyKind, Services, replies};

/// Starts an agent run for `caller` (text that is not a command, or `ask`), recorded in the
/// caller's origin channel — or, for an agent acting inside its run, as that run's child (the
/// launcher places it in the parent's channel, with its stamp, for its principal). `agent` is
/// an agent chosen outside the text.
pub async fn start_agent_run(
    caller: &Caller,
    text: &str,
    agent: Option<AgentName>,
    services: &Services,
) -> Handled {
    start_agent_run_with_rules(caller, text, agent, Vec::new(), services).await
}

/// [`start_agent_run`] with the run's own agent policy rules (`ask --policy-rule`).
pub async fn start_agent_run_with_rules(
    caller: &Caller,
    text: &str,
    agent: Option<AgentName>,
    policy_rules: Vec<broker::rules::Rule>,
    services: &Services,
) -> Handled {
    let Some(mut request) = run_request(caller, text.to_owned(), agent) else {
        return Handled::reply(Reply::of(ReplyKind::Failed, replies::no_run_channel()));
    };
    request.policy_rules = policy_rules;
    match services.runs.start(request).await {
        Ok(started) => Handled {
            reply: started.reply_with_link(services.public_url.as_deref()),
            run: Some(started),
        },
        Err(e) => Handled::reply(launch_refusal(caller, e, services)),
    }
}

/// The request for a run in the caller's origin channel. A CLI command carries no origin (so
/// a channel-tier write must name its channel); its runs are recorded in `cli:local`, as the
/// spec's table of run channels says. Every other surface sets an origin; a caller without
/// one has nowhere to record a run (`None`).
pub(crate) fn run_request(
    caller: &Caller,
    text: String,
    agent: Option<AgentName>,
) -> Option<RunRequest> {
    let (channel, thread_key) = match (&caller.actor.origin, caller.surface) {
        (Some(origin), _) => (origin.channel_id.clone(), origin.thread_key.clone()),
        (None, Surface::Cli) => (ChannelId::parse(CLI_CHANNEL).ok()?, None),
        (None, _) => return None,
    };
    Some(RunRequest {
        actor: caller.actor.clone(),
        surface: caller.surface,
        channel,
        thread_key,
        text,
        agent,
        parent: caller.acting_in().cloned(),
        policy_rules: Vec::new(),
    })
}

/// Where the CLI's runs are recorded.
pub const CLI_CHANNEL: &str = "cli:local";

/// A run as data: a started run's reply, what `ask --json` prints, what `POST /ingress?wait=`
/// answers.
pub(crate) fn outcome_json(run: &RunRecord) -> Value {
    serde_json::json!({
        "run_id": run.id.as_str(),
        "agent": run.agent,
        "channel": run.channel_id.as_str(),
        "status": run.status.as_str(),
        "answer": run.answer,
        "error": run.error,
    })
}

/// A finished run as text: its answer, else its status and error.
pub(crate) fn outcome_text(run: &RunRecord) -> String {
    match (&run.answer, &run.error) {
        (Some(answer), _) => answer.clone(),
        (None, Some(error)) => format!("run {} {}: {error}", run.id, run.status),
        (None, None) => format!("run {} {}", run.id, run.status),
    }
}

/// The reply to a started run.
pub(crate) fn started_reply(run: &RunRecord) -> Reply {
    Reply::ok(
        replies::run_started(run.id.as_str(), &run.agent, run.channel_id.as_str()),
        outcome_json(run),
    )
}

/// Why the launcher started nothing, as a reply; a refusal leaves its audit line.
pub(crate) fn launch_refusal(caller: &Caller, e: LaunchError, services: &Services) -> Reply {
    match e {
        LaunchError::Refused(refusal) => {
            let agent = match &refusal.resource {
                Resource::Agent { name } => name.to_string(),
                _ => String::new(),
            };
            deny(services, caller, &refusal, Denial::Agent(&agent))
        }
        LaunchError::UnknownAgent { name } => {
            // Only the agents this caller may run: naming the rest would tell a caller with no
            // grants which restricted agents exist.
            let runnable: Vec<String> = services
                .table
                .agents()
                .iter()
                .filter(|a| services.table.can_run_agent(&caller.actor, a))
                .map(|a| a.to_string())
                .collect();
            Reply::of(ReplyKind::Usage, replies::unknown_agent(&name, &runnable))
        }
        LaunchError::ParentEnded => Reply::of(ReplyKind::Conflict, e.to_string()),
        LaunchError::Busy(_) | LaunchError::ShuttingDown => {
            Reply::of(ReplyKind::Busy, e.to_string())
        }
        LaunchError::NoAgent | LaunchError::NoCodingAgent(_) | LaunchError::Workspace(_) => {
            Reply::of(ReplyKind::Usage, e.to_string())
        }
        LaunchError::Policy(_) => Reply::of(ReplyKind::Failed, e.to_string()),
        LaunchError::Failed { ref detail } => {
            tracing::error!(error = %detail, "starting a run failed");
            Reply::of(ReplyKind::Failed, e.to_string())
        }
    }
}

impl Handled {
    pub(crate) fn reply(reply: Reply) -> Self {
        Handled { reply, run: None }
    }
}
