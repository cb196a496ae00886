//! # broker: every tool call an agent makes
//!
//! An agent is an actor acting for its run's principal. For each tool call the broker asks, in
//! this order, and a deny at any step ends it (docs/broker.md, "One tool call, step by step"):
//!
//! 1. authz-core: `authorize(agent, repo:use, repo)` for a call inside a repo's workspace;
//! 2. the rule table ([`rules`]): the call's action → one of five decisions;
//! 3. the grant set ([`decision`]): `decide` at the moment of execution.
//!
//! **What it must never do:** read a clock, the environment or a file in a decision function
//! (`policy`, `rules`, `args`, `grant` take time and state as arguments; only
//! [`file::load_project`] reads a file, before a run starts); build a [`decision::Decision`]
//! anywhere but `decide`/`redecide`; widen on error (an unknown tool, bad arguments or an
//! unreadable policy file is a denial or a refusal to start, never an allow).
//!
//! **Invariants:** `decide` never returns a `Decision` for an `ask` grant; `redecide` is the only
//! way from an `Ask` to a `Decision`; the rule table's answer never depends on the order of rules
//! in a file; the org layer is a ceiling nothing below it can exceed.
//!
//! [`ratchet`] folds an agent's `restrict_self` promises; the sandbox that enforces deny_read
//! for programs is `agents::sandbox`.
//!
//! Who calls it: `agents::tools::BrokerGate` for every tool call of an `openai` agent, MCP
//! servers' tools included (built per run by `dispatch`). [`git`] is the `git` tool's vetted
//! set of subcommands and arguments, checked when its arguments are parsed.

pub mod args;
pub mod decision;
pub mod file;
pub mod git;
pub mod grant;
pub mod ratchet;
pub mod request;
pub mod rules;

pub use decision::{
    Ask, Decision, Denial, DenyReason, Label, Outcome, SessionState, decide, redecide,
};
pub use grant::{
    DataClass, Grant, GrantError, GrantId, GrantSpec, Hash32, Mode, Timestamp, ToolGrants,
};
pub use request::{CallId, SessionId, ToolRequest};
pub use rules::{RuleAnswer, RuleDecision, RuleKey, RuleSource, RuleTable};
