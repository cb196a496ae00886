//! A Claude Code tool call as the broker decides it: its actions and the Switchboard call whose
//! grant it needs (docs/broker.md, "Claude Code"). An input that does not read is refused,
//! never guessed at.

use serde_json::{Value, json};

use super::shell_scan;
use crate::tools::{AgentCall, ToolCall};

/// The longest `Bash` command line decided (a longer one is refused, never read in part).
const MAX_COMMAND: usize = 64 * 1024;

/// The call Claude Code is about to make, as its `PreToolUse` hook receives it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct HookInput {
    pub tool_name: String,
    #[serde(default)]
    pub tool_input: Value,
    /// Where the agent is (its working directory, in the sandbox's form).
    #[serde(default)]
    pub cwd: String,
    #[serde(default)]
    pub tool_use_id: String,
}

/// A string field of the input, required.
fn field<'a>(input: &'a Value, name: &str, tool: &str) -> Result<&'a str, String> {
    input
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{tool} needs the string `{name}`"))
}

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: "agent".to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_string(),
    }
}

/// A search's directory (`path`, else the working directory), refused when its pattern climbs
/// out of it or starts at the root.
fn searched(input: &Value, cwd: &str, tool: &str, patterns: &[&str]) -> Result<String, String> {
    for key in patterns {
        if let Some(pattern) = input.get(*key).and_then(Value::as_str)
            && (pattern.starts_with('/') || pattern.split('/').any(|part| part == ".."))
        {
            return Err(format!(
                "{tool}'s `{key}` must stay beneath its path (no leading / and no ..); give the directory as `path`"
            ));
        }
    }
    let path = input.get("path").and_then(Value::as_str).unwrap_or(cwd);
    if path.is_empty() {
        return Err(format!(
            "{tool} names no path and the agent has no working directory"
        ));
    }
    Ok(path.to_owned())
}

