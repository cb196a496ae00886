//! # dispatch: a run's life
//!
//! What it is: the implementation of the ports `commands` defines for running agents
//! ([`RunLauncher`], [`LiveFeed`], [`AgentTokenCheck`]): what happens to text that is not a
//! command. In order:
//! choose the agent (`@name`, the channel's then the org's `agent` config value, the
//! configured default); `authorize(actor, agent:run:<name>, agent{name})`; take a concurrency
//! slot; stamp the channel's visibility from the [`ChannelDirectory`], bounded by
//! `channel_directory_timeout`; record the run with a capability token and a run-scoped agent
//! token; run the back end; record and publish its events; finish with answer, status and
//! friction. Also `repo test|build` runs (their admission asked again here), a command's
//! answer recorded as a run, `runs stop` (in this process, and stop requests other processes
//! wrote to the store for runs this one owns), the live-runs registry, and shutdown.
//!
//! A workspace per run ([`workspace`]): a run in a repo (`repo:use` asked again here) starts
//! from the repo's base, whose policy is read before the run's own working tree and
//! repository are made; an agent that works in a directory without a repo gets an empty one
//! of its own. When the run ends, what it changed is kept on its branch and the directory is
//! removed.
//!
//! What it must never do: widen anything on error. A directory that is slow or fails stamps
//! `unknown` (never a guess); an admission that is not `Allow` starts nothing and records
//! nothing; a full limit starts nothing; a store that cannot record the run starts nothing.
//! It never logs a token, a request or agent text — only run ids, channel ids and agents.
//!
//! Invariants:
//! - A run is recorded before its back end starts and reaches a terminal status exactly once
//!   (completed, failed, stopped, or interrupted by shutdown); a crash leaves it live for the
//!   store's recovery to tombstone, never a ghost.
//! - Live-run updates reach a viewer only through a [`Subscription`], filtered by `matches`.
//! - The concurrency slot is held for the run's whole life and given back when it ends.

mod approvals;
mod fanout;
mod limits;
mod live;
mod reflect;
mod tokens;
mod tools;
pub mod workspace;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agents::tools::{Approver, NobodyToAsk};
use agents::{AgentBackend, AgentJob, AgentOutcome, CancellationToken, EventSink, OutputCaps};
use agents::{Sanitizer, SinkItem};
use authz_core::{
    Action, Actor, ActorId, AgentName, BoxFuture, ChannelDirectory, ChannelId, ChannelVisibility,
    CommandGroup, ConfigTier, Effect, RepoSlug, Resource, RunId, authorize,
};
use commands::identity::LinkHolder;
use commands::{
    AgentTokenCheck, CODING_AGENT, CommandRun, LaunchError, LiveFeed, LiveRun, LiveStream,
    LiveUpdate, Refusal, RepoTask, RunLauncher, RunRequest, StartedRun,
};
use memory::{Memory, MemorySettings};
use store::{Finish, Friction, NewRun, ReplicaId, RunRecord, RunStatus, Store, StoreError};
use store::{Timestamp, TokenHash};
use tokio::sync::watch;
use tracing::Instrument;

pub use approvals::PendingApprovals;
pub use limits::{Busy, Slots};
pub use live::{LiveRuns, StopReason, Subscription};
pub use reflect::{BackendModel, PendingReflections, ReviewerAgent};
pub use tokens::{AgentClaims, AgentTokens, TokenError, random_token};
pub use tools::{ToolBroker, ToolProfile};
pub use workspace::{RepoSettings, WorkspaceError, sweep as sweep_workspaces};

/// An agent the dispatcher can run.
pub struct AgentEntry {
    pub backend: Arc<dyn AgentBackend>,
    pub timeout: Duration,
    pub caps: OutputCaps,
    /// Set for an agent whose back end calls tools (`openai`): every call then passes the
    /// broker's gate, built for each run.
    pub tools: Option<ToolProfile>,
    /// Whether the back end works in a directory (`command`, or `tools` set): each of its
    /// runs gets one of its own. A run in a repo gets its workspace whatever this says.
    pub workspace: bool,
}

