//! The server's peak memory when a tool call floods its output. The broker's `shell` tool runs
//! `head -c 300000000 /dev/zero` (300 MB) under its sandbox, and, for the baseline, `true`,
//! each in a process of its own that prints its peak resident size (`VmHWM`) when the call
//! has returned. The output is read with its 64 KiB cap as it streams and the program is
//! stopped there, so the flood's peak stays near the baseline's. Beside them, the same flood
//! read whole and cut afterwards (what the tool did before), so the figure has its reference.
//!
//! Run with `scripts/bench.sh broker` (or `cargo bench -p agents --bench flood`). Needs bwrap.
// A bench binary: a broken fixture stops it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agents::tools::{
    BrokerGate, ExecLimits, GateSettings, McpServers, NobodyToAsk, ToolCall, ToolGate,
};
use agents::{EventSink, OutputCaps, Sanitizer, SinkItem};
use authz_core::{ActorId, AgentName, GrantsTable, resolve_actor, resolve_agent};
use broker::ratchet::Ratchet;
use broker::rules::parse_run_rule;
use broker::{
    DataClass, Grant, GrantId, Mode, RuleTable, SessionId, SessionState, Timestamp, ToolGrants,
};

const ROUNDS: usize = 3;
const FLOOD: &str = "head -c 300000000 /dev/zero";
const QUIET: &str = "true";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(command) = args
        .iter()
        .position(|a| a == "--child")
        .map(|i| &args[i + 1])
    {
        child(command);
        return;
    }
    if args.iter().any(|a| a == "--whole") {
        whole();
        return;
    }
    let (mut quiet, mut flood, mut read_whole) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        quiet.push(peak_of(&["--child", QUIET]));
        flood.push(peak_of(&["--child", FLOOD]));
        read_whole.push(peak_of(&["--whole"]));
    }
    let median = |mut v: Vec<(u64, Duration)>| {
        v.sort();
        v[v.len() / 2]
    };
    let (q, qt) = median(quiet);
    let (f, ft) = median(flood);
    let (w, wt) = median(read_whole);
    println!(
        "peak resident size of the process that made the call (median of {ROUNDS}, interleaved):"
    );
    println!(
        "  shell `{QUIET}`:      {:>7.1} MiB ({:.0} ms)",
        mib(q),
        qt.as_secs_f64() * 1e3
    );
    println!(
        "  shell `{FLOOD}`: {:>7.1} MiB ({:.0} ms)",
        mib(f),
        ft.as_secs_f64() * 1e3
    );
    println!("  the flood adds {:.1} MiB", mib(f.saturating_sub(q)));
    println!(
        "  the same flood read whole, then cut (before): {:.1} MiB ({:.0} ms)",
        mib(w),
        wt.as_secs_f64() * 1e3
    );
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Runs one call in a child process: its peak resident size (KiB) and how long the call took.
fn peak_of(args: &[&str]) -> (u64, Duration) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .trim()
            .parse()
            .unwrap()
    };
    (field("peak_kib "), Duration::from_micros(field("call_us ")))
}

/// The flood read the way the tool read it before: all of it, then cut to the cap.
fn whole() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    let output = runtime
        .block_on(async {
            tokio::process::Command::new("/bin/sh")
                .args(["-c", FLOOD])
                .output()
                .await
        })
        .unwrap();
    let kept = output.stdout.len().min(ExecLimits::default().output_bytes);
    assert!(kept > 0);
    print_peak(started.elapsed());
}

/// The process's own peak resident size, and how long its call took.
fn print_peak(took: Duration) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let peak = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap();
    println!("peak_kib {peak}");
    println!("call_us {}", took.as_micros());
}

/// One `shell` call through the broker's gate, then the process's own peak.
fn child(command: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        let table = GrantsTable::default();
        let principal = resolve_actor(ActorId::cli_local(), &table);
        let agent = resolve_agent(&AgentName::parse("bench").unwrap(), Some(principal), &table);
        let grant = Grant {
            id: GrantId::new("shell").unwrap(),
            tool: "shell".into(),
            paths: vec![root.to_string_lossy().into_owned()],
            hosts: vec![],
            mode: Mode::Auto,
            max_taint: DataClass::Secret,
            expires: None,
            result_class: DataClass::Private,
            untrusted: false,
        };
        let gate = BrokerGate::new(GateSettings {
            session: SessionId::parse("01JFLOODBENCH").unwrap(),
            agent,
            repo: None,
            grants: ToolGrants::new(vec![grant]).unwrap(),
            table: RuleTable::new(
                vec![],
                vec![],
                vec![parse_run_rule("shell.exec=allow").unwrap()],
            ),
            agent_kind: None,
            model: Some("bench".into()),
            workspace: root.clone(),
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
        .unwrap();
        let (sink, mut rx) =
            EventSink::channel(OutputCaps::default(), Arc::new(Sanitizer::new(vec![])));
        tokio::spawn(async move {
            while let Some(item) = rx.recv().await {
                if let SinkItem::Event { stored, .. } = item {
                    stored.answer(true);
                }
            }
        });
        let call = ToolCall {
            id: "1".into(),
            name: "shell".into(),
            arguments: serde_json::json!({"command": command, "cwd": root}).to_string(),
        };
        let started = Instant::now();
        let result = gate.call(&call, &sink).await;
        let took = started.elapsed();
        assert!(
            result.starts_with("exit status 0") || result.starts_with("stopped at the output cap"),
            "{}",
            &result[..result.len().min(300)]
        );
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let peak = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .unwrap();
        println!("peak_kib {peak}");
        println!("call_us {}", took.as_micros());
    });
}
