//! Schedule firings: one per (name, slot), claimed by a conditional insert.

use async_trait::async_trait;
use authz_core::{RunId, ScheduleName};

use super::dialect::{Dialect, Statement};
use super::{SqlStore, rows};

use crate::ScheduleStore;
use crate::error::{Result, StoreError};
use crate::merge::check_limit;
use crate::types::*;

#[async_trait]
impl<D: Dialect> ScheduleStore for SqlStore<D> {
    async fn claim_firing(
        &self,
        name: &ScheduleName,
        slot: &FiringSlot,
        at: Timestamp,
    ) -> Result<bool> {
        let done = self
            .exec(
                Statement::new(
                    "INSERT INTO schedule_firings (name, slot, slot_at, fired_at, status) VALUES (?, ?, ?, ?, 'claimed') ON CONFLICT (name, slot) DO NOTHING",
                )
                .text(name.as_str())
                .text(slot.key())
                .int(slot.at().micros())
                .int(at.micros()),
            )
            .await?;
        Ok(done == 1)
    }

    async fn record_firing(
        &self,
        name: &ScheduleName,
        slot: &FiringSlot,
        status: &str,
        run_id: Option<&RunId>,
        detail: Option<&str>,
    ) -> Result<()> {
        let done = self
            .exec(
                Statement::new(
                    "UPDATE schedule_firings SET status = ?, run_id = ?, detail = ? WHERE name = ? AND slot = ?",
                )
                .text(status)
                .opt_text(run_id.map(|r| r.as_str()))
                .opt_text(detail)
                .text(name.as_str())
                .text(slot.key()),
            )
            .await?;
        if done == 1 {
            Ok(())
        } else {
            Err(StoreError::Invalid(format!(
                "no claimed firing of {name} at {}",
                slot.key()
            )))
        }
    }

    async fn recent_firings(&self, name: &ScheduleName, limit: u32) -> Result<Vec<Firing>> {
        let limit = check_limit(limit)?;
        let st = Statement::new(
            "SELECT slot, slot_at, fired_at, status, run_id, detail FROM schedule_firings WHERE name = ? ORDER BY fired_at DESC, slot DESC LIMIT ?",
        )
        .text(name.as_str())
        .int(limit as i64);
        self.all(st)
            .await?
            .iter()
            .map(|r| rows::firing(name, r))
            .collect()
    }

    async fn last_timer_slots(&self) -> Result<Vec<(ScheduleName, Timestamp)>> {
        let st = Statement::new(
            "SELECT name, MAX(slot_at) FROM schedule_firings WHERE slot LIKE 'timer:%' GROUP BY name ORDER BY name",
        );
        self.all(st).await?.iter().map(rows::last_slot).collect()
    }
}
