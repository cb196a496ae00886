//! Memory records, config values, schedule firings, surfaces' event ids and answered
//! threads, on every back end.

use authz_core::ChannelVisibility;
use authz_core::{ConfigTier, ScheduleName, ScopeKey, Surface};
use store::{
    ApprovalRecord, ApprovalState, ConfigValue, Finish, FiringSlot, Friction, KeptChanges,
    NewMemory, Retention, RunStatus, StoreError, Timestamp,
};

use crate::contract;
use crate::support::*;

contract!(
    memory_records_supersede_and_forget,
    memory_in_scopes_is_the_newest_across_scopes,
    config_values_on_three_tiers,
    a_schedule_slot_fires_once_under_concurrent_claims,
    a_manual_firing_never_collides_with_or_counts_as_a_timer_slot,
    a_slack_retry_is_seen_once,
    answered_slack_threads_are_recorded_once_and_read_by_key,
    an_ask_is_answered_once_from_anywhere_and_closed_asks_are_not,
    records_past_their_retention_are_pruned_in_batches_and_nothing_in_use_is,
    what_keeping_left_is_recorded_once_per_existing_run,
);

async fn memory_records_supersede_and_forget(b: Backend) {
    let u = open(b).await;
    let s = &*u.store;
    let user = ScopeKey::User("slack:U1".parse().unwrap());
    let channel = ScopeKey::Channel("slack:G1".parse().unwrap());
    let add = |scope: &ScopeKey, text: &str, at, supersedes| NewMemory {
        scope: scope.clone(),
        text: text.into(),
        supersedes,
        source_run: None,
        created_at: Timestamp::from_micros(at),
    };
    let org = s
        .add_memory(add(&ScopeKey::Org, "standup at 10", 1, None))
        .await
        .unwrap();
    let old = s
        .add_memory(add(&user, "prefers tabs", 2, None))
        .await
        .unwrap();
    let new = s
        .add_memory(add(&user, "prefers spaces", 3, Some(old.id.clone())))
        .await
        .unwrap();
    s.add_memory(add(&channel, "deploys on friday", 4, None))
        .await
        .unwrap();
    let got = s
        .memory_in_scopes(&[ScopeKey::Org, user.clone()], 10)
        .await
        .unwrap();
    let texts: Vec<&str> = got.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(
        texts,
        vec!["prefers spaces", "standup at 10"],
        "superseded and other scopes are left out"
    );
    assert_eq!(
        s.get_memory(&new.id).await.unwrap().unwrap().supersedes,
        Some(old.id.clone())
    );
    assert!(
        s.forget_memory(&new.id, Timestamp::from_micros(5))
            .await
            .unwrap()
    );
    assert!(
        !s.forget_memory(&new.id, Timestamp::from_micros(6))
            .await
            .unwrap(),
        "forgetting twice"
    );
    let got = s
        .memory_in_scopes(std::slice::from_ref(&user), 10)
        .await
        .unwrap();
    assert_eq!(
        got.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
        vec!["prefers tabs"],
        "a forgotten correction restores what it corrected"
    );
    assert_eq!(
        s.get_memory(&org.id).await.unwrap().unwrap().scope,
        ScopeKey::Org
    );
    u.cleanup().await;
}

/// The limit applies to the merged list: the newest `limit` records over all the scopes
/// asked, whichever scope holds them, and nothing from a scope not asked.
async fn memory_in_scopes_is_the_newest_across_scopes(b: Backend) {
    let u = open(b).await;
    let s = &*u.store;
    let scopes = [
        ScopeKey::Org,
        ScopeKey::User("slack:U1".parse().unwrap()),
        ScopeKey::Channel("slack:G1".parse().unwrap()),
        ScopeKey::Channel("slack:G2".parse().unwrap()),
    ];
    for at in 0..40i64 {
        let scope = &scopes[(at as usize * 7) % scopes.len()];
        s.add_memory(NewMemory {
            scope: scope.clone(),
            text: format!("fact {at}"),
            supersedes: None,
            source_run: None,
            created_at: Timestamp::from_micros(at),
        })
        .await
        .unwrap();
    }
    let asked = &scopes[..3];
    for limit in [1u32, 4, 9, 30, 1000] {
        let got = s.memory_in_scopes(asked, limit).await.unwrap();
        let want: Vec<String> = (0..40i64)
            .rev()
            .filter(|at| asked.contains(&scopes[(*at as usize * 7) % scopes.len()]))
            .take(limit as usize)
            .map(|at| format!("fact {at}"))
            .collect();
        let texts: Vec<String> = got.into_iter().map(|m| m.text).collect();
        assert_eq!(texts, want, "limit {limit}");
    }
    assert!(s.memory_in_scopes(&[], 10).await.unwrap().is_empty());
    u.cleanup().await;
}

