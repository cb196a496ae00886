//! The run store contract, run against every back end.

use std::collections::BTreeSet;
use std::time::Duration;

use authz_core::{ChannelVisibility as V, Predicate, RunId, Surface};
use store::{
    Finish, Friction, ListRuns, ReplicaId, RunStatus, StatusFilter, StoreError, Timestamp,
    TokenHash,
};

use crate::contract;
use crate::support::*;

contract!(
    crud_and_status_transitions,
    events_keep_their_order_under_concurrent_appends,
    each_predicate_shape_lists_what_matches,
    pages_have_no_duplicates_and_no_gaps_under_concurrent_inserts,
    friction_report_reads_only_visible_runs,
    tombstones_keep_stamp_and_events_and_spare_live_replicas,
    bad_input_is_an_error_and_writes_nothing,
    servers_are_the_replicas_that_announced_and_renew_their_lease,
);

/// A replica that announced itself a server is one while its lease is renewed, with its
/// version and start; a replica that only heartbeats (a command-line process) never is; a
/// retired one is no longer.
async fn servers_are_the_replicas_that_announced_and_renew_their_lease(b: Backend) {
    let u = open(b).await;
    let s = &*u.store;
    let now = Timestamp::from_micros(1_000_000_000_000);
    let ago = |secs: u64| now.saturating_sub(Duration::from_secs(secs));
    let (a, b_, cli) = (
        ReplicaId::parse("serve-a").unwrap(),
        ReplicaId::parse("serve-b").unwrap(),
        ReplicaId::parse("cli-host-42").unwrap(),
    );
    s.announce_server(&a, "0.1.0", ago(7200), ago(3))
        .await
        .unwrap();
    s.announce_server(&b_, "0.2.0", ago(60), ago(120))
        .await
        .unwrap();
    s.heartbeat(&cli, now).await.unwrap();
    let alive = s.servers(ago(30)).await.unwrap();
    assert_eq!(alive.len(), 1, "{alive:?}");
    assert_eq!(alive[0].replica, a);
    assert_eq!(alive[0].version, "0.1.0");
    assert_eq!(alive[0].started_at, ago(7200));
    assert_eq!(alive[0].heartbeat_at, ago(3));
    // b renews its lease: both, the latest started first.
    s.heartbeat(&b_, now).await.unwrap();
    let both: Vec<String> = s
        .servers(ago(30))
        .await
        .unwrap()
        .iter()
        .map(|i| i.replica.as_str().to_owned())
        .collect();
    assert_eq!(both, ["serve-b", "serve-a"]);
    s.retire_server(&b_).await.unwrap();
    let left: Vec<String> = s
        .servers(ago(30))
        .await
        .unwrap()
        .iter()
        .map(|i| i.replica.as_str().to_owned())
        .collect();
    assert_eq!(left, ["serve-a"]);
}

fn list(p: Predicate, limit: u32) -> ListRuns {
    ListRuns {
        visible_to: p,
        status: StatusFilter::All,
        limit,
        before: None,
    }
}

