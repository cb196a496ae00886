//! Every call passes the broker (an MCP server's too), bounded by the principal the agent acts for.

use super::*;

#[tokio::test]
async fn every_call_passes_the_broker_and_each_refusal_is_what_the_model_reads() {
    let fx = Fixture::new();
    let port = page().await;
    let outside = tempfile::tempdir().unwrap();
    let (base, script) = scripted_model(vec![
        // 1. A file the project denies: the refusal sentence, naming the file.
        Reply::Call("read_file", args(json!({"path": fx.path(".env")}))),
        // 2. A granted read.
        Reply::Call("read_file", args(json!({"path": fx.path("src/lib.rs")}))),
        // 3. A write outside the workspace: no grant covers it.
        Reply::Call(
            "write_file",
            args(json!({"path": outside.path().join("x.txt"), "content": "x"})),
        ),
        // 4. A write inside it.
        Reply::Call(
            "write_file",
            args(json!({"path": fx.path("notes.md"), "content": "done"})),
        ),
        // 5. A fetch from a host no grant names.
        Reply::Call("http_fetch", args(json!({"url": "http://localhost:9/"}))),
        // 6. A fetch the grant allows.
        Reply::Call(
            "http_fetch",
            args(json!({"url": format!("http://127.0.0.1:{port}/changelog")})),
        ),
        // 7. A secret-labelled read raises the session's taint ...
        Reply::Call(
            "read_file",
            args(json!({"path": fx.path("vault/token.txt")})),
        ),
        // 8. ... and the fetch grant stops at `private`.
        Reply::Call(
            "http_fetch",
            args(json!({"url": format!("http://127.0.0.1:{port}/changelog")})),
        ),
        // 9. A tool that does not exist, and arguments that do not parse.
        Reply::Call("delete_everything", "{}".into()),
        Reply::Call("read_file", args(json!({"path": "relative/path"}))),
        Reply::Text("All done."),
    ])
    .await;
    let person: Arc<dyn Approver> = Arc::new(NobodyToAsk);
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), person)).unwrap();
    let (outcome, items) = run_model(&base, gate).await;
    assert_eq!(outcome.answer(), Some("All done."), "{:?}", outcome.error());
    let results = script.tool_results();
    assert_eq!(results.len(), 10, "{results:#?}");
    assert_eq!(results[0], format!("refused: .env {REFUSED_READ}"));
    assert!(!results.iter().any(|r| r.contains("hunter2")));
    assert_eq!(results[1], "pub fn answer() -> u8 { 42 }\n");
    assert_eq!(results[2], "refused: fs.write: no-grant");
    assert!(!outside.path().join("x.txt").exists());
    assert!(results[3].starts_with("wrote 4 bytes"), "{}", results[3]);
    assert_eq!(
        std::fs::read_to_string(fx.ws.path().join("notes.md")).unwrap(),
        "done"
    );
    assert_eq!(results[4], "refused: net.fetch: no-grant");
    assert!(
        results[5].starts_with("HTTP 200 OK\nv2: faster"),
        "{}",
        results[5]
    );
    assert_eq!(results[6], "s3cr3t\n");
    assert_eq!(results[7], "refused: net.fetch: taint-too-high");
    assert_eq!(results[8], "refused: delete_everything: no-grant");
    assert_eq!(
        results[9],
        "refused: read_file: invalid-arguments (path must be an absolute path that stays under /)"
    );
    assert_eq!(
        events(&items, "taint"),
        [r#"{"taint":"secret","untrusted":false}"#]
    );
    assert_eq!(events(&items, "tool").len(), 10);
    // Each result is a run event: a private one with its text, a secret one without.
    let recorded = events(&items, "tool_result");
    assert_eq!(recorded.len(), 4, "{recorded:#?}");
    assert_eq!(
        recorded[0],
        "read_file returned 29 bytes (private):\npub fn answer() -> u8 { 42 }\n"
    );
    assert_eq!(
        recorded[3],
        "read_file returned 7 bytes (secret); the text is not recorded above private"
    );
    assert!(!recorded.iter().any(|r| r.contains("s3cr3t")));
}

/// The principal bounds the agent down to each tool call: an agent acting for a Slack user with
/// no grant on a restricted repo cannot read a file in its workspace, though a grant covers it.
#[tokio::test]
async fn the_principal_bounds_the_agent_down_to_each_tool_call() {
    let fx = Fixture::new();
    let doc: toml::Table = toml::from_str("[restrict]\nrepos = [\"acme/payments\"]\n[grants.\"slack:U0ALLOWED\"]\nrepos = [\"acme/payments\"]\n").unwrap();
    let table =
        GrantsTable::from_config(&doc, [AgentName::parse("local").unwrap()].into()).unwrap();
    let repo = table.repo(RepoSlug::parse("acme/payments").unwrap());
    for (user, want_refused) in [("slack:U0NOGRANT", true), ("slack:U0ALLOWED", false)] {
        let principal = resolve_actor(ActorId::parse(user).unwrap(), &table);
        let agent = resolve_agent(&AgentName::parse("local").unwrap(), Some(principal), &table);
        let (base, script) = scripted_model(vec![
            Reply::Call("read_file", args(json!({"path": fx.path("src/lib.rs")}))),
            Reply::Text("ok"),
        ])
        .await;
        let mut settings = fx.settings(Ratchet::default(), Arc::new(NobodyToAsk));
        settings.agent = agent;
        settings.repo = Some(repo.clone());
        run_model(&base, BrokerGate::new(settings).unwrap()).await;
        let result = &script.tool_results()[0];
        if want_refused {
            assert_eq!(
                result, "refused: the person this run acts for may not use this repository",
                "{user}"
            );
        } else {
            assert_eq!(result, "pub fn answer() -> u8 { 42 }\n", "{user}");
        }
    }
}

