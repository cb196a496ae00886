//! The SQLite back end: the embedded default. One file in WAL mode, created and migrated on
//! first open. A list's branches are read in one statement per round: for each group,
//! `json_each` over its open branches, each an index range `LIMIT`ed read newest-first.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use authz_core::{ConfigTier, Predicate, RunId, ScheduleName, ScopeKey};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, Row, SqlitePool};

use crate::memory::INTERRUPTED;
use crate::merge::{FetchBranches, Key, ListBackend, OpenBranch, page_of_groups};
use crate::plan::{self, Group};
use crate::sql::*;
use crate::types::{new_id, scope_parts, tier_parts};
use crate::*;

pub struct SqliteStore {
    walk_pages: usize,
    pool: SqlitePool,
    path: String,
    max_width: usize,
}

/// The migrations, embedded at build time.
pub fn migrator() -> sqlx::migrate::Migrator {
    sqlx::migrate!("../../migrations/sqlite")
}

impl SqliteStore {
    /// Sets the walk's window in pages (0: branches only). Tests use it to exercise both paths.
    pub fn with_walk_pages(mut self, pages: usize) -> Self {
        self.walk_pages = pages;
        self
    }

    /// Opens (creating if missing) and migrates the database at `sqlite://path`.
    pub async fn open(url: &str) -> Result<Self> {
        let store = Self::connect(url).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Opens without migrating (tests that build an old schema first).
    pub async fn connect(url: &str) -> Result<Self> {
        let path = url
            .trim_start_matches("sqlite://")
            .trim_start_matches("sqlite:")
            .to_owned();
        if path.is_empty() || path == ":memory:" {
            return Err(StoreError::BadUrl(url.to_owned()));
        }
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|_| StoreError::BadUrl(url.to_owned()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|e| not_sqlite(e, &path))?;
        let store = SqliteStore {
            pool,
            path,
            max_width: DEFAULT_MAX_PREDICATE_WIDTH,
            walk_pages: crate::merge::DEFAULT_WALK_PAGES,
        };
        // Reading the schema proves the file is a SQLite database before anything is written.
        sqlx::query("SELECT count(*) FROM sqlite_master")
            .fetch_one(&store.pool)
            .await
            .map_err(|e| not_sqlite(e, &store.path))?;
        Ok(store)
    }

    pub async fn migrate(&self) -> Result<()> {
        migrator().run(&self.pool).await.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(inner) => not_sqlite(inner, &self.path),
            other => StoreError::Migrate(other),
        })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// `EXPLAIN QUERY PLAN` of the statements a list's first page runs (the walk and the first round
    /// of branches, or the one whole-table read), one line per step.
    pub async fn list_plan(&self, q: &ListRuns) -> Result<Vec<String>> {
        let read = list_read(
            Dialect::Sqlite,
            plan::plan(&q.visible_to, self.max_width)?,
            q,
        );
        let statements = match read {
            ListRead::Nothing => return Ok(vec![]),
            ListRead::One(statement) => vec![statement],
            ListRead::Groups(groups) => {
                let start = start_key(q.before.as_ref());
                // The walk's real window, as the page would read it.
                let window = (q.limit as usize + 1) * self.walk_pages.max(1);
                let floor = self
                    .boundary(&start, u32::try_from(window).unwrap_or(u32::MAX))
                    .await?;
                vec![
                    walk_sql(
                        Dialect::Sqlite,
                        &groups,
                        q.status,
                        &start,
                        floor.as_ref(),
                        q.limit + 1,
                    ),
                    branches_sql(&groups, &first_round(&groups, q), q.status, q.limit + 1),
                ]
            }
        };
        let mut lines = Vec::new();
        for (sql, binds) in statements {
            let rows = sqlx::query_with(
                AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")),
                arguments(binds)?,
            )
            .fetch_all(&self.pool)
            .await?;
            lines.extend(
                rows.iter()
                    .map(|r| r.try_get::<String, _>("detail").unwrap_or_default()),
            );
        }
        Ok(lines)
    }
}

