//! The back ends against real peers: shell scripts for `command`, a small OpenAI-compatible
//! server on loopback for `openai`.
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agents::sandbox::ConfiguredBind;
use agents::{
    AgentBackend, AgentJob, AgentOutcome, CancellationToken, CommandBackend, CommandSettings,
    EchoBackend, EchoBehaviour, EchoSettings, EventSink, MemoryBlock, OpenAiBackend,
    OpenAiSettings, OutputCaps, RequestVia, Sanitizer, SinkItem, Workspace,
};
use authz_core::{AgentName, RunId};

fn job(request: &str) -> AgentJob {
    AgentJob {
        run_id: RunId::parse("01JABCDEFGHJKMNPQRSTVWXYZ0").unwrap(),
        agent: AgentName::parse("tester").unwrap(),
        request: request.into(),
        memory: MemoryBlock::default(),
        repo: None,
        workspace: None,
        mcp_url: Some("http://127.0.0.1:9/mcp".into()),
        agent_token: "agent-token-for-this-run".into(),
        tools: None,
    }
}

async fn run(
    backend: &dyn AgentBackend,
    job: AgentJob,
    cancel: CancellationToken,
) -> (AgentOutcome, Vec<SinkItem>) {
    let sanitizer = Arc::new(Sanitizer::new(vec!["super-secret-value-1".into()]));
    let (sink, mut rx) = EventSink::channel(OutputCaps::default(), sanitizer);
    let drain = tokio::spawn(async move {
        let mut items = Vec::new();
        while let Some(i) = rx.recv().await {
            items.push(i);
        }
        items
    });
    let outcome = backend.run(job, sink, cancel).await;
    (outcome, drain.await.unwrap())
}

fn events(items: &[SinkItem]) -> Vec<String> {
    items
        .iter()
        .filter_map(|i| match i {
            SinkItem::Event { body, .. } => Some(body.clone()),
            SinkItem::Friction { .. } => None,
        })
        .collect()
}

fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    path.to_string_lossy().into_owned()
}

