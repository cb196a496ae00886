//! The back ends against real peers: shell scripts for `command`, a small OpenAI-compatible
//! server on loopback for `openai`.

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

/// Every event but a command agent's `network` one (what its traffic goes through).
fn events(items: &[SinkItem]) -> Vec<String> {
    items
        .iter()
        .filter_map(|i| match i {
            SinkItem::Event { kind, body, .. } if kind != "network" => Some(body.clone()),
            _ => None,
        })
        .collect()
}

fn events_of(items: &[SinkItem], want: &str) -> Vec<String> {
    items
        .iter()
        .filter_map(|i| match i {
            SinkItem::Event { kind, body, .. } if kind == want => Some(body.clone()),
            _ => None,
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

fn remembering(request: &str) -> AgentJob {
    AgentJob {
        memory: MemoryBlock::new(
            "Remembered:\n- [org] deploys freeze on Fridays\n- [user] likes tea".into(),
            vec![("org", 1), ("user", 1)],
        ),
        ..job(request)
    }
}

mod command;
mod echo;
mod openai;
mod sandbox;