/// An MCP server's tools pass the broker like any other: the model is offered them as the
/// `mcp` tool, a granted call reaches the real server and its answer comes back, while a
/// tool no grant covers, a server nobody configured and a server that cannot be reached are
/// refused before anything is sent.
#[tokio::test]
async fn mcp_tools_are_called_through_the_broker() {
    let fx = Fixture::new();
    let notes = agents::testing::NotesServer::serve().await.unwrap();
    let url = notes.url.clone();
    let servers = vec![
        McpServer {
            name: "notes".into(),
            url,
        },
        McpServer {
            name: "gone".into(),
            // A token in the query: it must reach neither the model nor a log line.
            url: "http://127.0.0.1:9/mcp?token=PLANTED-MCP-TOKEN".into(),
        },
    ];
    let mcp = McpServers::connect(servers, McpTimeouts::default()).await;
    let mcp_problems = mcp.problems();
    assert_eq!(mcp_problems.len(), 1, "{mcp_problems:?}");
    assert_eq!(mcp_problems[0].0, "gone");
    let mut settings = fx.settings(Ratchet::default(), Arc::new(NobodyToAsk));
    settings.mcp = mcp;
    let mut grants: Vec<Grant> = grants(fx.ws.path());
    grants.push(grant("notes-shout", "mcp.notes.shout"));
    grants.push(grant("notes-fail", "mcp.notes.fail"));
    grants.push(grant("gone-all", "mcp.gone.*"));
    grants.push(grant("nowhere-all", "mcp.nowhere.*"));
    settings.grants = ToolGrants::new(grants).unwrap();
    // Unnamed actions ask by default; this run's rules allow the notes server's tools.
    settings.table = RuleTable::new(
        vec![],
        vec![],
        [
            "mcp.notes.*=allow",
            "mcp.gone.*=allow",
            "mcp.nowhere.*=allow",
        ]
        .map(|r| parse_run_rule(r).unwrap())
        .to_vec(),
    );
    let gate = BrokerGate::new(settings).unwrap();
    let call = |server: &str, tool: &str, arguments: Value| {
        Reply::Call(
            "mcp",
            args(json!({"server": server, "tool": tool, "arguments": arguments})),
        )
    };
    let (base, script) = scripted_model(vec![
        call("notes", "shout", json!({"text": "hello"})),
        call("notes", "fail", json!({})),
        call("notes", "erase_all", json!({})),
        call("nowhere", "shout", json!({})),
        call("gone", "anything", json!({})),
        Reply::Call(
            "mcp",
            args(json!({"server": "notes", "tool": "shout", "arguments": [1]})),
        ),
        Reply::Text("done"),
    ])
    .await;
    let (outcome, _items) = run_model(&base, gate).await;
    assert_eq!(outcome.answer(), Some("done"), "{:?}", outcome.error());

    // The model was offered the `mcp` tool with what each server has.
    let first = script.requests_json()[0].clone();
    let mcp_tool = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp")
        .cloned()
        .unwrap();
    let description = mcp_tool["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("server notes, tool shout: Upper-cases the text."),
        "{description}"
    );
    assert!(
        description.contains("server gone: unreachable"),
        "{description}"
    );
    assert_eq!(
        mcp_tool["function"]["parameters"]["properties"]["server"]["enum"],
        json!(["notes", "gone"])
    );

    let results = script.tool_results();
    assert_eq!(results[0], "HELLO");
    assert_eq!(
        results[1],
        "the tool reported an error: the notes are locked"
    );
    assert!(
        results[2].starts_with("refused: mcp.notes.erase_all: no-grant"),
        "{}",
        results[2]
    );
    assert!(
        results[3].starts_with("refused: no MCP server named nowhere is configured"),
        "{}",
        results[3]
    );
    assert!(
        results[4].starts_with("refused: the MCP server gone could not be reached"),
        "{}",
        results[4]
    );
    assert!(
        results[5].starts_with("refused: mcp: invalid-arguments"),
        "{}",
        results[5]
    );
    assert!(!description.contains("PLANTED") && !results.iter().any(|r| r.contains("PLANTED")));
    assert!(
        !mcp_problems.iter().any(|(_, why)| why.contains("PLANTED")),
        "{mcp_problems:?}"
    );
    // Only the two granted calls reached the server.
    assert_eq!(notes.calls(), 2);
}
