//! `SlackChannelDirectory` against the fake Slack Web API on loopback, through
//! slack-morphism's client: one lookup per channel per TTL on an injected clock, a bounded
//! cache that re-fetches what it evicted, shared first lookups, failures as `unknown`.
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use authz_core::{ActorId, ChannelDirectory, ChannelId, ChannelVisibility as V, Membership};
use slack::{SlackApi, SlackChannelDirectory};
use test_support::slack::{Conversation, FakeSlack};

const TTL: Duration = Duration::from_secs(600);

async fn directory(fake: &FakeSlack) -> (SlackChannelDirectory, Arc<AtomicU64>) {
    let url = fake.serve().await.unwrap();
    let clock = Arc::new(AtomicU64::new(0));
    let c = clock.clone();
    let dir = SlackChannelDirectory::new(
        SlackApi::new(&url, "xoxb-test").unwrap(),
        TTL,
        Arc::new(move || Duration::from_secs(c.load(Ordering::SeqCst))),
    );
    (dir, clock)
}

fn ch(s: &str) -> ChannelId {
    ChannelId::parse(s).unwrap()
}

fn info_calls(fake: &FakeSlack, channel: &str) -> usize {
    fake.calls_of("conversations.info")
        .iter()
        .filter(|c| c.param("channel") == Some(channel))
        .count()
}

#[tokio::test]
async fn visibility_follows_the_conversation_flags() {
    let fake = FakeSlack::new();
    for (id, c) in [
        ("C1", Conversation::Public),
        ("G1", Conversation::Private),
        ("C2", Conversation::Private),
        ("G2", Conversation::Mpim),
        ("C3", Conversation::Im),
        ("C4", Conversation::MissingScope),
        ("C5", Conversation::ServerError),
    ] {
        fake.set_conversation(id, c);
    }
    let (dir, _) = directory(&fake).await;
    for (id, want) in [
        ("slack:C1", V::Public),
        ("slack:G1", V::Private),
        ("slack:C2", V::Private),
        ("slack:G2", V::Dm),
        ("slack:C3", V::Dm),
        ("slack:C4", V::Unknown),
        ("slack:C5", V::Unknown),
        // No call for these: a DM by its id, the others by their namespace.
        ("slack:D1", V::Dm),
        ("http:ops", V::Machine),
        ("access:alice", V::Dm),
        ("cli:local", V::Machine),
    ] {
        assert_eq!(dir.info(&ch(id)).await, want, "{id}");
    }
    let asked: BTreeSet<String> = fake
        .calls_of("conversations.info")
        .iter()
        .map(|c| c.param("channel").unwrap().to_owned())
        .collect();
    let want: BTreeSet<String> = ["C1", "G1", "C2", "G2", "C3", "C4", "C5"]
        .map(String::from)
        .into();
    assert_eq!(asked, want);
}

#[tokio::test]
async fn one_lookup_per_channel_per_ttl_and_failures_are_remembered() {
    let fake = FakeSlack::new();
    fake.set_conversation("C9", Conversation::ServerError);
    let (dir, clock) = directory(&fake).await;
    for _ in 0..50 {
        assert_eq!(dir.info(&ch("slack:C1")).await, V::Public);
        assert_eq!(dir.info(&ch("slack:C9")).await, V::Unknown);
    }
    assert_eq!((info_calls(&fake, "C1"), info_calls(&fake, "C9")), (1, 1));
    clock.store(TTL.as_secs() - 1, Ordering::SeqCst);
    dir.info(&ch("slack:C1")).await;
    assert_eq!(info_calls(&fake, "C1"), 1);
    // The failure is remembered for the TTL, then asked again; now it answers.
    fake.set_conversation("C9", Conversation::Private);
    assert_eq!(dir.info(&ch("slack:C9")).await, V::Unknown);
    clock.store(TTL.as_secs(), Ordering::SeqCst);
    assert_eq!(dir.info(&ch("slack:C9")).await, V::Private);
    assert_eq!(dir.info(&ch("slack:C1")).await, V::Public);
    assert_eq!((info_calls(&fake, "C1"), info_calls(&fake, "C9")), (2, 2));
}

#[tokio::test]
async fn concurrent_first_lookups_share_one_call() {
    let fake = FakeSlack::new();
    let (dir, _) = directory(&fake).await;
    let dir = Arc::new(dir);
    let lookups: Vec<_> = (0..64)
        .map(|_| {
            let dir = dir.clone();
            tokio::spawn(async move { dir.info(&ch("slack:C7")).await })
        })
        .collect();
    for l in lookups {
        assert_eq!(l.await.unwrap(), V::Public);
    }
    assert_eq!(info_calls(&fake, "C7"), 1);
}

#[tokio::test]
async fn the_cache_is_bounded_and_re_fetches_an_evicted_channel() {
    let fake = FakeSlack::new();
    let (dir, _) = directory(&fake).await;
    dir.info(&ch("slack:C0")).await;
    // Well past the bound: C0, the least recently used, is evicted.
    for _ in 0..2 {
        for i in 1..=3 * slack::directory::CAPACITY {
            dir.info(&ch(&format!("slack:C{i}"))).await;
        }
    }
    dir.run_pending_tasks().await;
    assert!(
        dir.cached_channels() <= slack::directory::CAPACITY,
        "{}",
        dir.cached_channels()
    );
    dir.info(&ch("slack:C0")).await;
    assert_eq!(info_calls(&fake, "C0"), 2);
}

