//! Events in: a mention starts one run, a retry or a slow store serves it once, bots are ignored.

use super::*;

#[tokio::test]
async fn a_mention_starts_one_run_and_its_reply_lands_in_the_thread() {
    let h = start().await;
    assert!(
        h.summary.contains(
            "events at POST /slack/events, clicks at POST /slack/interactions, as bot user UBOT"
        ),
        "{}",
        h.summary
    );
    let status = h
        .event(
            "Ev1",
            mention(
                "U1",
                "C1",
                "1700000001.000100",
                "summarise the <!channel> plan",
            ),
        )
        .await;
    assert_eq!(status, 200);
    let runs = h.finished_runs(1).await;
    let run = &runs[0];
    assert_eq!(run.surface, Surface::Slack);
    assert_eq!(run.user_id.as_str(), "slack:U1");
    assert_eq!(run.channel_id.as_str(), "slack:C1");
    assert_eq!(run.thread_key.as_deref(), Some("1700000001.000100"));
    assert_eq!(run.request, "summarise the <!channel> plan");
    assert_eq!(run.channel_visibility, ChannelVisibility::Public);
    assert_eq!(run.status, RunStatus::Completed);
    // One "working" message in the thread, updated with the outcome.
    let updates = h.fake.settled("chat.update", 1, 10).await;
    let posts = h.fake.calls_of("chat.postMessage");
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].param("thread_ts"), Some("1700000001.000100"));
    assert!(posts[0].param("text").unwrap().contains(run.id.as_str()));
    assert_eq!(updates[0].param("ts"), Some("1700000000.000001"));
    let answer = updates[0].param("text").unwrap();
    assert!(
        answer.contains("request: summarise the &lt;!channel&gt; plan"),
        "{answer}"
    );
    assert!(!answer.contains("<!channel>"));
    // The capability link goes to the asker alone, never into the channel.
    let ephemeral = h.fake.calls_of("chat.postEphemeral");
    assert_eq!(ephemeral.len(), 1);
    assert_eq!(ephemeral[0].param("user"), Some("U1"));
    let link = ephemeral[0].param("text").unwrap();
    assert!(
        link.contains(&format!("https://sb.example.com/runs/{}?token=", run.id)),
        "{link}"
    );
    for c in h.fake.calls_of("chat.postMessage").iter().chain(&updates) {
        assert!(!c.param("text").unwrap().contains("token="));
    }
}

/// A mention names the repo its run works in with `in <owner/name>:` at its start.
#[tokio::test]
async fn a_mention_names_its_repo_in_its_text() {
    let h = start().await;
    let repo = tempfile::tempdir().unwrap();
    agents::testing::init_repository(repo.path()).unwrap();
    store::repos::set(
        h.store.as_ref(),
        &"acme/web".parse().unwrap(),
        &store::repos::RepoSource::Path(repo.path().display().to_string()),
        &authz_core::ActorId::cli_local(),
        store::wall_clock(),
    )
    .await
    .unwrap();
    let status = h
        .event(
            "EvRepo",
            mention(
                "U1",
                "C1",
                "1700000009.000100",
                "<@UBOT> in acme/web: tidy the docs",
            ),
        )
        .await;
    assert_eq!(status, 200);
    let runs = h.finished_runs(1).await;
    assert_eq!(runs[0].repo.as_ref().map(|r| r.as_str()), Some("acme/web"));
    assert_eq!(runs[0].request, "tidy the docs");
}

#[tokio::test]
async fn a_retried_event_id_starts_nothing() {
    let h = start().await;
    let body = callback("EvRetry", mention("U1", "C1", "1.1", "once"));
    assert_eq!(h.post(body.clone()).await.0, 200);
    // Slack's retry: the same body, re-signed, with X-Slack-Retry-Num.
    let mut headers = signed_headers(SECRET, now(), &body).to_vec();
    headers.push(("x-slack-retry-num".into(), "1".into()));
    headers.push(("x-slack-retry-reason".into(), "http_timeout".into()));
    assert_eq!(h.post_raw(body.clone(), &headers).await.0, 200);
    // And once more without the header: the id alone decides.
    assert_eq!(h.post(body).await.0, 200);
    h.finished_runs(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.runs().await.len(), 1);
}

