//! # commands: the registry, every command, and the ports surfaces reach the rest through
//!
//! What it is: the one place commands are defined (id, action, resource, deny shape, one
//! argument schema, handler) and invoked, the same way on every surface:
//! find → `authorize` **before parsing** → on deny, an audit line and the declared deny shape
//! (not_found for point reads, 🚫 for everything else) → parse (usage on error) → handler.
//! And [`Registry::handle`], what every surface does with text: a command goes to `invoke`;
//! text whose first word is a command group gets the registry's reply even when mistyped;
//! anything else becomes an agent run through the [`RunLauncher`] port, recorded in the
//! caller's origin channel.
//!
//! Surfaces depend on this crate and `authz-core` only: the bearer token map ([`tokens`]),
//! the callers a bearer, an agent token or a capability proves ([`identity`]), the live feed,
//! Slack event dedupe and schedule firings all come through here. The parts that run agents
//! are reached through the small traits of [`ports`], which `dispatch` implements.
//!
//! What it must never do: decide anything by hand. No comparison of caller ids or channels
//! here (a tidy test greps for them); admission is `authorize`, lists are `predicate_for`
//! handed to the store, point reads `authorize` the loaded resource. A reply never carries a
//! deny reason; the audit line never carries a body, token or run id.
//!
//! Invariants: a refused caller's input is never parsed; a denied point read is byte-identical
//! to a missing resource; every refusal is audited and rendered by one function
//! (`deny::deny`); every registered command's action has a policy row (`declared_actions`
//! feeds `validate_policy`).
//!
//! ## How a command runs
//!
//! `Registry::invoke(caller, raw, services)`: find the command (words, or id for JSON), resolve
//! its resource (`command{id}` unless it declares one: `repo test` and `repo build` use
//! `agent{coding}`), `authorize` before parsing; on deny the refusal goes to `deny::deny`, the
//! one function that writes the `AuditLine` (actor, action, resource type, reason token, surface)
//! and renders the reply its shape declares (`not_found` for point reads, 🚫 otherwise, the agent
//! and channel-tier 🚫s); then parse with the command's `ArgsSchema` (text words or JSON; the
//! same schema renders usage and a JSON Schema); then run the handler. Handlers that touch a
//! resource authorize it (`Registry::refuse` keeps the deny shape); lists hand `predicate_for`
//! to the store.
//!
//! `Registry::handle(caller, text, services)`: command-shaped words go to `invoke`; text whose
//! first word is a command group gets the registry's reply even when it does not split (an
//! unclosed quote: usage); text with control characters is refused; anything else starts an
//! agent run through the `RunLauncher` port. The word splitter takes an apostrophe inside a word
//! as a letter. `handle_for` / `invoke_for` take `Wants` (text, data or both): a surface that
//! shows one form of a reply says so, and a handler with a large answer (`runs list`) builds only
//! that form.
//!
//! ## Modules
//!
//! | module | what it holds |
//! | --- | --- |
//! | `catalogue` | every command, defined once (`all()`: id, summary, action, deny shape, arguments, handler), with the handlers by group (`runs`, `config`, `repo`, `friction`, `memory`, `system`) |
//! | `args` | `ArgsSchema`, `ArgSpec`: one schema for text words, JSON, a query string (`object_from_query`), usage and JSON Schema |
//! | `deny` | `deny::deny` and the `AuditLine` |
//! | `reply`, `reply_texts` | the `Reply` type (a 🚫's data lists whom it asks the caller to turn to, for a surface that mentions people); every reply text, each with a golden in `tests/goldens/` |
//! | `suggest` | the nearest catalogue word to a mistyped one (`runs lst` → `runs list`), for the unknown-command reply |
//! | `conformance` | the fixed actor set × every command, rendered to docs/conformance-matrix.md (golden) |
//! | `ports` | `RunLauncher` (start, start a repo run, stop a run live here, record a command's run), `LiveFeed` + `LiveStream` (the live runs per viewer; one run's for a capability), `AgentTokenCheck` (the run a token names), `ApprovalDesk` (the tool calls waiting for a person: those an `Answerer` may answer, and the answer; `NoApprovals`); their data (`RunRequest` with the run's `policy_rules`, `RepoTask`, `StartedRun`, whose `reply_with_link` adds the capability link under `Services::public_url` for the starter only, `RunOutcome`, `LaunchError`, `Busy`, `LiveRun`, `LiveUpdate`, `CommandRun`) |
//! | `tokens` | the bearer token map, surface-neutral: a token or `sha256:<hex>` → `{subject, channel?}`; the channel must be a machine channel of a token surface (`http:…`, `mcp:…`); faults name the subject, never the token |
//! | `policy` | `LivePolicy`: the policy in force (`PolicyInForce`: the grants table, the org's agent policy rules, its hash), swapped whole by a reload, read as one snapshot per decision (`Services::table`) |
//! | `identity` | `bearer_caller` (`http:<subject>` / `mcp:<subject>`), `chat_caller`, `verified_caller`, `declared_caller`, `local_caller` (every surface's `Caller` is built here), `agent_caller` (agent for the run's principal, only while the run is live, read from the store; the only setter of `Caller::acting_in`), `Capability` (one run opened by its token: page, events, friction, stop) |
//! | `records` | a chat surface's event dedupe and answered threads (keyed by surface), the status of the run a capability opens (`run_status`; a viewer reads through `runs.get`), a firing's end recorded when its run ends (`record_firing_when_done`), a reply failure as run friction, schedule firing slots (`FiringSlot`: `timer:<µs>` or `manual:<id>`), the latest timer slot, `Registry::invoke_recorded` (a command's answer recorded as a run) |
//! | `schedules` | the `ScheduleDesk` port behind `schedule list` and `schedule fire` (`schedule` implements it; `NoSchedules` when there is none): the declared schedules with their next slot, and a manual firing handed the registry and services but never the caller |
//! | `trace` | a request's root span (`request_span`: a `trace_id` of `new_trace_id`, surface, route, actor, status, outcome), `record_actor` (the registry names its caller on the current span), and `mark_denied`, the marker every refusal emits so the span sinks drop the trace |
//! | `agent_run` | `start_agent_run`, the refusal replies (a started run's and a finished run's rendering live with `StartedRun` and `RunOutcome` in `ports`) |
//!
//! Invariants each port keeps (tests in `crates/server/tests/app/registry_behaviour/`,
//! `ports.rs` and `registry.rs`, and `crates/dispatch/tests/dispatch_tests/dispatch.rs`):
//!
//! - a launcher asks `authorize` before it starts anything, and a refusal records nothing;
//! - a feed hands a viewer nothing about a run its `predicate_for(runs:read)` does not match, and
//!   a run's end is one step (it leaves the live set and its `Finished` is published under one
//!   lock, which `subscribe` takes too), so a view that subscribes and then snapshots never keeps
//!   an ended run as live;
//! - a token check accepts only tokens it signed that have not expired;
//! - an agent caller never holds more than its principal, and never writes config, repos or MCP
//!   servers (the policy's rows for those admit no agent).
//!
//! Decisions: `@nosuch` names only the agents the caller may run (a caller with no grants learns
//! none); `runs stop` of a run live in another process writes a stop request to the store and
//! says which process will stop it; a CLI command has no origin channel (a channel-tier write
//! must name `--channel`), and a run it starts (`repo test`) is recorded in `cli:local`; a
//! command's recorded run has the agent `(command)` (dispatch's `COMMAND_AGENT`), a name no agent
//! can have.

