//! Bad input on `/mcp` as a table, and the surface without a token map.

use super::*;

/// One row of the bad-input table: what it is, its headers, its body, the status it gets.
type BadInput<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, u16);

const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;

/// Bad input as a table: each gets its status, nothing panics, and nothing is written.
#[tokio::test]
async fn bad_input_gets_its_status_and_writes_nothing() {
    let s = start(Some(token_map()), "max_body_bytes = 4096").await;
    let before = s.run_count().await;
    let ok_auth = format!("Bearer {OPSBOT}");
    let ok = ok_auth.as_str();
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"ask","arguments":{{"request":"{}"}}}}}}"#,
        "x".repeat(10_000)
    );
    let ask_call = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ask","arguments":{"request":"hi"}}}"#;
    let pv = ("mcp-protocol-version", "2025-06-18");
    let cases: Vec<BadInput> = vec![
        ("no bearer", vec![pv], ask_call.into(), 401),
        (
            "wrong bearer",
            vec![("authorization", "Bearer wrong-token-000000"), pv],
            ask_call.into(),
            401,
        ),
        (
            "not a bearer",
            vec![("authorization", "Basic b3BzOmJvdA=="), pv],
            ask_call.into(),
            401,
        ),
        (
            "a forged agent token",
            vec![
                (
                    "authorization",
                    "Bearer eyJhbGciOiJIUzI1NiJ9.eyJydW4iOiJ4In0.c2ln",
                ),
                pv,
            ],
            ask_call.into(),
            401,
        ),
        (
            "a bad Host",
            vec![("authorization", ok), ("host", "evil.example"), pv],
            ask_call.into(),
            403,
        ),
        (
            "a rebinding Host",
            vec![
                ("authorization", ok),
                ("host", "localhost.evil.example:80"),
                pv,
            ],
            ask_call.into(),
            403,
        ),
        (
            "two Host headers, the first allowed",
            vec![
                ("authorization", ok),
                ("host", "localhost"),
                ("host", "evil.example"),
                pv,
            ],
            ask_call.into(),
            400,
        ),
        (
            "a foreign Origin",
            vec![
                ("authorization", ok),
                ("origin", "https://evil.example"),
                pv,
            ],
            ask_call.into(),
            403,
        ),
        (
            "Origin: null",
            vec![("authorization", ok), ("origin", "null"), pv],
            ask_call.into(),
            403,
        ),
        (
            "a JSON-RPC message spelled as an array",
            vec![("authorization", ok), pv],
            r#"["2.0", "tools/list"]"#.into(),
            400,
        ),
        (
            "a batch of one good message",
            vec![("authorization", ok), pv],
            format!("[{ask_call}]"),
            400,
        ),
        (
            "malformed JSON-RPC",
            vec![("authorization", ok), pv],
            "{\"jsonrpc\": \"2.0\", \"id\": ".into(),
            400,
        ),
        (
            "not JSON-RPC",
            vec![("authorization", ok), pv],
            "[1, 2, 3]".into(),
            400,
        ),
        (
            "not JSON-RPC 2.0",
            vec![("authorization", ok), pv],
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#.into(),
            400,
        ),
        (
            "no method",
            vec![("authorization", ok), pv],
            r#"{"jsonrpc":"2.0","id":1}"#.into(),
            400,
        ),
        (
            "not UTF-8",
            vec![("authorization", ok), pv],
            String::from_utf8_lossy(&[0x7b, 0xff, 0x7d]).into_owned(),
            400,
        ),
        ("a huge request", vec![("authorization", ok), pv], huge, 413),
        (
            "a session id of another session",
            vec![
                ("authorization", ok),
                ("mcp-session-id", "5f3c-other-session"),
                pv,
            ],
            ask_call.into(),
            404,
        ),
    ];
    for (what, headers, body, want) in cases {
        let (status, text) = s.post(&headers, &body).await;
        assert_eq!(status, want, "{what}: {text}");
        if want == 401 {
            assert_eq!(text, "", "{what}: a refused bearer learns nothing");
        }
        if want == 400 && !text.starts_with("Bad Request") {
            let v: Value = serde_json::from_str(&text).unwrap();
            let code = v["error"]["code"].as_i64().unwrap();
            assert!(code == -32700 || code == -32600, "{what}: {text}");
        }
    }
    // Unknown tool and schema failures are tool results (isError), with status 200.
    for (tool, args) in [
        ("frobnicate", json!({})),
        ("runs_list", json!({"status": 7})),
    ] {
        let body = json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":tool,"arguments":args}}).to_string();
        let (status, text) = s.post(&[("authorization", ok), pv], &body).await;
        assert_eq!(status, 200, "{tool}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["result"]["isError"], true, "{tool}: {text}");
    }
    // And a well-formed list still works after all that, also with an allowed Origin.
    let (status, text) = s.post(&[("authorization", ok), pv], LIST).await;
    assert_eq!(status, 200, "{text}");
    let local = [
        ("authorization", ok),
        ("origin", "http://localhost:6274"),
        pv,
    ];
    let (status, text) = s.post(&local, LIST).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(s.run_count().await, before, "nothing was written");
}

#[tokio::test]
async fn without_a_token_map_the_surface_answers_503_saying_what_it_needs() {
    let s = start(None, "").await;
    let (status, text) = s.post(&[("authorization", "Bearer x")], LIST).await;
    assert_eq!(status, 503);
    assert!(text.contains("no token map"), "{text}");
}
