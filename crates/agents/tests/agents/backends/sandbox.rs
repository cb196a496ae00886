//! Command agents in a workspace: the project's deny_read, the sandbox, configured binds.

use super::*;

/// A run's workspace with a secret in `.env`, and its policy file.
fn denying_workspace(policy: &str) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join(".env"), "API_KEY=hunter2\n").unwrap();
    std::fs::create_dir_all(ws.path().join(".switchboard")).unwrap();
    std::fs::write(ws.path().join(".switchboard/agent-policy.toml"), policy).unwrap();
    ws
}

/// A job in `ws`, whose project denies `deny_read` (the dispatcher read them from the repo's
/// base before it made the workspace).
fn in_workspace(request: &str, ws: &Path, deny_read: &[&str]) -> AgentJob {
    AgentJob {
        workspace: Some(Workspace {
            dir: ws.to_owned(),
            repository: false,
            deny_read: deny_read.iter().map(|d| d.to_string()).collect(),
            protected: Vec::new(),
            private: Vec::new(),
        }),
        ..job(request)
    }
}

fn sandboxed(argv: Vec<String>, sandbox: bool) -> CommandBackend {
    CommandBackend::new(CommandSettings {
        network: agents::CommandNetwork::Host,
        argv,
        request_via: RequestVia::Stdin,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        sandbox,
        sandbox_binds: vec![],
        private: vec![],
        claude_code: None,
    })
    .unwrap()
}

fn sh(script: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), script.into()]
}

/// A sandboxed agent with `sandbox_bind` (read-write) and `sandbox_read_only` paths.
fn sandboxed_with(
    argv: Vec<String>,
    bind: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
) -> CommandBackend {
    CommandBackend::new(CommandSettings {
        network: agents::CommandNetwork::Host,
        argv,
        request_via: RequestVia::Stdin,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        sandbox: true,
        sandbox_binds: bind
            .into_iter()
            .map(|path| ConfiguredBind {
                path,
                writable: true,
                at: None,
            })
            .chain(read_only.into_iter().map(|path| ConfiguredBind {
                path,
                writable: false,
                at: None,
            }))
            .collect(),
        private: vec![],
        claude_code: None,
    })
    .unwrap()
}

/// The project's deny_read binds the command agent even when its settings do not ask for a
/// sandbox: `cat .env` reads the stub, never the bytes.
#[tokio::test]
async fn a_command_agent_in_a_denying_project_reads_the_stub() {
    let ws = denying_workspace("deny_read = [\".env\"]\n");
    let (outcome, _) = run(
        &sandboxed(sh("cat .env"), false),
        in_workspace("x", ws.path(), &[".env"]),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        outcome.answer(),
        Some(agents::sandbox::STUB_TEXT.trim_end()),
        "{:?}",
        outcome.error()
    );
    // Without the project's denial and without the setting, the same program reads the file,
    // so the stub above is the sandbox's doing.
    let open = denying_workspace("");
    let (outcome, _) = run(
        &sandboxed(sh("cat .env"), false),
        in_workspace("x", open.path(), &[]),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(outcome.answer(), Some("API_KEY=hunter2"));
}

#[tokio::test]
async fn a_sandboxed_command_agent_sees_its_memory_file_and_not_the_host() {
    let ws = denying_workspace("");
    let dir = tempfile::tempdir().unwrap();
    let s = script(
        dir.path(),
        "agent.sh",
        "test -e /etc/shadow && echo host; test -r \"$SWITCHBOARD_MEMORY_FILE\" && echo memory; echo policy > .switchboard/agent-policy.toml 2>/dev/null && echo wrote-policy; echo done",
    );
    let (outcome, _) = run(
        &sandboxed(vec![s], true),
        in_workspace("x", ws.path(), &[]),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        outcome.answer(),
        Some("memory\ndone"),
        "{:?}",
        outcome.error()
    );
}

/// What the agent's config binds in is there (a login directory it writes, as a copy of its
/// own for this run; tools it only reads), and nothing else of the host is; a configured path
/// that does not exist stops the run with the fix, before the program starts.
#[tokio::test]
async fn configured_binds_are_the_only_host_paths_a_sandboxed_agent_sees() {
    let ws = denying_workspace("");
    let login = tempfile::tempdir().unwrap();
    std::fs::write(login.path().join("token"), "t").unwrap();
    // Mode 0700: under a root test run its host user could not read it, so it is a read-only
    // copy of theirs.
    let tools = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(tools.path().join("tool.txt"), "a tool").unwrap();
    std::fs::write(elsewhere.path().join("x.txt"), "not bound").unwrap();
    let script = format!(
        "echo token > {login}/session && echo wrote-login; cat {tools}/tool.txt; echo; \
         echo x > {tools}/new 2>/dev/null && echo wrote-tools; \
         cat {elsewhere}/x.txt 2>/dev/null || echo no-elsewhere",
        login = login.path().display(),
        tools = tools.path().display(),
        elsewhere = elsewhere.path().display(),
    );
    let backend = sandboxed_with(
        sh(&script),
        vec![login.path().to_owned()],
        vec![tools.path().to_owned()],
    );
    let (outcome, _) = run(
        &backend,
        in_workspace("x", ws.path(), &[]),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        outcome.answer(),
        Some("wrote-login\na tool\nno-elsewhere"),
        "{:?}",
        outcome.error()
    );
    // The run wrote its own copy: the host's directory is as it was, and the next run (of
    // anyone) starts from it, not from what this run left.
    assert!(!login.path().join("session").exists());
    assert_eq!(
        std::fs::read_to_string(login.path().join("token")).unwrap(),
        "t"
    );
    assert!(!tools.path().join("new").exists());
    let next = sandboxed_with(
        sh(&format!(
            "cat {login}/token; echo; test -e {login}/session && echo left-behind || echo fresh",
            login = login.path().display()
        )),
        vec![login.path().to_owned()],
        vec![],
    );
    let (outcome, _) = run(
        &next,
        in_workspace("x", ws.path(), &[]),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(outcome.answer(), Some("t\nfresh"), "{:?}", outcome.error());

    let missing = login.path().join("not-yet");
    let marker = ws.path().join("started");
    let backend = sandboxed_with(
        sh(&format!("touch {}", marker.display())),
        vec![missing.clone()],
        vec![],
    );
    let log = test_support::log::CapturedLog::default();
    let _guard = log.install();
    let (outcome, _) = run(
        &backend,
        in_workspace("x", ws.path(), &[]),
        CancellationToken::new(),
    )
    .await;
    // The run's readers are told the sandbox could not be made; the operator's log says why.
    let error = outcome.error().unwrap_or_default();
    assert_eq!(
        error,
        "the agent's sandbox could not be made; the operator's log has the details"
    );
    let logged = log.text();
    assert!(
        logged.contains(&format!("{} does not exist", missing.display()))
            && logged.contains("sandbox_bind"),
        "{logged}"
    );
    assert!(!marker.exists(), "the program ran");
}
