//! # commands: the registry and every command
//!
//! What it is: the one place commands are defined (id, action, resource, deny shape, one
//! argument schema, handler) and invoked, the same way on every surface:
//! find → `authorize` **before parsing** → on deny, an audit line and the declared deny shape
//! (not_found for point reads, 🚫 for everything else) → parse (usage on error) → handler.
//! And `Registry::handle`, what every surface does with text: a command goes to `invoke`,
//! anything else becomes an agent run through the dispatcher (`dispatch_text`), recorded in
//! the caller's origin channel.
//!
//! What it must never do: decide anything by hand. No comparison of caller ids or channels
//! here (a tidy test greps for them); admission is `authorize`, lists are `predicate_for`
//! handed to the store, point reads `authorize` the loaded resource. A reply never carries a
//! deny reason; the audit line never carries a body, token or run id.
//!
//! Invariants: a refused caller's input is never parsed; a denied point read is byte-identical
//! to a missing resource; every registered command's action has a policy row
//! (`declared_actions` feeds `validate_policy`).

pub mod args;
pub mod catalogue;
pub mod conformance;
pub mod replies;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use authz_core::{Action, Actor, BoxFuture, CommandId, GrantsTable, Resource, Verdict, authorize};
use serde::Serialize;
use serde_json::{Map, Value};
use store::{Store, Timestamp};

pub use args::{ArgError, ArgSpec, Args, ArgsSchema};

/// Where a request came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Surface {
    Slack,
    Http,
    Mcp,
    Access,
    Cli,
    Schedule,
}

impl Surface {
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Slack => "slack",
            Surface::Http => "http",
            Surface::Mcp => "mcp",
            Surface::Access => "access",
            Surface::Cli => "cli",
            Surface::Schedule => "schedule",
        }
    }
}

/// Who is asking, from where. Built by an adapter from what it proved; the actor's origin is
/// context, never authority.
#[derive(Debug, Clone)]
pub struct Caller {
    pub actor: Actor,
    pub surface: Surface,
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

/// What kind of answer a reply is; surfaces map it to a status or an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyKind {
    Ok,
    NotFound,
    Unauthorized,
    /// A conflict with the resource's state (a finished run asked to stop).
    Conflict,
    Usage,
    UnknownCommand,
    /// The part that would do this is not running here.
    Unavailable,
    /// A limit is full; nothing was started. Try again shortly.
    Busy,
    Failed,
}

/// A command's answer: text for text surfaces, data for structured ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reply {
    pub kind: ReplyKind,
    pub text: String,
    pub data: Value,
}

impl Reply {
    pub fn ok(text: impl Into<String>, data: Value) -> Self {
        Reply {
            kind: ReplyKind::Ok,
            text: text.into(),
            data,
        }
    }

    pub fn of(kind: ReplyKind, text: impl Into<String>) -> Self {
        let text = text.into();
        let data = serde_json::json!({ "error": text, "code": kind });
        Reply { kind, text, data }
    }

    /// The not_found reply: identical for a missing and a denied resource.
    pub fn not_found(what: &str) -> Self {
        let text = replies::not_found(what);
        Reply {
            kind: ReplyKind::NotFound,
            data: serde_json::json!({"error": text, "code": "not_found"}),
            text,
        }
    }

    fn unauthorized(text: String) -> Self {
        Reply {
            kind: ReplyKind::Unauthorized,
            text,
            data: serde_json::json!({"error": "unauthorized", "code": "unauthorized"}),
        }
    }
}

/// How a command answers a refused caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyShape {
    /// A point read: `<what> not found`, exactly as for a missing id.
    NotFound(&'static str),
    /// Everything else: 🚫.
    Unauthorized,
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

/// A schedule as the registry declares it (listed by `schedule list`).
#[derive(Debug, Clone)]
pub struct ScheduleInfo {
    pub name: authz_core::ScheduleName,
    pub cron: String,
    pub runs: String,
}

/// What handlers work with.
pub struct Services {
    pub store: Arc<dyn Store>,
    pub table: Arc<GrantsTable>,
    pub audit: Arc<dyn Audit>,
    pub started_at: Timestamp,
    pub now: fn() -> Timestamp,
    pub schedules: Vec<ScheduleInfo>,
    pub version: &'static str,
    /// Runs agents; `None` in a process that runs none (a CLI command against the store).
    pub dispatcher: Option<Arc<dispatch::Dispatcher>>,
}

/// One invocation's context.
pub struct Ctx<'a> {
    pub caller: &'a Caller,
    pub services: &'a Services,
    pub registry: &'a Registry,
    pub command: &'a Command,
}

/// One deny, for the operator: actor, action, resource type, reason token, surface — never a
/// body, a token or a run id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditLine {
    pub actor: String,
    pub action: String,
    pub resource: &'static str,
    pub reason: &'static str,
    pub surface: &'static str,
}

