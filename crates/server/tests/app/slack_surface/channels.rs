//! Channel visibility and membership: the directory's lookups, their cache, who reads what.

use super::*;

#[tokio::test]
async fn conversations_info_is_asked_once_per_channel_per_ttl() {
    let h = start().await;
    h.fake.set_conversation("G7", Conversation::Private);
    for i in 0..4 {
        h.event(
            &format!("EvC1-{i}"),
            mention("U1", "C1", &format!("2.{i}"), "hi"),
        )
        .await;
        h.event(
            &format!("EvG7-{i}"),
            mention("U1", "G7", &format!("3.{i}"), "hi"),
        )
        .await;
    }
    let runs = h.finished_runs(8).await;
    let asked = |c: &str| {
        h.fake
            .calls_of("conversations.info")
            .iter()
            .filter(|call| call.param("channel") == Some(c))
            .count()
    };
    assert_eq!((asked("C1"), asked("G7")), (1, 1));
    assert!(
        runs.iter()
            .filter(|r| r.channel_id.as_str() == "slack:G7")
            .all(|r| r.channel_visibility == ChannelVisibility::Private)
    );
    // Past the TTL the next run asks again.
    h.clock.fetch_add(TTL + 1, Ordering::SeqCst);
    h.event("EvC1-late", mention("U1", "C1", "2.9", "hi")).await;
    h.finished_runs(9).await;
    assert_eq!(asked("C1"), 2);
    // A DM needs no call.
    h.event("EvDm", dm("U1", "D1", "4.1", "hi")).await;
    let runs = h.finished_runs(10).await;
    assert_eq!(runs[0].channel_visibility, ChannelVisibility::Dm);
    assert_eq!(asked("D1"), 0);
}

/// A Slack API that answers in 2 s, past the 1.5 s each request waits for the directory:
/// the first mention's lookups (the channel's visibility, the user's memberships) go on
/// without it and are cached, so ten mentions cost one call of each and one `[authz]` line.
#[tokio::test]
async fn a_slow_directory_is_asked_once_for_ten_mentions() {
    let captured = test_support::log::CapturedLog::default();
    let _guard = captured.install();
    let h = start().await;
    h.fake.set_conversation("G7", Conversation::Private);
    h.fake.slow("conversations.info", Duration::from_secs(2));
    h.fake.slow("users.conversations", Duration::from_secs(2));
    for i in 0..10 {
        h.event(
            &format!("EvSlow-{i}"),
            mention("U1", "G7", &format!("7.{i}"), "hi"),
        )
        .await;
        h.finished_runs(i + 1).await;
    }
    let calls = |m: &str| h.fake.calls_of(m).len();
    assert_eq!(
        (calls("conversations.info"), calls("users.conversations")),
        (1, 1)
    );
    let runs = h.finished_runs(10).await;
    // Only the first run, stamped before the answer came, is unknown; the rest are private.
    let unknown = runs
        .iter()
        .filter(|r| r.channel_visibility == ChannelVisibility::Unknown)
        .count();
    assert!(unknown <= 1, "{runs:?}");
    let lines = captured
        .text()
        .lines()
        .filter(|l| l.contains("[authz] channel directory timed out"))
        .count();
    assert!(lines <= 1, "{}", captured.text());
}

#[tokio::test]
async fn a_failed_lookup_stamps_unknown_and_the_reply_still_lands() {
    let h = start().await;
    h.fake.set_conversation("C500", Conversation::ServerError);
    h.fake
        .set_conversation("CSCOPE", Conversation::MissingScope);
    h.event("EvE1", mention("U1", "C500", "5.1", "hi")).await;
    h.event("EvE2", mention("U1", "CSCOPE", "5.2", "hi")).await;
    let runs = h.finished_runs(2).await;
    assert!(
        runs.iter()
            .all(|r| r.channel_visibility == ChannelVisibility::Unknown),
        "{runs:?}"
    );
    let updates = h.fake.settled("chat.update", 2, 10).await;
    assert_eq!(updates.len(), 2);
    assert!(
        updates
            .iter()
            .all(|u| u.param("text").unwrap().contains("echo agent"))
    );
}

