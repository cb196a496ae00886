//! # agents: the back ends that do a run's work
//!
//! What it is: one trait, [`AgentBackend`], and three implementations — [`CommandBackend`]
//! (any program: the request on stdin or as an argument, each stdout line an event; Claude
//! Code is one, started by [`claude_code`] so each of its tool calls passes the broker),
//! [`OpenAiBackend`] (any OpenAI-compatible chat-completions endpoint, streaming) and
//! [`EchoBackend`] (built in, deterministic, needs nothing outside the process).
//!
//! What it must never do: decide anything itself (the dispatcher admitted the run before a
//! back end sees it; a tool call is decided by the broker's functions, which
//! [`tools::BrokerGate`] calls, and runs only with the `Decision` they return), read the
//! environment or config files (the server hands each back end its
//! settings, the allow-listed environment included; the one file read is the workspace's own
//! `.switchboard/agent-policy.toml`, for its deny_read), let agent text out unsanitised, or
//! start a program unsandboxed when its sandbox cannot be made ([`sandbox`]).
//!
//! Invariants:
//! - Agent-supplied text (events, answer, error, friction) passes [`Sanitizer`] where it
//!   enters: every [`SinkItem`], and every [`AgentOutcome`] that carries text, can only be
//!   built through an [`EventSink`], which cleans and caps them. The two outcomes built
//!   elsewhere (`crashed`, `abandoned`) carry only fixed words.
//! - Output is bounded: each event at `OutputCaps::event_bytes`, all events together at
//!   `OutputCaps::total_bytes` (past it events are dropped and one `output_capped` friction
//!   is recorded), the answer at `OutputCaps::answer_bytes`. An event the run's safety needs
//!   (a taint rise, a promise) is never dropped: [`EventSink::event_kept`] waits until the
//!   store has it, and the gate fails closed when it cannot.
//! - Cancellation is honoured: a back end returns promptly once its token is cancelled, and
//!   the command back end kills the program's whole process group.
//!
//! ## The back ends
//!
//! `AgentBackend::run(job, sink, cancel) -> AgentOutcome`. `EventSink` is the only way to emit an
//! event or friction and the only way to build an outcome, so every agent-supplied text passes
//! the `Sanitizer` (control sequences, credential shapes, capability tokens and any link's
//! `token=` value, configured secrets by value, another run's id or thread key) and the
//! `OutputCaps` (per event, total with one `output_capped` friction, answer).
//!
//! - `command`: its own process group, `env_clear` + the allow-list the server passes +
//!   `SWITCHBOARD_RUN_ID`, `SWITCHBOARD_AGENT_TOKEN`, `SWITCHBOARD_MEMORY_FILE` (the memory
//!   block in a 0600 temp file removed when the run returns), `SWITCHBOARD_MCP_URL` when MCP is
//!   on; stdout lines are events, the last block the answer; stderr is friction on a non-zero
//!   exit; the group is killed on cancel and when the program exits. It works in the job's
//!   `Workspace` (the run's own directory, with the project's deny_read names the dispatcher read
//!   from the repo's base), or in a temporary directory of its own for a call that is not a run.
//!   The program runs under `sandbox` unless `sandbox = false` and its project denies no file; a
//!   bare program name is looked up on the program's own `PATH` and bound read-only where found;
//!   `sandbox_bind` / `sandbox_read_only` paths are bound at their own place (never one reaching
//!   `CommandSettings::private` or the run's `Workspace::private`). What it keeps of the output is
//!   bounded as it streams: capped lines, the answer's block, a bounded tail of stderr. A
//!   sandboxed one's network (`CommandNetwork`) is the broker's unless it says host: its sandbox
//!   unshares the network, its run's proxy (`netproxy`) serves a socket bound in, and the
//!   `switchboard` binary starts the program as the forwarder; each host is decided by the
//!   job's gate (`ToolGate::network`), and each run says in a `network` event which it has.
//! - `openai`: streaming chat completions; each completed line is an event; tool calls are
//!   joined from the stream by index and answered by the job's `Tools` for a bounded number of
//!   rounds, and a job without tools ends its run with an error saying so. It gets the memory
//!   block as a system message of its own.
//! - `echo`: deterministic (`behaviour` answer, fail or stall; `delay_ms`); says it runs no
//!   model, and how many memory records it was given per scope, never their text.
//!
//! ## Modules
//!
//! | module | what it holds |
//! | --- | --- |
//! | `sandbox` | `Sandbox::prepare(spec)` then `command(program, args)`: bwrap with `--unshare-all` (`--share-net` only for `Network::Shared`; a broker-network agent's proxy socket bound at `/run/switchboard/proxy.sock`), `--cap-drop ALL`, `/usr` and named paths of `/etc` read-only, `/dev`, `/proc`, a tmpfs `/tmp` of `SandboxLimits::tmp_bytes`, the configured binds (each must exist; before the workspace, so none covers what follows; a command agent's read-write ones are per-run copies, `copied_for_run`), the workspace read-write at `/workspace` (`SANDBOX_WORKSPACE`; `inside` maps a host path there), `/proc/sys` read-only, its `.git` pinned with its `config` read-only (a run in a repo), the whole `.switchboard/` read-only (made when missing), each deny_read name covered by a stub (created empty first when missing; a symlink or directory is refused), `--seccomp` with the filter `seccomp` builds, `--chdir` the workspace; the program runs as `prlimit --nproc=N:N -- choom -n 1000 -- program` (`SandboxLimits::processes`; the OOM killer's first choice). Under a root server (`host_user()`, `[sandbox] user_id`/`group_id`, never 0) each command is staged first (`unshare` → a shell binding every source under a tmpfs at `/mnt`, the workspace as an overlay there, the stub and memory file copied → `setpriv` as that user → bwrap), and the workspace and writable binds are handed to that user (`hand_over`). bwrap and prlimit are probed once per process, as the programs will run (`available()`, which the start-up summary reports); missing, or unable to make namespaces, is `SandboxError`, and nothing starts unsandboxed |
//! | `netproxy` | a command agent's network: `RunProxy` (one run's socket: the head read, `CONNECT` and `http://` decided as `net.fetch` through the run's gate, one question at a time, a yes or a no kept per host and port, the connection to a checked address; origin-form requests to the gateway; at most 64 connections, a head within 30 s) |
//! | `netproxy/head.rs` | the request head, bounded and refused whole when malformed (two lengths, a length beside chunking, user information, an `https://` absolute form) |
//! | `netproxy/upstream.rs` | resolved once and checked (`tools::net::checked`), connected, relayed; a plain request's `Host` is the decided one, with `Connection: close` |
//! | `netproxy/model.rs`, `model_body.rs` | the model gateway: its API's paths only (plain segments), the program's key dropped and the real one put on, the headers an API reads and no others, a body asking the provider to reach a host refused; bodies bounded (32 MiB, chunked or not) |
//! | `netproxy/forwarder.rs` | `switchboard sandbox-forward`: listens on the sandbox's loopback, runs the program, relays to the socket, exits with the program's status |
//! | `claude_code` | Claude Code as an agent: its arguments (`-p`, `dontAsk`, `--strict-mcp-config`, no settings sources), environment (a fresh `CLAUDE_CONFIG_DIR`) and managed settings (the only hooks and permission rules: `sandbox-hook pre-tool-use` / `post-tool-use`) |
//! | `claude_code/mapping.rs` | one Claude Code call as the broker decides it (`AgentCall`): its actions and the Switchboard call whose grant it needs (`Bash` → `shell.exec` under `shell`, …) |
//! | `claude_code/shell_scan.rs` | the git subcommands a `Bash` line plainly runs (through `sh -c`, `$(…)`, `eval`, wrappers, paths), a computed program name, an alias |
//! | `netproxy/agent_routes.rs` | the run's own endpoints on its socket: the hooks (with the run's credential, checked before a body is read; `pre-tool-use` decides through `ToolGate::agent_call` and raises the taint through `ToolGate::agent_result` before it allows; `post-tool-use` raises it again and records the result) and the broker's MCP tools |
//! | `tools/agent_paths.rs` | an outside agent's file path checked as the executor's: beneath its grant (`openat2`), deny_read, no write into `.git/`, `.switchboard/`, a protected path or through a link |
//! | `netproxy/broker_mcp.rs` | the broker's tools over MCP (streamable HTTP, JSON answers), each call `ToolGate::call` as in the `openai` loop |
//! | `netproxy/hook_client.rs` | `switchboard sandbox-hook`: the hook's side, failing closed (exit 2) on every fault |
//! | `command/output.rs` | stdout lines read with their cap; the answer's block (the last, or the whole output for Claude Code) |
//! | `tools/agent_gate.rs` | `BrokerGate`'s decision of an outside agent's own call: repo:use, the rule table for each action (a denied one first), the grant of the tool it stands for |
//! | `command/network.rs` | `CommandNetwork`, what the program is told (the proxy in every spelling, the gateway's base URL and a placeholder key, `SWITCHBOARD_MCP_URL` through the forwarder), the run's `network` event |
//! | `seccomp` | the classic BPF filter, written to the sandbox's scratch directory and opened at fd 9 by `sh` before it execs bwrap |
//! | `names` | a path folded as a case-insensitive file system sees it (the file tools' deny check; dispatch's `keep/` and `base.rs`) |
//! | `sanitize` | `Sanitizer` |
//! | `tools/mod.rs` | `ToolGate` (what `openai` offers and how each call is answered) |
//! | `tools/broker_gate.rs` | `BrokerGate`, the broker in front of every call: authz `repo:use` for the agent acting for its principal; the rule table bounded by the ratchet, collecting a reviewer's and a person's yes through `Approver` ports under a timeout; `decide` at the moment of execution and `redecide` after an approved `Ask`; `restrict_self` written as a `restriction` event before it binds; `widen_self` (`policy.widen`) decided by the table, its event written only after the answer; a result's label raising the taint, a `taint` event stored (`EventSink::event_kept`) before the result reaches the model, else the gate closes; an approver asked only about a call it can be shown whole and as it is, and only when the run's principal is a person |
//! | `tools/beneath.rs` | a path opened beneath the root of the grant that allows it (`openat2`, `RESOLVE_BENEATH \| RESOLVE_NO_MAGICLINKS`), never resolved on the host; one refusal, naming only the path sent, for missing and outside |
//! | `tools/exec.rs` | the executor: a tool runs only with a `Decision`; every path and working directory opened through `beneath`, deny_read refused by name (as sent, and where the open landed), nothing written into `.git` or `.switchboard/`, atomic writes that never follow a link, `shell` and `git` in the sandbox with the network unshared (the git tool on the run's own repository, with safe config), stdout and stderr read with their cap as they stream and the program stopped there; `http_fetch` resolved once, checked by `net`, connected to the checked address, no proxy, no redirect; an `mcp` call sent over the run's session to its server |
//! | `tools/net.rs` | internal addresses, in every IPv6 form; `checked`: a host resolved once, its addresses checked against the grant's literal ones (and their ports) |
//! | `tools/host_form.rs` | a call's `path` or `cwd` in the sandbox's form rewritten to the host's |
//! | `tools/capped.rs` | how every tool cuts its output |
//! | `tools/mcp.rs` | `McpServers`: the run's configured servers connected and listed with rmcp's Streamable HTTP client at the start, the `mcp` tool definition listing their tools, one session per server, calls bounded by a timeout, results as capped text |
//! | `testing` (feature) | `NotesServer`, a real rmcp server on loopback; `init_repository` / `git_repository` (scripted models are test-support's) |
//!
//! Tests (`tests/agents/`, one binary): `backends.rs`, `sandbox.rs`, `tool_loop.rs` (every
//! call passes the broker); the binary's boundary in
//! `crates/cli/tests/switchboard/agent_boundary.rs`.