mod agent_run;
pub mod args;
pub mod catalogue;
pub mod conformance;
mod deny;
pub mod identity;
pub mod policy;
pub mod ports;
pub mod records;
mod reply;
pub mod reply_texts;
pub mod run_changes;
pub mod schedules;
pub mod suggest;
pub mod tokens;
pub mod trace;

use std::collections::BTreeSet;
use std::sync::Arc;

use authz_core::{Action, Actor, BoxFuture, CommandId, GrantsTable, Resource, Verdict, authorize};
use serde_json::{Map, Value};
use store::Store;

pub use agent_run::{
    CLI_CHANNEL, DEFAULT_REPO_KEY, RunOptions, repo_named_in, start_agent_run, start_agent_run_with,
};
pub use args::{ArgError, ArgSpec, Args, ArgsSchema};
pub use authz_core::Surface;
/// Value types of runs that surfaces show.
pub use authz_core::{FiringSlot, RunStatus, Timestamp};
pub use deny::{Audit, AuditLine, DenyShape, MemoryAudit, Refusal, TracingAudit};
pub use policy::{LivePolicy, PolicyInForce};
pub use ports::{
    AgentTokenCheck, Answerer, ApprovalDesk, ApprovalError, AskedWatch, Busy, CODING_AGENT,
    CommandRun, LaunchError, LiveFeed, LiveRun, LiveStream, LiveUpdate, NoApprovals,
    PendingApproval, RepoTask, RunLauncher, RunOutcome, RunRequest, RunRule, StartedRun,
    run_branch,
};
pub use records::manual_slot;
pub use reply::{Reply, ReplyKind};
pub use schedules::{FireError, ManualFiring, NoSchedules, ScheduleDesk, ScheduleView};

