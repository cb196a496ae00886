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

/// A plain actor, a third of the time with membership facts a directory supplied.
fn plain() -> impl Strategy<Value = Actor> {
    let facts = prop_oneof![
        2 => Just(Vec::new()),
        1 => subsequence(CHANNELS.to_vec(), 1..=3),
    ];
    (select(USERS.to_vec()), grants(), facts).prop_map(|(u, g, facts)| {
        let id: authz_core::ActorId = u.parse().unwrap();
        Actor {
            kind: ActorKind::of_namespace(id.namespace()),
            id,
            grants: g,
            on_behalf_of: None,
            memberships: facts.into_iter().map(|c| c.parse().unwrap()).collect(),
            groups: Default::default(),
            group_facts: Default::default(),
            outsider: false,
            origin: None,
        }
    })
}

/// A person or token whose grants come from groups, resolved through a real table: a declared
/// group that lists it or not, and a Slack or identity provider's group the surface learned
/// it is in, or not. Each group grants a few actions and channels (a Slack group never `all`).
fn in_groups() -> impl Strategy<Value = Actor> {
    let some = |v: Vec<&'static str>| format!("{v:?}");
    (
        select(USERS[..4].to_vec()),
        subsequence(vec!["runs:read", "runs:write", "friction:read"], 0..=3).prop_map(some),
        subsequence(CHANNELS.to_vec(), 0..=4).prop_map(some),
        subsequence(vec!["runs:read", "friction:read"], 0..=2).prop_map(some),
        prop_oneof![Just("\"all\"".to_owned()), subsequence(CHANNELS.to_vec(), 0..=3).prop_map(some)],
        any::<(bool, bool)>(),
    )
        .prop_map(|(user, team_actions, team_channels, learned_actions, learned_channels, (listed, knows))| {
            let learned = if user.starts_with("slack:") { "group:slack:S1" } else { "group:access:eng" };
            // A Slack group's grants may hold no `all`.
            let learned_channels = if learned.contains("slack") && learned_channels.contains("all") {
                "[]".to_owned()
            } else {
                learned_channels
            };
            let members = if listed { format!("{user:?}") } else { String::new() };
            let text = format!(
                "[groups]\nteam = [{members}]\n\
                 [grants.\"group:team\"]\nactions = {team_actions}\nchannels = {team_channels}\n\
                 [grants.\"{learned}\"]\nactions = {learned_actions}\nchannels = {learned_channels}\n"
            );
            let table = GrantsTable::from_config(&toml::from_str(&text).unwrap(), Default::default()).unwrap();
            let facts = authz_core::GroupFacts {
                member_of: knows.then(|| authz_core::GroupId::parse(learned).unwrap()).into_iter().collect(),
                unresolved: Default::default(),
            };
            table.resolve(user.parse().unwrap(), facts, false)
        })
}

fn actor() -> impl Strategy<Value = Actor> {
    prop_oneof![
        3 => plain(),
        1 => in_groups(),
        1 => in_groups().prop_map(|p| resolve_agent(&"coding".parse().unwrap(), Some(p), &GrantsTable::default())),
        1 => (plain(), grants()).prop_map(|(p, own)| {
            let mut a = resolve_agent(&"coding".parse().unwrap(), Some(p), &GrantsTable::default());
            a.grants = own;
            a
        }),
        1 => (plain(), select(ActorKind::ALL.to_vec())).prop_map(|(mut a, k)| { a.kind = k; a }),
    ]
}

/// The fixture's size: enough runs that a page size of 1–60 pages through several times,
/// with every channel, user, repo, visibility and status mixed, and ties on `created_at`.
const FIXTURE_RUNS: u64 = 240;

/// How many generated cases each back end checks; `PROPTEST_CASES` asks for more (or fewer).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// A deterministic spread of runs (xorshift from a fixed seed), so a failure reproduces. Runs
/// come in bursts (each attribute usually repeats the run before's), so one branch often holds
/// a whole page on its own, and the merge must continue it across rounds.
fn fixture() -> Vec<store::NewRun> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        usize::try_from(x % n as u64).unwrap()
    };
    let sticky = |last: &mut usize, n: usize, next: &mut dyn FnMut(usize) -> usize| {
        if next(10) >= 8 {
            *last = next(n);
        }
        *last
    };
    let (mut c, mut u, mut v, mut r) = (0, 0, 0, 0);
    (0..FIXTURE_RUNS)
        .map(|i| {
            let mut n = new_run(
                CHANNELS[sticky(&mut c, CHANNELS.len(), &mut next)],
                USERS[sticky(&mut u, USERS.len(), &mut next)],
                ChannelVisibility::ALL[sticky(&mut v, 5, &mut next)],
                i64::try_from(i / 3).unwrap(),
            );
            n.repo = match sticky(&mut r, 3, &mut next) {
                0 => None,
                k => Some(REPOS[k - 1].parse().unwrap()),
            };
            n
        })
        .collect()
}

