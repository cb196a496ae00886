//! The `switchboard` binary end to end: exit codes, human and JSON output, errors that name
//! the file, key and fix.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/switchboard.example.toml")
}

fn switchboard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .env_remove("SWITCHBOARD_CONFIG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn explain(extra: &[&str]) -> Output {
    let ex = example();
    let mut args = vec!["authz", "explain", "--config", ex.to_str().unwrap()];
    args.extend_from_slice(extra);
    switchboard(&args)
}

#[test]
fn config_check_reports_every_actor_and_exits_zero() {
    let ex = example();
    let out = switchboard(&["config", "check", "--config", ex.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for needle in [
        "policy table      48 rows, valid",
        "slack:U024BE7LH",
        "http:ops-bot",
        "slack:*",
        "schedule:self-improvement",
        "restricted agents coding",
        "weekly-digest     30 7 * * FRI (Europe/Berlin)  agent reviewer:",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    assert!(!stdout.contains('\x1b'), "no colour off a terminal");

    let out = switchboard(&[
        "config",
        "check",
        "--config",
        ex.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ops = v["actors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "http:ops-bot")
        .unwrap();
    assert_eq!(ops["grants"]["channels"], serde_json::json!(["http:ops"]));
    assert_eq!(ops["kind"], "service");
    assert_eq!(v["admins"], serde_json::json!(["slack:U024BE7LH"]));
}

#[test]
fn config_check_names_the_file_line_key_and_fix_and_exits_two() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[grants.\"slack:U1\"]\nchannels = \"All\"\n",
            "bad.toml:2:1: grants.\"slack:U1\".channels: `All` is not \"all\"; write \"all\" (lower-case)",
        ),
        (
            "[server]\n[permissions]\nx = 1\n",
            "bad.toml:2:2: permissions:",
        ),
        (
            "[telemetri]\n",
            "bad.toml:1:2: telemetri: unknown field `telemetri`, expected one of `server`",
        ),
        (
            "[grants.\"schedule:*\"]\n",
            "bad.toml:1:9: grants.\"schedule:*\": `*` only stands for a whole surface",
        ),
        (
            "[restrict]\nagents = [\"coding\"]\n",
            "restrict.agents[0]: `coding` is not a declared agent",
        ),
        ("[grants.\"slack:U1\"\n", "bad.toml:1:"),
        (
            "[[schedules]]\nname = \"nightly\"\ncron = \"0 2 * * *\"\ncommand = \"runs list\"\n",
            "bad.toml:2:8: schedules[0].name: schedule `nightly` cannot fire: grants.\"schedule:nightly\".actions: schedule:nightly may not run `runs list`; its grants need \"runs:read\"",
        ),
        (
            "[[schedules]]\nname = \"nightly\"\ncron = \"0 2 * * *\"\ncommand = \"runs list\"\n[grants.\"schedule:nightly\"]\nactions = [\"help:read\"]\n",
            "schedule:nightly may not run `runs list`; its grants need \"runs:read\"",
        ),
        (
            "[agents.echo]\n[[schedules]]\nname = \"nightly\"\ncron = \"0 2 * * *\"\nagent = \"echo\"\nprompt = \"p\"\n[grants.\"schedule:nightly\"]\nactions = [\"help:read\"]\n",
            "schedule:nightly may not run agent `echo`; its grants need \"agent:run:echo\"",
        ),
        (
            "[[schedules]]\nname = \"nightly\"\ncron = \"0 25 * * *\"\ncommand = \"help\"\n",
            "bad.toml:3:8: schedules[0].cron: schedule `nightly`: `0 25 * * *` is not a cron expression",
        ),
    ];
    for (body, want) in cases {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, body).unwrap();
        let out = switchboard(&["config", "check", "--config", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{body}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(want), "{body:?}: {stderr:?} lacks {want:?}");
        assert!(out.stdout.is_empty(), "nothing on stdout on a fault");
    }
    let out = switchboard(&[
        "config",
        "check",
        "--config",
        "/nonexistent/switchboard.toml",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("/nonexistent/switchboard.toml: cannot read the config file")
    );
}

/// Telemetry that cannot start stops the binary before anything else, naming the key, the
/// file and the fix: an audit file whose directory does not exist.
#[test]
fn an_audit_file_that_cannot_be_opened_is_a_config_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sb.toml");
    let audit = dir.path().join("no-such-dir").join("audit.log");
    std::fs::write(
        &config,
        format!(
            "[store]\nurl = \"sqlite://{}\"\n[telemetry]\naudit_file = {:?}\n",
            dir.path().join("sb.db").display(),
            audit.display().to_string()
        ),
    )
    .unwrap();
    let out = switchboard(&["--config", config.to_str().unwrap(), "runs", "list"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "error: {}: [telemetry] audit_file {}: cannot open it for appending",
            config.display(),
            audit.display()
        )) && stderr.contains("(create its directory, or fix the permissions)"),
        "{stderr}"
    );
}

#[test]
fn config_check_without_a_file_uses_the_embedded_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["config", "check"])
        .current_dir(dir.path())
        .env_remove("SWITCHBOARD_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("(embedded default)"));

    std::fs::write(
        dir.path().join("env.toml"),
        "[agents.echo]\n[grants.\"http:x\"]\nactions = [\"runs:read\"]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["config", "check"])
        .current_dir(dir.path())
        .env("SWITCHBOARD_CONFIG", "env.toml")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("http:x"),
        "$SWITCHBOARD_CONFIG is read"
    );
}

#[test]
fn explain_exits_zero_on_allow_and_one_on_deny() {
    let allow = explain(&[
        "--actor",
        "slack:U024BE7LH",
        "--action",
        "runs:read",
        "--resource",
        "run:id=r1,channel=slack:G1,user=slack:U2,visibility=private",
    ]);
    assert_eq!(allow.status.code(), Some(0), "{}", text(&allow.stderr));
    assert!(text(&allow.stdout).starts_with("ALLOW"));

    let deny = explain(&[
        "--actor",
        "http:ops-bot",
        "--action",
        "runs:read",
        "--resource",
        "run:id=r1,channel=http:billing,user=http:billing,visibility=machine",
    ]);
    assert_eq!(deny.status.code(), Some(1));
    let out = text(&deny.stdout);
    assert!(out.starts_with("DENY"), "{out}");
    assert!(
        out.contains("reason: not a member of http:billing (not-member)"),
        "{out}"
    );
    for row in [
        "runs:read × run (member)",
        "runs:read × run (all channels)",
        "runs:read × run (own run)",
    ] {
        assert!(
            out.contains(row),
            "every row tried: {row} missing from\n{out}"
        );
    }
}

#[test]
fn explain_json_carries_the_verdict_and_every_row() {
    let out = explain(&[
        "--actor",
        "http:ops-bot",
        "--action",
        "runs:read",
        "--resource",
        "run:id=r1,channel=http:ops,user=http:x,visibility=machine",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "allow");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["row"], "runs:read × run (member)");
    assert_eq!(rows[0]["outcome"], "allowed");
    assert_eq!(rows[1]["outcome"], "condition-failed");
    assert_eq!(rows[1]["condition"], serde_json::json!("all_channels"));

    let out = explain(&[
        "--actor",
        "http:ci",
        "--action",
        "runs:read",
        "--resource",
        "command:id=runs.list",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "deny");
    assert_eq!(v["reason"]["reason"], "missing-grant");
    assert_eq!(v["reason"]["text"], "missing grant runs:read");
}

/// Fault 4: the deny reason names an action of its own (`agent:run:coding` for `repo:exec` on
/// `agent{coding}`); nested under `reason`, it no longer overwrites the request's action.
#[test]
fn explain_json_keeps_the_requested_action_beside_the_reasons_own() {
    let out = explain(&[
        "--actor",
        "http:ops-bot",
        "--action",
        "repo:exec",
        "--resource",
        "agent:name=coding",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["action"], "repo:exec", "{v}");
    assert_eq!(v["verdict"], "deny");
    assert_eq!(v["reason"]["action"], "agent:run:coding", "{v}");
}

#[test]
fn explain_takes_config_facts_from_the_config_never_from_the_spec() {
    let deny = explain(&[
        "--actor",
        "slack:U9",
        "--action",
        "repo:use",
        "--resource",
        "repo:slug=Acme/Payments",
    ]);
    assert_eq!(
        deny.status.code(),
        Some(1),
        "acme/payments is restricted in the config"
    );
    assert!(text(&deny.stdout).contains("acme/payments is restricted"));
    let spoof = explain(&[
        "--actor",
        "slack:U9",
        "--action",
        "repo:use",
        "--resource",
        "repo:slug=acme/payments,restricted=false",
    ]);
    assert_eq!(spoof.status.code(), Some(2));
    assert!(text(&spoof.stderr).contains("--resource: `restricted` is not a key of repo"));
}

#[test]
fn explain_agents_act_on_behalf_of_a_principal() {
    // The coding agent's entry holds agent:run:coding, but its principal (a plain Slack user)
    // does not: the intersection denies.
    let out = explain(&[
        "--actor",
        "agent:coding",
        "--on-behalf-of",
        "slack:U9",
        "--action",
        "agent:run:coding",
        "--resource",
        "agent:name=coding",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let out = explain(&[
        "--actor",
        "agent:coding",
        "--on-behalf-of",
        "slack:U024BE7LH",
        "--action",
        "agent:run:coding",
        "--resource",
        "agent:name=coding",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("agent:coding on behalf of slack:U024BE7LH"));
}

#[test]
fn explain_usage_errors_exit_two_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "--actor",
                "bogus:x",
                "--action",
                "runs:read",
                "--resource",
                "command:id=x",
            ],
            "--actor: \"bogus:x\" has no known namespace",
        ),
        (
            &[
                "--actor",
                "slack:U1",
                "--action",
                "runs:delete",
                "--resource",
                "command:id=x",
            ],
            "--action: \"runs:delete\" is not an action",
        ),
        (
            &[
                "--actor",
                "slack:U1",
                "--action",
                "runs:read",
                "--resource",
                "runs:id=x",
            ],
            "--resource: unknown resource type `runs`",
        ),
        (
            &[
                "--actor",
                "slack:U1",
                "--action",
                "runs:read",
                "--resource",
                "run:id=r1",
            ],
            "--resource: run needs `channel`",
        ),
        (
            &[
                "--actor",
                "slack:U1",
                "--on-behalf-of",
                "slack:U2",
                "--action",
                "runs:read",
                "--resource",
                "command:id=x",
            ],
            "--actor must be agent:<name>",
        ),
        (
            &[
                "--actor",
                "agent:a",
                "--on-behalf-of",
                "agent:b",
                "--action",
                "runs:read",
                "--resource",
                "command:id=x",
            ],
            "not for another agent",
        ),
        (
            &["--actor", "slack:U1", "--action", "runs:read"],
            "--resource <SPEC>",
        ),
    ];
    for (args, want) in cases {
        let out = explain(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr:?} lacks {want:?}");
    }
}

#[test]
fn help_on_every_subcommand() {
    for args in [
        &["--help"][..],
        &["config", "--help"],
        &["config", "check", "--help"],
        &["authz", "--help"],
        &["authz", "explain", "--help"],
        &["db", "--help"],
        &["db", "backup", "--help"],
        &["version", "--help"],
    ] {
        let out = switchboard(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(text(&out.stdout).contains("Usage:"), "{args:?}");
    }
    let explain_help = text(&switchboard(&["authz", "explain", "--help"]).stdout);
    assert!(explain_help.contains("memory-scope:kind=org,key=org,origin=dm"));
    let out = switchboard(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A reader that goes away (`… | head`) ends every kind of output quietly: the human and JSON
/// forms, a registry command's reply, the help, completions. Standard output here is a pipe
/// whose reading end is closed before the program starts, so its first write fails.
#[test]
fn a_closed_standard_output_ends_every_command_quietly() {
    let ex = example();
    let ex = ex.to_str().unwrap();
    let cases: [&[&str]; 8] = [
        &["config", "check", "--config", ex],
        &["config", "check", "--json", "--config", ex],
        &["authz", "matrix", "--config", ex],
        &[
            "authz",
            "explain",
            "--config",
            ex,
            "--json",
            "--actor",
            "slack:U024BE7LH",
            "--action",
            "runs:read",
            "--resource",
            "run:id=r1,channel=slack:G1",
        ],
        &["version"],
        &["completions", "bash"],
        &["--help"],
        &["help", "--config", ex],
    ];
    for args in cases {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(args)
            .env_remove("SWITCHBOARD_CONFIG")
            .env("NO_COLOR", "1")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args:?}: {err}"
        );
        assert!(out.status.code().is_some(), "{args:?}: killed by a signal");
    }
}

/// A cron that names no time in 28 years (`0 0 31 2 *`) is a warning of `config check`, in
/// both forms; one with a slot every leap year is not; `@midnight` is accepted.
#[test]
fn config_check_warns_about_a_cron_that_never_fires() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchboard.toml");
    let ex = std::fs::read_to_string(example()).unwrap();
    let extra = "\n[[schedules]]\nname = \"never\"\ncron = \"0 0 31 2 *\"\ncommand = \"runs list\"\n\n[[schedules]]\nname = \"leap\"\ncron = \"0 0 29 2 *\"\ncommand = \"runs list\"\n\n[[schedules]]\nname = \"nightly\"\ncron = \"@midnight\"\ncommand = \"runs list\"\n\n[grants.\"schedule:never\"]\nactions = [\"runs:read\"]\n\n[grants.\"schedule:leap\"]\nactions = [\"runs:read\"]\n\n[grants.\"schedule:nightly\"]\nactions = [\"runs:read\"]\n";
    std::fs::write(&path, format!("{ex}{extra}")).unwrap();
    let path = path.to_str().unwrap();
    let out = switchboard(&["config", "check", "--config", path]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "warning: schedule `never`: cron `0 0 31 2 *` names no time in the next 28 years"
        ),
        "{stdout}"
    );
    assert_eq!(stdout.matches("warning: schedule").count(), 1, "{stdout}");
    let out = switchboard(&["config", "check", "--json", "--config", path]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warning = |name: &str| {
        v["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()["warning"]
            .clone()
    };
    assert!(warning("never").as_str().unwrap().contains("never fires"));
    assert!(warning("leap").is_null());
    assert!(warning("nightly").is_null());
}
