//! What keeping each run's changes left: one row per run, written once.

use async_trait::async_trait;
use authz_core::RunId;

use super::dialect::{Dialect, Statement};
use super::{SqlStore, rows};

use crate::ChangesStore;
use crate::error::{Result, StoreError};
use crate::types::*;

#[async_trait]
impl<D: Dialect> ChangesStore for SqlStore<D> {
    async fn record_kept(&self, kept: &KeptChanges) -> Result<()> {
        let not_kept = serde_json::to_string(&kept.not_kept)
            .map_err(|e| StoreError::Invalid(format!("names not kept: {e}")))?;
        if self.kept(&kept.run_id).await?.is_some() {
            return Err(StoreError::Invalid(format!(
                "run {} already has its kept changes recorded",
                kept.run_id
            )));
        }
        // One statement: the row is written only when its run exists, and only once (the
        // primary key refuses a second).
        let done = self
            .exec(
                Statement::new(
                    "INSERT INTO run_changes (run_id, repo, start_commit, tip_commit, commits, not_kept, not_kept_count, kept_at) \
                     SELECT id, ?, ?, ?, ?, ?, ?, ? FROM runs WHERE id = ?",
                )
                .text(kept.repo.as_str())
                .text(&kept.start)
                .opt_text(kept.tip.clone())
                .int(i64::try_from(kept.commits).unwrap_or(i64::MAX))
                .text(not_kept)
                .int(i64::try_from(kept.not_kept_count).unwrap_or(i64::MAX))
                .int(kept.kept_at.micros())
                .text(kept.run_id.as_str()),
            )
            .await?;
        if done == 1 {
            Ok(())
        } else {
            Err(StoreError::NoSuchRun(kept.run_id.clone()))
        }
    }

    async fn kept(&self, run: &RunId) -> Result<Option<KeptChanges>> {
        let st = Statement::new(
            "SELECT run_id, repo, start_commit, tip_commit, commits, not_kept, not_kept_count, kept_at \
             FROM run_changes WHERE run_id = ?",
        )
        .text(run.as_str());
        self.one(st).await?.as_ref().map(rows::kept).transpose()
    }
}
