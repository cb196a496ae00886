//! `memory_context_block` over 10,000, 100,000 and 1,000,000 records across 1,000 scopes, on
//! SQLite and Postgres, and one reflection of a run with 10 candidates (the rules extractor:
//! no model). Sizes can be given: `cargo bench -p memory --bench memory -- 10000 100000`.
//!
//! The block is measured in rounds: every (store, size) takes its turn in each round, so the
//! sizes are compared under the same conditions.
//!
//! Run with `scripts/bench.sh memory` (or `cargo bench -p memory --bench memory`). Fixtures are
//! built once with batched inserts and kept in `target/bench/memory-<n>.db` (SQLite) and in
//! schemas `sb_bench_mem_<n>` (Postgres, `$SWITCHBOARD_BENCH_POSTGRES_URL`, default the local
//! test database). Of the records, 5% supersede the one before them in their scope and 5% are
//! forgotten, so the block's "live and not superseded" filter has work to do.
// A bench binary: a broken fixture stops it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use authz_core::{
    ActorId, ChannelId, ChannelVisibility, GrantsTable, RepoSlug, RunId, resolve_actor,
};
use memory::{Memory, MemorySettings, ReflectionInput, RunScopes, Transcript};
use store::{MemoryStore, PostgresStore, SqliteStore, Store};

const SCOPES: usize = 1000;
const ITERATIONS: usize = 2000;

/// Scope `s` of the fixture: 0 is org, then users, channels and repos, 333 of each.
fn scope(s: usize) -> (&'static str, String) {
    match (s, (s.saturating_sub(1)) % 3, (s.saturating_sub(1)) / 3) {
        (0, _, _) => ("org", "org".to_owned()),
        (_, 0, k) => ("user", format!("user:slack:U{k}")),
        (_, 1, k) => ("channel", format!("channel:slack:C{k}")),
        (_, _, k) => ("repo", format!("repo:acme/r{k}")),
    }
}

/// Row `i`: its scope (spread by a multiplicative hash), id, created_at, whether it
/// supersedes its scope's previous record, whether it is forgotten.
struct Row {
    scope: usize,
    id: String,
    at: i64,
    supersedes: Option<String>,
    forgotten: bool,
}

fn rows(n: usize) -> Vec<Row> {
    let mut last: Vec<Option<String>> = vec![None; SCOPES];
    (0..n)
        .map(|i| {
            let s = i.wrapping_mul(2_654_435_761) % SCOPES;
            let id = format!("M{i:012}");
            let supersedes = if i % 20 == 7 { last[s].clone() } else { None };
            last[s] = Some(id.clone());
            Row {
                scope: s,
                id,
                at: 1_700_000_000_000_000 + i as i64 * 1000,
                supersedes,
                forgotten: i % 20 == 13,
            }
        })
        .collect()
}

fn text(i: &Row) -> String {
    format!(
        "fact {} — the build box for this scope is ci-{}",
        i.id, i.scope
    )
}

async fn sqlite(n: usize) -> SqliteStore {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join(format!("memory-{n}.db")).display());
    let store = SqliteStore::open(&store::StoreSpec::parse(&url).unwrap())
        .await
        .unwrap();
    let have: i64 = sqlx::query_scalar("SELECT count(*) FROM memory_records")
        .fetch_one(store.pool())
        .await
        .unwrap();
    if have as usize != n {
        eprintln!("building the SQLite fixture of {n} memory records…");
        sqlx::query("DELETE FROM memory_records")
            .execute(store.pool())
            .await
            .unwrap();
        let mut tx = store.pool().begin().await.unwrap();
        for chunk in rows(n).chunks(5000) {
            let json: Vec<serde_json::Value> = chunk
                .iter()
                .map(|r| {
                    let (kind, key) = scope(r.scope);
                    serde_json::json!([
                        r.id,
                        kind,
                        key,
                        text(r),
                        r.supersedes,
                        r.at,
                        r.forgotten.then_some(r.at + 1)
                    ])
                })
                .collect();
            sqlx::query(
                "INSERT INTO memory_records (id, scope_kind, scope_key, text, supersedes, created_at, forgotten_at) \
                 SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6 FROM json_each(?)",
            )
            .bind(serde_json::Value::Array(json).to_string())
            .execute(&mut *tx)
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();
        sqlx::query("ANALYZE").execute(store.pool()).await.unwrap();
    }
    store
}