fn not_sqlite(e: sqlx::Error, path: &str) -> StoreError {
    let is_notadb = matches!(&e, sqlx::Error::Database(db) if db.code().as_deref() == Some("26"))
        || e.to_string().contains("file is not a database");
    if is_notadb {
        StoreError::NotSqlite {
            path: path.to_owned(),
        }
    } else {
        StoreError::Database(e)
    }
}

/// A statement's binds as Sqlite arguments (lists as JSON arrays for `json_each`).
fn arguments(binds: Vec<Bind>) -> Result<sqlx::sqlite::SqliteArguments> {
    use sqlx::Arguments;
    let mut args = sqlx::sqlite::SqliteArguments::default();
    for b in binds {
        match b {
            Bind::Text(s) => args.add(s),
            Bind::Int(i) => args.add(i),
            Bind::Texts(v) => args.add(json_array(&v)),
            Bind::Ints(v) => args.add(format!(
                "[{}]",
                v.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
            )),
        }
        .map_err(|e| StoreError::Invalid(format!("binding a statement's argument: {e}")))?;
    }
    Ok(args)
}

/// One statement reading every open branch: per group, `json_each` over `[value, created_at, id]` arrays
/// (value and where the branch continues), each branch a correlated, `LIMIT`ed index read.
fn branches_sql(
    groups: &[Group],
    open: &[OpenBranch],
    status: StatusFilter,
    per_branch: u32,
) -> Statement {
    let mut parts = Vec::new();
    let mut binds = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let mine: Vec<String> = open
            .iter()
            .filter(|b| b.group == g)
            .map(|b| {
                format!(
                    "[{},{},{}]",
                    json_string(&b.value),
                    b.after.0,
                    json_string(&b.after.1)
                )
            })
            .collect();
        if mine.is_empty() {
            continue;
        }
        let filters: String = group
            .filters
            .iter()
            .map(|a| {
                format!(
                    " AND x.{} IN (SELECT value FROM json_each(?))",
                    a.column.sql()
                )
            })
            .collect();
        parts.push(format!(
            "SELECT {g} AS grp, (v.value ->> 0) AS val, r.created_at AS created_at, r.id AS id FROM json_each(?) AS v \
             CROSS JOIN runs r ON r.rowid IN (SELECT x.rowid FROM runs x INDEXED BY {index} \
             WHERE x.{drive} = (v.value ->> 0) \
             AND (x.created_at < (v.value ->> 1) OR (x.created_at = (v.value ->> 1) AND x.id < (v.value ->> 2)))\
             {filters}{status} ORDER BY x.created_at DESC, x.id DESC LIMIT ?)",
            drive = group.drive.sql(),
            index = group.drive.index(),
            status = status_sql(status, "x"),
        ));
        binds.push(Bind::Text(format!("[{}]", mine.join(","))));
        binds.extend(group.filters.iter().map(|a| Bind::Texts(a.values.clone())));
        binds.push(Bind::Int(i64::from(per_branch)));
    }
    (parts.join(" UNION ALL "), binds)
}

#[async_trait]
impl FetchBranches for SqliteStore {
    async fn fetch(
        &self,
        groups: &[Group],
        open: &[OpenBranch],
        status: StatusFilter,
        per_branch: u32,
    ) -> Result<Vec<(usize, String, Key)>> {
        let (sql, binds) = branches_sql(groups, open, status, per_branch);
        let rows: Vec<BranchKey> = sqlx::query_as_with(AssertSqlSafe(sql), arguments(binds)?)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(BranchKey::tagged).collect())
    }
}

#[async_trait]
impl ListBackend for SqliteStore {
    fn walk_pages(&self) -> usize {
        self.walk_pages
    }

