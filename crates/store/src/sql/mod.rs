//! The SQL store: one body for SQLite and Postgres, generic over the [`Dialect`] that holds
//! what really differs between them.

mod approvals;
mod config_values;
mod dialect;
mod exec;
mod memory_records;
mod postgres;
mod retention;
mod rows;
mod run_changes;
mod runs;
mod schedule_firings;
mod sqlite;
mod statements;
mod surface_events;

use std::marker::PhantomData;

use async_trait::async_trait;
use authz_core::RunId;
use sqlx::Pool;

pub use dialect::Dialect;
pub use postgres::{Postgres, check_schema};
pub use sqlite::{Backup, Sqlite};

use dialect::{RowAccess, Statement};

use crate::error::{Result, StoreError};
use crate::merge::{self, FetchBranches, Key, ListBackend, OpenBranch};
use crate::plan::Group;
use crate::types::*;
use crate::{DEFAULT_MAX_PREDICATE_WIDTH, Store, StoreSpec};

/// Runs, memory, config, firings and surfaces' event ids in one SQL database.
pub struct SqlStore<D: Dialect> {
    pool: Pool<D::Db>,
    max_width: usize,
    walk_pages: usize,
    spec: StoreSpec,
    dialect: PhantomData<D>,
}

/// The embedded default: one file, WAL mode.
pub type SqliteStore = SqlStore<Sqlite>;
/// For more than one replica.
pub type PostgresStore = SqlStore<Postgres>;

impl<D: Dialect> SqlStore<D> {
    /// Connects (creating a SQLite file, or a Postgres schema, when missing) and migrates.
    pub async fn open(spec: &StoreSpec) -> Result<Self> {
        let store = Self::connect_only(spec).await?;
        store.migrate().await?;
        Ok(store)
    }

    async fn connect_only(spec: &StoreSpec) -> Result<Self> {
        Ok(SqlStore {
            pool: D::connect(spec).await?,
            max_width: DEFAULT_MAX_PREDICATE_WIDTH,
            walk_pages: merge::DEFAULT_WALK_PAGES,
            spec: spec.clone(),
            dialect: PhantomData,
        })
    }

    /// Applies every embedded migration not yet applied.
    pub async fn migrate(&self) -> Result<()> {
        D::migrate(&self.pool, None, &self.spec).await
    }

    async fn all(&self, st: Statement) -> Result<Vec<D::Row>> {
        D::fetch_all(&self.pool, st).await
    }

    async fn one(&self, st: Statement) -> Result<Option<D::Row>> {
        D::fetch_optional(&self.pool, st).await
    }

    async fn exec(&self, st: Statement) -> Result<u64> {
        D::execute(&self.pool, st).await
    }

    async fn runs(&self, st: Statement) -> Result<Vec<RunRecord>> {
        D::fetch_runs(&self.pool, st).await
    }
}

/// Test hooks: the pool for raw SQL, partial migrations, the walk's window, query plans.
#[cfg(feature = "testing")]
impl<D: Dialect> SqlStore<D> {
    /// Connects without migrating.
    pub async fn connect(spec: &StoreSpec) -> Result<Self> {
        Self::connect_only(spec).await
    }

    /// Applies only the first `n` migrations (to build an old schema).
    pub async fn migrate_first(&self, n: usize) -> Result<()> {
        D::migrate(&self.pool, Some(n), &self.spec).await
    }

    /// How this store was opened (to open a second handle on the same database).
    pub fn spec(&self) -> &StoreSpec {
        &self.spec
    }

    pub fn pool(&self) -> &Pool<D::Db> {
        &self.pool
    }

    /// Sets the walk's window in pages (0: branches only), to exercise both paths.
    pub fn with_walk_pages(mut self, pages: usize) -> Self {
        self.walk_pages = pages;
        self
    }

    /// The plan of the statements a list's first page runs (the walk and the first round of
    /// branches, or the one whole-table read), one line per step.
    pub async fn list_plan(&self, q: &ListRuns) -> Result<Vec<String>> {
        let statements = match statements::list_read::<D>(
            crate::plan::plan(&q.visible_to, self.max_width)?,
            q,
        ) {
            statements::ListRead::Nothing => return Ok(vec![]),
            statements::ListRead::One(st) => vec![st],
            statements::ListRead::Groups(groups) => {
                let start = merge::start_key(q.before.as_ref());
                // The walk's real window, as the page would read it (at least one page,
                // so a branches-only store still shows a walk's plan).
                let need = q.limit as usize + 1;
                let window = merge::walk_window(need, self.walk_pages.max(1));
                let open = merge::all_branches(&groups, &start);
                vec![
                    statements::walk::<D>(&groups, q.status, &start, window, q.limit + 1),
                    statements::boundary::<D>(&start, window),
                    D::branches(&groups, &open, q.status, q.limit + 1),
                ]
            }
        };
        let mut lines = Vec::new();
        for st in statements {
            let explained = Statement {
                sql: D::explain(&st.sql),
                binds: st.binds,
            };
            lines.extend(self.all(explained).await?.iter().map(D::plan_line));
        }
        Ok(lines)
    }
}

#[async_trait]
impl<D: Dialect> FetchBranches for SqlStore<D> {
    async fn fetch(
        &self,
        groups: &[Group],
        open: &[OpenBranch],
        status: StatusFilter,
        per_branch: u32,
    ) -> Result<Vec<(usize, String, Key)>> {
        let st = D::branches(groups, open, status, per_branch);
        self.all(st).await?.iter().map(rows::branch_key).collect()
    }
}

#[async_trait]
impl<D: Dialect> ListBackend for SqlStore<D> {
    fn walk_pages(&self) -> usize {
        self.walk_pages
    }

    async fn boundary(&self, start: &Key, window: u32) -> Result<Option<Key>> {
        match self.one(statements::boundary::<D>(start, window)).await? {
            Some(r) => Ok(Some((r.int(0)?, r.text(1)?))),
            None => Ok(None),
        }
    }

    async fn walk(
        &self,
        groups: &[Group],
        status: StatusFilter,
        start: &Key,
        window: u32,
        need: u32,
    ) -> Result<Vec<RunRecord>> {
        self.runs(statements::walk::<D>(groups, status, start, window, need))
            .await
    }

    async fn runs_by_ids(&self, ids: Vec<String>) -> Result<Vec<RunRecord>> {
        self.runs(statements::runs_by_ids::<D>(ids)).await
    }
}

pub(super) fn fresh_id(at: Timestamp) -> Result<RunId> {
    RunId::parse(&new_id(at)).map_err(|e| StoreError::Invalid(e.to_string()))
}

#[async_trait]
impl<D: Dialect> Store for SqlStore<D> {
    fn backend(&self) -> &'static str {
        D::BACKEND
    }

    async fn ping(&self) -> Result<()> {
        self.exec(Statement::new("SELECT 1")).await?;
        Ok(())
    }

    fn live_fanout(&self) -> Option<std::sync::Arc<dyn crate::LiveFanout>> {
        D::fanout(&self.pool, &self.spec)
    }
}
