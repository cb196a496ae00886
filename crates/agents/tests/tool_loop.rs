//! The `openai` back end's tool loop with the broker in front of every call, against a scripted
//! model: a fake OpenAI-compatible server on loopback that asks for one tool call per turn, then
//! answers with the tool results it was given. Real files, the real sandbox for `shell`, a real
//! HTTP server for `http_fetch`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agents::tools::{
    Answer, Approver, BrokerGate, ExecLimits, GateSettings, McpServer, McpServers, McpTimeouts,
    NobodyToAsk, Question, REFUSED_READ, Tools,
};
use agents::{
    AgentBackend, AgentJob, AgentOutcome, CancellationToken, EventSink, MemoryBlock, OpenAiBackend,
    OpenAiSettings, OutputCaps, Sanitizer, SinkItem,
};
use async_trait::async_trait;
use authz_core::{ActorId, AgentName, GrantsTable, RepoSlug, RunId, resolve_actor, resolve_agent};
use broker::ratchet::{Ratchet, RatchetEvent};
use broker::rules::parse_run_rule;
use broker::{
    DataClass, Grant, GrantId, Mode, RuleTable, SessionId, SessionState, Timestamp, ToolGrants,
};
use serde_json::{Value, json};

/// One scripted turn: a tool call, or the final text.
enum Turn {
    Call(&'static str, String),
    Text(&'static str),
}

struct Script {
    turns: Mutex<VecDeque<Turn>>,
    /// Every request body the model received.
    seen: Mutex<Vec<Value>>,
}

async fn scripted_model(turns: Vec<Turn>) -> (String, Arc<Script>) {
    use axum::Router;
    use axum::body::Body;
    use axum::extract::State;
    use axum::http::Response;
    use axum::routing::post;

    async fn completions(State(script): State<Arc<Script>>, body: String) -> Response<Body> {
        let request: Value = serde_json::from_str(&body).unwrap();
        script.seen.lock().unwrap().push(request);
        let turn = script
            .turns
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Turn::Text("(script ended)"));
        let delta = match turn {
            Turn::Call(name, arguments) => json!({"tool_calls": [
                {"index": 0, "id": format!("call-{name}"), "type": "function",
                 "function": {"name": name, "arguments": arguments}}
            ]}),
            Turn::Text(text) => json!({"content": text}),
        };
        let chunk = json!({"choices": [{"delta": delta}]});
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(format!("data: {chunk}\n\ndata: [DONE]\n\n")))
            .unwrap()
    }

    let script = Arc::new(Script {
        turns: Mutex::new(turns.into()),
        seen: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        // A real endpoint takes a long conversation; the bound under test is the client's.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), script)
}

impl Script {
    /// The tool results the model was sent, in order.
    fn tool_results(&self) -> Vec<String> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter_map(|r| {
                let last = r["messages"].as_array()?.last()?.clone();
                (last["role"] == "tool")
                    .then(|| last["content"].as_str().unwrap_or_default().to_owned())
            })
            .collect()
    }
}

/// A workspace: a denied `.env`, a source file, a secret-labelled file, and the policy file.
fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    std::fs::write(root.join(".env"), "API_KEY=hunter2\n").unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "pub fn answer() -> u8 { 42 }\n").unwrap();
    std::fs::create_dir_all(root.join("vault")).unwrap();
    std::fs::write(root.join("vault/token.txt"), "s3cr3t\n").unwrap();
    std::fs::create_dir_all(root.join(".switchboard")).unwrap();
    std::fs::write(
        root.join(".switchboard/agent-policy.toml"),
        "deny_read = [\".env\"]\n",
    )
    .unwrap();
    ws
}

fn grant(id: &str, tool: &str) -> Grant {
    Grant {
        id: GrantId::new(id).unwrap(),
        tool: tool.into(),
        paths: vec![],
        hosts: vec![],
        mode: Mode::Auto,
        max_taint: DataClass::Secret,
        expires: None,
        result_class: DataClass::Private,
        untrusted: false,
    }
}

fn grants(ws: &Path) -> Vec<Grant> {
    let ws = ws.canonicalize().unwrap().to_string_lossy().into_owned();
    vec![
        Grant {
            paths: vec![ws.clone()],
            ..grant("read-ws", "read_file")
        },
        Grant {
            paths: vec![format!("{ws}/vault")],
            result_class: DataClass::Secret,
            ..grant("read-vault", "read_file")
        },
        Grant {
            paths: vec![ws.clone()],
            ..grant("write-ws", "write_file")
        },
        Grant {
            hosts: vec!["127.0.0.1".into()],
            max_taint: DataClass::Private,
            ..grant("fetch-local", "http_fetch")
        },
        Grant {
            paths: vec![ws],
            mode: Mode::Ask,
            expires: Some(Timestamp::from_unix_micros(1_000)),
            ..grant("shell-ws", "shell")
        },
    ]
}