pub mod claude_code;
mod command;
mod echo;
pub mod names;
pub mod netproxy;
mod openai;
pub mod sandbox;
pub mod sanitize;
pub mod seccomp;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tools;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use authz_core::{AgentName, RepoSlug, RunId};
use tokio::sync::{mpsc, oneshot};
pub use tokio_util::sync::CancellationToken;

pub use command::{CommandBackend, CommandNetwork, CommandSettings, DEFAULT_PATH, RequestVia};
pub use echo::{EchoBackend, EchoBehaviour, EchoSettings};
pub use openai::{OpenAiBackend, OpenAiSettings};
pub use sanitize::Sanitizer;

/// What a back end is asked to do.
#[derive(Debug, Clone)]
pub struct AgentJob {
    pub run_id: RunId,
    pub agent: AgentName,
    pub request: String,
    /// The memory context block the run was given (docs/memory.md, "What a run is given").
    pub memory: MemoryBlock,
    pub repo: Option<RepoSlug>,
    /// The run's own workspace (`dispatch` makes one per run): where a `command` agent runs
    /// and what its sandbox binds. `None` for a call that is not a run (the memory model, the
    /// reviewer): a `command` back end then works in a temporary directory of its own.
    pub workspace: Option<Workspace>,
    /// Where the agent calls back over MCP, when the MCP surface is on.
    pub mcp_url: Option<String>,
    /// The run-scoped agent token (a JWT); handed to the program, never logged.
    pub agent_token: String,
    /// The tools the agent may call, through the broker (the `openai` back end's tool loop).
    /// `None`: a model that asks for a tool ends its run with an error saying it has none.
    pub tools: Option<tools::Tools>,
}

