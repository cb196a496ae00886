//! Starting a run: the admission, the agent's choice, the placement (the channel's stamp, or
//! a child run's parent), the concurrency slot, the record and its tokens, the workspace and
//! the tool broker, then the run's task.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agents::{AgentJob, CancellationToken};
use authz_core::{
    Action, Actor, ActorId, AgentName, ChannelId, ChannelVisibility, ConfigTier, RepoSlug,
    Resource, RunId, authorize,
};
use commands::identity::LinkHolder;
use commands::{CommandRun, LaunchError, LiveRun, Refusal, RunRequest, StartedRun};
use store::{Finish, NewRun, RunRecord, RunStatus};
use store::{Timestamp, TokenHash};
use tokio::sync::watch;
use tracing::Instrument;

use crate::workspace;
use crate::{
    AgentClaims, COMMAND_AGENT, Inner, RunPlace, TokenError, ToolProfile, WorkspaceError,
    random_token, reflect, tools,
};

/// Where a new run goes and whose it is (see `Inner::place`).
pub(crate) struct Placement {
    pub(crate) channel: ChannelId,
    pub(crate) thread_key: Option<String>,
    pub(crate) visibility: ChannelVisibility,
    pub(crate) user: ActorId,
    pub(crate) parent: Option<RunId>,
}

/// The person (or machine) a run is for: an agent's principal, else the actor itself.
pub(crate) fn principal_of(actor: &Actor) -> &ActorId {
    actor.on_behalf_of.as_deref().map_or(&actor.id, |p| &p.id)
}

/// The admission of `action` on `agent{name}`; a refusal carries what was asked, for the
/// registry's audit line.
pub(crate) fn admit(actor: &Actor, action: Action, name: AgentName) -> Result<(), LaunchError> {
    let resource = Resource::Agent { name };
    let verdict = authorize(actor, &action, &resource);
    if verdict.is_allow() {
        return Ok(());
    }
    Err(LaunchError::Refused(Box::new(Refusal {
        action,
        resource,
        verdict,
    })))
}

impl Inner {
    /// The row a new run starts as: owned by this replica, placed by [`Inner::place`].
    pub(crate) async fn new_run(
        &self,
        req: &RunRequest,
        agent: String,
        repo: Option<RepoSlug>,
        request: String,
        capability_token: Option<TokenHash>,
    ) -> Result<NewRun, LaunchError> {
        let place = self.place(req).await?;
        Ok(NewRun {
            surface: req.surface,
            channel_id: place.channel,
            thread_key: place.thread_key,
            user_id: place.user,
            agent,
            repo,
            channel_visibility: place.visibility,
            request,
            created_at: (self.now)(),
            capability_token,
            agent_token: None,
            owner: Some(self.replica.clone()),
            parent_run: place.parent,
        })
    }

    /// Where a run is recorded and for whom: the request's channel, stamped now, for the
    /// request's principal — or, for a child run, its live parent's channel, thread, stamp
    /// and principal, read from the store (never from the request), so an agent cannot start
    /// a run anywhere more visible than its own.
    pub(crate) async fn place(&self, req: &RunRequest) -> Result<Placement, LaunchError> {
        let Some(parent) = &req.parent else {
            return Ok(Placement {
                channel: req.channel.clone(),
                thread_key: req.thread_key.clone(),
                visibility: self.stamp(&req.channel).await,
                user: principal_of(&req.actor).clone(),
                parent: None,
            });
        };
        let parent = self
            .store
            .get_run(parent)
            .await?
            .filter(|p| p.status.is_live())
            .ok_or(LaunchError::ParentEnded)?;
        Ok(Placement {
            channel: parent.channel_id,
            thread_key: parent.thread_key,
            visibility: parent.channel_visibility,
            user: parent.user_id,
            parent: Some(parent.id),
        })
    }

    /// Records a run a command answered, finished at once with its reply.
    pub(crate) async fn record_command_run(
        &self,
        run: CommandRun,
    ) -> Result<RunRecord, LaunchError> {
        let req = &run.request;
        let new = self
            .new_run(req, COMMAND_AGENT.to_owned(), None, req.text.clone(), None)
            .await?;
        let record = self.store.create_run(new).await?;
        let (status, answer, error) = if run.succeeded {
            (RunStatus::Completed, Some(run.reply_text), None)
        } else {
            (RunStatus::Failed, None, Some(run.reply_text))
        };
        let finish = Finish {
            status,
            answer,
            error,
            at: (self.now)(),
        };
        Ok(self.store.finish_run(&record.id, finish).await?)
    }

    /// `@name` at the start of the text, else the explicit agent, else the channel's then the
    /// org's `agent` config value, else the default. Returns the name and the text to send.
    pub(crate) async fn choose_agent(
        &self,
        req: &RunRequest,
    ) -> Result<(AgentName, String), LaunchError> {
        if let Some((word, rest)) = mention(&req.text) {
            return Ok((self.declared(word)?, rest.to_owned()));
        }
        if let Some(name) = &req.agent {
            return Ok((self.declared(name.as_str())?, req.text.clone()));
        }
        for tier in [ConfigTier::Channel(req.channel.clone()), ConfigTier::Org] {
            if let Some(v) = self.store.get_config(&tier, "agent").await? {
                return Ok((self.declared(v.value.trim())?, req.text.clone()));
            }
        }
        let name = self
            .settings
            .default_agent
            .clone()
            .ok_or(LaunchError::NoAgent)?;
        Ok((self.declared(name.as_str())?, req.text.clone()))
    }

