//! The broker in front of every tool call (docs/broker.md, "One tool call, step by step"):
//! authz `repo:use`, then the rule table bounded by the ratchet (collecting the approvals it
//! asks for), then `decide` at the moment of execution (`redecide` after a person approved an
//! `Ask`, with the grants, state and time as they are then). A tool runs only with a
//! `Decision`; every refusal is text the model reads, and every step is a run event.
//!
//! An approver is shown exactly what will run: a call whose arguments are longer than
//! [`MAX_SHOWN_ARGUMENTS`], or hold text the sanitiser would change (a control sequence, a
//! credential), is refused before anyone is asked. A run with nobody to ask (its principal is
//! not a person) is refused at an ask at once. A taint rise is stored before the result that
//! raised it reaches the model; when it cannot be, the result is withheld and the gate closes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use authz_core::{Actor, Resource};
use broker::args::{self, ToolName};
use broker::ratchet::Ratchet;
use broker::{
    CallId, Decision, Outcome, RuleDecision, RuleKey, RuleTable, SessionId, SessionState,
    Timestamp, ToolGrants, ToolRequest, decide, redecide,
};
use serde::Deserialize;
use serde_json::Value;

use super::blanks::{MAX_SHOWN_BLANKS, longest_blank_run};
use super::exec::{ExecLimits, Executor};
use super::host_form::in_host_form;
use super::in_force::{InForce, PolicyWatch};
use super::mcp::McpServers;
use super::{NetworkAllowed, ToolCall, ToolGate, broker_tool_definitions};
use crate::EventSink;
use crate::sandbox::SANDBOX_WORKSPACE;

/// The time, as the gate reads it (tests move it).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The most of a call's arguments an approver can be shown whole (every approver shows them
/// whole: the terminal, the run page, Slack, the reviewer). A longer call that needs an
/// approval is refused, never shown cut.
pub const MAX_SHOWN_ARGUMENTS: usize = 4096;

/// Who an approval is asked of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The run's principal, where they are.
    Person,
    /// A reviewer agent.
    Reviewer,
}

/// What an approver is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub run: SessionId,
    /// The person the run acts for: the only one whose answer counts.
    pub principal: Option<authz_core::ActorId>,
    pub action: String,
    pub tool: String,
    /// The call's arguments exactly as the model wrote them (at most
    /// [`MAX_SHOWN_ARGUMENTS`] bytes, and nothing the sanitiser would change).
    pub arguments: String,
    pub who: Who,
}

/// An approver's answer. Anything but `Yes` is a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Yes,
    No,
    TimedOut,
    /// Nobody can be asked (a schedule, an unattended call).
    Nobody,
    /// The ask could not be recorded where it could be answered.
    Unrecorded,
}

impl Answer {
    fn as_str(self) -> &'static str {
        match self {
            Answer::Yes => "approved",
            Answer::No => "refused",
            Answer::TimedOut => "timed out",
            Answer::Nobody => "nobody to ask",
            Answer::Unrecorded => "the ask could not be recorded",
        }
    }
}

#[async_trait]
pub trait Approver: Send + Sync {
    async fn approve(&self, question: &Question) -> Answer;
}

/// The approver of a run with nobody to ask: every ask is refused.
pub struct NobodyToAsk;

#[async_trait]
impl Approver for NobodyToAsk {
    async fn approve(&self, _question: &Question) -> Answer {
        Answer::Nobody
    }
}