impl std::fmt::Display for AuditLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[authz] deny actor={} action={} resource={} reason={} surface={}",
            self.actor, self.action, self.resource, self.reason, self.surface
        )
    }
}

impl AuditLine {
    pub fn new(caller: &Caller, action: &Action, resource: &Resource, verdict: &Verdict) -> Self {
        let reason = match verdict {
            Verdict::Deny(r) => r.token(),
            Verdict::Allow => "allow",
        };
        AuditLine {
            actor: caller.actor.id.to_string(),
            action: action.to_string(),
            resource: resource.resource_type().as_str(),
            reason,
            surface: caller.surface.as_str(),
        }
    }
}

/// Where audit lines go.
pub trait Audit: Send + Sync {
    fn deny(&self, line: AuditLine);
}

/// Audit lines on the `audit` tracing target.
pub struct TracingAudit;

impl Audit for TracingAudit {
    fn deny(&self, line: AuditLine) {
        tracing::warn!(target: "audit", "{line}");
    }
}

/// Audit lines kept in memory (tests, `explain`-style tooling).
#[derive(Default)]
pub struct MemoryAudit(Mutex<Vec<AuditLine>>);

impl MemoryAudit {
    pub fn lines(&self) -> Vec<AuditLine> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Audit for MemoryAudit {
    fn deny(&self, line: AuditLine) {
        if let Ok(mut v) = self.0.lock() {
            v.push(line);
        }
    }
}

/// Why a command cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefineError {
    #[error("command {0} is defined twice")]
    Duplicate(String),
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

    /// True when text is for the registry rather than an agent (see [`Registry::handle`]).
    pub fn is_command(&self, text: &str) -> bool {
        args::words(text).is_ok_and(|w| self.addresses_registry(&w))
    }

    /// Words that begin with a command's words, or whose first word is a command group
    /// (`runs frobnicate`: a mistyped command, answered by the registry, not an agent).
    fn addresses_registry(&self, words: &[String]) -> bool {
        let group = |first: &String| {
            self.commands
                .iter()
                .any(|c| c.id.as_str().split('.').next() == Some(first.as_str()))
        };
        self.by_words(words).is_some() || words.first().is_some_and(group)
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
        let (command, rest) = match &raw {
            RawInput::Text(_) | RawInput::Words(_) => {
                let words = match &raw {
                    RawInput::Words(w) if w.iter().any(|w| args::has_control(w)) => {
                        return Reply::of(
                            ReplyKind::Usage,
                            ArgError::ControlCharacters.to_string(),
                        );
                    }
                    RawInput::Words(w) => w.clone(),
                    RawInput::Text(text) => match args::words(text) {
                        Ok(w) => w,
                        Err(e) => return Reply::of(ReplyKind::Usage, e.to_string()),
                    },
                    RawInput::Json { .. } => Vec::new(),
                };
                match self.by_words(&words) {
                    Some((c, n)) => (c, Some(words.get(n..).unwrap_or_default().to_vec())),
                    None => {
                        let first = words.first().map(String::as_str).unwrap_or("");
                        return Reply::of(
                            ReplyKind::UnknownCommand,
                            replies::unknown_command(first),
                        );
                    }
                }
            }
            RawInput::Json { id, .. } => match self.by_id(id) {
                Some(c) => (c, None),
                None => return Reply::of(ReplyKind::UnknownCommand, replies::unknown_command(id)),
            },
        };
        let resource = command.resource_for(&raw, caller);
        let verdict = authorize(&caller.actor, &command.action, &resource);
        if let Verdict::Deny(_) = &verdict {
            services
                .audit
                .deny(AuditLine::new(caller, &command.action, &resource, &verdict));
            return match command.deny {
                DenyShape::NotFound(what) => Reply::not_found(what),
                DenyShape::Unauthorized => Reply::unauthorized(replies::unauthorized(
                    &command.text_form(),
                    &services.table.admins_hint(),
                )),
            };
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
                    replies::usage_error(&e.to_string(), &command.usage()),
                );
            }
        };
        let ctx = Ctx {
            caller,
            services,
            registry: self,
            command,
        };
        (command.handler)(&ctx, args).await
    }

    /// What every surface does with text: a command goes to `invoke`; anything else starts an
    /// agent run through the dispatcher, recorded in the caller's origin channel.
    ///
    /// Text whose first word is a command group (`runs frobnicate`) is a mistyped command and
    /// gets the registry's unknown-command reply rather than an agent run.
    pub async fn handle(&self, caller: &Caller, text: &str, services: &Services) -> Handled {
        match args::words(text) {
            Ok(words) if self.addresses_registry(&words) => Handled {
                reply: self.invoke(caller, RawInput::Words(words), services).await,
                run: None,
            },
            _ => dispatch_text(caller, text, None, services).await,
        }
    }

    /// A refusal as a point read or a 🚫, for handlers that authorize the resource they loaded.
    pub fn refuse(ctx: &Ctx<'_>, action: &Action, resource: &Resource, verdict: &Verdict) -> Reply {
        ctx.services
            .audit
            .deny(AuditLine::new(ctx.caller, action, resource, verdict));
        match ctx.command.deny {
            DenyShape::NotFound(what) => Reply::not_found(what),
            DenyShape::Unauthorized => Reply::unauthorized(replies::unauthorized(
                &ctx.command.text_form(),
                &ctx.services.table.admins_hint(),
            )),
        }
    }
}

