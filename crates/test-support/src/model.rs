//! Scripted OpenAI-compatible models on loopback. [`Model`] answers each chat-completions
//! request with the next reply of its script, and keeps every request body it was sent, so a
//! test can say what reached the model; [`writing_model`] asks to write one file, in any
//! number of runs.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One turn: a tool call (`name`, arguments with `{workspace}` standing for the workspace the
/// broker told the model about, and `{last_hex}` for the first 40-digit hex id in the last
/// tool result, a commit the run made), or the final answer.
pub type Turn = (&'static str, Value);

/// One reply of a script: a tool call (its name and its arguments as the model writes them,
/// with the same `{workspace}` and `{last_hex}` stand-ins as a [`Turn`]), or a final text.
#[derive(Debug, Clone)]
pub enum Reply {
    Call(&'static str, String),
    Text(&'static str),
}

impl From<Turn> for Reply {
    fn from((name, args): Turn) -> Reply {
        Reply::Call(name, args.to_string())
    }
}

pub struct Model {
    /// `http://127.0.0.1:<port>/v1`.
    pub base: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Model {
    /// Serves `turns` in order across every request it gets; once they are spent, it answers
    /// `last tool result: <the last message's content>`.
    pub async fn serve(turns: Vec<Turn>) -> Model {
        Model::serve_gated(turns, None).await
    }

    /// [`Model::serve`] with final texts among the replies.
    pub async fn serve_replies(replies: Vec<Reply>) -> Model {
        Model::serve_script("127.0.0.1", replies, None).await
    }

    /// [`Model::serve`] on another loopback address (`127.0.0.2`): a test can keep its
    /// traffic apart from what goes to `127.0.0.1`.
    pub async fn serve_at(ip: &str, turns: Vec<Turn>) -> Model {
        Model::serve_with(ip, turns, None).await
    }

    /// [`Model::serve`], waiting at `barrier` before it answers request number `at` (from
    /// 0): runs of two models meet there.
    pub async fn serve_gated(
        turns: Vec<Turn>,
        gate: Option<(usize, Arc<tokio::sync::Barrier>)>,
    ) -> Model {
        Model::serve_with("127.0.0.1", turns, gate).await
    }

    async fn serve_with(
        ip: &str,
        turns: Vec<Turn>,
        gate: Option<(usize, Arc<tokio::sync::Barrier>)>,
    ) -> Model {
        Model::serve_script(ip, turns.into_iter().map(Reply::from).collect(), gate).await
    }

    async fn serve_script(
        ip: &str,
        replies: Vec<Reply>,
        gate: Option<(usize, Arc<tokio::sync::Barrier>)>,
    ) -> Model {
        use axum::Router;
        use axum::body::Body;
        use axum::extract::State;
        use axum::http::Response;
        use axum::routing::post;

        #[derive(Clone)]
        struct Script {
            turns: Arc<Mutex<VecDeque<Reply>>>,
            seen: Arc<Mutex<Vec<String>>>,
            gate: Option<(usize, Arc<tokio::sync::Barrier>)>,
        }

        async fn completions(State(script): State<Script>, body: String) -> Response<Body> {
            let number = {
                let mut seen = script.seen.lock().unwrap();
                seen.push(body.clone());
                seen.len() - 1
            };
            if let Some((at, barrier)) = &script.gate
                && *at == number
            {
                barrier.wait().await;
            }
            let request: Value =
                serde_json::from_str(&body).expect("the agent sends its request as JSON");
            let messages = request["messages"].as_array().cloned().unwrap_or_default();
            let workspace = workspace_of(&messages);
            let next = script.turns.lock().unwrap().pop_front();
            let delta = match next {
                Some(Reply::Text(text)) => json!({"content": text}),
                Some(Reply::Call(name, args)) => {
                    let last = messages
                        .last()
                        .and_then(|m| m["content"].as_str())
                        .unwrap_or("");
                    let args = args
                        .replace("{workspace}", &workspace)
                        .replace("{last_hex}", &first_hex(last));
                    json!({"tool_calls": [{"index": 0, "id": "call-1", "type": "function",
                        "function": {"name": name, "arguments": args}}]})
                }
                None => {
                    let last = messages.last().cloned().unwrap_or(Value::Null);
                    json!({"content": format!("last tool result: {}", last["content"].as_str().unwrap_or("none"))})
                }
            };
            let chunk = json!({"choices": [{"delta": delta}]});
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(format!("data: {chunk}\n\ndata: [DONE]\n\n")))
                .unwrap()
        }

        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Script {
            turns: Arc::new(Mutex::new(replies.into())),
            seen: seen.clone(),
            gate,
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            // A real endpoint takes a long conversation; a bound under test is the client's.
            .layer(axum::extract::DefaultBodyLimit::disable())
            .with_state(script);
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Model {
            base: format!("http://{addr}/v1"),
            seen,
        }
    }

    /// Every request body the model was sent, in order.
    pub fn seen(&self) -> String {
        self.seen.lock().unwrap().join("\n")
    }

    /// How many requests it answered.
    pub fn requests(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Every request it was sent, as JSON, in order.
    pub fn requests_json(&self) -> Vec<Value> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .map(|body| serde_json::from_str(body).expect("the agent sent its request as JSON"))
            .collect()
    }

    /// The tool results it was sent (each request whose last message is one), in order.
    pub fn tool_results(&self) -> Vec<String> {
        self.requests_json()
            .iter()
            .filter_map(|r| {
                let last = r["messages"].as_array()?.last()?.clone();
                (last["role"] == "tool")
                    .then(|| last["content"].as_str().unwrap_or_default().to_owned())
            })
            .collect()
    }
}

/// A model on loopback, its base URL (`http://127.0.0.1:<port>/v1`), for any number of runs:
/// it asks to write `content` to `notes.md` in the workspace its system message names, then,
/// once the last message is that tool's result, answers `tool said: <the result>`.
pub async fn writing_model(content: &str) -> String {
    use axum::body::Body;
    use axum::extract::State;
    use axum::http::Response;

    async fn completions(State(content): State<Arc<String>>, body: String) -> Response<Body> {
        let request: Value =
            serde_json::from_str(&body).expect("the agent sends its request as JSON");
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let delta = if last["role"] == "tool" {
            json!({"content": format!("tool said: {}", last["content"].as_str().unwrap_or_default())})
        } else {
            let workspace = workspace_of(&messages);
            let args = json!({"path": format!("{workspace}/notes.md"), "content": *content});
            json!({"tool_calls": [{"index": 0, "id": "call-1", "type": "function",
                "function": {"name": "write_file", "arguments": args.to_string()}}]})
        };
        let chunk = json!({"choices": [{"delta": delta}]});
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(format!("data: {chunk}\n\ndata: [DONE]\n\n")))
            .unwrap()
    }

    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(Arc::new(content.to_owned()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

/// The first run of 40 hex digits in `text` (a commit id a tool printed), or nothing.
fn first_hex(text: &str) -> String {
    let bytes = text.as_bytes();
    (0..bytes.len())
        .find(|&i| {
            bytes.len() >= i + 40
                && bytes[i..i + 40].iter().all(u8::is_ascii_hexdigit)
                && (i == 0 || !bytes[i - 1].is_ascii_hexdigit())
        })
        .map(|i| text[i..i + 40].to_owned())
        .unwrap_or_default()
}

/// The workspace the broker's system message names.
pub fn workspace_of(messages: &[Value]) -> String {
    messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find_map(|c| c.strip_prefix("Your workspace is "))
        .and_then(|rest| rest.split(". ").next())
        .unwrap_or("/nowhere")
        .to_owned()
}
