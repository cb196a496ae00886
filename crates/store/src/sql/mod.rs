//! The SQL store: one body for SQLite and Postgres, generic over the [`Dialect`] that holds
//! what really differs between them.

mod dialect;
mod exec;
mod postgres;
mod rows;
mod sqlite;
mod statements;

use std::marker::PhantomData;
use std::time::Duration;

use async_trait::async_trait;
use authz_core::{ConfigTier, Predicate, RunId, ScheduleName, ScopeKey};
use sqlx::Pool;

pub use dialect::Dialect;
pub use postgres::Postgres;
pub use sqlite::{Backup, Sqlite};

use dialect::{RowAccess, Statement};
use statements::{ListRead, RUN_COLUMNS};

use crate::error::{Result, StoreError};
use crate::merge::{self, FetchBranches, Key, ListBackend, OpenBranch, assemble_page, check_limit};
use crate::plan::{self, Group};
use crate::types::*;
use crate::{
    ApprovalStore, ConfigStore, DEFAULT_MAX_PREDICATE_WIDTH, INTERRUPTED, MemoryStore,
    RetentionStore, RunStore, ScheduleStore, SlackEventStore, Store, StoreSpec, check_approval_id,
    check_event_id, check_thread,
};

/// Runs, memory, config, firings and Slack event ids in one SQL database.
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
        let statements =
            match statements::list_read::<D>(plan::plan(&q.visible_to, self.max_width)?, q) {
                ListRead::Nothing => return Ok(vec![]),
                ListRead::One(st) => vec![st],
                ListRead::Groups(groups) => {
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

/// After an update that matched no live run: why. Missing, already running (for a start:
/// fine), or already finished.
fn not_live(id: &RunId, existing: Option<&RunRecord>, running_is_ok: bool) -> Result<()> {
    match existing {
        None => Err(StoreError::NoSuchRun(id.clone())),
        Some(r) if running_is_ok && r.status == RunStatus::Running => Ok(()),
        Some(r) => Err(StoreError::AlreadyFinished {
            id: id.clone(),
            status: r.status,
        }),
    }
}

fn fresh_id(at: Timestamp) -> Result<RunId> {
    RunId::parse(&new_id(at)).map_err(|e| StoreError::Invalid(e.to_string()))
}

#[async_trait]
impl<D: Dialect> RunStore for SqlStore<D> {
    async fn create_run(&self, new: NewRun) -> Result<RunRecord> {
        let id = fresh_id(new.created_at)?;
        self.exec(
            Statement::new(
                "INSERT INTO runs (id, surface, channel_id, thread_key, user_id, agent, repo, status, request, created_at, capability_token_hash, agent_token_hash, owner, channel_visibility, parent_run) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?)",
            )
            .text(id.as_str())
            .text(new.surface.as_str())
            .text(new.channel_id.as_str())
            .opt_text(new.thread_key)
            .text(new.user_id.as_str())
            .text(new.agent)
            .opt_text(new.repo.as_ref().map(|r| r.as_str()))
            .text(new.request)
            .int(new.created_at.micros())
            .opt_text(new.capability_token.as_ref().map(TokenHash::to_hex))
            .opt_text(new.agent_token.as_ref().map(TokenHash::to_hex))
            .opt_text(new.owner.as_ref().map(ReplicaId::as_str))
            .text(new.channel_visibility.as_str())
            .opt_text(new.parent_run.as_ref().map(RunId::as_str)),
        )
        .await?;
        self.get_run(&id).await?.ok_or(StoreError::NoSuchRun(id))
    }

    async fn start_run(&self, id: &RunId) -> Result<()> {
        let done = self
            .exec(
                Statement::new(
                    "UPDATE runs SET status = 'running' WHERE id = ? AND status = 'queued'",
                )
                .text(id.as_str()),
            )
            .await?;
        if done == 1 {
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
        let done = self
            .exec(
                Statement::new(
                    "UPDATE runs SET status = ?, answer = ?, error = ?, finished_at = ? WHERE id = ? AND status IN ('queued', 'running')",
                )
                .text(f.status.as_str())
                .opt_text(f.answer)
                .opt_text(f.error)
                .int(f.at.micros())
                .text(id.as_str()),
            )
            .await?;
        let run = self.get_run(id).await?;
        match (done, run) {
            (1, Some(run)) => Ok(run),
            (_, run) => {
                not_live(id, run.as_ref(), false).and(Err(StoreError::NoSuchRun(id.clone())))
            }
        }
    }

    async fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>> {
        self.one(
            Statement::new(format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?"))
                .text(id.as_str()),
        )
        .await?
        .as_ref()
        .map(rows::run)
        .transpose()
    }

    async fn list_runs(&self, q: &ListRuns) -> Result<Page> {
        let limit = check_limit(q.limit)?;
        let plan = plan::plan(&q.visible_to, self.max_width)?;
        match statements::list_read::<D>(plan, q) {
            ListRead::Nothing => Ok(Page {
                runs: vec![],
                next: None,
            }),
            ListRead::One(st) => Ok(assemble_page(self.runs(st).await?, limit)),
            ListRead::Groups(groups) => {
                merge::page_of_groups(self, &groups, q.status, limit, q.before.as_ref()).await
            }
        }
    }

    async fn append_event(&self, id: &RunId, at: Timestamp, kind: &str, body: &str) -> Result<i64> {
        let (run, kind, body) = (id.as_str().to_owned(), kind.to_owned(), body.to_owned());
        let bump = Statement::new(
            "UPDATE runs SET event_seq = event_seq + 1 WHERE id = ? RETURNING event_seq",
        )
        .text(id.as_str());
        let insert = Box::new(move |seq: i64| {
            Statement::new(
                "INSERT INTO run_events (run_id, seq, at, kind, body) VALUES (?, ?, ?, ?, ?)",
            )
            .text(run)
            .int(seq)
            .int(at.micros())
            .text(kind)
            .text(body)
        });
        D::bump_then(&self.pool, bump, insert)
            .await?
            .ok_or_else(|| StoreError::NoSuchRun(id.clone()))
    }

    async fn events(&self, id: &RunId) -> Result<Vec<RunEvent>> {
        let st = Statement::new(
            "SELECT seq, at, kind, body FROM run_events WHERE run_id = ? ORDER BY seq",
        )
        .text(id.as_str());
        self.all(st)
            .await?
            .iter()
            .map(|r| rows::event(id, r))
            .collect()
    }

    async fn add_friction(&self, f: Friction) -> Result<()> {
        // One statement: the row is written only when its run exists.
        let done = self
            .exec(
                Statement::new(
                    "INSERT INTO friction (run_id, at, kind, detail) SELECT id, ?, ?, ? FROM runs WHERE id = ?",
                )
                .int(f.at.micros())
                .text(f.kind)
                .text(f.detail)
                .text(f.run_id.as_str()),
            )
            .await?;
        if done == 1 {
            Ok(())
        } else {
            Err(StoreError::NoSuchRun(f.run_id))
        }
    }

    async fn friction(&self, id: &RunId) -> Result<Vec<Friction>> {
        let st = Statement::new(
            "SELECT at, kind, detail FROM friction WHERE run_id = ? ORDER BY at, id",
        )
        .text(id.as_str());
        self.all(st)
            .await?
            .iter()
            .map(|r| rows::friction(id, r))
            .collect()
    }

    async fn friction_recent(
        &self,
        visible_to: &Predicate,
        since: Timestamp,
        limit: u32,
    ) -> Result<Vec<FrictionOfRun>> {
        let limit = check_limit(limit)?;
        let Some(filter) = statements::plan_filter::<D>(plan::plan(visible_to, self.max_width)?)
        else {
            return Ok(vec![]);
        };
        let st = statements::friction_recent(filter, since.micros(), limit as i64);
        self.all(st)
            .await?
            .iter()
            .map(rows::friction_of_run)
            .collect()
    }

    async fn count_runs_since(&self, visible_to: &Predicate, since: Timestamp) -> Result<u64> {
        let Some(filter) = statements::plan_filter::<D>(plan::plan(visible_to, self.max_width)?)
        else {
            return Ok(0);
        };
        let n = match self
            .one(statements::count_since(filter, since.micros()))
            .await?
        {
            Some(r) => r.int(0)?,
            None => 0,
        };
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn heartbeat(&self, replica: &ReplicaId, now: Timestamp) -> Result<()> {
        self.exec(
            Statement::new(
                "INSERT INTO replicas (id, heartbeat_at) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
            )
            .text(replica.as_str())
            .int(now.micros()),
        )
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
        let st = Statement::new(
            "UPDATE runs SET status = 'interrupted', finished_at = ?, error = ? \
             WHERE status IN ('queued', 'running') AND ( \
               (? = 1 AND (owner IS NULL OR owner = ?)) \
               OR (owner IS NOT NULL AND owner <> ? AND NOT EXISTS (SELECT 1 FROM replicas p WHERE p.id = runs.owner AND p.heartbeat_at >= ?))) \
             RETURNING id",
        )
        .int(now.micros())
        .text(INTERRUPTED)
        .int(i64::from(own))
        .text(replica.as_str())
        .text(replica.as_str())
        .int(expired_before);
        let mut ids = Vec::new();
        for r in self.all(st).await? {
            ids.push(rows::run_id_of(&r)?);
        }
        Ok(ids)
    }

    async fn request_stop(&self, id: &RunId, at: Timestamp) -> Result<RunRecord> {
        let done = self
            .exec(
                Statement::new(
                    "UPDATE runs SET stop_requested_at = ? WHERE id = ? AND status IN ('queued', 'running') AND stop_requested_at IS NULL",
                )
                .int(at.micros())
                .text(id.as_str()),
            )
            .await?;
        let run = self.get_run(id).await?;
        match run {
            Some(run) if done == 1 || run.status.is_live() => Ok(run),
            run => not_live(id, run.as_ref(), false).and(Err(StoreError::NoSuchRun(id.clone()))),
        }
    }

    async fn stop_requests(&self, owner: &ReplicaId) -> Result<Vec<RunId>> {
        let st = Statement::new(format!(
            "SELECT x.id FROM {} WHERE x.status IN ('queued', 'running') AND x.owner = ? AND x.stop_requested_at IS NOT NULL",
            D::live_index()
        ))
        .text(owner.as_str());
        let mut ids = Vec::new();
        for r in self.all(st).await? {
            ids.push(rows::run_id_of(&r)?);
        }
        Ok(ids)
    }
}

#[async_trait]
impl<D: Dialect> MemoryStore for SqlStore<D> {
    async fn add_memory(&self, new: NewMemory) -> Result<MemoryRecord> {
        let id = fresh_id(new.created_at)?;
        let (kind, key) = scope_parts(&new.scope);
        self.exec(
            Statement::new(
                "INSERT INTO memory_records (id, scope_kind, scope_key, text, supersedes, source_run, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .text(id.as_str())
            .text(kind)
            .text(key)
            .text(new.text.clone())
            .opt_text(new.supersedes.as_ref().map(|s| s.as_str()))
            .opt_text(new.source_run.as_ref().map(|s| s.as_str()))
            .int(new.created_at.micros()),
        )
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
        let st = Statement::new(format!(
            "SELECT {} FROM memory_records WHERE id = ?",
            rows::MEMORY_COLUMNS
        ))
        .text(id.as_str());
        self.one(st).await?.as_ref().map(rows::memory).transpose()
    }

    /// Each scope's newest live rows read from its index in order (`memory_live_scope`) and
    /// merged: the cost follows the scopes asked for and the limit, not how many records
    /// exist. The superseded check carries `OFFSET 0` so Postgres keeps it a probe of
    /// `memory_supersedes` per row read (it will not flatten a sublink with an offset into
    /// an anti-join over every superseding record). How the arms are limited is the
    /// dialect's (`Dialect::MEMORY_ARM_LIMIT`).
    async fn memory_in_scopes(&self, scopes: &[ScopeKey], limit: u32) -> Result<Vec<MemoryRecord>> {
        let limit = check_limit(limit)?;
        if scopes.is_empty() {
            return Ok(vec![]);
        }
        let arm = format!(
            "SELECT {} FROM memory_records m WHERE m.scope_key = ? AND m.forgotten_at IS NULL \
             AND NOT EXISTS (SELECT 1 FROM memory_records n WHERE n.supersedes = m.id AND n.forgotten_at IS NULL LIMIT 1 OFFSET 0)",
            statements::qualified(rows::MEMORY_COLUMNS, "m"),
        );
        let arms = (0..scopes.len())
            .map(|i| match D::MEMORY_ARM_LIMIT {
                true => format!(
                    "SELECT * FROM ({arm} ORDER BY m.created_at DESC, m.id DESC LIMIT ?) AS s{i}"
                ),
                false => arm.clone(),
            })
            .collect::<Vec<_>>()
            .join(" UNION ALL ");
        let mut st = Statement::new(format!("{arms} ORDER BY created_at DESC, id DESC LIMIT ?"));
        for scope in scopes {
            st = st.text(scope_parts(scope).1);
            if D::MEMORY_ARM_LIMIT {
                st = st.int(limit as i64);
            }
        }
        self.all(st.int(limit as i64))
            .await?
            .iter()
            .map(rows::memory)
            .collect()
    }

    async fn forget_memory(&self, id: &MemoryId, at: Timestamp) -> Result<bool> {
        let done = self
            .exec(
                Statement::new(
                    "UPDATE memory_records SET forgotten_at = ? WHERE id = ? AND forgotten_at IS NULL",
                )
                .int(at.micros())
                .text(id.as_str()),
            )
            .await?;
        Ok(done == 1)
    }
}

#[async_trait]
impl<D: Dialect> ConfigStore for SqlStore<D> {
    async fn get_config(&self, tier: &ConfigTier, key: &str) -> Result<Option<ConfigValue>> {
        let (t, id) = tier_parts(tier);
        let st = Statement::new(format!(
            "SELECT {} FROM config_values WHERE tier = ? AND tier_id = ? AND key = ?",
            rows::CONFIG_COLUMNS
        ))
        .text(t)
        .text(id)
        .text(key);
        self.one(st).await?.as_ref().map(rows::config).transpose()
    }

    async fn set_config(&self, v: ConfigValue) -> Result<()> {
        let (t, id) = tier_parts(&v.tier);
        self.exec(
            Statement::new(
                "INSERT INTO config_values (tier, tier_id, key, value, updated_by, updated_at) VALUES (?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (tier, tier_id, key) DO UPDATE SET value = excluded.value, updated_by = excluded.updated_by, updated_at = excluded.updated_at",
            )
            .text(t)
            .text(id)
            .text(v.key)
            .text(v.value)
            .text(v.updated_by.as_str())
            .int(v.updated_at.micros()),
        )
        .await?;
        Ok(())
    }

    async fn delete_config(&self, tier: &ConfigTier, key: &str) -> Result<bool> {
        let (t, id) = tier_parts(tier);
        let done = self
            .exec(
                Statement::new(
                    "DELETE FROM config_values WHERE tier = ? AND tier_id = ? AND key = ?",
                )
                .text(t)
                .text(id)
                .text(key),
            )
            .await?;
        Ok(done == 1)
    }

    async fn list_config(&self, tier: &ConfigTier, prefix: &str) -> Result<Vec<ConfigValue>> {
        let (t, id) = tier_parts(tier);
        let st = Statement::new(format!(
            "SELECT {} FROM config_values WHERE tier = ? AND tier_id = ? AND substr(key, 1, length(?)) = ? ORDER BY key",
            rows::CONFIG_COLUMNS
        ))
        .text(t)
        .text(id)
        .text(prefix)
        .text(prefix);
        self.all(st).await?.iter().map(rows::config).collect()
    }
}

#[async_trait]
impl<D: Dialect> ScheduleStore for SqlStore<D> {
    async fn claim_firing(
        &self,
        name: &ScheduleName,
        slot: &FiringSlot,
        at: Timestamp,
    ) -> Result<bool> {
        let done = self
            .exec(
                Statement::new(
                    "INSERT INTO schedule_firings (name, slot, slot_at, fired_at, status) VALUES (?, ?, ?, ?, 'claimed') ON CONFLICT (name, slot) DO NOTHING",
                )
                .text(name.as_str())
                .text(slot.key())
                .int(slot.at().micros())
                .int(at.micros()),
            )
            .await?;
        Ok(done == 1)
    }

    async fn record_firing(
        &self,
        name: &ScheduleName,
        slot: &FiringSlot,
        status: &str,
        run_id: Option<&RunId>,
        detail: Option<&str>,
    ) -> Result<()> {
        let done = self
            .exec(
                Statement::new(
                    "UPDATE schedule_firings SET status = ?, run_id = ?, detail = ? WHERE name = ? AND slot = ?",
                )
                .text(status)
                .opt_text(run_id.map(|r| r.as_str()))
                .opt_text(detail)
                .text(name.as_str())
                .text(slot.key()),
            )
            .await?;
        if done == 1 {
            Ok(())
        } else {
            Err(StoreError::Invalid(format!(
                "no claimed firing of {name} at {}",
                slot.key()
            )))
        }
    }

    async fn recent_firings(&self, name: &ScheduleName, limit: u32) -> Result<Vec<Firing>> {
        let limit = check_limit(limit)?;
        let st = Statement::new(
            "SELECT slot, slot_at, fired_at, status, run_id, detail FROM schedule_firings WHERE name = ? ORDER BY fired_at DESC, slot DESC LIMIT ?",
        )
        .text(name.as_str())
        .int(limit as i64);
        self.all(st)
            .await?
            .iter()
            .map(|r| rows::firing(name, r))
            .collect()
    }

    async fn last_timer_slots(&self) -> Result<Vec<(ScheduleName, Timestamp)>> {
        let st = Statement::new(
            "SELECT name, MAX(slot_at) FROM schedule_firings WHERE slot LIKE 'timer:%' GROUP BY name ORDER BY name",
        );
        self.all(st).await?.iter().map(rows::last_slot).collect()
    }
}

#[async_trait]
impl<D: Dialect> SlackEventStore for SqlStore<D> {
    async fn first_sighting(&self, event_id: &str, at: Timestamp) -> Result<bool> {
        check_event_id(event_id)?;
        let done = self
            .exec(
                Statement::new(
                    "INSERT INTO slack_events (event_id, received_at) VALUES (?, ?) ON CONFLICT (event_id) DO NOTHING",
                )
                .text(event_id)
                .int(at.micros()),
            )
            .await?;
        Ok(done == 1)
    }

    async fn record_answered_thread(
        &self,
        channel: &str,
        thread_ts: &str,
        at: Timestamp,
    ) -> Result<()> {
        check_thread(channel, thread_ts)?;
        self.exec(
            Statement::new(
                "INSERT INTO slack_threads (channel, thread_ts, answered_at) VALUES (?, ?, ?) ON CONFLICT (channel, thread_ts) DO NOTHING",
            )
            .text(channel)
            .text(thread_ts)
            .int(at.micros()),
        )
        .await?;
        Ok(())
    }

    async fn answered_thread(&self, channel: &str, thread_ts: &str) -> Result<bool> {
        check_thread(channel, thread_ts)?;
        let st = Statement::new("SELECT 1 FROM slack_threads WHERE channel = ? AND thread_ts = ?")
            .text(channel)
            .text(thread_ts);
        Ok(!self.all(st).await?.is_empty())
    }
}

#[async_trait]
impl<D: Dialect> ApprovalStore for SqlStore<D> {
    async fn open_approval(&self, ask: &ApprovalRecord) -> Result<()> {
        check_approval_id(&ask.id)?;
        if ask.state != ApprovalState::Open {
            return Err(StoreError::Invalid("a new ask is open".into()));
        }
        self.exec(
            Statement::new(
                "INSERT INTO tool_approvals (id, run_id, principal, action, tool, arguments, state, asked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .text(&ask.id)
            .text(ask.run_id.as_str())
            .opt_text(ask.principal.as_ref().map(|p| p.as_str().to_owned()))
            .text(&ask.action)
            .text(&ask.tool)
            .text(&ask.arguments)
            .text(ApprovalState::Open.as_str())
            .int(ask.asked_at.micros()),
        )
        .await?;
        Ok(())
    }

    async fn open_approvals(&self, run: &RunId) -> Result<Vec<ApprovalRecord>> {
        let st = Statement::new(
            "SELECT id, run_id, principal, action, tool, arguments, state, asked_at FROM tool_approvals WHERE run_id = ? AND state = 'open' ORDER BY asked_at, id",
        )
        .text(run.as_str());
        self.all(st).await?.iter().map(rows::approval).collect()
    }

    async fn answer_approval(
        &self,
        id: &str,
        run: &RunId,
        approve: bool,
        by: &str,
        at: Timestamp,
    ) -> Result<bool> {
        check_approval_id(id)?;
        let state = if approve {
            ApprovalState::Approved
        } else {
            ApprovalState::Denied
        };
        // One conditional write: of two answers racing on any replicas, one counts.
        let done = self
            .exec(
                Statement::new(
                    "UPDATE tool_approvals SET state = ?, answered_by = ?, answered_at = ? WHERE id = ? AND run_id = ? AND state = 'open'",
                )
                .text(state.as_str())
                .text(by)
                .int(at.micros())
                .text(id)
                .text(run.as_str()),
            )
            .await?;
        Ok(done == 1)
    }

    async fn approval_state(&self, id: &str) -> Result<Option<ApprovalState>> {
        check_approval_id(id)?;
        let st = Statement::new("SELECT state FROM tool_approvals WHERE id = ?").text(id);
        match self.all(st).await?.first() {
            None => Ok(None),
            Some(row) => rows::approval_state(row).map(Some),
        }
    }

    async fn close_approval(&self, id: &str, at: Timestamp) -> Result<bool> {
        check_approval_id(id)?;
        let done = self
            .exec(
                Statement::new(
                    "UPDATE tool_approvals SET state = 'closed', answered_at = ? WHERE id = ? AND state = 'open'",
                )
                .int(at.micros())
                .text(id),
            )
            .await?;
        Ok(done == 1)
    }
}

/// The finished runs past their retention, oldest first: the batch every statement of one
/// pass deletes from.
const EXPIRED_RUNS: &str = "SELECT id FROM runs WHERE finished_at IS NOT NULL AND finished_at < ? AND status NOT IN ('queued', 'running') ORDER BY finished_at, id LIMIT ?";

#[async_trait]
impl<D: Dialect> RetentionStore for SqlStore<D> {
    async fn prune(&self, rules: &Retention, now: Timestamp) -> Result<Pruned> {
        let batch = i64::from(rules.batch.max(1));
        let mut pruned = Pruned::default();
        let by = |sql: &str, before: i64| Statement::new(sql).int(before).int(batch);
        if let Some(before) = cutoff(now, rules.slack_events) {
            pruned.slack_events = self.exec(by("DELETE FROM slack_events WHERE event_id IN (SELECT event_id FROM slack_events WHERE received_at < ? ORDER BY received_at LIMIT ?)", before)).await?;
        }
        if let Some(before) = cutoff(now, rules.slack_threads) {
            pruned.slack_threads = self.exec(by("DELETE FROM slack_threads WHERE (channel, thread_ts) IN (SELECT channel, thread_ts FROM slack_threads WHERE answered_at < ? ORDER BY answered_at LIMIT ?)", before)).await?;
        }
        if let Some(before) = cutoff(now, rules.approvals) {
            pruned.approvals = self.exec(by("DELETE FROM tool_approvals WHERE id IN (SELECT id FROM tool_approvals WHERE state <> 'open' AND asked_at < ? ORDER BY asked_at LIMIT ?)", before)).await?;
        }
        if let Some(before) = cutoff(now, rules.firings) {
            // Never a schedule's latest firing, nor its latest timer slot.
            pruned.firings = self.exec(by("DELETE FROM schedule_firings WHERE (name, slot) IN (SELECT r.name, r.slot FROM schedule_firings r WHERE r.fired_at < ? \
                AND EXISTS (SELECT 1 FROM schedule_firings n WHERE n.name = r.name AND n.fired_at > r.fired_at) \
                AND (r.slot NOT LIKE 'timer:%' OR EXISTS (SELECT 1 FROM schedule_firings t WHERE t.name = r.name AND t.slot LIKE 'timer:%' AND t.slot_at > r.slot_at)) \
                ORDER BY r.fired_at LIMIT ?)", before)).await?;
        }
        if let Some(before) = cutoff(now, rules.runs) {
            for child in ["run_events", "friction", "tool_approvals"] {
                self.exec(by(
                    &format!("DELETE FROM {child} WHERE run_id IN ({EXPIRED_RUNS})"),
                    before,
                ))
                .await?;
            }
            // A run goes once nothing refers to it (a pass cut short leaves it for the next).
            pruned.runs = self
                .exec(by(
                    &format!(
                        "DELETE FROM runs WHERE id IN ({EXPIRED_RUNS}) \
                AND NOT EXISTS (SELECT 1 FROM run_events e WHERE e.run_id = runs.id) \
                AND NOT EXISTS (SELECT 1 FROM friction f WHERE f.run_id = runs.id)"
                    ),
                    before,
                ))
                .await?;
        }
        Ok(pruned)
    }
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