pub use tokens::{TokenEntry, TokenMap, TokenMapError};
pub use trace::DENIED_TARGET;

use deny::{Denial, deny};

/// Who is asking, from where. Built by an adapter from what it proved; the actor's origin is
/// context, never authority.
#[derive(Debug, Clone)]
pub struct Caller {
    pub actor: Actor,
    pub surface: Surface,
    /// The live run an agent caller acts inside (its token's run). Set only by
    /// [`identity::agent_caller`]; a run such a caller starts is that run's child.
    acting_in: Option<authz_core::RunId>,
}

impl Caller {
    pub fn new(actor: Actor, surface: Surface) -> Self {
        Caller {
            actor,
            surface,
            acting_in: None,
        }
    }

    /// The live run this caller acts inside, for an agent proved by its run-scoped token.
    pub fn acting_in(&self) -> Option<&authz_core::RunId> {
        self.acting_in.as_ref()
    }
}

/// The raw input, as the surface received it.
#[derive(Debug, Clone)]
pub enum RawInput {
    /// `runs list --status all`
    Text(String),
    /// The same, already split into words (a command line).
    Words(Vec<String>),
    /// A command id and a JSON object of arguments (API, MCP).
    Json {
        id: String,
        args: Map<String, Value>,
    },
}

/// Resolves the resource a command is admitted on (default `command{id}`).
pub type ResourceFn = fn(&RawInput, &Caller) -> Resource;
/// A command's work.
pub type Handler = for<'a> fn(&'a Ctx<'a>, Args) -> BoxFuture<'a, Reply>;

/// A command, defined once.
pub struct Command {
    pub id: CommandId,
    pub summary: &'static str,
    pub action: Action,
    pub resource: Option<ResourceFn>,
    pub deny: DenyShape,
    pub args: ArgsSchema,
    pub handler: Handler,
}

impl Command {
    /// The words of its text form: `runs.list` → `runs list`.
    pub fn text_form(&self) -> String {
        self.id.as_str().replace('.', " ")
    }

    /// The MCP tool name: `runs.list` → `runs_list`.
    pub fn tool_name(&self) -> String {
        self.id.as_str().replace('.', "_")
    }

    pub fn resource_for(&self, raw: &RawInput, caller: &Caller) -> Resource {
        match self.resource {
            Some(f) => f(raw, caller),
            None => Resource::Command {
                id: self.id.clone(),
            },
        }
    }

    pub fn usage(&self) -> String {
        self.args.usage(&self.text_form())
    }
}

/// When the process started, and the clock (tests pass a fixed one).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub started_at: Timestamp,
    pub now: fn() -> Timestamp,
    /// How many times faster than the wall clock `now` runs: 1, except in the binary built with
    /// the test-only `driven-clock` feature (the replicas check's schedule slots). A timer that
    /// sleeps until an instant of this clock sleeps [`Clock::wall_wait`].
    pub pace: u32,
}

impl Clock {
    pub fn system() -> Self {
        Clock {
            started_at: store::wall_clock(),
            now: store::wall_clock,
            pace: 1,
        }
    }

    pub fn now(&self) -> Timestamp {
        (self.now)()
    }

    /// The wall-clock time that passes while this clock advances by `span`.
    pub fn wall_wait(&self, span: std::time::Duration) -> std::time::Duration {
        span / self.pace.max(1)
    }
}

/// The store as the registry holds it. The App hands it over when it builds [`Services`];
/// nothing outside this crate reaches through it: what a surface records or reads beyond a
/// command goes through a method of [`Services`] (`records.rs`; a run's status only for a
/// reader the policy lets read it), so no surface writes or reads past the registry.
#[derive(Clone)]
pub struct StoreAccess(Arc<dyn Store>);