fn command(argv: Vec<String>, via: RequestVia) -> CommandBackend {
    CommandBackend::new(CommandSettings {
        argv,
        request_via: via,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        sandbox: false,
        sandbox_binds: vec![],
        private: vec![],
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

fn remembering(request: &str) -> AgentJob {
    AgentJob {
        memory: MemoryBlock::new(
            "Remembered:\n- [org] deploys freeze on Fridays\n- [user] likes tea".into(),
            vec![("org", 1), ("user", 1)],
        ),
        ..job(request)
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
async fn echo_says_how_many_records_it_was_given_never_their_text() {
    let echo = EchoBackend::new(EchoSettings::default());
    let (o, items) = run(&echo, remembering("hi"), CancellationToken::new()).await;
    let answer = o.answer().unwrap();
    assert!(
        answer.contains("memory: 2 records (org 1, user 1)"),
        "{answer}"
    );
    let all = format!("{answer}\n{}", events(&items).join("\n"));
    assert!(!all.contains("Fridays") && !all.contains("tea"), "{all}");
    let (o, _) = run(&echo, job("hi"), CancellationToken::new()).await;
    assert!(o.answer().unwrap().contains("memory: none"));
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

#[tokio::test]
async fn a_missing_program_fails_with_its_name() {
    let (outcome, _) = run(
        &command(vec!["/nonexistent/agent".into()], RequestVia::Stdin),
        job("x"),
        CancellationToken::new(),
    )
    .await;
    assert!(
        outcome
            .error()
            .unwrap()
            .starts_with("could not start `/nonexistent/agent`")
    );
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

#[tokio::test]
async fn echo_answers_deterministically_and_says_what_it_is() {
    let echo = EchoBackend::new(EchoSettings::default());
    let (a, items) = run(&echo, job("summarise the week"), CancellationToken::new()).await;
    let (b, _) = run(&echo, job("summarise the week"), CancellationToken::new()).await;
    assert_eq!(a, b);
    let answer = a.answer().unwrap();
    assert!(answer.contains("runs no model"), "{answer}");
    assert!(answer.contains("request: summarise the week"));
    assert_eq!(events(&items).len(), 3);
}

#[tokio::test]
async fn echo_can_fail_and_stall() {
    let fail = EchoBackend::new(EchoSettings {
        behaviour: EchoBehaviour::Fail,
        ..Default::default()
    });
    let (o, _) = run(&fail, job("x"), CancellationToken::new()).await;
    assert!(o.error().unwrap().contains("told to fail"));
    let stall = EchoBackend::new(EchoSettings {
        behaviour: EchoBehaviour::Stall,
        ..Default::default()
    });
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        c2.cancel();
    });
    let (o, items) = run(&stall, job("x"), cancel).await;
    assert!(o.is_cancelled());
    assert_eq!(events(&items).len(), 2, "it said it was stalling");
}

/// A small OpenAI-compatible server: streams the answer back in pieces, or errors, or asks
/// for a tool, depending on the request.
async fn fake_openai() -> String {
    use axum::Router;
    use axum::body::Body;
    use axum::http::{HeaderMap, Response, StatusCode};
    use axum::routing::post;

    async fn completions(headers: HeaderMap, body: String) -> Response<Body> {
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["stream"], true);
        assert_eq!(v["model"], "test-model");
        let messages = v["messages"].as_array().unwrap();
        let request = messages.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned();
        if request == "what do you remember?" {
            // Everything but the first system prompt and the user's message.
            let given: Vec<String> = messages[1..messages.len() - 1]
                .iter()
                .map(|m| {
                    format!(
                        "{}: {}",
                        m["role"].as_str().unwrap(),
                        m["content"].as_str().unwrap()
                    )
                })
                .collect();
            let chunk = serde_json::json!({"choices":[{"delta":{"content":given.join("|")}}]});
            return Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(format!("data: {chunk}\n\ndata: [DONE]\n\n")))
                .unwrap();
        }
        let auth = headers
            .get("authorization")
            .map(|h| h.to_str().unwrap().to_owned());
        if request == "unauthorised"
            || auth.as_deref() != Some("Bearer sk-test-key-0123456789abcdef")
        {
            return Response::builder()
                .status(StatusCode::UNAUTHORIZED)
                .body(Body::from(
                    "{\"error\":\"bad key sk-test-key-0123456789abcdef\"}",
                ))
                .unwrap();
        }
        let mut out = String::new();
        if request == "use a tool" {
            out.push_str(&format!(
                "data: {}\n\n",
                serde_json::json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"1","function":{"name":"shell","arguments":"{}"}}]}}]})
            ));
        } else {
            for piece in ["You said: ", &request, "\nSecond", " line"] {
                out.push_str(&format!(
                    "data: {}\n\n",
                    serde_json::json!({"choices":[{"delta":{"content":piece}}]})
                ));
            }
            out.push_str("data: [DONE]\n\n");
        }
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(out))
            .unwrap()
    }

    let app = Router::new().route("/v1/chat/completions", post(completions));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

fn openai(base: &str, key: &str) -> OpenAiBackend {
    OpenAiBackend::new(OpenAiSettings {
        base_url: base.into(),
        model: "test-model".into(),
        api_key: Some(key.into()),
        system_prompt: None,
    })
    .unwrap()
}

#[tokio::test]
async fn openai_streams_lines_as_events_and_the_whole_text_as_the_answer() {
    let base = fake_openai().await;
    let backend = openai(&base, "sk-test-key-0123456789abcdef");
    let (o, items) = run(&backend, job("ship it"), CancellationToken::new()).await;
    assert_eq!(o.answer(), Some("You said: ship it\nSecond line"));
    assert_eq!(events(&items), vec!["You said: ship it", "Second line"]);
}

