//! The ports: what commands and surfaces need from the part that runs agents, as small traits.
//! `dispatch` implements them and the server wires them; nothing here knows how a run is run.
//!
//! - [`RunLauncher`]: start a run, start a repo run, stop a run live in this process, record
//!   a run a command answered (a schedule's firing).
//! - [`LiveFeed`]: the live runs a viewer may read, now and as they change.
//! - [`AgentTokenCheck`]: which run an agent token names, when its signature and expiry hold.
//!
//! Invariants each implementation keeps: a launcher asks `authorize` before it starts
//! anything (a refusal starts and records nothing); a feed hands a viewer nothing about a run
//! its `predicate_for(runs:read)` does not match; a token check never accepts a token it did
//! not sign or one past its expiry.

use std::fmt;

use authz_core::{Actor, AgentName, BoxFuture, ChannelId, RepoSlug, RunFacts, RunId, Surface};
use serde_json::Value;
use store::{RunRecord, RunStatus, Timestamp};

use crate::deny::Refusal;

/// The agent `repo test|build` are admitted on (`agent{coding}`: `agent:run:coding` or
/// `repo:exec`) and run.
pub const CODING_AGENT: &str = "coding";

/// One of a run's own agent policy rules as its asker wrote it (`switchboard ask
/// --policy-rule "<action>=<decision>"`). The broker reads it when the run's gate is built
/// for an agent that calls tools (the CLI checks it first, so its error comes before anything
/// starts); a rule the broker cannot read fails that run before its agent starts, never
/// widens it. An agent that calls no tools has no gate, so no rule applies to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRule(pub String);

/// Who asks for a run, from where, and what.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub actor: Actor,
    pub surface: Surface,
    /// The run channel: where the run is recorded, which decides who may read it.
    pub channel: ChannelId,
    pub thread_key: Option<String>,
    pub text: String,
    /// An agent chosen outside the text (`ask --agent NAME`); `@name` in the text wins.
    pub agent: Option<AgentName>,
    /// The live run whose agent asks (MCP `ask` with an agent token). The launcher records
    /// the new run as its child: in the parent's channel, with the parent's stamp, for the
    /// parent's principal — never somewhere more visible.
    pub parent: Option<RunId>,
    /// This run's own agent policy rules (`switchboard ask --policy-rule`): they answer
    /// instead of the project's for their actions, under the org's ceiling, and a child run
    /// never inherits them.
    pub policy_rules: Vec<RunRule>,
    /// The repo the run works in (`ask --repo`, MCP `ask` with `repo`, `in <owner/name>:`
    /// in the text, else the channel's `repo.default`), already authorized `repo:use` for the
    /// actor; the launcher asks again and makes the run's workspace from the repo's base.
    pub repo: Option<RepoSlug>,
}

/// The branch a run in a repo keeps its changes on, in the repo's repository:
/// `switchboard/<run id>`, on top of the commit the run started from.
pub fn run_branch(run: &RunId) -> String {
    format!("switchboard/{run}")
}

/// A tool call waiting for a person's answer (the broker's ask under `serve`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingApproval {
    /// Unguessable; names the approval in its answer's URL.
    pub id: String,
    pub run: RunId,
    pub action: String,
    pub tool: String,
    /// The call's arguments as the model wrote them (agent text: escape before showing).
    pub arguments: String,
}

/// Who answers an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answerer<'a> {
    /// Whoever holds the run's capability link, when that link was made for a person (the
    /// one who started the run: a Slack member, an Access browser session, the local
    /// operator). A link made for a machine or an agent never answers (it watches and stops
    /// the run): a surface never builds this from one ([`crate::identity::Capability::answers`]).
    Capability,
    /// A signed-in actor; counts only when it is the run's principal.
    Actor(&'a authz_core::ActorId),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    #[error("no such approval is waiting (it was answered, timed out, or its run ended)")]
    NotPending,
    #[error("only the person this run acts for may answer")]
    NotThePrincipal,
    #[error("the answer could not be recorded; nothing changed, try again")]
    Unrecorded,
}

