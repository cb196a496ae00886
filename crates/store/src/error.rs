//! Why a store call failed. Messages name what is wrong and how to fix it; none carries a
//! token, a password or a body.

use authz_core::RunId;

use authz_core::RunStatus;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "unsupported store URL {0:?}; use sqlite://path/to/switchboard.db, postgres://user@host/db or memory:"
    )]
    BadUrl(String),
    #[error("{path} is not a SQLite database (move it away or point store.url elsewhere)")]
    NotSqlite { path: String },
    // The database's error is written into the message and is not also the source, so a
    // chain printed whole (`{:#}`) says it once.
    #[error("migrating the database failed: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    #[error("database error: {0}")]
    Database(sqlx::Error),
    #[error("the cursor is not one this store issued")]
    BadCursor,
    #[error("malformed list predicate: {0}")]
    MalformedPredicate(authz_core::MalformedPredicate),
    #[error("a stored {what} is not valid: {value:?}")]
    Corrupt { what: &'static str, value: String },
    #[error("no run {0}")]
    NoSuchRun(RunId),
    #[error("run {id} is already {status}")]
    AlreadyFinished { id: RunId, status: RunStatus },
    #[error("{0}")]
    Invalid(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::Database(e)
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        StoreError::Migrate(e)
    }
}

impl StoreError {
    /// Whether the store could not record for want of room (SQLite's `SQLITE_FULL`, a full
    /// disk; Postgres's class 53, insufficient resources): nothing was written, and the same
    /// call may succeed once the operator frees space. Surfaces answer 503 for it.
    pub fn is_full(&self) -> bool {
        let StoreError::Database(sqlx::Error::Database(db)) = self else {
            return false;
        };
        db.code()
            .is_some_and(|code| code == "13" || code.starts_with("53"))
    }

    /// Whether a call may succeed if made again shortly, without anything changing on the
    /// caller's side: the database unreachable or out of room. Surfaces answer 503.
    pub fn is_transient(&self) -> bool {
        self.is_unreachable() || self.is_full() || self.is_busy()
    }

    /// Whether SQLite stayed busy past its wait (another connection held the lock: a
    /// checkpoint that cannot finish on a full disk, a long write): the same call may succeed
    /// shortly. `SQLITE_BUSY` and `SQLITE_LOCKED`, with their extended codes.
    pub fn is_busy(&self) -> bool {
        let StoreError::Database(sqlx::Error::Database(db)) = self else {
            return false;
        };
        let sqlite = db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some();
        sqlite
            && db
                .code()
                .is_some_and(|code| code.parse::<i64>().is_ok_and(|n| matches!(n & 0xff, 5 | 6)))
    }

    /// Whether the database could not be reached (its connections refused, closed or timed
    /// out, the server shutting down or starting), so the same call may succeed shortly:
    /// surfaces answer 503 for it, never 500.
    pub fn is_unreachable(&self) -> bool {
        let StoreError::Database(e) = self else {
            return false;
        };
        match e {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed => true,
            // Class 08: connection exceptions; 57P01-57P03: shut down, crashed, starting.
            sqlx::Error::Database(db) => db.code().is_some_and(|code| {
                code.starts_with("08") || matches!(code.as_ref(), "57P01" | "57P02" | "57P03")
            }),
            _ => false,
        }
    }

    /// What went wrong as a short token for log and span lines, which never carry free text
    /// from the database server: `database:<SQLSTATE>`, `pool-timeout`, `corrupt:<what>`, ….
    pub fn token(&self) -> String {
        match self {
            StoreError::BadUrl(_) => "bad-url".into(),
            StoreError::NotSqlite { .. } => "not-sqlite".into(),
            StoreError::Migrate(_) => "migrate".into(),
            StoreError::Database(e) => match e {
                sqlx::Error::Database(db) => match db.code() {
                    Some(code) => format!("database:{code}"),
                    None => "database".into(),
                },
                sqlx::Error::PoolTimedOut => "pool-timeout".into(),
                sqlx::Error::PoolClosed => "pool-closed".into(),
                sqlx::Error::Io(_) => "io".into(),
                sqlx::Error::Tls(_) => "tls".into(),
                sqlx::Error::Protocol(_) => "protocol".into(),
                sqlx::Error::RowNotFound => "row-not-found".into(),
                _ => "database".into(),
            },
            StoreError::BadCursor => "bad-cursor".into(),
            StoreError::MalformedPredicate(_) => "malformed-predicate".into(),
            StoreError::Corrupt { what, .. } => format!("corrupt:{}", what.replace(' ', "-")),
            StoreError::NoSuchRun(_) => "no-such-run".into(),
            StoreError::AlreadyFinished { .. } => "already-finished".into(),
            StoreError::Invalid(_) => "invalid".into(),
        }
    }

    /// A stored value that does not parse back into its type; the value is cut short.
    pub(crate) fn corrupt(what: &'static str, value: &str) -> Self {
        let value: String = value.chars().take(80).collect();
        StoreError::Corrupt { what, value }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that cannot be reached is told apart from one that answered with a fault: the
    /// first is a 503 to the caller, the second a 500.
    #[test]
    fn an_unreachable_store_is_told_apart_from_a_fault() {
        let unreachable = [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
            sqlx::Error::Protocol("unexpected eof".into()),
        ];
        for e in unreachable {
            let e = StoreError::Database(e);
            assert!(e.is_unreachable() && e.is_transient() && !e.is_full());
        }
        let faults = [
            StoreError::Database(sqlx::Error::RowNotFound),
            StoreError::BadCursor,
            StoreError::Invalid("x".into()),
        ];
        for e in faults {
            assert!(!e.is_unreachable(), "{e}");
        }
    }

    /// A log token never carries the free text a database or a value put in the message.
    #[test]
    fn tokens_are_short_and_carry_no_free_text() {
        let cases = [
            (
                StoreError::Database(sqlx::Error::Protocol("server said: secret-123".into())),
                "protocol",
            ),
            (
                StoreError::Database(sqlx::Error::PoolTimedOut),
                "pool-timeout",
            ),
            (
                StoreError::corrupt("run id", "secret-456"),
                "corrupt:run-id",
            ),
            (
                StoreError::Invalid("no claimed firing of secret-789".into()),
                "invalid",
            ),
            (StoreError::BadUrl("postgres://u:pw@h/db".into()), "bad-url"),
        ];
        for (e, want) in cases {
            assert_eq!(e.token(), want);
            assert!(!e.token().contains("secret"), "{e}");
        }
    }
}
