//! Starting the surface: missing scopes named; missing secrets or a bad token keep it off.

use super::*;

#[tokio::test]
async fn missing_scopes_are_named_and_missing_secrets_keep_the_surface_off() {
    let fake = FakeSlack::new();
    fake.set_scopes("chat:write,channels:read");
    let h = start_with(fake, &SLACK_ENV, "").await;
    assert!(
        h.summary
            .contains("MISSING SCOPES: groups:read, mpim:read, im:history, app_mentions:read"),
        "{}",
        h.summary
    );
    let off = start_with(FakeSlack::new(), &[("SLACK_BOT_TOKEN", "xoxb-test")], "").await;
    assert!(
        off.summary
            .contains("[slack] is set but needs SLACK_SIGNING_SECRET"),
        "{}",
        off.summary
    );
    // Off, its route answers 503 saying what it needs, and nothing reaches Slack.
    let (status, said) = off
        .post(callback("Ev", mention("U1", "C1", "1.1", "hi")))
        .await;
    assert_eq!(status, 503);
    assert!(said.contains("needs SLACK_SIGNING_SECRET"), "{said}");
    assert!(off.fake.calls_of("auth.test").is_empty());
    // A bad bot token: auth.test refuses, the surface is off and says why.
    let bad = FakeSlack::new();
    bad.fail("auth.test", "invalid_auth");
    let h = start_with(bad, &SLACK_ENV, "").await;
    assert!(
        h.summary.contains(
            "Slack refused the bot token (auth.test: api:invalid_auth): check SLACK_BOT_TOKEN"
        ),
        "{}",
        h.summary
    );
    assert!(!h.summary.contains("xoxb-test"));
}

/// Slack unreachable at start: tried again in the background, said as such (never blamed on
/// the token); the server is ready meanwhile, its `/readyz` saying what Slack is doing and its
/// events route answering 503 with that line; once Slack answers, the surface is on and
/// serves events.
#[tokio::test]
async fn slack_unreachable_at_start_is_retried_and_the_server_stays_ready() {
    // A port nothing listens on yet.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let fake = FakeSlack::new();
    let h = start_at(&format!("http://{addr}/api/"), fake.clone(), &SLACK_ENV, "").await;
    assert!(
        h.summary
            .contains("Slack unreachable, retrying in 1 s: transport"),
        "{}",
        h.summary
    );
    assert!(!h.summary.contains("SLACK_BOT_TOKEN"), "{}", h.summary);
    let ready = h
        .client
        .get(format!("{}/readyz", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    let body = ready.text().await.unwrap();
    assert_eq!(body.lines().next(), Some("ready"), "{body}");
    assert!(
        body.contains("slack: retrying: Slack unreachable"),
        "{body}"
    );
    let (status, said) = h
        .post(callback("EvEarly", mention("U1", "C1", "40.1", "hi")))
        .await;
    assert_eq!(status, 503);
    assert!(said.starts_with("slack: retrying:"), "{said}");
    // Slack comes back: the next try (within the doubling waits) turns the surface on.
    fake.serve_at(addr).await.unwrap();
    slack_turns_on(&h).await;
    assert_eq!(
        h.event("EvLate", mention("U1", "C1", "40.2", "hi")).await,
        200
    );
    h.finished_runs(1).await;
}

/// Slack rate-limiting `auth.test` at start is Slack being busy, not a refused token: tried
/// again, and on once Slack answers.
#[tokio::test]
async fn a_rate_limited_start_is_retried_never_blamed_on_the_token() {
    let fake = FakeSlack::new();
    fake.rate_limit("auth.test", 1);
    let h = start_with(fake, &SLACK_ENV, "").await;
    assert!(
        h.summary
            .contains("Slack unreachable, retrying in 1 s: http:429"),
        "{}",
        h.summary
    );
    slack_turns_on(&h).await;
}

/// Waits (30 s at most) until `/readyz` says the Slack surface is on.
async fn slack_turns_on(h: &Harness) {
    let mut body = String::new();
    for _ in 0..600 {
        body = h
            .client
            .get(format!("{}/readyz", h.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if body.contains("slack: on") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the Slack surface never turned on: {body}");
}
