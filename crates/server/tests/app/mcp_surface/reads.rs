//! Run reads: exactly what the predicate allows; a denied read is identical to a missing one.

use super::*;

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
    for tool in ["runs_get", "runs_events", "runs_friction", "runs_diff"] {
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
    assert_eq!(lines.len(), 4, "{lines:?}");
    for line in &lines {
        assert_eq!(line.action, "runs:read", "{line}");
        assert_eq!(line.surface, "mcp", "{line}");
        assert!(line.actor.starts_with("mcp:"), "{line}");
    }
}
