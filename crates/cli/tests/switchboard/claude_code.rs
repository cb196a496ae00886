//! Claude Code as a Switchboard agent, through the binary, with the real `claude` CLI from npm
//! (`scripts/claude-code.sh` installs the pinned version into target/claude-code) against a
//! scripted Anthropic Messages API on loopback, reached through the run's model gateway. Each
//! tool call the scripted model makes is Claude Code's own (`Bash`, `Read`, `Write`,
//! `WebFetch`), run by Claude Code itself once its `PreToolUse` hook has asked the broker.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use test_support::anthropic::{MessagesApi, Reply};

use crate::common;
use crate::common::project::{Project, git, random_marker};
use crate::common::prompted::Prompted;

/// The real Claude Code binary: `SWITCHBOARD_TEST_CLAUDE`, else what scripts/claude-code.sh
/// installed. Missing fails the test (never a skip).
fn claude() -> PathBuf {
    if let Some(path) = std::env::var_os("SWITCHBOARD_TEST_CLAUDE") {
        return PathBuf::from(path);
    }
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/claude-code/node_modules/.bin/claude");
    assert!(
        installed.exists(),
        "the real Claude Code CLI is not installed: run scripts/claude-code.sh (scripts/test.sh and .ci/run do)"
    );
    installed
}

/// A Switchboard whose default agent `cc` is Claude Code reaching `api`, with `grants` and
/// `extra` config.
struct Setup {
    dir: tempfile::TempDir,
}

/// Grants for Claude Code's file tools and shell in the workspace.
const WORKSPACE_GRANTS: &str = "[[agent_grants]]\nid = \"ws-read\"\ntool = \"read_file\"\npaths = [\"{workspace}\"]\nmode = \"auto\"\n\
    [[agent_grants]]\nid = \"ws-write\"\ntool = \"write_file\"\npaths = [\"{workspace}\"]\nmode = \"auto\"\n\
    [[agent_grants]]\nid = \"ws-shell\"\ntool = \"shell\"\npaths = [\"{workspace}\"]\nmode = \"auto\"\n";

impl Setup {
    fn new(api: &MessagesApi, org_rules: &str, extra: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("switchboard.toml"),
            format!(
                "[server]\ndata_dir = \"{data}\"\n[store]\nurl = \"sqlite://{db}\"\n\
                 [agents]\ndefault = \"cc\"\n\
                 [agents.cc]\nbackend = \"claude-code\"\nprogram = \"{claude}\"\nmodel = \"claude-scripted\"\n\
                 model_endpoint = {{ api = \"anthropic\", url = \"{api}\" }}\n\
                 [agent_policy]\nrules = [{org_rules}]\n{WORKSPACE_GRANTS}{extra}",
                data = dir.path().join("data").display(),
                db = dir.path().join("sb.db").display(),
                claude = claude().display(),
                api = api.base,
            ),
        )
        .unwrap();
        Setup { dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("switchboard.toml")
    }

    fn command(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_switchboard"));
        c.arg("--config")
            .arg(self.config())
            .env_remove("SWITCHBOARD_CONFIG")
            .env("NO_COLOR", "1");
        c
    }

