//! People of another workspace (Slack Connect): refused, or allowed and held to their entry.

use super::*;

fn from_team(mut event: Value, team: &str) -> Value {
    event["user_team"] = json!(team);
    event["team"] = json!("T1");
    event
}

/// A person of another workspace (Slack Connect: the event's `user_team` is not the bot's
/// `T1`) is refused by default, over HTTP and over the socket alike: a short reply to them
/// alone, no run, no thread. With `allow_external_users`, they hold only their own entry:
/// not the Slack baseline, not `slack:*`'s `runs:read`.
#[tokio::test]
async fn people_of_another_workspace_are_refused_unless_allowed_and_then_hold_only_their_entry() {
    let fake = FakeSlack::new();
    fake.serve_socket().await.unwrap();
    let h = start_with(fake.clone(), &SLACK_ENV, "").await;
    assert!(
        h.summary.contains("other workspaces' users refused"),
        "{}",
        h.summary
    );
    let outsider = from_team(mention("UX1", "C1", "30.1", "runs list"), "T9");
    assert_eq!(h.event("EvOut1", outsider.clone()).await, 200);
    let refused = h.fake.wait_for("chat.postEphemeral", 1, 10).await;
    assert_eq!(refused[0].param("user"), Some("UX1"));
    assert!(
        refused[0]
            .param("text")
            .unwrap()
            .contains("serves its own workspace"),
        "{refused:?}"
    );
    // The workspace's own member, in the same shared channel, is served.
    let member = from_team(mention("U1", "C1", "30.2", "hello there"), "T1");
    assert_eq!(h.event("EvIn1", member).await, 200);
    let runs = h.finished_runs(1).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].request, "hello there");
    assert!(
        h.thread("C1", "30.1").is_empty(),
        "nothing was posted into the outsider's thread"
    );

    // Over Socket Mode, the raw envelope keeps `user_team`.
    let socket = FakeSlack::new();
    socket.serve_socket().await.unwrap();
    let env = [
        ("SLACK_BOT_TOKEN", "xoxb-test"),
        ("SLACK_SIGNING_SECRET", SECRET),
        ("SLACK_APP_TOKEN", "xapp-test"),
    ];
    let s = start_with(socket.clone(), &env, "mode = \"socket\"").await;
    socket.push(
        "env-out",
        &callback(
            "EvSockOut",
            from_team(mention("UX1", "C1", "31.1", "do work"), "T9"),
        ),
    );
    let refused = socket.wait_for("chat.postEphemeral", 1, 10).await;
    assert_eq!(refused[0].param("user"), Some("UX1"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        s.runs().await.is_empty(),
        "an outsider started a run over the socket"
    );

    // Allowed: an outsider with no entry holds nothing (not slack:*'s runs:read); one with
    // an entry holds exactly it.
    let allowed = start_with(
        FakeSlack::new(),
        &SLACK_ENV,
        "allow_external_users = true\n\n[grants.\"slack:UX2\"]\nactions = [\"runs:read\"]\n",
    )
    .await;
    assert!(
        allowed
            .summary
            .contains("other workspaces' users hold only their own grants entry"),
        "{}",
        allowed.summary
    );
    let ask = |id: &'static str, user: &'static str, ts: &'static str, text: &'static str| {
        let allowed = &allowed;
        async move {
            let event = from_team(mention(user, "C1", ts, text), "T9");
            assert_eq!(allowed.event(id, event).await, 200);
            for _ in 0..500 {
                if !allowed.thread("C1", ts).is_empty() {
                    return allowed.private_to(user, "C1", ts).concat();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("no reply to {user}");
        }
    };
    let got = ask("EvX1", "UX1", "32.1", "runs list").await;
    assert!(
        got.starts_with("🚫"),
        "slack:*'s runs:read is not an outsider's: {got}"
    );
    let got = ask("EvX2", "UX1", "32.2", "help").await;
    assert!(
        got.starts_with("🚫"),
        "help is the baseline's, not an outsider's: {got}"
    );
    let got = ask("EvX3", "UX2", "32.3", "runs list").await;
    assert!(!got.starts_with("🚫"), "{got}");
    let got = ask("EvX4", "UX2", "32.4", "help").await;
    assert!(got.starts_with("🚫"), "{got}");
}
