//! # store: runs, memory, config, schedule firings, surfaces' event ids and tool-call asks
//!
//! What it is: the persistence of Switchboard behind one set of traits, with three back ends
//! chosen by URL — `sqlite://path` (the embedded default: a file in WAL mode, created and
//! migrated on first open), `postgres://…` (for more than one replica), and `memory:` (for
//! unit tests of other crates; it evaluates predicates with `authz_core::matches`). The two
//! databases share one body, [`SqlStore`], generic over the [`Dialect`] that holds what really
//! differs between them.
//!
//! What it must never do: receive an actor or decide anything. It receives a compiled
//! `Predicate` and applies it **in its own query** — never by loading rows and filtering them
//! afterwards. It never stores a token in clear (SHA-256 only), and its back ends never read
//! the clock: time is an argument (`wall_clock` is for binaries and tests).
//!
//! Invariants:
//! - `Predicate::None` never touches the database; `All` sends no filter; a malformed predicate
//!   (empty `And`/`Or`, a list wider than the bound) is an error, never `All`.
//! - A list reads indexes ordered like the page: a bounded walk of the page index (a window of
//!   a few pages), then one index range per branch, newest-first with a per-branch limit
//!   (`merge.rs`); pages are keyset-paginated on `(created_at DESC, id DESC)` with an opaque
//!   cursor. The cost of a page does not grow with the table.
//! - `list_runs(predicate_for(actor))` returns exactly the runs point `authorize` allows
//!   (the SQL differential tests).
//! - A terminal status never changes; every write is one statement or one transaction.
//! - A row written before the visibility stamp reads `unknown`.
//! - A tool call's ask is answered or closed at most once, by one conditional write, whichever
//!   replica answers.
//!
//! ## Traits, back ends, modules
//!
//! The traits: `RunStore`, `MemoryStore` (agent memory's records; not the in-memory back end),
//! `ConfigStore`, `ScheduleStore`, `SurfaceEventStore`, `ApprovalStore`, `RetentionStore` (pruning
//! past `[retention]` in bounded batches; `db backup`'s `SqliteStore::backup_to` beside it);
//! `Store` is all of them. The back end is chosen by URL (`StoreUrl`, the one place a URL is
//! checked) and opened from a `StoreSpec` (the URL, a Postgres schema, the pool's size;
//! `open_spec`).
//!
//! | module | what it holds |
//! | --- | --- |
//! | `error` | `StoreError` (its `token()` is what logs carry, never the database's text), `Result` |
//! | `types` | `Timestamp` (authz-core's, re-exported; `wall_clock` reads the clock, for binaries and tests), `RunStatus` and `FiringSlot` (authz-core's, re-exported; `parse_status`, `manual_slot`), `RunRecord` (with its `Surface` and `stop_requested_at`), `NewRun`, `Cursor` (opaque hex of `created_at.id`), `TokenHash` (SHA-256 only), memory, config and firing records, `ApprovalRecord` / `ApprovalState` (a tool call's ask for a person: open, then approved, denied or closed, once), `new_id` (time-sortable) |
//! | `plan` | a `Predicate` checked (`Predicate::check`, width bound) and put in disjunctive normal form: groups of branches, one per value, each driven by an indexed column |
//! | `merge` | a page of a branched list: the walk (one statement: a window of a few pages of the page index's keys, filtered from the index, joined to their rows), then, only when the window left the page short, the per-branch k-way merge in rounds of keys below it, then those rows by id; the page helpers (`start_key`, `assemble_page`, `check_limit`) |
//! | `sql/mod.rs` | `SqlStore<D: Dialect>`: one body for both databases (`SqliteStore`, `PostgresStore` are its two instances), and its list backend |
//! | `sql/runs.rs`, `sql/memory_records.rs`, `sql/config_values.rs`, `sql/schedule_firings.rs`, `sql/surface_events.rs`, `sql/approvals.rs`, `sql/retention.rs` | one trait each, written once for both databases |
//! | `sql/dialect.rs` | `Dialect`: what really differs: placeholders, bound lists (`json_each` / `= ANY`), `INDEXED BY`, the row key a walk joins on (`rowid` / `ctid`), the branch read, how a page of runs travels (one JSON array from SQLite, rows from Postgres), plan lines, connect from the `StoreSpec` (Postgres: an optional schema, `plan_cache_mode = force_generic_plan`), migrate; `Statement`, `Bind`, `RowAccess` (rows read by position) |
//! | `sql/exec.rs` | a prepared statement as a sqlx query, and the counter-then-insert transaction, written once for every sqlx database |
//! | `sql/statements.rs` | the shared list statements (whole table, live runs, the walk and its boundary, runs by id), friction and counts |
//! | `sql/rows.rs` | rows parsed back into their types; anything that does not parse is `Corrupt` |
//! | `sql/sqlite.rs`, `sql/postgres.rs` | the two dialects: WAL file and `json_each` + rowid branches; `unnest` + `CROSS JOIN LATERAL` branches and an optional schema; each runs its `migrations/` directory with `sqlx::migrate!` |
//! | `repos` | the `repo.*` key family's one owner: `RepoSource` (`path:` / `url:`), set, remove, list; a URL's credentials are never shown |
//! | `fanout` | `LiveFanout` / `FanoutListener`: live-run payloads between replicas on one Postgres (`NOTIFY` / `LISTEN`); the store carries them and never reads them |
//! | `in_memory` | `InMemoryStore`, the in-memory back end (`memory:`; not agent memory): one mutex; filters with `authz_core::matches`; its replica leases (`in_memory/leases.rs`) and retention (`in_memory/retention.rs`) in files of their own |
//!
//! Test hooks (`connect` without migrating, `migrate_first`, `spec`, `pool`, `with_walk_pages`,
//! `list_plan`, `NewRun::fixture`) are behind the `testing` cargo feature.
//!
//! More invariants, pinned in `tests/contract/` (one suite over every back end; the Postgres
//! suites each in a schema of their own, from `test-support`):
//!
//! - `list_runs(predicate_for(actor))` equals point `authorize`: a proptest over one bursty
//!   fixture per back end, read with the walk and by branches alone (`PROPTEST_CASES` for more).
//! - Each branch reads an index ordered like the page (plans read in tests).
//! - A file that is not SQLite is refused untouched.
//! - Live runs of a dead replica become `interrupted` with their stamp and events
//!   (`tombstone_orphans`; a restart tombstones its own); a stop request is kept on a live run
//!   and refused on a finished one.
//! - `memory_in_scopes` is the newest live, unsuperseded records over all the scopes asked, read
//!   as one index range per scope (`memory_live_scope`, partial on `forgotten_at IS NULL`) with a
//!   per-row probe of `memory_supersedes` (on Postgres `supersedes` is `COLLATE "C"` like the ids
//!   it names, and the probe carries `OFFSET 0` so the planner keeps it a probe); SQLite merges
//!   the ranges in order and stops at the limit, Postgres limits each range first
//!   (`Dialect::MEMORY_ARM_LIMIT`). Its cost follows the scopes and the limit, not the table.
//!
//! Decisions: the bundled SQLite is built with `SQLITE_ENABLE_QPSG` and
//! `SQLITE_DEFAULT_MEMSTATUS=0` (`.cargo/config.toml`; why, with measurements, in
//! docs/benchmarks.md); times are `BIGINT` microseconds on both databases; ids compare byte-wise
//! (`COLLATE "C"` on Postgres); the page index on SQLite carries the filter columns so the walk
//! filters from it; friction proposals and repos are config-value key families
//! (`friction.proposal.*`, `repo.*`), MCP servers `mcp.*`; `[store] schema` puts Switchboard in a
//! Postgres schema of its own (the test harnesses use one each).

