//! Tool calls from a model. The `openai` back end offers the tools a [`ToolGate`] defines and
//! hands it every call the model makes (so do the broker's MCP tools on a run's socket, and
//! Claude Code's hook its own calls, as [`AgentCall`]s); the gate's answer (a result or a refusal, both text) is
//! what the model reads back. [`BrokerGate`] is the gate that puts the broker in front of every
//! call: authz `repo:use`, the rule table (with the ratchet and approvals), then `decide` at the
//! moment of execution, and only then the tool.

mod agent_gate;
mod agent_paths;
mod beneath;
mod blanks;
mod broker_gate;
mod capped;
mod exec;
mod host_form;
mod in_force;
mod mcp;
pub mod net;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::EventSink;

pub use beneath::NOT_WITHIN;
pub use broker_gate::{
    Answer, Approver, BrokerGate, Clock, GateSettings, MAX_SHOWN_ARGUMENTS, NobodyToAsk, Question,
    Who,
};
pub use exec::{ExecLimits, REFUSED_READ};
pub use in_force::{PolicyNow, PolicyWatch};
pub use mcp::{McpServer, McpServers, McpTimeouts};

/// One call as the model made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The model's id for the call, echoed back with the result.
    pub id: String,
    pub name: String,
    /// The model's raw JSON text.
    pub arguments: String,
}

/// Answers a model's tool calls.
#[async_trait]
pub trait ToolGate: Send + Sync {
    /// The tools offered to the model (chat-completions `tools` entries).
    fn definitions(&self) -> Vec<Value>;
    /// What the model is told about its tools before the request (a system message).
    fn instructions(&self) -> String;
    /// The text the model reads back for one call: a result or a refusal. Each step worth
    /// keeping is a run event on `sink`.
    async fn call(&self, call: &ToolCall, sink: &EventSink) -> String;
    /// A command agent's connection to `url`'s host and port (its proxy asks: the URL is
    /// `https://host:port/` for a tunnel), decided as `net.fetch` on that host exactly as an
    /// `http_fetch` call is. `approved`: the run's principal already said yes to this host and
    /// port in this run, so they are not asked again (every other step is decided again). A
    /// refusal is the text the proxy answers with.
    async fn network(
        &self,
        url: &str,
        approved: bool,
        sink: &EventSink,
    ) -> Result<NetworkAllowed, String> {
        let _ = (url, approved, sink);
        Err("refused: this run's tools decide no network".to_owned())
    }
    /// An outside agent's own tool call (Claude Code's, through its hook), decided before it
    /// runs exactly as the Switchboard call it stands for would be: repo:use, the rule table
    /// for each of its actions (with its asks), the grants, the path as the executor would
    /// open it. `Ok` carries the label of what the call will return, for
    /// [`ToolGate::agent_result`]; a refusal is the text the agent reads.
    async fn agent_call(&self, call: &AgentCall, sink: &EventSink) -> Result<AgentAllowed, String> {
        let _ = (call, sink);
        Err("refused: this run's tools decide no agent's own calls".to_owned())
    }
    /// How many times the run's taint has risen in this gate: a caller that sees it move
    /// closes what it decided before (the run's proxy, its connections).
    fn taint_rises(&self) -> u64 {
        0
    }
    /// An allowed agent call's label: the session's taint raised by it and stored (when the
    /// call is allowed, before it runs, and again when its result comes, before the agent reads
    /// it). `Ok(true)` when it rose; a refusal when it could not be stored (the gate is closed
    /// then).
    async fn agent_result(&self, label: broker::Label, sink: &EventSink) -> Result<bool, String> {
        let _ = (label, sink);
        Err("refused: this run's tools decide no agent's own calls".to_owned())
    }
}

/// An outside agent's call the broker allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentAllowed {
    /// The label of what it will return.
    pub label: broker::Label,
    /// Whether the run's principal said yes to this very call.
    pub person_said_yes: bool,
}

/// One tool call an outside agent runs itself, as the broker decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCall {
    /// The agent's own call (its tool name, its input as JSON): what an approver is shown,
    /// and the `tool` the rule table reads (through `broker::agent_tools`).
    pub shown: ToolCall,
    /// The actions it is decided as, each by the rule table: `Bash` running `git push` is
    /// `shell.exec` and `git.push`.
    pub actions: Vec<String>,
    /// The Switchboard call whose grant it needs (`Bash` is `shell`, `Read` is `read_file`);
    /// `None` for an action no grant kind covers (`net.search`, `agent.task`, another tool's
    /// `tool.<name>`): the rule table alone decides it.
    pub granted_as: Option<ToolCall>,
    /// What a call no grant covers returns is untrusted text (`WebSearch`'s results).
    pub untrusted_result: bool,
}

/// A connection the broker allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkAllowed {
    /// The winning grant's hosts: an internal address is reached only when one names it.
    pub literal_hosts: Vec<String>,
    /// Whether the run's principal said yes to it just now.
    pub person_said_yes: bool,
    /// Whether deciding it raised the session's taint: every connection decided before then
    /// is closed (its grant may not hold at the new taint).
    pub taint_rose: bool,
}

/// A job's tools, when its agent has any.
#[derive(Clone)]
pub struct Tools(pub Arc<dyn ToolGate>);

impl fmt::Debug for Tools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tools(..)")
    }
}

fn function(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            },
        },
    })
}

/// The broker's tools, as a model sees them. Paths are absolute.
pub fn broker_tool_definitions() -> Vec<Value> {
    let string = json!({"type": "string"});
    vec![
        function(
            "read_file",
            "Read a text file. The path is absolute.",
            json!({"path": string}),
            &["path"],
        ),
        function(
            "write_file",
            "Write a text file, replacing it. The path is absolute.",
            json!({"path": string, "content": string}),
            &["path", "content"],
        ),
        function(
            "shell",
            "Run a shell command (no network). cwd is absolute; it defaults to none.",
            json!({"command": string, "cwd": string}),
            &["command"],
        ),
        function(
            "http_fetch",
            "Fetch a URL (GET, HEAD or POST).",
            json!({"url": string, "method": {"type": "string", "enum": ["GET", "HEAD", "POST"]}}),
            &["url"],
        ),
        function(
            "git",
            &format!(
                "Run one git subcommand in cwd (absolute), in this run's own repository (its history is one commit: the base, with denied files as stubs). Offered: {}.",
                broker::git::SUBCOMMANDS.join(", ")
            ),
            json!({"subcommand": string, "args": {"type": "array", "items": string}, "cwd": string}),
            &["subcommand", "cwd"],
        ),
        function(
            "widen_self",
            "Ask to replace one of your promises, named exactly as you wrote it, with a wider one, e.g. promise \"net.*=deny\", now \"net.*=ask\". The project's policy for policy.widen decides; usually a person must approve.",
            json!({"promise": string, "now": string}),
            &["promise", "now"],
        ),
        function(
            "restrict_self",
            "Promise to do at most <decision> with an action or class for the rest of this run and its sub-agents, e.g. \"net.*=deny\" or \"fs.write=ask\". A promise cannot be lifted by you.",
            json!({"promise": string}),
            &["promise"],
        ),
    ]
}