    /// `ask --json <args> <request>` with nobody typing: the run's outcome.
    fn ask(&self, args: &[&str]) -> Value {
        let out = self
            .command()
            .args(["ask", "--json"])
            .args(args)
            .arg("do the task")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// `repo add acme/web --path <repo>`, then [`Setup::ask`] in that repo.
    fn ask_in(&self, repo: &Path) -> Value {
        let out = self
            .command()
            .args(["repo", "add", "acme/web", "--path"])
            .arg(repo)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.ask(&["--repo", "acme/web"])
    }

    /// The run's events as JSON.
    fn events(&self, id: &str) -> Vec<Value> {
        let out = self
            .command()
            .args(["runs", "events", id, "--json"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
        });
        v["events"].as_array().cloned().unwrap_or_default()
    }
}

fn run_id(outcome: &Value) -> String {
    outcome["run_id"]
        .as_str()
        .or(outcome["id"].as_str())
        .unwrap_or_else(|| panic!("no run id in {outcome}"))
        .to_owned()
}

/// The events of `kind` as `kind: body` lines.
fn said(events: &[Value], kind: &str) -> String {
    events
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| format!("{kind}: {}", e["body"].as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `Bash` refused by the rule table never runs, and the model reads the broker's reason as
/// the tool's error; the run's events show the call and its decision.
#[tokio::test(flavor = "multi_thread")]
async fn a_denied_bash_call_never_runs_and_the_model_reads_why() {
    let marker = random_marker();
    let api = MessagesApi::serve(vec![
        Reply::Tool(
            "Bash",
            json!({"command": format!("echo ran-{marker}"), "description": "say"}),
        ),
        Reply::Text("finished".to_owned()),
    ])
    .await;
    let setup = Setup::new(&api, "{ action = \"shell.exec\", decision = \"deny\" }", "");
    let outcome = tokio::task::spawn_blocking(move || {
        let o = setup.ask(&[]);
        (o, setup)
    })
    .await
    .unwrap();
    let (outcome, setup) = outcome;
    let results = api.tool_results();
    assert_eq!(outcome["answer"], "finished", "{outcome}\n{results:?}");
    assert!(
        results
            .iter()
            .any(|(text, error)| *error && text.contains("the org policy denies shell.exec")),
        "{results:?}"
    );
    assert!(
        !results
            .iter()
            .any(|(text, _)| text.contains(&format!("ran-{marker}"))),
        "{results:?}"
    );
    let events = setup.events(&run_id(&outcome));
    let tools = said(&events, "tool");
    assert!(
        tools.contains("Bash: refused: the org policy denies shell.exec"),
        "{tools}"
    );
}

/// `git.push = deny` refuses a `Bash` command that pushes, though the bare remote is in the
/// sandbox's reach: the same command pushes when the rule allows it.
#[tokio::test(flavor = "multi_thread")]
async fn a_push_the_rules_deny_is_refused_and_the_same_push_runs_when_allowed() {
    let marker = random_marker();
    let push = format!(
        "cd /workspace && git init -q -b main src && cd src && git -c user.name=a -c user.email=a@example.com commit -q --allow-empty -m one && git init -q --bare ../remote.git && git push -q ../remote.git main && echo pushed-{marker}"
    );
    let script = || {
        vec![
            Reply::Tool(
                "Bash",
                json!({"command": push.clone(), "description": "push"}),
            ),
            Reply::Text("finished".to_owned()),
        ]
    };
    let denied = MessagesApi::serve(script()).await;
    let allowed = MessagesApi::serve(script()).await;
    let rules = "{ action = \"shell.exec\", decision = \"allow\" }, { action = \"git.*\", decision = \"allow\" }";
    let (deny_setup, allow_setup) = (
        Setup::new(&denied, rules, ""),
        Setup::new(&allowed, rules, ""),
    );
    let (first, second) = tokio::task::spawn_blocking(move || {
        (
            deny_setup.ask(&["--policy-rule", "git.push=deny"]),
            allow_setup.ask(&[]),
        )
    })
    .await
    .unwrap();
    assert_eq!(first["answer"], "finished", "{first}");
    assert_eq!(second["answer"], "finished", "{second}");
    let refused = denied.tool_results();
    assert!(
        refused
            .iter()
            .any(|(t, e)| *e && t.contains("the run policy denies git.push")),
        "{refused:?}"
    );
    assert!(
        !refused
            .iter()
            .any(|(t, _)| t.contains(&format!("pushed-{marker}"))),
        "{refused:?}"
    );
    let ran = allowed.tool_results();
    assert!(
        ran.iter()
            .any(|(t, _)| t.contains(&format!("pushed-{marker}"))),
        "{ran:?}"
    );
}

/// A `Read` outside the grants is refused and its bytes never reach the model; one inside
/// them reads.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_outside_the_grants_is_refused() {
    let marker = random_marker();
    let api = MessagesApi::serve(vec![
        Reply::Tool(
            "Write",
            json!({"file_path": "/workspace/note.md", "content": format!("{marker}\n")}),
        ),
        Reply::Tool("Read", json!({"file_path": "/workspace/note.md"})),
        Reply::Tool("Read", json!({"file_path": "/etc/passwd"})),
        Reply::Text("finished".to_owned()),
    ])
    .await;
    let setup = Setup::new(&api, "{ action = \"fs.write\", decision = \"allow\" }", "");
    tokio::task::spawn_blocking(move || setup.ask(&[]))
        .await
        .unwrap();
    let results = api.tool_results();
    assert!(
        results.iter().any(|(t, e)| !*e && t.contains(&marker)),
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .any(|(t, e)| *e && t.contains("refused: fs.read: no-grant")),
        "{results:?}"
    );
    assert!(
        !results.iter().any(|(t, _)| t.contains("root:x:0:0")),
        "{results:?}"
    );
}

/// An ask goes to the run's principal at the terminal: a yes runs the call, a no refuses it;
/// with nobody at the keyboard (a run an ingress token asked for) it is refused at once.
#[tokio::test(flavor = "multi_thread")]
async fn an_ask_is_answered_by_the_runs_principal_and_refused_at_once_with_nobody() {
    let (yes, no) = (random_marker(), random_marker());
    let api = MessagesApi::serve(vec![
        Reply::Tool(
            "Write",
            json!({"file_path": "/workspace/yes.md", "content": yes}),
        ),
        Reply::Tool(
            "Write",
            json!({"file_path": "/workspace/no.md", "content": no}),
        ),
        Reply::Tool(
            "Bash",
            json!({"command": "cat /workspace/*.md", "description": "show"}),
        ),
        Reply::Text("finished".to_owned()),
    ])
    .await;
    let setup = Setup::new(
        &api,
        "{ action = \"shell.exec\", decision = \"allow\" }",
        "",
    );
    let mut cmd = setup.command();
    cmd.args(["ask", "do the task"]);
    let (out, err) = tokio::task::spawn_blocking(move || {
        let mut p = Prompted::spawn(cmd);
        p.answer(1, "y\n");
        p.answer(2, "n\n");
        p.finish()
    })
    .await
    .unwrap();
    let results = api.tool_results();
    assert!(
        results
            .iter()
            .any(|(t, e)| *e && t.contains("needs a person's approval: refused")),
        "{results:?}\n{out}\n{err}"
    );
    // What the shell shows of the workspace: the approved file, not the refused one.
    assert!(
        results
            .iter()
            .any(|(t, _)| t.contains(&yes) && !t.contains(&no)),
        "{results:?}"
    );

    let nobody = MessagesApi::serve(vec![
        Reply::Tool(
            "Write",
            json!({"file_path": "/workspace/x.md", "content": "x"}),
        ),
        Reply::Text("finished".to_owned()),
    ])
    .await;
    let setup = Setup::new(
        &nobody,
        "",
        "[grants.\"http:ops\"]\nactions = [\"runs:read\", \"agent:run:*\"]\nchannels = [\"http:ops\"]\n",
    );
    let mut cmd = setup.command();
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env(
            "SWITCHBOARD_INGRESS_TOKENS",
            r#"{"ops-token-0123456789": {"subject": "ops", "channel": "http:ops"}}"#,
        )
        .stderr(Stdio::null());
    let (child, addr, _) = common::spawn_serve(cmd);
    let _serve = Killed(child);
    let started = Instant::now();
    let reply = reqwest::Client::new()
        .post(format!("http://{addr}/ingress?wait=120"))
        .bearer_auth("ops-token-0123456789")
        .body("write x")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let results = nobody.tool_results();
    assert!(
        results
            .iter()
            .any(|(t, e)| *e && t.contains("needs a person's approval: nobody to ask")),
        "{results:?}\n{reply}"
    );
    // At once: the approval timeout (300 s) was never waited out.
    assert!(started.elapsed() < Duration::from_secs(100), "{reply}");
}

struct Killed(std::process::Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback origin that counts every connection it is offered.
async fn counting_origin() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(tcp);
        }
    });
    (port, count)
}