#[tokio::test]
async fn a_dm_run_is_private_to_its_user_and_a_public_run_is_not() {
    let h = start().await;
    h.event("EvDm1", dm("U1", "D1", "6.1", "my secret plan"))
        .await;
    h.event("EvPub1", mention("U1", "C1", "6.2", "our public plan"))
        .await;
    let runs = h.finished_runs(2).await;
    let dm_run = runs
        .iter()
        .find(|r| r.channel_id.as_str() == "slack:D1")
        .unwrap();
    let pub_run = runs
        .iter()
        .find(|r| r.channel_id.as_str() == "slack:C1")
        .unwrap();
    let seen_by_u2 = h
        .command("EvList2", "U2", "C1", "6.3", "runs list --status all")
        .await;
    assert!(seen_by_u2.contains(pub_run.id.as_str()), "{seen_by_u2}");
    assert!(!seen_by_u2.contains(dm_run.id.as_str()), "{seen_by_u2}");
    let seen_by_u1 = h
        .command("EvList1", "U1", "C1", "6.4", "runs list --status all")
        .await;
    assert!(seen_by_u1.contains(dm_run.id.as_str()), "{seen_by_u1}");
    // A point read by the other user is the same not-found as a missing id.
    let got = h
        .command(
            "EvGet2",
            "U2",
            "C1",
            "6.5",
            &format!("runs get {}", dm_run.id),
        )
        .await;
    let missing = h
        .command("EvGet3", "U2", "C1", "6.6", "runs get r-does-not-exist")
        .await;
    assert_eq!(
        got.replace(dm_run.id.as_str(), "ID"),
        missing.replace("r-does-not-exist", "ID")
    );
}

#[tokio::test]
async fn a_private_channels_runs_follow_real_membership() {
    let h = start().await;
    h.fake.set_conversation("G1", Conversation::Private);
    h.fake.set_members("U1", &["G1"]);
    h.fake.set_members("U2", &["G0", "G5", "G1"]); // three pages of two, then one
    h.event("EvPriv", mention("U1", "G1", "7.1", "private work"))
        .await;
    let runs = h.finished_runs(1).await;
    let private = runs[0].id.clone();
    assert_eq!(runs[0].channel_visibility, ChannelVisibility::Private);
    // A member lists it and reads it, with no channels entry in the config.
    let member = h
        .command("EvM1", "U2", "C1", "7.2", "runs list --status all")
        .await;
    assert!(member.contains(private.as_str()), "{member}");
    let read = h
        .command("EvM2", "U2", "C1", "7.3", &format!("runs get {private}"))
        .await;
    assert!(read.contains("private work"), "{read}");
    // Someone who is not a member does not.
    let outsider = h
        .command("EvO1", "U3", "C1", "7.4", "runs list --status all")
        .await;
    assert!(!outsider.contains(private.as_str()), "{outsider}");
    // U2 leaves: within the TTL the cached walk still admits (the documented stale window);
    // after it, the next walk drops the channel.
    h.fake.set_members("U2", &["G0"]);
    let stale = h
        .command("EvL1", "U2", "C1", "7.5", "runs list --status all")
        .await;
    assert!(stale.contains(private.as_str()));
    h.clock.fetch_add(TTL + 1, Ordering::SeqCst);
    let left = h
        .command("EvL2", "U2", "C1", "7.6", "runs list --status all")
        .await;
    assert!(!left.contains(private.as_str()), "{left}");
    let walks = h
        .fake
        .calls_of("users.conversations")
        .iter()
        .filter(|c| c.param("user") == Some("U2"))
        .count();
    // 2 pages the first walk, 1 the second: one walk per user per TTL, shared by 3 requests.
    assert_eq!(walks, 3);
    // A failed walk adds nothing: U4 is a member until the API fails.
    h.fake.set_members("U4", &["G1"]);
    let before = h
        .command("EvF0", "U4", "C1", "7.7", "runs list --status all")
        .await;
    assert!(before.contains(private.as_str()), "{before}");
    h.fake.fail("users.conversations", "internal_error");
    h.clock.fetch_add(TTL + 1, Ordering::SeqCst);
    let failed = h
        .command("EvF1", "U4", "C1", "7.8", "runs list --status all")
        .await;
    assert!(!failed.contains(private.as_str()), "{failed}");
}
