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
//!
//! ## A run's start, life and end
//!
//! `Dispatcher` (cheap to clone) implements the `commands` ports. `start(RunRequest)`: agent
//! choice (`@name` → `--agent` → the channel's then the org's `agent` config value →
//! `agents.default`), `authorize(actor, agent:run:<name>, agent{name})`, a concurrency slot
//! (`limits.rs`: per principal, an agent's person, and global; `Busy` starts nothing), the
//! placement: the stamp (`ChannelDirectory::info` under `channel_directory_timeout`; past it
//! `unknown` and an `[authz] channel directory timed out` line), or, for a child run
//! (`RunRequest::parent`, an agent's MCP `ask`), the live parent's channel, thread, stamp and
//! principal read from the store (`parent_run` recorded; a parent that has ended starts nothing);
//! the run record (the capability token stored as its hash; owner = this replica), the agent
//! token (`tokens.rs`: minted once the run id exists; not stored, checked by signature and
//! expiry), then a task that runs the back end under the agent's timeout, records events and
//! friction as they come (answering a kept event's `Stored` once the store has it), publishes
//! them to `LiveRuns`, and finishes the run once.
//!
//! `start_repo` asks the admission again (`repo:exec` on `agent{coding}`); a run in a repo
//! (`start_repo`, or `RunRequest::repo`) asks `repo:use` again (refused as a repo that is not
//! configured) and reads the repo's base before anything is recorded. `stop` cancels a run live
//! here (`stopped`); `stop_requested` / `watch_stop_requests` cancel the runs of this replica
//! someone asked to stop through the store; the timeout ends a run `failed` with a `timeout`
//! friction; `shutdown(grace)` refuses new runs, waits, then interrupts the rest
//! (`interrupted`). A back end that ignores its stop for `cancel_grace` is abandoned (friction
//! `unresponsive`), and the draining of its events is bounded by the same grace, so every run
//! ends. The agent token is an HS256 JWT (run, agent, principal, expiry) from
//! `SWITCHBOARD_AGENT_TOKEN_SECRET`, else a per-process random secret (then another replica
//! cannot check it). `record_command_run` stamps and records a run a command answered, finished
//! at once (agent `COMMAND_AGENT`).
//!
//! Traces: `start`, `start_repo` and `record_command_run` run in a `dispatch` span of the request
//! that asked. Each run's task is a trace of its own: a `run` root span (run id, agent, channel,
//! surface, final status) following from the request that started it, with `backend`,
//! `store.start_run`, `store.append_event` and `store.finish_run` children. Store failures are
//! logged as `StoreError::token()`s, never the database's text.
//!
//! ## Modules
//!
//! | module | what it holds |
//! | --- | --- |
//! | `settings.rs` | `DispatchSettings` and `AgentEntry`, with the `[agents]` defaults written once |
//! | `launch.rs` | a run's start: the admission, the agent's choice, the placement, the slot, the record and tokens, the workspace and tool broker, then the run's task |
//! | `supervise.rs` | a run's life after its start: events recorded and published, timeout and stop, the workspace kept and removed, the one finish |
//! | `ports.rs` | the `commands` ports (`RunLauncher`, `LiveFeed`, `AgentTokenCheck`) on `Dispatcher` |
//! | `launch_error.rs` | the dispatcher's faults as the port's one `LaunchError`, and a started run as the port's `StartedRun` |
//! | `tools.rs` | an agent whose `AgentEntry::tools` is set (the server sets it for `openai` agents, with the agent's kind and model) gets a `BrokerGate` built in `launch`, after the run record and before the agent starts: the grants for its agent and repo with `{workspace}` resolved, the org rules, the workspace's policy file, the run's `policy_rules`, the promises of its ancestors (their `restriction` events, oldest first) and their highest taint (`taint` events), the agent actor for the request's principal, the MCP servers `mcp add` configured for the run's channel and the org (connected and listed at once, `mcp_timeouts`; a store fault fails the run), and the approvers (a person: `PendingApprovals` under `serve`, the terminal under `switchboard ask`; a reviewer: `ReviewerAgent`, built like the memory model through `model_agent` → `BackendModel`: the call as JSON data in a fixed frame, only the answer `APPROVE` alone approving). A run whose principal is not a person gets no person approver: its asks are refused at once. The project's rules and deny_read are the base's. A policy that cannot be read records the run failed and answers `LaunchError::Policy` |
//! | `approvals.rs` | `PendingApprovals`, the person approver under `serve` and the `ApprovalDesk`: an ask is a `tool_approvals` row under an unguessable id, readable and answerable from every replica; the run's principal or a person's capability link answers once, by the store's conditional write; the asking replica wakes at once on a local answer and polls the row for a remote one; an ask dropped by its timeout or its run is closed; `asked()` is a watch on this process's new asks a surface holds before reading `pending`, as Slack does to post each one |
//! | `reflect.rs` | memory: the run's task reads the context block of the run's scopes (principal, channel, repo) before the back end starts (a store failure gives an empty block and a `memory_unavailable` friction) and hands it over as `AgentJob::memory`. When a completed run that a person or a machine started (not a child run) ends, its final record goes out first; then its reflection is counted in `PendingReflections` and runs, bounded by `[memory] reflection_timeout_seconds` (past it: a `memory_timeout` friction; what was written stays). The `model` extractor calls the named agent's back end directly (`BackendModel`: no run row, no events kept, no token). `settle_reflections` is what `switchboard ask` waits on; `shutdown` gives reflections what is left of the grace |
//! | `live.rs` | `LiveRuns`: the process's live runs and a broadcast of `LiveUpdate`s. `subscribe(viewer)` compiles `predicate_for(viewer, runs:read, run)` once and drops every update whose run it does not `matches` before handing anything over; `snapshot(viewer)` filters the same way; `subscribe_run(id)` is the capability token's feed: one run's updates, no actor |
//! | `fanout.rs` | across replicas: `spawn_fanout` (started by `serve` through `App::spawn_background`) runs when the store has a `LiveFanout` (Postgres `NOTIFY` / `LISTEN`, channel `sb_live` or `sb_live_` + schema). This replica's `Upsert`s and `Finished`es go out through a bounded outbox (full: drops and warns) as JSON of the run's facts, status, agent, surface and start (never its text; events stay home); other replicas' payloads come back into this replica's broadcast, where every subscription filters them exactly as local ones. Its own payloads and any that do not parse are dropped. The listener listens again after a lost connection (updates sent meanwhile are lost; a page's `sync` on reconnect is read from the store) |
//! | `limits.rs`, `tokens.rs` | the concurrency slots; the capability and agent tokens |
//! | `workspace/` | a workspace per run (public: its bench uses it). `base.rs` resolves the repo's base (a `path:` checkout's HEAD commit; a `url:` repo's shallow bare mirror under the data directory, fetched again after `[repos] fetch_interval_seconds`, one fetch per mirror at a time), lists its tree and reads its policy from the commit (a path inside the data directory is refused; a deny name the tree spells otherwise is refused). `make.rs` makes the run's work directory (the base's files but the denied ones, checked out with parallel workers, stubs, skip-worktree) and its `.git` (the base's objects but the denied blobs and the trees and commit naming them, by `pack-objects` into `index-pack`, a promisor pack, Switchboard's config, the run's branch at its `Start`: the base commit, or when files are denied a parentless commit of the index with the stub's blob at each denied name). `base.rs` finds the policy through `policy_place.rs` (folded as a case-insensitive checkout reads names: another spelling, or a `.switchboard` that is a link, submodule or file, refuses the run) over `tree.rs`'s listing. `given.rs` records, before the run starts, what its repository held (a listing of every object's name, kind and size, and a repository of its trees, commits, links' blobs and stub) and reads it back when it ends. `keep/` keeps the run's changes on `switchboard/<id>` in the base repository when it ends, answering nothing about the base: the run's side (`keep/mod.rs`, `keep/plan.rs`) gathers the run's object files, bounds them by their headers against what it was given (`keep/bounds.rs`), reads what it left uncommitted with `git add -A` in a sandbox (`keep/snapshot.rs`), hashes every object it wrote again into `keep.git` (which reads the start from `given.git`, never the base) and there plans each commit's allowed changes against the start (`keep/changes.rs`: never a denied name, `.switchboard/`, a submodule, a `.gitattributes`, `.lfsconfig` or `.gitmodules`, or a link out; a kept blob one the run wrote or was given); the base's side (`keep/admit.rs`) hashes the kept blobs into a quarantine inside the base's objects (`index-pack --strict`), builds the trees and commits there on the base's tree, `gate`s them against the base's own objects, moves them in and makes one ref, the run's branch, only when a commit was kept and only where none of that name is. `diff.rs` reads a run's kept changes back for `runs diff` between the commits recorded in the store's `run_changes` when it ended (plumbing, no renames, attributes from an empty tree, bounded, cleaned, no commit id shown). `nofollow.rs` reads a run's directories through `openat(O_NOFOLLOW)` and removes a workspace one directory at a time (`remove_tree`, no recursion). `git.rs` is git as the server runs it (no system or user config, hooks and monitor off, bounded, stderr kept from network commands). `mod.rs` has `make`, `remove`, `sweep` (a crash's leftovers, at start) and `prune` (old run branches). Every tool-calling or command agent's run gets a workspace, and every run in a repo; it is removed when the run ends, after its branch is kept (a `branch` event) |
//!
//! Tests (`tests/dispatch_tests/`, one binary): `dispatch.rs` (a run's life, the live feed's
//! filter, stops, shutdown, limits, reflection), `reviewer.rs`; the workspace attacks through
//! the binary in `crates/cli/tests/switchboard/agent_boundary.rs` and
//! `crates/cli/tests/switchboard/workspaces.rs`.

