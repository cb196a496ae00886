//! `openai`: any OpenAI-compatible chat-completions endpoint (OpenAI, llama.cpp, vLLM,
//! Ollama), streaming. Each completed line of the streamed text is an event; the last turn's
//! text is the answer. When the job has [`Tools`](crate::tools::Tools), they are offered to the
//! model and each call it makes is answered by them (the broker decides each one); a model that
//! asks for a tool when the job has none ends the run with an error saying so, never a made-up
//! result.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::tools::{ToolCall, Tools};
use crate::{AgentBackend, AgentJob, AgentOutcome, EventSink, SettingsError};

/// Rounds of tool calls one run may make before it must answer.
const MAX_TOOL_TURNS: usize = 32;
/// The most one turn's stream may carry: past it the run fails, whatever the model sends.
const MAX_STREAM_BYTES: usize = 64 << 20;
/// The longest line of a stream (one chunk's JSON).
const MAX_LINE_BYTES: usize = 4 << 20;
/// The most one turn's tool calls may carry, their arguments together.
const MAX_CALL_BYTES: usize = 8 << 20;
/// The longest name or id of a tool call.
const MAX_CALL_NAME: usize = 256;
/// What is read of an error's body, for the friction line.
const MAX_ERROR_BODY: usize = 4 << 10;
/// The largest request of a run: the conversation so far, its tool calls and results with
/// it. Each turn adds up to [`MAX_CALL_BYTES`] of calls and their results, so without it 32
/// turns would hold hundreds of MiB for one run.
const MAX_REQUEST_BYTES: usize = 16 << 20;

/// A chat-completions request, serialised from the conversation without copying it.
#[derive(serde::Serialize)]
struct Request<'a> {
    model: &'a str,
    stream: bool,
    messages: &'a [Value],
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<Value>>,
}

#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// `https://api.openai.com/v1`, `http://127.0.0.1:8081/v1`, …; `/chat/completions` is
    /// appended.
    pub base_url: String,
    pub model: String,
    /// The key, already read from the environment by the server; `None` sends no header.
    pub api_key: Option<String>,
    pub system_prompt: Option<String>,
}

pub struct OpenAiBackend {
    settings: OpenAiSettings,
    client: reqwest::Client,
}

impl OpenAiBackend {
    pub fn new(settings: OpenAiSettings) -> Result<Self, SettingsError> {
        let ok_scheme =
            settings.base_url.starts_with("http://") || settings.base_url.starts_with("https://");
        if !ok_scheme {
            return Err(SettingsError::Invalid(format!(
                "base_url {:?}: use an http:// or https:// URL such as https://api.openai.com/v1",
                settings.base_url
            )));
        }
        if settings.model.trim().is_empty() {
            return Err(SettingsError::Invalid(
                "model: name the model, like model = \"gpt-4o-mini\"".into(),
            ));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| SettingsError::Invalid(format!("building the HTTP client: {e}")))?;
        Ok(OpenAiBackend { settings, client })
    }

    fn messages(&self, job: &AgentJob) -> Vec<Value> {
        let system =
            self.settings.system_prompt.clone().unwrap_or_else(|| {
                "You are a helpful assistant answering a team's request.".into()
            });
        let mut messages = vec![json!({"role": "system", "content": system})];
        if !job.memory.is_empty() {
            messages.push(json!({"role": "system", "content": job.memory.text()}));
        }
        if let Some(tools) = &job.tools {
            messages.push(json!({"role": "system", "content": tools.0.instructions()}));
        }
        messages.push(json!({"role": "user", "content": job.request}));
        messages
    }

    /// The request's bytes, or why it is not sent (the conversation passed its bound).
    fn body(&self, messages: &[Value], tools: Option<&Tools>) -> Result<Vec<u8>, String> {
        let request = Request {
            model: &self.settings.model,
            stream: true,
            messages,
            tools: tools.map(|t| t.0.definitions()),
        };
        let bytes = serde_json::to_vec(&request)
            .map_err(|e| format!("the request could not be written: {e}"))?;
        if bytes.len() > MAX_REQUEST_BYTES {
            return Err(format!(
                "the conversation passed {} MiB (its tool calls and results together); the run was stopped there",
                MAX_REQUEST_BYTES >> 20
            ));
        }
        Ok(bytes)
    }

