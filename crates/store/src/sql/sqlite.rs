//! SQLite, the embedded default: one file in WAL mode, created and migrated on first open.
//! Bound lists are JSON arrays read with `json_each`; each list branch is pinned to its index
//! with `INDEXED BY` and read in one statement per round, correlated by rowid.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Arguments, AssertSqlSafe, Pool};

use super::dialect::{Bind, Dialect, RowAccess, Statement, json_array, json_string, open_groups};
use super::exec;
use super::rows::RawRun;
use super::statements::{RUN_COLUMNS, status_sql};
use crate::error::{Result, StoreError};
use crate::merge::OpenBranch;
use crate::plan::Group;
use crate::types::{RunRecord, StatusFilter};
use crate::{StoreSpec, StoreUrl};

/// The SQLite dialect.
pub struct Sqlite;

fn migrator() -> sqlx::migrate::Migrator {
    sqlx::migrate!("../../migrations/sqlite")
}

/// The SQLite URL of a spec; any other is not this dialect's.
fn url_of(spec: &StoreSpec) -> Result<&str> {
    match &spec.url {
        StoreUrl::Sqlite(url) => Ok(url),
        other => Err(StoreError::BadUrl(other.redacted())),
    }
}

/// "file is not a database" is the one error that means the path holds something else.
fn not_sqlite(e: sqlx::Error, spec: &StoreSpec) -> StoreError {
    let is_notadb = matches!(&e, sqlx::Error::Database(db) if db.code().as_deref() == Some("26"))
        || e.to_string().contains("file is not a database");
    match (is_notadb, spec.url.sqlite_file()) {
        (true, Some(path)) => StoreError::NotSqlite {
            path: path.to_owned(),
        },
        _ => StoreError::Database(e),
    }
}

/// Creates `path` empty with mode 0600 when it does not exist (SQLite takes an empty file as
/// an empty database).
fn make_private_file(path: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        // A directory that does not exist is the driver's to name, with its own error.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::Invalid(format!("{}: {e}", path.display()))),
    }
}

/// Creates `path` new, empty, with mode 0600; a file already there is an error.
fn new_private_file(path: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map(drop)
        .map_err(|e| StoreError::Invalid(format!("{}: {e}", path.display())))
}

/// Mode 0600 for a file of the store that exists and is readable by more than its owner. One
/// this process may not change (another user's, who lets it read) is left as it is: the
/// owner's own `serve` makes it private when it opens it.
fn keep_private(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    if meta.permissions().mode() & 0o077 != 0 {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    }
}

