//! The file tools on links, on the policy file and on another spelling of a denied name.

use super::*;

/// The decision is lexical; the executor opens the path beneath its grant, so a link cannot
/// carry a call out of its grant (it reads as a missing file, naming only the path sent) or
/// onto a denied file.
#[tokio::test]
async fn links_are_resolved_beneath_the_grant_before_the_disk_is_touched() {
    let fx = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside bytes\n").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        fx.ws.path().join("src/escape"),
    )
    .unwrap();
    // A link that stays beneath the workspace is followed (relative, as a repository holds
    // them); one by its absolute host path, even to a file inside, is not.
    std::os::unix::fs::symlink("../.env", fx.ws.path().join("src/env-link")).unwrap();
    std::os::unix::fs::symlink(fx.ws.path().join(".env"), fx.ws.path().join("src/absolute"))
        .unwrap();
    let (base, script) = scripted_model(vec![
        Reply::Call("read_file", args(json!({"path": fx.path("src/escape")}))),
        Reply::Call("read_file", args(json!({"path": fx.path("src/env-link")}))),
        Reply::Call(
            "write_file",
            args(json!({"path": fx.path("src/escape"), "content": "x"})),
        ),
        Reply::Call("read_file", args(json!({"path": fx.path("src/absolute")}))),
        Reply::Text("ok"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap();
    run_model(&base, gate).await;
    let results = script.tool_results();
    assert_eq!(
        results[0],
        format!("refused: {} {NOT_WITHIN}", fx.path("src/escape"))
    );
    assert_eq!(results[1], format!("refused: .env {REFUSED_READ}"));
    assert!(
        results[2].ends_with("is a symbolic link; write_file does not follow links"),
        "{}",
        results[2]
    );
    assert_eq!(
        results[3],
        format!("refused: {} {NOT_WITHIN}", fx.path("src/absolute"))
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "outside bytes\n"
    );
    assert!(
        !results
            .iter()
            .any(|r| r.contains("outside bytes") || r.contains("hunter2"))
    );
}

/// Nothing in `.switchboard/` can be written through the tool, by its path or through a link
/// to it.
#[tokio::test]
async fn the_policy_file_cannot_be_written() {
    let fx = Fixture::new();
    std::os::unix::fs::symlink(".switchboard", fx.ws.path().join("cfg")).unwrap();
    let (base, script) = scripted_model(vec![
        Reply::Call("write_file", args(json!({"path": fx.path(".switchboard/agent-policy.toml"), "content": "deny_read = []"}))),
        Reply::Call("write_file", args(json!({"path": fx.path("cfg/agent-policy.toml"), "content": "deny_read = []"}))),
        Reply::Text("ok"),
    ])
    .await;
    run_model(
        &base,
        BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap(),
    )
    .await;
    let results = script.tool_results();
    // Each refusal names the path the model sent, never where a link led.
    let want = |sent: &str| {
        format!(
            "refused: {} is in .switchboard/, which no tool writes to; nothing was written",
            fx.path(sent)
        )
    };
    assert_eq!(
        results,
        [
            want(".switchboard/agent-policy.toml"),
            want("cfg/agent-policy.toml")
        ]
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws.path().join(".switchboard/agent-policy.toml")).unwrap(),
        "deny_read = [\".env\"]\n"
    );
}

/// A file named as another spelling of a denied name (`.ENV`, `.env.` for `.env`) is the
/// denied file on a case-insensitive file system (a casefolded directory, a mounted volume):
/// the file tools refuse it like the name itself.
#[tokio::test]
async fn another_spelling_of_a_denied_name_is_refused_by_the_file_tools() {
    let fx = Fixture::new();
    std::fs::write(fx.ws.path().join(".ENV"), "API_KEY=hunter2\n").unwrap();
    let (base, script) = scripted_model(vec![
        Reply::Call("read_file", args(json!({"path": fx.path(".ENV")}))),
        Reply::Call("read_file", args(json!({"path": fx.path("./.Env.")}))),
        Reply::Text("ok"),
    ])
    .await;
    let person: Arc<dyn Approver> = Arc::new(NobodyToAsk);
    run_model(
        &base,
        BrokerGate::new(fx.settings(Ratchet::default(), person)).unwrap(),
    )
    .await;
    let results = script.tool_results();
    assert_eq!(results.len(), 2, "{results:?}");
    for result in &results {
        assert!(!result.contains("hunter2"), "{results:?}");
        assert_eq!(
            *result,
            format!("refused: .env {REFUSED_READ}"),
            "{results:?}"
        );
    }
}
