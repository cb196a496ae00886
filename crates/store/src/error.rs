//! Why a store call failed. Messages name what is wrong and how to fix it; none carries a
//! token, a password or a body.

use authz_core::RunId;

use crate::types::RunStatus;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "unsupported store URL {0:?}; use sqlite://path/to/switchboard.db, postgres://user@host/db or memory:"
    )]
    BadUrl(String),
    #[error("{path} is not a SQLite database (move it away or point store.url elsewhere)")]
    NotSqlite { path: String },
    #[error("migrating the database failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
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

impl StoreError {
    /// A stored value that does not parse back into its type; the value is cut short.
    pub(crate) fn corrupt(what: &'static str, value: &str) -> Self {
        let value: String = value.chars().take(80).collect();
        StoreError::Corrupt { what, value }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
