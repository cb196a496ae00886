//! A command agent's `network` and `model_endpoint` keys: whether its traffic goes through
//! the broker's per-run proxy (the default for a sandboxed agent) or the host's network, and
//! the model endpoint the proxy's gateway lets it reach with the real key.

use agents::netproxy::ModelApi;
use serde::Deserialize;
use toml::Spanned;

use super::{LoadError, Text};

/// `network` as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkKey {
    Broker,
    Host,
}

/// `model_endpoint = { api = "anthropic", url = "https://api.anthropic.com", key_env = "…" }`
/// as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEndpointTable {
    pub api: Spanned<String>,
    pub url: Spanned<String>,
    pub key_env: Option<Spanned<String>>,
}

/// A command agent's network, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentNetwork {
    /// The host's network: its traffic is not decided.
    Host,
    /// Only the run's proxy: every host decided by the broker.
    Broker { model: Option<ModelEndpointSpec> },
}

/// The agent's declared model endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelEndpointSpec {
    pub api: ModelApi,
    pub url: url::Url,
    /// The server's environment variable holding the real key; none sends no key.
    pub key_env: Option<String>,
}

impl AgentNetwork {
    pub fn through_broker(&self) -> bool {
        matches!(self, AgentNetwork::Broker { .. })
    }
}

/// The agent's network from its `network`, `model_endpoint` and `sandbox`: through the
/// broker unless it says `network = "host"` or runs unsandboxed (`sandbox = false`, which
/// cannot say `network = "broker"`: nothing would hold the program to the proxy).
pub(super) fn agent_network(
    t: &Text<'_>,
    network: Option<&Spanned<NetworkKey>>,
    model_endpoint: Option<&Spanned<ModelEndpointTable>>,
    sandbox: bool,
) -> Result<AgentNetwork, LoadError> {
    let kind = match network {
        Some(n) if *n.get_ref() == NetworkKey::Broker && !sandbox => {
            return Err(t.at(
                n.span().start,
                "network = \"broker\" needs the sandbox (it is what keeps the program to the proxy); remove sandbox = false, or say network = \"host\"",
            ));
        }
        Some(n) => *n.get_ref(),
        None if sandbox => NetworkKey::Broker,
        None => NetworkKey::Host,
    };
    let model = model_endpoint.map(|m| endpoint(t, m)).transpose()?;
    match (kind, model) {
        (NetworkKey::Host, Some(_)) => Err(t.at(
            model_endpoint.map_or(0, |m| m.span().start),
            "model_endpoint is what the broker's proxy lets the agent reach; with network = \"host\" (or sandbox = false) nothing reads it: remove it, or use network = \"broker\"",
        )),
        (NetworkKey::Host, None) => Ok(AgentNetwork::Host),
        (NetworkKey::Broker, model) => Ok(AgentNetwork::Broker { model }),
    }
}

fn endpoint(t: &Text<'_>, m: &Spanned<ModelEndpointTable>) -> Result<ModelEndpointSpec, LoadError> {
    let m = m.get_ref();
    let api = ModelApi::parse(m.api.get_ref()).ok_or_else(|| {
        t.at(
            m.api.span().start,
            "api is \"anthropic\" (Claude Code) or \"openai\" (Codex, OpenAI-compatible servers)",
        )
    })?;
    let raw = m.url.get_ref();
    if let Some(why) =
        super::urls::base_url_fault(raw).or_else(|| super::urls::secret_safe_fault(raw))
    {
        return Err(t.at(
            m.url.span().start,
            format!("must be the endpoint's https URL (http only on loopback), like \"https://api.anthropic.com\"; here {why}"),
        ));
    }
    let url = url::Url::parse(raw).map_err(|e| t.at(m.url.span().start, e.to_string()))?;
    let key_env = match &m.key_env {
        Some(k) if !is_env_name(k.get_ref()) => {
            return Err(t.at(
                k.span().start,
                "key_env names an environment variable, like \"ANTHROPIC_API_KEY\"",
            ));
        }
        Some(k) => Some(k.get_ref().clone()),
        None => None,
    };
    Ok(ModelEndpointSpec { api, url, key_env })
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{err as fault, ok};
    use crate::config::{AgentNetwork, BackendSpec};

    fn network_of(toml: &str) -> AgentNetwork {
        let c = ok(toml);
        match &c.agent_specs.values().next().unwrap().backend {
            BackendSpec::Command { network, .. } => network.clone(),
            other => panic!("{other:?}"),
        }
    }

    const AGENT: &str = "[agents.claude]\nbackend = \"command\"\ncommand = [\"claude\", \"-p\"]\n";

    #[test]
    fn a_sandboxed_agent_goes_through_the_broker_unless_it_says_host() {
        assert_eq!(network_of(AGENT), AgentNetwork::Broker { model: None });
        assert_eq!(
            network_of(&format!("{AGENT}network = \"host\"\n")),
            AgentNetwork::Host
        );
        assert_eq!(
            network_of(&format!("{AGENT}sandbox = false\n")),
            AgentNetwork::Host
        );
        let with_model = network_of(&format!(
            "{AGENT}model_endpoint = {{ api = \"anthropic\", url = \"https://api.anthropic.com\", key_env = \"ANTHROPIC_API_KEY\" }}\n"
        ));
        let AgentNetwork::Broker { model: Some(m) } = with_model else {
            panic!("{with_model:?}")
        };
        assert_eq!(m.api, agents::netproxy::ModelApi::Anthropic);
        assert_eq!(m.url.as_str(), "https://api.anthropic.com/");
        assert_eq!(m.key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
    }

    #[test]
    fn bad_network_settings_are_refused_naming_the_key() {
        for (extra, said) in [
            ("network = \"none\"\n", "unknown variant"),
            (
                "network = \"broker\"\nsandbox = false\n",
                "needs the sandbox",
            ),
            (
                "network = \"host\"\nmodel_endpoint = { api = \"openai\", url = \"https://api.openai.com\" }\n",
                "nothing reads it",
            ),
            (
                "model_endpoint = { api = \"gemini\", url = \"https://x.example\" }\n",
                "api is \"anthropic\"",
            ),
            (
                "model_endpoint = { api = \"openai\", url = \"http://api.openai.com\" }\n",
                "http only on loopback",
            ),
            (
                "model_endpoint = { api = \"openai\", url = \"ftp://x\" }\n",
                "https URL",
            ),
            (
                "model_endpoint = { api = \"openai\", url = \"https://x.example\", key_env = \"lower\" }\n",
                "key_env names",
            ),
            (
                "model_endpoint = { api = \"openai\", url = \"https://x.example\", key = \"sk-1\" }\n",
                "unknown field",
            ),
        ] {
            let f = fault(&format!("{AGENT}{extra}"));
            assert!(f.contains(said), "{extra}: {f}");
        }
    }
}
