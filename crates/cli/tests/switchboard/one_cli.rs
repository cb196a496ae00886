//! One command line: completions of every command and argument, a group's help, the nearest
//! command to a mistyped one, `--json` on every verb (errors included, pretty), exit 1 for a
//! run that failed, and memory the command line wrote that it can list and forget.

use std::path::Path;
use std::process::{Command, Output};

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .current_dir(dir)
        .env_remove("SWITCHBOARD_CONFIG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON on standard output, which must be pretty (one key a line).
fn pretty_json(o: &Output) -> serde_json::Value {
    let text = out(o);
    assert!(
        text.trim_start().starts_with('{') && text.contains("\n  \""),
        "{text}"
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn completions_cover_every_registry_command_and_its_arguments() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let o = run(dir.path(), &["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", err(&o));
        let script = out(&o);
        // fish writes an option as `-l status`, the others as `--status`.
        let option = |name: &str| match shell {
            "fish" => format!("-l {name}"),
            _ => format!("--{name}"),
        };
        let words = [
            "friction".to_owned(),
            "forget".to_owned(),
            "schedule".to_owned(),
            "live".to_owned(),
            "finished".to_owned(),
            option("status"),
            option("org"),
        ];
        for word in words {
            assert!(script.contains(&word), "{shell} lacks {word}");
        }
    }
}

#[test]
fn a_group_alone_shows_its_commands_and_a_mistyped_one_the_nearest() {
    let dir = tempfile::tempdir().unwrap();
    let group = run(dir.path(), &["runs"]);
    assert_eq!(group.status.code(), Some(0), "{}", err(&group));
    assert!(
        out(&group).contains("runs list") && out(&group).contains("runs stop"),
        "{}",
        out(&group)
    );
    let typo = run(dir.path(), &["runs", "lst"]);
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        err(&typo).contains("did you mean `runs list`?"),
        "{}",
        err(&typo)
    );
    let verb = run(dir.path(), &["rnus", "list"]);
    assert_eq!(verb.status.code(), Some(2));
    assert!(
        err(&verb).contains("did you mean `runs`?"),
        "{}",
        err(&verb)
    );
    // None of them made a store.
    assert!(!dir.path().join("switchboard.db").exists());
}

/// `--json` on every verb: data pretty-printed on standard output, errors as
/// `{"error": …, "code": …}` there too, the exit status as without it.
#[test]
fn json_is_pretty_on_every_verb_errors_included() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let version = run(d, &["--json", "version"]);
    assert_eq!(pretty_json(&version)["version"], env!("CARGO_PKG_VERSION"));
    let asked = run(d, &["ask", "--json", "hello"]);
    assert_eq!(asked.status.code(), Some(0), "{}", err(&asked));
    assert_eq!(pretty_json(&asked)["status"], "completed");
    let missing = run(d, &["runs", "get", "0000000000000NOSUCHRUN0000", "--json"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(pretty_json(&missing)["code"], "not_found");
    let unknown = run(d, &["--json", "frobnicate"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert_eq!(pretty_json(&unknown)["code"], "unknown_command");
    let usage = run(d, &["--json", "--bogus"]);
    assert_eq!(usage.status.code(), Some(2));
    assert_eq!(pretty_json(&usage)["code"], "usage");
    std::fs::write(d.join("bad.toml"), "[server]\nlisten = 1\n").unwrap();
    let config = run(d, &["--json", "--config", "bad.toml", "runs", "list"]);
    assert_eq!(config.status.code(), Some(2));
    let v = pretty_json(&config);
    assert_eq!(v["code"], "config");
    assert_eq!(v["faults"][0]["key"], "server.listen");
    assert!(err(&config).is_empty(), "{}", err(&config));
}

/// A command whose run failed exits 1, as `ask` does: `repo test` of a failing agent.
#[test]
fn repo_test_of_a_failed_run_exits_one() {
    let dir = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    agents::testing::init_repository(repo.path()).unwrap();
    std::fs::write(
        dir.path().join("switchboard.toml"),
        "[agents]\ndefault = \"echo\"\n[agents.echo]\n[agents.coding]\nbehaviour = \"fail\"\n",
    )
    .unwrap();
    let add = run(
        dir.path(),
        &[
            "repo",
            "add",
            "acme/tools",
            "--path",
            repo.path().to_str().unwrap(),
        ],
    );
    assert_eq!(add.status.code(), Some(0), "{}", err(&add));
    let test = run(dir.path(), &["repo", "test", "acme/tools"]);
    assert_eq!(
        test.status.code(),
        Some(1),
        "{}\n{}",
        out(&test),
        err(&test)
    );
    assert!(err(&test).contains("failed"), "{}", err(&test));
}

/// A channel fact said on the command line is listed by `memory list` (its channel is
/// `cli:local`, as for `ask`) and forgotten by its id; a repo fact with no repo is not kept,
/// and the command line says why.
#[test]
fn the_command_lines_own_memory_is_listed_and_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let said = run(
        d,
        &["ask", "remember for this channel: the build box is slow"],
    );
    assert_eq!(said.status.code(), Some(0), "{}", err(&said));
    for args in [
        &["memory", "list"][..],
        &["memory", "list", "--scope", "channel"],
    ] {
        let listed = run(d, args);
        assert!(
            out(&listed).contains("[channel:cli:local]  the build box is slow"),
            "{args:?}: {}",
            out(&listed)
        );
    }
    let listed = run(d, &["memory", "list", "--json"]);
    let id = pretty_json(&listed)["records"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let forgot = run(d, &["memory", "forget", &id]);
    assert_eq!(forgot.status.code(), Some(0), "{}", err(&forgot));
    assert!(!out(&run(d, &["memory", "list"])).contains("build box"));

    let repo_fact = run(d, &["ask", "remember for this repo: tests need docker"]);
    assert_eq!(repo_fact.status.code(), Some(0), "{}", err(&repo_fact));
    assert!(
        err(&repo_fact).contains("not kept: `remember for this repo:` needs a run in a repo"),
        "{}",
        err(&repo_fact)
    );
    assert!(!out(&run(d, &["memory", "list"])).contains("docker"));
}