    /// Turns until the model answers without asking for a tool.
    async fn converse(&self, job: &AgentJob, sink: &EventSink) -> AgentOutcome {
        let mut messages = self.messages(job);
        let tools = job.tools.as_ref();
        for _ in 0..MAX_TOOL_TURNS {
            let turn = match self.turn(&messages, tools, sink).await {
                Ok(turn) => turn,
                Err(outcome) => return outcome,
            };
            if turn.calls.is_empty() {
                return sink.answered(turn.text.trim());
            }
            let Some(tools) = tools else {
                return sink.failed(
                    "the model asked for a tool, and this agent has no tools (tool calls go through the broker's tool loop, which this run was not given)",
                );
            };
            messages.push(assistant_with_calls(&turn));
            for call in &turn.calls {
                let result = tools.0.call(call, sink).await;
                messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": result}));
            }
        }
        sink.failed(&format!(
            "the model asked for tools {MAX_TOOL_TURNS} times without answering"
        ))
    }

    /// One streamed completion: its text (each completed line an event) and its tool calls.
    async fn turn(
        &self,
        messages: &[Value],
        tools: Option<&Tools>,
        sink: &EventSink,
    ) -> Result<Turn, AgentOutcome> {
        let url = format!(
            "{}/chat/completions",
            self.settings.base_url.trim_end_matches('/')
        );
        let mut req = self
            .client
            .post(url)
            .header("content-type", "application/json");
        if let Some(key) = &self.settings.api_key {
            req = req.bearer_auth(key);
        }
        let body = self
            .body(messages, tools)
            .map_err(|why| sink.failed(&why))?;
        let mut resp =
            match req.body(body).send().await {
                Ok(r) => r,
                Err(e) => {
                    return Err(sink.failed_because(
                    "the model endpoint could not be reached; the operator's log has the details",
                    &format!("the model endpoint could not be reached: {}", without_url(&e)),
                ));
                }
            };
        if !resp.status().is_success() {
            let status = resp.status();
            let body = error_body(&mut resp).await;
            sink.friction(
                "tool_error",
                &format!("model endpoint answered {status}: {body}"),
            )
            .await;
            return Err(sink.failed(&format!("the model endpoint answered {status}")));
        }
        let mut stream = SseText::new(sink.caps());
        'read: loop {
            let chunk = match resp.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    return Err(sink.failed_because(
                        "the model stream broke off; the operator's log has the details",
                        &format!("the model stream broke: {}", without_url(&e)),
                    ));
                }
            };
            for step in stream.feed(&chunk) {
                match step {
                    Step::Line(line) => {
                        sink.event("text", &line).await;
                    }
                    Step::Malformed(what) => {
                        return Err(sink.failed(&format!(
                            "the model stream was not chat-completions JSON: {what}"
                        )));
                    }
                    Step::Over(bound) => {
                        return Err(sink.failed(&format!(
                            "the model's stream {bound}; the run was stopped there"
                        )));
                    }
                    Step::Done => break 'read,
                }
            }
        }
        if !stream.pending.trim().is_empty() {
            sink.event("text", &stream.pending).await;
        }
        let calls = stream
            .calls()
            .map_err(|what| sink.failed(&format!("the model's tool call was malformed: {what}")))?;
        Ok(Turn {
            text: stream.answer,
            calls,
        })
    }
}

/// One completion: its text and the tool calls it asked for.
struct Turn {
    text: String,
    calls: Vec<ToolCall>,
}

/// The assistant's message that asked for the calls, as the conversation must carry it.
fn assistant_with_calls(turn: &Turn) -> Value {
    let calls: Vec<Value> = turn
        .calls
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            })
        })
        .collect();
    let content = if turn.text.is_empty() {
        Value::Null
    } else {
        Value::String(turn.text.clone())
    };
    json!({"role": "assistant", "content": content, "tool_calls": calls})
}

/// A reqwest error without the URL (which may carry a key in a query string): its kind, then
/// the errors under it (`connection refused`), which name no URL.
fn without_url(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_body() || e.is_decode() {
        "the response body could not be read"
    } else {
        "request failed"
    };
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    if causes.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {}", causes.join(": "))
    }
}

/// What one server-sent event line means.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// A completed line of answer text.
    Line(String),
    Malformed(String),
    /// The stream passed one of the reader's bounds.
    Over(String),
    Done,
}

