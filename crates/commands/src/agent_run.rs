//! Text that is not a command: an agent run through the `RunLauncher` port, recorded in the
//! caller's origin channel, and what its refusals answer.
//!
//! A request can name the repo its run works in: as an argument (`ask --repo`, MCP `ask`'s
//! `repo`), or in its text as `in <owner/name>: <request>` (after an `@agent`, if any); else
//! the channel's `repo.default` (then the org's) is the repo. `authorize(actor, repo:use,
//! repo)` is asked first, and a repo the caller may not use is answered exactly as one that is
//! not configured.

use authz_core::{
    Action, AgentName, ChannelId, ConfigTier, RepoSlug, Resource, Surface, authorize,
};

use crate::deny::{Denial, Refusal, deny};
use crate::ports::{LaunchError, RunRequest};
use crate::{Caller, Handled, Reply, ReplyKind, Services, reply_texts};

/// The config key (channel tier, then org) naming the repo a channel's runs work in.
pub const DEFAULT_REPO_KEY: &str = "repo.default";

/// What a run is asked for besides its text.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// An agent chosen outside the text (`@name` in the text wins).
    pub agent: Option<AgentName>,
    /// A repo named outside the text (it wins over `in <owner/name>:` and the default).
    pub repo: Option<RepoSlug>,
    /// The run's own agent policy rules (`ask --policy-rule`).
    pub policy_rules: Vec<crate::ports::RunRule>,
}

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
    let options = RunOptions {
        agent,
        ..RunOptions::default()
    };
    start_agent_run_with(caller, text, options, services).await
}

/// [`start_agent_run`] with a repo named outside the text and the run's own rules.
pub async fn start_agent_run_with(
    caller: &Caller,
    text: &str,
    options: RunOptions,
    services: &Services,
) -> Handled {
    let (text, named) = match options.repo {
        Some(repo) => (text.to_owned(), Some(repo)),
        None => match repo_named_in(text) {
            Some((rest, repo)) => (rest, Some(repo)),
            None => (text.to_owned(), None),
        },
    };
    let Some(mut request) = run_request(caller, text, options.agent) else {
        return Handled::reply(Reply::of(ReplyKind::Failed, reply_texts::no_run_channel()));
    };
    let repo = match named {
        Some(repo) => Some(repo),
        None => match channel_default(services, &request.channel).await {
            Ok(repo) => repo,
            Err(reply) => return Handled::reply(reply),
        },
    };
    if let Some(slug) = &repo {
        let resource = services.table().repo(slug.clone());
        let verdict = authorize(&caller.actor, &Action::RepoUse, &resource);
        if !verdict.is_allow() {
            let refusal = Refusal {
                action: Action::RepoUse,
                resource,
                verdict,
            };
            return Handled::reply(deny(
                services,
                caller,
                &refusal,
                Denial::Repo(slug.as_str()),
            ));
        }
    }
    request.repo = repo;
    request.policy_rules = options.policy_rules;
    match services.runs.start(request).await {
        Ok(started) => Handled {
            // An agent's own request gets no link: what it starts is not its to watch from
            // outside, and a link is never an agent's to answer with.
            reply: if caller.acting_in().is_some() {
                started.reply()
            } else {
                started.reply_with_link(services.public_url.as_deref())
            },
            run: Some(started),
        },
        Err(e) => Handled::reply(launch_refusal(caller, e, services)),
    }
}

/// `[@agent ]in <owner/name>: <request>` → (`[@agent ]<request>`, the repo): the form a
/// request names its repo in on a chat surface and the ingress. Anything else is `None`.
pub fn repo_named_in(text: &str) -> Option<(String, RepoSlug)> {
    let text = text.trim_start();
    let (mention, rest) = match text.strip_prefix('@') {
        Some(after) => {
            let end = after.find(char::is_whitespace)?;
            let (name, rest) = after.split_at(end);
            (Some(name), rest.trim_start())
        }
        None => (None, text),
    };
    let rest = rest.strip_prefix("in")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let (name, request) = rest.trim_start().split_once(':')?;
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    let repo = RepoSlug::parse(name).ok()?;
    let request = request.trim_start();
    let text = match mention {
        Some(agent) => format!("@{agent} {request}"),
        None => request.to_owned(),
    };
    Some((text, repo))
}

/// The repo the channel's runs work in (`config set repo.default`, the channel's, else the
/// org's). A value that is not a repo name is a fault to fix, never ignored.
async fn channel_default(
    services: &Services,
    channel: &ChannelId,
) -> Result<Option<RepoSlug>, Reply> {
    for tier in [ConfigTier::Channel(channel.clone()), ConfigTier::Org] {
        let value = services
            .store
            .get()
            .get_config(&tier, DEFAULT_REPO_KEY)
            .await
            .map_err(crate::catalogue::store_failed)?;
        if let Some(value) = value {
            return RepoSlug::parse(value.value.trim()).map(Some).map_err(|_| {
                Reply::of(
                    ReplyKind::Failed,
                    format!(
                        "the {DEFAULT_REPO_KEY} config value {:?} is not a repo; set it again with `config set {DEFAULT_REPO_KEY} <owner/name> --channel {channel}`",
                        value.value
                    ),
                )
            });
        }
    }
    Ok(None)
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
        repo: None,
    })
}

/// Where the CLI's runs are recorded.
pub const CLI_CHANNEL: &str = "cli:local";

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
            let table = services.table();
            let runnable: Vec<String> = table
                .agents()
                .iter()
                .filter(|a| table.can_run_agent(&caller.actor, a))
                .map(|a| a.to_string())
                .collect();
            Reply::of(
                ReplyKind::Usage,
                reply_texts::unknown_agent(&name, &runnable),
            )
        }
        LaunchError::ParentEnded => Reply::of(ReplyKind::Conflict, e.to_string()),
        LaunchError::Busy(_) | LaunchError::ShuttingDown => {
            Reply::of(ReplyKind::Busy, e.to_string())
        }
        LaunchError::StoreUnavailable { ref reason } => {
            // The caller is told to try again; the operator's log names the store's fault.
            tracing::warn!(error = %reason, "a run could not be recorded; nothing was started");
            Reply::of(ReplyKind::Unavailable, e.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_its_repo_at_its_start() {
        let named = |t: &str| repo_named_in(t).map(|(rest, repo)| (rest, repo.to_string()));
        assert_eq!(
            named("in acme/web: fix the flaky test"),
            Some(("fix the flaky test".into(), "acme/web".into()))
        );
        assert_eq!(
            named("@coding in Acme/Web:fix it"),
            Some(("@coding fix it".into(), "acme/web".into()))
        );
        assert_eq!(
            named("  in\tacme/web:  spaces"),
            Some(("spaces".into(), "acme/web".into()))
        );
        for not_the_form in [
            "fix the test in acme/web: now",
            "in acme: no slash",
            "in acme/web no colon",
            "inacme/web: glued",
            "in a b/c: space in name",
            "in ../x: climbs",
            "@coding",
            "in : nothing",
            "index: the word in",
        ] {
            assert_eq!(named(not_the_form), None, "{not_the_form}");
        }
    }
}
