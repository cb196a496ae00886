//! A 50-run page for four actor shapes at 10k, 100k and 1M runs, on SQLite and Postgres,
//! side by side with the naive way (load every run, filter with `authorize`, sort, take 50)
//! and, on SQLite, with the same page read from SQLite directly (`raw.rs`): store ÷ raw is what
//! the store adds to the database's own work.
//!
//! Run with `scripts/bench.sh store` (or `cargo bench -p store --bench list_pages -- [sizes]`).
//! Fixtures are built once with batched inserts in one transaction and kept in
//! `target/bench/` (SQLite) and in schemas `sb_bench_<n>` (Postgres,
//! `$SWITCHBOARD_BENCH_POSTGRES_URL`, default the local test database).
// A bench binary: a broken fixture stops it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod raw;

use std::time::{Duration, Instant};

use authz_core::{
    Action, ActorKind, ChannelVisibility, GrantSet, Grants, Predicate, Resource, ResourceType,
    RunFacts, authorize, predicate_for,
};
use store::{ListRuns, PostgresStore, SqliteStore, StatusFilter, Store};

const CHANNELS: usize = 1000;
const USERS: usize = 5000;
const PAGE: u32 = 50;

fn visibility_of_channel(c: usize) -> ChannelVisibility {
    ChannelVisibility::ALL[c % 5]
}

/// Row `i` of the fixture: channel, user, visibility, created_at (µs, increasing).
fn row(i: usize) -> (String, String, &'static str, i64) {
    // A multiplicative hash spreads runs over channels and users without a pattern in time.
    let c = (i.wrapping_mul(2_654_435_761)) % CHANNELS;
    let u = (i.wrapping_mul(40_503)) % USERS;
    (
        format!("slack:C{c}"),
        format!("slack:U{u}"),
        visibility_of_channel(c).as_str(),
        1_700_000_000_000_000 + i as i64 * 1000,
    )
}

fn id(i: usize) -> String {
    format!("B{i:012}")
}

struct Shape {
    name: &'static str,
    actor: authz_core::Actor,
}

