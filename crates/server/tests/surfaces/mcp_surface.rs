//! `/mcp` over real HTTP on loopback, driven by rmcp's own client (and raw HTTP for the bad
//! input rmcp's client would never send).

mod common;

use std::time::Duration;

use authz_core::ChannelVisibility as V;
use commands::ReplyKind;
use common::*;
use rmcp::model::PaginatedRequestParams;
use serde_json::{Value, json};

const READER: &str = "reader-token-0123456789";
const OPSBOT: &str = "opsbot-token-0123456789";
const FLEET: &str = "fleet-token-01234567890";
const NOBODY: &str = "nobody-token-0123456789";

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

/// Deliberate change (d): an unpinned token lists only public runs and gets not_found on every
/// other; a granted token sees its channel; the fleet sees everything.
#[tokio::test]
async fn runs_list_returns_exactly_what_the_predicate_allows() {
    let s = start(Some(token_map()), "").await;
    let public = s.seed("slack:C1", "slack:UBOB", V::Public).await;
    let private = s.seed("slack:G1", "slack:UBOB", V::Private).await;
    let ops_run = s.seed("mcp:ops", "mcp:opsbot", V::Machine).await;
    let other_machine = s.seed("mcp:billing", "mcp:billing", V::Machine).await;
    let id = |r: &store::RunRecord| r.id.to_string();
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let list = json!({"status": "all"});

    let reader = s.client(READER).await;
    let got = call(&reader, "runs_list", list.clone()).await;
    assert_eq!(got.is_error, Some(false), "{}", text(&got));
    assert_eq!(listed_ids(&got), vec![id(&public)]);

    let ops = s.client(OPSBOT).await;
    let got = call(&ops, "runs_list", list.clone()).await;
    assert_eq!(
        sorted(listed_ids(&got)),
        sorted(vec![id(&public), id(&ops_run)])
    );

    let fleet = s.client(FLEET).await;
    let got = call(&fleet, "runs_list", list.clone()).await;
    assert_eq!(
        sorted(listed_ids(&got)),
        sorted(vec![
            id(&public),
            id(&private),
            id(&ops_run),
            id(&other_machine)
        ])
    );

    // structuredContent is an object, as --json prints it.
    assert!(got.structured_content.as_ref().unwrap().is_object());

    // Point reads: a run outside the predicate is not_found, like a missing one.
    for r in [&private, &ops_run, &other_machine] {
        let got = call(&reader, "runs_get", json!({"id": id(r)})).await;
        assert_eq!(got.is_error, Some(true));
        assert_eq!(
            got.structured_content.as_ref().unwrap()["code"],
            json!("not_found"),
            "{}",
            text(&got)
        );
    }
    let seen = call(&ops, "runs_get", json!({"id": id(&ops_run)})).await;
    assert_eq!(seen.is_error, Some(false), "{}", text(&seen));
}