/// Approves after moving the clock past the shell grant's expiry: the approval arrives late.
struct LateApprover {
    now: Arc<AtomicI64>,
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl Approver for LateApprover {
    async fn approve(&self, question: &Question) -> Answer {
        self.asked.lock().unwrap().push(question.action.clone());
        self.now.store(5_000, Ordering::SeqCst);
        Answer::Yes
    }
}

struct Fixture {
    ws: tempfile::TempDir,
    now: Arc<AtomicI64>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            ws: workspace(),
            now: Arc::new(AtomicI64::new(0)),
        }
    }

    fn settings(&self, ratchet: Ratchet, person: Arc<dyn Approver>) -> GateSettings {
        let table = GrantsTable::default();
        let principal = resolve_actor(ActorId::cli_local(), &table);
        let agent = resolve_agent(&AgentName::parse("local").unwrap(), Some(principal), &table);
        let now = self.now.clone();
        GateSettings {
            session: SessionId::parse("01JTOOLLOOP").unwrap(),
            agent,
            repo: None,
            grants: ToolGrants::new(grants(self.ws.path())).unwrap(),
            // This run's own rules answer for the actions the shipped defaults would ask about.
            table: RuleTable::new(
                vec![],
                vec![],
                ["fs.write=allow", "net.fetch=allow", "shell.exec=allow"]
                    .map(|r| parse_run_rule(r).unwrap())
                    .to_vec(),
            ),
            agent_kind: Some("main".into()),
            model: "scripted".into(),
            workspace: self.ws.path().to_owned(),
            repository: false,
            deny_read: vec![".env".into()],
            ratchet,
            state: SessionState::default(),
            limits: ExecLimits::default(),
            person: Some(person),
            reviewer: Arc::new(NobodyToAsk),
            approval_timeout: Duration::from_secs(5),
            clock: Arc::new(move || Timestamp::from_unix_micros(now.load(Ordering::SeqCst))),
            mcp: McpServers::none(),
        }
    }

    fn path(&self, relative: &str) -> String {
        self.ws
            .path()
            .canonicalize()
            .unwrap()
            .join(relative)
            .to_string_lossy()
            .into_owned()
    }
}

async fn run_model(base: &str, gate: BrokerGate) -> (AgentOutcome, Vec<SinkItem>) {
    run_model_storing(base, gate, |_| true).await
}

/// [`run_model`] whose store keeps an event only when `stores(kind)` says so (a store that
/// refuses a write, or a run past its event budget).
async fn run_model_storing(
    base: &str,
    gate: BrokerGate,
    stores: fn(&str) -> bool,
) -> (AgentOutcome, Vec<SinkItem>) {
    let backend = OpenAiBackend::new(OpenAiSettings {
        base_url: base.into(),
        model: "scripted".into(),
        api_key: None,
        system_prompt: None,
    })
    .unwrap();
    let job = AgentJob {
        run_id: RunId::parse("01JTOOLLOOP").unwrap(),
        agent: AgentName::parse("local").unwrap(),
        request: "do the task".into(),
        memory: MemoryBlock::default(),
        repo: None,
        workspace: None,
        mcp_url: None,
        agent_token: String::new(),
        tools: Some(Tools(Arc::new(gate))),
    };
    let (sink, mut rx) =
        EventSink::channel(OutputCaps::default(), Arc::new(Sanitizer::new(vec![])));
    let drain = tokio::spawn(async move {
        let mut items = Vec::new();
        while let Some(item) = rx.recv().await {
            // The dispatcher's part: a kept event is stored (or not).
            if let SinkItem::Event { stored, kind, .. } = &item {
                stored.answer(stores(kind));
            }
            items.push(item);
        }
        items
    });
    let outcome = backend.run(job, sink, CancellationToken::new()).await;
    (outcome, drain.await.unwrap())
}

fn events(items: &[SinkItem], kind: &str) -> Vec<String> {
    items
        .iter()
        .filter_map(|i| match i {
            SinkItem::Event { kind: k, body, .. } if k == kind => Some(body.clone()),
            _ => None,
        })
        .collect()
}

fn args(v: Value) -> String {
    v.to_string()
}