/// The dispatcher's settings (from `[agents]` and `[server]`).
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    pub default_agent: Option<AgentName>,
    pub max_concurrent: usize,
    pub max_per_actor: usize,
    pub channel_directory_timeout: Duration,
    /// Repo clones and the scratch directory of command agents.
    pub data_dir: PathBuf,
    /// How long an agent token stays valid past the agent's timeout.
    pub agent_token_slack: Duration,
    /// How long a cancelled back end may take to return before it is abandoned.
    pub cancel_grace: Duration,
    /// `[memory]`: the context block's bounds, the extractor, the reflection bound.
    pub memory: MemorySettings,
    /// The agent whose back end the `model` extractor asks.
    pub memory_model: Option<AgentName>,
    /// `[repos]`: how URL repos are refetched and run branches kept.
    pub repos: RepoSettings,
}

/// `[agents] max_concurrent` when unset: live runs at once in this process.
pub const DEFAULT_MAX_CONCURRENT: usize = 16;
/// `[agents] max_per_actor` when unset: live runs at once per actor.
pub const DEFAULT_MAX_PER_ACTOR: usize = 4;
/// `[agents] channel_directory_timeout_ms` when unset: how long a run waits for the channel
/// directory to say what its channel is (past it the run is stamped unknown and proceeds).
pub const DEFAULT_CHANNEL_DIRECTORY_TIMEOUT: Duration = Duration::from_millis(1500);

impl Default for DispatchSettings {
    fn default() -> Self {
        DispatchSettings {
            default_agent: None,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            max_per_actor: DEFAULT_MAX_PER_ACTOR,
            channel_directory_timeout: DEFAULT_CHANNEL_DIRECTORY_TIMEOUT,
            data_dir: PathBuf::from("."),
            agent_token_slack: Duration::from_secs(300),
            cancel_grace: Duration::from_secs(10),
            memory: MemorySettings::default(),
            memory_model: None,
            repos: RepoSettings::default(),
        }
    }
}