/// The asks waiting for a person, and their answers (the run page's Approve / Deny form,
/// Slack's buttons), from whichever replica the answer reaches.
pub trait ApprovalDesk: Send + Sync {
    /// The open asks of `run` that `by` may answer (none when they cannot be read).
    fn pending<'a>(
        &'a self,
        run: &'a RunId,
        by: Answerer<'a>,
    ) -> BoxFuture<'a, Vec<PendingApproval>>;
    /// A watch on new asks made in this process, on any run. A surface that offers asks as
    /// they come watches first, then reads `pending`, so none falls in between.
    fn asked(&self) -> Box<dyn AskedWatch>;
    fn answer<'a>(
        &'a self,
        run: &'a RunId,
        id: &'a str,
        by: Answerer<'a>,
        approve: bool,
    ) -> BoxFuture<'a, Result<(), ApprovalError>>;
}

/// Hears of new asks ([`ApprovalDesk::asked`]).
pub trait AskedWatch: Send {
    /// Resolves `true` once a new ask has waited since the watch began or since the last
    /// `true`; `false` when no ask can ever wait on this desk.
    fn changed(&mut self) -> BoxFuture<'_, bool>;
}

/// The watch of a desk where nothing ever waits.
struct NoAsks;

impl AskedWatch for NoAsks {
    fn changed(&mut self) -> BoxFuture<'_, bool> {
        Box::pin(std::future::ready(false))
    }
}

/// No asks wait anywhere (the CLI answers its own on the terminal).
pub struct NoApprovals;

impl ApprovalDesk for NoApprovals {
    fn pending<'a>(
        &'a self,
        _run: &'a RunId,
        _by: Answerer<'a>,
    ) -> BoxFuture<'a, Vec<PendingApproval>> {
        Box::pin(std::future::ready(Vec::new()))
    }

    fn asked(&self) -> Box<dyn AskedWatch> {
        Box::new(NoAsks)
    }

    fn answer<'a>(
        &'a self,
        _run: &'a RunId,
        _id: &'a str,
        _by: Answerer<'a>,
        _approve: bool,
    ) -> BoxFuture<'a, Result<(), ApprovalError>> {
        Box::pin(std::future::ready(Err(ApprovalError::NotPending)))
    }
}

/// `repo test` or `repo build`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepoTask {
    Test,
    Build,
}

impl RepoTask {
    /// What the coding agent is asked to do.
    pub fn prompt(self, slug: &RepoSlug) -> String {
        match self {
            RepoTask::Test => format!(
                "Run the test suite of {slug} in this workspace and report what passed and what failed."
            ),
            RepoTask::Build => format!(
                "Build {slug} in this workspace and report whether it built, with the errors if not."
            ),
        }
    }
}

/// Which limit was full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// This actor already has `limit` live runs.
    Actor { limit: usize },
    /// The process already has `limit` live runs.
    Global { limit: usize },
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Busy::Actor { limit } => write!(f, "you already have {limit} runs going"),
            Busy::Global { limit } => write!(f, "{limit} runs are already going"),
        }
    }
}

/// Why nothing was started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The admission denied; the registry audits it and answers 🚫.
    #[error("not permitted")]
    Refused(Box<Refusal>),
    /// No such agent (the reply names only the agents the caller may run).
    #[error("there is no agent `{name}`")]
    UnknownAgent { name: String },
    #[error(
        "no agent was named and none is the default; set agents.default in the config or start with @<agent>"
    )]
    NoAgent,
    #[error("no agent `{0}` is declared; declare [agents.{0}] (the agent repo test|build run)")]
    NoCodingAgent(AgentName),
    #[error("busy: {0}; try again shortly")]
    Busy(Busy),
    #[error("the server is shutting down; try again shortly")]
    ShuttingDown,
    /// The store could not be reached or had no room to record the run; nothing was started.
    /// `reason` is the store's short token (`database:13`, `pool-timeout`, …), for the operator
    /// log only.
    #[error(
        "the store could not record the run (unreachable, or its disk is full); nothing was started, try again shortly"
    )]
    StoreUnavailable { reason: String },
    /// A child run was asked for from a run that has ended.
    #[error("the run this agent acts in has ended; a run can only be started from a live one")]
    ParentEnded,
    /// The repo's workspace could not be had: one sentence safe to show any caller (no path
    /// on the server, no clone URL, no program's own words; the launcher logs those).
    #[error("{0}")]
    Workspace(String),
    /// The run's tool policy could not be read (its project's policy file, its grants, its
    /// ancestors' promises); the text names the file and fault. The run is recorded failed.
    #[error("{0}")]
    Policy(String),
    /// The run could not be recorded or its tokens made; `detail` is for the operator log.
    #[error("the run could not be started; the operator log has the details")]
    Failed { detail: String },
}