mod error;
pub mod fanout;
mod in_memory;
mod merge;
pub mod plan;
pub mod repos;
mod sql;
mod types;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use authz_core::{ConfigTier, Predicate, RunId, ScheduleName, ScopeKey, Surface};

pub use error::{Result, StoreError};
pub use fanout::{FanoutListener, LiveFanout};
pub use in_memory::InMemoryStore;
pub use merge::DEFAULT_WALK_PAGES;
pub use sql::{Backup, Postgres, PostgresStore, SqlStore, Sqlite, SqliteStore, check_schema};
pub use types::*;

/// The widest list a predicate may carry (channel grants, repos). One bound parameter on both
/// databases, so this is a sanity bound, not a parameter limit.
pub const DEFAULT_MAX_PREDICATE_WIDTH: usize = 4096;

/// The error text a tombstone carries.
pub(crate) const INTERRUPTED: &str = "interrupted: the process running it stopped";

/// Runs, their events and friction, and the replicas that own live runs.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Records a new run, `queued`, with a fresh time-sortable id.
    async fn create_run(&self, new: NewRun) -> Result<RunRecord>;
    /// `queued` → `running`.
    async fn start_run(&self, id: &RunId) -> Result<()>;
    /// A live run → a terminal status. A run already finished is `AlreadyFinished`.
    async fn finish_run(&self, id: &RunId, finish: Finish) -> Result<RunRecord>;
    async fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>>;
    /// A page of runs, filtered by `visible_to` in the store's own query.
    async fn list_runs(&self, query: &ListRuns) -> Result<Page>;
    /// Appends an event; returns its sequence number (1, 2, …, in order per run).
    async fn append_event(&self, id: &RunId, at: Timestamp, kind: &str, body: &str) -> Result<i64>;
    async fn events(&self, id: &RunId) -> Result<Vec<RunEvent>>;
    async fn add_friction(&self, friction: Friction) -> Result<()>;
    async fn friction(&self, id: &RunId) -> Result<Vec<Friction>>;
    /// Friction since `since` on the runs `visible_to` admits, newest first, joined to its run
    /// and filtered in the query.
    async fn friction_recent(
        &self,
        visible_to: &Predicate,
        since: Timestamp,
        limit: u32,
    ) -> Result<Vec<FrictionOfRun>>;
    /// How many runs `visible_to` admits that started at or after `since`.
    async fn count_runs_since(&self, visible_to: &Predicate, since: Timestamp) -> Result<u64>;
    /// Renews `replica`'s lease.
    async fn heartbeat(&self, replica: &ReplicaId, now: Timestamp) -> Result<()>;
    /// Records that `replica` is a `serve` of `version`, started at `started_at` (and renews
    /// its lease); [`RunStore::heartbeat`] keeps it alive.
    async fn announce_server(
        &self,
        replica: &ReplicaId,
        version: &str,
        started_at: Timestamp,
        now: Timestamp,
    ) -> Result<()>;
    /// Records the hash of the policy `replica` runs (at start and after each reload).
    async fn record_policy(&self, replica: &ReplicaId, hash: &str) -> Result<()>;
    /// `replica` stopped serving (a graceful stop): it is no server any more.
    async fn retire_server(&self, replica: &ReplicaId) -> Result<()>;
    /// The servers whose lease was renewed at or after `since`, the latest started first.
    async fn servers(&self, since: Timestamp) -> Result<Vec<ServerInfo>>;
    /// Tombstones (`interrupted`) the live runs of replicas whose lease expired before
    /// `now - lease`, and, when `own` is true (a restart), this replica's own live runs and
    /// runs with no owner. Stamps and events are kept. Returns the runs tombstoned.
    async fn tombstone_orphans(
        &self,
        replica: &ReplicaId,
        now: Timestamp,
        lease: Duration,
        own: bool,
    ) -> Result<Vec<RunId>>;
    /// Asks for a live run to stop, whichever process owns it; returns the run. The owner
    /// sees the request in [`RunStore::stop_requests`]. A finished run is `AlreadyFinished`.
    async fn request_stop(&self, id: &RunId, at: Timestamp) -> Result<RunRecord>;
    /// The live runs of `owner` that someone asked to stop.
    async fn stop_requests(&self, owner: &ReplicaId) -> Result<Vec<RunId>>;
}