/// Everything one run's gate needs, gathered before the agent starts.
pub struct GateSettings {
    pub session: SessionId,
    /// The agent actor, acting for the run's principal.
    pub agent: Actor,
    /// The repo whose workspace the run is in, as a resource, when it is in one.
    pub repo: Option<Resource>,
    pub grants: ToolGrants,
    pub table: RuleTable,
    pub agent_kind: Option<String>,
    /// The agent's model, when known (a command agent's is not): a rule naming a model
    /// matches no call of an unknown one.
    pub model: Option<String>,
    pub workspace: PathBuf,
    /// Whether `workspace/.git` is the run's own repository.
    pub repository: bool,
    /// From the project's policy file, read from the base commit.
    pub deny_read: Vec<String>,
    /// The base's protected paths (`Workspace::protected`).
    pub protected: Vec<String>,
    /// Folded from the events of the run's ancestors and its own.
    pub ratchet: Ratchet,
    /// Likewise.
    pub state: SessionState,
    pub limits: ExecLimits,
    /// Who answers a person's ask; `None` when the run's principal is not a person (a
    /// schedule, a bearer token, an Access service token): its asks are refused at once.
    pub person: Option<Arc<dyn Approver>>,
    pub reviewer: Arc<dyn Approver>,
    /// An unanswered ask is refused after this.
    pub approval_timeout: Duration,
    pub clock: Clock,
    /// The MCP servers of the run's channel and the org, already listed.
    pub mcp: McpServers,
    /// The policy in force, read before each call (`None`: the one above, for the run).
    pub watch: Option<Arc<dyn PolicyWatch>>,
}

pub(super) struct Mutable {
    pub(super) state: SessionState,
    pub(super) ratchet: Ratchet,
    calls: u64,
    /// How many times the session's taint rose in this gate.
    rises: u64,
    /// Why every later call is refused, once something the run's safety needs could not be
    /// recorded.
    pub(super) closed: Option<&'static str>,
}

pub struct BrokerGate {
    session: SessionId,
    in_force: Mutex<Arc<InForce>>,
    watch: Option<Arc<dyn PolicyWatch>>,
    grants: ToolGrants,
    pub(super) agent_kind: Option<String>,
    pub(super) model: Option<String>,
    pub(super) person: Option<Arc<dyn Approver>>,
    reviewer: Arc<dyn Approver>,
    approval_timeout: Duration,
    clock: Clock,
    pub(super) executor: Executor,
    mutable: Mutex<Mutable>,
    /// The sandbox's stub files live here; removed with the gate.
    _scratch: tempfile::TempDir,
}

