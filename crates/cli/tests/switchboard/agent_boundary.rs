//! The agent boundary, tried as an attacker would, through the binary: an `openai` agent whose
//! model (scripted, on loopback) calls the tools under a permissive but legitimate policy (the
//! org allows `shell.exec`, `fs.*` and the git actions it names; grants cover the workspace),
//! in a repository whose `.switchboard/agent-policy.toml` denies `config/production-secrets.toml`.
//! The secret's two versions (the committed one and the one before it) each carry a random
//! marker; every test asserts that no marker reaches the model, a run event, the answer, the
//! run's branch or the user's checkout, and that what a run writes never governs a later run.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::project::{
    Project, SECRET, Switchboard, assert_no_branch, branch_diff, git, has_branch,
};
use serde_json::{Value, json};
use test_support::model::{Model, Turn};

/// What the org allows in these tests: everything the attacks use, and no push.
const PERMISSIVE: &str = r#"rules = [
  { action = "shell.exec", decision = "allow" },
  { action = "fs.*", decision = "allow" },
  { action = "git.show", decision = "allow" },
  { action = "git.diff", decision = "allow" },
  { action = "git.log", decision = "allow" },
  { action = "git.cat-file", decision = "allow" },
  { action = "git.grep", decision = "allow" },
  { action = "git.blame", decision = "allow" },
  { action = "git.archive", decision = "allow" },
  { action = "git.status", decision = "allow" },
  { action = "git.commit", decision = "allow" },
  { action = "git.add", decision = "allow" },
  { action = "git.branch", decision = "allow" },
  { action = "git.update-ref", decision = "allow" },
  { action = "git.ls-tree", decision = "allow" },
]"#;

/// The same without `shell.exec` (so it asks, and an ask times out after a second).
const STRICT: &str = r#"approval_timeout_seconds = 1
rules = [
  { action = "fs.*", decision = "allow" },
  { action = "git.log", decision = "allow" },
]"#;

/// Runs `turns` as one repo run; asserts nothing of the secret got out. Returns the run's
/// record, its events and what the model was sent.
async fn attack(project: &Project, org: &str, turns: Vec<Turn>) -> (Value, String, String) {
    let model = Model::serve(turns).await;
    let sb = Switchboard::new(&model, org);
    sb.add(project);
    let (run, events) = tokio::task::spawn_blocking(move || {
        let id = sb.repo_run();
        let record = sb.record(&id);
        drop(sb);
        record
    })
    .await
    .unwrap();
    let seen = model.seen();
    project.assert_clean("the model", &seen);
    project.assert_clean("a run event", &events);
    project.assert_clean("the answer", &run.to_string());
    project.assert_untouched();
    project.assert_clean("the run's branch", &branch_diff(project, &run));
    (run, events, seen)
}

fn shell(command: &str) -> Turn {
    ("shell", json!({"command": command, "cwd": "{workspace}"}))
}

fn git_tool(subcommand: &str, args: &[&str]) -> Turn {
    (
        "git",
        json!({"subcommand": subcommand, "args": args, "cwd": "{workspace}"}),
    )
}

mod branch;
mod inflation;
mod keeping;
mod later_runs;
mod merge;
mod paths;
mod policy_found;
mod reads;
mod root;
mod sandbox;
mod tools;
