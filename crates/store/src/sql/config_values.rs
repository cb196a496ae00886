//! Config values on their three tiers.

use async_trait::async_trait;
use authz_core::ConfigTier;

use super::dialect::{Dialect, Statement};
use super::{SqlStore, rows};

use crate::ConfigStore;
use crate::error::Result;
use crate::types::*;

#[async_trait]
impl<D: Dialect> ConfigStore for SqlStore<D> {
    async fn get_config(&self, tier: &ConfigTier, key: &str) -> Result<Option<ConfigValue>> {
        let (t, id) = tier_parts(tier);
        let st = Statement::new(format!(
            "SELECT {} FROM config_values WHERE tier = ? AND tier_id = ? AND key = ?",
            rows::CONFIG_COLUMNS
        ))
        .text(t)
        .text(id)
        .text(key);
        self.one(st).await?.as_ref().map(rows::config).transpose()
    }

    async fn set_config(&self, v: ConfigValue) -> Result<()> {
        let (t, id) = tier_parts(&v.tier);
        self.exec(
            Statement::new(
                "INSERT INTO config_values (tier, tier_id, key, value, updated_by, updated_at) VALUES (?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (tier, tier_id, key) DO UPDATE SET value = excluded.value, updated_by = excluded.updated_by, updated_at = excluded.updated_at",
            )
            .text(t)
            .text(id)
            .text(v.key)
            .text(v.value)
            .text(v.updated_by.as_str())
            .int(v.updated_at.micros()),
        )
        .await?;
        Ok(())
    }

    async fn delete_config(&self, tier: &ConfigTier, key: &str) -> Result<bool> {
        let (t, id) = tier_parts(tier);
        let done = self
            .exec(
                Statement::new(
                    "DELETE FROM config_values WHERE tier = ? AND tier_id = ? AND key = ?",
                )
                .text(t)
                .text(id)
                .text(key),
            )
            .await?;
        Ok(done == 1)
    }

    async fn list_config(&self, tier: &ConfigTier, prefix: &str) -> Result<Vec<ConfigValue>> {
        let (t, id) = tier_parts(tier);
        let st = Statement::new(format!(
            "SELECT {} FROM config_values WHERE tier = ? AND tier_id = ? AND substr(key, 1, length(?)) = ? ORDER BY key",
            rows::CONFIG_COLUMNS
        ))
        .text(t)
        .text(id)
        .text(prefix)
        .text(prefix);
        self.all(st).await?.iter().map(rows::config).collect()
    }
}