mod approvals;
mod fanout;
mod launch;
mod launch_error;
mod limits;
mod live;
mod ports;
mod reflect;
mod settings;
mod supervise;
mod tokens;
mod tools;
pub mod workspace;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agents::CancellationToken;
use agents::Sanitizer;
use agents::tools::{Approver, NobodyToAsk};
use authz_core::{Action, AgentName, ChannelDirectory, CommandGroup, Effect, RepoSlug, RunId};
use commands::{CODING_AGENT, CommandRun, LaunchError, RepoTask, RunRequest, StartedRun};
use memory::Memory;
use store::Timestamp;
use store::{ReplicaId, RunRecord, Store, StoreError};

pub use approvals::PendingApprovals;
pub use fanout::STORE_WATCH;
pub use limits::{Busy, Slots};
pub use live::{LiveRuns, StopReason, Subscription};
pub use reflect::{BackendModel, PendingReflections, ReviewerAgent};
pub use settings::{
    AgentEntry, DEFAULT_CHANNEL_DIRECTORY_TIMEOUT, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_PER_ACTOR,
    DispatchSettings,
};
pub use tokens::{AgentClaims, AgentTokens, TokenError, random_token};
pub use tools::{ToolBroker, ToolProfile};
pub use workspace::{RepoSettings, WorkspaceError, make_private_dir, sweep as sweep_workspaces};

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

    /// Where the store has no fan-out of its own (SQLite, which other processes on this
    /// machine share): reads the other processes' live runs every `every` into this process's
    /// broadcast, until `stop`. `serve` runs it, so its pages follow a run `switchboard ask`
    /// starts; a one-shot command does not.
    pub fn spawn_store_watch(
        &self,
        every: std::time::Duration,
        stop: CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let shared =
            self.inner.store.live_fanout().is_none() && self.inner.store.backend() == "sqlite";
        shared.then(|| {
            tokio::spawn(fanout::watch_store(
                self.inner.live.clone(),
                self.inner.store.clone(),
                self.inner.replica.clone(),
                every,
                stop,
            ))
        })
    }

    pub fn replica(&self) -> &ReplicaId {
        &self.inner.replica
    }

    /// Starts a run for text that is not a command.
    pub async fn start(&self, req: RunRequest) -> Result<StartedRun, LaunchError> {
        let (name, text) = self.inner.choose_agent(&req).await?;
        launch::admit(&req.actor, Action::AgentRun(name.clone()), name.clone())?;
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
    ) -> Result<StartedRun, LaunchError> {
        let name = AgentName::parse(CODING_AGENT).map_err(|_| LaunchError::UnknownAgent {
            name: CODING_AGENT.to_owned(),
        })?;
        launch::admit(
            &req.actor,
            Action::Command(CommandGroup::Repo, Effect::Exec),
            name.clone(),
        )?;
        if !self.inner.agents.contains_key(&name) {
            return Err(LaunchError::NoCodingAgent(name));
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
    pub async fn record_command_run(&self, run: CommandRun) -> Result<RunRecord, LaunchError> {
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
pub(crate) struct RunPlace {
    pub(crate) dir: workspace::RunDir,
    pub(crate) base: Option<workspace::Base>,
}
