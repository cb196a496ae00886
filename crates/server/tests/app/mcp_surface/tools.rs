//! Tools: what each token is offered, paging, and errors as tool results, not protocol errors.

use super::*;

#[tokio::test]
async fn two_tokens_with_different_grants_see_different_tools() {
    let s = start(Some(token_map()), "").await;
    let reader = s.client(READER).await;
    let ops = s.client(OPSBOT).await;
    let nobody = s.client(NOBODY).await;
    let r = names(&reader.list_all_tools().await.unwrap());
    let o = names(&ops.list_all_tools().await.unwrap());
    let n = names(&nobody.list_all_tools().await.unwrap());
    for t in ["runs_list", "runs_get", "runs_events", "runs_friction"] {
        assert!(r.contains(&t.to_owned()), "{t} in {r:?}");
        assert!(o.contains(&t.to_owned()), "{t} in {o:?}");
    }
    for t in ["runs_stop", "ask", "help", "config_set"] {
        assert!(!r.contains(&t.to_owned()), "reader lists {t}: {r:?}");
    }
    for t in ["runs_stop", "ask", "help"] {
        assert!(o.contains(&t.to_owned()), "opsbot lacks {t}: {o:?}");
    }
    assert!(!o.contains(&"config_set".to_owned()));
    assert!(
        n.is_empty(),
        "a token holding nothing learns no schema: {n:?}"
    );

    // Each tool: its command's schema, its summary, readOnlyHint for :read.
    let tools = ops.list_all_tools().await.unwrap();
    let list = tools.iter().find(|t| t.name == "runs_list").unwrap();
    let schema = Value::Object((*list.input_schema).clone());
    assert_eq!(schema["type"], "object");
    assert_eq!(
        schema["properties"]["status"]["enum"],
        json!(["live", "finished", "all"])
    );
    assert!(!list.description.as_deref().unwrap_or_default().is_empty());
    assert_eq!(
        list.annotations.as_ref().unwrap().read_only_hint,
        Some(true)
    );
    let stop = tools.iter().find(|t| t.name == "runs_stop").unwrap();
    assert_eq!(
        stop.annotations.as_ref().unwrap().read_only_hint,
        Some(false)
    );
    let ask = tools.iter().find(|t| t.name == "ask").unwrap();
    assert_eq!(
        Value::Object((*ask.input_schema).clone())["required"],
        json!(["request"])
    );
}

#[tokio::test]
async fn tools_list_pages_per_the_protocol() {
    let s = start(Some(token_map()), "tools_page_size = 2").await;
    let ops = s.client(OPSBOT).await;
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let page = ops
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .unwrap();
        assert!(page.tools.len() <= 2);
        seen.extend(names(&page.tools));
        pages += 1;
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert!(pages >= 3, "{pages} pages");
    let all = names(&ops.list_all_tools().await.unwrap());
    assert_eq!(
        seen, all,
        "the pages are the whole list, once each, in order"
    );
    // A cursor this server never gave is a protocol error (no reason about anyone).
    let bad = ops
        .list_tools(Some(
            PaginatedRequestParams::default().with_cursor(Some("nonsense".into())),
        ))
        .await;
    assert!(bad.is_err());
}

#[tokio::test]
async fn refusals_unknown_tools_and_bad_arguments_are_tool_errors_not_protocol_errors() {
    let s = start(Some(token_map()), "").await;
    let reader = s.client(READER).await;
    let before = s.run_count().await;
    for (tool, args, want) in [
        // Not admitted: the registry's refusal in the command's deny shape, as on any surface
        // (a run's stop is a point action: not_found).
        (
            "runs_stop",
            json!({"id": "01JZZZZZZZZZZZZZZZZZZZZZZZ"}),
            "not_found",
        ),
        (
            "config_set",
            json!({"key": "greeting", "value": "hi", "org": true}),
            "unauthorized",
        ),
        // Does not exist (a command id is not a tool name).
        ("frobnicate", json!({}), "unknown_command"),
        ("runs.list", json!({}), "unknown_command"),
        // Fails the schema: the usage reply.
        ("runs_list", json!({"status": "sideways"}), "usage"),
        ("runs_list", json!({"limit": "many"}), "usage"),
        ("runs_list", json!({"colour": "red"}), "usage"),
        ("runs_get", json!({}), "usage"),
        // ask without a grant to run anything.
        ("ask", json!({"request": "hello"}), "unauthorized"),
    ] {
        let got = call(&reader, tool, args.clone()).await;
        assert_eq!(got.is_error, Some(true), "{tool} {args}");
        let code = got.structured_content.as_ref().unwrap()["code"].clone();
        assert_eq!(code, json!(want), "{tool} {args}: {}", text(&got));
    }
    let ops = s.client(OPSBOT).await;
    for args in [
        json!({}),
        json!({"request": 3}),
        json!({"request": "x", "wait": "yes"}),
    ] {
        let got = call(&ops, "ask", args.clone()).await;
        assert_eq!(got.is_error, Some(true), "{args}");
        assert!(text(&got).contains("usage: ask"), "{args}: {}", text(&got));
    }
    assert_eq!(s.run_count().await, before, "nothing was written");
}
