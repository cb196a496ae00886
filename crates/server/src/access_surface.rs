//! The Access surface's state at start: absent, off and what it needs, or its verifier.

use std::sync::Arc;

use access_api::Verifier;

use crate::LoadedConfig;

/// Whether `/api` and `/runs` are served.
pub enum AccessState {
    /// No `[access]` section.
    Absent,
    /// `[access]` is present but lacks what it needs (named).
    Missing(&'static str),
    /// The verifier could not be built (the reason).
    Failed(String),
    On(Arc<Verifier>),
}

impl AccessState {
    pub fn build(config: &LoadedConfig) -> Self {
        let Some(access) = &config.access else {
            return AccessState::Absent;
        };
        match access.settings() {
            Err(missing) => AccessState::Missing(missing),
            Ok(settings) => match Verifier::new(settings) {
                Ok(v) => AccessState::On(Arc::new(v)),
                Err(e) => AccessState::Failed(e.to_string()),
            },
        }
    }

    pub fn verifier(&self) -> Option<&Arc<Verifier>> {
        match self {
            AccessState::On(v) => Some(v),
            _ => None,
        }
    }
}