/// Why nothing was started, inside the dispatcher; [`LaunchError`] at the port.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("not permitted")]
    Refused(Box<Refusal>),
    #[error("there is no agent `{0}`")]
    UnknownAgent(String),
    #[error("no agent was named and none is the default")]
    NoAgent,
    #[error("no agent `{0}` is declared")]
    NoCodingAgent(AgentName),
    #[error("busy: {0}")]
    Busy(Busy),
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("the parent run is not live")]
    ParentEnded,
    #[error("{0}")]
    Workspace(#[from] WorkspaceError),
    #[error("the run could not be recorded: {0}")]
    Store(#[from] StoreError),
    #[error("the run's tokens could not be made: {0}")]
    Token(#[from] TokenError),
    #[error("{0}")]
    Policy(String),
}

impl From<DispatchError> for LaunchError {
    fn from(e: DispatchError) -> Self {
        match e {
            DispatchError::Refused(r) => LaunchError::Refused(r),
            DispatchError::UnknownAgent(name) => LaunchError::UnknownAgent { name },
            DispatchError::NoAgent => LaunchError::NoAgent,
            DispatchError::NoCodingAgent(name) => LaunchError::NoCodingAgent(name),
            DispatchError::Busy(b) => LaunchError::Busy(b),
            DispatchError::ShuttingDown => LaunchError::ShuttingDown,
            DispatchError::ParentEnded => LaunchError::ParentEnded,
            DispatchError::Workspace(w) => LaunchError::Workspace(w.to_string()),
            DispatchError::Policy(why) => LaunchError::Policy(why),
            DispatchError::Store(e) if e.is_transient() => {
                LaunchError::StoreUnavailable { reason: e.token() }
            }
            e @ (DispatchError::Store(_) | DispatchError::Token(_)) => LaunchError::Failed {
                detail: e.to_string(),
            },
        }
    }
}

/// A started run, inside the dispatcher: its record, the requester's capability token, and
/// the final record once it ends.
pub struct Started {
    pub run: RunRecord,
    pub capability_token: String,
    pub done: watch::Receiver<Option<RunRecord>>,
}

impl Started {
    /// Waits for the run's final record (`None` if its task vanished).
    pub async fn finished(mut self) -> Option<RunRecord> {
        loop {
            if let Some(r) = self.done.borrow().clone() {
                return Some(r);
            }
            if self.done.changed().await.is_err() {
                return self.done.borrow().clone();
            }
        }
    }

    fn into_port(self) -> StartedRun {
        let run = self.run.clone();
        let token = self.capability_token.clone();
        StartedRun::new(run, token, Box::pin(self.finished()))
    }
}

/// How long keeping a run's changes on its branch may take, in all.
const KEEP_TIMEOUT: Duration = Duration::from_secs(300);

/// What a command run records as its agent: no agent name can be written so.
pub const COMMAND_AGENT: &str = "(command)";

/// The dispatcher. Cheap to clone: every clone is the same dispatcher.
#[derive(Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    directory: Arc<dyn ChannelDirectory>,
    agents: BTreeMap<AgentName, AgentEntry>,
    settings: DispatchSettings,
    live: Arc<LiveRuns>,
    slots: Slots,
    replica: ReplicaId,
    tokens: AgentTokens,
    sanitizer: Arc<Sanitizer>,
    accepting: AtomicBool,
    now: fn() -> Timestamp,
    /// Where agents reach `/mcp`, once the server says (`set_mcp_url`); unset while `/mcp`
    /// is off.
    mcp_url: OnceLock<String>,
    memory: Memory,
    reflections: Arc<PendingReflections>,
    tool_broker: ToolBroker,
    /// Asked for `agent_review` (built from `tool_broker.reviewer`).
    reviewer: Arc<dyn Approver>,
    /// One fetch of a URL repo's mirror at a time.
    mirrors: workspace::MirrorLocks,
}

/// Everything a dispatcher is built from.
pub struct DispatcherParts {
    pub store: Arc<dyn Store>,
    pub directory: Arc<dyn ChannelDirectory>,
    pub agents: BTreeMap<AgentName, AgentEntry>,
    pub settings: DispatchSettings,
    pub replica: ReplicaId,
    pub tokens: AgentTokens,
    /// The process's configured secrets, redacted from agent text by value.
    pub secrets: Vec<String>,
    pub now: fn() -> Timestamp,
    /// The org's tool policy and who answers asks.
    pub tool_broker: ToolBroker,
}

impl Dispatcher {
    pub fn new(parts: DispatcherParts) -> Self {
        let slots = Slots::new(parts.settings.max_concurrent, parts.settings.max_per_actor);
        let sanitizer = Arc::new(Sanitizer::new(parts.secrets.clone()));
        let memory = memory_of(&parts, &sanitizer);
        let reviewer = reviewer_of(&parts, &sanitizer);
        let inner = Inner {
            store: parts.store,
            directory: parts.directory,
            agents: parts.agents,
            settings: parts.settings,
            live: Arc::new(LiveRuns::default()),
            slots,
            replica: parts.replica,
            tokens: parts.tokens,
            sanitizer,
            accepting: AtomicBool::new(true),
            now: parts.now,
            mcp_url: OnceLock::new(),
            memory,
            reflections: Arc::default(),
            tool_broker: parts.tool_broker,
            reviewer,
            mirrors: workspace::MirrorLocks::default(),
        };
        Dispatcher {
            inner: Arc::new(inner),
        }
    }

    /// Where agents reach `/mcp` (`SWITCHBOARD_MCP_URL`), once the server knows its address.
    /// The first value set stays: a configured URL wins over the bound address.
    pub fn set_mcp_url(&self, url: String) {
        let _ = self.inner.mcp_url.set(url);
    }

    pub fn live(&self) -> &LiveRuns {
        &self.inner.live
    }

    /// Fans live-run updates out to the other replicas sharing the store, and theirs in, until
    /// `stop` (Postgres `LISTEN/NOTIFY`). Without a fan-out (SQLite, memory) nothing runs.
    pub fn spawn_fanout(&self, stop: CancellationToken) -> Vec<tokio::task::JoinHandle<()>> {
        match self.inner.store.live_fanout() {
            Some(fanout) => fanout::spawn(
                self.inner.live.clone(),
                fanout,
                self.inner.replica.clone(),
                stop,
            ),
            None => vec![],
        }
    }

    pub fn replica(&self) -> &ReplicaId {
        &self.inner.replica
    }

    /// Starts a run for text that is not a command.
    pub async fn start(&self, req: RunRequest) -> Result<Started, DispatchError> {
        let (name, text) = self.inner.choose_agent(&req).await?;
        admit(&req.actor, Action::AgentRun(name.clone()), name.clone())?;
        let repo = req.repo.clone();
        self.inner.launch(req, name, text, repo).await
    }

    /// Starts the coding agent in a repo's workspace. Its admission (`repo:exec` on
    /// `agent{coding}`) is asked again here, so no caller can start one without it; the
    /// caller has authorized `repo:use` on the repo.
    pub async fn start_repo(
        &self,
        req: RunRequest,
        slug: RepoSlug,
        task: RepoTask,
    ) -> Result<Started, DispatchError> {
        let name = AgentName::parse(CODING_AGENT)
            .map_err(|_| DispatchError::UnknownAgent(CODING_AGENT.to_owned()))?;
        admit(
            &req.actor,
            Action::Command(CommandGroup::Repo, Effect::Exec),
            name.clone(),
        )?;
        if !self.inner.agents.contains_key(&name) {
            return Err(DispatchError::NoCodingAgent(name));
        }
        let text = task.prompt(&slug);
        self.inner.launch(req, name, text, Some(slug)).await
    }

    /// Cancels a run live in this process (`runs stop`); false when it is not live here.
    pub fn stop(&self, id: &RunId) -> bool {
        self.inner.live.cancel(id, StopReason::Stop)
    }

    /// Stops the runs of this process that someone asked to stop through the store (`runs
    /// stop` from another process). Returns how many it cancelled.
    pub async fn stop_requested(&self) -> Result<usize, StoreError> {
        if self.inner.live.is_empty() {
            return Ok(0);
        }
        let ids = self.inner.store.stop_requests(&self.inner.replica).await?;
        Ok(ids
            .iter()
            .filter(|id| self.inner.live.cancel(id, StopReason::Stop))
            .count())
    }

    /// Checks for stop requests every `every` until `stop`; a request is honoured within one
    /// period.
    pub fn watch_stop_requests(
        &self,
        every: Duration,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = stop.cancelled() => return,
                }
                match this.stop_requested().await {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!(count = n, "stopped runs asked to stop from another process")
                    }
                    Err(e) => tracing::warn!(error = %e.token(), "reading stop requests failed"),
                }
            }
        })
    }

    /// Records a run that a command answered: stamped like any other, finished at once.
    pub async fn record_command_run(&self, run: CommandRun) -> Result<RunRecord, DispatchError> {
        self.inner.record_command_run(run).await
    }

    /// Waits up to `within` for this process's reflections in flight (`switchboard ask`
    /// keeps what its run said); true when none is left.
    pub async fn settle_reflections(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        self.inner.reflections.settle(deadline).await
    }

    /// Reflections in flight in this process.
    pub fn pending_reflections(&self) -> usize {
        self.inner.reflections.pending()
    }

    /// Stops accepting runs, lets live ones finish until `grace` passes, then cancels the rest
    /// (they end `interrupted`) and waits up to `settle` for them to be recorded. Reflections
    /// of runs that finished get what is left of the grace. Returns how many runs were
    /// cancelled.
    pub async fn shutdown(&self, grace: Duration, settle: Duration) -> usize {
        let inner = &self.inner;
        inner.accepting.store(false, Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + grace;
        let mut cancelled = 0;
        if !inner.live.wait_empty(deadline).await {
            cancelled = inner.live.cancel_all(StopReason::Shutdown);
            inner
                .live
                .wait_empty(tokio::time::Instant::now() + settle)
                .await;
        }
        if !inner.reflections.settle(deadline).await {
            tracing::warn!(
                target: "memory",
                pending = inner.reflections.pending(),
                "[memory] reflections still running at the end of the grace were abandoned"
            );
        }
        cancelled
    }
}