async fn crud_and_status_transitions(b: Backend) {
    let u = open(b).await;
    let s = &*u.store;
    let mut new = new_run("slack:G1", "slack:U1", V::Private, 1_000);
    new.repo = Some("Acme/Web".parse().unwrap());
    new.capability_token = Some(TokenHash::of("cap-token"));
    new.owner = Some(ReplicaId::parse("r-a").unwrap());
    let run = s.create_run(new).await.unwrap();
    assert_eq!(run.status, RunStatus::Queued);
    assert_eq!(
        run.repo.as_ref().unwrap().as_str(),
        "acme/web",
        "slugs are stored lower-cased"
    );
    assert_eq!(run.channel_visibility, V::Private);
    assert!(run.capability_token.as_ref().unwrap().matches("cap-token"));
    assert_eq!(s.get_run(&run.id).await.unwrap().unwrap(), run);
    assert_eq!(run.parent_run, None);
    let mut child = new_run("slack:G1", "slack:U1", V::Private, 1_001);
    child.parent_run = Some(run.id.clone());
    let child = s.create_run(child).await.unwrap();
    assert_eq!(
        child.parent_run.as_ref(),
        Some(&run.id),
        "a child run names its parent"
    );
    assert_eq!(s.get_run(&child.id).await.unwrap().unwrap(), child);

    s.start_run(&run.id).await.unwrap();
    assert_eq!(
        s.get_run(&run.id).await.unwrap().unwrap().status,
        RunStatus::Running
    );
    let done = s
        .finish_run(
            &run.id,
            Finish {
                status: RunStatus::Completed,
                answer: Some("42".into()),
                error: None,
                at: Timestamp::from_micros(2_000),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (done.status, done.answer.as_deref(), done.finished_at),
        (
            RunStatus::Completed,
            Some("42"),
            Some(Timestamp::from_micros(2_000))
        )
    );
    let again = s
        .finish_run(
            &run.id,
            Finish {
                status: RunStatus::Stopped,
                answer: None,
                error: None,
                at: Timestamp::from_micros(3_000),
            },
        )
        .await;
    assert!(
        matches!(
            again,
            Err(StoreError::AlreadyFinished {
                status: RunStatus::Completed,
                ..
            })
        ),
        "{again:?}"
    );
    assert!(matches!(
        s.start_run(&run.id).await,
        Err(StoreError::AlreadyFinished { .. })
    ));
    assert_eq!(
        s.get_run(&run.id).await.unwrap().unwrap().status,
        RunStatus::Completed,
        "a terminal status never changes"
    );

    let missing = RunId::parse("nope").unwrap();
    assert_eq!(s.get_run(&missing).await.unwrap(), None);
    assert!(matches!(
        s.start_run(&missing).await,
        Err(StoreError::NoSuchRun(_))
    ));
    assert!(matches!(
        s.append_event(&missing, Timestamp::from_micros(1), "k", "b")
            .await,
        Err(StoreError::NoSuchRun(_))
    ));
    let live_finish = s
        .finish_run(
            &run.id,
            Finish {
                status: RunStatus::Running,
                answer: None,
                error: None,
                at: Timestamp::from_micros(1),
            },
        )
        .await;
    assert!(matches!(live_finish, Err(StoreError::Invalid(_))));
    u.cleanup().await;
}

async fn events_keep_their_order_under_concurrent_appends(b: Backend) {
    let u = open(b).await;
    let run = u
        .store
        .create_run(new_run("cli:local", "cli:local", V::Machine, 1))
        .await
        .unwrap();
    for i in 0..5 {
        assert_eq!(
            u.store
                .append_event(&run.id, Timestamp::from_micros(i), "line", &format!("e{i}"))
                .await
                .unwrap(),
            i + 1
        );
    }
    let mut tasks = Vec::new();
    for i in 0..20 {
        let (st, id) = (u.store.clone(), run.id.clone());
        tasks.push(tokio::spawn(async move {
            st.append_event(&id, Timestamp::from_micros(100 + i), "par", "x")
                .await
                .unwrap()
        }));
    }
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.push(t.await.unwrap());
    }
    seqs.sort();
    assert_eq!(
        seqs,
        (6..=25).collect::<Vec<i64>>(),
        "every append gets its own next number"
    );
    let events = u.store.events(&run.id).await.unwrap();
    assert_eq!(events.len(), 25);
    assert!(events.windows(2).all(|w| w[0].seq + 1 == w[1].seq));
    assert_eq!(events[2].body, "e2");
    u.cleanup().await;
}

/// A fixture with every visibility, several channels, users and repos.
async fn fixture(u: &Under) -> Vec<store::RunRecord> {
    let channels = [
        "slack:C1",
        "slack:G1",
        "slack:D1",
        "http:ops",
        "http:billing",
    ];
    let users = ["slack:U1", "slack:U2", "http:ops-bot"];
    let mut out = Vec::new();
    for i in 0..60i64 {
        let idx = i as usize;
        let mut n = new_run(
            channels[idx % 5],
            users[idx % 3],
            V::ALL[idx % 5],
            10_000 + i * 10 + (idx % 7) as i64,
        );
        n.repo = (i % 4 == 0).then(|| "acme/web".parse().unwrap());
        out.push(u.store.create_run(n).await.unwrap());
    }
    // Same timestamp, different ids: the keyset must order by id too.
    for _ in 0..3 {
        out.push(
            u.store
                .create_run(new_run("slack:C1", "slack:U1", V::Public, 10_300))
                .await
                .unwrap(),
        );
    }
    out
}

