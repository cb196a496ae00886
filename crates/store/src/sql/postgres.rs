//! Postgres, for more than one replica. Statements are written with `?` and numbered (`$1`,
//! `$2`, …) here; bound lists are arrays (`= ANY`, `unnest`); each list branch is a
//! `CROSS JOIN LATERAL` index read per value of one bound array. With a schema, every
//! connection's `search_path` is set to it (created if missing).

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgArguments, PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{Arguments, AssertSqlSafe, Connection, Pool};

use super::dialect::{Bind, Dialect, RowAccess, Statement, numbered, open_groups};
use super::exec;
use super::rows::RawRun;
use super::statements::status_sql;
use crate::error::{Result, StoreError};
use crate::merge::OpenBranch;
use crate::plan::Group;
use crate::types::{RunRecord, StatusFilter};
use crate::{StoreSpec, StoreUrl};

/// The Postgres dialect.
pub struct Postgres;

fn migrator() -> sqlx::migrate::Migrator {
    sqlx::migrate!("../../migrations/postgres")
}

fn arguments(binds: Vec<Bind>) -> Result<PgArguments> {
    let mut args = PgArguments::default();
    for b in binds {
        match b {
            Bind::Text(s) => args.add(s),
            Bind::OptText(s) => args.add(s),
            Bind::Int(i) => args.add(i),
            Bind::Texts(v) => args.add(v),
            Bind::Ints(v) => args.add(v),
        }
        .map_err(|e| StoreError::Invalid(format!("binding a statement's argument: {e}")))?;
    }
    Ok(args)
}

/// A schema name this store will create and set: lower-case letters, digits and `_`.
pub fn check_schema(schema: &str) -> Result<()> {
    let ok = !schema.is_empty()
        && schema.len() <= 63
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !schema.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "schema name {schema:?}: use lower-case letters, digits and '_', starting with a letter"
        )))
    }
}

/// A statement as this database takes it: its text and its arguments.
fn prepared(st: Statement) -> Result<(String, PgArguments)> {
    Ok((Postgres::placeholders(st.sql), arguments(st.binds)?))
}

#[async_trait]
impl Dialect for Postgres {
    type Db = sqlx::Postgres;
    type Row = PgRow;
    const BACKEND: &'static str = "postgres";
    const MEMORY_ARM_LIMIT: bool = true;
    const WALK_TO_BOUNDARY: bool = false;

    fn placeholders(sql: String) -> String {
        numbered(&sql)
    }

    fn in_list(column: &str) -> String {
        format!("{column} = ANY(?)")
    }