/// A surface's answer: the reply, and the run when one was started (to follow or wait on).
pub struct Handled {
    pub reply: Reply,
    pub run: Option<dispatch::Started>,
}

/// Starts an agent run for `caller` (text that is not a command, or `ask`), recorded in the
/// caller's origin channel. `agent` is an agent chosen outside the text.
pub async fn dispatch_text(
    caller: &Caller,
    text: &str,
    agent: Option<authz_core::AgentName>,
    services: &Services,
) -> Handled {
    let Some(dispatcher) = &services.dispatcher else {
        return Handled {
            reply: Reply::of(
                ReplyKind::Unavailable,
                replies::needs_dispatcher("an agent run"),
            ),
            run: None,
        };
    };
    let Some(origin) = caller.actor.origin.clone() else {
        // Every surface sets the origin; a caller without one has nowhere to record a run.
        return Handled {
            reply: Reply::of(ReplyKind::Failed, replies::no_run_channel()),
            run: None,
        };
    };
    let request = dispatch::RunRequest {
        actor: caller.actor.clone(),
        surface: caller.surface.as_str(),
        channel: origin.channel_id,
        thread_key: origin.thread_key,
        text: text.to_owned(),
        agent,
    };
    match dispatcher.start(request).await {
        Ok(started) => Handled {
            reply: started_reply(&started),
            run: Some(started),
        },
        Err(e) => Handled {
            reply: dispatch_refusal(caller, e, services),
            run: None,
        },
    }
}

/// A run as data: a started run's reply, what `ask --json` prints, what `POST /ingress?wait=`
/// answers.
pub fn outcome_json(run: &store::RunRecord) -> Value {
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
pub fn outcome_text(run: &store::RunRecord) -> String {
    match (&run.answer, &run.error) {
        (Some(answer), _) => answer.clone(),
        (None, Some(error)) => format!("run {} {}: {error}", run.id, run.status),
        (None, None) => format!("run {} {}", run.id, run.status),
    }
}

/// The reply to a started run.
pub(crate) fn started_reply(started: &dispatch::Started) -> Reply {
    let run = &started.run;
    Reply::ok(
        replies::run_started(run.id.as_str(), &run.agent, run.channel_id.as_str()),
        outcome_json(run),
    )
}

/// Why the dispatcher started nothing, as a reply; a refusal leaves its audit line.
pub(crate) fn dispatch_refusal(
    caller: &Caller,
    e: dispatch::DispatchError,
    services: &Services,
) -> Reply {
    use dispatch::DispatchError as E;
    match e {
        E::Refused(refusal) => {
            let dispatch::Refusal {
                action,
                resource,
                verdict,
            } = *refusal;
            services
                .audit
                .deny(AuditLine::new(caller, &action, &resource, &verdict));
            let agent = match &resource {
                Resource::Agent { name } => name.to_string(),
                _ => String::new(),
            };
            Reply::unauthorized(replies::agent_refused(
                &agent,
                &services.table.admins_hint(),
            ))
        }
        E::Busy(_) | E::ShuttingDown => Reply::of(ReplyKind::Busy, e.to_string()),
        E::UnknownAgent { .. } | E::NoAgent | E::NoCodingAgent(_) | E::Workspace(_) => {
            Reply::of(ReplyKind::Usage, e.to_string())
        }
        E::Store(err) => {
            tracing::error!(error = %err, "recording a run failed");
            Reply::of(ReplyKind::Failed, replies::store_failed())
        }
        E::Token(err) => {
            tracing::error!(error = %err, "making a run's tokens failed");
            Reply::of(
                ReplyKind::Failed,
                "the run could not be started; the operator log has the details",
            )
        }
    }
}

/// A 🚫 with its own text (the channel tier of `config set`).
pub fn refuse_with(
    ctx: &Ctx<'_>,
    action: &Action,
    resource: &Resource,
    verdict: &Verdict,
    text: String,
) -> Reply {
    ctx.services
        .audit
        .deny(AuditLine::new(ctx.caller, action, resource, verdict));
    Reply::unauthorized(text)
}