async fn postgres(url: &str, n: usize) -> PostgresStore {
    let spec = store::StoreSpec {
        schema: Some(format!("sb_bench_mem_{n}")),
        ..store::StoreSpec::parse(url).unwrap()
    };
    let store = PostgresStore::open(&spec).await.unwrap();
    let have: i64 = sqlx::query_scalar("SELECT count(*) FROM memory_records")
        .fetch_one(store.pool())
        .await
        .unwrap();
    if have as usize != n {
        eprintln!("building the Postgres fixture of {n} memory records…");
        let mut tx = store.pool().begin().await.unwrap();
        sqlx::query("TRUNCATE memory_records")
            .execute(&mut *tx)
            .await
            .unwrap();
        for chunk in rows(n).chunks(20_000) {
            let col = |f: &dyn Fn(&Row) -> String| chunk.iter().map(f).collect::<Vec<_>>();
            sqlx::query(
                "INSERT INTO memory_records (id, scope_kind, scope_key, text, supersedes, created_at, forgotten_at) \
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::int8[])",
            )
            .bind(col(&|r| r.id.clone()))
            .bind(col(&|r| scope(r.scope).0.to_owned()))
            .bind(col(&|r| scope(r.scope).1))
            .bind(col(&text))
            .bind(chunk.iter().map(|r| r.supersedes.clone()).collect::<Vec<_>>())
            .bind(chunk.iter().map(|r| r.at).collect::<Vec<_>>())
            .bind(chunk.iter().map(|r| r.forgotten.then_some(r.at + 1)).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();
        sqlx::query("VACUUM ANALYZE memory_records")
            .execute(store.pool())
            .await
            .unwrap();
    }
    store
}

/// The scopes of request `k`: org, and the k-th user, channel and repo.
fn request_scopes(k: usize) -> RunScopes {
    let k = k % 333;
    RunScopes {
        user: Some(ActorId::parse(&format!("slack:U{k}")).unwrap()),
        channel: Some(ChannelId::parse(&format!("slack:C{k}")).unwrap()),
        repo: Some(RepoSlug::parse(&format!("acme/r{k}")).unwrap()),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// Rounds in which every (store, size) takes its turn, so the sizes are compared side by side
/// under the same load rather than one after the other.
const ROUNDS: usize = 10;

/// One round of `ITERATIONS / ROUNDS` blocks, over requests rotating through 333 scope sets
/// (starting where the last round of this memory stopped); the records shown, summed.
async fn block_round(memory: &Memory, round: usize, times: &mut Vec<Duration>) -> usize {
    let per_round = ITERATIONS / ROUNDS;
    let mut shown = 0;
    for k in round * per_round..(round + 1) * per_round {
        let scopes = request_scopes(k * 7);
        let t = Instant::now();
        let b = memory.context_block(&scopes).await.unwrap();
        times.push(t.elapsed());
        shown += b.records().len();
    }
    shown
}

/// One reflection of a run with 10 candidates from a DM (so org facts narrow), rules
/// extractor: the gate's decisions and ten writes; median and p99 over 200.
async fn reflection(store: Arc<dyn Store>) -> (Duration, Duration) {
    let s: Arc<dyn MemoryStore> = store;
    let memory = Memory::new(s, MemorySettings::default());
    let principal = resolve_actor(ActorId::parse("slack:U7").unwrap(), &GrantsTable::default());
    let said: String = (0..10)
        .map(|i| match i % 4 {
            0 => format!("remember: org fact {i}\n"),
            1 => format!("note for me: my fact {i}\n"),
            2 => format!("remember for this channel: channel fact {i}\n"),
            _ => format!("remember for this repo: repo fact {i}\n"),
        })
        .collect();
    let transcript = Transcript {
        request: said,
        answer: Some("ok".into()),
    };
    let scopes = request_scopes(7);
    let id = RunId::parse("01JBENCHRUN000000000000000").unwrap();
    let mut times = Vec::new();
    for i in 0..220 {
        let input = ReflectionInput {
            run_id: &id,
            scopes: &scopes,
            origin: ChannelVisibility::Dm,
            principal: &principal,
            transcript: &transcript,
        };
        let t = Instant::now();
        let r = memory.reflect(&input).await.unwrap();
        if i >= 20 {
            times.push(t.elapsed());
        }
        assert_eq!(r.report.written, 10);
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let pg = std::env::var("SWITCHBOARD_BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    println!(
        "memory_context_block: {ITERATIONS} requests (org + user + channel + repo scopes), 1,000 scopes"
    );
    println!(
        "{:<9} {:>8} {:>10} {:>10} {:>8}",
        "backend", "records", "p50 ms", "p99 ms", "shown"
    );
    // Sizes from the command line (cargo bench passes `--bench` first), else 10k, 100k, 1M.
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if sizes.is_empty() {
        sizes = vec![10_000, 100_000, 1_000_000];
    }
    // Every fixture first, then the rounds: each (store, size) measured in turn, warm.
    let mut subjects: Vec<(&str, usize, Memory)> = Vec::new();
    for &n in &sizes {
        let stores: [(&str, Arc<dyn Store>); 2] = [
            ("sqlite", Arc::new(sqlite(n).await)),
            ("postgres", Arc::new(postgres(&pg, n).await)),
        ];
        for (name, store) in stores {
            let s: Arc<dyn MemoryStore> = store;
            let memory = Memory::new(s, MemorySettings::default());
            for k in 0..50 {
                memory.context_block(&request_scopes(k)).await.unwrap();
            }
            subjects.push((name, n, memory));
        }
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(ITERATIONS); subjects.len()];
    let mut shown = vec![0usize; subjects.len()];
    for round in 0..ROUNDS {
        for (i, (_, _, memory)) in subjects.iter().enumerate() {
            shown[i] += block_round(memory, round, &mut times[i]).await;
        }
    }
    let mut p50s = Vec::new();
    for (i, (name, n, _)) in subjects.iter().enumerate() {
        let t = &mut times[i];
        t.sort();
        let (p50, p99) = (percentile(t, 0.5), percentile(t, 0.99));
        println!(
            "{name:<9} {n:>8} {:>10} {:>10} {:>8}",
            ms(p50),
            ms(p99),
            shown[i] / ITERATIONS
        );
        p50s.push((*name, *n, p50));
    }
    for name in ["sqlite", "postgres"] {
        let at = |n| {
            p50s.iter()
                .find(|(b, m, _)| *b == name && *m == n)
                .unwrap()
                .2
        };
        for pair in sizes.windows(2) {
            let (small, large) = (pair[0], pair[1]);
            println!(
                "{name}: p50 at {large} ÷ p50 at {small} = {:.2}",
                at(large).as_secs_f64() / at(small).as_secs_f64()
            );
        }
    }
    println!("\nreflection of a run with 10 candidates (rules extractor, dm origin, 10 writes)");
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("reflect.db").display());
    let sqlite: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&store::StoreSpec::parse(&url).unwrap())
            .await
            .unwrap(),
    );
    let pg_spec = store::StoreSpec {
        schema: Some(format!("sb_bench_reflect_{}", std::process::id())),
        ..store::StoreSpec::parse(&pg).unwrap()
    };
    let postgres: Arc<dyn Store> = Arc::new(PostgresStore::open(&pg_spec).await.unwrap());
    for (name, store) in [("sqlite", sqlite), ("postgres", postgres)] {
        let (p50, p99) = reflection(store).await;
        println!("{name:<9} p50 {} ms  p99 {} ms", ms(p50), ms(p99));
    }
    let admin = sqlx::PgPool::connect(&pg).await.unwrap();
    // The schema name is built from this process's id: no outside input.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS sb_bench_reflect_{} CASCADE",
        std::process::id()
    )))
    .execute(&admin)
    .await
    .unwrap();
}