/// Server-sent events of a chat-completions stream, fed chunk by chunk. Everything it holds
/// is bounded: the stream, a line, the answer text, the tool calls; a model that streams
/// past a bound ends its run (or, for the answer, has the rest dropped), and memory never
/// follows what the endpoint sends.
struct SseText {
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no newline (each byte is searched once).
    scanned: usize,
    /// Bytes the stream has carried so far.
    received: usize,
    /// Answer text not yet ended by a newline.
    pending: String,
    answer: String,
    /// The most of the answer kept: a few times what the sink keeps, so text the sanitizer
    /// shortens still fills it, and no secret is cut where the sink's cap would show it.
    answer_limit: usize,
    /// The longest unfinished line held before it is an event on its own.
    pending_limit: usize,
    /// Tool calls by their stream index, their pieces joined as they arrive.
    partial_calls: Vec<PartialCall>,
    call_bytes: usize,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Appends `text` to `to` while `to` stays within `limit` bytes, cut at a character.
fn push_within(to: &mut String, text: &str, limit: usize) {
    let room = limit.saturating_sub(to.len());
    let mut end = room.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    to.push_str(text.get(..end).unwrap_or_default());
}

/// At most [`MAX_ERROR_BODY`] bytes of an error's body, read chunk by chunk.
async fn error_body(resp: &mut reqwest::Response) -> String {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        match resp.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_ERROR_BODY);
    String::from_utf8_lossy(&body).into_owned()
}

impl SseText {
    fn new(caps: crate::OutputCaps) -> SseText {
        SseText {
            buffer: Vec::new(),
            scanned: 0,
            received: 0,
            pending: String::new(),
            answer: String::new(),
            answer_limit: caps.answer_bytes.saturating_mul(4),
            pending_limit: caps.event_bytes.max(1),
            partial_calls: Vec::new(),
            call_bytes: 0,
        }
    }

    fn feed(&mut self, chunk: &[u8]) -> Vec<Step> {
        self.received = self.received.saturating_add(chunk.len());
        if self.received > MAX_STREAM_BYTES {
            return vec![Step::Over(format!(
                "passed {} MiB in one turn",
                MAX_STREAM_BYTES >> 20
            ))];
        }
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.extend_from_slice(chunk);
        let mut steps = Vec::new();
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(at) = buffer
            .get(from..)
            .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
        {
            let end = from + at;
            let line = String::from_utf8_lossy(buffer.get(start..end).unwrap_or_default());
            start = end + 1;
            from = start;
            if self.line(&line, &mut steps) {
                return steps;
            }
        }
        buffer.drain(..start);
        if buffer.len() > MAX_LINE_BYTES {
            steps.push(Step::Over(format!(
                "held a line of more than {} MiB",
                MAX_LINE_BYTES >> 20
            )));
        }
        self.scanned = buffer.len();
        self.buffer = buffer;
        steps
    }

    /// One line of the stream; true once the stream is over (done or malformed).
    fn line(&mut self, line: &str, steps: &mut Vec<Step>) -> bool {
        let Some(data) = line.trim_end().strip_prefix("data:") else {
            return false;
        };
        let data = data.trim();
        if data == "[DONE]" {
            steps.push(Step::Done);
            return true;
        }
        match self.delta(data) {
            Ok(Some(text)) => {
                push_within(&mut self.answer, &text, self.answer_limit);
                self.text(&text, steps);
                false
            }
            Ok(None) => false,
            Err(step) => {
                steps.push(step);
                true
            }
        }
    }

    /// Answer text as events: each completed line, and an unfinished one once it is long.
    fn text(&mut self, text: &str, steps: &mut Vec<Step>) {
        for piece in text.split_inclusive('\n') {
            push_within(&mut self.pending, piece, self.pending_limit);
            let ended = piece.ends_with('\n');
            if ended || self.pending.len() >= self.pending_limit {
                let done = std::mem::take(&mut self.pending);
                let done = done.trim_end();
                if !done.is_empty() {
                    steps.push(Step::Line(done.to_owned()));
                }
            }
        }
    }