    async fn boundary(&self, start: &Key, window: u32) -> Result<Option<Key>> {
        let row: Option<(i64, String)> =
            sqlx::query_as(AssertSqlSafe(boundary_sql(Dialect::Sqlite)))
                .bind(start.0)
                .bind(&start.1)
                .bind(i64::from(window.saturating_sub(1)))
                .fetch_optional(&self.pool)
                .await?;
        Ok(row)
    }

    async fn walk(
        &self,
        groups: &[Group],
        status: StatusFilter,
        start: &Key,
        floor: Option<&Key>,
        need: u32,
    ) -> Result<Vec<RunRecord>> {
        fetch_runs(
            &self.pool,
            walk_sql(Dialect::Sqlite, groups, status, start, floor, need),
        )
        .await
    }

    async fn runs_by_ids(&self, ids: Vec<String>) -> Result<Vec<RunRecord>> {
        fetch_runs(
            &self.pool,
            (
                format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE id IN (SELECT value FROM json_each(?))"
                ),
                vec![Bind::Texts(ids)],
            ),
        )
        .await
    }
}

async fn fetch_runs(pool: &SqlitePool, (sql, binds): Statement) -> Result<Vec<RunRecord>> {
    let rows: Vec<RawRun> = sqlx::query_as_with(AssertSqlSafe(sql), arguments(binds)?)
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(RawRun::into_record).collect()
}

#[async_trait]
impl RunStore for SqliteStore {
    async fn create_run(&self, new: NewRun) -> Result<RunRecord> {
        let id = RunId::parse(&new_id(new.created_at))
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        sqlx::query(
            "INSERT INTO runs (id, surface, channel_id, thread_key, user_id, agent, repo, status, request, created_at, capability_token_hash, agent_token_hash, owner, channel_visibility) \
             VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?)",
        )
        .bind(id.as_str())
        .bind(&new.surface)
        .bind(new.channel_id.as_str())
        .bind(new.thread_key.as_deref())
        .bind(new.user_id.as_str())
        .bind(&new.agent)
        .bind(new.repo.as_ref().map(|r| r.as_str()))
        .bind(&new.request)
        .bind(new.created_at.micros())
        .bind(new.capability_token.as_ref().map(TokenHash::to_hex))
        .bind(new.agent_token.as_ref().map(TokenHash::to_hex))
        .bind(new.owner.as_ref().map(ReplicaId::as_str))
        .bind(new.channel_visibility.as_str())
        .execute(&self.pool)
        .await?;
        self.get_run(&id).await?.ok_or(StoreError::NoSuchRun(id))
    }

    async fn start_run(&self, id: &RunId) -> Result<()> {
        let done =
            sqlx::query("UPDATE runs SET status = 'running' WHERE id = ? AND status = 'queued'")
                .bind(id.as_str())
                .execute(&self.pool)
                .await?;
        if done.rows_affected() == 1 {
            return Ok(());
        }
        not_live(id, self.get_run(id).await?.as_ref(), true)
    }

    async fn finish_run(&self, id: &RunId, f: Finish) -> Result<RunRecord> {
        if f.status.is_live() {
            return Err(StoreError::Invalid(format!(
                "{} is not a terminal status",
                f.status
            )));
        }
        let done = sqlx::query("UPDATE runs SET status = ?, answer = ?, error = ?, finished_at = ? WHERE id = ? AND status IN ('queued', 'running')")
            .bind(f.status.as_str())
            .bind(f.answer.as_deref())
            .bind(f.error.as_deref())
            .bind(f.at.micros())
            .bind(id.as_str())
            .execute(&self.pool)
            .await?;
        let run = self.get_run(id).await?;
        match (done.rows_affected(), run) {
            (1, Some(run)) => Ok(run),
            (_, run) => {
                not_live(id, run.as_ref(), false).and(Err(StoreError::NoSuchRun(id.clone())))
            }
        }
    }

