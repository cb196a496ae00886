//! A scripted Anthropic Messages API on loopback, for the real Claude Code CLI: each
//! `POST /v1/messages` that offers tools (the agent's own loop) is answered with the next reply
//! of the script as a stream of server-sent events (`message_start`, `content_block_start`,
//! `content_block_delta`, `content_block_stop`, `message_delta`, `message_stop`), a tool call
//! as a `tool_use` block; any other request (a helper call that offers no tools) gets a short
//! text. Every request is kept with the time it arrived.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde_json::{Value, json};

/// One reply of the script.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A call of the agent's tool `name` with `input`.
    Tool(&'static str, Value),
    /// The final answer.
    Text(String),
}

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub body: Value,
    pub at: SystemTime,
}

pub struct MessagesApi {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl MessagesApi {
    pub async fn serve(replies: Vec<Reply>) -> MessagesApi {
        use axum::Router;
        use axum::body::Body;
        use axum::extract::State;
        use axum::http::Response;
        use axum::http::Uri;
        use axum::routing::post;

        #[derive(Clone)]
        struct Script {
            replies: Arc<Mutex<VecDeque<Reply>>>,
            seen: Arc<Mutex<Vec<Seen>>>,
        }

        async fn messages(State(script): State<Script>, uri: Uri, body: String) -> Response<Body> {
            let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            script.seen.lock().unwrap().push(Seen {
                path: uri.to_string(),
                body: request.clone(),
                at: SystemTime::now(),
            });
            if uri.path().ends_with("/count_tokens") {
                return Response::builder()
                    .header("content-type", "application/json")
                    .body(Body::from(r#"{"input_tokens":10}"#))
                    .unwrap();
            }
            let offers_tools = request["tools"].as_array().is_some_and(|t| !t.is_empty());
            let reply = if offers_tools {
                script.replies.lock().unwrap().pop_front()
            } else {
                None
            };
            let reply = reply.unwrap_or_else(|| Reply::Text("nothing more to do".to_owned()));
            let model = request["model"].as_str().unwrap_or("claude").to_owned();
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(stream(&model, reply)))
                .unwrap()
        }

        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Script {
            replies: Arc::new(Mutex::new(replies.into())),
            seen: seen.clone(),
        };
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(messages))
            .layer(axum::extract::DefaultBodyLimit::disable())
            .with_state(script);
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        MessagesApi {
            base: format!("http://{addr}"),
            seen,
        }
    }

    /// Every request, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The tool results the agent sent back, in order: each one's text and whether it was an
    /// error (a refused call is one).
    pub fn tool_results(&self) -> Vec<(String, bool)> {
        let mut results: Vec<(String, bool)> = Vec::new();
        for seen in self.seen() {
            let messages = seen.body["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let blocks = messages
                .iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default());
            for block in blocks {
                if block["type"] != "tool_result" {
                    continue;
                }
                let text = match &block["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    other => other.to_string(),
                };
                let entry = (text, block["is_error"] == true);
                if !results.contains(&entry) {
                    results.push(entry);
                }
            }
        }
        results
    }

    /// When the first request whose messages hold a tool result holding `text` arrived.
    pub fn first_result_holding(&self, text: &str) -> Option<SystemTime> {
        self.seen().into_iter().find_map(|seen| {
            let messages = seen.body["messages"].as_array()?.clone();
            messages
                .iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .any(|b| b["type"] == "tool_result" && b["content"].to_string().contains(text))
                .then_some(seen.at)
        })
    }
}

/// The reply as Anthropic streams it.
fn stream(model: &str, reply: Reply) -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_scripted", "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    );
    let stop = match reply {
        Reply::Tool(name, input) => {
            let id = format!("toolu_{:016x}", rand_id());
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
            );
            "tool_use"
        }
        Reply::Text(text) => {
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": text}}),
            );
            "end_turn"
        }
    };
    event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 1}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    out
}

/// A tool call id unique in the process.
fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ NEXT.fetch_add(1, Ordering::Relaxed).rotate_left(40)
}
