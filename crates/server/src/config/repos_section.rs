//! `[repos]`: the raw section and its check into the dispatcher's `RepoSettings`.

use serde::Deserialize;

use super::numbers::{self, Whole};

/// `[repos]`: how URL repos are refetched and run branches kept.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReposSection {
    /// A URL repo is fetched again before a run when its last fetch is older than this
    /// (0: before every run).
    pub fetch_interval_seconds: Option<Whole>,
    /// A run's branch is deleted once the run is older than this many days (0: kept).
    pub branch_retention_days: Option<Whole>,
}

/// `[repos]`, its defaults where a key is absent.
pub(super) fn repos(section: &ReposSection) -> dispatch::RepoSettings {
    let default = dispatch::RepoSettings::default();
    dispatch::RepoSettings {
        fetch_interval: section
            .fetch_interval_seconds
            .map_or(default.fetch_interval, |w| {
                std::time::Duration::from_secs(w.0)
            }),
        branch_retention: match section.branch_retention_days {
            None => default.branch_retention,
            Some(numbers::Whole(0)) => None,
            Some(numbers::Whole(days)) => Some(std::time::Duration::from_secs(
                days.saturating_mul(24 * 3600),
            )),
        },
    }
}