    async fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>> {
        let row: Option<RawRun> = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE id = ?"
        )))
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.map(RawRun::into_record).transpose()
    }

    async fn list_runs(&self, q: &ListRuns) -> Result<Page> {
        let limit = check_limit(q.limit)?;
        let plan = plan::plan(&q.visible_to, self.max_width)?;
        match list_read(Dialect::Sqlite, plan, q) {
            ListRead::Nothing => Ok(Page {
                runs: vec![],
                next: None,
            }),
            ListRead::One(statement) => Ok(assemble_page(
                fetch_runs(&self.pool, statement).await?,
                limit,
            )),
            ListRead::Groups(groups) => {
                page_of_groups(self, &groups, q.status, limit, q.before.as_ref()).await
            }
        }
    }

    async fn append_event(&self, id: &RunId, at: Timestamp, kind: &str, body: &str) -> Result<i64> {
        let mut tx = self.pool.begin().await?;
        let seq: Option<i64> = sqlx::query_scalar(
            "UPDATE runs SET event_seq = event_seq + 1 WHERE id = ? RETURNING event_seq",
        )
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let seq = seq.ok_or_else(|| StoreError::NoSuchRun(id.clone()))?;
        sqlx::query("INSERT INTO run_events (run_id, seq, at, kind, body) VALUES (?, ?, ?, ?, ?)")
            .bind(id.as_str())
            .bind(seq)
            .bind(at.micros())
            .bind(kind)
            .bind(body)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(seq)
    }

    async fn events(&self, id: &RunId) -> Result<Vec<RunEvent>> {
        let rows: Vec<RawEvent> = sqlx::query_as(
            "SELECT seq, at, kind, body FROM run_events WHERE run_id = ? ORDER BY seq",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| RunEvent {
                run_id: id.clone(),
                seq: r.seq,
                at: Timestamp::from_micros(r.at),
                kind: r.kind,
                body: r.body,
            })
            .collect())
    }

    async fn add_friction(&self, f: Friction) -> Result<()> {
        let exists: Option<i64> = sqlx::query_scalar("SELECT 1 FROM runs WHERE id = ?")
            .bind(f.run_id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        if exists.is_none() {
            return Err(StoreError::NoSuchRun(f.run_id));
        }
        sqlx::query("INSERT INTO friction (run_id, at, kind, detail) VALUES (?, ?, ?, ?)")
            .bind(f.run_id.as_str())
            .bind(f.at.micros())
            .bind(&f.kind)
            .bind(&f.detail)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn friction(&self, id: &RunId) -> Result<Vec<Friction>> {
        let rows: Vec<RawFriction> = sqlx::query_as(
            "SELECT at, kind, detail FROM friction WHERE run_id = ? ORDER BY at, id",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| Friction {
                run_id: id.clone(),
                at: Timestamp::from_micros(r.at),
                kind: r.kind,
                detail: r.detail,
            })
            .collect())
    }

    async fn friction_recent(
        &self,
        visible_to: &Predicate,
        since: Timestamp,
        limit: u32,
    ) -> Result<Vec<FrictionOfRun>> {
        let limit = check_limit(limit)?;
        let Some(filter) = plan_filter(Dialect::Sqlite, plan::plan(visible_to, self.max_width)?)
        else {
            return Ok(vec![]);
        };
        let (sql, binds) =
            friction_recent_sql(Dialect::Sqlite, filter, since.micros(), limit as i64);
        let rows: Vec<RawFrictionOfRun> =
            sqlx::query_as_with(AssertSqlSafe(sql), arguments(binds)?)
                .fetch_all(&self.pool)
                .await?;
        rows.into_iter()
            .map(RawFrictionOfRun::into_record)
            .collect()
    }

    async fn count_runs_since(&self, visible_to: &Predicate, since: Timestamp) -> Result<u64> {
        let Some(filter) = plan_filter(Dialect::Sqlite, plan::plan(visible_to, self.max_width)?)
        else {
            return Ok(0);
        };
        let (sql, binds) = count_since_sql(Dialect::Sqlite, filter, since.micros());
        let row = sqlx::query_with(AssertSqlSafe(sql), arguments(binds)?)
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(row.try_get::<i64, _>("n")?).unwrap_or(0))
    }

    async fn heartbeat(&self, replica: &ReplicaId, now: Timestamp) -> Result<()> {
        sqlx::query("INSERT INTO replicas (id, heartbeat_at) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at")
            .bind(replica.as_str())
            .bind(now.micros())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn tombstone_orphans(
        &self,
        replica: &ReplicaId,
        now: Timestamp,
        lease: Duration,
        own: bool,
    ) -> Result<Vec<RunId>> {
        let expired_before = now.saturating_sub(lease).micros();
        let ids: Vec<String> = sqlx::query_scalar(
            "UPDATE runs SET status = 'interrupted', finished_at = ?, error = ? \
             WHERE status IN ('queued', 'running') AND ( \
               (? AND (owner IS NULL OR owner = ?)) \
               OR (owner IS NOT NULL AND owner <> ? AND NOT EXISTS (SELECT 1 FROM replicas p WHERE p.id = runs.owner AND p.heartbeat_at >= ?))) \
             RETURNING id",
        )
        .bind(now.micros())
        .bind(INTERRUPTED)
        .bind(own)
        .bind(replica.as_str())
        .bind(replica.as_str())
        .bind(expired_before)
        .fetch_all(&self.pool)
        .await?;
        ids.iter()
            .map(|i| RunId::parse(i).map_err(|_| StoreError::corrupt("run id", i)))
            .collect()
    }
}

