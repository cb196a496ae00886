//! Agent memory's records: written, superseded, forgotten, read by scope.

use async_trait::async_trait;
use authz_core::ScopeKey;

use super::dialect::{Dialect, Statement};
use super::{SqlStore, fresh_id, rows, statements};

use crate::MemoryStore;
use crate::error::Result;
use crate::merge::check_limit;
use crate::types::*;

#[async_trait]
impl<D: Dialect> MemoryStore for SqlStore<D> {
    async fn add_memory(&self, new: NewMemory) -> Result<MemoryRecord> {
        let id = fresh_id(new.created_at)?;
        let (kind, key) = scope_parts(&new.scope);
        self.exec(
            Statement::new(
                "INSERT INTO memory_records (id, scope_kind, scope_key, text, supersedes, source_run, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .text(id.as_str())
            .text(kind)
            .text(key)
            .text(new.text.clone())
            .opt_text(new.supersedes.as_ref().map(|s| s.as_str()))
            .opt_text(new.source_run.as_ref().map(|s| s.as_str()))
            .int(new.created_at.micros()),
        )
        .await?;
        Ok(MemoryRecord {
            id,
            scope: new.scope,
            text: new.text,
            supersedes: new.supersedes,
            source_run: new.source_run,
            created_at: new.created_at,
            forgotten_at: None,
        })
    }

    async fn get_memory(&self, id: &MemoryId) -> Result<Option<MemoryRecord>> {
        let st = Statement::new(format!(
            "SELECT {} FROM memory_records WHERE id = ?",
            rows::MEMORY_COLUMNS
        ))
        .text(id.as_str());
        self.one(st).await?.as_ref().map(rows::memory).transpose()
    }

    /// Each scope's newest live rows read from its index in order (`memory_live_scope`) and
    /// merged: the cost follows the scopes asked for and the limit, not how many records
    /// exist. The superseded check carries `OFFSET 0` so Postgres keeps it a probe of
    /// `memory_supersedes` per row read (it will not flatten a sublink with an offset into
    /// an anti-join over every superseding record). How the arms are limited is the
    /// dialect's (`Dialect::MEMORY_ARM_LIMIT`).
    async fn memory_in_scopes(&self, scopes: &[ScopeKey], limit: u32) -> Result<Vec<MemoryRecord>> {
        let limit = check_limit(limit)?;
        if scopes.is_empty() {
            return Ok(vec![]);
        }
        let arm = format!(
            "SELECT {} FROM memory_records m WHERE m.scope_key = ? AND m.forgotten_at IS NULL \
             AND NOT EXISTS (SELECT 1 FROM memory_records n WHERE n.supersedes = m.id AND n.forgotten_at IS NULL LIMIT 1 OFFSET 0)",
            statements::qualified(rows::MEMORY_COLUMNS, "m"),
        );
        let arms = (0..scopes.len())
            .map(|i| match D::MEMORY_ARM_LIMIT {
                true => format!(
                    "SELECT * FROM ({arm} ORDER BY m.created_at DESC, m.id DESC LIMIT ?) AS s{i}"
                ),
                false => arm.clone(),
            })
            .collect::<Vec<_>>()
            .join(" UNION ALL ");
        let mut st = Statement::new(format!("{arms} ORDER BY created_at DESC, id DESC LIMIT ?"));
        for scope in scopes {
            st = st.text(scope_parts(scope).1);
            if D::MEMORY_ARM_LIMIT {
                st = st.int(limit as i64);
            }
        }
        self.all(st.int(limit as i64))
            .await?
            .iter()
            .map(rows::memory)
            .collect()
    }

    async fn forget_memory(&self, id: &MemoryId, at: Timestamp) -> Result<bool> {
        let done = self
            .exec(
                Statement::new(
                    "UPDATE memory_records SET forgotten_at = ? WHERE id = ? AND forgotten_at IS NULL",
                )
                .int(at.micros())
                .text(id.as_str()),
            )
            .await?;
        Ok(done == 1)
    }
}