/// A run's workspace: a directory made for this run alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// The working tree (absolute).
    pub dir: PathBuf,
    /// Whether `dir/.git` is the run's own repository (a run in a repo): in the sandbox it is
    /// pinned in place and its config is read-only.
    pub repository: bool,
    /// The project's deny_read names (read from the base commit before the workspace was
    /// made): no bytes of these are in `dir`, and the sandbox covers each with its stub.
    pub deny_read: Vec<String>,
    /// Project-relative paths the run may read but never change (what git on a person's
    /// machine runs from the tree, the project's `protected` list): read-only in the sandbox,
    /// refused by the file tools.
    pub protected: Vec<String>,
    /// Host paths no bind of an agent's config may reach (the data directory holding every
    /// run's workspace, the repository the base is read from): see `SandboxSpec::private`.
    pub private: Vec<PathBuf>,
}

/// The memory context block as a back end receives it: the rendered text, and how many
/// records came from each scope kind (what the echo agent says instead of the text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryBlock {
    text: String,
    per_scope: Vec<(&'static str, usize)>,
}

impl MemoryBlock {
    /// `per_scope` is `(scope kind, records)`, in the order to show.
    pub fn new(text: String, per_scope: Vec<(&'static str, usize)>) -> Self {
        MemoryBlock { text, per_scope }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// `2 records (org 1, user 1)`, or `none`: counts only, never a record's text.
    pub fn counts(&self) -> String {
        let total: usize = self.per_scope.iter().map(|(_, n)| n).sum();
        if total == 0 {
            return "none".to_owned();
        }
        let parts: Vec<String> = self
            .per_scope
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        let noun = if total == 1 { "record" } else { "records" };
        format!("{total} {noun} ({})", parts.join(", "))
    }
}

/// Limits on what one run may emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputCaps {
    pub event_bytes: usize,
    pub total_bytes: usize,
    pub answer_bytes: usize,
}

impl Default for OutputCaps {
    fn default() -> Self {
        OutputCaps {
            event_bytes: 4 * 1024,
            total_bytes: 1024 * 1024,
            answer_bytes: 64 * 1024,
        }
    }
}

/// What travels from a back end to the dispatcher while a run is live. Built only by
/// [`EventSink`], so its text is always sanitised and capped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkItem {
    Event {
        kind: String,
        body: String,
        /// Answered once the event is in the store, for an event the back end waits on
        /// ([`EventSink::event_kept`]).
        stored: Stored,
    },
    Friction {
        kind: String,
        detail: String,
    },
}

