//! Socket Mode: the same events and clicks through the same checks, off without its token.

use super::*;

#[tokio::test]
async fn socket_mode_takes_the_same_events_through_the_same_checks() {
    let fake = FakeSlack::new();
    fake.serve_socket().await.unwrap();
    let env = [
        ("SLACK_BOT_TOKEN", "xoxb-test"),
        ("SLACK_SIGNING_SECRET", SECRET),
        ("SLACK_APP_TOKEN", "xapp-test"),
    ];
    let h = start_with(fake.clone(), &env, "mode = \"socket\"").await;
    assert!(
        h.summary.contains("Socket Mode, as bot user UBOT"),
        "{}",
        h.summary
    );
    // No public route in Socket Mode: the path says events come over the socket.
    assert_eq!(
        h.event("EvHttp", mention("U1", "C1", "1.1", "hi")).await,
        503
    );
    let body = callback("EvSock1", mention("U1", "C1", "13.1", "over the socket"));
    fake.push("env-1", &body);
    let runs = h.finished_runs(1).await;
    assert_eq!(runs[0].request, "over the socket");
    assert_eq!(runs[0].surface, Surface::Slack);
    let updates = fake.wait_for("chat.update", 1, 10).await;
    assert!(
        updates[0]
            .param("text")
            .unwrap()
            .contains("request: over the socket")
    );
    // A redelivery of the same event id starts nothing; a bot's message is ignored.
    fake.push("env-2", &body);
    let bot = callback(
        "EvSock2",
        json!({"type": "message", "channel_type": "im", "subtype": "bot_message", "bot_id": "B9", "channel": "D1", "ts": "13.2", "text": "hi"}),
    );
    fake.push("env-3", &bot);
    // Another bot's mention (an app_mention with a bot_id) is ignored over the socket as over
    // HTTP: its envelope is read raw, so bot_id is not lost.
    let bot_mention = json!({"type": "app_mention", "user": "U7", "bot_id": "B7", "channel": "C1",
        "ts": "13.3", "text": "<@UBOT> loop with me"});
    fake.push("env-5", &callback("EvSockBot", bot_mention));
    for _ in 0..200 {
        if fake.acks().len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(fake.acks(), ["env-1", "env-2", "env-3", "env-5"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.runs().await.len(), 1);
    // A button click comes over the socket too, read as a signed one is: here it finds
    // nothing waiting, and its message says so.
    fake.push_interactive(
        "env-4",
        &click(
            "U1",
            slack::approvals::APPROVE,
            "01JNOSUCHRUN/abc",
            "C1",
            "13.9",
            "13.1",
        ),
    );
    let updates = fake.wait_for("chat.update", 2, 10).await;
    let answered = updates.iter().find(|c| c.param("ts") == Some("13.9"));
    assert!(
        answered.is_some_and(|c| c.param("text").unwrap().contains("no longer waits")),
        "{updates:?}"
    );
    // Without SLACK_APP_TOKEN, socket mode stays off and says so.
    let off = start_with(FakeSlack::new(), &SLACK_ENV, "mode = \"socket\"").await;
    assert!(
        off.summary.contains("needs SLACK_APP_TOKEN"),
        "{}",
        off.summary
    );
}