async fn config_values_on_three_tiers(b: Backend) {
    let u = open(b).await;
    let s = &*u.store;
    let by: authz_core::ActorId = "slack:U1".parse().unwrap();
    let tiers = [
        ConfigTier::Org,
        ConfigTier::Channel("slack:C1".parse().unwrap()),
        ConfigTier::User("slack:U1".parse().unwrap()),
    ];
    for (i, tier) in tiers.iter().enumerate() {
        let v = |key: &str, value: &str| ConfigValue {
            tier: tier.clone(),
            key: key.into(),
            value: value.into(),
            updated_by: by.clone(),
            updated_at: Timestamp::from_micros(i as i64),
        };
        s.set_config(v("agent", "echo")).await.unwrap();
        s.set_config(v("agent", "coding")).await.unwrap();
        s.set_config(v("mcp.github", "https://mcp.example/github"))
            .await
            .unwrap();
        s.set_config(v("mcp.linear", "https://mcp.example/linear"))
            .await
            .unwrap();
        assert_eq!(
            s.get_config(tier, "agent").await.unwrap().unwrap().value,
            "coding",
            "upsert"
        );
        let mcp: Vec<String> = s
            .list_config(tier, "mcp.")
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.key)
            .collect();
        assert_eq!(mcp, vec!["mcp.github", "mcp.linear"]);
    }
    assert!(s.delete_config(&tiers[1], "mcp.github").await.unwrap());
    assert!(!s.delete_config(&tiers[1], "mcp.github").await.unwrap());
    assert_eq!(s.list_config(&tiers[1], "mcp.").await.unwrap().len(), 1);
    assert_eq!(
        s.list_config(&tiers[0], "mcp.").await.unwrap().len(),
        2,
        "tiers are separate"
    );
    assert_eq!(
        s.get_config(&ConfigTier::Channel("slack:C2".parse().unwrap()), "agent")
            .await
            .unwrap(),
        None
    );
    u.cleanup().await;
}

async fn a_schedule_slot_fires_once_under_concurrent_claims(b: Backend) {
    let u = open(b).await;
    let name = ScheduleName::parse("self-improvement").unwrap();
    let slot = FiringSlot::Timer(Timestamp::from_micros(604_800_000_000));
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (st, n, slot) = (u.store.clone(), name.clone(), slot.clone());
        tasks.push(tokio::spawn(async move {
            st.claim_firing(&n, &slot, Timestamp::from_micros(i))
                .await
                .unwrap()
        }));
    }
    let mut wins = 0;
    for t in tasks {
        wins += usize::from(t.await.unwrap());
    }
    assert_eq!(wins, 1, "exactly one claimant fires the slot");
    let next_slot = FiringSlot::Timer(Timestamp::from_micros(2 * 604_800_000_000));
    assert!(
        u.store
            .claim_firing(&name, &next_slot, Timestamp::from_micros(20))
            .await
            .unwrap()
    );
    u.store
        .record_firing(&name, &slot, "completed", None, Some("12 runs analysed"))
        .await
        .unwrap();
    let firings = u.store.recent_firings(&name, 10).await.unwrap();
    assert_eq!(firings.len(), 2);
    assert_eq!(firings[0].slot, next_slot, "the most recently fired first");
    assert_eq!(firings[1].status, "completed");
    assert_eq!(
        firings[1].slot, slot,
        "the slot reads back as it was claimed"
    );
    let unclaimed = FiringSlot::Timer(Timestamp::from_micros(5));
    assert!(
        u.store
            .record_firing(&name, &unclaimed, "completed", None, None)
            .await
            .is_err(),
        "an unclaimed slot"
    );
    u.cleanup().await;
}

