//! What Claude Code's `PreToolUse` hook adds to each tool call: the broker's decision of a
//! `Bash` call through the run's proxy socket (a real broker gate: the rule table, a `shell`
//! grant), measured two ways and interleaved in one run:
//! - in process: `hook_client::run` (connect, the request, the decision, the answer);
//! - as Claude Code runs it: the `switchboard` binary started as `sandbox-hook pre-tool-use`,
//!   the call on its stdin, waited for (set `SWITCHBOARD_BIN`; `scripts/bench.sh broker` does),
//!   beside starting `/bin/true` the same way (the floor any hook process pays).
//!
//! Prints the median and p99 of each. Run with `scripts/bench.sh broker` (or
//! `SWITCHBOARD_BIN=target/release/switchboard cargo bench -p agents --bench hook`).
// A bench binary: a broken fixture stops it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agents::netproxy::hook_client::{self, HookEvent};
use agents::netproxy::{Routes, RunProxy};
use agents::tools::{BrokerGate, ExecLimits, GateSettings, McpServers, NobodyToAsk};
use agents::{EventSink, OutputCaps, Sanitizer, SinkItem};
use authz_core::{ActorId, AgentName, GrantsTable, resolve_actor, resolve_agent};
use broker::ratchet::Ratchet;
use broker::rules::parse_run_rule;
use broker::{
    DataClass, Grant, GrantId, Mode, RuleTable, SessionId, SessionState, Timestamp, ToolGrants,
};

const CALLS: usize = 400;
const CREDENTIAL: &str = "bench-run-credential";

fn quantiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
    )
}

/// The gate of a run whose `shell` grant covers `root`, `shell.exec` allowed by its rules.
fn gate(root: &std::path::Path) -> BrokerGate {
    let table = GrantsTable::default();
    let principal = resolve_actor(ActorId::cli_local(), &table);
    let agent = resolve_agent(&AgentName::parse("bench").unwrap(), Some(principal), &table);
    let root = root.canonicalize().unwrap();
    let grant = Grant {
        id: GrantId::new("workspace-shell").unwrap(),
        tool: "shell".into(),
        paths: vec![root.to_string_lossy().into_owned()],
        hosts: vec![],
        mode: Mode::Auto,
        max_taint: DataClass::Secret,
        expires: None,
        result_class: DataClass::Private,
        untrusted: false,
    };
    BrokerGate::new(GateSettings {
        session: SessionId::parse("01JHOOKBENCH").unwrap(),
        agent,
        repo: None,
        grants: ToolGrants::new(vec![grant]).unwrap(),
        table: RuleTable::new(
            vec![],
            vec![],
            vec![parse_run_rule("shell.exec=allow").unwrap()],
        ),
        agent_kind: None,
        model: None,
        workspace: root,
        repository: false,
        deny_read: vec![],
        protected: Vec::new(),
        ratchet: Ratchet::default(),
        state: SessionState::default(),
        limits: ExecLimits::default(),
        person: None,
        reviewer: Arc::new(NobodyToAsk),
        approval_timeout: Duration::from_secs(1),
        clock: Arc::new(|| Timestamp::from_micros(0)),
        mcp: McpServers::none(),
        watch: None,
    })
    .unwrap()
}

fn sink() -> EventSink {
    let (sink, mut rx) =
        EventSink::channel(OutputCaps::default(), Arc::new(Sanitizer::new(vec![])));
    tokio::spawn(async move {
        while let Some(item) = rx.recv().await {
            if let SinkItem::Event { stored, .. } = item {
                stored.answer(true);
            }
        }
    });
    sink
}

/// Runs `program args` with `input` on stdin; panics unless it exits 0.
fn spawn(program: &std::path::Path, args: &[&str], input: &[u8], env: &[(&str, &str)]) {
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("work");
    std::fs::create_dir_all(&workspace).unwrap();
    let socket = dir.path().join("proxy.sock");
    let _proxy = runtime.block_on(async {
        let routes = Routes {
            credential: Some(CREDENTIAL.to_owned()),
            ..Routes::default()
        };
        RunProxy::start(&socket, Arc::new(gate(&workspace)), routes, sink()).unwrap()
    });
    let call = serde_json::json!({
        "tool_name": "Bash",
        "tool_input": {"command": "cargo test --workspace", "description": "test"},
        "cwd": workspace.canonicalize().unwrap(),
        "tool_use_id": "toolu_bench",
    })
    .to_string();
    let binary = std::env::var_os("SWITCHBOARD_BIN").map(std::path::PathBuf::from);
    let socket_arg = socket.to_string_lossy().into_owned();
    let (mut in_process, mut as_process, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..CALLS {
        let started = Instant::now();
        let exit = hook_client::run(
            HookEvent::PreToolUse,
            &socket,
            Some(CREDENTIAL),
            Duration::from_secs(10),
            call.as_bytes(),
        );
        in_process.push(started.elapsed());
        assert_eq!(exit.status, 0, "{exit:?}");
        if let Some(binary) = &binary {
            let started = Instant::now();
            spawn(
                binary,
                &["sandbox-hook", "pre-tool-use", "--socket", &socket_arg],
                call.as_bytes(),
                &[("SWITCHBOARD_AGENT_TOKEN", CREDENTIAL)],
            );
            as_process.push(started.elapsed());
            let started = Instant::now();
            spawn(std::path::Path::new("/bin/true"), &[], b"", &[]);
            floor.push(started.elapsed());
        }
    }
    let show = |what: &str, samples: Vec<Duration>| {
        let (p50, p99) = quantiles(samples);
        println!("{what}: p50 {p50:?}, p99 {p99:?}");
        p50
    };
    println!(
        "Claude Code's PreToolUse hook, {CALLS} Bash calls decided (shell.exec allowed by a grant):"
    );
    show(
        "  the decision through the run's socket, in process",
        in_process,
    );
    if binary.is_some() {
        let hook = show(
            "  the hook as Claude Code runs it (switchboard sandbox-hook)",
            as_process,
        );
        let base = show(
            "  starting /bin/true the same way (any hook's floor)",
            floor,
        );
        println!(
            "  the hook over the floor: {:.2}x",
            hook.as_secs_f64() / base.as_secs_f64()
        );
    } else {
        println!(
            "  the hook as a process: not measured (set SWITCHBOARD_BIN to the switchboard binary)"
        );
    }
}
