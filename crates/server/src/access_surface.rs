//! The Access surface's state at start: absent, off and what it needs, or its verifier (built
//! without I/O: the key set is fetched at the first token).

use std::sync::Arc;

use access_api::Verifier;

use crate::LoadedConfig;

/// Whether `/api` and `/runs` are served.
pub enum AccessState {
    /// No `[access]` section.
    Absent,
    /// `[access]` is present but lacks what it needs (named).
    Missing(&'static str),
    On(Arc<Verifier>),
}

impl AccessState {
    pub fn build(config: &LoadedConfig) -> Self {
        let Some(access) = &config.access else {
            return AccessState::Absent;
        };
        match access.settings() {
            Err(missing) => AccessState::Missing(missing),
            Ok(settings) => AccessState::On(Arc::new(Verifier::new(settings))),
        }
    }

    pub fn verifier(&self) -> Option<&Arc<Verifier>> {
        match self {
            AccessState::On(v) => Some(v),
            _ => None,
        }
    }
}
