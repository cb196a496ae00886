//! # store: runs, memory, config, schedule firings, Slack event ids and tool-call asks
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
//! the clock: time is an argument (`Timestamp::now` is for binaries and tests).
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

mod error;
pub mod fanout;
mod in_memory;
mod merge;
pub mod plan;
pub mod repos;
mod sql;
mod status;
mod types;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use authz_core::{ConfigTier, Predicate, RunId, ScheduleName, ScopeKey};

pub use error::{Result, StoreError};
pub use fanout::{FanoutListener, LiveFanout};
pub use in_memory::InMemoryStore;
pub use merge::DEFAULT_WALK_PAGES;
pub use sql::{Backup, Postgres, PostgresStore, SqlStore, Sqlite, SqliteStore};
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

/// Slack retries deduplicated by event id, across replicas.
#[async_trait]
pub trait SlackEventStore: Send + Sync {
    /// True the first time an event id is seen; false for every retry.
    async fn first_sighting(&self, event_id: &str, at: Timestamp) -> Result<bool>;
    /// Records that the bot answered a thread (idempotent).
    async fn record_answered_thread(
        &self,
        channel: &str,
        thread_ts: &str,
        at: Timestamp,
    ) -> Result<()>;
    /// Whether any replica recorded answering this thread.
    async fn answered_thread(&self, channel: &str, thread_ts: &str) -> Result<bool>;
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
    + SlackEventStore
    + ApprovalStore
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

/// A Slack channel id and a thread's `ts`: each 1-64 printable ASCII characters.
pub(crate) fn check_thread(channel: &str, thread_ts: &str) -> Result<()> {
    let ok = |s: &str| !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_graphic());
    if ok(channel) && ok(thread_ts) {
        Ok(())
    } else {
        Err(StoreError::Invalid(
            "a Slack channel id and thread ts are 1-64 printable ASCII characters each".into(),
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
            "a Slack event id is 1-128 printable ASCII characters".into(),
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
        ] {
            let e = StoreUrl::parse(bad).unwrap_err().to_string();
            assert!(e.contains("unsupported store URL"), "{bad}: {e}");
            assert!(!e.contains("pw"), "{e}");
        }
    }
}
