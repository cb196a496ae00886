//! Policy review through the binary: `authz diff` (two files, or a committed revision),
//! `authz test` (the starter cases CI keeps green, a failing case, a file that does not read)
//! and `authz who-can`, with their exit codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::project::git;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/switchboard.example.toml")
}

fn switchboard(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .current_dir(dir)
        .env_remove("SWITCHBOARD_CONFIG")
        .env("NO_COLOR", "1")
        .args(args)
        .output()
        .unwrap()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The example config with `from` replaced by `to` (which must be there), written to `dir`.
fn edited(dir: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(example()).unwrap();
    assert!(
        text.contains(from),
        "the example config no longer has {from:?}"
    );
    let path = dir.join(name);
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    path
}

#[test]
fn the_example_against_itself_changes_nothing_and_one_channel_more_is_exactly_its_reads() {
    let dir = tempfile::tempdir().unwrap();
    let ex = example();
    let ex = ex.to_str().unwrap();
    let same = switchboard(dir.path(), &["authz", "diff", ex, ex, "--json"]);
    assert_eq!(same.status.code(), Some(0));
    assert_eq!(json_of(&same)["changes"], serde_json::json!([]));
    // The ops bot gains one channel.
    let wider = edited(
        dir.path(),
        "wider.toml",
        "actions = [\"runs:read\", \"friction:read\"]\nchannels = [\"http:ops\"]",
        "actions = [\"runs:read\", \"friction:read\"]\nchannels = [\"http:ops\", \"slack:C0NEW\"]",
    );
    let out = switchboard(
        dir.path(),
        &["authz", "diff", ex, wider.to_str().unwrap(), "--json"],
    );
    assert_eq!(out.status.code(), Some(1), "a widening exits 1");
    let changes = json_of(&out)["changes"].as_array().unwrap().clone();
    assert!(!changes.is_empty());
    let mut actions = std::collections::BTreeSet::new();
    for c in &changes {
        assert_eq!(c["change"], "granted", "{c}");
        assert_eq!(c["kind"], "authz", "{c}");
        assert!(
            c["resource"].as_str().unwrap().contains("slack:C0NEW"),
            "{c}"
        );
        let who = (c["actor_id"].as_str(), c["on_behalf_of"].as_str());
        assert!(
            who.0 == Some("http:ops-bot") || who.1 == Some("http:ops-bot"),
            "{c}"
        );
        actions.insert(c["action"].as_str().unwrap().to_owned());
    }
    // Its reads there, what its group adds (runs:write), and the channel's memory (a member
    // writes it): nothing else.
    assert_eq!(
        actions.into_iter().collect::<Vec<_>>(),
        ["friction:read", "memory:write", "runs:read", "runs:write"]
    );
    // Back: the same changes, revoked, and a narrowing exits 0.
    let back = switchboard(
        dir.path(),
        &["authz", "diff", wider.to_str().unwrap(), ex, "--json"],
    );
    assert_eq!(back.status.code(), Some(0));
    let revoked = json_of(&back)["changes"].as_array().unwrap().clone();
    assert_eq!(revoked.len(), changes.len());
    assert!(revoked.iter().all(|c| c["change"] == "revoked"));
    // The human report reads as a sentence per actor and action.
    let text = switchboard(dir.path(), &["authz", "diff", ex, wider.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&text.stdout);
    assert!(
        said.contains("http:ops-bot") && said.contains(" gain runs:read on"),
        "{said}"
    );
    assert!(said.contains("runs in slack:C0NEW"), "{said}");
}

#[test]
fn allowing_git_push_in_the_agent_policy_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let ex = example();
    let pushed = edited(
        dir.path(),
        "pushed.toml",
        "{ action = \"git.push\", decision = \"deny\" }",
        "{ action = \"git.push\", decision = \"allow\" }",
    );
    let out = switchboard(
        dir.path(),
        &[
            "authz",
            "diff",
            ex.to_str().unwrap(),
            pushed.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let changes = json_of(&out)["changes"].as_array().unwrap().clone();
    assert!(!changes.is_empty());
    assert!(
        changes
            .iter()
            .all(|c| c["kind"] == "agent_policy" && c["action"] == "git.push"),
        "{changes:?}"
    );
    assert!(
        changes
            .iter()
            .all(|c| c["after"] == "allow" && c["change"] == "granted")
    );
}

#[test]
fn removing_an_org_ceiling_or_an_agent_grant_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let ex = example();
    let ex = ex.to_str().unwrap();
    // Without the org's git.push rule, a project's own `git.push = allow` would hold.
    let no_ceiling = edited(
        dir.path(),
        "no-ceiling.toml",
        "  { action = \"git.push\", decision = \"deny\" },\n",
        "",
    );
    let out = switchboard(
        dir.path(),
        &["authz", "diff", ex, no_ceiling.to_str().unwrap(), "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let changes = json_of(&out)["changes"].as_array().unwrap().clone();
    assert!(
        changes.iter().any(|c| c["what"] == "ceiling"
            && c["action"] == "git.push"
            && c["before"] == "deny"
            && c["after"] == "none"),
        "{changes:?}"
    );
    // A removed grant can widen too (a deny grant outranks the rest): read it.
    let text = std::fs::read_to_string(example()).unwrap();
    let header = "\n[[agent_grants]]\n";
    let first = text.find(header).unwrap();
    let next = text[first + 1..].find(header).unwrap() + first + 1;
    let fewer = dir.path().join("fewer.toml");
    std::fs::write(&fewer, format!("{}{}", &text[..first], &text[next..])).unwrap();
    let out = switchboard(
        dir.path(),
        &["authz", "diff", ex, fewer.to_str().unwrap(), "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let changes = json_of(&out)["changes"].as_array().unwrap().clone();
    assert!(
        changes
            .iter()
            .any(|c| c["kind"] == "agent_grant" && c["what"] == "removed"),
        "{changes:?}"
    );
}

#[test]
fn git_reads_the_file_as_committed_at_a_revision() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    let file = dir.path().join("switchboard.toml");
    let granted = "[agents.echo]\n[grants.\"http:ci\"]\nactions = [\"runs:read\"]\n";
    std::fs::write(&file, granted).unwrap();
    git(dir.path(), &["add", "switchboard.toml"]);
    git(
        dir.path(),
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "v1",
        ],
    );
    // The file now revokes what v1 granted: a narrowing, exit 0, listed as revoked.
    std::fs::write(&file, "[agents.echo]\n").unwrap();
    let out = switchboard(
        dir.path(),
        &[
            "authz",
            "diff",
            "--git",
            "HEAD",
            "switchboard.toml",
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let changes = json_of(&out)["changes"].as_array().unwrap().clone();
    assert!(!changes.is_empty());
    assert!(
        changes
            .iter()
            .all(|c| c["change"] == "revoked" && c["action"] == "runs:read")
    );
    // Committed again and widened in the file: exit 1.
    std::fs::write(&file, granted.replace("runs:read", "runs:write")).unwrap();
    let wider = switchboard(
        dir.path(),
        &["authz", "diff", "--git", "HEAD", "switchboard.toml"],
    );
    assert_eq!(wider.status.code(), Some(1));
}

#[test]
fn bad_input_is_a_clear_error_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let ex = example();
    let ex = ex.to_str().unwrap();
    std::fs::write(
        dir.path().join("faulty.toml"),
        "[grants.\"group:nobody\"]\nactions = []\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("cases.toml"),
        "[[case]]\nactor = \"slack:U1\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("odd.toml"),
        "[[case]]\nactor = \"slack:U1\"\naction = \"runs:read\"\nresource = \"command:id=runs.list\"\nexpect = \"maybe\"\n",
    )
    .unwrap();
    for (args, says) in [
        (
            vec!["authz", "diff", ex, "missing.toml"],
            "cannot read missing.toml",
        ),
        (vec!["authz", "diff", ex, "faulty.toml"], "group:nobody"),
        (vec!["authz", "diff", ex], "give two config files"),
        (
            vec!["authz", "diff", "--git", "HEAD", ex, ex],
            "give one file",
        ),
        (
            vec!["authz", "diff", "--git", "no-such-rev", ex],
            "git show",
        ),
        (
            vec!["authz", "test", "cases.toml", "--config", ex],
            "each case is a [[case]] table",
        ),
        (
            vec!["authz", "test", "odd.toml", "--config", ex],
            "write \"allow\" or \"deny\"",
        ),
        (
            vec!["authz", "who-can", "runs:reed", "--config", ex],
            "<action>",
        ),
        (
            vec!["authz", "who-can", "runs:read", "run:nope", "--config", ex],
            "<resource>",
        ),
    ] {
        let out = switchboard(dir.path(), &args);
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains(says), "{args:?}: {said}");
    }
}

#[test]
fn the_starter_cases_hold_and_a_failing_case_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let ex = example();
    let ex = ex.to_str().unwrap();
    let cases = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/authz-tests.toml");
    let out = switchboard(
        dir.path(),
        &["authz", "test", cases.to_str().unwrap(), "--config", ex],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains(", 0 failed"), "{said}");
    std::fs::write(
        dir.path().join("wrong.toml"),
        "[[case]]\nactor = \"http:ci\"\naction = \"runs:read\"\nresource = \"command:id=runs.list\"\nexpect = \"allow\"\n\
         [[case]]\nactor = \"http:ci\"\naction = \"runs:read\"\nresource = \"command:id=runs.list\"\nexpect = \"deny\"\nreason = \"not-member\"\n",
    )
    .unwrap();
    let out = switchboard(dir.path(), &["authz", "test", "wrong.toml", "--config", ex]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("FAIL wrong.toml: case 1") && said.contains("expected allow"),
        "{said}"
    );
    assert!(
        said.contains("reason: missing grant runs:read"),
        "explain's reasoning: {said}"
    );
    assert!(
        said.contains("expected reason not-member, got missing-grant"),
        "{said}"
    );
    assert!(said.contains("2 case(s), 2 failed"), "{said}");
}

#[test]
fn who_can_names_each_class_and_what_allows_it() {
    let dir = tempfile::tempdir().unwrap();
    let ex = example();
    let out = switchboard(
        dir.path(),
        &[
            "authz",
            "who-can",
            "runs:write",
            "run:id=r1,channel=http:ops,user=http:x,visibility=machine",
            "--config",
            ex.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let allowed = json_of(&out)["allowed"].as_array().unwrap().clone();
    let by = |actor: &str| {
        allowed
            .iter()
            .find(|a| a["actor"] == actor)
            .map(|a| a["granted_by"].clone())
    };
    assert_eq!(
        by("http:ops-bot"),
        Some(serde_json::json!(["group:oncall"]))
    );
    assert!(by("slack:U024BE7LH").is_some());
    assert!(by("cli:local").is_some());
    assert_eq!(by("http:ci"), None, "the CI token may not");
    assert_eq!(by("any unlisted Slack user"), None);
}
