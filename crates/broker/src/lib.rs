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
//! (`decision`, `rules`, `args`, `grant` take time and state as arguments; only
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
//! Who calls it: `agents::tools::BrokerGate` for every tool call of an `openai` agent (MCP
//! servers' tools included), of a Claude Code agent (through its hook) and of any agent on the
//! broker's MCP tools (built per run by `dispatch`). [`git`] is the `git` tool's vetted
//! set of subcommands and arguments, checked when its arguments are parsed.
//!
//! Also a dependency of `cli` (`ask --policy-rule` checked by `parse_run_rule` before the
//! run starts; `dispatch` parses the run's rules again when it builds the run's gate). It depends on
//! `authz-core` (a session is a `RunId`), serde, toml, sha2 and url; no I/O in a decision.
//!
//! | module | what it holds |
//! | --- | --- |
//! | `request` | `ToolRequest`: one call as the model asked for it (session, call number, tool name, raw JSON arguments); nothing trusted until `decide` parses it |
//! | `args` | `ToolName` (read_file, write_file, shell, http_fetch, git, mcp; `restrict_self` is not one), `parse` (strict JSON per tool: unknown fields, wrong types, relative or escaping paths refused; a git call outside `git`'s surface refused), `ToolArgs::action()` (`fs.read`, `git.<sub>`, `mcp.<server>.<tool>`, …), `tool_for_action`, `normalise`, `inside`, `host_matches` |
//! | `agent_tools` | `AGENT_TOOLS`: an outside agent's tool names and the Switchboard tool each stands for (`Bash` is `shell`), read by a rule's `tool` field and by a call's lookup; `tool_rule_name` (`TodoWrite` is `todo_write`) |
//! | `git` | the `git` tool's vetted surface: `SUBCOMMANDS`, `check` (arguments that write, run a program, read another repository or set config refused, each with why) |
//! | `grant` | `Timestamp` (µs), `DataClass`, `Mode`, `Grant` (+ `validate`: per-tool shapes, `sha256` of the canonical text), `ToolGrants` (an agent's tool grants; id order, duplicates refused, SHA-256 once, index by tool), `GrantSpec` (`{workspace}` paths, `resolve`) |
//! | `decision` | `decide`, `redecide`, `Decision` / `Ask` (private fields, `Debug` only; pinned by its doctests), `Outcome`, `Denial`, `DenyReason`, `SessionState`, `Label` |
//! | `rules` | `RuleDecision` (five, most restrictive first), `NamePattern`, `ToolRule`, `Layer` (indexed by action), `RuleTable` (run → project → org → shipped → `ask`, under the org ceiling; a child run's table is built without run rules, since only `ask --policy-rule` gives a run any), `shipped_rules`, `parse_run_rule` |
//! | `file` | the project's `.switchboard/agent-policy.toml` (`deny_read`, `[policy] agents`, `rules`) and `OrgPolicyToml`; every fault `file:line:column: what was expected` |
//! | `ratchet` | `Promise`, `RatchetEvent` (JSON bodies `restricted` / `widened`), `Ratchet::fold` (ancestors first), `ceiling`, `bound`, `held` (for a class: the most restrictive decision of any action under it), `propose` (refuses more than is held), `widen_request` (the same target, wider) |
//!
//! Names: `ToolGrants`, `ToolRule` and `decision` are named apart from authz-core's `GrantSet`,
//! `Rule` and `policy`; `Timestamp` is authz-core's, re-exported.
//!
//! Tests: `tests/broker/policy.rs` (decide and redecide tables), `tests/broker/property.rs` (decide and
//! redecide against `tests/broker/support/oracle.rs`, paths, hosts; `PROPTEST_CASES` overrides the
//! count).

pub mod agent_tools;
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