/// The dispatcher's word that an event reached the store (or did not). Most events carry no
/// one waiting; a kept event's sender waits for it.
#[derive(Clone, Default)]
pub struct Stored(Option<Arc<std::sync::Mutex<Option<oneshot::Sender<bool>>>>>);

impl Stored {
    /// Tells whoever waits whether the event was stored; a second answer changes nothing.
    pub fn answer(&self, stored: bool) {
        let sender = self.0.as_ref().and_then(|slot| match slot.lock() {
            Ok(mut s) => s.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        });
        if let Some(sender) = sender {
            let _ = sender.send(stored);
        }
    }
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Stored(waited on)"
        } else {
            "Stored"
        })
    }
}

/// Two items are equal by their text; who waits on them is not part of it.
impl PartialEq for Stored {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for Stored {}

/// How a run ended, as its back end saw it. Built only by [`EventSink`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentOutcome(Ending);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ending {
    Answered(String),
    Failed(String),
    Cancelled,
}

impl AgentOutcome {
    /// The back end's task panicked: a failure in fixed words.
    pub fn crashed() -> Self {
        AgentOutcome(Ending::Failed("the agent back end crashed".to_owned()))
    }

    /// The back end ignored its cancellation and was given up on.
    pub fn abandoned() -> Self {
        AgentOutcome(Ending::Cancelled)
    }