/// Binds as SQLite takes them: lists as JSON arrays for `json_each`.
fn arguments(binds: Vec<Bind>) -> Result<SqliteArguments> {
    let mut args = SqliteArguments::default();
    for b in binds {
        match b {
            Bind::Text(s) => args.add(s),
            Bind::OptText(s) => args.add(s),
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

/// A statement as this database takes it: its text and its arguments.
fn prepared(st: Statement) -> Result<(String, SqliteArguments)> {
    Ok((Sqlite::placeholders(st.sql), arguments(st.binds)?))
}

#[async_trait]
impl Dialect for Sqlite {
    type Db = sqlx::Sqlite;
    type Row = SqliteRow;
    const BACKEND: &'static str = "sqlite";
    const MEMORY_ARM_LIMIT: bool = false;
    const WALK_TO_BOUNDARY: bool = true;

    fn placeholders(sql: String) -> String {
        sql
    }

    fn in_list(column: &str) -> String {
        format!("{column} IN (SELECT value FROM json_each(?))")
    }

    fn page_index() -> &'static str {
        "runs x INDEXED BY runs_page"
    }

    fn live_index() -> &'static str {
        "runs x INDEXED BY runs_live_page"
    }

    fn row_key() -> &'static str {
        "rowid"
    }

    /// Per group, `json_each` over `[value, created_at, id]` arrays (the value and where the
    /// branch continues), each branch a correlated, `LIMIT`ed read of its own index.
    fn branches(
        groups: &[Group],
        open: &[OpenBranch],
        status: StatusFilter,
        per_branch: u32,
    ) -> Statement {
        let mut parts = Vec::new();
        let mut binds = Vec::new();
        for (g, group, mine, filters) in open_groups::<Self>(groups, open) {
            let mine: Vec<String> = mine
                .iter()
                .map(|b| {
                    format!(
                        "[{},{},{}]",
                        json_string(&b.value),
                        b.after.0,
                        json_string(&b.after.1)
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
        Statement::new(parts.join(" UNION ALL ")).binds(binds)
    }

    fn explain(sql: &str) -> String {
        format!("EXPLAIN QUERY PLAN {sql}")
    }

    fn plan_line(row: &SqliteRow) -> String {
        row.text(3).unwrap_or_default()
    }

    async fn connect(spec: &StoreSpec) -> Result<Pool<sqlx::Sqlite>> {
        let url = url_of(spec)?;
        // The store holds every run's text: made readable by its owner alone, whatever the
        // umask (SQLite gives its -wal and -shm files the database file's mode).
        let file = spec
            .url
            .sqlite_file()
            .map(|f| std::path::PathBuf::from(f.split('?').next().unwrap_or(f)));
        if let Some(file) = &file {
            make_private_file(file)?;
            // A store made before (by hand, or by an older version) is made private before
            // this opens it, so the journal SQLite makes in its mode is private too.
            for suffix in ["", "-wal", "-shm"] {
                let mut name = file.clone().into_os_string();
                name.push(suffix);
                keep_private(std::path::Path::new(&name));
            }
        }
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|_| StoreError::BadUrl(url.to_owned()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(spec.max_connections.unwrap_or(4))
            // A file connection cannot drop the way a socket can, so the pool's ping before
            // each checkout would only add a round trip to the connection's worker thread to
            // every statement (docs/benchmarks.md, the store page beside raw SQLite).
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .map_err(|e| not_sqlite(e, spec))?;
        // Reading the schema proves the file is a SQLite database before anything is written.
        sqlx::query("SELECT count(*) FROM sqlite_master")
            .fetch_one(&pool)
            .await
            .map_err(|e| not_sqlite(e, spec))?;
        Ok(pool)
    }

    async fn migrate(
        pool: &Pool<sqlx::Sqlite>,
        only: Option<usize>,
        spec: &StoreSpec,
    ) -> Result<()> {
        let mut m = migrator();
        if let Some(n) = only {
            m.migrations = std::borrow::Cow::Owned(m.migrations.iter().take(n).cloned().collect());
        }
        m.run(pool).await.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(inner) => not_sqlite(inner, spec),
            other => StoreError::Migrate(other),
        })
    }

    async fn fetch_all(pool: &Pool<sqlx::Sqlite>, st: Statement) -> Result<Vec<SqliteRow>> {
        Ok(exec::query(prepared(st)?).fetch_all(pool).await?)
    }

    async fn fetch_optional(pool: &Pool<sqlx::Sqlite>, st: Statement) -> Result<Option<SqliteRow>> {
        Ok(exec::query(prepared(st)?).fetch_optional(pool).await?)
    }

    async fn fetch_runs(pool: &Pool<sqlx::Sqlite>, st: Statement) -> Result<Vec<RunRecord>> {
        let sql = format!(
            "SELECT json_group_array(json_array({RUN_COLUMNS})) FROM ({})",
            st.sql
        );
        let page: String = sqlx::query_scalar_with(AssertSqlSafe(sql), arguments(st.binds)?)
            .fetch_one(pool)
            .await?;
        let rows: Vec<RawRun<'_>> = serde_json::from_str(&page)
            .map_err(|e| StoreError::corrupt("run row", &e.to_string()))?;
        rows.into_iter().map(RawRun::into_record).collect()
    }

    async fn execute(pool: &Pool<sqlx::Sqlite>, st: Statement) -> Result<u64> {
        Ok(exec::query(prepared(st)?)
            .execute(pool)
            .await?
            .rows_affected())
    }

    async fn bump_then(
        pool: &Pool<sqlx::Sqlite>,
        bump: Statement,
        then: Box<dyn FnOnce(i64) -> Statement + Send>,
    ) -> Result<Option<i64>> {
        exec::bump_then(pool, prepared, bump, then).await
    }
}

/// What `db backup` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    pub bytes: u64,
    pub runs: i64,
}

impl super::SqlStore<Sqlite> {
    /// A consistent copy of the live store at `to`: `VACUUM INTO` reads one snapshot (writers
    /// go on meanwhile, and a write not yet committed is not in it) into a file beside `to`,
    /// which is checked (`PRAGMA integrity_check`), synced and then linked into place only if
    /// nothing is at `to` yet. However it fails, `to` is untouched and the partial file gone.
    pub async fn backup_to(&self, to: &std::path::Path) -> Result<Backup> {
        let invalid = |what: String| StoreError::Invalid(what);
        if to.symlink_metadata().is_ok() {
            return Err(invalid(format!(
                "{} already exists; name a new file (a backup never overwrites one)",
                to.display()
            )));
        }
        let name = to
            .file_name()
            .ok_or_else(|| invalid(format!("{}: name a file", to.display())))?;
        let dir = to.parent().filter(|d| !d.as_os_str().is_empty());
        if dir.is_some_and(|d| !d.is_dir()) {
            return Err(invalid(format!(
                "{} is not a directory here; make it first",
                dir.unwrap_or(to).display()
            )));
        }
        let partial = to.with_file_name(format!(
            ".{}.partial-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let written = self.write_backup(&partial, to).await;
        if written.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        written
    }

    async fn write_backup(
        &self,
        partial: &std::path::Path,
        to: &std::path::Path,
    ) -> Result<Backup> {
        let io = |e: std::io::Error, path: &std::path::Path| {
            StoreError::Invalid(format!("{}: {e}", path.display()))
        };
        let target = partial.to_str().ok_or_else(|| {
            StoreError::Invalid(format!("{}: name a file with a UTF-8 path", to.display()))
        })?;
        // Made first, new, empty and private, so the copy is never readable by others (a
        // file already there is never taken over).
        new_private_file(partial)?;
        sqlx::query("VACUUM INTO ?")
            .bind(target)
            .execute(&self.pool)
            .await?;
        let options = SqliteConnectOptions::new()
            .filename(partial)
            .read_only(true);
        let copy = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        let check: String = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(&copy)
            .await?;
        let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM runs")
            .fetch_one(&copy)
            .await?;
        copy.close().await;
        if check != "ok" {
            return Err(StoreError::Invalid(format!(
                "the copy did not pass SQLite's integrity check ({check}); nothing was kept"
            )));
        }
        std::fs::File::open(partial)
            .and_then(|f| f.sync_all())
            .map_err(|e| io(e, partial))?;
        // A link fails if `to` appeared meanwhile: never overwrite.
        std::fs::hard_link(partial, to).map_err(|e| io(e, to))?;
        std::fs::remove_file(partial).map_err(|e| io(e, partial))?;
        if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io(e, dir))?;
        }
        let bytes = std::fs::metadata(to).map_err(|e| io(e, to))?.len();
        Ok(Backup { bytes, runs })
    }
}