async fn a_manual_firing_never_collides_with_or_counts_as_a_timer_slot(b: Backend) {
    let u = open(b).await;
    let name = ScheduleName::parse("nightly").unwrap();
    assert_eq!(u.store.last_timer_slots().await.unwrap(), []);
    let timer = FiringSlot::Timer(Timestamp::from_micros(1_000));
    assert!(
        u.store
            .claim_firing(&name, &timer, Timestamp::from_micros(1_000))
            .await
            .unwrap()
    );
    // A manual firing at the very instant of a timer slot is its own firing.
    let manual = FiringSlot::Manual {
        id: "a1b2".into(),
        at: Timestamp::from_micros(1_000),
    };
    assert!(
        u.store
            .claim_firing(&name, &manual, Timestamp::from_micros(1_000))
            .await
            .unwrap()
    );
    let later_manual = FiringSlot::Manual {
        id: "c3d4".into(),
        at: Timestamp::from_micros(9_000),
    };
    assert!(
        u.store
            .claim_firing(&name, &later_manual, Timestamp::from_micros(9_000))
            .await
            .unwrap()
    );
    assert!(
        !u.store
            .claim_firing(&name, &later_manual, Timestamp::from_micros(9_001))
            .await
            .unwrap()
    );
    assert_eq!(
        u.store.last_timer_slots().await.unwrap(),
        [(name.clone(), Timestamp::from_micros(1_000))],
        "manual firings never count as timer slots"
    );
    let recent = u.store.recent_firings(&name, 10).await.unwrap();
    assert_eq!(recent.first().map(|f| &f.slot), Some(&later_manual));
    assert_eq!(recent.len(), 3);
    u.cleanup().await;
}

async fn answered_slack_threads_are_recorded_once_and_read_by_key(b: Backend) {
    let u = open(b).await;
    let s = &u.store;
    assert!(
        !s.answered_thread(Surface::Slack, "C1", "1.1")
            .await
            .unwrap()
    );
    for i in 0..3 {
        s.record_answered_thread(Surface::Slack, "C1", "1.1", Timestamp::from_micros(i))
            .await
            .unwrap();
    }
    assert!(
        s.answered_thread(Surface::Slack, "C1", "1.1")
            .await
            .unwrap()
    );
    assert!(
        !s.answered_thread(Surface::Slack, "C1", "1.2")
            .await
            .unwrap()
    );
    assert!(
        !s.answered_thread(Surface::Slack, "C2", "1.1")
            .await
            .unwrap()
    );
    // Keyed by surface: another surface never answered that thread.
    assert!(!s.answered_thread(Surface::Mcp, "C1", "1.1").await.unwrap());
    s.record_answered_thread(Surface::Mcp, "C1", "1.1", Timestamp::from_micros(5))
        .await
        .unwrap();
    assert!(s.answered_thread(Surface::Mcp, "C1", "1.1").await.unwrap());
    for (channel, ts) in [("", "1.1"), ("C1", ""), ("C 1", "1.1"), ("C1", "1.1\n")] {
        assert!(matches!(
            s.record_answered_thread(Surface::Slack, channel, ts, Timestamp::from_micros(0))
                .await,
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(
            s.answered_thread(Surface::Slack, channel, ts).await,
            Err(StoreError::Invalid(_))
        ));
    }
    u.cleanup().await;
}

async fn a_slack_retry_is_seen_once(b: Backend) {
    let u = open(b).await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let st = u.store.clone();
        tasks.push(tokio::spawn(async move {
            st.first_sighting(Surface::Slack, "Ev0123ABC", Timestamp::from_micros(i))
                .await
                .unwrap()
        }));
    }
    let mut firsts = 0;
    for t in tasks {
        firsts += usize::from(t.await.unwrap());
    }
    assert_eq!(firsts, 1);
    assert!(
        u.store
            .first_sighting(Surface::Slack, "Ev0123ABD", Timestamp::from_micros(9))
            .await
            .unwrap()
    );
    // Keyed by surface: the same id sent to another surface is that surface's first.
    assert!(
        u.store
            .first_sighting(Surface::Http, "Ev0123ABC", Timestamp::from_micros(10))
            .await
            .unwrap()
    );
    u.cleanup().await;
}

