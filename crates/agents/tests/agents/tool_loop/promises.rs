//! Promises (`restrict_self`): they bind the run, survive a restart, and widen only by the table.

use super::*;

#[tokio::test]
async fn a_promise_binds_the_run_and_survives_a_restart() {
    let fx = Fixture::new();
    let (base, script) = scripted_model(vec![
        Reply::Call("restrict_self", args(json!({"promise": "fs.write=deny"}))),
        Reply::Call(
            "write_file",
            args(json!({"path": fx.path("a.md"), "content": "x"})),
        ),
        // More than it holds now: refused before anything is written.
        Reply::Call("restrict_self", args(json!({"promise": "fs.write=ask"}))),
        Reply::Text("ok"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap();
    let (outcome, items) = run_model(&base, gate).await;
    assert_eq!(outcome.answer(), Some("ok"));
    let results = script.tool_results();
    assert!(
        results[0].starts_with("promised: fs.write=deny"),
        "{}",
        results[0]
    );
    assert_eq!(
        results[1],
        "refused: fs.write is beyond what this run promised (restrict_self)"
    );
    assert!(
        results[2].starts_with("refused: fs.write=ask asks for more than you hold"),
        "{}",
        results[2]
    );
    assert!(!fx.ws.path().join("a.md").exists());
    let recorded = events(&items, "restriction");
    assert_eq!(
        recorded,
        [r#"{"kind":"restricted","promise":"fs.write=deny"}"#],
        "only the accepted promise is written"
    );

    // A restart: the gate is built again from the run's events, and the promise still binds.
    let folded: Vec<RatchetEvent> = recorded
        .iter()
        .map(|b| serde_json::from_str(b).unwrap())
        .collect();
    let ratchet = Ratchet::fold(&folded).unwrap();
    let (base, script) = scripted_model(vec![
        Reply::Call(
            "write_file",
            args(json!({"path": fx.path("a.md"), "content": "x"})),
        ),
        Reply::Text("ok"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(ratchet, Arc::new(NobodyToAsk))).unwrap();
    run_model(&base, gate).await;
    assert_eq!(
        script.tool_results(),
        ["refused: fs.write is beyond what this run promised (restrict_self)"]
    );
}

/// `policy.widen` is an ordinary action of the table: with nobody to ask it is refused and the
/// promise stands; with a person's yes the broker writes the event that replaces it.
#[tokio::test]
async fn widening_a_promise_needs_the_tables_answer() {
    let turns = |fx: &Fixture| {
        vec![
            Reply::Call("restrict_self", args(json!({"promise": "fs.write=deny"}))),
            Reply::Call(
                "widen_self",
                args(json!({"promise": "fs.write=ask", "now": "fs.write=allow"})),
            ),
            Reply::Call(
                "widen_self",
                args(json!({"promise": "fs.write=deny", "now": "fs.write=allow"})),
            ),
            Reply::Call(
                "write_file",
                args(json!({"path": fx.path("a.md"), "content": "x"})),
            ),
            Reply::Text("ok"),
        ]
    };
    let fx = Fixture::new();
    let (base, script) = scripted_model(turns(&fx)).await;
    let (_, items) = run_model(
        &base,
        BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap(),
    )
    .await;
    let results = script.tool_results();
    assert!(
        results[1].starts_with("refused: there is no promise \"fs.write=ask\""),
        "{}",
        results[1]
    );
    assert_eq!(
        results[2],
        "refused: policy.widen needs a person's approval: nobody to ask"
    );
    assert_eq!(
        results[3],
        "refused: fs.write is beyond what this run promised (restrict_self)"
    );
    assert_eq!(
        events(&items, "restriction").len(),
        1,
        "a refused widening writes nothing"
    );

    let fx = Fixture::new();
    let (base, script) = scripted_model(turns(&fx)).await;
    let (_, items) = run_model(
        &base,
        BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(Yes))).unwrap(),
    )
    .await;
    let results = script.tool_results();
    assert_eq!(results[2], "widened: fs.write=deny is now fs.write=allow");
    assert!(results[3].starts_with("wrote 1 bytes"), "{}", results[3]);
    let restriction = events(&items, "restriction");
    assert_eq!(
        restriction[1],
        r#"{"kind":"widened","promise":"fs.write=deny","now":"fs.write=allow"}"#
    );
    // The fold of the log gives the same ceiling the run ended with.
    let folded: Vec<RatchetEvent> = restriction
        .iter()
        .map(|b| serde_json::from_str(b).unwrap())
        .collect();
    assert_eq!(
        Ratchet::fold(&folded).unwrap().ceiling("fs.write"),
        Some(broker::RuleDecision::Allow)
    );
}
