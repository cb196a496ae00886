//! The `openai` back end's tool loop with the broker in front of every call, against
//! test-support's scripted model: an OpenAI-compatible server on loopback that asks for one
//! tool call per turn, then answers with the final text of its script. Real files, the real sandbox for `shell`, a real
//! HTTP server for `http_fetch`.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agents::tools::{
    Answer, Approver, BrokerGate, ExecLimits, GateSettings, McpServer, McpServers, McpTimeouts,
    NOT_WITHIN, NobodyToAsk, Question, REFUSED_READ, Tools,
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
use test_support::model::{Model, Reply};

/// test-support's scripted model serving `replies`, and its base URL.
async fn scripted_model(replies: Vec<Reply>) -> (String, Model) {
    let model = Model::serve_replies(replies).await;
    (model.base.clone(), model)
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
            expires: Some(Timestamp::from_micros(1_000)),
            ..grant("shell-ws", "shell")
        },
    ]
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
            model: Some("scripted".into()),
            workspace: self.ws.path().to_owned(),
            repository: false,
            deny_read: vec![".env".into()],
            protected: Vec::new(),
            ratchet,
            state: SessionState::default(),
            limits: ExecLimits::default(),
            person: Some(person),
            reviewer: Arc::new(NobodyToAsk),
            approval_timeout: Duration::from_secs(5),
            clock: Arc::new(move || Timestamp::from_micros(now.load(Ordering::SeqCst))),
            mcp: McpServers::none(),
            watch: None,
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

struct Yes;

#[async_trait]
impl Approver for Yes {
    async fn approve(&self, _question: &Question) -> Answer {
        Answer::Yes
    }
}

mod approvals;
mod callers;
mod files;
mod gate;
mod limits;
mod promises;
mod reload;
mod taint;