/// Memory over the dispatcher's store, with the `model` extractor's back end when one is
/// named and declared (config validation guarantees it is; without it the extractor fails
/// closed and writes nothing).
fn memory_of(parts: &DispatcherParts, sanitizer: &Arc<Sanitizer>) -> Memory {
    let store: Arc<dyn store::MemoryStore> = parts.store.clone();
    let memory = Memory::new(store, parts.settings.memory.clone()).with_clock(parts.now);
    match model_agent(parts, parts.settings.memory_model.as_ref(), sanitizer) {
        Some(model) => memory.with_model(Arc::new(model)),
        None => memory,
    }
}

/// The broker's reviewer: the `[agent_policy] reviewer` agent when it is declared; else
/// nobody, and every `agent_review` is refused.
fn reviewer_of(parts: &DispatcherParts, sanitizer: &Arc<Sanitizer>) -> Arc<dyn Approver> {
    match model_agent(parts, parts.tool_broker.reviewer.as_ref(), sanitizer) {
        Some(model) => Arc::new(ReviewerAgent(model)),
        None => Arc::new(NobodyToAsk),
    }
}

/// A declared agent asked one prompt at a time (the memory model, the reviewer).
fn model_agent(
    parts: &DispatcherParts,
    name: Option<&AgentName>,
    sanitizer: &Arc<Sanitizer>,
) -> Option<reflect::BackendModel> {
    let name = name?;
    let entry = parts.agents.get(name)?;
    Some(reflect::BackendModel {
        agent: name.clone(),
        backend: entry.backend.clone(),
        caps: entry.caps,
        timeout: entry.timeout,
        sanitizer: sanitizer.clone(),
    })
}