    /// The answer, when the run answered.
    pub fn answer(&self) -> Option<&str> {
        match &self.0 {
            Ending::Answered(a) => Some(a),
            _ => None,
        }
    }

    /// The error, when the run failed.
    pub fn error(&self) -> Option<&str> {
        match &self.0 {
            Ending::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// True when the back end stopped because its cancellation token fired.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.0, Ending::Cancelled)
    }
}

/// Where a back end sends its events and friction, and how it builds its outcome: every
/// text is sanitised and capped here.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<SinkItem>,
    sanitizer: Arc<Sanitizer>,
    caps: OutputCaps,
    emitted: Arc<AtomicUsize>,
    capped: Arc<AtomicBool>,
}

impl EventSink {
    /// A sink and the receiver the dispatcher drains.
    pub fn channel(
        caps: OutputCaps,
        sanitizer: Arc<Sanitizer>,
    ) -> (Self, mpsc::Receiver<SinkItem>) {
        let (tx, rx) = mpsc::channel(256);
        let sink = EventSink {
            tx,
            sanitizer,
            caps,
            emitted: Arc::new(AtomicUsize::new(0)),
            capped: Arc::new(AtomicBool::new(false)),
        };
        (sink, rx)
    }

    /// Sends one event. Past the total cap the event is dropped (and one `output_capped`
    /// friction sent); false when it was dropped or the dispatcher is gone.
    pub async fn event(&self, kind: &str, body: &str) -> bool {
        let body = cap(&self.sanitizer.clean(body), self.caps.event_bytes);
        let total = self.emitted.fetch_add(body.len(), Ordering::Relaxed) + body.len();
        if total > self.caps.total_bytes {
            if !self.capped.swap(true, Ordering::Relaxed) {
                let detail = format!(
                    "the agent's output passed {} bytes; later events were not recorded",
                    self.caps.total_bytes
                );
                self.friction("output_capped", &detail).await;
            }
            return false;
        }
        let kind = cap(&self.sanitizer.clean(kind), 64);
        let item = SinkItem::Event {
            kind,
            body,
            stored: Stored::default(),
        };
        self.tx.send(item).await.is_ok()
    }

