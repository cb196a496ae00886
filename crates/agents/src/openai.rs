//! `openai`: any OpenAI-compatible chat-completions endpoint (OpenAI, llama.cpp, vLLM,
//! Ollama), streaming. Each completed line of the streamed answer is an event; the whole
//! text is the answer. Tool calling arrives with the broker: a model that asks for a tool
//! ends the run with an error saying so, never a made-up result.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{AgentBackend, AgentJob, AgentOutcome, EventSink, SettingsError};

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

    fn body(&self, job: &AgentJob) -> Value {
        let system =
            self.settings.system_prompt.clone().unwrap_or_else(|| {
                "You are a helpful assistant answering a team's request.".into()
            });
        let mut messages = vec![json!({"role": "system", "content": system})];
        if !job.memory.is_empty() {
            messages.push(json!({"role": "system", "content": job.memory.text()}));
        }
        messages.push(json!({"role": "user", "content": job.request}));
        json!({
            "model": self.settings.model,
            "stream": true,
            "messages": messages,
        })
    }

    async fn stream(&self, job: &AgentJob, sink: &EventSink) -> AgentOutcome {
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
        let mut resp = match req.body(self.body(job).to_string()).send().await {
            Ok(r) => r,
            Err(e) => {
                return sink.failed(&format!(
                    "the model endpoint could not be reached: {}",
                    without_url(&e)
                ));
            }
        };
        if !resp.status().is_success() {
            let status = resp.status();
            let body = resp.text().await.unwrap_or_default();
            sink.friction(
                "tool_error",
                &format!("model endpoint answered {status}: {body}"),
            )
            .await;
            return sink.failed(&format!("the model endpoint answered {status}"));
        }
        let mut stream = SseText::default();
        loop {
            let chunk = match resp.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    return sink.failed(&format!("the model stream broke: {}", without_url(&e)));
                }
            };
            for step in stream.feed(&chunk) {
                match step {
                    Step::Line(line) => {
                        sink.event("text", &line).await;
                    }
                    Step::ToolCall => {
                        return sink.failed(
                            "the model asked for a tool; tool calling arrives with the broker and is not part of this build",
                        );
                    }
                    Step::Malformed(what) => {
                        return sink.failed(&format!(
                            "the model stream was not chat-completions JSON: {what}"
                        ));
                    }
                    Step::Done => return self.finish(stream, sink).await,
                }
            }
        }
        self.finish(stream, sink).await
    }

    async fn finish(&self, stream: SseText, sink: &EventSink) -> AgentOutcome {
        if !stream.pending.trim().is_empty() {
            sink.event("text", &stream.pending).await;
        }
        sink.answered(stream.answer.trim())
    }
}

/// A reqwest error without the URL (which may carry a key in a query string).
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
    kind.to_owned()
}

/// What one server-sent event line means.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// A completed line of answer text.
    Line(String),
    ToolCall,
    Malformed(String),
    Done,
}

/// Server-sent events of a chat-completions stream, fed chunk by chunk.
#[derive(Default)]
struct SseText {
    buffer: Vec<u8>,
    /// Answer text not yet ended by a newline.
    pending: String,
    answer: String,
}

impl SseText {
    fn feed(&mut self, chunk: &[u8]) -> Vec<Step> {
        self.buffer.extend_from_slice(chunk);
        let mut steps = Vec::new();
        while let Some(i) = self.buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=i).collect();
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim_end().strip_prefix("data:") else {
                continue;
            };
            let data = data.trim();
            if data == "[DONE]" {
                steps.push(Step::Done);
                return steps;
            }
            match self.delta(data) {
                Ok(Some(text)) => {
                    self.answer.push_str(&text);
                    self.pending.push_str(&text);
                    while let Some(nl) = self.pending.find('\n') {
                        let done: String = self.pending.drain(..=nl).collect();
                        let done = done.trim_end();
                        if !done.is_empty() {
                            steps.push(Step::Line(done.to_owned()));
                        }
                    }
                }
                Ok(None) => {}
                Err(step) => {
                    steps.push(step);
                    return steps;
                }
            }
        }
        steps
    }

    /// The text of one chunk's delta; a tool call or malformed JSON is a `Step`.
    fn delta(&self, data: &str) -> Result<Option<String>, Step> {
        let v: Value = serde_json::from_str(data)
            .map_err(|e| Step::Malformed(format!("line {} column {}", e.line(), e.column())))?;
        let choice = v.get("choices").and_then(|c| c.get(0));
        let Some(choice) = choice else {
            return Ok(None);
        };
        let delta = choice.get("delta");
        let wants_tool = delta.and_then(|d| d.get("tool_calls")).is_some()
            || choice.get("finish_reason").and_then(Value::as_str) == Some("tool_calls");
        if wants_tool {
            return Err(Step::ToolCall);
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
            outcome = self.stream(&job, &sink) => outcome,
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
        let mut s = SseText::default();
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
        let mut s = SseText::default();
        assert!(matches!(
            s.feed(b"data: {not json\n")[..],
            [Step::Malformed(_)]
        ));
        let mut s = SseText::default();
        let tool = format!(
            "data: {}\n",
            json!({"choices": [{"delta": {"tool_calls": []}}]})
        );
        assert_eq!(s.feed(tool.as_bytes()), vec![Step::ToolCall]);
        let mut s = SseText::default();
        assert!(
            s.feed(b": keep-alive\nevent: x\n").is_empty(),
            "comments and other fields are skipped"
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