/// Why a call was refused, as the model reads it.
pub(super) fn refused(why: impl std::fmt::Display) -> String {
    format!("refused: {why}")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RestrictArgs {
    promise: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WidenArgs {
    promise: String,
    now: String,
}

impl BrokerGate {
    pub fn new(settings: GateSettings) -> Result<BrokerGate, String> {
        let workspace = settings
            .workspace
            .canonicalize()
            .map_err(|e| format!("the workspace {}: {e}", settings.workspace.display()))?;
        let scratch = tempfile::Builder::new()
            .prefix("switchboard-tools-")
            .tempdir()
            .map_err(|e| format!("the tools' scratch directory: {e}"))?;
        Ok(BrokerGate {
            session: settings.session,
            in_force: Mutex::new(Arc::new(InForce::new(
                settings.agent,
                settings.repo,
                settings.table,
                settings.watch.as_deref(),
            ))),
            watch: settings.watch,
            grants: settings.grants,
            agent_kind: settings.agent_kind,
            model: settings.model,
            person: settings.person,
            reviewer: settings.reviewer,
            approval_timeout: settings.approval_timeout,
            clock: settings.clock,
            executor: Executor {
                workspace,
                repository: settings.repository,
                deny_read: settings.deny_read,
                protected: settings.protected,
                limits: settings.limits,
                scratch: scratch.path().to_owned(),
                sandbox: std::sync::OnceLock::new(),
                mcp: settings.mcp,
            },
            mutable: Mutex::new(Mutable {
                state: settings.state,
                ratchet: settings.ratchet,
                calls: 0,
                rises: 0,
                closed: None,
            }),
            _scratch: scratch,
        })
    }

    /// The policy this call decides under: the one in force now (resolved again only when a
    /// reload happened since the last call).
    pub(super) fn in_force(&self) -> Arc<InForce> {
        let mut cell = match self.in_force.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(fresh) = self.watch.as_deref().and_then(|w| cell.after_reload(w)) {
            *cell = Arc::new(fresh);
        }
        cell.clone()
    }

    pub(super) fn with<T>(&self, f: impl FnOnce(&mut Mutable) -> T) -> T {
        let mut guard = match self.mutable.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// The call as an approver is shown it, or the refusal when it cannot be shown whole and
    /// as it is: too long, or holding what the sanitiser would change.
    fn shown(&self, call: &ToolCall, action: &str, sink: &EventSink) -> Result<String, String> {
        if call.arguments.len() > MAX_SHOWN_ARGUMENTS {
            return Err(refused(format!(
                "{action} needs an approval, and its arguments ({} bytes) are too long to show whole (at most {MAX_SHOWN_ARGUMENTS}); nothing was asked. Split the work into smaller calls",
                call.arguments.len()
            )));
        }
        if sink.clean(&call.arguments) != call.arguments || sink.clean(&call.name) != call.name {
            return Err(refused(format!(
                "{action} needs an approval, and its arguments hold text that cannot be shown as it is (a control sequence or a credential); nothing was asked"
            )));
        }
        let run = longest_blank_run(&call.arguments);
        if run > MAX_SHOWN_BLANKS {
            return Err(refused(format!(
                "{action} needs an approval, and its arguments hold {run} blank characters in a row, which would push what follows out of an approver's sight; nothing was asked"
            )));
        }
        Ok(call.arguments.clone())
    }

    /// Asks `who` to allow the call; anything but a yes is the refusal the model reads. The
    /// approver is shown the call exactly as it will run ([`BrokerGate::shown`]).
    pub(super) async fn require(
        &self,
        call: &ToolCall,
        action: &str,
        who: Who,
        sink: &EventSink,
    ) -> Result<(), String> {
        let approver = match who {
            Who::Person => match &self.person {
                Some(person) => person,
                None => return Err(self.nobody_to_ask(action, sink).await),
            },
            Who::Reviewer => &self.reviewer,
        };
        let question = Question {
            run: self.session.clone(),
            principal: self.in_force().principal().cloned(),
            action: action.to_owned(),
            tool: call.name.clone(),
            arguments: self.shown(call, action, sink)?,
            who,
        };
        let (whom, needs) = match who {
            Who::Person => ("the person this run acts for", "a person's"),
            Who::Reviewer => ("a reviewer agent", "a reviewer's"),
        };
        sink.event(
            "approval",
            &format!("asked {whom} to allow {action} ({})", call.name),
        )
        .await;
        let answer = tokio::time::timeout(self.approval_timeout, approver.approve(&question))
            .await
            .unwrap_or(Answer::TimedOut);
        sink.event("approval", &format!("{action}: {}", answer.as_str()))
            .await;
        if answer == Answer::Yes {
            Ok(())
        } else {
            Err(refused(format!(
                "{action} needs {needs} approval: {}",
                answer.as_str()
            )))
        }
    }

    /// The refusal of an ask in a run whose principal is not a person: at once, never after
    /// a wait.
    pub(super) async fn nobody_to_ask(&self, action: &str, sink: &EventSink) -> String {
        let in_force = self.in_force();
        let principal = in_force.principal().unwrap_or(&in_force.agent.id);
        sink.event(
            "approval",
            &format!("{action}: nobody to ask ({principal} is not a person)"),
        )
        .await;
        refused(format!(
            "{action} needs a person's approval: nobody to ask (this run acts for {principal}, which is not a person at a keyboard)"
        ))
    }

    /// Step 2: the rule table, bounded by the ratchet. `Ok(true)` when a person already said
    /// yes to this very call (`approved`: earlier in the run, for a connection's host).
    pub(super) async fn rules(
        &self,
        now: &InForce,
        call: &ToolCall,
        action: &str,
        approved: bool,
        sink: &EventSink,
    ) -> Result<bool, String> {
        let key = RuleKey {
            action,
            tool: broker::agent_tools::key_tool(action, &call.name),
            model: self.model.as_deref(),
            agent_kind: self.agent_kind.as_deref(),
        };
        let answer = now.table.lookup(&key);
        let decision = self.with(|m| m.ratchet.bound(action, answer.decision));
        if decision == RuleDecision::Deny {
            let why = if decision < answer.decision {
                format!("{action} is beyond what this run promised (restrict_self)")
            } else if answer.capped_by_org {
                format!("the org policy denies {action}")
            } else {
                format!("the {} policy denies {action}", answer.source.as_str())
            };
            return Err(refused(why));
        }
        if approved {
            return Ok(true);
        }
        // The person half first: with nobody to ask, the reviewer is not asked in vain.
        if decision.needs_a_person() && self.person.is_none() {
            return Err(self.nobody_to_ask(action, sink).await);
        }
        if decision.needs_a_reviewer() {
            self.require(call, action, Who::Reviewer, sink).await?;
        }
        if decision.needs_a_person() {
            self.require(call, action, Who::Person, sink).await?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Step 3: the grant set at the moment of execution; with whether a person was asked
    /// about this very call here (an `ask` grant) and said yes. `shown` is the call as an
    /// approver sees it (an outside agent's own, whose grant is asked about as `call`).
    pub(super) async fn grant(
        &self,
        call: &ToolCall,
        shown: &ToolCall,
        action: &str,
        person_said_yes: bool,
        sink: &EventSink,
    ) -> Result<(Decision, bool), String> {
        let number = self.with(|m| {
            m.calls += 1;
            m.calls
        });
        let request = ToolRequest {
            session: self.session.clone(),
            call: CallId(number),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        };
        let state = self.with(|m| m.state);
        match decide(request, &self.grants, state, (self.clock)()) {
            Outcome::Allowed(decision) => Ok((decision, false)),
            Outcome::Denied(denial) => {
                Err(refused(format!("{action}: {}", denial.reason.as_str())))
            }
            Outcome::Ask(ask) => {
                if !person_said_yes {
                    self.require(shown, action, Who::Person, sink).await?;
                }
                // The grants, state and time as they are now, after the wait.
                let state = self.with(|m| m.state);
                redecide(ask, &self.grants, state, (self.clock)())
                    .map(|decision| (decision, !person_said_yes))
                    .map_err(|denial| refused(format!("{action}: {}", denial.reason.as_str())))
            }
        }
    }

    async fn restrict(&self, call: &ToolCall, sink: &EventSink) -> String {
        let promise = match serde_json::from_str::<RestrictArgs>(&call.arguments) {
            Ok(a) => a.promise,
            Err(e) => {
                return refused(format!(
                    "restrict_self takes {{\"promise\": \"<action>=<decision>\"}}: {e}"
                ));
            }
        };
        let holder = broker::ratchet::Holder {
            model: self.model.as_deref(),
            agent_kind: self.agent_kind.as_deref(),
        };
        let in_force = self.in_force();
        let event = match self.with(|m| m.ratchet.propose(&promise, &in_force.table, holder)) {
            Ok(event) => event,
            Err(e) => return refused(e),
        };
        let body = match serde_json::to_string(&event) {
            Ok(body) => body,
            Err(e) => return refused(format!("the promise could not be recorded: {e}")),
        };
        // Stored before it binds: a promise that is not in the log does not exist.
        if !sink.event_kept("restriction", &body).await {
            return refused("the promise could not be recorded; nothing changed");
        }
        match self.with(|m| m.ratchet.apply(&event)) {
            Ok(()) => format!(
                "promised: {promise}. It binds you and your sub-agents for the rest of this run."
            ),
            Err(e) => refused(e),
        }
    }

    /// `widen_self`: `policy.widen`, decided by the rule table like any action (no rule: ask;
    /// nobody to ask: refused). Only after the answer does the broker write the event that
    /// replaces the named promise.
    async fn widen(&self, call: &ToolCall, sink: &EventSink) -> Result<String, String> {
        let args: WidenArgs = serde_json::from_str(&call.arguments).map_err(|e| {
            refused(format!(
                "widen_self takes {{\"promise\": \"<as written>\", \"now\": \"<action>=<decision>\"}}: {e}"
            ))
        })?;
        let event = self
            .with(|m| m.ratchet.widen_request(&args.promise, &args.now))
            .map_err(refused)?;
        self.rules(&self.in_force(), call, "policy.widen", false, sink)
            .await?;
        let body = serde_json::to_string(&event)
            .map_err(|e| refused(format!("the widening could not be recorded: {e}")))?;
        if !sink.event_kept("restriction", &body).await {
            return Err(refused(
                "the widening could not be recorded; nothing changed",
            ));
        }
        self.with(|m| m.ratchet.apply(&event)).map_err(refused)?;
        Ok(format!("widened: {} is now {}", args.promise, args.now))
    }

    /// The session's taint raised by a result's `label`, stored before the result reaches
    /// anyone (a child run reads it); when it cannot be, the gate closes and this says why.
    /// `Ok(true)` when it rose.
    pub(super) async fn raise(
        &self,
        label: broker::Label,
        sink: &EventSink,
    ) -> Result<bool, &'static str> {
        let raised = self.with(|m| {
            let before = m.state;
            m.state = before.after(label);
            if m.state != before {
                m.rises += 1;
            }
            (m.state != before).then_some(m.state)
        });
        if let Some(state) = raised {
            let body =
                serde_json::json!({"taint": state.taint.as_str(), "untrusted": state.untrusted});
            if !sink.event_kept("taint", &body.to_string()).await {
                let why =
                    "the session's taint could not be recorded, so this run's tools are closed";
                self.with(|m| m.closed = Some(why));
                return Err(why);
            }
        }
        Ok(raised.is_some())
    }

    /// A command agent's connection, decided as an `http_fetch` of `url` would be: repo:use,
    /// the rule table (with its asks), the grants; the result's label raises the taint.
    async fn connection(
        &self,
        url: &str,
        approved: bool,
        sink: &EventSink,
    ) -> Result<NetworkAllowed, String> {
        if let Some(why) = self.with(|m| m.closed) {
            return Err(refused(why));
        }
        let call = ToolCall {
            id: "network".to_owned(),
            name: "http_fetch".to_owned(),
            arguments: serde_json::json!({ "url": url }).to_string(),
        };
        let action = "net.fetch";
        // One policy decides the whole call, whatever a reload does meanwhile.
        let now = self.in_force();
        if !now.may_use_repo() {
            return Err(refused(
                "the person this run acts for may not use this repository",
            ));
        }
        let said_yes = self.rules(&now, &call, action, approved, sink).await?;
        let (decision, asked_here) = self.grant(&call, &call, action, said_yes, sink).await?;
        let taint_rose = self.raise(decision.label(), sink).await.map_err(refused)?;
        sink.event(
            "network",
            &format!("{url}: allowed by grant {}", decision.grant()),
        )
        .await;
        Ok(NetworkAllowed {
            literal_hosts: decision.hosts().to_vec(),
            // A yes to this very connection, never one another call got meanwhile.
            person_said_yes: (said_yes && !approved) || asked_here,
            taint_rose,
        })
    }

    async fn answer(&self, call: &ToolCall, sink: &EventSink) -> Result<String, String> {
        if let Some(why) = self.with(|m| m.closed) {
            return Err(refused(why));
        }
        if call.name == "restrict_self" {
            return Ok(self.restrict(call, sink).await);
        }
        if call.name == "widen_self" {
            return self.widen(call, sink).await;
        }
        // The action names the rule; a call whose tool or arguments do not parse has none,
        // and `decide` refuses it (no-grant, invalid-arguments) without asking anyone.
        let parsed = ToolName::parse(&call.name).map(|tool| args::parse(tool, &call.arguments));
        let action = match &parsed {
            Some(Ok(args)) => Some(args.action()),
            _ => None,
        };
        let person_said_yes = match &action {
            Some(action) => {
                // One policy decides the whole call, whatever a reload does meanwhile.
                let now = self.in_force();
                if !now.may_use_repo() {
                    return Err(refused(
                        "the person this run acts for may not use this repository",
                    ));
                }
                self.rules(&now, call, action, false, sink).await?
            }
            None => false,
        };
        let action = action.unwrap_or_else(|| call.name.clone());
        let (decision, _) = self
            .grant(call, call, &action, person_said_yes, sink)
            .await
            .map_err(|refusal| match &parsed {
                // The model reads why its arguments were refused, not only that they were.
                Some(Err(why)) => format!("{refusal} ({why})"),
                _ => refusal,
            })?;
        let result = self.executor.run(&decision).await.map_err(refused)?;
        let label = decision.label();
        self.raise(label, sink)
            .await
            .map_err(|why| refused(format!("{why}; the result is withheld")))?;
        sink.event(
            "tool",
            &format!(
                "{} {action}: allowed by grant {}",
                call.name,
                decision.grant()
            ),
        )
        .await;
        sink.event("tool_result", &result_event(&call.name, &result, label))
            .await;
        Ok(result)
    }
}

/// A tool result as its run event: its size and label always; its text (capped and sanitised
/// like every event) only when labelled `private`, so what a grant marks sensitive or secret
/// reaches the model that was granted it and not everyone who may read the run.
pub(super) fn result_event(tool: &str, result: &str, label: broker::Label) -> String {
    let untrusted = if label.untrusted { ", untrusted" } else { "" };
    let head = format!(
        "{tool} returned {} bytes ({}{untrusted})",
        result.len(),
        label.class.as_str()
    );
    if label.class == broker::DataClass::Private {
        format!("{head}:\n{result}")
    } else {
        format!("{head}; the text is not recorded above private")
    }
}

#[async_trait]
impl ToolGate for BrokerGate {
    fn definitions(&self) -> Vec<Value> {
        let mut tools = broker_tool_definitions();
        tools.extend(self.executor.mcp.definition());
        tools
    }

    fn instructions(&self) -> String {
        format!(
            "Your workspace is {}. Tool paths are absolute; {SANDBOX_WORKSPACE} names the same directory (it is where `shell` and `git` run), so either form works in every tool. Every tool call is checked against this project's policy; a refused call says why, so do not repeat it.",
            self.executor.workspace.display()
        )
    }

    async fn network(
        &self,
        url: &str,
        approved: bool,
        sink: &EventSink,
    ) -> Result<NetworkAllowed, String> {
        let allowed = self.connection(url, approved, sink).await;
        if let Err(refusal) = &allowed {
            sink.event("network", &format!("{url}: {refusal}")).await;
        }
        allowed
    }

    async fn agent_call(
        &self,
        call: &super::AgentCall,
        sink: &EventSink,
    ) -> Result<super::AgentAllowed, String> {
        let decided = self.decide_agent_call(call, sink).await;
        if let Err(refusal) = &decided {
            sink.event("tool", &format!("{}: {refusal}", call.shown.name))
                .await;
        }
        decided
    }

    fn taint_rises(&self) -> u64 {
        self.with(|m| m.rises)
    }

    async fn agent_result(&self, label: broker::Label, sink: &EventSink) -> Result<bool, String> {
        self.raise(label, sink).await.map_err(refused)
    }

    async fn call(&self, call: &ToolCall, sink: &EventSink) -> String {
        let call = &in_host_form(call, &self.executor.workspace);
        match self.answer(call, sink).await {
            Ok(result) => result,
            Err(refusal) => {
                sink.event("tool", &format!("{}: {refusal}", call.name))
                    .await;
                refusal
            }
        }
    }
}
