//! `[memory]`: the raw section, its typed config and its checks.

use std::collections::BTreeSet;

use authz_core::AgentName;
use serde::Deserialize;
use toml::Spanned;

use super::agents::declared_agent;
use super::numbers::Positive;
use super::{LoadError, Text};

/// `[memory] extractor`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExtractorName {
    #[default]
    Rules,
    Model,
}

/// `[memory]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySection {
    pub extractor: Option<ExtractorName>,
    pub model_agent: Option<Spanned<String>>,
    pub context_max_records: Option<Spanned<Positive>>,
    pub context_max_chars: Option<Positive>,
    pub reflection_timeout_seconds: Option<Positive>,
}

/// `[memory]`.
#[derive(Debug, Clone, Default)]
pub struct MemoryConfig {
    pub settings: memory::MemorySettings,
    /// The agent whose back end the `model` extractor asks (set exactly when it is `model`).
    pub model_agent: Option<AgentName>,
}

/// The most records a context block may hold: the store's page bound.
const MAX_CONTEXT_RECORDS: u64 = 1_000;

pub(super) fn memory_config(
    t: &Text<'_>,
    section: &MemorySection,
    agents: &BTreeSet<AgentName>,
) -> Result<MemoryConfig, LoadError> {
    let mut settings = memory::MemorySettings::default();
    let model = section.extractor == Some(ExtractorName::Model);
    if model {
        settings.extractor = memory::ExtractorKind::Model;
    }
    let model_agent = match (&section.model_agent, model) {
        (None, false) => None,
        (None, true) => {
            return Err(t.key(
                &["memory", "extractor"],
                "the model extractor needs `model_agent`, the declared agent whose back end it asks, like model_agent = \"assistant\"",
            ));
        }
        (Some(name), false) => {
            return Err(t.at(
                name.span().start,
                "is read only by the model extractor; set extractor = \"model\" or remove it",
            ));
        }
        (Some(name), true) => Some(declared_agent(t, name, agents)?),
    };
    if let Some(n) = &section.context_max_records {
        if n.get_ref().0 > MAX_CONTEXT_RECORDS {
            return Err(t.at(
                n.span().start,
                format!("must be at most {MAX_CONTEXT_RECORDS}"),
            ));
        }
        settings.context_max_records = u32::try_from(n.get_ref().0).unwrap_or(1_000);
    }
    if let Some(n) = section.context_max_chars {
        settings.context_max_chars = n.usize();
    }
    if let Some(n) = section.reflection_timeout_seconds {
        settings.reflection_timeout = n.seconds();
    }
    Ok(MemoryConfig {
        settings,
        model_agent,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::tests::ok;

    #[test]
    fn memory_defaults_to_the_rules_extractor_and_takes_its_bounds() {
        let d = ok("");
        assert_eq!(d.memory.settings.extractor, memory::ExtractorKind::Rules);
        assert_eq!(d.memory.model_agent, None);
        assert_eq!(d.memory.settings.context_max_records, 20);
        let c = ok(
            "[agents.helper]\n[memory]\nextractor = \"model\"\nmodel_agent = \"helper\"\n\
                context_max_records = 7\ncontext_max_chars = 900\nreflection_timeout_seconds = 5\n",
        );
        assert_eq!(c.memory.settings.extractor, memory::ExtractorKind::Model);
        assert_eq!(
            c.memory.model_agent.as_ref().map(|a| a.as_str()),
            Some("helper")
        );
        assert_eq!(c.memory.settings.context_max_records, 7);
        assert_eq!(c.memory.settings.context_max_chars, 900);
        assert_eq!(
            c.memory.settings.reflection_timeout,
            std::time::Duration::from_secs(5)
        );
    }
}