#[tokio::test]
async fn a_denied_runs_get_is_identical_to_a_missing_one() {
    let s = start(Some(token_map()), "").await;
    let private = s.seed("slack:G1", "slack:UBOB", V::Private).await;
    let reader = s.client(READER).await;
    let missing_id = "01JZZZZZZZZZZZZZZZZZZZZZZZ";
    for tool in ["runs_get", "runs_events", "runs_friction"] {
        let denied = call(&reader, tool, json!({"id": private.id.to_string()})).await;
        let missing = call(&reader, tool, json!({"id": missing_id})).await;
        let norm = |r: &rmcp::model::CallToolResult, id: &str| {
            serde_json::to_string(r).unwrap().replace(id, "<ID>")
        };
        assert_eq!(
            norm(&denied, private.id.as_str()),
            norm(&missing, missing_id),
            "{tool}: a denied read must be byte-identical to a missing one"
        );
        assert_eq!(denied.is_error, Some(true));
    }
    // The refusal is on the audit line only: one per denied read, naming the reader.
    let lines = s.audit.lines();
    assert_eq!(lines.len(), 3, "{lines:?}");
    for line in &lines {
        assert_eq!(line.action, "runs:read", "{line}");
        assert_eq!(line.surface, "mcp", "{line}");
        assert!(line.actor.starts_with("mcp:"), "{line}");
    }
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

/// `ask` names the repo its run works in; a repo the caller may not use reads exactly as one
/// that is not configured.
#[tokio::test]
async fn ask_names_its_repo_and_an_unusable_one_reads_as_missing() {
    let s = start(Some(token_map()), "").await;
    let repo = tempfile::tempdir().unwrap();
    agents::testing::init_repository(repo.path()).unwrap();
    for slug in ["acme/web", "acme/secret"] {
        store::repos::set(
            s.store.as_ref(),
            &slug.parse().unwrap(),
            &store::repos::RepoSource::Path(repo.path().display().to_string()),
            &authz_core::ActorId::cli_local(),
            store::Timestamp::now(),
        )
        .await
        .unwrap();
    }
    let ops = s.client(OPSBOT).await;
    let started = call(
        &ops,
        "ask",
        json!({"request": "hello", "repo": "Acme/Web", "wait": true}),
    )
    .await;
    assert_eq!(started.is_error, Some(false), "{}", text(&started));
    let id = started.structured_content.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(s.run(&id).await.repo.unwrap().as_str(), "acme/web");
    let secret = call(
        &ops,
        "ask",
        json!({"request": "hello", "repo": "acme/secret"}),
    )
    .await;
    let ghost = call(
        &ops,
        "ask",
        json!({"request": "hello", "repo": "acme/ghost"}),
    )
    .await;
    assert_eq!(secret.is_error, Some(true));
    assert_eq!(
        text(&secret).replace("secret", "ghost"),
        text(&ghost),
        "a restricted repo reads as a missing one"
    );
    assert!(
        text(&ghost).contains("repo acme/ghost is not configured"),
        "{}",
        text(&ghost)
    );
}

#[tokio::test]
async fn ask_records_a_run_in_the_tokens_channel_and_can_wait_for_the_answer() {
    let s = start(Some(token_map()), "").await;
    let ops = s.client(OPSBOT).await;
    let started = call(&ops, "ask", json!({"request": "hello there"})).await;
    assert_eq!(started.is_error, Some(false), "{}", text(&started));
    let sc = started.structured_content.clone().unwrap();
    let id = sc["run_id"].as_str().unwrap().to_owned();
    assert!(text(&started).contains(&id));
    // The capability link goes to the one who asked, in the data and the text: a machine's
    // link (it watches and stops the run; it answers no ask).
    let link = sc["link"].as_str().unwrap_or_else(|| panic!("{sc}"));
    assert!(link.contains(&format!("/runs/{id}?token=sbm_")), "{link}");
    assert!(text(&started).contains(link));
    let run = s.run(&id).await;
    assert_eq!(run.channel_id.as_str(), "mcp:ops", "the token's channel");
    assert_eq!(run.user_id.as_str(), "mcp:opsbot");
    assert_eq!(run.surface.as_str(), "mcp");
    assert_eq!(run.parent_run, None);

    let waited = call(
        &ops,
        "ask",
        json!({"request": "say this back", "wait": true}),
    )
    .await;
    assert_eq!(waited.is_error, Some(false), "{}", text(&waited));
    let sc = waited.structured_content.clone().unwrap();
    assert_eq!(sc["status"], "completed");
    assert!(text(&waited).contains("say this back"), "{}", text(&waited));
    let done = s.run(sc["run_id"].as_str().unwrap()).await;
    assert_eq!(done.status, store::RunStatus::Completed);
}

/// An agent acting for an admin is offered none of the tools that write what governs later
/// runs, and calling one by name is refused: config values, repos and MCP servers are
/// written by people, services and schedules, never by an agent, whatever its owner holds.
#[tokio::test]
async fn an_agent_never_writes_what_governs_later_runs_even_for_an_admin() {
    let s = start(Some(token_map()), "").await;
    let handled = s
        .slack_says("slack:UADMIN", "slack:C9", "@holder look around")
        .await;
    assert_eq!(handled.reply.kind, ReplyKind::Ok, "{}", handled.reply.text);
    let parent = handled.run.unwrap().id().clone();
    let (token, _) = s.holder_env(&parent).await;
    let agent = s.client(&token).await;
    let tools = names(&agent.list_all_tools().await.unwrap());
    assert!(
        tools.contains(&"mcp_list".to_owned()),
        "reads hold: {tools:?}"
    );
    for governs in [
        "config_set",
        "repo_add",
        "repo_remove",
        "mcp_add",
        "mcp_remove",
    ] {
        assert!(
            !tools.contains(&governs.to_owned()),
            "{governs} in {tools:?}"
        );
    }
    let url = "https://notes.example.com/mcp";
    for (tool, args) in [
        ("mcp_add", json!({"name": "notes", "url": url, "org": true})),
        (
            "config_set",
            json!({"key": "repo.default", "value": "acme/x", "org": true}),
        ),
        ("repo_add", json!({"repo": "acme/x", "path": "/tmp"})),
    ] {
        let refused = call(&agent, tool, args).await;
        assert_eq!(refused.is_error, Some(true), "{tool}: {}", text(&refused));
        assert_eq!(
            refused.structured_content.unwrap()["code"],
            "unauthorized",
            "{tool}"
        );
    }
    let listed = s.slack_says("slack:UADMIN", "slack:C9", "mcp list").await;
    assert!(!listed.reply.text.contains(url), "{}", listed.reply.text);
    // The admin, in person, may.
    let own = s
        .slack_says(
            "slack:UADMIN",
            "slack:C9",
            &format!("mcp add notes {url} --org"),
        )
        .await;
    assert_eq!(own.reply.kind, ReplyKind::Ok, "{}", own.reply.text);
    assert!(s.services.runs.stop_here(&parent));
}

/// An agent's token: `agent:<name>` for its run's principal, grants intersected, only while
/// the run is live; its `ask` is the child of its run.
#[tokio::test]
async fn an_agent_token_reads_only_what_its_principal_may_and_dies_with_its_run() {
    let s = start(Some(token_map()), "").await;
    let public = s.seed("slack:C1", "slack:UBOB", V::Public).await;
    let bobs_private = s.seed("slack:G2", "slack:UBOB", V::Private).await;
    // Alice asks the holder agent in a private channel; it keeps its run live.
    let handled = s
        .slack_says("slack:UALICE", "slack:G1", "@holder look around")
        .await;
    assert_eq!(handled.reply.kind, ReplyKind::Ok, "{}", handled.reply.text);
    let parent = handled.run.unwrap().id().clone();
    let (token, url) = s.holder_env(&parent).await;
    assert_eq!(url, s.url, "SWITCHBOARD_MCP_URL is this server's /mcp");

    let agent = s.client(&token).await;
    let tools = names(&agent.list_all_tools().await.unwrap());
    assert!(
        tools.contains(&"runs_list".to_owned()) && tools.contains(&"ask".to_owned()),
        "{tools:?}"
    );
    assert!(
        !tools.contains(&"runs_stop".to_owned()),
        "Alice holds no runs:write: {tools:?}"
    );
    let listed = listed_ids(&call(&agent, "runs_list", json!({"status": "all"})).await);
    assert!(listed.contains(&public.id.to_string()));
    assert!(listed.contains(&parent.to_string()), "Alice's own run");
    assert!(!listed.contains(&bobs_private.id.to_string()), "{listed:?}");
    let denied = call(
        &agent,
        "runs_get",
        json!({"id": bobs_private.id.to_string()}),
    )
    .await;
    assert_eq!(denied.is_error, Some(true));
    assert_eq!(denied.structured_content.unwrap()["code"], "not_found");

    // ask: a child run, in the parent's channel with its stamp, for Alice. The directory now
    // calls the channel public; the child keeps the parent's stamp all the same.
    s.directory.make_public("slack:G1");
    let child = call(
        &agent,
        "ask",
        json!({"request": "sub-question", "agent": "echo", "wait": true}),
    )
    .await;
    assert_eq!(child.is_error, Some(false), "{}", text(&child));
    let child = s
        .run(
            child.structured_content.unwrap()["run_id"]
                .as_str()
                .unwrap(),
        )
        .await;
    assert_eq!(child.parent_run.as_ref(), Some(&parent));
    assert_eq!(child.channel_id.as_str(), "slack:G1");
    assert_eq!(child.channel_visibility, V::Private);
    assert_eq!(
        child.user_id.as_str(),
        "slack:UALICE",
        "the principal is still Alice"
    );
    assert_eq!(child.surface.as_str(), "mcp");
    // An agent's own ask gets no link at all: a child's asks are its person's to answer.
    let unlinked = call(
        &agent,
        "ask",
        json!({"request": "another", "agent": "echo"}),
    )
    .await;
    assert_eq!(unlinked.is_error, Some(false), "{}", text(&unlinked));
    assert!(
        unlinked
            .structured_content
            .as_ref()
            .unwrap()
            .get("link")
            .is_none()
            && !text(&unlinked).contains("token="),
        "{}",
        text(&unlinked)
    );
    // Alice's agent reads its child run, which names its parent.
    let got = call(&agent, "runs_get", json!({"id": child.id.to_string()})).await;
    assert_eq!(got.is_error, Some(false), "{}", text(&got));
    assert_eq!(
        got.structured_content.as_ref().unwrap()["parent_run"],
        json!(parent.as_str())
    );
    assert!(
        text(&got).contains(&format!("parent   {parent}")),
        "{}",
        text(&got)
    );

    // The run ends: the same token is refused before any MCP message is read.
    assert!(s.services.runs.stop_here(&parent));
    for _ in 0..500 {
        if !s.run(parent.as_str()).await.status.is_live() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let bearer = format!("Bearer {token}");
    let (status, body) = s
        .post(&[("authorization", bearer.as_str())], &initialize_body())
        .await;
    assert_eq!((status, body.as_str()), (401, ""));
}

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string()
}

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

/// Cancellation stops the wait, never the run: a client that goes away mid-`ask` leaves its
/// run going.
#[tokio::test]
async fn a_client_that_goes_away_stops_waiting_not_the_run() {
    let s = start(Some(token_map()), "").await;
    let body = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ask","arguments":{"request":"@staller wait for me", "wait": true}}}).to_string();
    let req = s
        .http
        .post(&s.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .header("authorization", format!("Bearer {OPSBOT}"))
        .body(body)
        .send();
    // The call starts its run and waits; the client gives up and goes away.
    let pending = tokio::time::timeout(Duration::from_millis(1000), req).await;
    assert!(
        pending.is_err(),
        "the wait should still be going: {pending:?}"
    );
    let runs = s.runs(store::StatusFilter::Live).await;
    assert_eq!(runs.len(), 1, "the ask started its run");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let run = s.run(runs[0].id.as_str()).await;
    assert!(
        run.status.is_live(),
        "the run goes on after the client left: {:?}",
        run.status
    );
    assert!(s.services.runs.stop_here(&run.id));
}

/// A `notifications/cancelled` for a waiting `ask` (a POST of its own, to a stateless server)
/// stops that wait, only when it comes from the same caller; the run goes on.
#[tokio::test]
async fn a_cancellation_from_the_same_caller_stops_the_wait_not_the_run() {
    let s = start(Some(token_map()), "").await;
    let body = json!({"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"ask","arguments":{"request":"@staller hold on", "wait": true}}}).to_string();
    let url = s.url.clone();
    let waiting = tokio::spawn(async move {
        let r = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .header("authorization", format!("Bearer {OPSBOT}"))
            .body(body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    });
    let run = s.first_live_run().await;
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":21,"reason":"user"}}"#;
    let pv = ("mcp-protocol-version", "2025-06-18");
    // Another caller naming the same request id cancels nothing.
    let reader = format!("Bearer {READER}");
    let (status, _) = s
        .post(&[("authorization", reader.as_str()), pv], cancel)
        .await;
    assert_eq!(status, 202);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "another caller's cancellation stopped the wait"
    );
    // The caller itself: the wait ends at once with the run id; the run is still live.
    let ops = format!("Bearer {OPSBOT}");
    let (status, _) = s.post(&[("authorization", ops.as_str()), pv], cancel).await;
    assert_eq!(status, 202);
    let (status, text) = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the cancelled wait answers")
        .unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("still running") && text.contains(run.id.as_str()),
        "{text}"
    );
    assert!(
        s.run(run.id.as_str()).await.status.is_live(),
        "the run goes on"
    );
    assert!(s.services.runs.stop_here(&run.id));
}

/// While `ask` waits, a client that asked for progress gets progress notifications, then
/// the answer, on the same response stream.
#[tokio::test]
async fn ask_sends_progress_while_it_waits() {
    let s = start(Some(token_map()), "").await;
    let body = json!({"jsonrpc":"2.0","id":11,"method":"tools/call","params":{
        "name":"ask","arguments":{"request":"@slow take your time", "wait": true},
        "_meta": {"progressToken": "p-1"}}})
    .to_string();
    let bearer = format!("Bearer {OPSBOT}");
    let (status, text) = s
        .post(
            &[
                ("authorization", bearer.as_str()),
                ("mcp-protocol-version", "2025-06-18"),
            ],
            &body,
        )
        .await;
    assert_eq!(status, 200, "{text}");
    let progress = text
        .find("notifications/progress")
        .expect("a progress notification");
    let result = text.find("\"result\"").expect("the result");
    assert!(
        progress < result,
        "progress comes before the answer: {text}"
    );
    assert!(text.contains("\"progressToken\":\"p-1\""), "{text}");
    assert!(text.contains("take your time"), "{text}");
}
