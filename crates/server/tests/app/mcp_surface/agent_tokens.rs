//! Agent tokens: bounded by their principal, alive with their run, writing nothing that governs.

use super::*;

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
    // An agent never starts one whose traffic nothing decides (the holder has the host's
    // network), though Alice herself may: an agent cannot step out of the broker's network.
    let stepped_out = call(
        &agent,
        "ask",
        json!({"request": "curl anything", "agent": "holder"}),
    )
    .await;
    assert_eq!(stepped_out.is_error, Some(true), "{}", text(&stepped_out));
    assert!(
        text(&stepped_out).contains("which the broker does not decide"),
        "{}",
        text(&stepped_out)
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
    // Its process has the stop grace to end in; the run is finished once it has.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while s.run(parent.as_str()).await.status.is_live() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stopped run never ended"
        );
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

/// A live run's agent token decides its next call under the policy in force: a reload that
/// takes the principal's grant away reaches the agent at once, its run still live.
#[tokio::test]
async fn an_agent_tokens_next_call_follows_a_reload_that_revokes_its_principal() {
    let s = start(Some(token_map()), "").await;
    let public = s.seed("slack:C1", "slack:UBOB", V::Public).await;
    let handled = s
        .slack_says("slack:UALICE", "slack:G1", "@holder look around")
        .await;
    let parent = handled.run.unwrap().id().clone();
    let (token, _) = s.holder_env(&parent).await;
    let agent = s.client(&token).await;
    let get = json!({"id": public.id.to_string()});
    let before = call(&agent, "runs_get", get.clone()).await;
    assert_eq!(before.is_error, Some(false), "{}", text(&before));
    // The reload: the same agents, and Alice's entry gone.
    let table = authz_core::GrantsTable::empty(s.services.table().agents().clone());
    s.services.policy.replace(commands::PolicyInForce {
        table: std::sync::Arc::new(table),
        org_rules: Vec::new(),
        hash: "sha256:revoked".to_owned(),
    });
    let after = call(&agent, "runs_get", get).await;
    assert_eq!(after.is_error, Some(true), "{}", text(&after));
    assert_eq!(after.structured_content.unwrap()["code"], "not_found");
    assert!(s.services.runs.stop_here(&parent), "the run was still live");
}
