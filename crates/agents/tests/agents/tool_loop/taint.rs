//! A taint rise that cannot be recorded withholds its result and closes the gate.

use super::*;

/// A taint rise is never lost: when its event cannot be stored, the result that raised it is
/// withheld and every later call is refused; past the event budget a taint is still sent.
#[tokio::test]
async fn a_taint_that_cannot_be_recorded_withholds_the_result_and_closes_the_gate() {
    let fx = Fixture::new();
    let (base, script) = scripted_model(vec![
        Reply::Call(
            "read_file",
            args(json!({"path": fx.path("vault/token.txt")})),
        ),
        Reply::Call("read_file", args(json!({"path": fx.path("src/lib.rs")}))),
        Reply::Call("restrict_self", args(json!({"promise": "net.*=deny"}))),
        Reply::Text("done"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap();
    run_model_storing(&base, gate, |kind| kind != "taint").await;
    let results = script.tool_results();
    assert!(
        results[0].starts_with("refused: the session's taint could not be recorded")
            && !results[0].contains("s3cr3t"),
        "{results:?}"
    );
    for later in &results[1..] {
        assert!(
            later.starts_with("refused: the session's taint could not be recorded"),
            "{later}"
        );
    }
    // Past the event budget, the sink still keeps a taint (it is never dropped by the cap).
    let caps = OutputCaps {
        event_bytes: 64,
        total_bytes: 10,
        answer_bytes: 64,
    };
    let (sink, mut rx) = EventSink::channel(caps, Arc::new(Sanitizer::new(vec![])));
    assert!(
        !sink.event("text", "fills the budget").await,
        "dropped past the cap"
    );
    let kept = tokio::spawn(async move { sink.event_kept("taint", "{}").await });
    let mut saw_taint = false;
    while let Some(item) = rx.recv().await {
        if let SinkItem::Event { kind, stored, .. } = item
            && kind == "taint"
        {
            saw_taint = true;
            stored.answer(true);
        }
        if kept.is_finished() {
            break;
        }
    }
    assert!(saw_taint && kept.await.unwrap());
}