fn shapes() -> Vec<Shape> {
    let read: Action = "runs:read".parse().unwrap_or(Action::TraceRead);
    let actor = |id: &str, channels: GrantSet<authz_core::ChannelId>| authz_core::Actor {
        kind: ActorKind::User,
        id: id.parse().expect("actor id"),
        grants: Grants {
            actions: GrantSet::only([read.clone()]),
            channels,
            repos: GrantSet::none(),
        },
        on_behalf_of: None,
        memberships: Default::default(),
        groups: Default::default(),
        group_facts: Default::default(),
        outsider: false,
        origin: None,
    };
    // Granted channels are private ones (c % 5 == 1), so public runs do not cover them.
    let private_channels = |n: usize| {
        GrantSet::only((0..n).map(|k| format!("slack:C{}", k * 5 + 1).parse().expect("channel")))
    };
    vec![
        Shape {
            name: "all channels",
            actor: actor("access:ops", GrantSet::All),
        },
        Shape {
            name: "public + self",
            actor: actor("slack:U17", GrantSet::none()),
        },
        Shape {
            name: "10 channels",
            actor: actor("slack:U18", private_channels(10)),
        },
        Shape {
            name: "200 channels",
            actor: actor("slack:U19", private_channels(200)),
        },
    ]
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A shape's page through the store, and (on SQLite) the raw floor's reads of the same page,
/// timed in alternation so the machine's noise falls on both alike.
struct PageTimes {
    store: Duration,
    /// The faster raw read and its name.
    raw: Option<(Duration, &'static str)>,
}

async fn page_median(
    store: &dyn Store,
    p: &Predicate,
    iterations: usize,
    raw_conn: Option<&rusqlite::Connection>,
) -> PageTimes {
    let q = ListRuns {
        visible_to: p.clone(),
        status: StatusFilter::All,
        limit: PAGE,
        before: None,
    };
    for _ in 0..5 {
        store.list_runs(&q).await.expect("warm-up page");
    }
    // The store reads one row past the page (to know a next page exists); so does the floor.
    let mut raw = raw_conn.map(|c| raw::RawPage::prepare(c, p, PAGE as usize + 1));
    if let Some(raw) = raw.as_mut() {
        let want: Vec<String> = store
            .list_runs(&q)
            .await
            .expect("page")
            .runs
            .iter()
            .map(|r| r.id.to_string())
            .collect();
        let mut reads = vec![raw.scan()];
        if raw.merges() {
            reads.push(raw.merge());
        }
        for rows in reads {
            let got: Vec<&str> = rows.iter().take(PAGE as usize).map(raw::id_of).collect();
            assert_eq!(got, want, "the raw floor reads the store's page");
        }
    }
    let (mut times, mut scans, mut merges) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..iterations {
        let t = Instant::now();
        let page = store.list_runs(&q).await.expect("page");
        times.push(t.elapsed());
        assert_eq!(page.runs.len(), PAGE as usize, "a full page");
        if let Some(raw) = raw.as_mut() {
            let t = Instant::now();
            std::hint::black_box(raw.scan());
            scans.push(t.elapsed());
            if raw.merges() {
                let t = Instant::now();
                std::hint::black_box(raw.merge());
                merges.push(t.elapsed());
            }
        }
    }
    let raw = raw.map(|r| {
        let scan = (median(scans), if r.merges() { "walk" } else { "range" });
        if merges.is_empty() {
            scan
        } else {
            let merge = (median(merges), "merge");
            if merge.0 < scan.0 { merge } else { scan }
        }
    });
    PageTimes {
        store: median(times),
        raw,
    }
}

/// The naive way: every run through the store, filtered by point `authorize`, sorted, 50 taken.
async fn naive(store: &dyn Store, actor: &authz_core::Actor) -> Duration {
    let read: Action = "runs:read".parse().unwrap_or(Action::TraceRead);
    let t = Instant::now();
    let mut q = ListRuns {
        visible_to: Predicate::All,
        status: StatusFilter::All,
        limit: 1000,
        before: None,
    };
    let mut kept: Vec<RunFacts> = Vec::new();
    loop {
        let page = store.list_runs(&q).await.expect("page");
        kept.extend(
            page.runs
                .iter()
                .map(|r| r.facts())
                .filter(|f| authorize(actor, &read, &Resource::Run(f.clone())).is_allow()),
        );
        match page.next {
            Some(c) => q.before = Some(c),
            None => break,
        }
    }
    kept.truncate(PAGE as usize);
    t.elapsed()
}

fn sqlite_path(n: usize) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    std::fs::create_dir_all(&dir).expect("bench dir");
    dir.join(format!("runs-{n}.db"))
}

async fn sqlite_fixture(n: usize) -> SqliteStore {
    let path = sqlite_path(n);
    let url = format!("sqlite://{}", path.display());
    let spec = store::StoreSpec::parse(&url).expect("sqlite url");
    let store = SqliteStore::open(&spec).await.expect("sqlite");
    let have: i64 = sqlx::query_scalar("SELECT count(*) FROM runs")
        .fetch_one(store.pool())
        .await
        .expect("count");
    if have as usize != n {
        eprintln!("building the SQLite fixture of {n} runs…");
        let t = Instant::now();
        sqlx::query("DELETE FROM runs")
            .execute(store.pool())
            .await
            .expect("wipe");
        let mut tx = store.pool().begin().await.expect("tx");
        for chunk in (0..n).collect::<Vec<_>>().chunks(5000) {
            let json: Vec<String> = chunk
                .iter()
                .map(|&i| {
                    let (c, u, v, at) = row(i);
                    format!("[\"{}\",\"{c}\",\"{u}\",\"{v}\",{at}]", id(i))
                })
                .collect();
            sqlx::query(
                "INSERT INTO runs (id, surface, channel_id, user_id, agent, status, request, created_at, channel_visibility) \
                 SELECT value ->> 0, 'http', value ->> 1, value ->> 2, 'echo', 'completed', 'x', value ->> 4, value ->> 3 FROM json_each(?)",
            )
            .bind(format!("[{}]", json.join(",")))
            .execute(&mut *tx)
            .await
            .expect("insert");
        }
        tx.commit().await.expect("commit");
        sqlx::query("ANALYZE")
            .execute(store.pool())
            .await
            .expect("analyze");
        eprintln!("  built in {:.1}s", t.elapsed().as_secs_f64());
    }
    store
}

async fn postgres_fixture(url: &str, n: usize) -> PostgresStore {
    let schema = format!("sb_bench_{n}");
    let spec = store::StoreSpec {
        schema: Some(schema),
        ..store::StoreSpec::parse(url).expect("postgres url")
    };
    let store = PostgresStore::open(&spec).await.expect("postgres");
    let have: i64 = sqlx::query_scalar("SELECT count(*) FROM runs")
        .fetch_one(store.pool())
        .await
        .expect("count");
    if have as usize != n {
        eprintln!("building the Postgres fixture of {n} runs…");
        let t = Instant::now();
        let mut tx = store.pool().begin().await.expect("tx");
        sqlx::query("TRUNCATE runs CASCADE")
            .execute(&mut *tx)
            .await
            .expect("wipe");
        for chunk in (0..n).collect::<Vec<_>>().chunks(20_000) {
            let rows: Vec<_> = chunk.iter().map(|&i| (id(i), row(i))).collect();
            sqlx::query(
                "INSERT INTO runs (id, surface, channel_id, user_id, agent, status, request, created_at, channel_visibility) \
                 SELECT i, 'http', c, u, 'echo', 'completed', 'x', a, v FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[]) AS t(i, c, u, v, a)",
            )
            .bind(rows.iter().map(|r| r.0.clone()).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| r.1.0.clone()).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| r.1.1.clone()).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| r.1.2.to_owned()).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| r.1.3).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await
            .expect("insert");
        }
        tx.commit().await.expect("commit");
        // As autovacuum leaves a table in service: statistics, and a visibility map so index
        // scans need not visit the heap to learn what is visible.
        sqlx::query("VACUUM ANALYZE runs")
            .execute(store.pool())
            .await
            .expect("vacuum");
        eprintln!("  built in {:.1}s", t.elapsed().as_secs_f64());
    }
    store
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

