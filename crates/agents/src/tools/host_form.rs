//! A tool call's paths in one form: a `path` or `cwd` the model wrote beneath the sandbox's
//! [`SANDBOX_WORKSPACE`] (as `shell` shows it) is rewritten to the workspace's host path, so
//! the broker decides, and the executor opens, one path whichever form was sent.

use std::path::Path;

use serde_json::Value;

use super::ToolCall;
use crate::sandbox::SANDBOX_WORKSPACE;

/// The call with a `path` or `cwd` the model wrote in the sandbox's form (beneath
/// [`SANDBOX_WORKSPACE`], as `shell` shows it) rewritten to the workspace's host path, so the
/// broker decides, and the executor opens, one path whichever form was sent. Anything else is
/// left exactly as it was sent.
pub(super) fn in_host_form(call: &ToolCall, workspace: &Path) -> ToolCall {
    let mut call = call.clone();
    if !matches!(
        call.name.as_str(),
        "read_file" | "write_file" | "shell" | "git"
    ) {
        return call;
    }
    let Ok(Value::Object(mut arguments)) = serde_json::from_str::<Value>(&call.arguments) else {
        return call;
    };
    let mut changed = false;
    for key in ["path", "cwd"] {
        if let Some(Value::String(path)) = arguments.get_mut(key)
            && let Some(host) = host_path(path, workspace)
        {
            *path = host;
            changed = true;
        }
    }
    if changed {
        call.arguments = Value::Object(arguments).to_string();
    }
    call
}

/// `path` beneath the host's `workspace` when it is [`SANDBOX_WORKSPACE`] or beneath it (and
/// not already the host's own path).
fn host_path(path: &str, workspace: &Path) -> Option<String> {
    if Path::new(path).starts_with(workspace) {
        return None;
    }
    let rest = path.strip_prefix(SANDBOX_WORKSPACE)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    Some(format!("{}{rest}", workspace.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sandbox_form_is_rewritten() {
        let ws = Path::new("/data/runs/r1/work");
        let cases = [
            ("/workspace", Some("/data/runs/r1/work")),
            ("/workspace/", Some("/data/runs/r1/work/")),
            ("/workspace/src/a.rs", Some("/data/runs/r1/work/src/a.rs")),
            ("/workspace/../x", Some("/data/runs/r1/work/../x")),
            ("/workspacex/a", None),
            ("/data/runs/r1/work/a", None),
            ("workspace/a", None),
            ("", None),
            ("/etc/passwd", None),
        ];
        for (sent, host) in cases {
            assert_eq!(host_path(sent, ws).as_deref(), host, "{sent:?}");
        }
        // Already the host's path, under a host directory itself named /workspace.
        assert_eq!(
            host_path("/workspace/run/a", Path::new("/workspace/run")),
            None
        );
    }

    #[test]
    fn a_call_is_rewritten_only_in_its_path_and_cwd() {
        let ws = Path::new("/w");
        let call = |name: &str, arguments: &str| ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments: arguments.into(),
        };
        let shell = in_host_form(
            &call(
                "shell",
                r#"{"command":"cat /workspace/a","cwd":"/workspace/src"}"#,
            ),
            ws,
        );
        let args: Value = serde_json::from_str(&shell.arguments).unwrap();
        assert_eq!(args["cwd"], "/w/src");
        assert_eq!(args["command"], "cat /workspace/a");
        for (name, raw) in [
            ("http_fetch", r#"{"url":"/workspace"}"#),
            ("mcp__x__y", r#"{"path":"/workspace/a"}"#),
            ("read_file", "not json"),
            ("read_file", r#"["/workspace/a"]"#),
            ("read_file", r#"{"path":7}"#),
        ] {
            assert_eq!(
                in_host_form(&call(name, raw), ws).arguments,
                raw,
                "{name} {raw}"
            );
        }
    }
}
