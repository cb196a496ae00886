//! One table of tool names: an outside agent's own tools (Claude Code's `Bash`, `Read`, …) and
//! the Switchboard tool each stands for (`shell`, `read_file`, …). A rule's `tool` field is
//! read through it, and a call is looked up by its Switchboard name, so a rule written either
//! way binds the same calls: `tool = "Bash"` is `tool = "shell"`.
//!
//! Pure: names in, names out.

/// Each outside agent tool and the Switchboard tool it stands for. docs/broker.md prints this
/// table; a tool not in it keeps its own name (made a rule name: [`tool_rule_name`]).
pub const AGENT_TOOLS: [(&str, &str); 14] = [
    ("Bash", "shell"),
    ("Read", "read_file"),
    ("NotebookRead", "read_file"),
    ("Grep", "read_file"),
    ("Glob", "read_file"),
    ("Write", "write_file"),
    ("Edit", "write_file"),
    ("MultiEdit", "write_file"),
    ("NotebookEdit", "write_file"),
    ("WebFetch", "http_fetch"),
    ("WebSearch", "web_search"),
    ("Agent", "agent"),
    ("Task", "agent"),
    ("mcp", "mcp"),
];

/// The Switchboard name a called tool stands for: an agent's own name through [`AGENT_TOOLS`]
/// (an `mcp__<server>__<tool>` is `mcp`); any other name is itself.
pub fn canonical_tool(name: &str) -> &str {
    if name.starts_with("mcp__") {
        return "mcp";
    }
    AGENT_TOOLS
        .iter()
        .find(|(agent, _)| *agent == name)
        .map_or(name, |(_, ours)| ours)
}

/// The tool a call's rule key names for `action`: the Switchboard tool whose calls are named so
/// (`git.push` is `git`'s, whoever runs git: the `git` tool or a `Bash` line), else the called
/// tool through [`canonical_tool`] (`WebSearch` is `web_search`).
pub fn key_tool<'a>(action: &str, called: &'a str) -> &'a str {
    match crate::args::tool_for_action(action) {
        "" => canonical_tool(called),
        tool => tool,
    }
}

/// A rule's `tool` as written: an agent's own name through [`AGENT_TOOLS`], any other name as
/// itself. An MCP tool is never named this way (`mcp__github__create_issue` would be every
/// MCP tool): `None`, and the rule names its action, `mcp.<server>.<tool>`.
pub fn rule_tool(written: &str) -> Option<&str> {
    if written.starts_with("mcp__") {
        return None;
    }
    Some(canonical_tool(written))
}

/// A name as the rule table spells tools and actions (`[a-z0-9_]`): `TodoWrite` is
/// `todo_write`. `None` for a name holding anything but ASCII letters, digits, `_` and `-`, or
/// for an empty one: no rule can name it.
pub fn tool_rule_name(name: &str) -> Option<String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    {
        return None;
    }
    let mut out = String::with_capacity(name.len() + 4);
    let mut previous_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if previous_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            previous_lower = false;
        } else {
            out.push(if c == '-' { '_' } else { c });
            previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_tool_stands_for_one_of_ours_and_ours_stand_for_themselves() {
        let table = [
            ("Bash", "shell"),
            ("Read", "read_file"),
            ("NotebookRead", "read_file"),
            ("Grep", "read_file"),
            ("Glob", "read_file"),
            ("Write", "write_file"),
            ("Edit", "write_file"),
            ("MultiEdit", "write_file"),
            ("NotebookEdit", "write_file"),
            ("WebFetch", "http_fetch"),
            ("WebSearch", "web_search"),
            ("Task", "agent"),
            ("Agent", "agent"),
            ("mcp__github__create_issue", "mcp"),
            ("shell", "shell"),
            ("read_file", "read_file"),
            ("TodoWrite", "TodoWrite"),
            ("bash", "bash"),
        ];
        for (name, ours) in table {
            assert_eq!(canonical_tool(name), ours, "{name}");
        }
    }

    #[test]
    fn a_calls_key_names_the_tool_its_action_belongs_to() {
        assert_eq!(key_tool("git.push", "Bash"), "git");
        assert_eq!(key_tool("shell.exec", "Bash"), "shell");
        assert_eq!(key_tool("fs.read", "Grep"), "read_file");
        assert_eq!(key_tool("net.search", "WebSearch"), "web_search");
        assert_eq!(key_tool("tool.todo_write", "TodoWrite"), "TodoWrite");
        assert_eq!(
            key_tool("mcp.github.create_issue", "mcp__github__create_issue"),
            "mcp"
        );
    }

    #[test]
    fn a_rule_names_an_mcp_tool_by_its_action_never_as_a_tool() {
        assert_eq!(rule_tool("Bash"), Some("shell"));
        assert_eq!(rule_tool("git"), Some("git"));
        assert_eq!(rule_tool("mcp__github__create_issue"), None);
    }

    #[test]
    fn a_tool_name_becomes_a_rule_name_or_none() {
        let table = [
            ("TodoWrite", Some("todo_write")),
            ("ListAgents", Some("list_agents")),
            ("KillShell", Some("kill_shell")),
            ("Bash2Go", Some("bash2_go")),
            ("already_ok", Some("already_ok")),
            ("with-dash", Some("with_dash")),
            ("", None),
            ("a.b", None),
            ("../x", None),
            ("naïve", None),
            ("a b", None),
        ];
        for (name, want) in table {
            assert_eq!(tool_rule_name(name).as_deref(), want, "{name:?}");
        }
    }
}
