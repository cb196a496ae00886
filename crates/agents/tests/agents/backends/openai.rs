//! The `openai` back end against a fake endpoint: streaming, memory, errors, a stream without end.

use super::*;

/// A small OpenAI-compatible server: streams the answer back in pieces, or errors, or asks
/// for a tool, depending on the request.
async fn fake_openai() -> String {
    use axum::Router;
    use axum::body::Body;
    use axum::http::{HeaderMap, Response, StatusCode};
    use axum::routing::post;

    async fn completions(headers: HeaderMap, body: String) -> Response<Body> {
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["stream"], true);
        assert_eq!(v["model"], "test-model");
        let messages = v["messages"].as_array().unwrap();
        let request = messages.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned();
        if request == "what do you remember?" {
            // Everything but the first system prompt and the user's message.
            let given: Vec<String> = messages[1..messages.len() - 1]
                .iter()
                .map(|m| {
                    format!(
                        "{}: {}",
                        m["role"].as_str().unwrap(),
                        m["content"].as_str().unwrap()
                    )
                })
                .collect();
            let chunk = serde_json::json!({"choices":[{"delta":{"content":given.join("|")}}]});
            return Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(format!("data: {chunk}\n\ndata: [DONE]\n\n")))
                .unwrap();
        }
        let auth = headers
            .get("authorization")
            .map(|h| h.to_str().unwrap().to_owned());
        if request == "unauthorised"
            || auth.as_deref() != Some("Bearer sk-test-key-0123456789abcdef")
        {
            return Response::builder()
                .status(StatusCode::UNAUTHORIZED)
                .body(Body::from(
                    "{\"error\":\"bad key sk-test-key-0123456789abcdef\"}",
                ))
                .unwrap();
        }
        let mut out = String::new();
        if request == "use a tool" {
            out.push_str(&format!(
                "data: {}\n\n",
                serde_json::json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"1","function":{"name":"shell","arguments":"{}"}}]}}]})
            ));
        } else {
            for piece in ["You said: ", &request, "\nSecond", " line"] {
                out.push_str(&format!(
                    "data: {}\n\n",
                    serde_json::json!({"choices":[{"delta":{"content":piece}}]})
                ));
            }
            out.push_str("data: [DONE]\n\n");
        }
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(out))
            .unwrap()
    }

    let app = Router::new().route("/v1/chat/completions", post(completions));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

fn openai(base: &str, key: &str) -> OpenAiBackend {
    OpenAiBackend::new(OpenAiSettings {
        base_url: base.into(),
        model: "test-model".into(),
        api_key: Some(key.into()),
        system_prompt: None,
    })
    .unwrap()
}

#[tokio::test]
async fn openai_streams_lines_as_events_and_the_whole_text_as_the_answer() {
    let base = fake_openai().await;
    let backend = openai(&base, "sk-test-key-0123456789abcdef");
    let (o, items) = run(&backend, job("ship it"), CancellationToken::new()).await;
    assert_eq!(o.answer(), Some("You said: ship it\nSecond line"));
    assert_eq!(events(&items), vec!["You said: ship it", "Second line"]);
}

#[tokio::test]
async fn openai_gets_the_memory_block_as_a_system_message_of_its_own() {
    let base = fake_openai().await;
    let backend = openai(&base, "sk-test-key-0123456789abcdef");
    let (o, _) = run(
        &backend,
        remembering("what do you remember?"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        o.answer(),
        Some("system: Remembered:\n- [org] deploys freeze on Fridays\n- [user] likes tea")
    );
    let (o, _) = run(
        &backend,
        job("what do you remember?"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(o.answer(), Some(""), "no block, no extra message");
}

#[tokio::test]
async fn openai_errors_are_named_and_the_remote_body_is_sanitised_friction() {
    let base = fake_openai().await;
    let (o, items) = run(
        &openai(&base, "sk-wrong-key-0000000000000000"),
        job("x"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        o.error(),
        Some("the model endpoint answered 401 Unauthorized")
    );
    let friction: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            SinkItem::Friction { detail, .. } => Some(detail.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(friction.len(), 1);
    assert!(!friction[0].contains("sk-test-key"), "{friction:?}");
    let good = openai(&base, "sk-test-key-0123456789abcdef");
    let (o, _) = run(&good, job("use a tool"), CancellationToken::new()).await;
    assert!(
        o.error()
            .unwrap()
            .starts_with("the model asked for a tool, and this agent has no tools"),
        "{:?}",
        o.error()
    );
    let (o, _) = run(
        &openai("http://127.0.0.1:9/v1", "k"),
        job("x"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        o.error(),
        Some("the model endpoint could not be reached; the operator's log has the details")
    );
}

/// A model endpoint that answers every request with `head` and then writes `piece` for ever
/// (until the client goes away).
async fn endless_model(head: &'static str, piece: Vec<u8>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let piece = piece.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 8192];
                // The request: its head, then as many bytes as it says it has.
                loop {
                    let n = conn.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length: usize = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if seen.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                if conn.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                while conn.write_all(&piece).await.is_ok() {}
            });
        }
    });
    format!("http://{addr}/v1")
}

/// A model that streams answer text for ever without a newline, or one tool call's arguments
/// for ever, or an error body for ever: each run ends, failed and saying why, with the
/// server's memory never following the stream (the reader holds only what its bounds keep).
#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_streams_for_ever_ends_its_run_at_the_streams_bound() {
    let ok = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let text = format!(
        "data: {}\n\n",
        serde_json::json!({"choices":[{"delta":{"content":"x".repeat(1 << 20)}}]})
    );
    let base = endless_model(ok, text.into_bytes()).await;
    let (o, items) = run(&openai(&base, "k"), job("flood"), CancellationToken::new()).await;
    assert_eq!(
        o.error(),
        Some("the model's stream passed 64 MiB in one turn; the run was stopped there")
    );
    assert!(events(&items).iter().all(|e| e.len() <= 4096));

    let call = format!(
        "data: {}\n\n",
        serde_json::json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"shell","arguments":"a".repeat(1 << 20)}}]}}]})
    );
    let base = endless_model(ok, call.into_bytes()).await;
    let (o, _) = run(&openai(&base, "k"), job("flood"), CancellationToken::new()).await;
    assert!(
        o.error().unwrap().contains("tool calls of more than 8 MiB"),
        "{:?}",
        o.error()
    );

    let failing = "HTTP/1.1 500 Internal Server Error\r\nconnection: close\r\n\r\n";
    let base = endless_model(failing, vec![b'e'; 1 << 20]).await;
    let (o, items) = run(&openai(&base, "k"), job("flood"), CancellationToken::new()).await;
    assert_eq!(
        o.error(),
        Some("the model endpoint answered 500 Internal Server Error")
    );
    assert!(
        items
            .iter()
            .any(|i| matches!(i, SinkItem::Friction { detail, .. } if detail.contains("eeee")))
    );
}
