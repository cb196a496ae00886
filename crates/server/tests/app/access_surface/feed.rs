//! The feeds (`/runs/stream` and a run's own): what they carry and when they end.

use super::*;

/// The feed carries only runs the viewer may read: a private run never becomes a byte.
#[tokio::test]
async fn the_feed_carries_only_readable_runs_with_keep_alives() {
    let h = start(Options {
        keep_alive: Duration::from_millis(200),
        ..Options::default()
    })
    .await;
    let alice = token_for("alice");
    let mut feed = h.open("/runs/stream", &alice).await;
    assert_eq!(feed.status(), 200);
    assert_eq!(feed.headers()["content-type"], "text/event-stream");
    let opening = read_until(&mut feed, "event: sync", Duration::from_secs(5)).await;
    assert!(opening.contains("event: sync"), "{opening}");
    let private = h.live_run("slack:U2", "slack:G1").await;
    let public = h.live_run("slack:U1", "slack:C1").await;
    let mut seen = read_until(&mut feed, public.as_str(), Duration::from_secs(5)).await;
    seen.push_str(&read_until(&mut feed, "\n:", Duration::from_secs(2)).await);
    assert!(
        seen.contains("event: upsert") && seen.contains(public.as_str()),
        "{seen}"
    );
    assert!(
        !seen.contains(private.as_str()),
        "a private run reached a viewer who may not read it"
    );
    // A line starting with `:` is an SSE comment: the keep-alive.
    assert!(
        seen.lines().any(|l| l.starts_with(':')),
        "no keep-alive: {seen}"
    );
    // The fleet's feed sees both; its stream ends on shutdown.
    let mut fleet = h.open("/runs?stream=1", &token_for("fleet")).await;
    let sync = read_until(&mut fleet, "\n\n", Duration::from_secs(5)).await;
    assert!(
        sync.contains(private.as_str()) && sync.contains(public.as_str()),
        "{sync}"
    );
    h.shutdown.cancel();
    assert!(
        ends_within(&mut fleet, Duration::from_secs(5)).await,
        "the feed did not end on shutdown"
    );
}

/// A feed closes at the viewer's `exp`.
#[tokio::test]
async fn the_feed_closes_at_the_tokens_expiry() {
    let h = start(Options::default()).await;
    let mut c = claims(ISSUER, AUDIENCE, "alice");
    c["exp"] = json!(now() + 2);
    let short = key().sign(&c);
    let mut feed = h.open("/runs/stream", &short).await;
    assert_eq!(feed.status(), 200);
    assert!(
        ends_within(&mut feed, Duration::from_secs(8)).await,
        "the feed outlived its token"
    );
}

/// A run's feed: its events and its end, for a reader; the unknown-id 404 for anyone else.
#[tokio::test]
async fn a_runs_feed_is_for_its_readers_and_ends_with_the_run() {
    let h = start(Options::default()).await;
    let private = h.live_run("slack:U2", "slack:G1").await;
    let denied = h
        .get(
            &format!("/runs/{private}/stream"),
            Some(&token_for("alice")),
        )
        .await;
    let missing = h
        .get(
            "/runs/01JZZZZZZZZZZZZZZZZZZZZZZZ/stream",
            Some(&token_for("alice")),
        )
        .await;
    assert_eq!(denied, missing);
    let mut feed = h
        .open(&format!("/runs/{private}/stream"), &token_for("fleet"))
        .await;
    assert_eq!(feed.status(), 200);
    let cli = Caller::new(
        resolve_actor(ActorId::parse("cli:local").unwrap(), &h.services.table()),
        Surface::Cli,
    );
    let stop = h
        .registry
        .handle(&cli, &format!("runs stop {private}"), &h.services)
        .await;
    assert_eq!(stop.reply.kind, commands::ReplyKind::Ok);
    let seen = read_until(&mut feed, "event: finished", Duration::from_secs(5)).await;
    assert!(seen.contains("event: finished"), "{seen}");
    assert!(
        ends_within(&mut feed, Duration::from_secs(5)).await,
        "a run's feed outlived the run"
    );
}

/// A token whose `exp` is 2^64 − 1 (valid for ever) is served: its `/api` answer and its
/// feed, with no overflow adding the leeway or the feed's deadline (the feed closed with no
/// answer before).
#[tokio::test]
async fn a_token_that_never_expires_is_served_without_an_overflow() {
    let h = start(Options::default()).await;
    let mut c = claims(ISSUER, AUDIENCE, "alice");
    c["exp"] = json!(u64::MAX);
    let forever = key().sign(&c);
    assert_eq!(h.get("/api/runs.list", Some(&forever)).await.status, 200);
    let mut feed = h.open("/runs/stream", &forever).await;
    assert_eq!(feed.status(), 200);
    let opening = read_until(&mut feed, "event: sync", Duration::from_secs(5)).await;
    assert!(opening.contains("event: sync"), "{opening}");
    let run = h.live_run("slack:U1", "slack:C1").await;
    let mut run_feed = h.open(&format!("/runs/{run}/stream"), &forever).await;
    assert_eq!(run_feed.status(), 200);
    h.shutdown.cancel();
    assert!(ends_within(&mut run_feed, Duration::from_secs(5)).await);
}

