//! The `command` back end: stdin or argument, its environment, the memory file, failures, stops.

use super::*;

fn command(argv: Vec<String>, via: RequestVia) -> CommandBackend {
    CommandBackend::new(CommandSettings {
        network: agents::CommandNetwork::Host,
        argv,
        request_via: via,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        sandbox: false,
        sandbox_binds: vec![],
        private: vec![],
        claude_code: None,
    })
    .unwrap()
}

#[tokio::test]
async fn command_reads_stdin_streams_lines_and_answers_with_the_last_block() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(
        dir.path(),
        "agent.sh",
        "read req\necho \"working on: $req\"\necho \"\"\necho \"answer line 1\"\necho \"token super-secret-value-1 \\033[31mred\\033[0m\"",
    );
    let (outcome, items) = run(
        &command(vec![s], RequestVia::Stdin),
        job("fix the build"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        outcome.answer(),
        Some("answer line 1\ntoken [redacted] red"),
        "last block, sanitised"
    );
    assert_eq!(events(&items)[0], "working on: fix the build");
    // An unsandboxed program's traffic is the host's: its run says so.
    assert_eq!(
        events_of(&items, "network"),
        ["the agent runs unsandboxed, with the host's network: its traffic is not decided"]
    );
}

#[tokio::test]
async fn command_takes_the_request_as_an_argument_and_gets_a_scrubbed_environment() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), "env.sh", "echo \"arg=$1\"\nenv | sort");
    let (outcome, items) = run(
        &command(vec![s], RequestVia::Argument),
        job("hello"),
        CancellationToken::new(),
    )
    .await;
    let answer = outcome.answer().unwrap().to_owned();
    let lines = events(&items);
    assert_eq!(lines[0], "arg=hello");
    let names: Vec<&str> = answer.lines().filter_map(|l| l.split('=').next()).collect();
    for must in [
        "PATH",
        "SWITCHBOARD_AGENT_TOKEN",
        "SWITCHBOARD_MCP_URL",
        "SWITCHBOARD_MEMORY_FILE",
        "SWITCHBOARD_RUN_ID",
    ] {
        assert!(names.contains(&must), "{must} missing from {names:?}");
    }
    for name in &names {
        assert!(
            ["PATH", "PWD", "SHLVL", "_", "arg"].contains(name) || name.starts_with("SWITCHBOARD_"),
            "{name} leaked into the agent's environment"
        );
    }
}

/// The block reaches a command agent as a file, whichever way the request goes, and the file
/// is gone once the run ends.
#[tokio::test]
async fn a_command_agent_reads_its_memory_block_from_the_file_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(
        dir.path(),
        "mem.sh",
        "echo \"$SWITCHBOARD_MEMORY_FILE\"\necho\necho \"bytes=$(wc -c < \"$SWITCHBOARD_MEMORY_FILE\")\"\ncat \"$SWITCHBOARD_MEMORY_FILE\"",
    );
    for via in [RequestVia::Stdin, RequestVia::Argument] {
        let (outcome, items) = run(
            &command(vec![s.clone()], via),
            remembering("what do you know?"),
            CancellationToken::new(),
        )
        .await;
        assert_eq!(
            outcome.answer(),
            Some("bytes=64\nRemembered:\n- [org] deploys freeze on Fridays\n- [user] likes tea"),
            "{via:?}"
        );
        let path = events(&items)[0].clone();
        assert!(path.contains("switchboard-memory-"), "{path}");
        assert!(
            !Path::new(&path).exists(),
            "the file outlives the run: {path}"
        );
    }
    let (outcome, _) = run(
        &command(vec![s], RequestVia::Stdin),
        job("nothing remembered"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        outcome.answer(),
        Some("bytes=0"),
        "an empty block is an empty file"
    );
}

#[tokio::test]
async fn a_failing_command_puts_stderr_into_friction() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(
        dir.path(),
        "fail.sh",
        "echo partial\necho 'compiler said no' >&2\nexit 3",
    );
    let (outcome, items) = run(
        &command(vec![s], RequestVia::Stdin),
        job("x"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        outcome.error(),
        Some("the agent program exited with status 3")
    );
    assert!(items.iter().any(|i| matches!(i, SinkItem::Friction { kind, detail } if kind == "tool_error" && detail == "compiler said no")));
}