    /// The tool calls the stream asked for, whole. A call without a name or an id is malformed.
    fn calls(&self) -> Result<Vec<ToolCall>, String> {
        self.partial_calls
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if p.name.is_empty() || p.id.is_empty() {
                    return Err(format!("call {i} has no name or id"));
                }
                Ok(ToolCall {
                    id: p.id.clone(),
                    name: p.name.clone(),
                    arguments: p.arguments.clone(),
                })
            })
            .collect()
    }

    /// Joins one delta's tool-call pieces into the calls they belong to (by `index`).
    fn tool_call_pieces(&mut self, pieces: &[Value]) -> Result<(), Step> {
        for piece in pieces {
            let index = piece
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|i| usize::try_from(i).ok())
                .filter(|i| *i < 64)
                .ok_or_else(|| Step::Malformed("a tool call without a usable index".into()))?;
            while self.partial_calls.len() <= index {
                self.partial_calls.push(PartialCall::default());
            }
            let Some(call) = self.partial_calls.get_mut(index) else {
                continue;
            };
            let function = piece.get("function");
            let id = piece.get("id").and_then(Value::as_str).unwrap_or_default();
            let name = function
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let args = function
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            if call.id.len() + id.len() > MAX_CALL_NAME
                || call.name.len() + name.len() > MAX_CALL_NAME
            {
                return Err(Step::Over(format!(
                    "named a tool call (or its id) in more than {MAX_CALL_NAME} bytes"
                )));
            }
            self.call_bytes = self.call_bytes.saturating_add(args.len());
            if self.call_bytes > MAX_CALL_BYTES {
                return Err(Step::Over(format!(
                    "asked for tool calls of more than {} MiB in one turn",
                    MAX_CALL_BYTES >> 20
                )));
            }
            call.id.push_str(id);
            call.name.push_str(name);
            call.arguments.push_str(args);
        }
        Ok(())
    }

    /// The text of one chunk's delta (its tool-call pieces are kept); malformed JSON is a `Step`.
    fn delta(&mut self, data: &str) -> Result<Option<String>, Step> {
        let v: Value = serde_json::from_str(data)
            .map_err(|e| Step::Malformed(format!("line {} column {}", e.line(), e.column())))?;
        let choice = v.get("choices").and_then(|c| c.get(0));
        let Some(choice) = choice else {
            return Ok(None);
        };
        let delta = choice.get("delta");
        if let Some(pieces) = delta.and_then(|d| d.get("tool_calls")) {
            let pieces = pieces
                .as_array()
                .ok_or_else(|| Step::Malformed("tool_calls is not a list".into()))?;
            self.tool_call_pieces(pieces)?;
        }
        Ok(delta
            .and_then(|d| d.get("content"))
            .and_then(Value::as_str)
            .map(str::to_owned))
    }
}

