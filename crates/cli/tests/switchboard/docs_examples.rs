//! What the docs show, held to what the code does: the command-agent examples of docs/mcp.md
//! hand the program the run's own MCP URL and token (run here against stand-ins for `claude`
//! and `codex` that print what they were given).

use std::path::Path;
use std::process::Command;

fn doc(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs")
            .join(name),
    )
    .unwrap()
}

/// The `command` of the ```toml block declaring `[agents.<agent>]` in `text`.
fn agent_command(text: &str, agent: &str) -> Vec<String> {
    let head = format!("```toml\n[agents.{agent}]\n");
    let start = text
        .find(&head)
        .unwrap_or_else(|| panic!("no [agents.{agent}] example"))
        + "```toml\n".len();
    let end = start + text[start..].find("```").unwrap();
    let table: toml::Table = toml::from_str(&text[start..end]).unwrap();
    table["agents"][agent]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// Runs `argv` (and the request, as a command agent's last argument) with a stand-in for
/// `program` on the PATH that prints each argument it gets on a line of its own.
fn run_with_stand_in(argv: &[String], program: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let stand_in = dir.path().join(program);
    std::fs::write(&stand_in, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap()
    );
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .arg("the request")
        .env("PATH", path)
        .env("SWITCHBOARD_MCP_URL", "http://127.0.0.1:8080/mcp")
        .env("SWITCHBOARD_AGENT_TOKEN", "run-token-123")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_mcp_docs_command_agents_get_the_runs_own_url_and_token() {
    let text = doc("mcp.md");

    let claude = run_with_stand_in(&agent_command(&text, "claude"), "claude");
    let config = claude
        .iter()
        .position(|a| a == "--mcp-config")
        .map(|i| &claude[i + 1])
        .unwrap_or_else(|| panic!("{claude:?}"));
    let v: serde_json::Value = serde_json::from_str(config).unwrap();
    let server = &v["mcpServers"]["switchboard"];
    assert_eq!(server["url"], "http://127.0.0.1:8080/mcp");
    assert_eq!(server["headers"]["Authorization"], "Bearer run-token-123");
    assert_eq!(claude.last().map(String::as_str), Some("the request"));

    let codex = run_with_stand_in(&agent_command(&text, "codex"), "codex");
    assert_eq!(codex.first().map(String::as_str), Some("exec"), "{codex:?}");
    // Each `-c` value is TOML, as codex reads it.
    let overrides: Vec<(String, toml::Value)> = codex
        .windows(2)
        .filter(|w| w[0] == "-c")
        .map(|w| {
            let (key, value) = w[1].split_once('=').unwrap();
            let parsed: toml::Table = toml::from_str(&format!("v = {value}")).unwrap();
            (key.to_owned(), parsed["v"].clone())
        })
        .collect();
    assert!(
        overrides.contains(&(
            "mcp_servers.switchboard.url".into(),
            toml::Value::String("http://127.0.0.1:8080/mcp".into())
        )),
        "{codex:?}"
    );
    assert!(
        overrides.contains(&(
            "mcp_servers.switchboard.bearer_token_env_var".into(),
            toml::Value::String("SWITCHBOARD_AGENT_TOKEN".into())
        )),
        "{codex:?}"
    );
    assert_eq!(codex.last().map(String::as_str), Some("the request"));
    // The examples for a client of one's own name the map's bearer, never the run's token.
    for client in [
        "claude mcp add",
        "[mcp_servers.switchboard]",
        "\"mcpServers\"",
    ] {
        let at = text.find(client).unwrap();
        let example = &text[at..at + text[at..].find("```").unwrap()];
        assert!(
            example.contains("SWITCHBOARD_TOKEN") && !example.contains("SWITCHBOARD_AGENT_TOKEN"),
            "{example}"
        );
    }
}

/// docs/tracing.md's sample span line names the actor the README's span-log example serves
/// (`http:` and its token's subject), not another.
#[test]
fn the_tracing_docs_sample_actor_is_the_readmes() {
    let sample = doc("tracing.md");
    let actor = sample
        .split("\"actor\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no actor in the sample"));
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let subject = actor
        .strip_prefix("http:")
        .unwrap_or_else(|| panic!("{actor}"));
    assert!(
        readme.contains(&format!("\"subject\": \"{subject}\"")),
        "the README gives no token of subject {subject}"
    );
    assert!(readme.contains(&format!("[grants.\"{actor}\"]")), "{actor}");
}