#[async_trait]
impl crate::MemoryStore for SqliteStore {
    async fn add_memory(&self, new: NewMemory) -> Result<MemoryRecord> {
        let id = RunId::parse(&new_id(new.created_at))
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let (kind, key) = scope_parts(&new.scope);
        sqlx::query("INSERT INTO memory_records (id, scope_kind, scope_key, text, supersedes, source_run, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
            .bind(id.as_str())
            .bind(kind)
            .bind(&key)
            .bind(&new.text)
            .bind(new.supersedes.as_ref().map(|s| s.as_str()))
            .bind(new.source_run.as_ref().map(|s| s.as_str()))
            .bind(new.created_at.micros())
            .execute(&self.pool)
            .await?;
        Ok(MemoryRecord {
            id,
            scope: new.scope,
            text: new.text,
            supersedes: new.supersedes,
            source_run: new.source_run,
            created_at: new.created_at,
            forgotten_at: None,
        })
    }

    async fn get_memory(&self, id: &MemoryId) -> Result<Option<MemoryRecord>> {
        let row: Option<RawMemory> = sqlx::query_as("SELECT * FROM memory_records WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(RawMemory::into_record).transpose()
    }

    async fn memory_in_scopes(&self, scopes: &[ScopeKey], limit: u32) -> Result<Vec<MemoryRecord>> {
        let limit = check_limit(limit)?;
        let keys: Vec<String> = scopes.iter().map(|s| scope_parts(s).1).collect();
        let rows: Vec<RawMemory> = sqlx::query_as(
            "SELECT * FROM memory_records m WHERE m.scope_key IN (SELECT value FROM json_each(?)) AND m.forgotten_at IS NULL \
             AND NOT EXISTS (SELECT 1 FROM memory_records n WHERE n.supersedes = m.id AND n.forgotten_at IS NULL) \
             ORDER BY m.created_at DESC, m.id DESC LIMIT ?",
        )
        .bind(json_array(&keys))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(RawMemory::into_record).collect()
    }

    async fn forget_memory(&self, id: &MemoryId, at: Timestamp) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE memory_records SET forgotten_at = ? WHERE id = ? AND forgotten_at IS NULL",
        )
        .bind(at.micros())
        .bind(id.as_str())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[async_trait]
impl ConfigStore for SqliteStore {
    async fn get_config(&self, tier: &ConfigTier, key: &str) -> Result<Option<ConfigValue>> {
        let (t, id) = tier_parts(tier);
        let row: Option<RawConfig> = sqlx::query_as(
            "SELECT * FROM config_values WHERE tier = ? AND tier_id = ? AND key = ?",
        )
        .bind(t)
        .bind(&id)
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        row.map(RawConfig::into_record).transpose()
    }

    async fn set_config(&self, v: ConfigValue) -> Result<()> {
        let (t, id) = tier_parts(&v.tier);
        sqlx::query(
            "INSERT INTO config_values (tier, tier_id, key, value, updated_by, updated_at) VALUES (?, ?, ?, ?, ?, ?) \
             ON CONFLICT (tier, tier_id, key) DO UPDATE SET value = excluded.value, updated_by = excluded.updated_by, updated_at = excluded.updated_at",
        )
        .bind(t)
        .bind(&id)
        .bind(&v.key)
        .bind(&v.value)
        .bind(v.updated_by.as_str())
        .bind(v.updated_at.micros())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn delete_config(&self, tier: &ConfigTier, key: &str) -> Result<bool> {
        let (t, id) = tier_parts(tier);
        let done =
            sqlx::query("DELETE FROM config_values WHERE tier = ? AND tier_id = ? AND key = ?")
                .bind(t)
                .bind(&id)
                .bind(key)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_config(&self, tier: &ConfigTier, prefix: &str) -> Result<Vec<ConfigValue>> {
        let (t, id) = tier_parts(tier);
        let rows: Vec<RawConfig> = sqlx::query_as("SELECT * FROM config_values WHERE tier = ? AND tier_id = ? AND substr(key, 1, length(?)) = ? ORDER BY key")
            .bind(t)
            .bind(&id)
            .bind(prefix)
            .bind(prefix)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(RawConfig::into_record).collect()
    }
}

#[async_trait]
impl ScheduleStore for SqliteStore {
    async fn claim_firing(
        &self,
        name: &ScheduleName,
        slot: Timestamp,
        at: Timestamp,
    ) -> Result<bool> {
        let done = sqlx::query("INSERT INTO schedule_firings (name, slot, fired_at, status) VALUES (?, ?, ?, 'claimed') ON CONFLICT (name, slot) DO NOTHING")
            .bind(name.as_str())
            .bind(slot.micros())
            .bind(at.micros())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn record_firing(
        &self,
        name: &ScheduleName,
        slot: Timestamp,
        status: &str,
        run_id: Option<&RunId>,
        detail: Option<&str>,
    ) -> Result<()> {
        let done = sqlx::query("UPDATE schedule_firings SET status = ?, run_id = ?, detail = ? WHERE name = ? AND slot = ?")
            .bind(status)
            .bind(run_id.map(|r| r.as_str()))
            .bind(detail)
            .bind(name.as_str())
            .bind(slot.micros())
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(StoreError::Invalid(format!(
                "no claimed firing of {name} at {}",
                slot.micros()
            )))
        }
    }

    async fn recent_firings(&self, name: &ScheduleName, limit: u32) -> Result<Vec<Firing>> {
        let limit = check_limit(limit)?;
        let rows: Vec<RawFiring> = sqlx::query_as(
            "SELECT * FROM schedule_firings WHERE name = ? ORDER BY slot DESC LIMIT ?",
        )
        .bind(name.as_str())
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(|r| r.into_record(name)).collect()
    }
}

#[async_trait]
impl SlackEventStore for SqliteStore {
    async fn first_sighting(&self, event_id: &str, at: Timestamp) -> Result<bool> {
        check_event_id(event_id)?;
        let done = sqlx::query("INSERT INTO slack_events (event_id, received_at) VALUES (?, ?) ON CONFLICT (event_id) DO NOTHING")
            .bind(event_id)
            .bind(at.micros())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}
