//! The dispatcher's settings and the agents it may run, with their defaults (written once
//! here; the server's config reads them).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agents::{AgentBackend, OutputCaps};
use authz_core::AgentName;
use memory::MemorySettings;

use crate::{RepoSettings, ToolProfile};

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
    /// Whether nothing decides the agent's traffic (a command agent with the host's network:
    /// `network = "host"`, or unsandboxed). A run an agent starts is never of such an agent,
    /// so an agent whose network the broker decides cannot step out of it through a child.
    pub undecided_network: bool,
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
pub const DEFAULT_CHANNEL_DIRECTORY_TIMEOUT: Duration = authz_core::DIRECTORY_ANSWER_BOUND;

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