/// Memory records in their scopes.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    async fn add_memory(&self, new: NewMemory) -> Result<MemoryRecord>;
    async fn get_memory(&self, id: &MemoryId) -> Result<Option<MemoryRecord>>;
    /// Live records (not forgotten, not superseded by a live record) of these scopes, newest
    /// first.
    async fn memory_in_scopes(&self, scopes: &[ScopeKey], limit: u32) -> Result<Vec<MemoryRecord>>;
    /// Marks a record forgotten; false when there is no such live record.
    async fn forget_memory(&self, id: &MemoryId, at: Timestamp) -> Result<bool>;
}

/// Tiered config values (org / channel / user), MCP server entries included.
#[async_trait]
pub trait ConfigStore: Send + Sync {
    async fn get_config(&self, tier: &ConfigTier, key: &str) -> Result<Option<ConfigValue>>;
    async fn set_config(&self, value: ConfigValue) -> Result<()>;
    async fn delete_config(&self, tier: &ConfigTier, key: &str) -> Result<bool>;
    /// Values on one tier whose key starts with `prefix`, by key.
    async fn list_config(&self, tier: &ConfigTier, prefix: &str) -> Result<Vec<ConfigValue>>;
}

/// One firing per `(name, slot)`, across replicas.
#[async_trait]
pub trait ScheduleStore: Send + Sync {
    /// True for the one caller that claims the slot; false for everyone after.
    async fn claim_firing(
        &self,
        name: &ScheduleName,
        slot: &FiringSlot,
        at: Timestamp,
    ) -> Result<bool>;
    /// How a claimed firing ended; an error for a slot nobody claimed.
    async fn record_firing(
        &self,
        name: &ScheduleName,
        slot: &FiringSlot,
        status: &str,
        run_id: Option<&RunId>,
        detail: Option<&str>,
    ) -> Result<()>;
    /// A schedule's latest firings (timer and manual), the most recently fired first.
    async fn recent_firings(&self, name: &ScheduleName, limit: u32) -> Result<Vec<Firing>>;
    /// Each schedule's latest timer slot any replica claimed (manual firings never count),
    /// in one read: where the missed-slot check starts after downtime. A schedule that
    /// never fired is absent.
    async fn last_timer_slots(&self) -> Result<Vec<(ScheduleName, Timestamp)>>;
}

