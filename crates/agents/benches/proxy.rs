//! What a command agent's proxy costs: one connection (a plain `GET` for a few bytes) and one
//! MiB (a 64 MiB body through a CONNECT tunnel), each through the run's proxy socket (the head
//! read, `net.fetch` decided by a real broker gate over a grant, the name checked, the
//! connection made) beside the same request straight to the origin over TCP, interleaved in
//! one run so both see the same machine. Prints the median and p99 of each and their ratio.
//!
//! Run with `scripts/bench.sh broker` (or `cargo bench -p agents --bench proxy`). The
//! forwarder inside a sandbox adds one loopback hop that is not measured here.
// A bench binary: a broken fixture stops it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agents::netproxy::{Routes, RunProxy};
use agents::tools::{BrokerGate, ExecLimits, GateSettings, McpServers, NobodyToAsk};
use agents::{EventSink, OutputCaps, Sanitizer, SinkItem};
use authz_core::{ActorId, AgentName, GrantsTable, resolve_actor, resolve_agent};
use broker::ratchet::Ratchet;
use broker::rules::parse_run_rule;
use broker::{
    DataClass, Grant, GrantId, Mode, RuleTable, SessionId, SessionState, Timestamp, ToolGrants,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

const CONNECTIONS: usize = 500;
const BULK_ROUNDS: usize = 15;
const BULK_MIB: usize = 64;

fn quantiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
    )
}

/// The origin: `GET /small` answers 5 bytes; `GET /bulk` answers [`BULK_MIB`] MiB.
async fn origin() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if tcp.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let bulk = head.starts_with(b"GET /bulk");
                let len = if bulk { BULK_MIB << 20 } else { 5 };
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
                );
                tcp.write_all(reply.as_bytes()).await.unwrap();
                if bulk {
                    let chunk = vec![7u8; 1 << 20];
                    for _ in 0..BULK_MIB {
                        tcp.write_all(&chunk).await.unwrap();
                    }
                } else {
                    tcp.write_all(b"hello").await.unwrap();
                }
                let _ = tcp.shutdown().await;
            });
        }
    });
    port
}

/// The broker gate of a run whose grant allows 127.0.0.1 at `port`, named literally.
fn gate(root: &std::path::Path, port: u16) -> BrokerGate {
    let table = GrantsTable::default();
    let principal = resolve_actor(ActorId::cli_local(), &table);
    let agent = resolve_agent(&AgentName::parse("bench").unwrap(), Some(principal), &table);
    let grant = Grant {
        id: GrantId::new("loopback").unwrap(),
        tool: "http_fetch".into(),
        paths: vec![],
        hosts: vec![format!("127.0.0.1:{port}")],
        mode: Mode::Auto,
        max_taint: DataClass::Secret,
        expires: None,
        result_class: DataClass::Private,
        untrusted: false,
    };
    BrokerGate::new(GateSettings {
        session: SessionId::parse("01JPROXYBENCH").unwrap(),
        agent,
        repo: None,
        grants: ToolGrants::new(vec![grant]).unwrap(),
        table: RuleTable::new(
            vec![],
            vec![],
            vec![parse_run_rule("net.fetch=allow").unwrap()],
        ),
        agent_kind: None,
        model: None,
        workspace: root.to_owned(),
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

/// Sends `request`, reads to the end; the bytes read (the answer must be a 200).
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, request: &[u8]) -> usize {
    s.write_all(request).await.unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0;
    let mut first = Vec::new();
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            assert!(
                first.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&first)
            );
            return total;
        }
        if first.len() < 12 {
            first.extend_from_slice(&buf[..n.min(64)]);
        }
        total += n;
    }
}

/// Through a CONNECT tunnel: the tunnel's answer, then `request`; the bytes after the answer.
async fn tunnelled(socket: &std::path::Path, port: u16, request: &[u8]) -> usize {
    let mut s = UnixStream::connect(socket).await.unwrap();
    s.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    exchange(s, request).await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let port = origin().await;
    let root = tempfile::tempdir().unwrap();
    let (sink, mut rx) =
        EventSink::channel(OutputCaps::default(), Arc::new(Sanitizer::new(vec![])));
    tokio::spawn(async move {
        while let Some(item) = rx.recv().await {
            if let SinkItem::Event { stored, .. } = item {
                stored.answer(true);
            }
        }
    });
    let socket = root.path().join("proxy.sock");
    let _proxy = RunProxy::start(
        &socket,
        Arc::new(gate(root.path(), port)),
        Routes::default(),
        sink,
    )
    .unwrap();
    let small_direct = b"GET /small HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec();
    let small_proxied =
        format!("GET http://127.0.0.1:{port}/small HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .into_bytes();
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..CONNECTIONS {
        let start = Instant::now();
        let n = exchange(
            TcpStream::connect(("127.0.0.1", port)).await.unwrap(),
            &small_direct,
        )
        .await;
        direct.push(start.elapsed());
        assert!(n > 5);
        let start = Instant::now();
        let n = exchange(UnixStream::connect(&socket).await.unwrap(), &small_proxied).await;
        proxied.push(start.elapsed());
        assert!(n > 5);
    }
    let (d50, d99) = quantiles(direct);
    let (p50, p99) = quantiles(proxied);
    println!("per connection ({CONNECTIONS} plain GETs each, interleaved):");
    println!(
        "  direct TCP       median {:>8.1} µs  p99 {:>8.1} µs",
        d50.as_secs_f64() * 1e6,
        d99.as_secs_f64() * 1e6
    );
    println!(
        "  through the proxy median {:>8.1} µs  p99 {:>8.1} µs",
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6
    );
    println!(
        "  added per connection: {:.1} µs median; ratio {:.2}",
        (p50.as_secs_f64() - d50.as_secs_f64()) * 1e6,
        p50.as_secs_f64() / d50.as_secs_f64()
    );
    let bulk = b"GET /bulk HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec();
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..BULK_ROUNDS {
        let start = Instant::now();
        let n = exchange(
            TcpStream::connect(("127.0.0.1", port)).await.unwrap(),
            &bulk,
        )
        .await;
        direct.push(start.elapsed());
        assert!(n >= BULK_MIB << 20);
        let start = Instant::now();
        let n = tunnelled(&socket, port, &bulk).await;
        proxied.push(start.elapsed());
        assert!(n >= BULK_MIB << 20);
    }
    let (d50, _) = quantiles(direct);
    let (p50, _) = quantiles(proxied);
    let per_mib = |d: Duration| d.as_secs_f64() * 1e6 / BULK_MIB as f64;
    println!(
        "per MiB ({BULK_ROUNDS} rounds of {BULK_MIB} MiB each, interleaved; a CONNECT tunnel):"
    );
    println!(
        "  direct TCP        {:>8.1} µs/MiB ({:.0} MiB/s)",
        per_mib(d50),
        BULK_MIB as f64 / d50.as_secs_f64()
    );
    println!(
        "  through the proxy {:>8.1} µs/MiB ({:.0} MiB/s)",
        per_mib(p50),
        BULK_MIB as f64 / p50.as_secs_f64()
    );
    println!("  ratio {:.2}", p50.as_secs_f64() / d50.as_secs_f64());
}
