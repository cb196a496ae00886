//! `config check` catches what `serve` would refuse: every fault of a file, not the first, each
//! with its line, column and key (in text on stderr, and as `{"ok": false, "faults": […]}` on
//! stdout with `--json`), the environment `serve` reads (the token map, the agent-token
//! secret, each agent's key), the audit file's directory, every URL through a URL parser, a
//! schedule that cannot fire, and a config with no agent; and `serve` refuses the same.

use std::process::{Command, Output};

/// One expected fault: line and column (none for the environment's), key, and a part of its
/// message.
type Want = (Option<(usize, usize)>, Option<&'static str>, &'static str);

/// A case: the file, the environment, and every fault it must list (and no other).
type Case = (&'static str, Vec<(&'static str, &'static str)>, Vec<Want>);

fn check(dir: &std::path::Path, body: &str, env: &[(&str, &str)], json: bool) -> Output {
    let path = dir.join("sb.toml");
    std::fs::write(&path, body).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.args(["config", "check", "--config", "sb.toml"])
        .current_dir(dir)
        .env_remove("SWITCHBOARD_CONFIG")
        .env_remove("SWITCHBOARD_INGRESS_TOKENS")
        .env_remove("SWITCHBOARD_AGENT_TOKEN_SECRET")
        .env("NO_COLOR", "1")
        .envs(env.iter().copied());
    if json {
        cmd.arg("--json");
    }
    cmd.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn cases() -> Vec<Case> {
    vec![
        (
            // Two faults in one section and one in another: all three.
            "[agents.echo]\n[server]\nlisten = \"localhost\"\nlease_seconds = 0\n[store]\nurl = \"mysql://x\"\n",
            vec![],
            vec![
                (Some((3, 10)), Some("server.listen"), "is not an address"),
                (
                    Some((4, 17)),
                    Some("server.lease_seconds"),
                    "must be a whole number above 0",
                ),
                (Some((6, 7)), Some("store.url"), "must be sqlite://"),
            ],
        ),
        (
            // URLs, through the URL parser: a port out of range, a user part, a query.
            "[agents.echo]\n[server]\npublic_url = \"https://u@sb.example.com\"\n[slack]\napi_url = \"https://slack.com:99999/api/\"\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318?x=1\"\n[agents.o]\nbackend = \"openai\"\nbase_url = \"http://127.0.0.1:99999/v1\"\nmodel = \"m\"\n",
            vec![],
            vec![
                (Some((3, 14)), Some("server.public_url"), "user part"),
                (
                    Some((5, 11)),
                    Some("slack.api_url"),
                    "port is not a number from 1 to 65535",
                ),
                (Some((7, 17)), Some("telemetry.otlp_endpoint"), "query"),
                (
                    Some((10, 12)),
                    Some("agents.o.base_url"),
                    "port is not a number",
                ),
            ],
        ),
        (
            // Faults of the [agents] section and of two schedules' entries, all at once.
            "[agents]\ndefault = \"ghost\"\nmax_concurent = 3\n[agents.a]\nbackend = \"gpt\"\n[[schedules]]\nname = \"a\"\ncron = \"0 25 * * *\"\ncommand = \"help\"\n[[schedules]]\nname = \"b\"\ncron = \"0 2 * * *\"\nagent = \"ghost\"\nprompt = \"p\"\n",
            vec![],
            vec![
                (
                    Some((2, 11)),
                    Some("agents.default"),
                    "`ghost` is not a declared agent",
                ),
                (Some((3, 17)), Some("agents.max_concurent"), "invalid type"),
                (
                    Some((5, 11)),
                    Some("agents.a.backend"),
                    "unknown variant `gpt`",
                ),
                (
                    Some((8, 8)),
                    Some("schedules[0].cron"),
                    "is not a cron expression",
                ),
                (
                    Some((13, 9)),
                    Some("schedules[1].agent"),
                    "`ghost` is not a declared agent",
                ),
            ],
        ),
        (
            // Two schedules that load but could not fire: each at its entry.
            "[agents.echo]\n[[schedules]]\nname = \"a\"\ncron = \"0 2 * * *\"\ncommand = \"runs list\"\n[[schedules]]\nname = \"b\"\ncron = \"0 3 * * *\"\ncommand = \"memory list\"\n",
            vec![],
            vec![
                (
                    Some((3, 8)),
                    Some("schedules[0].name"),
                    "schedule `a` cannot fire",
                ),
                (
                    Some((7, 8)),
                    Some("schedules[1].name"),
                    "schedule `b` cannot fire",
                ),
            ],
        ),
        (
            // What serve reads at start: the audit file's directory, the token map, the
            // agent-token secret, an agent's key; and no agent at all.
            "[telemetry]\naudit_file = \"/nonexistent-dir/audit.log\"\n",
            vec![
                ("SWITCHBOARD_INGRESS_TOKENS", "{not json"),
                ("SWITCHBOARD_AGENT_TOKEN_SECRET", "short"),
            ],
            vec![
                (
                    Some((2, 1)),
                    Some("telemetry.audit_file"),
                    "/nonexistent-dir does not exist",
                ),
                (
                    None,
                    None,
                    "SWITCHBOARD_INGRESS_TOKENS: the token map is not JSON",
                ),
                (None, None, "is only 5 bytes long"),
                (None, Some("agents"), "no agent is declared"),
            ],
        ),
        (
            // The directories serve writes in, and agents none of which can run.
            "[store]\nurl = \"sqlite:///nonexistent-dir/sb.db\"\n[server]\ndata_dir = \"/etc/hostname/data\"\n[agents.coding]\nbackend = \"command\"\ncommand = [\"sb-no-such-program\"]\n",
            vec![],
            vec![
                (
                    Some((2, 1)),
                    Some("store.url"),
                    "the directory /nonexistent-dir of the SQLite file does not exist",
                ),
                (
                    Some((4, 1)),
                    Some("server.data_dir"),
                    "/etc/hostname is not a directory",
                ),
                (Some((5, 2)), Some("agents"), "no agent can run"),
            ],
        ),
        (
            "[agents.o]\nbackend = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\napi_key_env = \"SB_TEST_UNSET_KEY\"\n",
            vec![(
                "SWITCHBOARD_AGENT_TOKEN_SECRET",
                "replace-with-32-random-bytes-base64",
            )],
            vec![
                (
                    Some((5, 1)),
                    Some("agents.o.api_key_env"),
                    "SB_TEST_UNSET_KEY, which is not set",
                ),
                (None, None, "is a placeholder copied from an example"),
            ],
        ),
    ]
}

#[test]
fn config_check_lists_every_fault_with_its_line_column_and_key() {
    let dir = tempfile::tempdir().unwrap();
    for (body, env, want) in cases() {
        // Text: on stderr, one a line, nothing on stdout.
        let out = check(dir.path(), body, &env, false);
        assert_eq!(out.status.code(), Some(2), "{body}\n{}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "{body}: {}", text(&out.stdout));
        let stderr = text(&out.stderr);
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("error: "))
            .collect();
        assert_eq!(errors.len(), want.len(), "{body}\n{stderr}");
        for (position, key, message) in &want {
            let at = position
                .map(|(l, c)| format!(":{l}:{c}"))
                .unwrap_or_default();
            let key = key.map(|k| format!("{k}: ")).unwrap_or_default();
            let head = format!("error: sb.toml{at}: {key}");
            assert!(
                errors
                    .iter()
                    .any(|e| e.starts_with(&head) && e.contains(message)),
                "{body}\nno {head}…{message} in\n{stderr}"
            );
        }
        assert!(
            stderr.contains(&format!("{} fault", want.len())),
            "{stderr}"
        );

        // JSON: the same faults as data on stdout, exit 2.
        let out = check(dir.path(), body, &env, true);
        assert_eq!(out.status.code(), Some(2), "{body}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{body}: {e}: {}", text(&out.stdout)));
        assert_eq!(v["ok"], false);
        let faults = v["faults"].as_array().unwrap();
        assert_eq!(faults.len(), want.len(), "{body}\n{v:#}");
        for (position, key, message) in &want {
            let found = faults.iter().any(|f| {
                f["file"] == "sb.toml"
                    && f["line"].as_u64() == position.map(|p| p.0 as u64)
                    && f["column"].as_u64() == position.map(|p| p.1 as u64)
                    && f["key"].as_str() == *key
                    && f["message"].as_str().unwrap().contains(message)
            });
            assert!(found, "{body}\nno {position:?} {key:?} {message} in\n{v:#}");
        }
    }
}

/// A `command` agent whose program is not on its `PATH` is a warning (its runs would fail),
/// in both forms; the config is still good.
#[test]
fn a_missing_agent_program_is_a_warning_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let body = "[agents]\ndefault = \"coding\"\n[agents.coding]\nbackend = \"command\"\ncommand = [\"sb-no-such-program\", \"exec\"]\n[agents.echo]\n";
    let out = check(dir.path(), body, &[], false);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("warning: sb.toml:5:1: agents.coding.command: agent `coding`'s program `sb-no-such-program` is not on the PATH"),
        "{stdout}"
    );
    let out = check(dir.path(), body, &[], true);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["warnings"][0]["key"], "agents.coding.command");
    assert_eq!(v["warnings"][0]["line"], 5);
    // Found, it is no warning.
    let body = body.replace("sb-no-such-program", "sh");
    let out = check(dir.path(), &body, &[], true);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["warnings"], serde_json::json!([]), "{v:#}");
}

/// `serve` refuses what `config check` reports of the agent-token secret: a short one and a
/// shipped placeholder, naming the variable and how to make one.
#[test]
fn serve_refuses_a_short_or_placeholder_agent_token_secret() {
    let dir = tempfile::tempdir().unwrap();
    for secret in ["short-secret", "replace-with-32-random-bytes-base64"] {
        let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .current_dir(dir.path())
            .env_remove("SWITCHBOARD_CONFIG")
            .env("SWITCHBOARD_AGENT_TOKEN_SECRET", secret)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{secret}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("SWITCHBOARD_AGENT_TOKEN_SECRET")
                && stderr.contains("openssl rand -base64 32"),
            "{secret}: {stderr}"
        );
        assert!(
            !stderr.contains(secret),
            "the secret itself is never printed: {stderr}"
        );
    }
}