#[async_trait]
impl AgentBackend for OpenAiBackend {
    fn kind(&self) -> &'static str {
        "openai"
    }

    async fn run(&self, job: AgentJob, sink: EventSink, cancel: CancellationToken) -> AgentOutcome {
        tokio::select! {
            outcome = self.converse(&job, &sink) => outcome,
            () = cancel.cancelled() => sink.cancelled(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(text: &str) -> String {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"delta": {"content": text}}]})
        )
    }

    #[test]
    fn lines_are_cut_across_chunk_boundaries() {
        let mut s = SseText::new(crate::OutputCaps::default());
        let all = format!(
            "{}{}{}data: [DONE]\n",
            chunk("Hel"),
            chunk("lo\nwor"),
            chunk("ld")
        );
        let bytes = all.as_bytes();
        let mut steps = Vec::new();
        for piece in bytes.chunks(7) {
            steps.extend(s.feed(piece));
        }
        assert_eq!(steps, vec![Step::Line("Hello".into()), Step::Done]);
        assert_eq!(s.pending, "world");
        assert_eq!(s.answer, "Hello\nworld");
    }

    #[test]
    fn malformed_json_and_tool_calls_are_named() {
        let mut s = SseText::new(crate::OutputCaps::default());
        assert!(matches!(
            s.feed(b"data: {not json\n")[..],
            [Step::Malformed(_)]
        ));
        let mut s = SseText::new(crate::OutputCaps::default());
        let piece = |v: Value| {
            format!(
                "data: {}\n",
                json!({"choices": [{"delta": {"tool_calls": [v]}}]})
            )
        };
        let stream = [
            piece(json!({"index": 0, "id": "call_1", "function": {"name": "read_", "arguments": "{\"pa"}})),
            piece(json!({"index": 0, "function": {"name": "file", "arguments": "th\":\"/w\"}"}})),
            piece(json!({"index": 1, "id": "call_2", "function": {"name": "shell", "arguments": "{}"}})),
        ]
        .concat();
        assert!(s.feed(stream.as_bytes()).is_empty());
        let calls = s.calls().unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].name.as_str(), calls[0].arguments.as_str()),
            ("read_file", "{\"path\":\"/w\"}")
        );
        assert_eq!(calls[1].id, "call_2");
        let mut s = SseText::new(crate::OutputCaps::default());
        assert!(matches!(
            s.feed(piece(json!({"id": "x"})).as_bytes())[..],
            [Step::Malformed(_)]
        ));
        let mut s = SseText::new(crate::OutputCaps::default());
        s.feed(piece(json!({"index": 0, "function": {"arguments": "{}"}})).as_bytes());
        assert!(s.calls().is_err(), "a call without a name or id");
        let mut s = SseText::new(crate::OutputCaps::default());
        assert!(
            s.feed(b": keep-alive\nevent: x\n").is_empty(),
            "comments and other fields are skipped"
        );
    }

    fn caps() -> crate::OutputCaps {
        crate::OutputCaps {
            event_bytes: 16,
            total_bytes: 1024,
            answer_bytes: 32,
        }
    }

    #[test]
    fn the_answer_and_an_unended_line_are_held_only_up_to_their_bounds() {
        let mut s = SseText::new(caps());
        let mut steps = Vec::new();
        for _ in 0..1000 {
            steps.extend(s.feed(chunk("ééééé").as_bytes()));
        }
        assert_eq!(
            s.answer.len(),
            128,
            "four times the sink's answer cap, cut at a character"
        );
        assert!(s.pending.len() < 16);
        assert!(
            steps
                .iter()
                .all(|st| matches!(st, Step::Line(l) if l.len() <= 16))
        );
        assert!(
            steps.len() > 100,
            "an endless line is given as events as it comes"
        );
    }

    #[test]
    fn a_stream_a_line_and_tool_calls_past_their_bounds_end_the_turn() {
        let mut s = SseText::new(caps());
        let line = vec![b'x'; MAX_LINE_BYTES + 1];
        assert!(matches!(&s.feed(&line)[..], [Step::Over(w)] if w.contains("line")));

        let mut s = SseText::new(caps());
        let block = vec![b'\n'; 1 << 20];
        let over = (0..=MAX_STREAM_BYTES >> 20)
            .flat_map(|_| s.feed(&block))
            .collect::<Vec<_>>();
        assert!(matches!(&over[..], [Step::Over(w)] if w.contains("MiB in one turn")));

        let mut s = SseText::new(caps());
        let args = "a".repeat(1 << 20);
        let piece = format!(
            "data: {}\n",
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "shell", "arguments": args}}]}}]})
        );
        let steps: Vec<Step> = (0..9).flat_map(|_| s.feed(piece.as_bytes())).collect();
        assert!(matches!(&steps[..], [Step::Over(w)] if w.contains("tool calls")));

        let mut s = SseText::new(caps());
        let name = format!(
            "data: {}\n",
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "n".repeat(257)}}]}}]})
        );
        assert!(matches!(&s.feed(name.as_bytes())[..], [Step::Over(_)]));
    }

    #[test]
    fn lines_split_one_byte_at_a_time_are_found_once_each() {
        let mut s = SseText::new(crate::OutputCaps::default());
        let all = format!("{}{}data: [DONE]\n", chunk("a\nb"), chunk("c\n"));
        let steps: Vec<Step> = all.as_bytes().chunks(1).flat_map(|b| s.feed(b)).collect();
        assert_eq!(
            steps,
            vec![Step::Line("a".into()), Step::Line("bc".into()), Step::Done]
        );
    }

    #[test]
    fn settings_are_checked() {
        let base = OpenAiSettings {
            base_url: "ftp://x".into(),
            model: "m".into(),
            api_key: None,
            system_prompt: None,
        };
        assert!(OpenAiBackend::new(base.clone()).is_err());
        let no_model = OpenAiSettings {
            base_url: "http://127.0.0.1:1/v1".into(),
            model: " ".into(),
            ..base
        };
        assert!(OpenAiBackend::new(no_model).is_err());
    }
}