/// A store fault while starting a run: one the store says may pass (unreachable, its disk
/// full) is `StoreUnavailable` with its short token; any other is `Failed`, its text for the
/// operator log only.
impl From<store::StoreError> for LaunchError {
    fn from(e: store::StoreError) -> Self {
        if e.is_transient() {
            LaunchError::StoreUnavailable { reason: e.token() }
        } else {
            LaunchError::Failed {
                detail: format!("the run could not be recorded: {e}"),
            }
        }
    }
}

/// A run that started: its record, the capability token (for the requester only), and its end.
pub struct StartedRun {
    run: RunRecord,
    capability_token: String,
    finished: BoxFuture<'static, Option<RunRecord>>,
}

impl StartedRun {
    /// For launchers: the record as created, the token handed to the requester, and a future
    /// of the final record (`None` if the run's task vanished).
    pub fn new(
        run: RunRecord,
        capability_token: String,
        finished: BoxFuture<'static, Option<RunRecord>>,
    ) -> Self {
        StartedRun {
            run,
            capability_token,
            finished,
        }
    }

    pub fn id(&self) -> &RunId {
        &self.run.id
    }

    pub fn agent(&self) -> &str {
        &self.run.agent
    }

    pub fn channel(&self) -> &ChannelId {
        &self.run.channel_id
    }

    /// Opens the run's live page, stream and stop without an identity; only for the requester.
    pub fn capability_token(&self) -> &str {
        &self.capability_token
    }

    /// The reply to a started run.
    pub fn reply(&self) -> crate::Reply {
        started_reply(&self.run)
    }

    /// The capability link under `public_url`: the run's page, stream and stop, with no
    /// identity, while the run is live. Only for whoever started the run.
    pub fn link(&self, public_url: &str) -> String {
        format!(
            "{}/runs/{}?token={}",
            public_url.trim_end_matches('/'),
            self.run.id,
            self.capability_token
        )
    }

    /// The reply to a started run, for the one who started it: with `public_url`, its data
    /// carries `"link"` and its text a line with the link.
    pub fn reply_with_link(&self, public_url: Option<&str>) -> crate::Reply {
        let mut reply = self.reply();
        if let Some(base) = public_url {
            let link = self.link(base);
            reply.text.push_str(&format!("\nFollow it live: {link}"));
            if let Some(data) = reply.data.as_object_mut() {
                data.insert("link".to_owned(), Value::String(link));
            }
        }
        reply
    }

    /// Waits for the run's end.
    pub async fn finished(self) -> Option<RunOutcome> {
        self.finished.await.map(RunOutcome)
    }
}

/// A finished run as a surface shows it.
#[derive(Debug, Clone)]
pub struct RunOutcome(pub(crate) RunRecord);

impl RunOutcome {
    pub fn id(&self) -> &RunId {
        &self.0.id
    }

    pub fn status(&self) -> RunStatus {
        self.0.status
    }

    pub fn answer(&self) -> Option<&str> {
        self.0.answer.as_deref()
    }

    /// Its answer, else its status and error.
    pub fn text(&self) -> String {
        outcome_text(&self.0)
    }

    /// What `ask --json` prints and `POST /ingress?wait=` answers.
    pub fn json(&self) -> Value {
        outcome_json(&self.0)
    }
}

