//! The hook binary on its own: with the real Claude Code and the broker gone, and each bad
//! way of starting it. Every fault is Claude Code's block (exit 2).

use super::*;

/// The hook fails closed with the real Claude Code: with the broker gone (its socket is
/// there, nobody answers), every later call is refused and the model reads why.
#[tokio::test(flavor = "multi_thread")]
async fn with_the_broker_gone_every_call_is_refused() {
    let marker = random_marker();
    let api = MessagesApi::serve(vec![
        Reply::Tool(
            "Bash",
            json!({"command": format!("echo ran-{marker}"), "description": "say"}),
        ),
        Reply::Tool("Read", json!({"file_path": "/etc/hostname"})),
        Reply::Text("finished".to_owned()),
    ])
    .await;
    // Claude Code runs on the host here, where managed settings would apply over the test's.
    assert!(
        !Path::new("/etc/claude-code").exists(),
        "this machine has Claude Code managed settings (/etc/claude-code); they would decide this test's calls"
    );
    let dir = tempfile::tempdir().unwrap();
    // A socket left by a server that is gone: connecting is refused.
    let socket = dir.path().join("proxy.sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let settings =
        agents::claude_code::ClaudeCodeSettings::for_approval_timeout(None, Duration::from_secs(5));
    let hooks: Value = serde_json::from_str(
        &settings.managed_settings(Path::new(env!("CARGO_BIN_EXE_switchboard"))),
    )
    .unwrap();
    // The same hooks, pointed at the dead socket.
    let text = hooks.to_string().replace(
        "sandbox-hook pre-tool-use",
        &format!("sandbox-hook pre-tool-use --socket {}", socket.display()),
    );
    let file = dir.path().join("settings.json");
    std::fs::write(&file, text).unwrap();
    std::fs::create_dir_all(dir.path().join("work")).unwrap();
    let mut cmd = Command::new(claude());
    cmd.args(settings.arguments())
        .arg("--settings")
        .arg(&file)
        .current_dir(dir.path().join("work"))
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir.path())
        .env("CLAUDE_CONFIG_DIR", dir.path().join("config"))
        .env("ANTHROPIC_BASE_URL", &api.base)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("SWITCHBOARD_AGENT_TOKEN", "run-credential")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"do the task")
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let results = api.tool_results();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "finished",
        "{results:?}"
    );
    let refusals = results
        .iter()
        .filter(|(t, e)| *e && t.contains("the broker could not be asked"))
        .count();
    assert_eq!(refusals, 2, "{results:?}");
    assert!(
        !results
            .iter()
            .any(|(t, _)| t.contains(&format!("ran-{marker}"))),
        "{results:?}"
    );
}

/// The hook binary's bad inputs: each exits 2 (Claude Code's block) and prints no allow.
#[test]
fn every_bad_hook_invocation_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let dead = dir.path().join("proxy.sock");
    drop(std::os::unix::net::UnixListener::bind(&dead).unwrap());
    let dead = dead.to_str().unwrap();
    let call = r#"{"tool_name":"Bash","tool_input":{"command":"ls"},"cwd":"/workspace","tool_use_id":"t"}"#;
    let table: Vec<(Vec<&str>, Option<&str>, &str)> = vec![
        (
            vec!["pre-tool-use", "--socket", dead],
            Some("c"),
            "could not be asked",
        ),
        (
            vec!["pre-tool-use", "--socket", dead],
            None,
            "SWITCHBOARD_AGENT_TOKEN is not set",
        ),
        (
            vec!["post-tool-use", "--socket", dead],
            Some("c"),
            "could not be asked",
        ),
        (
            vec!["session-start", "--socket", dead],
            Some("c"),
            "is not a hook this binary answers",
        ),
        (
            vec!["pre-tool-use", "--timeout-seconds", "soon"],
            Some("c"),
            "invalid value",
        ),
        (
            vec!["pre-tool-use", "--bogus", "1"],
            Some("c"),
            "unexpected argument",
        ),
        (vec![], Some("c"), "required"),
    ];
    for (args, credential, says) in table {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
        cmd.arg("sandbox-hook")
            .args(&args)
            .env_remove("SWITCHBOARD_AGENT_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(c) = credential {
            cmd.env("SWITCHBOARD_AGENT_TOKEN", c);
        }
        let mut child = cmd.spawn().unwrap();
        {
            use std::io::Write;
            let _ = child.stdin.take().unwrap().write_all(call.as_bytes());
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("allow"),
            "{args:?}"
        );
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