/// The call as the broker decides it, or why it cannot be read.
pub fn agent_call(hook: &HookInput) -> Result<AgentCall, String> {
    let (tool, input, cwd) = (hook.tool_name.as_str(), &hook.tool_input, hook.cwd.as_str());
    let shown = ToolCall {
        id: hook.tool_use_id.clone(),
        name: tool.to_owned(),
        arguments: input.to_string(),
    };
    let one = |action: &str, granted_as: Option<ToolCall>| AgentCall {
        shown: shown.clone(),
        actions: vec![action.to_owned()],
        granted_as,
        untrusted_result: false,
    };
    Ok(match tool {
        "Bash" => {
            let command = field(input, "command", tool)?;
            if command.len() > MAX_COMMAND {
                return Err(format!(
                    "the command is {} bytes, more than the {MAX_COMMAND} a Bash call may have; write a script file and run it",
                    command.len()
                ));
            }
            let mut actions = vec!["shell.exec".to_owned()];
            let scan = shell_scan::scan(command);
            if let Some(alias) = scan.unknown_git.first() {
                return Err(format!(
                    "the command runs `git {alias}`, which is not one of git's own commands (an alias may stand for any, push included); run the command it stands for"
                ));
            }
            actions.extend(scan.git.iter().map(|sub| format!("git.{sub}")));
            if scan.dynamic {
                actions.push("shell.dynamic".to_owned());
            }
            AgentCall {
                shown: shown.clone(),
                actions,
                granted_as: Some(call("shell", json!({"command": command, "cwd": cwd}))),
                untrusted_result: false,
            }
        }
        "Read" | "NotebookRead" => {
            let key = if tool == "Read" {
                "file_path"
            } else {
                "notebook_path"
            };
            let path = field(input, key, tool)?;
            one("fs.read", Some(call("read_file", json!({"path": path}))))
        }
        "Grep" => {
            let path = searched(input, cwd, tool, &["glob"])?;
            one("fs.read", Some(call("read_file", json!({"path": path}))))
        }
        "Glob" => {
            let path = searched(input, cwd, tool, &["pattern"])?;
            one("fs.read", Some(call("read_file", json!({"path": path}))))
        }
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => {
            let key = if tool == "NotebookEdit" {
                "notebook_path"
            } else {
                "file_path"
            };
            let path = field(input, key, tool)?;
            let content = input
                .get("content")
                .or_else(|| input.get("new_string"))
                .or_else(|| input.get("new_source"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            one(
                "fs.write",
                Some(call(
                    "write_file",
                    json!({"path": path, "content": content}),
                )),
            )
        }
        "WebFetch" => {
            let url = field(input, "url", tool)?;
            one("net.fetch", Some(call("http_fetch", json!({"url": url}))))
        }
        "WebSearch" => AgentCall {
            untrusted_result: true,
            ..one("net.search", None)
        },
        "Agent" | "Task" => one("agent.task", None),
        mcp if mcp.starts_with("mcp__") => {
            let mut parts = mcp.trim_start_matches("mcp__").splitn(2, "__");
            let (server, name) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let (Some(s), Some(t)) = (
                broker::agent_tools::tool_rule_name(server),
                broker::agent_tools::tool_rule_name(name),
            ) else {
                return Err(format!("{mcp} is not a tool name a rule can name"));
            };
            one(
                &format!("mcp.{s}.{t}"),
                Some(call(
                    "mcp",
                    json!({"server": server, "tool": name, "arguments": input}),
                )),
            )
        }
        other => {
            let Some(name) = broker::agent_tools::tool_rule_name(other) else {
                return Err(format!("{other:?} is not a tool name a rule can name"));
            };
            one(&format!("tool.{name}"), None)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(tool: &str, input: Value) -> Result<AgentCall, String> {
        agent_call(&HookInput {
            tool_name: tool.to_owned(),
            tool_input: input,
            cwd: "/workspace".to_owned(),
            tool_use_id: "toolu_1".to_owned(),
        })
    }

    /// The mapping table of docs/broker.md, row by row.
    #[test]
    fn each_tool_is_decided_as_its_actions_under_its_grant() {
        let table: Vec<(&str, Value, &[&str], Option<&str>)> = vec![
            (
                "Bash",
                json!({"command": "ls"}),
                &["shell.exec"],
                Some("shell"),
            ),
            (
                "Bash",
                json!({"command": "git push origin"}),
                &["shell.exec", "git.push"],
                Some("shell"),
            ),
            (
                "Bash",
                json!({"command": "$X"}),
                &["shell.exec", "shell.dynamic"],
                Some("shell"),
            ),
            (
                "Read",
                json!({"file_path": "/workspace/a"}),
                &["fs.read"],
                Some("read_file"),
            ),
            (
                "Grep",
                json!({"pattern": "x"}),
                &["fs.read"],
                Some("read_file"),
            ),
            (
                "Glob",
                json!({"pattern": "**/*.rs", "path": "/workspace/src"}),
                &["fs.read"],
                Some("read_file"),
            ),
            (
                "Write",
                json!({"file_path": "/workspace/a", "content": "x"}),
                &["fs.write"],
                Some("write_file"),
            ),
            (
                "Edit",
                json!({"file_path": "/workspace/a", "old_string": "x", "new_string": "y"}),
                &["fs.write"],
                Some("write_file"),
            ),
            (
                "MultiEdit",
                json!({"file_path": "/workspace/a", "edits": []}),
                &["fs.write"],
                Some("write_file"),
            ),
            (
                "NotebookEdit",
                json!({"notebook_path": "/workspace/a.ipynb", "new_source": ""}),
                &["fs.write"],
                Some("write_file"),
            ),
            (
                "WebFetch",
                json!({"url": "https://example.com/x", "prompt": "p"}),
                &["net.fetch"],
                Some("http_fetch"),
            ),
            ("WebSearch", json!({"query": "q"}), &["net.search"], None),
            ("Agent", json!({"prompt": "p"}), &["agent.task"], None),
            ("Task", json!({"prompt": "p"}), &["agent.task"], None),
            (
                "mcp__github__create_issue",
                json!({"title": "t"}),
                &["mcp.github.create_issue"],
                Some("mcp"),
            ),
            (
                "TodoWrite",
                json!({"todos": []}),
                &["tool.todo_write"],
                None,
            ),
        ];
        for (tool, input, actions, granted) in table {
            let call = mapped(tool, input.clone()).unwrap();
            assert_eq!(call.actions, actions, "{tool} {input}");
            assert_eq!(
                call.granted_as.as_ref().map(|c| c.name.as_str()),
                granted,
                "{tool}"
            );
            assert_eq!(call.shown.name, tool);
            assert_eq!(call.shown.arguments, input.to_string());
        }
        let grep = mapped("Grep", json!({"pattern": "x"})).unwrap();
        assert_eq!(
            grep.granted_as.unwrap().arguments,
            r#"{"path":"/workspace"}"#
        );
        assert!(
            mapped("WebSearch", json!({"query": "q"}))
                .unwrap()
                .untrusted_result
        );
    }

    #[test]
    fn an_input_that_does_not_read_is_refused() {
        let table: Vec<(&str, Value, &str)> = vec![
            ("Bash", json!({}), "`command`"),
            ("Bash", json!({"command": 3}), "`command`"),
            ("Bash", json!({"command": "git p"}), "alias"),
            (
                "Bash",
                json!({"command": "x".repeat(64 * 1024 + 1)}),
                "write a script file",
            ),
            ("Read", json!({"path": "/x"}), "`file_path`"),
            ("Write", Value::Null, "`file_path`"),
            ("WebFetch", json!({"uri": "x"}), "`url`"),
            ("Glob", json!({"pattern": "/etc/*"}), "beneath"),
            ("Glob", json!({"pattern": "../../etc/*"}), "beneath"),
            ("Grep", json!({"pattern": "x", "glob": "../*"}), "beneath"),
            ("mcp__a.b__c", json!({}), "rule can name"),
            ("Weird Tool", json!({}), "rule can name"),
            ("", json!({}), "rule can name"),
        ];
        for (tool, input, says) in table {
            let e = mapped(tool, input.clone()).unwrap_err();
            assert!(e.contains(says), "{tool} {input}: {e}");
        }
    }
}