/// A run's feed (a capability link's, or a reader's) ends when the store says the run ended,
/// even when the notification of its end never arrives (lost between replicas): the feed
/// reads its run's status at each recheck.
#[tokio::test]
async fn a_runs_feed_ends_with_the_run_even_when_its_notification_is_lost() {
    let h = start(Options {
        recheck: Duration::from_millis(200),
        ..Options::default()
    })
    .await;
    let token = "sbp_feed-recheck-0123456789";
    let run = h.stored_run_opened_by(Place::Public, token).await;
    let mut feed = h
        .http
        .client
        .get(format!(
            "{}/runs/{}/stream?token={token}",
            h.http.base, run.id
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(feed.status(), 200);
    // Ended in the store alone: no live update is sent.
    let done = store::Finish {
        status: RunStatus::Completed,
        answer: Some("done".into()),
        error: None,
        at: store::wall_clock(),
    };
    h.store.finish_run(&run.id, done).await.unwrap();
    let seen = read_until(&mut feed, "event: finished", Duration::from_secs(5)).await;
    assert!(
        seen.contains("event: finished") && seen.contains("completed"),
        "{seen}"
    );
    assert!(
        ends_within(&mut feed, Duration::from_secs(5)).await,
        "the feed outlived its run"
    );
}

/// A viewer's run feed rechecks as the viewer, through the registry's `runs.get`: a run the
/// viewer may read ends the feed when the store says it ended, with no notification sent.
#[tokio::test]
async fn a_viewers_run_feed_ends_with_the_run_when_its_notification_is_lost() {
    let h = start(Options {
        recheck: Duration::from_millis(200),
        ..Options::default()
    })
    .await;
    let run = h.stored_run(Place::AlicesOwn, None).await;
    let mut feed = h
        .open(&format!("/runs/{}/stream", run.id), &token_for("alice"))
        .await;
    assert_eq!(feed.status(), 200);
    let done = store::Finish {
        status: RunStatus::Failed,
        answer: None,
        error: Some("gone".into()),
        at: store::wall_clock(),
    };
    h.store.finish_run(&run.id, done).await.unwrap();
    let seen = read_until(&mut feed, "event: finished", Duration::from_secs(5)).await;
    assert!(
        seen.contains("event: finished") && seen.contains("failed"),
        "{seen}"
    );
    assert!(
        ends_within(&mut feed, Duration::from_secs(5)).await,
        "the feed outlived its run"
    );
}

/// A viewer's run feed that a recheck finds no longer theirs to read ends at once, with no
/// `finished` event and nothing more: a denial never leaves the feed open.
#[tokio::test]
async fn a_viewers_run_feed_ends_when_the_run_is_no_longer_theirs_to_read() {
    use sqlx::Connection;
    let h = start(Options {
        recheck: Duration::from_millis(200),
        ..Options::default()
    })
    .await;
    let run = h.stored_run(Place::AlicesOwn, None).await;
    let mut feed = h
        .open(&format!("/runs/{}/stream", run.id), &token_for("alice"))
        .await;
    assert_eq!(feed.status(), 200);
    // The run becomes bob's, in bob's own channel, behind the registry's back.
    let url = format!("sqlite://{}", h._dir.path().join("sb.db").display());
    let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("UPDATE runs SET channel_id = 'access:bob', user_id = 'access:bob' WHERE id = ?")
        .bind(run.id.as_str())
        .execute(&mut db)
        .await
        .unwrap();
    let moved = h.store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(moved.user_id.as_str(), "access:bob", "the run moved");
    let mut rest = String::new();
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(chunk)) = feed.chunk().await {
            rest.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await;
    assert!(ended.is_ok(), "the feed stayed open: {rest}");
    assert!(!rest.contains("event:"), "it carried more: {rest}");
}

/// A revocation by a reload reaches open feeds at their next recheck: the index feed ends (the
/// page opens it again under the policy in force), a run's feed that is no longer the viewer's
/// ends carrying nothing more; a new request decides under the new policy at once.
#[tokio::test]
async fn a_reload_that_revokes_ends_open_feeds_at_their_next_recheck() {
    let h = start(Options {
        recheck: Duration::from_millis(200),
        ..Options::default()
    })
    .await;
    let private = h.live_run("slack:U2", "slack:G1").await;
    let fleet = token_for("fleet");
    let mut index = h.open("/runs/stream", &fleet).await;
    let sync = read_until(&mut index, "\n\n", Duration::from_secs(5)).await;
    assert!(sync.contains(private.as_str()), "{sync}");
    let mut run_feed = h.open(&format!("/runs/{private}/stream"), &fleet).await;
    assert_eq!(run_feed.status(), 200);
    let before = h
        .get(&format!("/api/runs.get?id={private}"), Some(&fleet))
        .await;
    // Both feeds stay open while nothing changes: a quiet wait, then read again.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!ends_within(&mut index, Duration::from_millis(100)).await);
    // The reload: the same agents, no grants at all (access:fleet keeps its baseline only).
    let table = authz_core::GrantsTable::empty(h.services.table().agents().clone());
    h.services.policy.replace(commands::PolicyInForce {
        table: Arc::new(table),
        org_rules: Vec::new(),
        hash: "sha256:revoked".to_owned(),
    });
    let after = h
        .get(&format!("/api/runs.get?id={private}"), Some(&fleet))
        .await;
    let missing = h
        .get("/api/runs.get?id=01JZZZZZZZZZZZZZZZZZZZZZZZ", Some(&fleet))
        .await;
    assert_ne!(before, after);
    assert_eq!(
        after, missing,
        "a new request decides under the new policy at once"
    );
    assert!(
        ends_within(&mut index, Duration::from_secs(5)).await,
        "the index feed outlived a reload"
    );
    assert!(
        ends_within(&mut run_feed, Duration::from_secs(5)).await,
        "a run's feed outlived its viewer's revocation"
    );
}