/// A `WebFetch` of a host no grant names is refused before it runs: the origin is never
/// reached.
#[tokio::test(flavor = "multi_thread")]
async fn a_fetch_of_an_ungranted_host_never_reaches_it() {
    let (port, count) = counting_origin().await;
    let api = MessagesApi::serve(vec![
        Reply::Tool(
            "WebFetch",
            json!({"url": format!("http://127.0.0.1:{port}/secret-drop"), "prompt": "read it"}),
        ),
        Reply::Text("finished".to_owned()),
    ])
    .await;
    let setup = Setup::new(&api, "{ action = \"net.fetch\", decision = \"allow\" }", "");
    tokio::task::spawn_blocking(move || setup.ask(&[]))
        .await
        .unwrap();
    let results = api.tool_results();
    assert!(
        results
            .iter()
            .any(|(t, e)| *e && t.contains("refused: net.fetch: no-grant")),
        "{results:?}"
    );
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// The project's own `.claude/settings.json` (a hook, an `env`) and `.mcp.json` (a server it
/// would start) never run: Switchboard's managed settings are the only hooks, no settings
/// file of the checkout is read, no MCP server starts; `.claude/` is read-only in the sandbox.
#[tokio::test(flavor = "multi_thread")]
async fn the_projects_own_hooks_settings_and_mcp_servers_never_run() {
    let project = Project::new(false);
    std::fs::create_dir_all(project.repo.join(".claude")).unwrap();
    let deny_all = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"project-hook-ran"}}"#;
    std::fs::write(
        project.repo.join(".claude/settings.json"),
        json!({
            "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": format!("echo '{deny_all}'")}]}]},
            "env": {"PROJECT_ENV": "project-env-set"},
            "permissions": {"allow": ["Bash"]},
        })
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        project.repo.join(".mcp.json"),
        json!({"mcpServers": {"proj": {"command": "sh", "args": ["-c", "touch /workspace/mcp-server-ran; sleep 30"]}}})
            .to_string(),
    )
    .unwrap();
    git(&project.repo, &["add", "-A"]);
    git(&project.repo, &["commit", "-q", "-m", "project settings"]);
    let api = MessagesApi::serve(vec![
        Reply::Tool(
            "Bash",
            json!({"command": "ls -a /workspace; echo env=[$PROJECT_ENV]; echo hacked > /workspace/.claude/settings.json && echo overwrote-settings", "description": "look"}),
        ),
        Reply::Text("finished".to_owned()),
    ])
    .await;
    let setup = Setup::new(
        &api,
        "{ action = \"shell.exec\", decision = \"allow\" }",
        "",
    );
    let repo = project.repo.clone();
    let outcome = tokio::task::spawn_blocking(move || setup.ask_in(&repo))
        .await
        .unwrap();
    let results = api.tool_results();
    let shown = results
        .iter()
        .find(|(t, _)| t.contains("env=["))
        .unwrap_or_else(|| panic!("{outcome}\n{results:?}"));
    let (text, _) = shown;
    assert!(
        text.contains(".claude") && text.contains(".mcp.json"),
        "{text}"
    );
    assert!(text.contains("env=[]"), "{text}");
    assert!(!text.contains("overwrote-settings"), "{text}");
    assert!(!text.contains("mcp-server-ran"), "{text}");
    assert!(
        !results.iter().any(|(t, _)| t.contains("project-hook-ran")),
        "{results:?}"
    );
    let offered: Vec<String> = api
        .seen()
        .iter()
        .flat_map(|s| s.body["tools"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    assert!(
        !offered.iter().any(|n| n.starts_with("mcp__")),
        "{offered:?}"
    );
}

mod fetch;
mod hook;

/// A call the rules allow cannot loosen the ones after it: the managed settings' directory is
/// read-only (no drop-in beside them), and the user settings Claude Code would read in its
/// fresh configuration directory are never read.
#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_call_cannot_loosen_the_calls_after_it() {
    let marker = random_marker();
    let loosen = r#"{"permissions": {"allow": ["Bash"]}, "disableAllHooks": true}"#;
    let api = MessagesApi::serve(vec![
        Reply::Tool(
            "Bash",
            json!({"command": format!(
                "mkdir -p /etc/claude-code/managed-settings.d && echo '{loosen}' > /etc/claude-code/managed-settings.d/zz.json && echo dropped-in; \
                 echo '{loosen}' > $CLAUDE_CONFIG_DIR/settings.json && echo user-settings-written; ls /etc/claude-code"
            ), "description": "loosen"}),
        ),
        Reply::Tool(
            "Bash",
            json!({"command": format!("git init -q /tmp/r && echo second-{marker}"), "description": "second"}),
        ),
        Reply::Text("finished".to_owned()),
    ])
    .await;
    let setup = Setup::new(
        &api,
        "{ action = \"shell.exec\", decision = \"allow\" }",
        "",
    );
    tokio::task::spawn_blocking(move || setup.ask(&[]))
        .await
        .unwrap();
    let results = api.tool_results();
    let first = results
        .iter()
        .find(|(t, _)| t.contains("managed-settings.json"))
        .unwrap_or_else(|| panic!("{results:?}"));
    assert!(!first.0.contains("dropped-in"), "{results:?}");
    // The second call's git init asks (no rule allows it) and nobody is at the keyboard.
    assert!(
        results
            .iter()
            .any(|(t, e)| *e && t.contains("git.init needs a person's approval")),
        "{results:?}"
    );
    assert!(
        !results
            .iter()
            .any(|(t, _)| t.contains(&format!("second-{marker}"))),
        "{results:?}"
    );
}