impl StoreAccess {
    pub fn new(store: Arc<dyn Store>) -> Self {
        StoreAccess(store)
    }

    pub(crate) fn get(&self) -> &Arc<dyn Store> {
        &self.0
    }
}

/// What handlers and surfaces work with: the store (only this crate reaches through it), the
/// policy in force, the audit stream, the clock, and the ports to the parts that run agents.
pub struct Services {
    pub store: StoreAccess,
    /// The grants table and the agent policy, swapped whole by a reload.
    pub policy: Arc<LivePolicy>,
    pub audit: Arc<dyn Audit>,
    pub clock: Clock,
    pub version: &'static str,
    /// How long a replica's lease lasts: a server whose heartbeat is older is gone (`status`).
    pub server_lease: std::time::Duration,
    /// The scheduler: the declared schedules and `schedule fire`.
    pub schedules: Arc<dyn ScheduleDesk>,
    pub runs: Arc<dyn RunLauncher>,
    pub live: Arc<dyn LiveFeed>,
    pub agent_tokens: Arc<dyn AgentTokenCheck>,
    /// The bearer token map; `None` keeps every bearer surface off.
    pub tokens: Option<Arc<TokenMap>>,
    /// `[server] public_url` (no trailing `/`): the base of capability links. `None`: no links.
    pub public_url: Option<String>,
    /// Tool calls waiting for a person's answer.
    pub approvals: Arc<dyn ApprovalDesk>,
    /// What finished runs changed in their repos (`runs diff`).
    pub changes: Arc<dyn run_changes::RunChangesReader>,
}

impl Services {
    /// The grants table in force now (a snapshot: a reload never changes it under a reader).
    pub fn table(&self) -> Arc<GrantsTable> {
        self.policy.now().table.clone()
    }
}

/// Which of a reply's two forms the surface will show. A handler whose answer is large (a page
/// of runs) builds only the form asked for; every other handler builds both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wants {
    /// Text and data (the default; tests and the CLI's `--json` switch read both).
    #[default]
    Both,
    /// Only `text` is shown; `data` may be `null`.
    Text,
    /// Only `data` is shown; `text` may be empty.
    Data,
}

impl Wants {
    pub fn text(self) -> bool {
        self != Wants::Data
    }

    pub fn data(self) -> bool {
        self != Wants::Text
    }
}

/// One invocation's context.
pub struct Ctx<'a> {
    pub caller: &'a Caller,
    pub services: &'a Services,
    pub registry: &'a Registry,
    pub command: &'a Command,
    pub wants: Wants,
}

/// Why a command cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefineError {
    #[error("command {0} is defined twice")]
    Duplicate(String),
}

/// Where text goes.
enum Route {
    /// Command words, for `invoke`.
    Command(Vec<String>),
    /// Answered by the registry without a command: control characters (whatever the text is
    /// for), or command text that does not split into words.
    Answered(Reply),
    /// Anything else: an agent run.
    Agent,
}

/// A refusal of `command`, in its deny shape.
fn refuse_command(
    services: &Services,
    caller: &Caller,
    command: &Command,
    refusal: &Refusal,
) -> Reply {
    let denial = Denial::Command {
        shape: command.deny,
        command: &command.text_form(),
    };
    deny(services, caller, refusal, denial)
}

/// A surface's answer: the reply, and the run when one was started (to follow or wait on).
pub struct Handled {
    pub reply: Reply,
    pub run: Option<StartedRun>,
}

/// The registry: every command, found by its words or its id.
#[derive(Default)]
pub struct Registry {
    commands: Vec<Command>,
}

impl Registry {
    pub fn define(&mut self, command: Command) -> Result<(), DefineError> {
        if self.commands.iter().any(|c| c.id == command.id) {
            return Err(DefineError::Duplicate(command.id.to_string()));
        }
        self.commands.push(command);
        Ok(())
    }

    /// Every command of the catalogue.
    pub fn catalogue() -> Self {
        let mut r = Registry::default();
        for c in catalogue::all() {
            // The catalogue's ids are distinct (a test pins it); a duplicate would be dropped.
            let _ = r.define(c);
        }
        r
    }

    pub fn commands(&self) -> &[Command] {
        &self.commands
    }

    /// The actions the registered commands declare, for `validate_policy`.
    pub fn declared_actions(&self) -> BTreeSet<Action> {
        self.commands.iter().map(|c| c.action.clone()).collect()
    }