fn expected(runs: &[store::RunRecord], p: &Predicate) -> Vec<RunId> {
    let mut v: Vec<&store::RunRecord> = runs
        .iter()
        .filter(|r| authz_core::matches(p, &r.facts()))
        .collect();
    v.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    v.into_iter().map(|r| r.id.clone()).collect()
}

async fn each_predicate_shape_lists_what_matches(b: Backend) {
    let u = open(b).await;
    let runs = fixture(&u).await;
    let ch = |s: &str| s.parse().unwrap();
    let shapes = vec![
        Predicate::None,
        Predicate::All,
        Predicate::ChannelsIn(vec![ch("slack:G1"), ch("http:ops")]),
        Predicate::VisibilityIn(vec![V::Public]),
        Predicate::VisibilityIn(vec![V::Unknown, V::Dm]),
        Predicate::UserIs("slack:U2".parse().unwrap()),
        Predicate::ReposIn(vec!["acme/web".parse().unwrap()]),
        Predicate::Or(vec![
            Predicate::ChannelsIn(vec![ch("http:ops")]),
            Predicate::VisibilityIn(vec![V::Public]),
            Predicate::UserIs("slack:U1".parse().unwrap()),
        ]),
        Predicate::And(vec![
            Predicate::ChannelsIn(vec![ch("slack:C1"), ch("slack:G1")]),
            Predicate::Or(vec![
                Predicate::VisibilityIn(vec![V::Public]),
                Predicate::ReposIn(vec!["acme/web".parse().unwrap()]),
            ]),
        ]),
    ];
    for p in shapes {
        let want = expected(&runs, &p);
        for limit in [1, 7, 50, 1000] {
            let got = ids(&all_pages(&*u.store, list(p.clone(), limit)).await);
            assert_eq!(got, want, "{p:?} limit {limit}");
        }
    }
    // Status filters.
    let first = &runs[0].id;
    u.store.start_run(first).await.unwrap();
    let live = all_pages(
        &*u.store,
        ListRuns {
            status: StatusFilter::Live,
            ..list(Predicate::All, 10)
        },
    )
    .await;
    assert_eq!(
        live.len(),
        runs.len(),
        "every fixture run is queued or running"
    );
    u.store
        .finish_run(
            first,
            Finish {
                status: RunStatus::Failed,
                answer: None,
                error: Some("x".into()),
                at: Timestamp::from_micros(1),
            },
        )
        .await
        .unwrap();
    let finished = all_pages(
        &*u.store,
        ListRuns {
            status: StatusFilter::Finished,
            ..list(Predicate::All, 10)
        },
    )
    .await;
    assert_eq!(ids(&finished), vec![first.clone()]);
    let finished_public = all_pages(
        &*u.store,
        ListRuns {
            status: StatusFilter::Finished,
            ..list(Predicate::VisibilityIn(vec![runs[0].channel_visibility]), 3)
        },
    )
    .await;
    assert_eq!(ids(&finished_public), vec![first.clone()]);
    u.cleanup().await;
}