/// A run as data: a started run's reply, what `ask --json` prints, what `POST /ingress?wait=`
/// answers.
fn outcome_json(run: &RunRecord) -> Value {
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
fn outcome_text(run: &RunRecord) -> String {
    match (&run.answer, &run.error) {
        (Some(answer), _) => answer.clone(),
        (None, Some(error)) => format!("run {} {}: {error}", run.id, run.status),
        (None, None) => format!("run {} {}", run.id, run.status),
    }
}

/// The reply to a started run.
fn started_reply(run: &RunRecord) -> crate::Reply {
    crate::Reply::ok(
        crate::reply_texts::run_started(run.id.as_str(), &run.agent, run.channel_id.as_str()),
        outcome_json(run),
    )
}

/// A command's answer, recorded as a run (a schedule's firing).
#[derive(Debug, Clone)]
pub struct CommandRun {
    /// The command text, recorded as the run's request.
    pub request: RunRequest,
    /// The reply's text: the run's answer when it succeeded, its error otherwise.
    pub reply_text: String,
    pub succeeded: bool,
}

/// Starts and stops agent runs.
pub trait RunLauncher: Send + Sync {
    /// Starts a run for text that is not a command: agent choice, `authorize(actor,
    /// agent:run:<name>, agent{name})`, limits, the stamp, the record, the back end.
    fn start(&self, req: RunRequest) -> BoxFuture<'_, Result<StartedRun, LaunchError>>;
    /// Starts the coding agent in a repo's workspace. The launcher asks the admission again
    /// (`repo:exec` on `agent{coding}`); the caller has already authorized `repo:use`.
    fn start_repo(
        &self,
        req: RunRequest,
        repo: RepoSlug,
        task: RepoTask,
    ) -> BoxFuture<'_, Result<StartedRun, LaunchError>>;
    /// Cancels a run live in this process; false when it is not live here.
    fn stop_here(&self, id: &RunId) -> bool;
    /// Records a run that a command answered, stamped like any other, already finished.
    fn record_command_run(&self, run: CommandRun) -> BoxFuture<'_, Result<RunRecord, LaunchError>>;
}

/// A live run as viewers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveRun {
    pub facts: RunFacts,
    pub agent: String,
    pub surface: Surface,
    pub status: RunStatus,
    pub created_at: Timestamp,
}

/// One change to the live set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveUpdate {
    /// A run appeared or changed status.
    Upsert(LiveRun),
    /// A run emitted an event (already sanitised and recorded).
    Event {
        run: RunFacts,
        seq: i64,
        kind: String,
        body: String,
    },
    /// A run finished and left the live set.
    Finished {
        run: RunFacts,
        status: RunStatus,
        answer: Option<String>,
        error: Option<String>,
    },
    /// This subscriber fell behind and missed this many updates (it names no run).
    Lagged(u64),
}

impl LiveUpdate {
    /// The run an update is about (`Lagged` is about none).
    pub fn run(&self) -> Option<&RunFacts> {
        match self {
            LiveUpdate::Upsert(r) => Some(&r.facts),
            LiveUpdate::Event { run, .. } | LiveUpdate::Finished { run, .. } => Some(run),
            LiveUpdate::Lagged(_) => None,
        }
    }
}

/// One viewer's feed of live updates, already filtered for it.
pub trait LiveStream: Send {
    /// The next update this viewer may see; `None` when the feed is gone.
    fn recv(&mut self) -> BoxFuture<'_, Option<LiveUpdate>>;
    /// The next update already waiting, without waiting.
    fn try_next(&mut self) -> Option<LiveUpdate>;
}

/// The live runs, per viewer. A run's end is one step: every run in a snapshot taken after
/// subscribing gets its `Finished` on that subscription, and a run gone from a snapshot has
/// its `Finished` already in every subscription taken before. So a live view subscribes
/// first, then takes its snapshot, and never shows a run that has ended as live.
pub trait LiveFeed: Send + Sync {
    /// The live runs `viewer` may read, newest first.
    fn snapshot(&self, viewer: &Actor) -> Vec<LiveRun>;
    /// Updates about the runs `viewer` may read, from now on.
    fn subscribe(&self, viewer: &Actor) -> Box<dyn LiveStream>;
    /// Updates about one run, from now on, for its capability token's holder (no actor: the
    /// caller has already checked the token).
    fn subscribe_run(&self, run: &RunId) -> Box<dyn LiveStream>;
}

/// Run-scoped agent tokens.
pub trait AgentTokenCheck: Send + Sync {
    /// The run a token names, when its signature and expiry hold; `None` for anything else.
    fn run_of(&self, token: &str) -> Option<RunId>;
}
