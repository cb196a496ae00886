//! A run's proxy on its socket, driven as a sandboxed program would drive it, with a gate that
//! counts what it is asked (the real gate's decisions are the binary's tests): what it refuses
//! before anyone decides anything, its bounds, and that it keeps serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agents::netproxy::{ModelApi, ModelEndpoint, ModelKey, Routes, RunProxy};
use agents::tools::{NetworkAllowed, ToolCall, ToolGate};
use agents::{EventSink, OutputCaps, Sanitizer, SinkItem};
use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Allows every host (naming 127.0.0.1 on every port it is asked about), counting the asks.
struct Counting(AtomicUsize);

#[async_trait]
impl ToolGate for Counting {
    fn definitions(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }
    fn instructions(&self) -> String {
        String::new()
    }
    async fn call(&self, _call: &ToolCall, _sink: &EventSink) -> String {
        String::new()
    }
    async fn network(
        &self,
        url: &str,
        _approved: bool,
        _sink: &EventSink,
    ) -> Result<NetworkAllowed, String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let port = url.rsplit(':').next().unwrap_or("").trim_end_matches('/');
        Ok(NetworkAllowed {
            literal_hosts: vec![format!("127.0.0.1:{port}")],
            person_said_yes: false,
            taint_rose: false,
        })
    }
}

struct Proxied {
    _proxy: RunProxy,
    _dir: tempfile::TempDir,
    socket: std::path::PathBuf,
    gate: Arc<Counting>,
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

fn proxied(routes: Routes) -> Proxied {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("proxy.sock");
    let gate = Arc::new(Counting(AtomicUsize::new(0)));
    let proxy = RunProxy::start(&socket, gate.clone(), routes, sink()).unwrap();
    Proxied {
        _proxy: proxy,
        _dir: dir,
        socket,
        gate,
    }
}

/// Sends `bytes`, then reads what comes back until the proxy closes (or 10 s pass).
async fn exchange(socket: &std::path::Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(socket).await.unwrap();
    let _ = s.write_all(bytes).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_malformed_request_is_refused_before_anything_is_decided() {
    let p = proxied(Routes::default());
    for bad in [
        "GET http://a.example/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "GET https://a.example/ HTTP/1.1\r\n\r\n",
        "CONNECT a.example HTTP/1.1\r\n\r\n",
        "GET http://user@a.example/ HTTP/1.1\r\n\r\n",
        "BLAH\r\n\r\n",
    ] {
        let reply = exchange(&p.socket, bad.as_bytes()).await;
        assert!(
            reply.starts_with("HTTP/1.1 400 Bad Request"),
            "{bad:?}: {reply}"
        );
    }
    let huge = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(64 * 1024));
    let reply = exchange(&p.socket, huge.as_bytes()).await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert_eq!(p.gate.0.load(Ordering::SeqCst), 0, "nothing was decided");
}

#[tokio::test]
async fn a_request_to_the_proxy_itself_goes_nowhere_without_a_route() {
    let p = proxied(Routes::default());
    let reply = exchange(&p.socket, b"GET /v1/messages HTTP/1.1\r\n\r\n").await;
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    assert!(reply.contains("declares no model endpoint"), "{reply}");
}

/// A chunked body that never ends its trailers, or whose chunk size wraps, is refused; the
/// endpoint is never called.
#[tokio::test]
async fn a_chunked_body_past_its_bounds_is_refused() {
    let endpoint = ModelEndpoint::new(
        ModelApi::Anthropic,
        url::Url::parse("http://127.0.0.1:9").unwrap(),
        ModelKey::Unneeded,
    )
    .unwrap();
    let p = proxied(Routes {
        model: Some(endpoint),
        mcp: None,
        credential: None,
    });
    let head = "POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    let trailers = format!("{head}0\r\n{}\r\n", "X-T: 1\r\n".repeat(100));
    let reply = exchange(&p.socket, trailers.as_bytes()).await;
    assert!(reply.contains("too many trailer fields"), "{reply}");
    let wraps = format!("{head}fffffffffffffffe\r\n");
    let reply = exchange(&p.socket, wraps.as_bytes()).await;
    assert!(reply.contains("longer than"), "{reply}");
    let long_line = format!("{head}1;{}\r\nX\r\n", "a".repeat(8 * 1024));
    let reply = exchange(&p.socket, long_line.as_bytes()).await;
    assert!(reply.contains("chunk line is too long"), "{reply}");
    let not_json = format!("{head}3\r\nabc\r\n0\r\n\r\n");
    let reply = exchange(&p.socket, not_json.as_bytes()).await;
    assert!(reply.contains("the request body is not JSON"), "{reply}");
}

/// Past its connection limit a run's proxy closes new connections at once, and serves again
/// as soon as one ends.
#[tokio::test]
async fn a_run_holds_a_bounded_number_of_connections_and_is_served_again_after() {
    let p = proxied(Routes::default());
    let mut held = Vec::new();
    for _ in 0..64 {
        let mut s = UnixStream::connect(&p.socket).await.unwrap();
        s.write_all(b"GET /").await.unwrap();
        held.push(s);
    }
    // The 65th is closed without an answer (read again until the proxy has taken it).
    let mut extra = UnixStream::connect(&p.socket).await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), extra.read_to_end(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0))), "{read:?} {buf:?}");
    held.clear();
    // Once they are gone, the proxy answers again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let reply = exchange(&p.socket, b"GET /x HTTP/1.1\r\n\r\n").await;
        if reply.starts_with("HTTP/1.1 403") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never served again: {reply:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