/// A run's directory and, for a run in a repo, the base it was made from.
struct RunPlace {
    dir: workspace::RunDir,
    base: Option<workspace::Base>,
}

/// Where a new run goes and whose it is (see `Inner::place`).
struct Placement {
    channel: ChannelId,
    thread_key: Option<String>,
    visibility: ChannelVisibility,
    user: ActorId,
    parent: Option<RunId>,
}

/// The person (or machine) a run is for: an agent's principal, else the actor itself.
fn principal_of(actor: &Actor) -> &ActorId {
    actor.on_behalf_of.as_deref().map_or(&actor.id, |p| &p.id)
}

/// The admission of `action` on `agent{name}`; a refusal carries what was asked, for the
/// registry's audit line.
fn admit(actor: &Actor, action: Action, name: AgentName) -> Result<(), DispatchError> {
    let resource = Resource::Agent { name };
    let verdict = authorize(actor, &action, &resource);
    if verdict.is_allow() {
        return Ok(());
    }
    Err(DispatchError::Refused(Box::new(Refusal {
        action,
        resource,
        verdict,
    })))
}

impl RunLauncher for Dispatcher {
    fn start(&self, req: RunRequest) -> BoxFuture<'_, Result<StartedRun, LaunchError>> {
        // The admission, the stamp and the record, as a span of the request that asked.
        let span = tracing::info_span!("dispatch");
        Box::pin(
            async move { Ok(Dispatcher::start(self, req).await?.into_port()) }.instrument(span),
        )
    }

    fn start_repo(
        &self,
        req: RunRequest,
        repo: RepoSlug,
        task: RepoTask,
    ) -> BoxFuture<'_, Result<StartedRun, LaunchError>> {
        let span = tracing::info_span!("dispatch", repo = %repo);
        Box::pin(
            async move {
                Ok(Dispatcher::start_repo(self, req, repo, task)
                    .await?
                    .into_port())
            }
            .instrument(span),
        )
    }

    fn stop_here(&self, id: &RunId) -> bool {
        self.stop(id)
    }

    fn record_command_run(&self, run: CommandRun) -> BoxFuture<'_, Result<RunRecord, LaunchError>> {
        let span = tracing::info_span!("dispatch.record_command_run");
        Box::pin(async move { Ok(self.inner.record_command_run(run).await?) }.instrument(span))
    }
}

impl LiveFeed for Dispatcher {
    fn snapshot(&self, viewer: &Actor) -> Vec<LiveRun> {
        self.inner.live.snapshot(viewer)
    }

    fn subscribe(&self, viewer: &Actor) -> Box<dyn LiveStream> {
        Box::new(self.inner.live.subscribe(viewer))
    }

    fn subscribe_run(&self, run: &RunId) -> Box<dyn LiveStream> {
        Box::new(self.inner.live.subscribe_run(run))
    }
}

impl AgentTokenCheck for Dispatcher {
    fn run_of(&self, token: &str) -> Option<RunId> {
        let claims = self.inner.tokens.verify(token).ok()?;
        RunId::parse(&claims.run).ok()
    }
}

