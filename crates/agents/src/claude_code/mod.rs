//! Claude Code as a Switchboard agent (`backend = "claude-code"`): how `claude -p` is started
//! so that every tool call it makes passes the broker before it runs, and nothing in the
//! workspace can change that.
//!
//! - Managed settings ([`ClaudeCodeSettings::managed_settings`]), in a directory of their own
//!   bound read-only over the sandbox's `/etc/claude-code` (so nothing can be added beside
//!   [`MANAGED_SETTINGS`]), are the only hooks that run (`allowManagedHooksOnly`)
//!   and the only permission rules (`allowManagedPermissionRulesOnly`): a `PreToolUse` hook
//!   and a `PostToolUse` hook, both the `switchboard` binary (bound read-only) in its
//!   `sandbox-hook` mode, talking to the run's own proxy socket ([`crate::netproxy`]).
//! - The permission mode is `dontAsk` and bypassing it is disabled: a call that needs a
//!   permission and that the hook did not allow (a hook killed, or one that could not start,
//!   which Claude Code does not count as a block) is refused by Claude Code itself; its
//!   read-only tools in the working directory need none (docs/broker.md says what that leaves).
//! - No settings file of the workspace or the user is read (`--setting-sources` names none),
//!   no MCP server but the ones given (`--strict-mcp-config`, none), and its configuration
//!   directory is fresh for each run in the sandbox's own `/tmp`.
//!
//! Must never: start Claude Code without its hooks, read the operator's `~/.claude`, or let a
//! hook's fault allow a call. [`mapping`] says what each tool call is decided as.

pub mod mapping;
pub mod shell_scan;

use std::time::Duration;

use serde_json::json;

/// Where Claude Code reads managed settings on Linux (its directory is bound read-only in the
/// sandbox).
pub const MANAGED_SETTINGS: &str = "/etc/claude-code/managed-settings.json";
/// The run's Claude Code configuration directory, in the sandbox's own `/tmp` (fresh).
pub const CONFIG_DIR: &str = "/tmp/claude-config";
/// The Claude Code versions this release is meant for (the npm package
/// `@anthropic-ai/claude-code`; scripts/claude-code.sh pins the one the tests drive, 2.1.337);
/// the start-up summary and docs/broker.md say so.
pub const TESTED_VERSIONS: &str = "2.1.300 to 2.1.x";

/// How one run of Claude Code is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeCodeSettings {
    /// `--model`: also the `model` the broker's rules are matched against (never what the
    /// process reports).
    pub model: Option<String>,
    /// How long one hook may take: longer than the approval timeout, so an ask is answered
    /// (or refused by the broker) before Claude Code gives up on the hook.
    pub hook_timeout: Duration,
}

impl ClaudeCodeSettings {
    /// The settings for an approval timeout: a call is asked about at most twice (a reviewer,
    /// then a person), so each hook waits for two of them and a minute more.
    pub fn for_approval_timeout(model: Option<String>, approval: Duration) -> Self {
        ClaudeCodeSettings {
            model,
            hook_timeout: approval * 2 + Duration::from_secs(60),
        }
    }

    /// The arguments after the program: print mode, the answer as text, no settings file but
    /// the managed one, no MCP server, permissions only through the hook.
    pub fn arguments(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "-p",
            "--output-format",
            "text",
            "--permission-mode",
            "dontAsk",
            "--strict-mcp-config",
            "--setting-sources",
            "",
            "--no-session-persistence",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        if let Some(model) = &self.model {
            args.push("--model".to_owned());
            args.push(model.clone());
        }
        args
    }

    /// The environment Switchboard sets for it (the proxy's and the model's are set as for any
    /// command agent whose network goes through the broker).
    pub fn environment(&self) -> Vec<(String, String)> {
        [
            ("CLAUDE_CONFIG_DIR", CONFIG_DIR),
            ("HOME", "/tmp"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// The managed settings: the hooks (`hook` is the `switchboard` binary inside the sandbox),
    /// and nothing else allowed to add hooks, permission rules or MCP servers.
    pub fn managed_settings(&self, hook: &std::path::Path) -> String {
        let seconds = self.hook_timeout.as_secs().max(1);
        let hook = |event: &str| {
            json!([{ "matcher": "*", "hooks": [{
                "type": "command",
                "command": format!("'{}' sandbox-hook {event} --timeout-seconds {seconds}", hook.display()),
                // Claude Code's own limit is the later one: the hook refuses first.
                "timeout": seconds + 30,
            }]}])
        };
        json!({
            "allowManagedHooksOnly": true,
            "allowManagedPermissionRulesOnly": true,
            "allowManagedMcpServersOnly": true,
            "disableAllHooks": false,
            // WebFetch would first ask claude.ai whether a domain is safe: a host the broker
            // decides, and a request the proxy refuses.
            "skipWebFetchPreflight": true,
            "permissions": {
                "defaultMode": "dontAsk",
                "disableBypassPermissionsMode": "disable",
            },
            "hooks": {
                "PreToolUse": hook("pre-tool-use"),
                "PostToolUse": hook("post-tool-use"),
            },
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_managed_settings_hold_both_hooks_and_allow_no_others() {
        let s = ClaudeCodeSettings::for_approval_timeout(None, Duration::from_secs(300));
        let v: serde_json::Value =
            serde_json::from_str(&s.managed_settings(std::path::Path::new("/sb/switchboard")))
                .unwrap();
        assert_eq!(v["allowManagedHooksOnly"], true);
        assert_eq!(v["allowManagedPermissionRulesOnly"], true);
        assert_eq!(v["permissions"]["defaultMode"], "dontAsk");
        let pre = &v["hooks"]["PreToolUse"][0];
        assert_eq!(pre["matcher"], "*");
        assert_eq!(
            pre["hooks"][0]["command"],
            "'/sb/switchboard' sandbox-hook pre-tool-use --timeout-seconds 660"
        );
        assert!(pre["hooks"][0]["timeout"].as_u64().unwrap() > 660);
        assert!(
            v["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
                .as_str()
                .unwrap()
                .contains("post-tool-use")
        );
        let args = s.arguments();
        assert!(
            args.windows(2)
                .any(|w| w == ["--permission-mode", "dontAsk"])
        );
        assert!(args.windows(2).any(|w| w == ["--setting-sources", ""]));
        assert!(args.contains(&"--strict-mcp-config".to_owned()));
    }
}