#[tokio::test]
async fn bots_edits_and_the_bots_own_messages_are_ignored() {
    let h = start().await;
    for (i, event) in [
        json!({"type": "message", "channel_type": "im", "subtype": "bot_message", "bot_id": "B9", "channel": "D1", "ts": "1.1", "text": "hi"}),
        json!({"type": "message", "channel_type": "im", "bot_id": "B1", "user": "UBOT", "channel": "D1", "ts": "1.2", "text": "working"}),
        json!({"type": "message", "channel_type": "im", "user": "UBOT", "channel": "D1", "ts": "1.3", "text": "no bot_id"}),
        json!({"type": "message", "channel_type": "im", "subtype": "message_changed", "channel": "D1", "ts": "1.4", "message": {"text": "edited"}}),
        json!({"type": "message", "channel_type": "im", "subtype": "message_deleted", "channel": "D1", "ts": "1.5"}),
        json!({"type": "message", "channel_type": "channel", "subtype": "channel_join", "user": "U1", "channel": "C1", "ts": "1.6", "thread_ts": "1.6"}),
        json!({"type": "app_mention", "user": "U7", "bot_id": "B7", "channel": "C1", "ts": "1.7", "text": "<@UBOT> loop with me"}),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(h.event(&format!("EvIgnored{i}"), event).await, 200);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.runs().await.is_empty());
    assert!(h.fake.calls_of("chat.postMessage").is_empty());
}

/// Another writer holds the store's database for `hold`; meanwhile a mention arrives.
async fn mention_while_locked(h: &Harness, id: &str, ts: &str, hold: Duration) -> (u16, Duration) {
    use sqlx::Connection;
    let url = format!("sqlite://{}", h._dir.path().join("sb.db").display());
    let mut locker = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(hold).await;
        sqlx::query("COMMIT").execute(&mut locker).await.unwrap();
    });
    let started = std::time::Instant::now();
    let status = h.event(id, mention("U1", "C1", ts, "hi")).await;
    let waited = started.elapsed();
    release.await.unwrap();
    (status, waited)
}

/// A store that cannot record the event id in time (another writer holds the database):
/// Slack gets a 503 within the acknowledgement's 2.5 s, never the 5 s the store would wait,
/// and the event is served exactly once, by the first delivery when its write lands late, or
/// by Slack's retry when it never did.
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_store_answers_slack_within_its_bound_and_serves_the_event_once() {
    let h = start().await;
    // The write lands at 4 s, after the 503: the first delivery starts the run, the retry nothing.
    let (status, waited) = mention_while_locked(&h, "EvLate", "8.1", Duration::from_secs(4)).await;
    assert_eq!(status, 503);
    assert!(
        waited < Duration::from_millis(3_500),
        "answered after {waited:?}"
    );
    h.finished_runs(1).await;
    assert_eq!(
        h.event("EvLate", mention("U1", "C1", "8.1", "hi")).await,
        200
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.finished_runs(1).await.len(), 1);
    // The write gives up (the store's 5 s busy wait) before the lock goes at 8 s (3 s to
    // spare for a write that starts late on a loaded machine): the event id was never spent,
    // and Slack's retry starts the run.
    let (status, _) = mention_while_locked(&h, "EvLost", "8.2", Duration::from_secs(8)).await;
    assert_eq!(status, 503);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        h.runs().await.len(),
        1,
        "nothing started from the lost write"
    );
    assert_eq!(
        h.event("EvLost", mention("U1", "C1", "8.2", "hi")).await,
        200
    );
    assert_eq!(h.finished_runs(2).await.len(), 2);
}

#[tokio::test]
async fn follow_ups_count_only_in_a_thread_the_bot_answered() {
    let h = start().await;
    h.event("EvT1", mention("U1", "C1", "8.1", "start")).await;
    h.finished_runs(1).await;
    h.fake.wait_for("chat.update", 1, 10).await;
    let follow = json!({"type": "message", "channel_type": "channel", "user": "U1",
        "channel": "C1", "ts": "8.2", "thread_ts": "8.1", "text": "and a follow-up"});
    assert_eq!(h.event("EvT2", follow).await, 200);
    let runs = h.finished_runs(2).await;
    assert_eq!(runs[0].request, "and a follow-up");
    assert_eq!(runs[0].thread_key.as_deref(), Some("8.1"));
    // A thread the bot never answered: nothing.
    let other = json!({"type": "message", "channel_type": "channel", "user": "U1",
        "channel": "C1", "ts": "9.2", "thread_ts": "9.1", "text": "chatter"});
    assert_eq!(h.event("EvT3", other).await, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.runs().await.len(), 2);
}