impl Inner {
    /// The row a new run starts as: owned by this replica, placed by [`Inner::place`].
    async fn new_run(
        &self,
        req: &RunRequest,
        agent: String,
        repo: Option<RepoSlug>,
        request: String,
        capability_token: Option<TokenHash>,
    ) -> Result<NewRun, DispatchError> {
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
    async fn place(&self, req: &RunRequest) -> Result<Placement, DispatchError> {
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
            .ok_or(DispatchError::ParentEnded)?;
        Ok(Placement {
            channel: parent.channel_id,
            thread_key: parent.thread_key,
            visibility: parent.channel_visibility,
            user: parent.user_id,
            parent: Some(parent.id),
        })
    }

    /// Records a run a command answered, finished at once with its reply.
    async fn record_command_run(&self, run: CommandRun) -> Result<RunRecord, DispatchError> {
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
    async fn choose_agent(&self, req: &RunRequest) -> Result<(AgentName, String), DispatchError> {
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
            .ok_or(DispatchError::NoAgent)?;
        Ok((self.declared(name.as_str())?, req.text.clone()))
    }

    fn declared(&self, word: &str) -> Result<AgentName, DispatchError> {
        AgentName::parse(word)
            .ok()
            .filter(|n| self.agents.contains_key(n))
            .ok_or_else(|| DispatchError::UnknownAgent(word.chars().take(64).collect()))
    }

    /// The repo's base (its policy read), for a run the actor may use it in; before anything is
    /// recorded. A repo the actor may not use is refused as one that is not configured.
    async fn base_of(
        &self,
        actor: &Actor,
        slug: &RepoSlug,
    ) -> Result<workspace::Base, DispatchError> {
        let resource = self.tool_broker.table.repo(slug.clone());
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
    async fn launch(
        self: &Arc<Self>,
        req: RunRequest,
        name: AgentName,
        text: String,
        repo: Option<RepoSlug>,
    ) -> Result<Started, DispatchError> {
        if !self.accepting.load(Ordering::SeqCst) {
            return Err(DispatchError::ShuttingDown);
        }
        let entry = self.agents.get(&name).ok_or(DispatchError::NoAgent)?;
        let base = match &repo {
            Some(slug) => Some(self.base_of(&req.actor, slug).await?),
            None => None,
        };
        let slot = self
            .slots
            .acquire(principal_of(&req.actor))
            .map_err(DispatchError::Busy)?;
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
                    self.fail_before_start(&run, &e.to_string()).await;
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
                Err(why) => {
                    workspace::remove(&place.dir).await;
                    self.fail_before_start(&run, &why).await;
                    return Err(DispatchError::Policy(why));
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
                    reflect::reflect_run(
                        &this.memory,
                        this.store.as_ref(),
                        &run,
                        &requester,
                        this.now,
                    )
                    .await;
                }
            }
            .instrument(span),
        );
        Ok(Started {
            run,
            capability_token,
            done,
        })
    }

    /// The channel's visibility, bounded by the directory timeout; `unknown` past it.
    async fn stamp(&self, channel: &ChannelId) -> ChannelVisibility {
        let timeout = self.settings.channel_directory_timeout;
        match tokio::time::timeout(timeout, self.directory.info(channel)).await {
            Ok(v) => v,
            Err(_) => {
                tracing::warn!(target: "authz", channel = %channel, "[authz] channel directory timed out");
                ChannelVisibility::Unknown
            }
        }
    }

    fn mint_agent_token(
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
    async fn tools_for(
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

    /// Appends a run event the dispatcher itself writes (cleaned like the agent's) and
    /// publishes it to live viewers.
    async fn record_event(&self, run: &RunRecord, kind: &str, body: &str) -> bool {
        let cleaned = self
            .sanitizer
            .for_run(run.id.as_str(), run.thread_key.as_deref())
            .clean(body);
        let body = agents::cap(&cleaned, agents::OutputCaps::default().event_bytes);
        match self
            .store
            .append_event(&run.id, (self.now)(), kind, &body)
            .await
        {
            Ok(seq) => {
                self.live.publish(LiveUpdate::Event {
                    run: run.facts(),
                    seq,
                    kind: kind.to_owned(),
                    body,
                });
                true
            }
            Err(e) => {
                tracing::error!(run = %run.id, error = %e.token(), "recording an event failed");
                false
            }
        }
    }

    /// When the run has ended: what it changed kept on its branch (for a run in a repo), then
    /// its directory removed. Returns the friction to record.
    async fn close_workspace(&self, run: &RunRecord, place: &RunPlace) -> Vec<(String, String)> {
        let mut frictions = Vec::new();
        if let Some(base) = &place.base {
            let keeping = workspace::keep(base, &run.id, &place.dir);
            let kept = tokio::time::timeout(KEEP_TIMEOUT, keeping)
                .await
                .unwrap_or_else(|_| {
                    Err(WorkspaceError::Keep(format!(
                        "keeping the run's changes took longer than {}",
                        human(KEEP_TIMEOUT)
                    )))
                });
            match kept {
                Ok(kept) => {
                    let mut body = format!(
                        "kept {} commit{} on {} in repo {}",
                        kept.commits,
                        if kept.commits == 1 { "" } else { "s" },
                        kept.branch,
                        base.slug
                    );
                    if kept.dropped_count > 0 {
                        let dropped: Vec<&str> = kept.dropped.iter().map(String::as_str).collect();
                        let more = kept.dropped_count.saturating_sub(dropped.len());
                        body.push_str(&format!(
                            "; {} change{} not kept (denied, .switchboard/ or a submodule): {}{}",
                            kept.dropped_count,
                            if kept.dropped_count == 1 { "" } else { "s" },
                            dropped.join(", "),
                            if more > 0 {
                                format!(" and {more} more")
                            } else {
                                String::new()
                            }
                        ));
                    }
                    for note in &kept.notes {
                        body.push_str(&format!("; {note}"));
                    }
                    self.record_event(run, "branch", &body).await;
                }
                Err(e) => {
                    self.record_event(run, "branch", &e.to_string()).await;
                    frictions.push(("branch_not_kept".to_owned(), e.to_string()));
                }
            }
        }
        workspace::remove(&place.dir).await;
        frictions
    }

    async fn fail_before_start(&self, run: &RunRecord, why: &str) {
        let finish = Finish {
            status: RunStatus::Failed,
            answer: None,
            error: Some(why.to_owned()),
            at: (self.now)(),
        };
        if let Err(e) = self.store.finish_run(&run.id, finish).await {
            tracing::error!(run = %run.id, error = %e.token(), "recording a run that could not start failed");
        }
    }

    /// The run's task: start, run the back end under its timeout while recording events,
    /// finish. Returns the final record.
    async fn drive(
        self: Arc<Self>,
        run: RunRecord,
        name: AgentName,
        job: AgentJob,
        cancel: CancellationToken,
        place: RunPlace,
    ) -> Option<RunRecord> {
        let entry = self.agents.get(&name)?;
        let started = self.store.start_run(&run.id);
        if let Err(e) = started
            .instrument(tracing::info_span!("store.start_run"))
            .await
        {
            tracing::error!(run = %run.id, error = %e.token(), "marking the run running failed");
        }
        self.live.set_status(&run.id, RunStatus::Running);
        let mut job = job;
        let mut frictions = Vec::new();
        match self.memory.context_block(&reflect::scopes_of(&run)).await {
            Ok(block) => job.memory = reflect::block_for_agents(&block),
            Err(e) => {
                // Nothing remembered is safe; the run goes on without its block.
                tracing::warn!(run = %run.id, error = %e.token(), "reading the memory block failed");
                frictions.push((
                    "memory_unavailable".to_owned(),
                    "the memory block could not be read; the run had none".to_owned(),
                ));
            }
        }
        let had_workspace = job.workspace.is_some();
        let (outcome, agent_frictions) = self.supervise(&run, entry, job, &cancel).await;
        frictions.extend(agent_frictions);
        if had_workspace {
            frictions.extend(self.close_workspace(&run, &place).await);
        }
        let reason = self.live.reason(&run.id);
        let finish = self.finish_of(&outcome, reason, entry.timeout);
        if reason == Some(StopReason::Timeout) {
            let detail = format!("the agent did not finish within {}", human(entry.timeout));
            frictions.push(("timeout".to_owned(), detail));
        }
        for (kind, detail) in frictions {
            let f = Friction {
                run_id: run.id.clone(),
                at: (self.now)(),
                kind,
                detail,
            };
            if let Err(e) = self.store.add_friction(f).await {
                tracing::error!(run = %run.id, error = %e.token(), "recording friction failed");
            }
        }
        let status = finish.status;
        tracing::Span::current().record("status", status.as_str());
        let finishing = self.store.finish_run(&run.id, finish.clone());
        let record = match finishing
            .instrument(tracing::info_span!("store.finish_run"))
            .await
        {
            Ok(r) => Some(r),
            Err(e) => {
                // Left live: the store's recovery tombstones it; never reported as done.
                tracing::error!(run = %run.id, error = %e.token(), "recording the run's end failed");
                None
            }
        };
        tracing::info!(run = %run.id, status = %status, "run finished");
        let finished = LiveUpdate::Finished {
            run: run.facts(),
            status,
            answer: finish.answer,
            error: finish.error,
        };
        self.live.finish(&run.id, finished);
        record
    }

    /// Runs the back end under its timeout, recording its events as they come; returns its
    /// outcome and the friction it reported. Once cancelled (stop, timeout, shutdown) a back
    /// end gets `cancel_grace` to return; one that ignores its token is abandoned then, so a
    /// run always ends. The same grace bounds the draining of events after it returned.
    async fn supervise(
        &self,
        run: &RunRecord,
        entry: &AgentEntry,
        job: AgentJob,
        cancel: &CancellationToken,
    ) -> (AgentOutcome, Vec<(String, String)>) {
        let sanitizer = Arc::new(
            self.sanitizer
                .for_run(run.id.as_str(), run.thread_key.as_deref()),
        );
        let (sink, mut items) = EventSink::channel(entry.caps, sanitizer);
        let backend = entry.backend.clone();
        let agent_cancel = cancel.clone();
        let backend_span = tracing::info_span!("backend", kind = entry.backend.kind());
        let mut task = tokio::spawn(
            async move { backend.run(job, sink, agent_cancel).await }.instrument(backend_span),
        );
        let timer = tokio::time::sleep(entry.timeout);
        tokio::pin!(timer);
        let mut frictions = Vec::new();
        let mut outcome: Option<AgentOutcome> = None;
        let mut items_open = true;
        let mut abandon_at: Option<tokio::time::Instant> = None;
        let grace = self.settings.cancel_grace;
        while outcome.is_none() || items_open {
            let abandon = async {
                match abandon_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                item = items.recv(), if items_open => match item {
                    Some(item) => self.record_item(run, item, &mut frictions).await,
                    None => items_open = false,
                },
                joined = &mut task, if outcome.is_none() => {
                    abandon_at.get_or_insert(tokio::time::Instant::now() + grace);
                    outcome = Some(joined.unwrap_or_else(|_| AgentOutcome::crashed()));
                }
                () = &mut timer, if outcome.is_none() && !cancel.is_cancelled() => {
                    self.live.cancel(&run.id, StopReason::Timeout);
                }
                () = cancel.cancelled(), if abandon_at.is_none() => {
                    abandon_at = Some(tokio::time::Instant::now() + grace);
                }
                () = abandon => {
                    if outcome.is_none() {
                        task.abort();
                        outcome = Some(AgentOutcome::abandoned());
                        let detail = format!(
                            "the agent back end ignored its stop for {} and was abandoned",
                            human(grace)
                        );
                        frictions.push(("unresponsive".to_owned(), detail));
                    }
                    items_open = false;
                }
            }
        }
        (outcome.unwrap_or_else(AgentOutcome::abandoned), frictions)
    }

    async fn record_item(
        &self,
        run: &RunRecord,
        item: SinkItem,
        frictions: &mut Vec<(String, String)>,
    ) {
        match item {
            SinkItem::Event { kind, body, stored } => {
                let appended = self.store.append_event(&run.id, (self.now)(), &kind, &body);
                match appended
                    .instrument(tracing::info_span!("store.append_event"))
                    .await
                {
                    Ok(seq) => {
                        stored.answer(true);
                        self.live.publish(LiveUpdate::Event {
                            run: run.facts(),
                            seq,
                            kind,
                            body,
                        })
                    }
                    Err(e) => {
                        stored.answer(false);
                        tracing::error!(run = %run.id, error = %e.token(), "recording an event failed")
                    }
                }
            }
            SinkItem::Friction { kind, detail } => frictions.push((kind, detail)),
        }
    }

    fn finish_of(
        &self,
        outcome: &AgentOutcome,
        reason: Option<StopReason>,
        timeout: Duration,
    ) -> Finish {
        let at = (self.now)();
        let (status, answer, error) = if outcome.is_cancelled() {
            match reason {
                Some(StopReason::Timeout) => (
                    RunStatus::Failed,
                    None,
                    Some(format!("timed out after {}", human(timeout))),
                ),
                Some(StopReason::Shutdown) => (
                    RunStatus::Interrupted,
                    None,
                    Some("the server shut down before the run finished".to_owned()),
                ),
                Some(StopReason::Stop) | None => {
                    (RunStatus::Stopped, None, Some("stopped".to_owned()))
                }
            }
        } else if let Some(answer) = outcome.answer() {
            (RunStatus::Completed, Some(answer.to_owned()), None)
        } else {
            (
                RunStatus::Failed,
                None,
                Some(outcome.error().unwrap_or("the agent failed").to_owned()),
            )
        };
        Finish {
            status,
            answer,
            error,
            at,
        }
    }
}

/// `1.5s`, `300ms`, `2s`.
fn human(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
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
