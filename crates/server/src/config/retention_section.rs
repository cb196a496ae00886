//! `[retention]`: the raw section, its typed config and its checks.

use std::time::Duration;

use serde::Deserialize;

use super::numbers::{self, Whole};
use super::{LoadError, Text};

/// `[retention]`: how long records are kept past their use, in days (0: kept for ever).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionSection {
    pub slack_event_days: Option<Whole>,
    pub slack_thread_days: Option<Whole>,
    pub approval_days: Option<Whole>,
    pub firing_days: Option<Whole>,
    pub run_days: Option<Whole>,
    /// How often a replica prunes.
    pub interval_minutes: Option<Whole>,
    /// The most rows of each kind one pass deletes.
    pub batch: Option<Whole>,
}

/// `[retention]`: what the store prunes, how often, in what batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionConfig {
    pub rules: store::Retention,
    pub interval: Duration,
}

/// `[retention]`, its defaults where a key is absent; 0 days keeps a kind for ever.
pub(super) fn retention(
    t: &Text<'_>,
    section: &RetentionSection,
) -> Result<RetentionConfig, LoadError> {
    let default = store::Retention::default();
    let days = |key: Option<numbers::Whole>, default: Option<Duration>| match key {
        None => default,
        Some(numbers::Whole(0)) => None,
        Some(numbers::Whole(d)) => Some(Duration::from_secs(d.saturating_mul(24 * 3600))),
    };
    let batch = match section.batch {
        None => default.batch,
        Some(numbers::Whole(n)) if (1..=100_000).contains(&n) => n as u32,
        Some(_) => {
            return Err(t.key(
                &["retention", "batch"],
                "expected a number of rows from 1 to 100000, like batch = 500",
            ));
        }
    };
    let interval = match section.interval_minutes {
        None => Duration::from_secs(3600),
        Some(numbers::Whole(m)) if m >= 1 => Duration::from_secs(m.saturating_mul(60)),
        Some(_) => {
            return Err(t.key(
                &["retention", "interval_minutes"],
                "expected at least 1, like interval_minutes = 60",
            ));
        }
    };
    Ok(RetentionConfig {
        rules: store::Retention {
            event_ids: days(section.slack_event_days, default.event_ids),
            answered_threads: days(section.slack_thread_days, default.answered_threads),
            approvals: days(section.approval_days, default.approvals),
            firings: days(section.firing_days, default.firings),
            runs: days(section.run_days, default.runs),
            batch,
        },
        interval,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{err, ok};

    #[test]
    fn retention_takes_days_a_batch_and_an_interval_and_refuses_the_rest() {
        let d = ok("");
        assert_eq!(d.retention.rules, store::Retention::default());
        assert_eq!(d.retention.interval, Duration::from_secs(3600));
        let day = |n: u64| Some(Duration::from_secs(n * 24 * 3600));
        let c = ok(
            "[retention]\nslack_event_days = 2\nslack_thread_days = 0\napproval_days = 5\nfiring_days = 1\nrun_days = 365\ninterval_minutes = 5\nbatch = 100\n",
        );
        let r = &c.retention.rules;
        assert_eq!(
            (
                r.event_ids,
                r.answered_threads,
                r.approvals,
                r.firings,
                r.runs
            ),
            (day(2), None, day(5), day(1), day(365)),
            "0 keeps a kind for ever"
        );
        assert_eq!(
            (r.batch, c.retention.interval),
            (100, Duration::from_secs(300))
        );
        for (text, want) in [
            (
                "[retention]\nbatch = 0\n",
                "t.toml:2:1: retention.batch: expected a number of rows from 1 to 100000",
            ),
            (
                "[retention]\nbatch = 100001\n",
                "t.toml:2:1: retention.batch: expected a number of rows",
            ),
            (
                "[retention]\ninterval_minutes = 0\n",
                "t.toml:2:1: retention.interval_minutes: expected at least 1",
            ),
            ("[retention]\nrun_days = -1\n", "t.toml:2:12: "),
            ("[retention]\nrun_days = \"30\"\n", "t.toml:2:12: "),
            ("[retention]\nrun_day = 30\n", "t.toml:2:1: "),
        ] {
            let got = err(text);
            assert!(
                got.starts_with(want),
                "{text:?}\n  got:  {got}\n  want: {want}"
            );
        }
    }
}