/// A one-shot HTTP server on loopback for `http_fetch`.
async fn page() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app =
        axum::Router::new().route("/changelog", axum::routing::get(|| async { "v2: faster" }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

#[tokio::test]
async fn every_call_passes_the_broker_and_each_refusal_is_what_the_model_reads() {
    let fx = Fixture::new();
    let port = page().await;
    let outside = tempfile::tempdir().unwrap();
    let (base, script) = scripted_model(vec![
        // 1. A file the project denies: the refusal sentence, naming the file.
        Turn::Call("read_file", args(json!({"path": fx.path(".env")}))),
        // 2. A granted read.
        Turn::Call("read_file", args(json!({"path": fx.path("src/lib.rs")}))),
        // 3. A write outside the workspace: no grant covers it.
        Turn::Call(
            "write_file",
            args(json!({"path": outside.path().join("x.txt"), "content": "x"})),
        ),
        // 4. A write inside it.
        Turn::Call(
            "write_file",
            args(json!({"path": fx.path("notes.md"), "content": "done"})),
        ),
        // 5. A fetch from a host no grant names.
        Turn::Call("http_fetch", args(json!({"url": "http://localhost:9/"}))),
        // 6. A fetch the grant allows.
        Turn::Call(
            "http_fetch",
            args(json!({"url": format!("http://127.0.0.1:{port}/changelog")})),
        ),
        // 7. A secret-labelled read raises the session's taint ...
        Turn::Call(
            "read_file",
            args(json!({"path": fx.path("vault/token.txt")})),
        ),
        // 8. ... and the fetch grant stops at `private`.
        Turn::Call(
            "http_fetch",
            args(json!({"url": format!("http://127.0.0.1:{port}/changelog")})),
        ),
        // 9. A tool that does not exist, and arguments that do not parse.
        Turn::Call("delete_everything", "{}".into()),
        Turn::Call("read_file", args(json!({"path": "relative/path"}))),
        Turn::Text("All done."),
    ])
    .await;
    let person: Arc<dyn Approver> = Arc::new(NobodyToAsk);
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), person)).unwrap();
    let (outcome, items) = run_model(&base, gate).await;
    assert_eq!(outcome.answer(), Some("All done."), "{:?}", outcome.error());
    let results = script.tool_results();
    assert_eq!(results.len(), 10, "{results:#?}");
    assert_eq!(results[0], format!("refused: .env {REFUSED_READ}"));
    assert!(!results.iter().any(|r| r.contains("hunter2")));
    assert_eq!(results[1], "pub fn answer() -> u8 { 42 }\n");
    assert_eq!(results[2], "refused: fs.write: no-grant");
    assert!(!outside.path().join("x.txt").exists());
    assert!(results[3].starts_with("wrote 4 bytes"), "{}", results[3]);
    assert_eq!(
        std::fs::read_to_string(fx.ws.path().join("notes.md")).unwrap(),
        "done"
    );
    assert_eq!(results[4], "refused: net.fetch: no-grant");
    assert!(
        results[5].starts_with("HTTP 200 OK\nv2: faster"),
        "{}",
        results[5]
    );
    assert_eq!(results[6], "s3cr3t\n");
    assert_eq!(results[7], "refused: net.fetch: taint-too-high");
    assert_eq!(results[8], "refused: delete_everything: no-grant");
    assert_eq!(
        results[9],
        "refused: read_file: invalid-arguments (path must be an absolute path that stays under /)"
    );
    assert_eq!(
        events(&items, "taint"),
        [r#"{"taint":"secret","untrusted":false}"#]
    );
    assert_eq!(events(&items, "tool").len(), 10);
    // Each result is a run event: a private one with its text, a secret one without.
    let recorded = events(&items, "tool_result");
    assert_eq!(recorded.len(), 4, "{recorded:#?}");
    assert_eq!(
        recorded[0],
        "read_file returned 29 bytes (private):\npub fn answer() -> u8 { 42 }\n"
    );
    assert_eq!(
        recorded[3],
        "read_file returned 7 bytes (secret); the text is not recorded above private"
    );
    assert!(!recorded.iter().any(|r| r.contains("s3cr3t")));
}

