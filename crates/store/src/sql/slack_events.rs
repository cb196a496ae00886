//! Slack event ids seen and threads answered, each recorded once.

use async_trait::async_trait;

use super::SqlStore;
use super::dialect::{Dialect, Statement};

use crate::error::Result;
use crate::types::*;
use crate::{SlackEventStore, check_event_id, check_thread};

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
