//! The conversation's bound: a run whose conversation outgrows it ends there.

use super::*;

/// A model that sends 3 MiB of arguments with every tool call (each turn under the 8 MiB a
/// turn may carry) would have the conversation, resent whole each turn, hold ~100 MiB by
/// its 32nd turn. The run ends when the request would pass 16 MiB, saying so; no request
/// the model received was larger, and it was asked far fewer than 32 times.
#[tokio::test]
async fn a_conversation_that_outgrows_its_bound_ends_the_run() {
    let fx = Fixture::new();
    let padded = || args(json!({"path": fx.path("src/lib.rs"), "padding": "p".repeat(3 << 20)}));
    let (base, script) = scripted_model(
        (0..32)
            .map(|_| Reply::Call("read_file", padded()))
            .collect(),
    )
    .await;
    let (outcome, _) = run_model(
        &base,
        BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap(),
    )
    .await;
    assert_eq!(
        outcome.error(),
        Some(
            "the conversation passed 16 MiB (its tool calls and results together); the run was stopped there"
        )
    );
    let seen = script.requests_json();
    assert!((2..10).contains(&seen.len()), "{} requests", seen.len());
    for request in seen.iter() {
        assert!(request.to_string().len() <= 16 << 20);
    }
}
