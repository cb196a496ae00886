//! Pruning what is past its retention, in batches, never what is in use.

use async_trait::async_trait;

use super::SqlStore;
use super::dialect::{Dialect, Statement};

use crate::RetentionStore;
use crate::error::Result;
use crate::types::*;

/// The finished runs past their retention, oldest first: the batch every statement of one
/// pass deletes from.
const EXPIRED_RUNS: &str = "SELECT id FROM runs WHERE finished_at IS NOT NULL AND finished_at < ? AND status NOT IN ('queued', 'running') ORDER BY finished_at, id LIMIT ?";

#[async_trait]
impl<D: Dialect> RetentionStore for SqlStore<D> {
    async fn prune(&self, rules: &Retention, now: Timestamp) -> Result<Pruned> {
        let batch = i64::from(rules.batch.max(1));
        let mut pruned = Pruned::default();
        let by = |sql: &str, before: i64| Statement::new(sql).int(before).int(batch);
        if let Some(before) = cutoff(now, rules.event_ids) {
            pruned.event_ids = self.exec(by("DELETE FROM surface_events WHERE (surface, event_id) IN (SELECT surface, event_id FROM surface_events WHERE received_at < ? ORDER BY received_at LIMIT ?)", before)).await?;
        }
        if let Some(before) = cutoff(now, rules.answered_threads) {
            pruned.answered_threads = self.exec(by("DELETE FROM answered_threads WHERE (surface, channel, thread_key) IN (SELECT surface, channel, thread_key FROM answered_threads WHERE answered_at < ? ORDER BY answered_at LIMIT ?)", before)).await?;
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
            for child in ["run_events", "friction", "tool_approvals", "run_changes"] {
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