    /// Sends an event the run's safety depends on (a taint rise, a promise) and waits until
    /// the store has it. It is never dropped by the total cap (it is cleaned and capped like
    /// any event). True only once it is stored: false when the store refused it or the
    /// dispatcher is gone, and the caller then fails closed.
    pub async fn event_kept(&self, kind: &str, body: &str) -> bool {
        let body = cap(&self.sanitizer.clean(body), self.caps.event_bytes);
        let kind = cap(&self.sanitizer.clean(kind), 64);
        let (tx, rx) = oneshot::channel();
        let stored = Stored(Some(Arc::new(std::sync::Mutex::new(Some(tx)))));
        let item = SinkItem::Event { kind, body, stored };
        if self.tx.send(item).await.is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// Agent text made safe to show outside the run's own record (an approval's question):
    /// the same cleaning every event gets, without sending anything.
    pub fn clean(&self, text: &str) -> String {
        self.sanitizer.clean(text)
    }

    /// Records friction (a tool error, a retry, a timeout, …).
    pub async fn friction(&self, kind: &str, detail: &str) {
        let detail = cap(&self.sanitizer.clean(detail), self.caps.event_bytes);
        let kind = cap(&self.sanitizer.clean(kind), 64);
        // The dispatcher being gone means the run is over; nothing is left to record it in.
        let _ = self.tx.send(SinkItem::Friction { kind, detail }).await;
    }

    pub fn answered(&self, answer: &str) -> AgentOutcome {
        AgentOutcome(Ending::Answered(cap(
            &self.sanitizer.clean(answer),
            self.caps.answer_bytes,
        )))
    }

    /// The run failed for a reason of the server's (a program not found, a sandbox that could
    /// not be made, an endpoint refusing): its readers are told `said`, one sentence; the
    /// `cause` (paths, a program's own words) goes to the operator's log only, inside the
    /// run's span, which the local command line shows too.
    pub fn failed_because(&self, said: &str, cause: &str) -> AgentOutcome {
        tracing::warn!(cause = %self.sanitizer.clean(cause), "{said}");
        self.failed(said)
    }

    pub fn failed(&self, error: &str) -> AgentOutcome {
        AgentOutcome(Ending::Failed(cap(
            &self.sanitizer.clean(error),
            self.caps.event_bytes,
        )))
    }

    pub fn cancelled(&self) -> AgentOutcome {
        AgentOutcome(Ending::Cancelled)
    }

    pub fn caps(&self) -> OutputCaps {
        self.caps
    }
}

/// `s` cut to at most `max` bytes on a character boundary, marked when cut.
pub fn cap(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", s.get(..end).unwrap_or_default())
}

/// An agent back end. `run` returns when the work is done, failed, or `cancel` fired.
#[async_trait]
pub trait AgentBackend: Send + Sync {
    /// `command`, `openai` or `echo`.
    fn kind(&self) -> &'static str;
    async fn run(
        &self,
        job: AgentJob,
        events: EventSink,
        cancel: CancellationToken,
    ) -> AgentOutcome;
}

/// Why a back end's settings are not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("{0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_cuts_on_a_char_boundary_and_marks_it() {
        assert_eq!(cap("hello", 10), "hello");
        let cut = cap("héllo wörld", 6);
        assert!(cut.len() <= 6 && cut.ends_with('…'), "{cut}");
        assert_eq!(cap("abc", 0), "…");
    }

    #[tokio::test]
    async fn the_sink_caps_the_total_and_says_so_once() {
        let caps = OutputCaps {
            event_bytes: 8,
            total_bytes: 20,
            answer_bytes: 5,
        };
        let (sink, mut rx) = EventSink::channel(caps, Arc::new(Sanitizer::new(Vec::new())));
        let mut sent = 0;
        for _ in 0..10 {
            if sink.event("line", "0123456789abcdef").await {
                sent += 1;
            }
        }
        drop(sink.clone());
        assert_eq!(sent, 2, "two events of 8 bytes fit in 20");
        let outcome = sink.answered("a long answer");
        drop(sink);
        let mut items = Vec::new();
        while let Some(i) = rx.recv().await {
            items.push(i);
        }
        let frictions: Vec<_> = items
            .iter()
            .filter(|i| matches!(i, SinkItem::Friction { kind, .. } if kind == "output_capped"))
            .collect();
        assert_eq!(frictions.len(), 1);
        assert!(outcome.answer().unwrap().len() <= 5);
    }
}