/// What chat surfaces remember across replicas, keyed by surface: the event ids they were sent
/// (a retry is seen once) and the threads they answered (a follow-up without a mention is taken
/// on any replica). The same id on two surfaces is two events.
#[async_trait]
pub trait SurfaceEventStore: Send + Sync {
    /// True the first time `surface` is sent this event id; false for every retry.
    async fn first_sighting(&self, surface: Surface, event_id: &str, at: Timestamp)
    -> Result<bool>;
    /// Records that `surface`'s bot answered a thread (idempotent).
    async fn record_answered_thread(
        &self,
        surface: Surface,
        channel: &str,
        thread_key: &str,
        at: Timestamp,
    ) -> Result<()>;
    /// Whether any replica recorded `surface` answering this thread.
    async fn answered_thread(
        &self,
        surface: Surface,
        channel: &str,
        thread_key: &str,
    ) -> Result<bool>;
}

/// Tool calls waiting for a person's answer, readable and answerable from every replica.
#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Records a new ask (its state must be `Open`).
    async fn open_approval(&self, ask: &ApprovalRecord) -> Result<()>;
    /// The open asks of a run, oldest first.
    async fn open_approvals(&self, run: &RunId) -> Result<Vec<ApprovalRecord>>;
    /// Answers an open ask of `run`, once: true when this answer counted, false when the ask
    /// is not open (answered, closed, another run's, or none). `by` says who answered.
    async fn answer_approval(
        &self,
        id: &str,
        run: &RunId,
        approve: bool,
        by: &str,
        at: Timestamp,
    ) -> Result<bool>;
    /// An ask's state; `None` when there is no such ask.
    async fn approval_state(&self, id: &str) -> Result<Option<ApprovalState>>;
    /// Closes an open ask (it timed out, or its run ended): false when it was not open.
    async fn close_approval(&self, id: &str, at: Timestamp) -> Result<bool>;
}

/// What keeping each run's changes left in its repo's repository (`runs diff`).
#[async_trait]
pub trait ChangesStore: Send + Sync {
    /// Records what keeping a run's changes left, once: a second record of one run is
    /// `Invalid`, and a run that does not exist is `NoSuchRun`.
    async fn record_kept(&self, kept: &KeptChanges) -> Result<()>;
    /// What keeping left of a run; `None` when nothing was recorded (a run in no repo, a live
    /// one, or one whose keeping failed).
    async fn kept(&self, run: &RunId) -> Result<Option<KeptChanges>>;
}

/// Records past their use, deleted in bounded batches.
#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// One pass: at most `rules.batch` rows of each kind older than its retention, oldest
    /// first. Call again while [`Pruned::full`] says a kind filled its batch.
    async fn prune(&self, rules: &Retention, now: Timestamp) -> Result<Pruned>;
}

/// Everything the store keeps.
#[async_trait]
pub trait Store:
    RunStore
    + MemoryStore
    + ConfigStore
    + ScheduleStore
    + SurfaceEventStore
    + ApprovalStore
    + ChangesStore
    + RetentionStore
{
    /// `sqlite`, `postgres` or `memory`.
    fn backend(&self) -> &'static str;
    /// One round trip to the database (`/readyz`).
    async fn ping(&self) -> Result<()>;
    /// Live-run fan-out among replicas sharing this database; `None` where there is one
    /// process (SQLite, memory).
    fn live_fanout(&self) -> Option<std::sync::Arc<dyn LiveFanout>> {
        None
    }
}

