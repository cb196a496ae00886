//! `switchboard ask` with an `openai` agent whose model calls tools: the broker's prompt on the
//! terminal, `--policy-rule`, the org's `[agent_policy]` ceiling and `[[agent_grants]]` from the
//! config, against a scripted model on loopback and the real binary. The model writes a file,
//! then answers with what its last tool call returned, which is what these tests read.

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::common::prompted::Prompted;

/// The scripted model (each request gets the next turn; `{workspace}` is the workspace the
/// broker named; once spent, it echoes the last tool result), at its base URL.
async fn scripted_model(calls: Vec<(&'static str, Value)>) -> String {
    test_support::model::Model::serve(calls).await.base
}

/// An RFC 3339 time `seconds` from now (by date(1), the machine's own clock).
fn in_seconds(seconds: u64) -> String {
    let at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + seconds;
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{at}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn config(dir: &std::path::Path, base: &str, extra: &str) -> std::path::PathBuf {
    let path = dir.join("switchboard.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\ndata_dir = \"{data}\"\n[store]\nurl = \"sqlite://{db}\"\n[agents]\ndefault = \"local\"\n\
             [agents.local]\nbackend = \"openai\"\nbase_url = \"{base}\"\nmodel = \"scripted\"\nkind = \"main\"\n{extra}",
            data = dir.join("data").display(),
            db = dir.join("sb.db").display(),
        ),
    )
    .unwrap();
    path
}

/// `switchboard ask` on `config` with `args`, answering the broker's prompts.
fn ask(config: &std::path::Path, args: &[&str]) -> Prompted {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.arg("--config")
        .arg(config)
        .arg("ask")
        .args(args)
        .arg("write the notes");
    Prompted::spawn(cmd)
}

const WRITE_GRANT: &str = "[[agent_grants]]\nid = \"notes\"\nagent = \"local\"\ntool = \"write_file\"\npaths = [\"{workspace}\"]\nmode = \"auto\"\n";

/// The model asks to write; the rules ask the person; `line` is typed at the prompt.
async fn write_answered_with(line: &'static str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let base = scripted_model(vec![(
        "write_file",
        json!({"path": "{workspace}/notes.md", "content": "hello"}),
    )])
    .await;
    let cfg = config(dir.path(), &base, WRITE_GRANT);
    tokio::task::spawn_blocking(move || {
        let mut a = ask(&cfg, &[]);
        a.answer(1, line);
        a.finish()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_terminal_prompt_approves_a_write_the_rules_ask_about() {
    let (out, err) = write_answered_with("y\n").await;
    assert!(
        err.contains("the agent asks to fs.write (write_file"),
        "{err}"
    );
    assert!(out.contains("last tool result: wrote 5 bytes to "), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_at_the_prompt_refuses_the_write() {
    let (out, _) = write_answered_with("n\n").await;
    assert!(
        out.contains("last tool result: refused: fs.write needs a person's approval: refused"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_rule_answers_for_the_run_and_is_printed_and_the_org_caps_it() {
    let dir = tempfile::tempdir().unwrap();
    let write = || {
        (
            "write_file",
            json!({"path": "{workspace}/notes.md", "content": "hello"}),
        )
    };
    // The run's rule answers instead of asking: allowed without a prompt.
    let base = scripted_model(vec![write()]).await;
    let cfg = config(dir.path(), &base, WRITE_GRANT);
    let (out, err) = tokio::task::spawn_blocking(move || {
        ask(&cfg, &["--policy-rule", "fs.write=allow"]).finish()
    })
    .await
    .unwrap();
    assert!(
        err.contains("policy rule for this run: action=fs.write => allow"),
        "{err}"
    );
    assert!(!err.contains("Allow? [y/N]"), "{err}");
    assert!(out.contains("last tool result: wrote 5 bytes"), "{out}");
    // The org's rule is a ceiling the run's rule cannot lift.
    let base = scripted_model(vec![write()]).await;
    let org = format!(
        "{WRITE_GRANT}[agent_policy]\nrules = [{{ action = \"fs.*\", decision = \"deny\" }}]\n"
    );
    let cfg = config(dir.path(), &base, &org);
    let (out, _) = tokio::task::spawn_blocking(move || {
        ask(&cfg, &["--policy-rule", "fs.write=allow"]).finish()
    })
    .await
    .unwrap();
    assert!(
        out.contains("last tool result: refused: the org policy denies fs.write"),
        "{out}"
    );
}

/// Long enough for `ask` to reach its prompt on a loaded machine while the grant still holds.
const GRANT_LIFE: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_given_after_the_grant_expired_is_a_denial() {
    let dir = tempfile::tempdir().unwrap();
    let base = scripted_model(vec![(
        "shell",
        json!({"command": "touch ran", "cwd": "{workspace}"}),
    )])
    .await;
    let grant = format!(
        "[[agent_grants]]\nid = \"brief-shell\"\ntool = \"shell\"\npaths = [\"{{workspace}}\"]\nmode = \"ask\"\nexpires = \"{}\"\n",
        in_seconds(GRANT_LIFE.as_secs())
    );
    let cfg = config(dir.path(), &base, &grant);
    // The grant's time is kept in whole seconds: it may end up to a second before this.
    let expires = std::time::Instant::now() + GRANT_LIFE;
    let (out, _) = tokio::task::spawn_blocking(move || {
        let mut a = ask(&cfg, &["--policy-rule", "shell.exec=allow"]);
        a.wait_for_prompt(1);
        // Past the grant's expiry before the answer arrives.
        std::thread::sleep(expires.saturating_duration_since(std::time::Instant::now()));
        std::thread::sleep(Duration::from_secs(1));
        a.answer(1, "y\n");
        a.finish()
    })
    .await
    .unwrap();
    assert!(
        out.contains("last tool result: refused: shell.exec: grant-expired"),
        "{out}"
    );
}

#[test]
fn a_malformed_policy_rule_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "http://127.0.0.1:9/v1", "");
    for bad in ["fs.write", "*=allow", "net.*.fetch=allow", "fs.write=maybe"] {
        let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("--config")
            .arg(&cfg)
            .args(["ask", "--policy-rule", bad, "x"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad} was accepted");
        assert!(err.contains("--policy-rule"), "{bad}: {err}");
    }
}

/// A server `mcp add` configured is offered to the agent, and its tool call passes the broker:
/// no rule names `mcp.notes.shout`, so the person is asked, and their yes lets the grant decide.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_added_with_mcp_add_is_called_through_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let notes = agents::testing::NotesServer::serve().await.unwrap();
    let base = scripted_model(vec![(
        "mcp",
        json!({"server": "notes", "tool": "shout", "arguments": {"text": "hi"}}),
    )])
    .await;
    let grant = "[[agent_grants]]\nid = \"notes-shout\"\nagent = \"local\"\ntool = \"mcp.notes.shout\"\nmode = \"auto\"\n";
    let cfg = config(dir.path(), &base, grant);
    let added = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--config")
        .arg(&cfg)
        .args(["mcp", "add", "notes", &notes.url, "--org"])
        .output()
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let (out, err) = tokio::task::spawn_blocking(move || {
        let mut a = ask(&cfg, &[]);
        a.answer(1, "y\n");
        a.finish()
    })
    .await
    .unwrap();
    assert!(
        err.contains("the agent asks to mcp.notes.shout (mcp"),
        "{err}"
    );
    assert!(out.contains("last tool result: HI"), "{out}");
    assert_eq!(notes.calls(), 1);
}