/// One back end with the fixture in it, read two ways: with the walk and by branches alone.
struct Fixture {
    walking: Under,
    branches: std::sync::Arc<dyn store::Store>,
    stored: Vec<store::RunRecord>,
}

async fn build(backend: Backend) -> Fixture {
    let walking = open_walking(backend, store::DEFAULT_WALK_PAGES).await;
    let mut stored = Vec::new();
    for (i, n) in fixture().into_iter().enumerate() {
        let mut run = walking.store.create_run(n).await.unwrap();
        // About two in three finish; the rest stay live.
        if i % 3 != 0 {
            let end = store::Finish {
                status: store::RunStatus::Completed,
                answer: None,
                error: None,
                at: run.created_at,
            };
            run = walking.store.finish_run(&run.id, end).await.unwrap();
        }
        stored.push(run);
    }
    // The same database through a second handle that goes straight to the branches.
    let branches: std::sync::Arc<dyn store::Store> = match (&walking.sqlite, &walking.postgres) {
        (Some(s), _) => std::sync::Arc::new(
            store::SqliteStore::open(s.spec())
                .await
                .unwrap()
                .with_walk_pages(0),
        ),
        (_, Some(p)) => std::sync::Arc::new(
            store::PostgresStore::open(p.spec())
                .await
                .unwrap()
                .with_walk_pages(0),
        ),
        _ => walking.store.clone(),
    };
    Fixture {
        walking,
        branches,
        stored,
    }
}

const STATUSES: [StatusFilter; 3] = [
    StatusFilter::All,
    StatusFilter::Live,
    StatusFilter::Finished,
];
const ACTIONS: [&str; 3] = ["runs:read", "runs:write", "friction:read"];

fn differential(backend: Backend) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fx = rt.block_on(build(backend));
    let pages_checked = std::cell::Cell::new(0usize);
    let config = ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(actor in actor(), a in 0..ACTIONS.len(), st in 0..STATUSES.len(), limit in 1u32..60, walk in proptest::bool::ANY)| {
        let (a, status) = (act(ACTIONS[a]), STATUSES[st]);
        let p = predicate_for(&actor, &a, ResourceType::Run);
        let store = if walk { fx.walking.store.clone() } else { fx.branches.clone() };
        let (listed, pages) = rt.block_on(all_pages_counted(&*store, ListRuns { visible_to: p.clone(), status, limit, before: None }));
        pages_checked.set(pages_checked.get() + pages);
        let wanted = |r: &&store::RunRecord| match status {
            StatusFilter::All => true,
            StatusFilter::Live => r.status.is_live(),
            StatusFilter::Finished => !r.status.is_live(),
        };
        let mut allowed: Vec<&store::RunRecord> = fx.stored.iter().filter(wanted).filter(|r| authorize(&actor, &a, &authz_core::Resource::Run(r.facts())).is_allow()).collect();
        allowed.sort_by(|x, y| (y.created_at, &y.id).cmp(&(x.created_at, &x.id)));
        let allowed: Vec<_> = allowed.into_iter().map(|r| r.id.clone()).collect();
        prop_assert_eq!(ids(&listed), allowed, "{} {:?} limit {} walk {} for {:?} via {:?}", a, status, limit, walk, actor, p);
    });
    let checked = pages_checked.get();
    eprintln!("{backend:?}: {checked} predicate × page checks over {FIXTURE_RUNS} runs");
    assert!(
        checked >= cases() as usize,
        "every case checks at least one page"
    );
    rt.block_on(fx.walking.cleanup());
}

#[test]
fn sqlite_list_equals_point_authorize() {
    differential(Backend::Sqlite);
}

#[test]
fn postgres_list_equals_point_authorize() {
    differential(Backend::Postgres);
}

#[test]
fn memory_list_equals_point_authorize() {
    differential(Backend::Memory);
}