    pub(crate) fn declared(&self, word: &str) -> Result<AgentName, LaunchError> {
        AgentName::parse(word)
            .ok()
            .filter(|n| self.agents.contains_key(n))
            .ok_or_else(|| LaunchError::UnknownAgent {
                name: word.chars().take(64).collect(),
            })
    }

    /// The repo's base (its policy read), for a run the actor may use it in; before anything is
    /// recorded. A repo the actor may not use is refused as one that is not configured.
    pub(crate) async fn base_of(
        &self,
        actor: &Actor,
        slug: &RepoSlug,
    ) -> Result<workspace::Base, LaunchError> {
        let resource = self.tool_broker.policy.now().table.repo(slug.clone());
        if !authorize(actor, &Action::RepoUse, &resource).is_allow() {
            return Err(WorkspaceError::NotConfigured(slug.clone()).into());
        }
        let fetching = workspace::Fetching {
            interval: self.settings.repos.fetch_interval,
        };
        Ok(workspace::resolve(
            self.store.as_ref(),
            &self.settings.data_dir,
            &self.mirrors,
            fetching,
            slug,
        )
        .await?)
    }

    /// Limits, the repo's base, stamp, record, the run's workspace, spawn.
    pub(crate) async fn launch(
        self: &Arc<Self>,
        req: RunRequest,
        name: AgentName,
        text: String,
        repo: Option<RepoSlug>,
    ) -> Result<StartedRun, LaunchError> {
        if !self.accepting.load(Ordering::SeqCst) {
            return Err(LaunchError::ShuttingDown);
        }
        let entry = self.agents.get(&name).ok_or(LaunchError::NoAgent)?;
        if req.actor.on_behalf_of.is_some() && entry.undecided_network {
            return Err(LaunchError::Policy(format!(
                "agent {name} has the host's network (network = \"host\", or sandbox = false), which the broker does not decide; an agent may start only agents whose network it decides"
            )));
        }
        let base = match &repo {
            Some(slug) => Some(self.base_of(&req.actor, slug).await?),
            None => None,
        };
        let slot = self
            .slots
            .acquire(principal_of(&req.actor))
            .map_err(LaunchError::Busy)?;
        // The link's token says whether a person asked: only then does it answer asks.
        let capability_token = LinkHolder::of(&req.actor).token(&random_token()?);
        let capability = Some(TokenHash::of(&capability_token));
        let new = self
            .new_run(
                &req,
                name.to_string(),
                repo.clone(),
                text.clone(),
                capability,
            )
            .await?;
        let created_at = new.created_at;
        let run = self.store.create_run(new).await?;
        let agent_token = self.mint_agent_token(&run, entry.timeout, created_at);
        let agent_token = match agent_token {
            Ok(t) => t,
            Err(e) => {
                self.fail_before_start(&run, "the run's agent token could not be made")
                    .await;
                return Err(e.into());
            }
        };
        let place = RunPlace {
            dir: workspace::RunDir::new(&self.settings.data_dir, &run.id),
            base,
        };
        let workspace = if place.base.is_some() || entry.workspace {
            match workspace::make(place.base.as_ref(), &run.id, &place.dir).await {
                Ok(w) => Some(w),
                Err(e) => {
                    self.fail_before_start(&run, &e.public()).await;
                    return Err(e.into());
                }
            }
        } else {
            None
        };
        if let Some(base) = place.base.clone() {
            // Old run branches and a crash's quarantines go off the run's path.
            let (retention, now) = (self.settings.repos.branch_retention, (self.now)());
            tokio::spawn(async move {
                workspace::sweep_quarantines(&base).await;
                if let Some(retention) = retention {
                    workspace::prune(&base, retention, now).await;
                }
            });
        }
        let tools = match &entry.tools {
            None => None,
            Some(profile) => match self
                .tools_for(&run, &name, &req, profile, workspace.as_ref(), &place)
                .await
            {
                Ok(tools) => Some(tools),
                Err(cause) => {
                    // The cause (a path, a store's fault) is the operator's; the run's readers
                    // and its caller are told the sentence.
                    const SAID: &str = "the run's tool policy could not be set up; the operator's log has the details";
                    tracing::warn!(run = %run.id, cause = %cause, "{SAID}");
                    workspace::remove(&place.dir).await;
                    self.fail_before_start(&run, SAID).await;
                    return Err(LaunchError::Policy(SAID.to_owned()));
                }
            },
        };
        let cancel = CancellationToken::new();
        self.live.insert(
            LiveRun {
                facts: run.facts(),
                agent: run.agent.clone(),
                surface: run.surface,
                status: RunStatus::Queued,
                created_at,
            },
            cancel.clone(),
        );
        tracing::info!(run = %run.id, channel = %run.channel_id, agent = %run.agent, "run started");
        let (done_tx, done) = watch::channel(None);
        let job = AgentJob {
            run_id: run.id.clone(),
            agent: name.clone(),
            request: text,
            memory: agents::MemoryBlock::default(),
            repo,
            workspace,
            mcp_url: self.mcp_url.get().cloned(),
            agent_token,
            tools,
        };
        let this = self.clone();
        let record = run.clone();
        let requester = req.actor;
        // A run is a trace of its own (it outlives the request that started it), linked to
        // the request: its back end and store writes are its children.
        let span = tracing::info_span!(
            parent: None,
            "run",
            trace_id = %commands::trace::new_trace_id(),
            run = %run.id,
            agent = %run.agent,
            channel = %run.channel_id,
            surface = run.surface.as_str(),
            status = tracing::field::Empty,
        );
        span.follows_from(tracing::Span::current());
        tokio::spawn(
            async move {
                let finished = this.clone().drive(record, name, job, cancel, place).await;
                drop(slot);
                // Counted before the reply goes out, so whoever waits for the reply and then for
                // reflections cannot miss this one.
                let reflection = finished
                    .clone()
                    .filter(|r| reflect::reflects(r, &requester))
                    .map(|r| (r, this.reflections.enter()));
                let _ = done_tx.send(finished);
                if let Some((run, _in_flight)) = reflection {
                    let notes = reflect::reflect_run(
                        &this.memory,
                        this.store.as_ref(),
                        &run,
                        &requester,
                        this.now,
                    )
                    .await;
                    // What the person asked to keep and could not be: said on the run, where
                    // they read it (and `switchboard ask` shows it once reflection is done).
                    for note in notes {
                        this.record_event(&run, "memory", &note).await;
                    }
                }
            }
            .instrument(span),
        );
        Ok(crate::launch_error::started(run, capability_token, done))
    }

