//! Replies: long answers split, rate limits retried, a command's reply to its caller alone.

use super::*;

#[tokio::test]
async fn long_answers_are_split_on_lines_and_url_verification_is_answered() {
    let h = start().await;
    let (status, body) = h
        .post(br#"{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#.to_vec())
        .await;
    assert_eq!(
        (status, body.as_str()),
        (200, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
    );
    let long: String = (0..700)
        .map(|i| format!("line{i:04}-"))
        .collect::<Vec<_>>()
        .join(" ");
    h.event("EvLong", mention("U1", "C1", "10.1", &long)).await;
    h.finished_runs(1).await;
    h.fake.wait_for("chat.update", 1, 10).await;
    let posts = h.fake.wait_for("chat.postMessage", 3, 10).await;
    let texts = h.thread("C1", "10.1");
    assert!(texts.len() >= 3, "{texts:?}");
    assert!(
        texts
            .iter()
            .all(|t| t.chars().count() <= slack::text::MESSAGE_LIMIT)
    );
    let answer: String = texts[1..].concat();
    assert!(answer.contains("line0000-") && answer.contains("line0699-"));
    assert!(posts.len() >= 3);
}

#[tokio::test]
async fn rate_limits_are_retried_and_a_reply_that_still_fails_is_friction() {
    let h = start().await;
    h.fake.rate_limit("chat.postMessage", 2);
    h.event("EvRl", mention("U1", "C1", "11.1", "hi")).await;
    let runs = h.finished_runs(1).await;
    h.fake.wait_for("chat.update", 1, 10).await;
    // Two 429s, then the working message landed.
    assert_eq!(h.fake.calls_of("chat.postMessage").len(), 3);
    assert!(h.store.friction(&runs[0].id).await.unwrap().is_empty());
    // Every reply fails: the run keeps its outcome and the failure is its friction.
    h.fake.fail("chat.postMessage", "channel_not_found");
    h.fake.fail("chat.update", "channel_not_found");
    h.event("EvFail", mention("U1", "C1", "11.2", "hi")).await;
    let runs = h.finished_runs(2).await;
    assert_eq!(runs[0].status, RunStatus::Completed);
    let mut friction = Vec::new();
    for _ in 0..1500 {
        friction = h.store.friction(&runs[0].id).await.unwrap();
        if !friction.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!friction.is_empty(), "the failed reply was never recorded");
    assert_eq!(friction[0].kind, "reply");
    assert!(
        friction[0].detail.contains("api:channel_not_found"),
        "{friction:?}"
    );
}

/// Every text the bot posted into `channel` where all its members read it (messages and
/// updates). Texts in other conversations, such as the caller's DM whose run may still be
/// posting its answer, are not counted.
fn public_texts(h: &Harness, channel: &str) -> Vec<String> {
    h.fake
        .calls()
        .into_iter()
        .filter(|c| matches!(c.method.as_str(), "chat.postMessage" | "chat.update"))
        .filter(|c| c.param("channel") == Some(channel))
        .map(|c| c.param("text").unwrap_or_default().to_owned())
        .collect()
}

/// A command's reply in a channel reaches only its caller: `runs get` of their DM run, `runs
/// list --status all` (which names it) and `memory list` (their own facts, one said in a DM)
/// go to them alone, split if long and never cut, with one line in the thread; in their own
/// DM the reply is the thread's. An agent run's answer stays in the thread.
#[tokio::test]
async fn a_commands_reply_in_a_channel_reaches_only_its_caller() {
    let h = start().await;
    h.event("EvDmRun", dm("U1", "D1", "20.1", "my secret plan"))
        .await;
    h.event(
        "EvDmNote",
        dm("U1", "D1", "20.2", "note for me: tea-lover-31"),
    )
    .await;
    let runs = h.finished_runs(2).await;
    let dm_run = runs
        .iter()
        .find(|r| r.request == "my secret plan")
        .unwrap()
        .id
        .clone();
    // Reflection writes the note after the run's reply; wait for it in the store.
    let u1 = authz_core::ScopeKey::User(authz_core::ActorId::parse("slack:U1").unwrap());
    let mut noted = false;
    for _ in 0..500 {
        let kept = h.store.memory_in_scopes(std::slice::from_ref(&u1), 10);
        if kept
            .await
            .unwrap()
            .iter()
            .any(|m| m.text.contains("tea-lover-31"))
        {
            noted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(noted, "reflection never kept the DM's note");
    let before = public_texts(&h, "C1").len();
    let asked = [
        (format!("runs get {dm_run}"), "my secret plan".to_owned()),
        ("runs list --status all".to_owned(), dm_run.to_string()),
        ("memory list".to_owned(), "tea-lover-31".to_owned()),
    ];
    for (i, (command, secret)) in asked.iter().enumerate() {
        let ts = format!("21.{i}");
        let private = h
            .command(&format!("EvPub{i}"), "U1", "C1", &ts, command)
            .await;
        assert!(private.contains(secret.as_str()), "{command}: {private}");
        assert_eq!(
            h.thread("C1", &ts),
            vec![slack::PRIVATE_REPLY_NOTE.to_owned()],
            "{command}"
        );
        let ephemeral = h.fake.calls_of("chat.postEphemeral");
        assert!(
            ephemeral
                .iter()
                .filter(|c| c.param("text").is_some_and(|t| t.contains(secret.as_str())))
                .all(|c| c.param("user") == Some("U1")),
            "{command}: only U1 is shown it"
        );
    }
    let public = &public_texts(&h, "C1")[before..];
    for (command, secret) in &asked {
        assert!(
            public.iter().all(|t| !t.contains(secret.as_str())),
            "{command} reached the channel: {public:?}"
        );
    }
    // In the caller's own DM, the same reply is the thread's.
    let in_dm = h
        .command("EvDmGet", "U1", "D1", "22.1", &format!("runs get {dm_run}"))
        .await;
    assert!(in_dm.contains("my secret plan"), "{in_dm}");
    // A reply too long for one message is split across several, none cut.
    let long = format!("runs get {}", "x".repeat(8_000));
    let private = h.command("EvLongCmd", "U1", "C1", "23.1", &long).await;
    let parts = h.private_to("U1", "C1", "23.1");
    assert!(
        parts
            .iter()
            .all(|p| p.chars().count() <= slack::text::MESSAGE_LIMIT),
        "{parts:?}"
    );
    assert!(!private.is_empty());
    // An agent run's answer stays in the thread it was asked in.
    h.event("EvRun", mention("U1", "C1", "24.1", "a public question"))
        .await;
    h.finished_runs(3).await;
    h.fake.wait_for("chat.update", 3, 10).await;
    assert!(
        h.thread("C1", "24.1")
            .iter()
            .any(|t| t.contains("request: a public question")),
        "{:?}",
        h.thread("C1", "24.1")
    );
}

/// A 🚫 in Slack mentions the admins it names who are Slack users (`<@U…>`) and names the
/// others as they are; everything else of a reply stays escaped text: a `<!channel>` a caller
/// typed into a command word is echoed as plain text, never a ping.
#[tokio::test]
async fn a_refusal_mentions_slack_admins_and_nothing_else_becomes_markup() {
    let admins = "\n[grants.\"slack:UADMIN\"]\nactions = \"all\"\nchannels = \"all\"\n[grants.\"access:ops@example.com\"]\nactions = \"all\"\n";
    let h = start_with(FakeSlack::new(), &SLACK_ENV, admins).await;
    let refused = h
        .command("EvDeny", "U1", "C1", "30.1", "config set agent echo --org")
        .await;
    assert_eq!(
        refused,
        "🚫 You don't have permission to use `config set`. Ask access:ops@example.com or <@UADMIN>.",
        "the Slack admin is mentioned, the other named as it is"
    );
    let usage = h
        .command("EvEcho", "U1", "C1", "30.2", "runs list --<!channel>")
        .await;
    assert!(usage.contains("&lt;!channel&gt;"), "{usage}");
    assert!(!usage.contains("<!channel>"), "{usage}");
    assert!(!usage.contains("<@"), "{usage}");
}