#[tokio::test]
async fn a_promise_binds_the_run_and_survives_a_restart() {
    let fx = Fixture::new();
    let (base, script) = scripted_model(vec![
        Turn::Call("restrict_self", args(json!({"promise": "fs.write=deny"}))),
        Turn::Call(
            "write_file",
            args(json!({"path": fx.path("a.md"), "content": "x"})),
        ),
        // More than it holds now: refused before anything is written.
        Turn::Call("restrict_self", args(json!({"promise": "fs.write=ask"}))),
        Turn::Text("ok"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap();
    let (outcome, items) = run_model(&base, gate).await;
    assert_eq!(outcome.answer(), Some("ok"));
    let results = script.tool_results();
    assert!(
        results[0].starts_with("promised: fs.write=deny"),
        "{}",
        results[0]
    );
    assert_eq!(
        results[1],
        "refused: fs.write is beyond what this run promised (restrict_self)"
    );
    assert!(
        results[2].starts_with("refused: fs.write=ask asks for more than you hold"),
        "{}",
        results[2]
    );
    assert!(!fx.ws.path().join("a.md").exists());
    let recorded = events(&items, "restriction");
    assert_eq!(
        recorded,
        [r#"{"kind":"restricted","promise":"fs.write=deny"}"#],
        "only the accepted promise is written"
    );

    // A restart: the gate is built again from the run's events, and the promise still binds.
    let folded: Vec<RatchetEvent> = recorded
        .iter()
        .map(|b| serde_json::from_str(b).unwrap())
        .collect();
    let ratchet = Ratchet::fold(&folded).unwrap();
    let (base, script) = scripted_model(vec![
        Turn::Call(
            "write_file",
            args(json!({"path": fx.path("a.md"), "content": "x"})),
        ),
        Turn::Text("ok"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(ratchet, Arc::new(NobodyToAsk))).unwrap();
    run_model(&base, gate).await;
    assert_eq!(
        script.tool_results(),
        ["refused: fs.write is beyond what this run promised (restrict_self)"]
    );
}

#[tokio::test]
async fn an_approval_that_arrives_after_the_grant_expired_is_a_denial() {
    let fx = Fixture::new();
    let (base, script) = scripted_model(vec![
        Turn::Call(
            "shell",
            args(json!({"command": "touch ran", "cwd": fx.path("")})),
        ),
        Turn::Text("ok"),
    ])
    .await;
    let approver = Arc::new(LateApprover {
        now: fx.now.clone(),
        asked: Mutex::new(Vec::new()),
    });
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), approver.clone())).unwrap();
    let (_, items) = run_model(&base, gate).await;
    assert_eq!(
        *approver.asked.lock().unwrap(),
        ["shell.exec"],
        "the ask grant asked a person"
    );
    assert_eq!(
        script.tool_results(),
        ["refused: shell.exec: grant-expired"]
    );
    assert!(!fx.ws.path().join("ran").exists(), "the command ran");
    let approvals = events(&items, "approval");
    assert_eq!(approvals.len(), 2, "{approvals:?}");
    assert!(approvals[1].ends_with("approved"), "{approvals:?}");
}

#[tokio::test]
async fn an_approved_shell_call_runs_in_the_sandbox_without_the_network() {
    let fx = Fixture::new();
    let port = page().await;
    let script_text = format!(
        "cat .env; echo made > made.txt; curl -sS --max-time 3 http://127.0.0.1:{port}/changelog || echo no-network"
    );
    let (base, script) = scripted_model(vec![
        Turn::Call(
            "shell",
            args(json!({"command": script_text, "cwd": fx.path("")})),
        ),
        Turn::Text("ok"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(Yes))).unwrap();
    run_model(&base, gate).await;
    let results = script.tool_results();
    assert!(
        results[0].starts_with("exit status 0\n--- stdout ---\nswitchboard: this file is denied"),
        "{}",
        results[0]
    );
    assert!(results[0].contains("no-network"), "{}", results[0]);
    assert!(
        !results[0].contains("hunter2") && !results[0].contains("v2: faster"),
        "{}",
        results[0]
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws.path().join("made.txt")).unwrap(),
        "made\n"
    );
}

#[tokio::test]
async fn with_nobody_to_ask_an_asking_rule_is_refused() {
    let fx = Fixture::new();
    let (base, script) = scripted_model(vec![
        // The shipped default for git.commit is ask; nobody is here.
        Turn::Call(
            "git",
            args(json!({"subcommand": "commit", "args": ["-m", "x"], "cwd": fx.path("")})),
        ),
        Turn::Text("ok"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap();
    run_model(&base, gate).await;
    assert_eq!(
        script.tool_results(),
        ["refused: git.commit needs a person's approval: nobody to ask"]
    );
}

/// Refuses every ask, keeping the questions it was asked.
#[derive(Default)]
struct Recording {
    asked: Mutex<Vec<Question>>,
}

#[async_trait]
impl Approver for Recording {
    async fn approve(&self, question: &Question) -> Answer {
        self.asked.lock().unwrap().push(question.clone());
        Answer::No
    }
}

/// What a person is asked is exactly what would run: a call whose arguments hold what the
/// run's sanitiser would change (a bidi override, a credential), that is too long to show
/// whole, or whose blank run would push the rest out of sight is refused before anyone is
/// asked; a call that can be shown is shown whole.
#[tokio::test]
async fn a_question_shows_the_call_whole_or_is_not_asked() {
    let fx = Fixture::new();
    let long = "x".repeat(agents::tools::MAX_SHOWN_ARGUMENTS);
    let (base, script) = scripted_model(vec![
        Turn::Call(
            "write_file",
            args(json!({"path": fx.path("notes.md"), "content": "\u{202e}wiped"})),
        ),
        Turn::Call(
            "write_file",
            args(
                json!({"path": fx.path("notes.md"), "content": "key sk-abcdefghijklmnopqrstuvwx"}),
            ),
        ),
        Turn::Call(
            "write_file",
            args(json!({"path": fx.path("notes.md"), "content": long})),
        ),
        Turn::Call(
            "write_file",
            args(json!({"path": fx.path("notes.md"), "content": format!("ok{}\n\n\n{}rm -rf ~", " ".repeat(30), "\t".repeat(10))})),
        ),
        Turn::Call(
            "write_file",
            args(json!({"path": fx.path("notes.md"), "content": "plain words"})),
        ),
        Turn::Text("ok"),
    ])
    .await;
    let person = Arc::new(Recording::default());
    let mut settings = fx.settings(Ratchet::default(), person.clone());
    // The shipped default for fs.write: ask.
    settings.table = RuleTable::new(vec![], vec![], vec![]);
    run_model(&base, BrokerGate::new(settings).unwrap()).await;
    let results = script.tool_results();
    for refused in &results[..2] {
        assert!(
            refused.starts_with("refused: fs.write needs an approval, and its arguments hold text that cannot be shown as it is"),
            "{results:?}"
        );
    }
    assert!(results[2].contains("too long to show whole"), "{results:?}");
    assert!(
        results[3].contains("43 blank characters in a row"),
        "{results:?}"
    );
    assert_eq!(
        results[4],
        "refused: fs.write needs a person's approval: refused"
    );
    let asked = person.asked.lock().unwrap();
    assert_eq!(
        asked.len(),
        1,
        "only the call that can be shown is asked about"
    );
    assert_eq!(
        asked[0].arguments,
        args(json!({"path": fx.path("notes.md"), "content": "plain words"})),
        "shown exactly as it would run"
    );
}

/// The principal bounds the agent down to each tool call: an agent acting for a Slack user with
/// no grant on a restricted repo cannot read a file in its workspace, though a grant covers it.
#[tokio::test]
async fn the_principal_bounds_the_agent_down_to_each_tool_call() {
    let fx = Fixture::new();
    let doc: toml::Table = toml::from_str("[restrict]\nrepos = [\"acme/payments\"]\n[grants.\"slack:U0ALLOWED\"]\nrepos = [\"acme/payments\"]\n").unwrap();
    let table =
        GrantsTable::from_config(&doc, [AgentName::parse("local").unwrap()].into()).unwrap();
    let repo = table.repo(RepoSlug::parse("acme/payments").unwrap());
    for (user, want_refused) in [("slack:U0NOGRANT", true), ("slack:U0ALLOWED", false)] {
        let principal = resolve_actor(ActorId::parse(user).unwrap(), &table);
        let agent = resolve_agent(&AgentName::parse("local").unwrap(), Some(principal), &table);
        let (base, script) = scripted_model(vec![
            Turn::Call("read_file", args(json!({"path": fx.path("src/lib.rs")}))),
            Turn::Text("ok"),
        ])
        .await;
        let mut settings = fx.settings(Ratchet::default(), Arc::new(NobodyToAsk));
        settings.agent = agent;
        settings.repo = Some(repo.clone());
        run_model(&base, BrokerGate::new(settings).unwrap()).await;
        let result = &script.tool_results()[0];
        if want_refused {
            assert_eq!(
                result, "refused: the person this run acts for may not use this repository",
                "{user}"
            );
        } else {
            assert_eq!(result, "pub fn answer() -> u8 { 42 }\n", "{user}");
        }
    }
}

/// The decision is lexical; the executor follows links to the real path before it touches
/// the disk, so a link cannot carry a call out of its grant or onto a denied file.
#[tokio::test]
async fn links_are_followed_to_their_real_path_before_the_disk_is_touched() {
    let fx = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside bytes\n").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        fx.ws.path().join("src/escape"),
    )
    .unwrap();
    std::os::unix::fs::symlink(fx.ws.path().join(".env"), fx.ws.path().join("src/env-link"))
        .unwrap();
    let (base, script) = scripted_model(vec![
        Turn::Call("read_file", args(json!({"path": fx.path("src/escape")}))),
        Turn::Call("read_file", args(json!({"path": fx.path("src/env-link")}))),
        Turn::Call(
            "write_file",
            args(json!({"path": fx.path("src/escape"), "content": "x"})),
        ),
        Turn::Text("ok"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap();
    run_model(&base, gate).await;
    let results = script.tool_results();
    assert!(
        results[0].starts_with("refused: ")
            && results[0]
                .ends_with("resolves outside the paths you were granted; nothing was done"),
        "{}",
        results[0]
    );
    assert_eq!(results[1], format!("refused: .env {REFUSED_READ}"));
    assert!(
        results[2].ends_with("is a symbolic link; write_file does not follow links"),
        "{}",
        results[2]
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

struct Yes;

#[async_trait]
impl Approver for Yes {
    async fn approve(&self, _question: &Question) -> Answer {
        Answer::Yes
    }
}

/// `policy.widen` is an ordinary action of the table: with nobody to ask it is refused and the
/// promise stands; with a person's yes the broker writes the event that replaces it.
#[tokio::test]
async fn widening_a_promise_needs_the_tables_answer() {
    let turns = |fx: &Fixture| {
        vec![
            Turn::Call("restrict_self", args(json!({"promise": "fs.write=deny"}))),
            Turn::Call(
                "widen_self",
                args(json!({"promise": "fs.write=ask", "now": "fs.write=allow"})),
            ),
            Turn::Call(
                "widen_self",
                args(json!({"promise": "fs.write=deny", "now": "fs.write=allow"})),
            ),
            Turn::Call(
                "write_file",
                args(json!({"path": fx.path("a.md"), "content": "x"})),
            ),
            Turn::Text("ok"),
        ]
    };
    let fx = Fixture::new();
    let (base, script) = scripted_model(turns(&fx)).await;
    let (_, items) = run_model(
        &base,
        BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap(),
    )
    .await;
    let results = script.tool_results();
    assert!(
        results[1].starts_with("refused: there is no promise \"fs.write=ask\""),
        "{}",
        results[1]
    );
    assert_eq!(
        results[2],
        "refused: policy.widen needs a person's approval: nobody to ask"
    );
    assert_eq!(
        results[3],
        "refused: fs.write is beyond what this run promised (restrict_self)"
    );
    assert_eq!(
        events(&items, "restriction").len(),
        1,
        "a refused widening writes nothing"
    );

    let fx = Fixture::new();
    let (base, script) = scripted_model(turns(&fx)).await;
    let (_, items) = run_model(
        &base,
        BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(Yes))).unwrap(),
    )
    .await;
    let results = script.tool_results();
    assert_eq!(results[2], "widened: fs.write=deny is now fs.write=allow");
    assert!(results[3].starts_with("wrote 1 bytes"), "{}", results[3]);
    let restriction = events(&items, "restriction");
    assert_eq!(
        restriction[1],
        r#"{"kind":"widened","promise":"fs.write=deny","now":"fs.write=allow"}"#
    );
    // The fold of the log gives the same ceiling the run ended with.
    let folded: Vec<RatchetEvent> = restriction
        .iter()
        .map(|b| serde_json::from_str(b).unwrap())
        .collect();
    assert_eq!(
        Ratchet::fold(&folded).unwrap().ceiling("fs.write"),
        Some(broker::RuleDecision::Allow)
    );
}

/// `agent_review` asks the reviewer, not the person.
#[tokio::test]
async fn an_agent_review_rule_asks_the_reviewer() {
    for (reviewer, want) in [
        (Arc::new(Yes) as Arc<dyn Approver>, "wrote 1 bytes"),
        (
            Arc::new(NobodyToAsk) as Arc<dyn Approver>,
            "refused: fs.write needs a reviewer's approval: nobody to ask",
        ),
    ] {
        let fx = Fixture::new();
        let (base, script) = scripted_model(vec![
            Turn::Call(
                "write_file",
                args(json!({"path": fx.path("a.md"), "content": "x"})),
            ),
            Turn::Text("ok"),
        ])
        .await;
        let mut settings = fx.settings(Ratchet::default(), Arc::new(NobodyToAsk));
        settings.table = RuleTable::new(
            vec![],
            vec![],
            vec![parse_run_rule("fs.write=agent_review").unwrap()],
        );
        settings.reviewer = reviewer;
        run_model(&base, BrokerGate::new(settings).unwrap()).await;
        assert!(
            script.tool_results()[0].starts_with(want),
            "{:?}",
            script.tool_results()
        );
    }
}

/// Nothing in `.switchboard/` can be written through the tool, by its path or through a link
/// to it.
#[tokio::test]
async fn the_policy_file_cannot_be_written() {
    let fx = Fixture::new();
    std::os::unix::fs::symlink(fx.ws.path().join(".switchboard"), fx.ws.path().join("cfg"))
        .unwrap();
    let (base, script) = scripted_model(vec![
        Turn::Call("write_file", args(json!({"path": fx.path(".switchboard/agent-policy.toml"), "content": "deny_read = []"}))),
        Turn::Call("write_file", args(json!({"path": fx.path("cfg/agent-policy.toml"), "content": "deny_read = []"}))),
        Turn::Text("ok"),
    ])
    .await;
    run_model(
        &base,
        BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap(),
    )
    .await;
    let results = script.tool_results();
    let policy = fx.path(".switchboard/agent-policy.toml");
    let want = format!(
        "refused: {policy} is in .switchboard/, which no tool writes to; nothing was written"
    );
    assert_eq!(results, [want.clone(), want]);
    assert_eq!(
        std::fs::read_to_string(fx.ws.path().join(".switchboard/agent-policy.toml")).unwrap(),
        "deny_read = [\".env\"]\n"
    );
}

/// An MCP server's tools pass the broker like any other: the model is offered them as the
/// `mcp` tool, a granted call reaches the real server and its answer comes back, while a
/// tool no grant covers, a server nobody configured and a server that cannot be reached are
/// refused before anything is sent.
#[tokio::test]
async fn mcp_tools_are_called_through_the_broker() {
    let fx = Fixture::new();
    let notes = agents::testing::NotesServer::serve().await.unwrap();
    let url = notes.url.clone();
    let servers = vec![
        McpServer {
            name: "notes".into(),
            url,
        },
        McpServer {
            name: "gone".into(),
            // A token in the query: it must reach neither the model nor a log line.
            url: "http://127.0.0.1:9/mcp?token=PLANTED-MCP-TOKEN".into(),
        },
    ];
    let mcp = McpServers::connect(servers, McpTimeouts::default()).await;
    let mcp_problems = mcp.problems();
    assert_eq!(mcp_problems.len(), 1, "{mcp_problems:?}");
    assert_eq!(mcp_problems[0].0, "gone");
    let mut settings = fx.settings(Ratchet::default(), Arc::new(NobodyToAsk));
    settings.mcp = mcp;
    let mut grants: Vec<Grant> = grants(fx.ws.path());
    grants.push(grant("notes-shout", "mcp.notes.shout"));
    grants.push(grant("notes-fail", "mcp.notes.fail"));
    grants.push(grant("gone-all", "mcp.gone.*"));
    grants.push(grant("nowhere-all", "mcp.nowhere.*"));
    settings.grants = ToolGrants::new(grants).unwrap();
    // Unnamed actions ask by default; this run's rules allow the notes server's tools.
    settings.table = RuleTable::new(
        vec![],
        vec![],
        [
            "mcp.notes.*=allow",
            "mcp.gone.*=allow",
            "mcp.nowhere.*=allow",
        ]
        .map(|r| parse_run_rule(r).unwrap())
        .to_vec(),
    );
    let gate = BrokerGate::new(settings).unwrap();
    let call = |server: &str, tool: &str, arguments: Value| {
        Turn::Call(
            "mcp",
            args(json!({"server": server, "tool": tool, "arguments": arguments})),
        )
    };
    let (base, script) = scripted_model(vec![
        call("notes", "shout", json!({"text": "hello"})),
        call("notes", "fail", json!({})),
        call("notes", "erase_all", json!({})),
        call("nowhere", "shout", json!({})),
        call("gone", "anything", json!({})),
        Turn::Call(
            "mcp",
            args(json!({"server": "notes", "tool": "shout", "arguments": [1]})),
        ),
        Turn::Text("done"),
    ])
    .await;
    let (outcome, _items) = run_model(&base, gate).await;
    assert_eq!(outcome.answer(), Some("done"), "{:?}", outcome.error());

    // The model was offered the `mcp` tool with what each server has.
    let first = script.seen.lock().unwrap()[0].clone();
    let mcp_tool = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp")
        .cloned()
        .unwrap();
    let description = mcp_tool["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("server notes, tool shout: Upper-cases the text."),
        "{description}"
    );
    assert!(
        description.contains("server gone: unreachable"),
        "{description}"
    );
    assert_eq!(
        mcp_tool["function"]["parameters"]["properties"]["server"]["enum"],
        json!(["notes", "gone"])
    );

    let results = script.tool_results();
    assert_eq!(results[0], "HELLO");
    assert_eq!(
        results[1],
        "the tool reported an error: the notes are locked"
    );
    assert!(
        results[2].starts_with("refused: mcp.notes.erase_all: no-grant"),
        "{}",
        results[2]
    );
    assert!(
        results[3].starts_with("refused: no MCP server named nowhere is configured"),
        "{}",
        results[3]
    );
    assert!(
        results[4].starts_with("refused: the MCP server gone could not be reached"),
        "{}",
        results[4]
    );
    assert!(
        results[5].starts_with("refused: mcp: invalid-arguments"),
        "{}",
        results[5]
    );
    assert!(!description.contains("PLANTED") && !results.iter().any(|r| r.contains("PLANTED")));
    assert!(
        !mcp_problems.iter().any(|(_, why)| why.contains("PLANTED")),
        "{mcp_problems:?}"
    );
    // Only the two granted calls reached the server.
    assert_eq!(notes.calls(), 2);
}

/// A taint rise is never lost: when its event cannot be stored, the result that raised it is
/// withheld and every later call is refused; past the event budget a taint is still sent.
#[tokio::test]
async fn a_taint_that_cannot_be_recorded_withholds_the_result_and_closes_the_gate() {
    let fx = Fixture::new();
    let (base, script) = scripted_model(vec![
        Turn::Call(
            "read_file",
            args(json!({"path": fx.path("vault/token.txt")})),
        ),
        Turn::Call("read_file", args(json!({"path": fx.path("src/lib.rs")}))),
        Turn::Call("restrict_self", args(json!({"promise": "net.*=deny"}))),
        Turn::Text("done"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap();
    run_model_storing(&base, gate, |kind| kind != "taint").await;
    let results = script.tool_results();
    assert!(
        results[0].starts_with("refused: the session's taint could not be recorded")
            && !results[0].contains("s3cr3t"),
        "{results:?}"
    );
    for later in &results[1..] {
        assert!(
            later.starts_with("refused: the session's taint could not be recorded"),
            "{later}"
        );
    }
    // Past the event budget, the sink still keeps a taint (it is never dropped by the cap).
    let caps = OutputCaps {
        event_bytes: 64,
        total_bytes: 10,
        answer_bytes: 64,
    };
    let (sink, mut rx) = EventSink::channel(caps, Arc::new(Sanitizer::new(vec![])));
    assert!(
        !sink.event("text", "fills the budget").await,
        "dropped past the cap"
    );
    let kept = tokio::spawn(async move { sink.event_kept("taint", "{}").await });
    let mut saw_taint = false;
    while let Some(item) = rx.recv().await {
        if let SinkItem::Event { kind, stored, .. } = item
            && kind == "taint"
        {
            saw_taint = true;
            stored.answer(true);
        }
        if kept.is_finished() {
            break;
        }
    }
    assert!(saw_taint && kept.await.unwrap());
}

/// A model that sends 3 MiB of arguments with every tool call (each turn under the 8 MiB a
/// turn may carry) would have the conversation, resent whole each turn, hold ~100 MiB by
/// its 32nd turn. The run ends when the request would pass 16 MiB, saying so; no request
/// the model received was larger, and it was asked far fewer than 32 times.
#[tokio::test]
async fn a_conversation_that_outgrows_its_bound_ends_the_run() {
    let fx = Fixture::new();
    let padded = || args(json!({"path": fx.path("src/lib.rs"), "padding": "p".repeat(3 << 20)}));
    let (base, script) =
        scripted_model((0..32).map(|_| Turn::Call("read_file", padded())).collect()).await;
    let (outcome, _) = run_model(
        &base,
        BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap(),
    )
    .await;
    assert_eq!(
        outcome.error(),
        Some(
            "the conversation passed 16 MiB (its tool calls and results together); the run was stopped there"
        )
    );
    let seen = script.seen.lock().unwrap();
    assert!((2..10).contains(&seen.len()), "{} requests", seen.len());
    for request in seen.iter() {
        assert!(request.to_string().len() <= 16 << 20);
    }
}

/// A file named as another spelling of a denied name (`.ENV`, `.env.` for `.env`) is the
/// denied file on a case-insensitive file system (a casefolded directory, a mounted volume):
/// the file tools refuse it like the name itself.
#[tokio::test]
async fn another_spelling_of_a_denied_name_is_refused_by_the_file_tools() {
    let fx = Fixture::new();
    std::fs::write(fx.ws.path().join(".ENV"), "API_KEY=hunter2\n").unwrap();
    let (base, script) = scripted_model(vec![
        Turn::Call("read_file", args(json!({"path": fx.path(".ENV")}))),
        Turn::Call("read_file", args(json!({"path": fx.path("./.Env.")}))),
        Turn::Text("ok"),
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