    fn page_index() -> &'static str {
        "runs x"
    }

    fn live_index() -> &'static str {
        "runs x"
    }

    /// The tuple's address: the walk's window and its rows are read in one statement, under
    /// one snapshot, so the address the index gave is the row the join reads (a TID scan, one
    /// buffer, instead of a descent of the primary key).
    fn row_key() -> &'static str {
        "ctid"
    }

    /// Per group, `unnest` of three bound arrays (value, and the `(created_at, id)` each branch
    /// continues before) `CROSS JOIN LATERAL` a `LIMIT`ed index read.
    fn branches(
        groups: &[Group],
        open: &[OpenBranch],
        status: StatusFilter,
        per_branch: u32,
    ) -> Statement {
        let mut parts = Vec::new();
        let mut binds = Vec::new();
        for (g, group, mine, filters) in open_groups::<Self>(groups, open) {
            parts.push(format!(
                "SELECT {g}::int8 AS grp, v.val AS val, r.created_at AS created_at, r.id AS id FROM unnest(?::text[], ?::int8[], ?::text[]) AS v(val, c, i) \
                 CROSS JOIN LATERAL (SELECT x.created_at, x.id FROM runs x WHERE x.{drive} = v.val AND (x.created_at, x.id) < (v.c, v.i)\
                 {filters}{status} ORDER BY x.created_at DESC, x.id DESC LIMIT ?) r",
                drive = group.drive.sql(),
                status = status_sql(status, "x"),
            ));
            binds.push(Bind::Texts(mine.iter().map(|b| b.value.clone()).collect()));
            binds.push(Bind::Ints(mine.iter().map(|b| b.after.0).collect()));
            binds.push(Bind::Texts(
                mine.iter().map(|b| b.after.1.clone()).collect(),
            ));
            binds.extend(group.filters.iter().map(|a| Bind::Texts(a.values.clone())));
            binds.push(Bind::Int(i64::from(per_branch)));
        }
        Statement::new(parts.join(" UNION ALL ")).binds(binds)
    }

    fn explain(sql: &str) -> String {
        format!("EXPLAIN {sql}")
    }

    fn fanout(
        pool: &Pool<sqlx::Postgres>,
        spec: &StoreSpec,
    ) -> Option<std::sync::Arc<dyn crate::LiveFanout>> {
        Some(std::sync::Arc::new(PgFanout {
            pool: pool.clone(),
            channel: crate::fanout::channel_name(spec.schema.as_deref()),
        }))
    }

    fn plan_line(row: &PgRow) -> String {
        row.text(0).unwrap_or_default()
    }

    async fn connect(spec: &StoreSpec) -> Result<Pool<sqlx::Postgres>> {
        let StoreUrl::Postgres(url) = &spec.url else {
            return Err(StoreError::BadUrl(spec.url.redacted()));
        };
        let mut options =
            PgConnectOptions::from_str(url).map_err(|_| StoreError::BadUrl(spec.url.redacted()))?;
        // One connection first: a refused or unreachable server fails here at once, with
        // its own reason, where the pool would retry until its acquire timeout and then say
        // only that it timed out.
        let mut admin = tokio::time::timeout(
            Duration::from_secs(10),
            sqlx::PgConnection::connect_with(&options),
        )
        .await
        .map_err(|_| {
            StoreError::Database(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the database server did not answer within 10 s",
            )))
        })??;
        if let Some(schema) = &spec.schema {
            check_schema(schema)?;
            sqlx::query(AssertSqlSafe(format!(
                "CREATE SCHEMA IF NOT EXISTS {schema}"
            )))
            .execute(&mut admin)
            .await?;
            options = options.options([("search_path", schema.as_str())]);
        }
        admin.close().await?;
        // Every statement here is shaped by its text, not its values (lists are bound arrays),
        // and its generic plan is an indexed read; left to choose, Postgres re-plans some of
        // them on every execution on a large table, which costs more than the read itself
        // (docs/benchmarks.md). So each connection plans a statement once.
        options = options.options([("plan_cache_mode", "force_generic_plan")]);
        Ok(PgPoolOptions::new()
            .max_connections(spec.max_connections.unwrap_or(8))
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?)
    }

    async fn migrate(
        pool: &Pool<sqlx::Postgres>,
        only: Option<usize>,
        _spec: &StoreSpec,
    ) -> Result<()> {
        let mut m = migrator();
        if let Some(n) = only {
            m.migrations = std::borrow::Cow::Owned(m.migrations.iter().take(n).cloned().collect());
        }
        Ok(m.run(pool).await?)
    }

    async fn fetch_all(pool: &Pool<sqlx::Postgres>, st: Statement) -> Result<Vec<PgRow>> {
        Ok(exec::query(prepared(st)?).fetch_all(pool).await?)
    }

    async fn fetch_optional(pool: &Pool<sqlx::Postgres>, st: Statement) -> Result<Option<PgRow>> {
        Ok(exec::query(prepared(st)?).fetch_optional(pool).await?)
    }

    async fn fetch_runs(pool: &Pool<sqlx::Postgres>, st: Statement) -> Result<Vec<RunRecord>> {
        Self::fetch_all(pool, st)
            .await?
            .iter()
            .map(|r| RawRun::from_row(r)?.into_record())
            .collect()
    }

    async fn execute(pool: &Pool<sqlx::Postgres>, st: Statement) -> Result<u64> {
        Ok(exec::query(prepared(st)?)
            .execute(pool)
            .await?
            .rows_affected())
    }

    async fn bump_then(
        pool: &Pool<sqlx::Postgres>,
        bump: Statement,
        then: Box<dyn FnOnce(i64) -> Statement + Send>,
    ) -> Result<Option<i64>> {
        exec::bump_then(pool, prepared, bump, then).await
    }
}

/// `NOTIFY` through the pool; `LISTEN` on a connection of its own.
struct PgFanout {
    pool: Pool<sqlx::Postgres>,
    channel: String,
}

#[async_trait]
impl crate::LiveFanout for PgFanout {
    async fn notify(&self, payload: &str) -> Result<()> {
        if payload.len() > crate::fanout::MAX_PAYLOAD {
            return Err(StoreError::Invalid(format!(
                "a live-run payload of {} bytes is over NOTIFY's limit",
                payload.len()
            )));
        }
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(&self.channel)
            .bind(payload)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn listen(&self) -> Result<Box<dyn crate::FanoutListener>> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
        listener.listen(&self.channel).await?;
        Ok(Box::new(PgFanoutListener(listener)))
    }
}

struct PgFanoutListener(sqlx::postgres::PgListener);

#[async_trait]
impl crate::FanoutListener for PgFanoutListener {
    async fn next(&mut self) -> Result<String> {
        Ok(self.0.recv().await?.payload().to_owned())
    }
}