async fn an_ask_is_answered_once_from_anywhere_and_closed_asks_are_not(b: Backend) {
    let u = open(b).await;
    let s = &u.store;
    let run: authz_core::RunId = "01JASKRUN".parse().unwrap();
    let other: authz_core::RunId = "01JOTHERRUN".parse().unwrap();
    let ask = |id: &str, run: &authz_core::RunId, at: i64| ApprovalRecord {
        id: id.into(),
        run_id: run.clone(),
        principal: Some("slack:U1".parse().unwrap()),
        action: "fs.write".into(),
        tool: "write_file".into(),
        arguments: r#"{"path": "/w/notes.md", "content": "<b>"}"#.into(),
        state: ApprovalState::Open,
        asked_at: Timestamp::from_micros(at),
    };
    let at = Timestamp::from_micros(10);
    s.open_approval(&ask("b-second", &run, 2)).await.unwrap();
    s.open_approval(&ask("a-first", &run, 1)).await.unwrap();
    s.open_approval(&ask("elsewhere", &other, 1)).await.unwrap();
    let open = s.open_approvals(&run).await.unwrap();
    assert_eq!(
        open,
        vec![ask("a-first", &run, 1), ask("b-second", &run, 2)]
    );
    // Another run's ask is not answered through this run.
    assert!(
        !s.answer_approval("elsewhere", &run, true, "slack:U1", at)
            .await
            .unwrap()
    );
    // Two answers racing: one counts.
    let (one, two) = tokio::join!(
        s.answer_approval("a-first", &run, true, "slack:U1", at),
        s.answer_approval("a-first", &run, false, "slack:U1", at),
    );
    assert!(one.unwrap() ^ two.unwrap(), "exactly one answer counts");
    assert!(matches!(
        s.approval_state("a-first").await.unwrap(),
        Some(ApprovalState::Approved | ApprovalState::Denied)
    ));
    // A closed ask cannot be answered, nor closed again.
    assert!(s.close_approval("b-second", at).await.unwrap());
    assert!(!s.close_approval("b-second", at).await.unwrap());
    assert!(
        !s.answer_approval("b-second", &run, true, "slack:U1", at)
            .await
            .unwrap()
    );
    assert_eq!(
        s.approval_state("b-second").await.unwrap(),
        Some(ApprovalState::Closed)
    );
    assert!(s.open_approvals(&run).await.unwrap().is_empty());
    assert_eq!(s.approval_state("never").await.unwrap(), None);
    assert!(
        !s.answer_approval("never", &run, true, "x", at)
            .await
            .unwrap()
    );
    // A second ask with an id in use, a bad id, and a new ask that is not open are refused.
    assert!(s.open_approval(&ask("elsewhere", &other, 3)).await.is_err());
    for bad in ["", "a b", &"x".repeat(129)] {
        assert!(matches!(
            s.open_approval(&ask(bad, &run, 1)).await,
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(
            s.approval_state(bad).await,
            Err(StoreError::Invalid(_))
        ));
    }
    let answered = ApprovalRecord {
        state: ApprovalState::Approved,
        ..ask("pre-answered", &run, 1)
    };
    assert!(matches!(
        s.open_approval(&answered).await,
        Err(StoreError::Invalid(_))
    ));
    // A principal-less ask reads back without one.
    let anonymous = ApprovalRecord {
        principal: None,
        ..ask("nobody", &other, 5)
    };
    s.open_approval(&anonymous).await.unwrap();
    assert_eq!(
        s.open_approvals(&other).await.unwrap(),
        vec![ask("elsewhere", &other, 1), anonymous]
    );
    u.cleanup().await;
}

/// Pruning deletes what is past its retention, oldest first, at most a batch of each kind per
/// pass, and never what is still in use: an open approval, a schedule's latest firing and its
/// latest timer slot, a live run, or anything younger than its retention.
async fn records_past_their_retention_are_pruned_in_batches_and_nothing_in_use_is(b: Backend) {
    let u = open(b).await;
    let s = &u.store;
    let day = 86_400_000_000_i64;
    let now = Timestamp::from_micros(1_000 * day);
    let ago = |days: i64| Timestamp::from_micros(now.micros() - days * day);
    for i in 0..3 {
        assert!(
            s.first_sighting(Surface::Slack, &format!("Ev-old-{i}"), ago(10))
                .await
                .unwrap()
        );
    }
    assert!(
        s.first_sighting(Surface::Slack, "Ev-new", ago(1))
            .await
            .unwrap()
    );
    s.record_answered_thread(Surface::Slack, "C1", "1.1", ago(100))
        .await
        .unwrap();
    s.record_answered_thread(Surface::Slack, "C1", "2.2", ago(1))
        .await
        .unwrap();
    let run_of_asks: authz_core::RunId = "01JASKRUN".parse().unwrap();
    let ask = |id: &str, at: Timestamp| ApprovalRecord {
        id: id.into(),
        run_id: run_of_asks.clone(),
        principal: None,
        action: "fs.write".into(),
        tool: "write_file".into(),
        arguments: "{}".into(),
        state: ApprovalState::Open,
        asked_at: at,
    };
    for (id, at) in [
        ("open-old", ago(60)),
        ("answered-old", ago(60)),
        ("answered-new", ago(1)),
    ] {
        s.open_approval(&ask(id, at)).await.unwrap();
    }
    for id in ["answered-old", "answered-new"] {
        assert!(
            s.answer_approval(id, &run_of_asks, true, "slack:U1", now)
                .await
                .unwrap()
        );
    }
    let nightly = ScheduleName::parse("nightly").unwrap();
    let weekly = ScheduleName::parse("weekly").unwrap();
    let manual = store::manual_slot(ago(150));
    for (name, slot) in [
        (&nightly, FiringSlot::Timer(ago(200))),
        (&nightly, FiringSlot::Timer(ago(199))),
        (&nightly, FiringSlot::Timer(ago(198))),
        (&nightly, manual.clone()),
        (&weekly, FiringSlot::Timer(ago(300))),
    ] {
        assert!(s.claim_firing(name, &slot, slot.at()).await.unwrap());
    }
    let fixture = |at: Timestamp| {
        new_run(
            "slack:C1",
            "slack:U1",
            ChannelVisibility::Public,
            at.micros(),
        )
    };
    let finish = |at: Timestamp| Finish {
        status: RunStatus::Completed,
        answer: Some("done".into()),
        error: None,
        at,
    };
    let old = s.create_run(fixture(ago(61))).await.unwrap();
    s.append_event(&old.id, ago(61), "text", "hello")
        .await
        .unwrap();
    s.add_friction(Friction {
        run_id: old.id.clone(),
        at: ago(61),
        kind: "tool error".into(),
        detail: "d".into(),
    })
    .await
    .unwrap();
    s.finish_run(&old.id, finish(ago(60))).await.unwrap();
    s.record_kept(&kept_of(&old.id, ago(60))).await.unwrap();
    let live = s.create_run(fixture(ago(61))).await.unwrap();
    let recent = s.create_run(fixture(ago(2))).await.unwrap();
    s.finish_run(&recent.id, finish(ago(1))).await.unwrap();

    let rules = Retention {
        runs: Some(std::time::Duration::from_secs(30 * 86_400)),
        batch: 2,
        ..Retention::default()
    };
    let first = s.prune(&rules, now).await.unwrap();
    assert_eq!(first.event_ids, 2, "a batch at most: {first:?}");
    assert!(first.full(rules.batch));
    let mut passes = 1;
    while s.prune(&rules, now).await.unwrap().full(rules.batch) {
        passes += 1;
        assert!(passes < 10, "pruning never finished");
    }
    assert!(
        s.prune(&rules, now).await.unwrap().total() == 0,
        "nothing is left to prune"
    );

    for i in 0..3 {
        assert!(
            s.first_sighting(Surface::Slack, &format!("Ev-old-{i}"), now)
                .await
                .unwrap(),
            "Ev-old-{i} was kept"
        );
    }
    assert!(
        !s.first_sighting(Surface::Slack, "Ev-new", now)
            .await
            .unwrap(),
        "a recent event id was pruned"
    );
    assert!(
        !s.answered_thread(Surface::Slack, "C1", "1.1")
            .await
            .unwrap()
    );
    assert!(
        s.answered_thread(Surface::Slack, "C1", "2.2")
            .await
            .unwrap()
    );
    assert_eq!(
        s.approval_state("open-old").await.unwrap(),
        Some(ApprovalState::Open)
    );
    assert_eq!(s.approval_state("answered-old").await.unwrap(), None);
    assert_eq!(
        s.approval_state("answered-new").await.unwrap(),
        Some(ApprovalState::Approved)
    );
    let left: Vec<FiringSlot> = s
        .recent_firings(&nightly, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.slot)
        .collect();
    assert_eq!(left, vec![manual, FiringSlot::Timer(ago(198))]);
    assert_eq!(s.recent_firings(&weekly, 10).await.unwrap().len(), 1);
    let mut timers = s.last_timer_slots().await.unwrap();
    timers.sort_by_key(|(n, _)| n.to_string());
    assert_eq!(timers, vec![(nightly, ago(198)), (weekly, ago(300))]);
    assert!(s.get_run(&old.id).await.unwrap().is_none());
    assert!(s.events(&old.id).await.unwrap().is_empty());
    assert!(s.friction(&old.id).await.unwrap().is_empty());
    assert_eq!(s.kept(&old.id).await.unwrap(), None);
    assert!(
        s.get_run(&live.id).await.unwrap().is_some(),
        "a live run was pruned"
    );
    assert!(s.get_run(&recent.id).await.unwrap().is_some());
    u.cleanup().await;
}

fn kept_of(run: &authz_core::RunId, at: Timestamp) -> KeptChanges {
    KeptChanges {
        run_id: run.clone(),
        repo: authz_core::RepoSlug::parse("acme/web").unwrap(),
        start: "a".repeat(40),
        tip: Some("b".repeat(40)),
        commits: 2,
        not_kept: vec!["config/secret.toml".into(), "a, \"quoted\"\nname".into()],
        not_kept_count: 7,
        kept_at: at,
    }
}

/// What keeping left is read back as written, once per run, and only for a run that exists.
async fn what_keeping_left_is_recorded_once_per_existing_run(b: Backend) {
    let u = open(b).await;
    let s = &u.store;
    let run = s
        .create_run(new_run(
            "slack:C1",
            "slack:U1",
            ChannelVisibility::Public,
            5,
        ))
        .await
        .unwrap();
    assert_eq!(s.kept(&run.id).await.unwrap(), None);
    let kept = kept_of(&run.id, Timestamp::from_micros(9));
    s.record_kept(&kept).await.unwrap();
    assert_eq!(s.kept(&run.id).await.unwrap(), Some(kept.clone()));
    let again = KeptChanges {
        tip: None,
        ..kept.clone()
    };
    assert!(matches!(
        s.record_kept(&again).await,
        Err(StoreError::Invalid(_))
    ));
    assert_eq!(s.kept(&run.id).await.unwrap(), Some(kept.clone()));
    let nothing = s
        .create_run(new_run(
            "slack:C1",
            "slack:U1",
            ChannelVisibility::Public,
            6,
        ))
        .await
        .unwrap();
    let none_kept = KeptChanges {
        run_id: nothing.id.clone(),
        tip: None,
        commits: 0,
        not_kept: vec![],
        not_kept_count: 0,
        ..kept.clone()
    };
    s.record_kept(&none_kept).await.unwrap();
    assert_eq!(s.kept(&nothing.id).await.unwrap(), Some(none_kept));
    let missing: authz_core::RunId = "01JNOSUCHRUN".parse().unwrap();
    assert!(matches!(
        s.record_kept(&kept_of(&missing, Timestamp::from_micros(1)))
            .await,
        Err(StoreError::NoSuchRun(_))
    ));
    u.cleanup().await;
}