    pub fn by_id(&self, id: &str) -> Option<&Command> {
        self.commands.iter().find(|c| c.id.as_str() == id)
    }

    /// The command whose words begin `words` (the longest such), and how many words it took.
    pub fn by_words(&self, words: &[String]) -> Option<(&Command, usize)> {
        self.commands
            .iter()
            .filter_map(|c| {
                let own: Vec<&str> = c.id.as_str().split('.').collect();
                let n = own.len();
                let matches =
                    words.len() >= n && own.iter().zip(words).all(|(a, b)| *a == b.as_str());
                matches.then_some((c, n))
            })
            .max_by_key(|(_, n)| *n)
    }

    /// Whether `word` is a command group (`runs`, `config`, …).
    pub fn is_group(&self, word: &str) -> bool {
        self.commands
            .iter()
            .any(|c| c.id.as_str().split('.').next() == Some(word))
    }

    /// Words that begin with a command's words, or whose first word is a command group
    /// (`runs frobnicate`: a mistyped command, answered by the registry, not an agent).
    pub fn addresses_registry(&self, words: &[String]) -> bool {
        self.by_words(words).is_some() || words.first().is_some_and(|w| self.is_group(w))
    }

    /// True when the registry answers text rather than an agent (see [`Registry::handle`]).
    pub fn is_command(&self, text: &str) -> bool {
        !matches!(self.route(text), Route::Agent)
    }

    /// Where text goes: the one reading of it that [`Registry::handle`] and
    /// [`Registry::is_command`] share.
    fn route(&self, text: &str) -> Route {
        match args::words(text) {
            Ok(words) if self.addresses_registry(&words) => Route::Command(words),
            Ok(_) => Route::Agent,
            Err(e @ ArgError::ControlCharacters) => {
                Route::Answered(Reply::of(ReplyKind::Usage, e.to_string()))
            }
            Err(e) if self.first_word_is_group(text) => {
                Route::Answered(self.unsplittable(text, &e))
            }
            Err(_) => Route::Agent,
        }
    }

    fn first_word_is_group(&self, text: &str) -> bool {
        text.split_whitespace()
            .next()
            .is_some_and(|w| self.is_group(w))
    }

    /// The admission decision for a command, exactly as `invoke` asks it.
    pub fn admission(&self, caller: &Caller, command: &Command, raw: &RawInput) -> Verdict {
        authorize(
            &caller.actor,
            &command.action,
            &command.resource_for(raw, caller),
        )
    }

    /// Runs one request: find, authorize before parsing, parse, handle.
    pub async fn invoke(&self, caller: &Caller, raw: RawInput, services: &Services) -> Reply {
        self.invoke_for(caller, raw, services, Wants::Both).await
    }

    /// [`Registry::invoke`] for a surface that will show only one form of the reply.
    pub async fn invoke_for(
        &self,
        caller: &Caller,
        raw: RawInput,
        services: &Services,
        wants: Wants,
    ) -> Reply {
        trace::record_actor(caller);
        let (command, rest) = match self.find(&raw) {
            Ok(found) => found,
            Err(reply) => return reply,
        };
        let resource = command.resource_for(&raw, caller);
        let verdict = authorize(&caller.actor, &command.action, &resource);
        if let Verdict::Deny(_) = &verdict {
            let refusal = Refusal {
                action: command.action.clone(),
                resource,
                verdict,
            };
            return refuse_command(services, caller, command, &refusal);
        }
        let parsed = match (&raw, rest) {
            (RawInput::Json { args, .. }, _) => command.args.parse_json(args),
            (_, words) => command.args.parse_words(&words.unwrap_or_default()),
        };
        let args = match parsed {
            Ok(a) => a,
            Err(e) => {
                return Reply::of(
                    ReplyKind::Usage,
                    reply_texts::usage_error(&e.to_string(), &command.usage()),
                );
            }
        };
        let ctx = Ctx {
            caller,
            services,
            registry: self,
            command,
            wants,
        };
        (command.handler)(&ctx, args).await
    }

