//! What a command agent is built with beyond its program: the environment it inherits, and
//! its network (the broker's per-run proxy with its model endpoint, or the host's).

use anyhow::Context;
use authz_core::AgentName;

use crate::{Secrets, config};

/// What a command agent inherits of `env_allow`: never a `SWITCHBOARD_*` variable (those are
/// Switchboard's to set for the run), and, on the broker's network, no key any agent's
/// `key_env` or `api_key_env` names (the gateway holds a model key, never the program).
pub(crate) fn env(secrets: &Secrets, network: &config::AgentNetwork) -> Vec<(String, String)> {
    secrets
        .agent_env
        .iter()
        .filter(|(k, _)| !k.starts_with("SWITCHBOARD_"))
        .filter(|(k, _)| !network.through_broker() || !secrets.api_keys.contains_key(k))
        .cloned()
        .collect()
}

/// A command agent's network: through the broker's per-run proxy, with its model endpoint's
/// real key read from the server's environment (the agent gets a placeholder), or the host's.
pub(crate) fn network(
    secrets: &Secrets,
    name: &AgentName,
    network: &config::AgentNetwork,
) -> anyhow::Result<agents::CommandNetwork> {
    let config::AgentNetwork::Broker { model } = network else {
        return Ok(agents::CommandNetwork::Host);
    };
    let model = match model {
        None => None,
        Some(m) => {
            // A key the environment lacks refuses each model request, saying so (`config
            // check` warns): like a program missing from PATH, it does not stop `serve`.
            let key = match &m.key_env {
                Some(var) => match secrets.api_keys.get(var) {
                    Some(key) => agents::netproxy::ModelKey::Key(key.clone()),
                    None => agents::netproxy::ModelKey::Missing(var.clone()),
                },
                None => agents::netproxy::ModelKey::Unneeded,
            };
            Some(
                agents::netproxy::ModelEndpoint::new(m.api, m.url.clone(), key)
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("agents.{name}.model_endpoint"))?,
            )
        }
    };
    Ok(agents::CommandNetwork::Broker {
        forwarder: agents::netproxy::forwarder::binary(),
        model,
    })
}
