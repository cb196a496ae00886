//! Tool approvals: an ask, answered once by a conditional write, closed.

use async_trait::async_trait;
use authz_core::RunId;

use super::dialect::{Dialect, Statement};
use super::{SqlStore, rows};

use crate::error::{Result, StoreError};
use crate::types::*;
use crate::{ApprovalStore, check_approval_id};

#[async_trait]
impl<D: Dialect> ApprovalStore for SqlStore<D> {
    async fn open_approval(&self, ask: &ApprovalRecord) -> Result<()> {
        check_approval_id(&ask.id)?;
        if ask.state != ApprovalState::Open {
            return Err(StoreError::Invalid("a new ask is open".into()));
        }
        self.exec(
            Statement::new(
                "INSERT INTO tool_approvals (id, run_id, principal, action, tool, arguments, state, asked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .text(&ask.id)
            .text(ask.run_id.as_str())
            .opt_text(ask.principal.as_ref().map(|p| p.as_str().to_owned()))
            .text(&ask.action)
            .text(&ask.tool)
            .text(&ask.arguments)
            .text(ApprovalState::Open.as_str())
            .int(ask.asked_at.micros()),
        )
        .await?;
        Ok(())
    }

    async fn open_approvals(&self, run: &RunId) -> Result<Vec<ApprovalRecord>> {
        let st = Statement::new(
            "SELECT id, run_id, principal, action, tool, arguments, state, asked_at FROM tool_approvals WHERE run_id = ? AND state = 'open' ORDER BY asked_at, id",
        )
        .text(run.as_str());
        self.all(st).await?.iter().map(rows::approval).collect()
    }

    async fn answer_approval(
        &self,
        id: &str,
        run: &RunId,
        approve: bool,
        by: &str,
        at: Timestamp,
    ) -> Result<bool> {
        check_approval_id(id)?;
        let state = if approve {
            ApprovalState::Approved
        } else {
            ApprovalState::Denied
        };
        // One conditional write: of two answers racing on any replicas, one counts.
        let done = self
            .exec(
                Statement::new(
                    "UPDATE tool_approvals SET state = ?, answered_by = ?, answered_at = ? WHERE id = ? AND run_id = ? AND state = 'open'",
                )
                .text(state.as_str())
                .text(by)
                .int(at.micros())
                .text(id)
                .text(run.as_str()),
            )
            .await?;
        Ok(done == 1)
    }

    async fn approval_state(&self, id: &str) -> Result<Option<ApprovalState>> {
        check_approval_id(id)?;
        let st = Statement::new("SELECT state FROM tool_approvals WHERE id = ?").text(id);
        match self.all(st).await?.first() {
            None => Ok(None),
            Some(row) => rows::approval_state(row).map(Some),
        }
    }

    async fn close_approval(&self, id: &str, at: Timestamp) -> Result<bool> {
        check_approval_id(id)?;
        let done = self
            .exec(
                Statement::new(
                    "UPDATE tool_approvals SET state = 'closed', answered_at = ? WHERE id = ? AND state = 'open'",
                )
                .int(at.micros())
                .text(id),
            )
            .await?;
        Ok(done == 1)
    }
}