    /// The channel's visibility, bounded by the directory timeout; `unknown` past it.
    pub(crate) async fn stamp(&self, channel: &ChannelId) -> ChannelVisibility {
        let timeout = self.settings.channel_directory_timeout;
        match tokio::time::timeout(timeout, self.directory.info(channel)).await {
            Ok(v) => v,
            Err(_) => {
                tracing::warn!(target: "authz", channel = %channel, "[authz] channel directory timed out");
                ChannelVisibility::Unknown
            }
        }
    }

    pub(crate) fn mint_agent_token(
        &self,
        run: &RunRecord,
        timeout: Duration,
        now: Timestamp,
    ) -> Result<String, TokenError> {
        let now_secs = u64::try_from(now.micros() / 1_000_000).unwrap_or(0);
        let life = timeout
            .saturating_add(self.settings.agent_token_slack)
            .as_secs();
        self.tokens.mint(&AgentClaims {
            run: run.id.to_string(),
            agent: run.agent.clone(),
            sub: run.user_id.to_string(),
            exp: now_secs.saturating_add(life),
        })
    }

    /// The broker's gate for a run of a tool-calling agent, in the run's own workspace, under
    /// the policy read from its repo's base (none without a repo).
    pub(crate) async fn tools_for(
        &self,
        run: &RunRecord,
        name: &AgentName,
        req: &RunRequest,
        profile: &ToolProfile,
        workspace: Option<&agents::Workspace>,
        place: &RunPlace,
    ) -> Result<agents::tools::Tools, String> {
        let workspace =
            workspace.ok_or_else(|| "a tool-calling agent's run has no workspace".to_owned())?;
        // A child run is asked for by its parent's agent: the person it acts for is the parent's.
        let principal = req.actor.principal();
        // Only a person can be asked: a run for a machine (a schedule, a bearer token, an
        // Access service token) is refused at an ask at once.
        let person = principal
            .is_person()
            .then(|| self.tool_broker.person.clone());
        let no_policy = broker::file::ProjectPolicy::default();
        let project = place.base.as_ref().map_or(&no_policy, |b| &b.policy);
        let for_run = tools::ForRun {
            run,
            agent: name,
            principal,
            profile,
            workspace,
            project,
            person,
            run_rules: &req.policy_rules,
            now: self.now,
        };
        tools::gate_for(
            &self.tool_broker,
            self.reviewer.clone(),
            self.store.as_ref(),
            for_run,
        )
        .await
    }
}

/// `@name rest` → (`name`, `rest`).
fn mention(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start().strip_prefix('@')?;
    let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
    let (name, tail) = rest.split_at(end);
    (!name.is_empty()).then(|| (name, tail.trim_start()))
}

#[cfg(test)]
mod tests {
    use super::mention;

    #[test]
    fn mentions_name_the_agent_and_leave_the_rest() {
        assert_eq!(mention("@coding fix it"), Some(("coding", "fix it")));
        assert_eq!(mention("  @echo"), Some(("echo", "")));
        assert_eq!(mention("hello @coding"), None);
        assert_eq!(mention("@ x"), None);
    }
}
