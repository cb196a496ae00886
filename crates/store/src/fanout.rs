//! Live-run updates between the replicas sharing one database: Postgres `LISTEN/NOTIFY`
//! (operations.md, "Past one machine"). SQLite and the in-memory store have one process, so
//! no fan-out.
//!
//! The store carries payloads; it never reads them. What a payload says and who may see it
//! is the dispatcher's and authz-core's business.

use async_trait::async_trait;

use crate::error::Result;

/// The most a payload may hold: Postgres refuses a `NOTIFY` payload of 8,000 bytes or more.
pub const MAX_PAYLOAD: usize = 7_999;

/// Sends and receives live-run payloads among replicas.
#[async_trait]
pub trait LiveFanout: Send + Sync {
    /// Sends one payload to every listener, this replica's own included.
    async fn notify(&self, payload: &str) -> Result<()>;
    /// Listens from now on, on a connection of its own.
    async fn listen(&self) -> Result<Box<dyn FanoutListener>>;
}

/// One listening connection.
#[async_trait]
pub trait FanoutListener: Send {
    /// The next payload. An error means the connection was lost (payloads sent meanwhile
    /// are lost too); listen again.
    async fn next(&mut self) -> Result<String>;
}

/// The notification channel of a store: one per database and schema, so stores in other
/// schemas of the same database (tests, staging) never hear each other.
pub fn channel_name(schema: Option<&str>) -> String {
    match schema {
        // A schema is at most 63 characters and a channel at most 63; `sb_live_` takes 8.
        Some(s) => format!("sb_live_{}", s.chars().take(55).collect::<String>()),
        None => "sb_live".to_owned(),
    }
}
