//! A command agent's network: the host's, or only the run's proxy ([`crate::netproxy`]),
//! where the broker decides every host; what the program is told about it; and the run's
//! `network` event, which says which.

use std::path::PathBuf;

use async_trait::async_trait;

use super::{Boxed, CommandBackend, PROXY_SOCKET_NAME};
use crate::netproxy::{ModelEndpoint, PLACEHOLDER_KEY, Routes, RunProxy};
use crate::sandbox::host_user;
use crate::{AgentJob, EventSink};

/// A sandboxed command agent's network.
#[derive(Debug, Clone)]
pub enum CommandNetwork {
    /// The host's network: nothing decides its traffic (`network = "host"`).
    Host,
    /// No network but the run's proxy, where the broker decides every host
    /// ([`crate::netproxy`]).
    Broker {
        /// The `switchboard` binary, run inside the sandbox as the forwarder; `None` where
        /// this process is not it (a library's test): such a run does not start.
        forwarder: Option<PathBuf>,
        /// The agent's declared model endpoint, reached through the gateway.
        model: Option<ModelEndpoint>,
    },
}

/// The model APIs' key variables: a broker-network program gets none of their values, whatever
/// the operator's `env_allow` passes (a placeholder stands in); its real key is the gateway's.
const KEY_VARS: [&str; 5] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
];

/// The proxy variables a broker-network program gets (every spelling programs read).
const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

impl CommandBackend {
    /// What a program whose network goes through the broker is told: the proxy in every
    /// spelling, its model endpoint's base URL (the gateway) with a placeholder key, and
    /// Switchboard's MCP endpoint through the gateway. Empty for any other program.
    pub(super) fn network_env(&self, job: &AgentJob, boxed: &Boxed) -> Vec<(String, String)> {
        if boxed.forwarder.is_none() {
            return Vec::new();
        }
        let proxy = crate::netproxy::sandbox_proxy_url();
        let mut env: Vec<(String, String)> = PROXY_VARS
            .iter()
            .map(|k| ((*k).to_owned(), proxy.clone()))
            .collect();
        env.push(("NO_PROXY".to_owned(), String::new()));
        env.push(("no_proxy".to_owned(), String::new()));
        for key in KEY_VARS {
            if self.settings.env.iter().any(|(k, _)| k == key) {
                env.push((key.to_owned(), PLACEHOLDER_KEY.to_owned()));
            }
        }
        if let CommandNetwork::Broker {
            model: Some(model), ..
        } = &self.settings.network
        {
            let (base_env, base) = model.api.base_url_env();
            env.push((base_env.to_owned(), base));
            env.push((model.api.key_env().to_owned(), PLACEHOLDER_KEY.to_owned()));
        }
        // The broker's own tools, for this run alone.
        env.push((
            "SWITCHBOARD_BROKER_MCP_URL".to_owned(),
            format!("{proxy}{}", crate::netproxy::agent_routes::BROKER_MCP),
        ));
        if let Some(mcp) = job.mcp_url.as_deref().and_then(|u| url::Url::parse(u).ok()) {
            env.push((
                "SWITCHBOARD_MCP_URL".to_owned(),
                format!("{proxy}{}", mcp.path()),
            ));
        }
        env
    }
}

/// The gate of a call that is not a run: it allows no host (`ToolGate::network`'s default).
struct NoHosts;

#[async_trait]
impl crate::tools::ToolGate for NoHosts {
    fn definitions(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }

    fn instructions(&self) -> String {
        String::new()
    }

    async fn call(&self, _call: &crate::tools::ToolCall, _sink: &EventSink) -> String {
        "refused: this call has no tools".to_owned()
    }

    // `network` is the trait's own: every host refused.
}

impl CommandBackend {
    /// The run's proxy on its socket, for a program whose network goes through the broker:
    /// the run's broker gate decides every host. A run with no gate does not start.
    pub(super) fn start_proxy(
        &self,
        job: &AgentJob,
        boxed: &mut Boxed,
        sink: &EventSink,
    ) -> Result<(), String> {
        if boxed.forwarder.is_none() {
            return Ok(());
        }
        // A call that is not a run (the memory model, the reviewer) has no grants: it reaches
        // its model and nothing else.
        let gate: std::sync::Arc<dyn crate::tools::ToolGate> = match &job.tools {
            Some(tools) => tools.0.clone(),
            None => std::sync::Arc::new(NoHosts),
        };
        let model = match &self.settings.network {
            CommandNetwork::Broker { model, .. } => model.clone(),
            CommandNetwork::Host => None,
        };
        let routes = Routes {
            model,
            mcp: job.mcp_url.as_deref().and_then(|u| url::Url::parse(u).ok()),
            // The hooks' credential: the run's own token, which only its sandbox holds.
            credential: Some(job.agent_token.clone()).filter(|t| !t.is_empty()),
        };
        let socket = boxed.scratch.path().join(PROXY_SOCKET_NAME);
        let proxy = RunProxy::start(&socket, gate, routes, sink.clone())
            .map_err(|e| format!("{}: {e}", socket.display()))?;
        // The sandbox's user must be able to connect (write permission on the socket).
        if let Some(user) = host_user() {
            std::os::unix::fs::lchown(&socket, Some(user.uid), Some(user.gid))
                .map_err(|e| format!("{}: {e}", socket.display()))?;
        }
        boxed.proxy = Some(proxy);
        Ok(())
    }

    /// The run's `network` event: what decides its traffic.
    pub(super) fn network_said(&self, boxed: &Boxed) -> String {
        match (&self.settings.network, boxed.proxy.is_some()) {
            (_, true) => {
                "the agent's network goes through the broker: each host is decided as net.fetch"
                    .to_owned()
            }
            (CommandNetwork::Host, _) => {
                "the agent has the host's network (network = \"host\"): its traffic is not decided"
                    .to_owned()
            }
            (CommandNetwork::Broker { .. }, false) => {
                "the agent has the host's network: its traffic is not decided".to_owned()
            }
        }
    }
}