/// A store URL, checked: the one place a URL is validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// `sqlite://path/to/switchboard.db` (or `sqlite:path`).
    Sqlite(String),
    /// `postgres://…` or `postgresql://…`.
    Postgres(String),
    /// `memory:`: nothing is kept past the process.
    Memory,
}

impl StoreUrl {
    pub fn parse(url: &str) -> Result<Self> {
        if url == "memory:" {
            return Ok(StoreUrl::Memory);
        }
        if let Some(path) = sqlite_path(url) {
            if path.is_empty() || path == ":memory:" {
                return Err(StoreError::BadUrl(redact_url(url)));
            }
            return Ok(StoreUrl::Sqlite(url.to_owned()));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            // Read as the driver reads it when it connects (host, port range, options), so a
            // URL it would refuse is refused here, where the config is checked.
            use std::str::FromStr;
            sqlx::postgres::PgConnectOptions::from_str(url)
                .map_err(|_| StoreError::BadUrl(redact_url(url)))?;
            return Ok(StoreUrl::Postgres(url.to_owned()));
        }
        Err(StoreError::BadUrl(redact_url(url)))
    }

    pub fn as_str(&self) -> &str {
        match self {
            StoreUrl::Sqlite(u) | StoreUrl::Postgres(u) => u,
            StoreUrl::Memory => "memory:",
        }
    }

    /// The URL as it may be shown: without a password.
    pub fn redacted(&self) -> String {
        redact_url(self.as_str())
    }

    /// This URL with a relative SQLite file made absolute under `dir` (the working directory
    /// the config was loaded in), its query kept; any other URL as it is.
    pub fn absolute_in(&self, dir: &std::path::Path) -> StoreUrl {
        let Some(path) = self.sqlite_file() else {
            return self.clone();
        };
        let (file, query) = match path.split_once('?') {
            Some((file, query)) => (file, format!("?{query}")),
            None => (path, String::new()),
        };
        if std::path::Path::new(file).is_absolute() {
            return self.clone();
        }
        let absolute = dir.join(file.strip_prefix("./").unwrap_or(file));
        StoreUrl::Sqlite(format!("sqlite://{}{query}", absolute.display()))
    }

    /// The file of a SQLite URL.
    pub fn sqlite_file(&self) -> Option<&str> {
        match self {
            StoreUrl::Sqlite(url) => sqlite_path(url),
            StoreUrl::Postgres(_) | StoreUrl::Memory => None,
        }
    }
}

/// The path part of a `sqlite://` (or `sqlite:`) URL.
fn sqlite_path(url: &str) -> Option<&str> {
    url.strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
}

/// How to open the store: the URL and, on Postgres, an optional schema of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSpec {
    pub url: StoreUrl,
    pub schema: Option<String>,
    /// At most this many database connections (`None`: the back end's default).
    pub max_connections: Option<u32>,
}

impl StoreSpec {
    pub fn url(url: StoreUrl) -> Self {
        StoreSpec {
            url,
            schema: None,
            max_connections: None,
        }
    }

    /// The spec of a URL alone, checked.
    pub fn parse(url: &str) -> Result<Self> {
        StoreUrl::parse(url).map(StoreSpec::url)
    }
}

/// Opens the store a spec names, creating and migrating it as needed.
pub async fn open_spec(spec: &StoreSpec) -> Result<Arc<dyn Store>> {
    Ok(match &spec.url {
        StoreUrl::Memory => Arc::new(InMemoryStore::new()),
        StoreUrl::Sqlite(_) => Arc::new(SqliteStore::open(spec).await?),
        StoreUrl::Postgres(_) => Arc::new(PostgresStore::open(spec).await?),
    })
}

