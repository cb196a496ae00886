//! Back ends under test and fixtures. SQLite and memory always run; Postgres runs against
//! `SWITCHBOARD_TEST_POSTGRES_URL`, each test in its own schema, and fails (never skips) when
//! the variable is set but the server cannot be reached. scripts/test.sh leaves the Postgres
//! tests out, and says so, when the variable is unset.

use std::sync::Arc;

use authz_core::{ChannelVisibility, RunId};
use store::{InMemoryStore, NewRun, PostgresStore, SqliteStore, Store, StoreSpec, Timestamp};

#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Memory,
    Sqlite,
    Postgres,
}

/// A store and what keeps it alive (a temp dir, a schema to drop).
pub struct Under {
    pub store: Arc<dyn Store>,
    pub sqlite: Option<Arc<SqliteStore>>,
    pub postgres: Option<Arc<PostgresStore>>,
    _dir: Option<tempfile::TempDir>,
    schema: Option<String>,
}

impl Under {
    pub async fn cleanup(self) {
        if let (Some(pg), Some(schema)) = (&self.postgres, &self.schema) {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
                .execute(pg.pool())
                .await;
        }
    }
}

pub fn postgres_url() -> String {
    test_support::postgres::url()
}

pub fn unique_schema() -> String {
    test_support::postgres::unique_schema("store")
}

pub fn sqlite_spec(url: &str) -> StoreSpec {
    StoreSpec::parse(url).unwrap()
}

pub fn postgres_spec(schema: &str) -> StoreSpec {
    StoreSpec {
        schema: Some(schema.to_owned()),
        ..StoreSpec::parse(&postgres_url()).unwrap()
    }
}

pub async fn open(backend: Backend) -> Under {
    open_walking(backend, store::DEFAULT_WALK_PAGES).await
}

/// A store whose lists walk `walk_pages` pages before the branches (0: branches only).
pub async fn open_walking(backend: Backend, walk_pages: usize) -> Under {
    match backend {
        Backend::Memory => Under {
            store: Arc::new(InMemoryStore::new()),
            sqlite: None,
            postgres: None,
            _dir: None,
            schema: None,
        },
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}", dir.path().join("switchboard.db").display());
            let s = Arc::new(
                SqliteStore::open(&sqlite_spec(&url))
                    .await
                    .unwrap()
                    .with_walk_pages(walk_pages),
            );
            Under {
                store: s.clone(),
                sqlite: Some(s),
                postgres: None,
                _dir: Some(dir),
                schema: None,
            }
        }
        Backend::Postgres => {
            let schema = unique_schema();
            let s = Arc::new(
                PostgresStore::open(&postgres_spec(&schema))
                    .await
                    .unwrap()
                    .with_walk_pages(walk_pages),
            );
            Under {
                store: s.clone(),
                sqlite: None,
                postgres: Some(s),
                _dir: None,
                schema: Some(schema),
            }
        }
    }
}

pub fn new_run(channel: &str, user: &str, vis: ChannelVisibility, at: i64) -> NewRun {
    NewRun {
        thread_key: Some("t1".into()),
        request: format!("request at {at}"),
        ..NewRun::fixture(
            channel.parse().unwrap(),
            user.parse().unwrap(),
            vis,
            Timestamp::from_micros(at),
        )
    }
}

pub fn ids(runs: &[store::RunRecord]) -> Vec<RunId> {
    runs.iter().map(|r| r.id.clone()).collect()
}

/// Every page of a list, following cursors, and how many pages that took.
pub async fn all_pages_counted(
    store: &dyn Store,
    mut q: store::ListRuns,
) -> (Vec<store::RunRecord>, usize) {
    let mut out = Vec::new();
    let mut pages = 0;
    loop {
        let page = store.list_runs(&q).await.unwrap();
        pages += 1;
        out.extend(page.runs);
        match page.next {
            Some(c) => q.before = Some(c),
            None => return (out, pages),
        }
    }
}

/// Every page of a list, following cursors.
pub async fn all_pages(store: &dyn Store, q: store::ListRuns) -> Vec<store::RunRecord> {
    all_pages_counted(store, q).await.0
}

/// Declares one async test per back end for each contract function.
#[macro_export]
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::support::Backend::Memory).await })*
        }
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::support::Backend::Sqlite).await })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::support::Backend::Postgres).await })*
        }
    };
}