/// A program that is not there: the run's readers are told it could not start, in one
/// sentence without the path; the operator's log names the program. So is one that the
/// shell could not execute (exit 127), its words kept out of friction.
#[tokio::test]
async fn a_missing_program_is_named_in_the_log_not_to_the_runs_readers() {
    let log = test_support::log::CapturedLog::default();
    let _guard = log.install();
    for argv in [
        vec!["/nonexistent/agent".to_owned()],
        vec!["sb-no-such-program".to_owned()],
    ] {
        let (outcome, items) = run(
            &command(argv.clone(), RequestVia::Stdin),
            job("x"),
            CancellationToken::new(),
        )
        .await;
        let said = outcome.error().unwrap();
        assert_eq!(
            said,
            "the agent's program could not be started; the operator's log has the details"
        );
        assert!(items.is_empty(), "{items:?}");
        assert!(
            log.text()
                .contains(&format!("the program `{}` was not found", argv[0])),
            "{}",
            log.text()
        );
    }
    // The sandbox's launcher failing prints its own line (`choom: failed to execute …`):
    // the program never ran, so those words are the operator's, not friction.
    let dir = tempfile::tempdir().unwrap();
    let s = script(
        dir.path(),
        "exec-fails.sh",
        "echo 'choom: failed to execute codex-at-/srv/secret: No such file or directory' >&2\nexit 127",
    );
    let (outcome, items) = run(
        &command(vec![s.clone()], RequestVia::Stdin),
        job("x"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        outcome.error(),
        Some("the agent's program could not be started; the operator's log has the details")
    );
    assert!(
        !items.iter().any(|i| matches!(i, SinkItem::Friction { .. })),
        "{items:?}"
    );
    assert!(
        log.text().contains("codex-at-/srv/secret"),
        "{}",
        log.text()
    );
    // A program that ran and exited 127 itself (a wrapper whose last command is missing) is
    // the agent's own failure: its stderr is friction, as for any other status.
    let wrapper = script(
        dir.path(),
        "wrapper.sh",
        "echo 'wrapper: its tool is missing' >&2\nexit 127",
    );
    let (outcome, items) = run(
        &command(vec![wrapper], RequestVia::Stdin),
        job("x"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        outcome.error(),
        Some("the agent program exited with status 127")
    );
    assert!(items.iter().any(|i| matches!(i, SinkItem::Friction { detail, .. } if detail == "wrapper: its tool is missing")));
}

fn alive(pid: i32) -> bool {
    // `kill -0` through the procfs: a zombie or a gone process has no live status.
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|s| !s.contains("State:\tZ"))
        .unwrap_or(false)
}

#[tokio::test]
async fn cancelling_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child.pid");
    let s = script(
        dir.path(),
        "stall.sh",
        &format!(
            "sleep 300 &\necho $! > {}\necho started\nwait",
            pidfile.display()
        ),
    );
    let cancel = CancellationToken::new();
    let backend = command(vec![s], RequestVia::Stdin);
    let c2 = cancel.clone();
    let pf = pidfile.clone();
    let stopper = tokio::spawn(async move {
        for _ in 0..200 {
            if pf.exists() && !std::fs::read_to_string(&pf).unwrap().trim().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        c2.cancel();
    });
    let (outcome, _) =
        tokio::time::timeout(Duration::from_secs(20), run(&backend, job("x"), cancel))
            .await
            .expect("a cancelled command returns promptly");
    stopper.await.unwrap();
    assert!(outcome.is_cancelled());
    let child: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut gone = false;
    for _ in 0..100 {
        if !alive(child) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "the background child {child} survived the stop");
}

#[tokio::test]
async fn a_background_child_does_not_keep_a_finished_run_alive() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), "bg.sh", "sleep 300 &\necho done");
    let (outcome, _) = tokio::time::timeout(
        Duration::from_secs(20),
        run(
            &command(vec![s], RequestVia::Stdin),
            job("x"),
            CancellationToken::new(),
        ),
    )
    .await
    .expect("the run ends when the program does");
    assert_eq!(outcome.answer(), Some("done"));
}