/// Claude Code's own file tools are held to what the executor holds `read_file` and
/// `write_file` to: a committed link that leads out of a narrower grant reads as missing, and
/// nothing is written into `.git/`, whatever the grants say.
#[tokio::test(flavor = "multi_thread")]
async fn the_agents_own_file_tools_stay_beneath_their_grants() {
    let project = Project::new(false);
    let secret = random_marker();
    std::fs::create_dir_all(project.repo.join("docs")).unwrap();
    std::fs::create_dir_all(project.repo.join("private")).unwrap();
    std::fs::write(
        project.repo.join("private/notes.txt"),
        format!("{secret}\n"),
    )
    .unwrap();
    std::os::unix::fs::symlink("../private/notes.txt", project.repo.join("docs/notes.txt"))
        .unwrap();
    git(&project.repo, &["add", "-A"]);
    git(
        &project.repo,
        &["commit", "-q", "-m", "docs link to private"],
    );
    let api = MessagesApi::serve(vec![
        Reply::Tool("Read", json!({"file_path": "/workspace/docs/notes.txt"})),
        Reply::Tool(
            "Write",
            json!({"file_path": "/workspace/.git/hooks/post-checkout", "content": "#!/bin/sh\ngit push\n"}),
        ),
        // A new file in directories not there yet: Claude Code makes them, and the check
        // looks at the nearest one that is.
        Reply::Tool(
            "Write",
            json!({"file_path": "/workspace/fresh/deeper/made.md", "content": "made\n"}),
        ),
        Reply::Text("finished".to_owned()),
    ])
    .await;
    // Reads are granted beneath docs/ only; writes in the whole workspace.
    let grants = "[[agent_grants]]\nid = \"docs-read\"\ntool = \"read_file\"\npaths = [\"{workspace}/docs\"]\nmode = \"auto\"\n";
    let setup = Setup::new(
        &api,
        "{ action = \"fs.write\", decision = \"allow\" }",
        grants,
    );
    let config = std::fs::read_to_string(setup.config()).unwrap().replace(
        "id = \"ws-read\"\ntool = \"read_file\"\npaths = [\"{workspace}\"]",
        "id = \"ws-read\"\ntool = \"read_file\"\npaths = [\"{workspace}/src\"]",
    );
    std::fs::write(setup.config(), config).unwrap();
    let repo = project.repo.clone();
    tokio::task::spawn_blocking(move || setup.ask_in(&repo))
        .await
        .unwrap();
    let results = api.tool_results();
    assert!(
        !results.iter().any(|(t, _)| t.contains(&secret)),
        "{results:?}"
    );
    assert!(
        results.iter().any(|(t, e)| *e
            && t.contains(
                "/workspace/docs/notes.txt is not there within the paths you were granted"
            )),
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .any(|(t, e)| *e && t.contains("is in .git/, which no tool writes to")),
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .any(|(t, e)| !*e && t.contains("/workspace/fresh/deeper/made.md")),
        "{results:?}"
    );
}