async fn measure(
    backend: &str,
    store: &dyn Store,
    n: usize,
    naive_too: bool,
    raw_conn: Option<&rusqlite::Connection>,
    out: &mut Vec<String>,
) {
    let read: Action = "runs:read".parse().unwrap_or(Action::TraceRead);
    // Every shape's pages first, then the load-then-filter passes: a pass streams the whole
    // table through the caches and would otherwise cool them for the next shape's pages.
    let mut pages = Vec::new();
    for shape in shapes() {
        let p = predicate_for(&shape.actor, &read, ResourceType::Run);
        pages.push((shape.name, page_median(store, &p, 200, raw_conn).await));
    }
    for (shape, (name, page)) in shapes().into_iter().zip(pages) {
        let naive_time = if naive_too {
            Some(naive(store, &shape.actor).await)
        } else {
            None
        };
        let dash = || "—".to_owned();
        let line = format!(
            "| {backend} | {n} | {name} | {} | {} | {} | {} | {} |",
            ms(page.store),
            page.raw
                .map(|(t, how)| format!("{} ({how})", ms(t)))
                .unwrap_or_else(dash),
            page.raw
                .map(|(t, _)| format!("{:.2}×", page.store.as_secs_f64() / t.as_secs_f64()))
                .unwrap_or_else(dash),
            naive_time.map(ms).unwrap_or_else(dash),
            naive_time
                .map(|t| format!("{:.0}×", t.as_secs_f64() / page.store.as_secs_f64()))
                .unwrap_or_else(dash),
        );
        println!("{line}");
        out.push(line);
    }
}

fn main() {
    // `cargo bench` passes `--bench`; test runners listing or running targets do not. A
    // benchmark is never a test: anything else leaves at once.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    // Arguments: sizes (default 10000 100000 1000000), `sqlite` or `postgres` to run one back
    // end, `--no-naive` to skip load-then-filter.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![10_000, 100_000, 1_000_000];
    }
    let picked = args.iter().any(|a| a == "sqlite" || a == "postgres");
    let only = |b: &str| !picked || args.iter().any(|a| a == b);
    let naive_wanted = !args.iter().any(|a| a == "--no-naive");
    let pg_url = std::env::var("SWITCHBOARD_BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut out = Vec::new();
        println!(
            "| back end | runs | actor | page median (ms) | raw SQLite (ms) | store ÷ raw | load-then-filter (ms) | ratio |"
        );
        println!("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |");
        let largest = sizes.iter().copied().max().unwrap_or(0);
        for &n in &sizes {
            let naive_too = naive_wanted && n == largest;
            if only("sqlite") {
                let s = sqlite_fixture(n).await;
                let raw_conn = raw::open(&sqlite_path(n));
                measure("SQLite", &s, n, naive_too, Some(&raw_conn), &mut out).await;
            }
            if only("postgres") {
                let p = postgres_fixture(&pg_url, n).await;
                measure("Postgres", &p, n, naive_too, None, &mut out).await;
            }
        }
    });
}