#[tokio::test]
async fn memberships_are_one_paged_walk_per_user_per_ttl() {
    let mut fake = FakeSlack::new();
    fake.page_size = 2;
    fake.set_members("U1", &["G1", "G2", "G3", "G4", "G5"]);
    let (dir, clock) = directory(&fake).await;
    let u1 = ActorId::parse("slack:U1").unwrap();
    let want: BTreeSet<ChannelId> = ["G1", "G2", "G3", "G4", "G5"]
        .iter()
        .map(|g| ch(&format!("slack:{g}")))
        .collect();
    let dir = Arc::new(dir);
    let walks: Vec<_> = (0..16)
        .map(|_| {
            let (dir, u1) = (dir.clone(), u1.clone());
            tokio::spawn(async move { dir.memberships(&u1).await })
        })
        .collect();
    for w in walks {
        assert_eq!(w.await.unwrap(), want);
    }
    // Three pages of one walk, shared by all sixteen.
    assert_eq!(fake.calls_of("users.conversations").len(), 3);
    let first = &fake.calls_of("users.conversations")[0];
    assert_eq!(first.param("types"), Some("private_channel,mpim"));
    assert_eq!(dir.is_member(&u1, &ch("slack:G3")).await, Membership::Yes);
    assert_eq!(
        dir.is_member(&u1, &ch("slack:G9")).await,
        Membership::Unknown
    );
    // Not a Slack user: nothing, and no call.
    let http = ActorId::parse("http:ops").unwrap();
    assert!(dir.memberships(&http).await.is_empty());
    assert_eq!(fake.calls_of("users.conversations").len(), 3);
    // A failed walk, after the TTL, is no memberships (deny), remembered for the TTL.
    fake.fail("users.conversations", "ratelimited_forever");
    clock.store(TTL.as_secs(), Ordering::SeqCst);
    assert!(dir.memberships(&u1).await.is_empty());
    assert_eq!(fake.calls_of("users.conversations").len(), 4);
    for _ in 0..5 {
        assert!(dir.memberships(&u1).await.is_empty());
    }
    assert_eq!(
        fake.calls_of("users.conversations").len(),
        4,
        "the failure is remembered for the TTL: no call until it ends"
    );
}

/// A caller that stops waiting (its request's bound) never cancels the lookup: it finishes,
/// is cached, and the next callers read it without a call.
#[tokio::test]
async fn a_lookup_outlives_a_caller_that_stopped_waiting() {
    let fake = FakeSlack::new();
    fake.set_conversation("G7", Conversation::Private);
    fake.slow("conversations.info", Duration::from_millis(600));
    let (dir, _) = directory(&fake).await;
    let bounded = tokio::time::timeout(Duration::from_millis(100), dir.info(&ch("slack:G7"))).await;
    assert!(bounded.is_err(), "the first caller gave up");
    tokio::time::sleep(Duration::from_millis(900)).await;
    for _ in 0..10 {
        assert_eq!(dir.info(&ch("slack:G7")).await, V::Private);
    }
    assert_eq!(info_calls(&fake, "G7"), 1);
}

/// A full cache still admits a channel seen for the first time.
#[tokio::test]
async fn a_newcomer_to_a_full_cache_is_always_admitted() {
    let fake = FakeSlack::new();
    let (dir, _) = directory(&fake).await;
    // Make the cached channels frequent, then fill the cache past its bound.
    for _ in 0..3 {
        for i in 0..slack::directory::CAPACITY {
            dir.info(&ch(&format!("slack:C{i}"))).await;
        }
    }
    dir.run_pending_tasks().await;
    dir.info(&ch("slack:CNEW")).await;
    dir.run_pending_tasks().await;
    dir.info(&ch("slack:CNEW")).await;
    assert_eq!(info_calls(&fake, "CNEW"), 1, "the newcomer was cached");
}

#[tokio::test]
async fn a_failing_channel_is_logged_once_per_window() {
    let captured = test_support::log::CapturedLog::default();
    let _guard = captured.install();
    let fake = FakeSlack::new();
    fake.set_conversation("C9", Conversation::ServerError);
    let (dir, clock) = directory(&fake).await;
    let lines = || {
        captured
            .text()
            .lines()
            .filter(|l| l.contains("conversations.info failed") && l.contains("C9"))
            .count()
    };
    for _ in 0..20 {
        assert_eq!(dir.info(&ch("slack:C9")).await, V::Unknown);
    }
    assert_eq!(lines(), 1);
    clock.store(TTL.as_secs(), Ordering::SeqCst);
    for _ in 0..20 {
        dir.info(&ch("slack:C9")).await;
    }
    assert_eq!(lines(), 2);
    // The line names the channel and the fault's token, never Slack's body.
    let text = captured.text();
    assert!(
        text.contains("http:500") && !text.contains("oops"),
        "{text}"
    );
}

#[tokio::test]
async fn a_hung_api_is_a_timeout_and_unknown_not_a_stuck_stamp() {
    let fake = FakeSlack::new();
    fake.hang("conversations.info");
    let url = fake.serve().await.unwrap();
    let api = SlackApi::new(&url, "xoxb-test")
        .unwrap()
        .with_call_timeout(Duration::from_millis(200));
    assert_eq!(
        api.visibility("C1").await,
        Err(slack::ApiFault("timeout".into()))
    );
    let dir = SlackChannelDirectory::new(api, TTL, slack::system_clock());
    assert_eq!(dir.info(&ch("slack:C1")).await, V::Unknown);
}
