//! The live feed: who sees which run's updates, and every end before the live set empties.

use super::*;

#[tokio::test]
async fn live_updates_reach_only_viewers_who_may_read_the_run() {
    let w = world().await;
    let d = dispatcher(&w, &Options::default());
    let viewer = |id: &str| resolve_actor(id.parse().unwrap(), &w.table);
    let mut ops_viewer = d.live().subscribe(&viewer("http:viewer"));
    let mut fleet = d.live().subscribe(&viewer("http:fleet"));
    let mut nobody = d.live().subscribe(&viewer("http:nobody"));
    let ci = d
        .start(request(&w, "http:coder", "http:ci", "@echo one"))
        .await
        .unwrap();
    ci.finished().await.unwrap();
    let ops = d
        .start(request(&w, "http:coder", "http:ops", "@echo two"))
        .await
        .unwrap();
    let ops_id = ops.id().clone();
    ops.finished().await.unwrap();
    let drain = |sub: &mut dispatch::Subscription| {
        let mut seen = Vec::new();
        while let Some(u) = sub.try_next() {
            seen.push(u);
        }
        seen
    };
    let fleet_seen = drain(&mut fleet);
    let ops_seen = drain(&mut ops_viewer);
    assert!(
        drain(&mut nobody).is_empty(),
        "a viewer with no runs:read sees nothing"
    );
    assert!(
        fleet_seen
            .iter()
            .any(|u| u.run().unwrap().channel_id.as_str() == "http:ci")
    );
    assert!(!ops_seen.is_empty());
    assert!(
        ops_seen.iter().all(|u| u.run().unwrap().id == ops_id),
        "only http:ops runs"
    );
    assert!(
        ops_seen
            .iter()
            .any(|u| matches!(u, LiveUpdate::Finished { .. }))
    );
    let stalled = d
        .start(request(&w, "http:coder", "http:ci", "@staller x"))
        .await
        .unwrap();
    assert_eq!(d.live().snapshot(&viewer("http:fleet")).len(), 1);
    assert!(d.live().snapshot(&viewer("http:viewer")).is_empty());
    d.stop(stalled.id());
}

/// A capability token's feed: one run's updates, its end included, and no other run's.
#[tokio::test]
async fn a_runs_own_feed_carries_that_run_only() {
    let w = world().await;
    let d = dispatcher(&w, &Options::default());
    let stalled = d
        .start(request(&w, "http:coder", "http:ci", "@staller wait"))
        .await
        .unwrap();
    let id = stalled.id().clone();
    let mut feed = d.live().subscribe_run(&id);
    let other = d
        .start(request(&w, "http:coder", "http:ci", "@echo another"))
        .await
        .unwrap();
    other.finished().await.unwrap();
    d.stop(&id);
    stalled.finished().await.unwrap();
    let mut seen = Vec::new();
    while let Some(u) = feed.try_next() {
        seen.push(u);
    }
    assert!(seen.iter().all(|u| u.run().unwrap().id == id), "{seen:?}");
    assert!(
        seen.iter()
            .any(|u| matches!(u, LiveUpdate::Finished { .. }))
    );
}

/// What a follower relies on (the CLI waits for a command's runs this way): once the live set
/// is empty, every run's `Finished` is already in a feed subscribed before, so waiting for
/// emptiness and then draining the feed shows every end; and the wait returns even when the
/// viewer never reads its feed.
#[tokio::test]
async fn a_runs_finished_update_is_in_the_feed_before_it_leaves_the_live_set() {
    let w = world().await;
    let mut o = Options::default();
    o.settings.max_per_actor = 8;
    let d = dispatcher(&w, &o);
    let fleet = resolve_actor("http:fleet".parse().unwrap(), &w.table);
    let mut feed = d.live().subscribe(&fleet);
    let mut ids = Vec::new();
    for i in 0..5 {
        let text = format!("@echo run {i}");
        let s = d
            .start(request(&w, "http:coder", "http:ci", &text))
            .await
            .unwrap();
        ids.push(s.id().clone());
    }
    d.live().until_empty().await;
    let mut ended = Vec::new();
    while let Some(u) = feed.try_next() {
        if let LiveUpdate::Finished { run, status, .. } = u {
            assert_eq!(status, RunStatus::Completed);
            ended.push(run.id);
        }
    }
    ended.sort();
    ids.sort();
    assert_eq!(
        ended, ids,
        "every run's end was in the feed when the set emptied"
    );
}