#[tokio::test]
async fn openai_gets_the_memory_block_as_a_system_message_of_its_own() {
    let base = fake_openai().await;
    let backend = openai(&base, "sk-test-key-0123456789abcdef");
    let (o, _) = run(
        &backend,
        remembering("what do you remember?"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        o.answer(),
        Some("system: Remembered:\n- [org] deploys freeze on Fridays\n- [user] likes tea")
    );
    let (o, _) = run(
        &backend,
        job("what do you remember?"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(o.answer(), Some(""), "no block, no extra message");
}

#[tokio::test]
async fn openai_errors_are_named_and_the_remote_body_is_sanitised_friction() {
    let base = fake_openai().await;
    let (o, items) = run(
        &openai(&base, "sk-wrong-key-0000000000000000"),
        job("x"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        o.error(),
        Some("the model endpoint answered 401 Unauthorized")
    );
    let friction: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            SinkItem::Friction { detail, .. } => Some(detail.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(friction.len(), 1);
    assert!(!friction[0].contains("sk-test-key"), "{friction:?}");
    let good = openai(&base, "sk-test-key-0123456789abcdef");
    let (o, _) = run(&good, job("use a tool"), CancellationToken::new()).await;
    assert!(
        o.error()
            .unwrap()
            .starts_with("the model asked for a tool, and this agent has no tools"),
        "{:?}",
        o.error()
    );
    let (o, _) = run(
        &openai("http://127.0.0.1:9/v1", "k"),
        job("x"),
        CancellationToken::new(),
    )
    .await;
    assert!(
        o.error()
            .unwrap()
            .starts_with("the model endpoint could not be reached")
    );
}

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
            private: Vec::new(),
        }),
        ..job(request)
    }
}

fn sandboxed(argv: Vec<String>, sandbox: bool) -> CommandBackend {
    CommandBackend::new(CommandSettings {
        argv,
        request_via: RequestVia::Stdin,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        sandbox,
        sandbox_binds: vec![],
        private: vec![],
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
        argv,
        request_via: RequestVia::Stdin,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        sandbox: true,
        sandbox_binds: bind
            .into_iter()
            .map(|path| ConfiguredBind {
                path,
                writable: true,
            })
            .chain(read_only.into_iter().map(|path| ConfiguredBind {
                path,
                writable: false,
            }))
            .collect(),
        private: vec![],
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

/// What the agent's config binds in is there (a login directory it writes, tools it only
/// reads), and nothing else of the host is; a configured path that does not exist stops the
/// run with the fix, before the program starts.
#[tokio::test]
async fn configured_binds_are_the_only_host_paths_a_sandboxed_agent_sees() {
    let ws = denying_workspace("");
    let login = tempfile::tempdir().unwrap();
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
    assert_eq!(
        std::fs::read_to_string(login.path().join("session")).unwrap(),
        "token\n"
    );
    assert!(!tools.path().join("new").exists());

    let missing = login.path().join("not-yet");
    let marker = ws.path().join("started");
    let backend = sandboxed_with(
        sh(&format!("touch {}", marker.display())),
        vec![missing.clone()],
        vec![],
    );
    let (outcome, _) = run(
        &backend,
        in_workspace("x", ws.path(), &[]),
        CancellationToken::new(),
    )
    .await;
    let error = outcome.error().unwrap_or_default();
    assert!(
        error.contains(&format!("{} does not exist", missing.display()))
            && error.contains("sandbox_bind"),
        "{error}"
    );
    assert!(!marker.exists(), "the program ran");
}

/// A model endpoint that answers every request with `head` and then writes `piece` for ever
/// (until the client goes away).
async fn endless_model(head: &'static str, piece: Vec<u8>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let piece = piece.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 8192];
                // The request: its head, then as many bytes as it says it has.
                loop {
                    let n = conn.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length: usize = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if seen.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                if conn.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                while conn.write_all(&piece).await.is_ok() {}
            });
        }
    });
    format!("http://{addr}/v1")
}

/// A model that streams answer text for ever without a newline, or one tool call's arguments
/// for ever, or an error body for ever: each run ends, failed and saying why, with the
/// server's memory never following the stream (the reader holds only what its bounds keep).
#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_streams_for_ever_ends_its_run_at_the_streams_bound() {
    let ok = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let text = format!(
        "data: {}\n\n",
        serde_json::json!({"choices":[{"delta":{"content":"x".repeat(1 << 20)}}]})
    );
    let base = endless_model(ok, text.into_bytes()).await;
    let (o, items) = run(&openai(&base, "k"), job("flood"), CancellationToken::new()).await;
    assert_eq!(
        o.error(),
        Some("the model's stream passed 64 MiB in one turn; the run was stopped there")
    );
    assert!(events(&items).iter().all(|e| e.len() <= 4096));

    let call = format!(
        "data: {}\n\n",
        serde_json::json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"shell","arguments":"a".repeat(1 << 20)}}]}}]})
    );
    let base = endless_model(ok, call.into_bytes()).await;
    let (o, _) = run(&openai(&base, "k"), job("flood"), CancellationToken::new()).await;
    assert!(
        o.error().unwrap().contains("tool calls of more than 8 MiB"),
        "{:?}",
        o.error()
    );

    let failing = "HTTP/1.1 500 Internal Server Error\r\nconnection: close\r\n\r\n";
    let base = endless_model(failing, vec![b'e'; 1 << 20]).await;
    let (o, items) = run(&openai(&base, "k"), job("flood"), CancellationToken::new()).await;
    assert_eq!(
        o.error(),
        Some("the model endpoint answered 500 Internal Server Error")
    );
    assert!(
        items
            .iter()
            .any(|i| matches!(i, SinkItem::Friction { detail, .. } if detail.contains("eeee")))
    );
}