async fn pages_have_no_duplicates_and_no_gaps_under_concurrent_inserts(b: Backend) {
    let u = open(b).await;
    let mut original = Vec::new();
    for i in 0..120 {
        let ch = if i % 2 == 0 { "slack:C1" } else { "http:ops" };
        original.push(
            u.store
                .create_run(new_run(ch, "slack:U1", V::Public, 1_000 + i))
                .await
                .unwrap(),
        );
    }
    let writer = {
        let st = u.store.clone();
        tokio::spawn(async move {
            for i in 0..120 {
                let ch = if i % 2 == 0 { "slack:C1" } else { "http:ops" };
                st.create_run(new_run(ch, "slack:U1", V::Public, 1_000_000 + i))
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    let p = Predicate::Or(vec![
        Predicate::ChannelsIn(vec!["http:ops".parse().unwrap()]),
        Predicate::VisibilityIn(vec![V::Public]),
    ]);
    let mut q = list(p, 9);
    let first = u.store.list_runs(&q).await.unwrap();
    // Start after the first page, as a reader holding a cursor would.
    let mut seen: Vec<RunId> = ids(&first.runs);
    q.before = first.next;
    while let Some(c) = q.before.take() {
        let page = u
            .store
            .list_runs(&ListRuns {
                before: Some(c),
                ..q.clone()
            })
            .await
            .unwrap();
        seen.extend(ids(&page.runs));
        q.before = page.next;
    }
    writer.await.unwrap();
    let from_original: Vec<RunId> = seen
        .iter()
        .filter(|id| original.iter().any(|r| &r.id == *id))
        .cloned()
        .collect();
    let unique: BTreeSet<&RunId> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no duplicates");
    let mut want = original.clone();
    want.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    assert_eq!(
        from_original,
        ids(&want),
        "no gaps: every run present at the start is listed, in order"
    );
    u.cleanup().await;
}

async fn friction_report_reads_only_visible_runs(b: Backend) {
    let u = open(b).await;
    let s = &*u.store;
    let public = s
        .create_run(new_run("slack:C1", "slack:U2", V::Public, 100))
        .await
        .unwrap();
    let private = s
        .create_run(new_run("slack:G1", "slack:U2", V::Private, 200))
        .await
        .unwrap();
    let machine = s
        .create_run(new_run("http:ops", "http:ops-bot", V::Machine, 300))
        .await
        .unwrap();
    for (run, at) in [
        (&public, 1_000),
        (&private, 2_000),
        (&machine, 3_000),
        (&machine, 50),
    ] {
        s.add_friction(Friction {
            run_id: run.id.clone(),
            at: Timestamp::from_micros(at),
            kind: "tool error".into(),
            detail: "d".into(),
        })
        .await
        .unwrap();
    }
    let since = Timestamp::from_micros(500);
    let fleet = s
        .friction_recent(&Predicate::All, since, 100)
        .await
        .unwrap();
    assert_eq!(fleet.len(), 3, "the window excludes older friction");
    assert_eq!(fleet[0].friction.run_id, machine.id, "newest first");
    let token = Predicate::Or(vec![
        Predicate::ChannelsIn(vec!["http:ops".parse().unwrap()]),
        Predicate::VisibilityIn(vec![V::Public]),
    ]);
    let seen: BTreeSet<RunId> = s
        .friction_recent(&token, since, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.friction.run_id)
        .collect();
    assert_eq!(
        seen,
        [public.id.clone(), machine.id.clone()]
            .into_iter()
            .collect()
    );
    assert!(
        s.friction_recent(&Predicate::None, since, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.count_runs_since(&token, Timestamp::from_micros(0))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        s.count_runs_since(&Predicate::All, Timestamp::from_micros(150))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        s.count_runs_since(&Predicate::None, Timestamp::from_micros(0))
            .await
            .unwrap(),
        0
    );
    assert_eq!(s.friction(&machine.id).await.unwrap().len(), 2);
    u.cleanup().await;
}

async fn tombstones_keep_stamp_and_events_and_spare_live_replicas(b: Backend) {
    let u = open(b).await;
    let s = &*u.store;
    let now = Timestamp::from_micros(100_000_000);
    let lease = Duration::from_secs(30);
    let (a, live, dead) = (
        ReplicaId::parse("a").unwrap(),
        ReplicaId::parse("b").unwrap(),
        ReplicaId::parse("c").unwrap(),
    );
    s.heartbeat(&a, now).await.unwrap();
    s.heartbeat(&live, now.saturating_sub(Duration::from_secs(5)))
        .await
        .unwrap();
    s.heartbeat(&dead, now.saturating_sub(Duration::from_secs(300)))
        .await
        .unwrap();
    let make = |owner: Option<&ReplicaId>, at| {
        let mut n = new_run("slack:G1", "slack:U1", V::Private, at);
        n.owner = owner.cloned();
        n
    };
    let mine = s.create_run(make(Some(&a), 1)).await.unwrap();
    s.start_run(&mine.id).await.unwrap();
    s.append_event(
        &mine.id,
        Timestamp::from_micros(2),
        "line",
        "before the kill",
    )
    .await
    .unwrap();
    let theirs = s.create_run(make(Some(&live), 2)).await.unwrap();
    let ghost = s.create_run(make(Some(&dead), 3)).await.unwrap();
    let never = s
        .create_run(make(Some(&ReplicaId::parse("never-heartbeat").unwrap()), 4))
        .await
        .unwrap();
    let unowned = s.create_run(make(None, 5)).await.unwrap();
    let finished = s.create_run(make(Some(&dead), 6)).await.unwrap();
    s.finish_run(
        &finished.id,
        Finish {
            status: RunStatus::Completed,
            answer: None,
            error: None,
            at: Timestamp::from_micros(7),
        },
    )
    .await
    .unwrap();

    // A periodic reap by `live` kills only the expired owners' runs, never its own or a live one's.
    let reaped: BTreeSet<RunId> = s
        .tombstone_orphans(&live, now, lease, false)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(
        reaped,
        [ghost.id.clone(), never.id.clone()].into_iter().collect()
    );
    // `a` restarting: its own live runs and unowned ones go too.
    let restarted: BTreeSet<RunId> = s
        .tombstone_orphans(&a, now, lease, true)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(
        restarted,
        [mine.id.clone(), unowned.id.clone()].into_iter().collect()
    );

    let m = s.get_run(&mine.id).await.unwrap().unwrap();
    assert_eq!(m.status, RunStatus::Interrupted);
    assert_eq!(
        m.channel_visibility,
        V::Private,
        "the tombstone keeps its stamp"
    );
    assert_eq!(m.finished_at, Some(now));
    assert_eq!(
        s.events(&mine.id).await.unwrap()[0].body,
        "before the kill",
        "and its events"
    );
    assert_eq!(
        s.get_run(&theirs.id).await.unwrap().unwrap().status,
        RunStatus::Queued,
        "a live replica's run is spared"
    );
    assert_eq!(
        s.get_run(&finished.id).await.unwrap().unwrap().status,
        RunStatus::Completed
    );
    assert!(
        s.tombstone_orphans(&a, now, lease, true)
            .await
            .unwrap()
            .is_empty(),
        "idempotent"
    );
    u.cleanup().await;
}

async fn bad_input_is_an_error_and_writes_nothing(b: Backend) {
    let u = open(b).await;
    let s = &*u.store;
    s.create_run(new_run("slack:C1", "slack:U1", V::Public, 1))
        .await
        .unwrap();
    let corrupt = store::Cursor::decode("not-a-cursor");
    assert!(matches!(corrupt, Err(StoreError::BadCursor)));
    let wide = Predicate::ChannelsIn(vec![
        "slack:C1".parse().unwrap();
        store::DEFAULT_MAX_PREDICATE_WIDTH + 1
    ]);
    for bad in [
        wide,
        Predicate::And(vec![]),
        Predicate::Or(vec![Predicate::All, Predicate::Or(vec![])]),
    ] {
        let e = s.list_runs(&list(bad.clone(), 10)).await;
        assert!(
            matches!(e, Err(StoreError::MalformedPredicate(_))),
            "{bad:?}: {e:?}"
        );
        assert!(matches!(
            s.friction_recent(&bad, Timestamp::from_micros(0), 10).await,
            Err(StoreError::MalformedPredicate(_))
        ));
    }
    for limit in [0, 1001] {
        assert!(matches!(
            s.list_runs(&list(Predicate::All, limit)).await,
            Err(StoreError::Invalid(_))
        ));
    }
    assert!(matches!(
        s.first_sighting(Surface::Slack, "", Timestamp::from_micros(0))
            .await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        s.first_sighting(Surface::Slack, "Ev 1\n", Timestamp::from_micros(0))
            .await,
        Err(StoreError::Invalid(_))
    ));
    let all = all_pages(s, list(Predicate::All, 10)).await;
    assert_eq!(all.len(), 1, "nothing was written by the refused calls");
    u.cleanup().await;
}
