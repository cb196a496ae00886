//! Surfaces' event ids seen and threads answered, each recorded once, keyed by surface.

use async_trait::async_trait;
use authz_core::Surface;

use super::SqlStore;
use super::dialect::{Dialect, Statement};

use crate::error::Result;
use crate::types::*;
use crate::{SurfaceEventStore, check_event_id, check_thread};

#[async_trait]
impl<D: Dialect> SurfaceEventStore for SqlStore<D> {
    async fn first_sighting(
        &self,
        surface: Surface,
        event_id: &str,
        at: Timestamp,
    ) -> Result<bool> {
        check_event_id(event_id)?;
        let done = self
            .exec(
                Statement::new(
                    "INSERT INTO surface_events (surface, event_id, received_at) VALUES (?, ?, ?) ON CONFLICT (surface, event_id) DO NOTHING",
                )
                .text(surface.as_str())
                .text(event_id)
                .int(at.micros()),
            )
            .await?;
        Ok(done == 1)
    }

    async fn record_answered_thread(
        &self,
        surface: Surface,
        channel: &str,
        thread_key: &str,
        at: Timestamp,
    ) -> Result<()> {
        check_thread(channel, thread_key)?;
        self.exec(
            Statement::new(
                "INSERT INTO answered_threads (surface, channel, thread_key, answered_at) VALUES (?, ?, ?, ?) ON CONFLICT (surface, channel, thread_key) DO NOTHING",
            )
            .text(surface.as_str())
            .text(channel)
            .text(thread_key)
            .int(at.micros()),
        )
        .await?;
        Ok(())
    }

    async fn answered_thread(
        &self,
        surface: Surface,
        channel: &str,
        thread_key: &str,
    ) -> Result<bool> {
        check_thread(channel, thread_key)?;
        let st = Statement::new(
            "SELECT 1 FROM answered_threads WHERE surface = ? AND channel = ? AND thread_key = ?",
        )
        .text(surface.as_str())
        .text(channel)
        .text(thread_key);
        Ok(!self.all(st).await?.is_empty())
    }
}
