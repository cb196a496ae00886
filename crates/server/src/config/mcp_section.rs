//! `[mcp]`: the raw section (its hosts and agent URL checked as they are read), its typed
//! config and its check.

use serde::Deserialize;
use serde::de::{self, Deserializer};

use super::numbers::Positive;

/// An `[mcp] allowed_hosts` entry, checked as it is read.
#[derive(Debug, Clone)]
pub struct Host(pub mcp::HostRule);

impl<'de> Deserialize<'de> for Host {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        mcp::HostRule::parse(&s)
            .map(Host)
            .map_err(de::Error::custom)
    }
}

/// An `http://` or `https://` URL (where agents reach `/mcp`).
#[derive(Debug, Clone)]
pub struct HttpUrl(pub String);

impl<'de> Deserialize<'de> for HttpUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if let Some(why) = super::urls::base_url_fault(&s) {
            return Err(de::Error::custom(format!(
                "{s:?} is not an http(s) URL ({why}); write it like \"http://127.0.0.1:8080/mcp\""
            )));
        }
        Ok(HttpUrl(s))
    }
}

/// `[mcp]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    #[serde(default)]
    pub enabled: bool,
    pub allowed_hosts: Option<Vec<Host>>,
    pub max_body_bytes: Option<Positive>,
    pub tools_page_size: Option<Positive>,
    pub agent_url: Option<HttpUrl>,
}

/// `[mcp]`.
#[derive(Debug, Clone, Default)]
pub struct McpConfig {
    /// The surface is on when this is set and a token map exists.
    pub enabled: bool,
    pub settings: mcp::McpSettings,
    /// Where command agents reach `/mcp` (`SWITCHBOARD_MCP_URL`); default: this server's
    /// own address on loopback.
    pub agent_url: Option<String>,
}

pub(super) fn mcp_config(section: &McpSection) -> McpConfig {
    let mut settings = mcp::McpSettings::default();
    if let Some(hosts) = &section.allowed_hosts {
        settings.allowed_hosts = hosts.iter().map(|h| h.0.clone()).collect();
    }
    if let Some(n) = section.max_body_bytes {
        settings.max_body_bytes = n.usize();
    }
    if let Some(n) = section.tools_page_size {
        settings.page_size = n.usize();
    }
    McpConfig {
        enabled: section.enabled,
        settings,
        agent_url: section.agent_url.as_ref().map(|u| u.0.clone()),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::LoadedConfig;
    use crate::config::tests::ok;

    #[test]
    fn mcp_is_off_unless_enabled_and_takes_its_hosts() {
        let off = ok("[mcp]\n");
        assert!(!off.mcp.enabled);
        let hosts = |c: &LoadedConfig| -> Vec<String> {
            c.mcp
                .settings
                .allowed_hosts
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            hosts(&off),
            ["localhost", "127.0.0.1", "[::1]"],
            "loopback by default"
        );
        let on = ok(
            "[mcp]\nenabled = true\nallowed_hosts = [\"mcp.example.com:8443\"]\ntools_page_size = 5\nagent_url = \"http://10.0.0.2:8080/mcp\"\n",
        );
        assert!(on.mcp.enabled);
        assert_eq!(hosts(&on), ["mcp.example.com:8443"]);
        assert_eq!(on.mcp.settings.page_size, 5);
        assert_eq!(
            on.mcp.agent_url.as_deref(),
            Some("http://10.0.0.2:8080/mcp")
        );
    }
}