/// A consistent copy of a live SQLite store at `to` ([`SqliteStore::backup_to`]). Any other
/// store is refused, saying what backs it up instead.
pub async fn backup(spec: &StoreSpec, to: &std::path::Path) -> Result<Backup> {
    match &spec.url {
        StoreUrl::Sqlite(_) => {
            let file = spec.url.sqlite_file().unwrap_or_default();
            if !std::path::Path::new(file).is_file() {
                return Err(StoreError::Invalid(format!(
                    "there is no SQLite store at {file} to back up"
                )));
            }
            SqliteStore::open(spec).await?.backup_to(to).await
        }
        StoreUrl::Postgres(_) => Err(StoreError::Invalid(
            "db backup copies a SQLite store; back a Postgres store up with pg_dump (docs/operations.md, \"Backups\")".into(),
        )),
        StoreUrl::Memory => Err(StoreError::Invalid(
            "the memory: store keeps nothing to back up".into(),
        )),
    }
}

/// Opens the store a URL names, creating and migrating it as needed.
pub async fn open(url: &str) -> Result<Arc<dyn Store>> {
    open_spec(&StoreSpec::parse(url)?).await
}

/// A URL with any password removed, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = url.get(scheme + 3..at).unwrap_or_default();
            let user = userinfo.split(':').next().unwrap_or_default();
            format!(
                "{}{}@{}",
                url.get(..scheme + 3).unwrap_or_default(),
                user,
                url.get(at + 1..).unwrap_or_default()
            )
        }
        _ => url.to_owned(),
    }
}

/// A chat surface's channel id and thread key (Slack's `ts`): each 1-64 printable ASCII
/// characters.
pub(crate) fn check_thread(channel: &str, thread_key: &str) -> Result<()> {
    let ok = |s: &str| !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_graphic());
    if ok(channel) && ok(thread_key) {
        Ok(())
    } else {
        Err(StoreError::Invalid(
            "a channel id and thread key are 1-64 printable ASCII characters each".into(),
        ))
    }
}

pub(crate) fn check_approval_id(id: &str) -> Result<()> {
    let ok = !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(
            "an approval id is 1-128 printable ASCII characters".into(),
        ))
    }
}

pub(crate) fn check_event_id(event_id: &str) -> Result<()> {
    let ok = !event_id.is_empty()
        && event_id.len() <= 128
        && event_id.chars().all(|c| c.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(
            "an event id is 1-128 printable ASCII characters".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_password_in_messages() {
        assert_eq!(redact_url("postgres://u:secret@h/db"), "postgres://u@h/db");
        assert_eq!(redact_url("postgres://h/db"), "postgres://h/db");
    }

    #[test]
    fn store_urls_are_checked_in_one_place() {
        assert_eq!(StoreUrl::parse("memory:").unwrap(), StoreUrl::Memory);
        assert!(matches!(
            StoreUrl::parse("sqlite://./x.db").unwrap(),
            StoreUrl::Sqlite(_)
        ));
        assert!(matches!(
            StoreUrl::parse("postgresql://h/db").unwrap(),
            StoreUrl::Postgres(_)
        ));
        for bad in [
            "",
            "sqlite:",
            "sqlite://",
            "sqlite::memory:",
            "mysql://u:pw@h/db",
            "x.db",
            "postgres://u:pw@h:99999/db",
            "postgres://u:pw@h:x/db",
        ] {
            let e = StoreUrl::parse(bad).unwrap_err().to_string();
            assert!(e.contains("unsupported store URL"), "{bad}: {e}");
            assert!(!e.contains("pw"), "{e}");
        }
    }

    #[test]
    fn a_relative_sqlite_file_is_made_absolute_once() {
        let dir = std::path::Path::new("/srv/sb");
        let abs = |u: &str| StoreUrl::parse(u).unwrap().absolute_in(dir);
        assert_eq!(abs("sqlite://./x.db").as_str(), "sqlite:///srv/sb/x.db");
        assert_eq!(
            abs("sqlite:data/x.db").as_str(),
            "sqlite:///srv/sb/data/x.db"
        );
        assert_eq!(
            abs("sqlite://x.db?mode=rwc").as_str(),
            "sqlite:///srv/sb/x.db?mode=rwc"
        );
        assert_eq!(abs("sqlite:///var/x.db").as_str(), "sqlite:///var/x.db");
        assert_eq!(
            abs("sqlite:///var/x.db").absolute_in(dir),
            abs("sqlite:///var/x.db")
        );
        assert_eq!(abs("postgres://h/db").as_str(), "postgres://h/db");
        assert_eq!(abs("memory:"), StoreUrl::Memory);
        assert_eq!(abs("sqlite://./x.db").sqlite_file(), Some("/srv/sb/x.db"));
    }
}
