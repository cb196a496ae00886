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
        h.summary.contains("auth.test failed (api:invalid_auth)"),
        "{}",
        h.summary
    );
    assert!(!h.summary.contains("xoxb-test"));
}
