//! `[ingress]`: the raw section and its typed config (read as written: serde checks each key;
//! `parse` fills in the defaults).

use std::path::PathBuf;

use serde::Deserialize;

use super::numbers::Positive;

/// `[ingress]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngressSection {
    pub tokens_file: Option<PathBuf>,
    pub max_body_bytes: Option<Positive>,
}

/// `[ingress]`.
#[derive(Debug, Clone)]
pub struct IngressConfig {
    /// The token map as a JSON file (else `SWITCHBOARD_INGRESS_TOKENS`).
    pub tokens_file: Option<PathBuf>,
    pub max_body_bytes: usize,
}

impl Default for IngressConfig {
    fn default() -> Self {
        IngressConfig {
            tokens_file: None,
            max_body_bytes: 64 * 1024,
        }
    }
}
