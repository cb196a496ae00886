//! The SQL differential: generated runs (every visibility, stamped and not) and generated
//! actors; listing with `predicate_for(actor)` returns exactly the runs point `authorize`
//! allows, on SQLite and on Postgres.

use authz_core::{
    Action, Actor, ActorKind, ChannelVisibility, GrantSet, Grants, GrantsTable, ResourceType,
    authorize, predicate_for, resolve_agent,
};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use store::{ListRuns, StatusFilter};

use crate::support::*;

const CHANNELS: [&str; 8] = [
    "slack:C1",
    "slack:C2",
    "slack:G1",
    "slack:D1",
    "http:ops",
    "http:billing",
    "mcp:ci",
    "cli:local",
];
const USERS: [&str; 5] = [
    "slack:U1",
    "slack:U2",
    "http:ops-bot",
    "access:alice",
    "cli:local",
];
const REPOS: [&str; 2] = ["acme/web", "acme/payments"];

fn act(s: &str) -> Action {
    s.parse().unwrap()
}

fn grants() -> impl Strategy<Value = Grants> {
    let actions = prop_oneof![
        1 => Just(GrantSet::All),
        4 => subsequence(vec!["runs:read", "runs:write", "friction:read", "help:read"], 0..=3).prop_map(|v| GrantSet::only(v.into_iter().map(act))),
    ];
    let channels = prop_oneof![
        1 => Just(GrantSet::All),
        4 => subsequence(CHANNELS.to_vec(), 0..=4).prop_map(|v| GrantSet::only(v.into_iter().map(|c| c.parse().unwrap()))),
    ];
    let repos = subsequence(REPOS.to_vec(), 0..=2)
        .prop_map(|v| GrantSet::only(v.into_iter().map(|r| r.parse().unwrap())));
    (actions, channels, repos).prop_map(|(actions, channels, repos)| Grants {
        actions,
        channels,
        repos,
    })
}

fn plain() -> impl Strategy<Value = Actor> {
    (select(USERS.to_vec()), grants()).prop_map(|(u, g)| {
        let id: authz_core::ActorId = u.parse().unwrap();
        Actor {
            kind: ActorKind::of_namespace(id.namespace()),
            id,
            grants: g,
            on_behalf_of: None,
            origin: None,
        }
    })
}

fn actor() -> impl Strategy<Value = Actor> {
    prop_oneof![
        3 => plain(),
        1 => (plain(), grants()).prop_map(|(p, own)| {
            let mut a = resolve_agent(&"coding".parse().unwrap(), Some(p), &GrantsTable::default());
            a.grants = own;
            a
        }),
        1 => (plain(), select(ActorKind::ALL.to_vec())).prop_map(|(mut a, k)| { a.kind = k; a }),
    ]
}

type FixtureRun = (usize, usize, Option<usize>, usize, i64, bool);

fn runs() -> impl Strategy<Value = Vec<FixtureRun>> {
    proptest::collection::vec(
        (
            0..CHANNELS.len(),
            0..USERS.len(),
            proptest::option::of(0..REPOS.len()),
            0..5usize,
            0..40i64,
            proptest::bool::weighted(0.7),
        ),
        1..40,
    )
}

async fn wipe(u: &Under) {
    for table in ["run_events", "friction", "runs"] {
        let sql = || sqlx::AssertSqlSafe(format!("DELETE FROM {table}"));
        if let Some(s) = &u.sqlite {
            sqlx::query(sql()).execute(s.pool()).await.unwrap();
        }
        if let Some(s) = &u.postgres {
            sqlx::query(sql()).execute(s.pool()).await.unwrap();
        }
    }
}

fn differential(backend: Backend, walk_pages: usize, cases: u32) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let under = std::cell::RefCell::new(rt.block_on(open_walking(backend, walk_pages)));
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(fixture in runs(), actors in proptest::collection::vec(actor(), 1..6), limit in 1u32..12)| {
        if matches!(backend, Backend::Memory) {
            *under.borrow_mut() = rt.block_on(open(backend));
        }
        let u = under.borrow();
        rt.block_on(async {
            wipe(&u).await;
            let mut stored = Vec::new();
            for (c, usr, repo, vis, at, finished) in &fixture {
                let mut n = new_run(CHANNELS[*c], USERS[*usr], ChannelVisibility::ALL[*vis], *at);
                n.repo = repo.map(|r| REPOS[r].parse().unwrap());
                let mut run = u.store.create_run(n).await.unwrap();
                if *finished {
                    let end = store::Finish { status: store::RunStatus::Completed, answer: None, error: None, at: run.created_at };
                    run = u.store.finish_run(&run.id, end).await.unwrap();
                }
                stored.push(run);
            }
            for actor in &actors {
                for a in ["runs:read", "runs:write", "friction:read"].map(act) {
                    let p = predicate_for(actor, &a, ResourceType::Run);
                    for status in [StatusFilter::All, StatusFilter::Live, StatusFilter::Finished] {
                        let listed = ids(&all_pages(&*u.store, ListRuns { visible_to: p.clone(), status, limit, before: None }).await);
                        let wanted = |r: &&store::RunRecord| match status {
                            StatusFilter::All => true,
                            StatusFilter::Live => r.status.is_live(),
                            StatusFilter::Finished => !r.status.is_live(),
                        };
                        let mut allowed: Vec<&store::RunRecord> = stored.iter().filter(wanted).filter(|r| authorize(actor, &a, &authz_core::Resource::Run(r.facts())).is_allow()).collect();
                        allowed.sort_by(|x, y| (y.created_at, &y.id).cmp(&(x.created_at, &x.id)));
                        let allowed: Vec<_> = allowed.into_iter().map(|r| r.id.clone()).collect();
                        assert_eq!(listed, allowed, "{a} {status:?} for {actor:?} via {p:?}");
                    }
                }
            }
        });
    });
    rt.block_on(under.into_inner().cleanup());
}

#[test]
fn sqlite_list_equals_point_authorize() {
    differential(Backend::Sqlite, store::DEFAULT_WALK_PAGES, 96);
}

#[test]
fn sqlite_branches_alone_equal_point_authorize() {
    differential(Backend::Sqlite, 0, 64);
}

#[test]
fn postgres_list_equals_point_authorize() {
    differential(Backend::Postgres, store::DEFAULT_WALK_PAGES, 96);
}

#[test]
fn postgres_branches_alone_equal_point_authorize() {
    differential(Backend::Postgres, 0, 64);
}

#[test]
fn memory_list_equals_point_authorize() {
    differential(Backend::Memory, 0, 96);
}