    /// The command a raw input names and the words after its own, or the reply to an input
    /// that names none.
    fn find(&self, raw: &RawInput) -> Result<(&Command, Option<Vec<String>>), Reply> {
        let words = match raw {
            RawInput::Json { id, .. } => {
                return self.by_id(id).map(|c| (c, None)).ok_or_else(|| {
                    Reply::of(ReplyKind::UnknownCommand, reply_texts::unknown_command(id))
                });
            }
            RawInput::Words(w) if w.iter().any(|w| args::has_control(w)) => {
                return Err(Reply::of(
                    ReplyKind::Usage,
                    ArgError::ControlCharacters.to_string(),
                ));
            }
            RawInput::Words(w) => w.clone(),
            RawInput::Text(text) => {
                args::words(text).map_err(|e| Reply::of(ReplyKind::Usage, e.to_string()))?
            }
        };
        match self.by_words(&words) {
            Some((c, n)) => Ok((c, Some(words.get(n..).unwrap_or_default().to_vec()))),
            None => Err(self.unknown(&words)),
        }
    }

    /// The reply to words that name no command: a group alone lists its commands; a mistyped
    /// one names the nearest the catalogue has.
    fn unknown(&self, words: &[String]) -> Reply {
        let first = words.first().map(String::as_str).unwrap_or("");
        let members: Vec<&str> = self
            .commands
            .iter()
            .filter_map(|c| c.id.as_str().strip_prefix(first)?.strip_prefix('.'))
            .collect();
        if !members.is_empty() {
            let Some(second) = words.get(1) else {
                return Reply::of(ReplyKind::Usage, reply_texts::group_alone(first, &members));
            };
            let near = suggest::nearest(second, members.iter().copied());
            return Reply::of(
                ReplyKind::UnknownCommand,
                reply_texts::unknown_command_near(
                    &format!("{first} {second}"),
                    near.map(|n| format!("{first} {n}")).as_deref(),
                ),
            );
        }
        let groups: BTreeSet<&str> = self
            .commands
            .iter()
            .filter_map(|c| c.id.as_str().split('.').next())
            .collect();
        let near = suggest::nearest(first, groups);
        Reply::of(
            ReplyKind::UnknownCommand,
            reply_texts::unknown_command_near(first, near),
        )
    }

    /// What every surface does with text: a command goes to `invoke`; anything else starts an
    /// agent run through the launcher, recorded in the caller's origin channel.
    ///
    /// Text whose first word is a command group always gets the registry's reply — usage or
    /// unknown command, also when it does not split into words (an unclosed quote) — never an
    /// agent run. Text with control characters is refused whatever it is for.
    pub async fn handle(&self, caller: &Caller, text: &str, services: &Services) -> Handled {
        self.handle_for(caller, text, services, Wants::Both).await
    }

    /// [`Registry::handle`] for a surface that will show only one form of the reply.
    pub async fn handle_for(
        &self,
        caller: &Caller,
        text: &str,
        services: &Services,
        wants: Wants,
    ) -> Handled {
        match self.route(text) {
            Route::Command(words) => Handled::reply(
                self.invoke_for(caller, RawInput::Words(words), services, wants)
                    .await,
            ),
            Route::Answered(reply) => {
                trace::record_actor(caller);
                Handled::reply(reply)
            }
            Route::Agent => {
                trace::record_actor(caller);
                start_agent_run(caller, text, None, services).await
            }
        }
    }

    /// The reply to command text that does not split into words: the problem, and the usage
    /// of the command its plain words name (or the help hint).
    fn unsplittable(&self, text: &str, e: &ArgError) -> Reply {
        let plain: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        let usage = match self.by_words(&plain) {
            Some((c, _)) => c.usage(),
            None => reply_texts::unknown_command(plain.first().map(String::as_str).unwrap_or("")),
        };
        Reply::of(
            ReplyKind::Usage,
            reply_texts::usage_error(&format!("the command text has {e}"), &usage),
        )
    }

    /// A refusal in a handler that authorized the resource it loaded, in the command's deny
    /// shape.
    pub fn refuse(ctx: &Ctx<'_>, action: &Action, resource: &Resource, verdict: &Verdict) -> Reply {
        let refusal = Refusal {
            action: action.clone(),
            resource: resource.clone(),
            verdict: verdict.clone(),
        };
        refuse_command(ctx.services, ctx.caller, ctx.command, &refusal)
    }

    /// The channel tier of `config set` has its own 🚫.
    pub(crate) fn refuse_channel_config(ctx: &Ctx<'_>, refusal: &Refusal, channel: &str) -> Reply {
        deny(
            ctx.services,
            ctx.caller,
            refusal,
            Denial::ChannelConfig(channel),
        )
    }
}
