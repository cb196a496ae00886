//! A cron expression read in an IANA time zone, and the slots it names.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use commands::Timestamp;
use croner::Cron;
use croner::parser::{CronParser, Seconds};

/// Why a cron expression or a time zone was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronSpecError {
    #[error(
        "`{expr}` is not a cron expression: {reason} (five fields: minute hour day-of-month month day-of-week, e.g. \"0 9 * * MON\")"
    )]
    Cron { expr: String, reason: String },
    #[error(
        "`{0}` is not an IANA time zone (e.g. \"UTC\", \"Europe/Berlin\", \"America/New_York\")"
    )]
    Zone(String),
}

/// Five-field cron (minute resolution) in a time zone. Slots are instants: a wall time the
/// zone skips (a DST gap) has no slot, and one it repeats fires once.
#[derive(Debug, Clone)]
pub struct CronSpec {
    expr: String,
    zone: Tz,
    cron: Cron,
}

impl CronSpec {
    pub fn parse(expr: &str, zone: &str) -> Result<CronSpec, CronSpecError> {
        let zone: Tz = zone
            .parse()
            .map_err(|_| CronSpecError::Zone(zone.to_owned()))?;
        let refused = |reason: String| CronSpecError::Cron {
            expr: expr.to_owned(),
            reason,
        };
        let parser = CronParser::builder().seconds(Seconds::Disallowed).build();
        let cron = parser.parse(expr).map_err(|e| refused(e.to_string()))?;
        Ok(CronSpec {
            expr: expr.trim().to_owned(),
            zone,
            cron,
        })
    }

    pub fn expr(&self) -> &str {
        &self.expr
    }

    pub fn zone(&self) -> &str {
        self.zone.name()
    }

    fn local(&self, at: Timestamp) -> Option<DateTime<Tz>> {
        DateTime::<Utc>::from_timestamp_micros(at.micros()).map(|t| t.with_timezone(&self.zone))
    }

    fn instant(t: &DateTime<Tz>) -> Timestamp {
        Timestamp::from_micros(t.timestamp_micros())
    }

    /// The latest slot at or before `now`.
    pub fn latest_at_or_before(&self, now: Timestamp) -> Option<Timestamp> {
        let local = self.local(now)?;
        self.cron
            .find_previous_occurrence(&local, true)
            .ok()
            .map(|t| Self::instant(&t))
    }

    /// The first slot strictly after `at`.
    pub fn next_after(&self, at: Timestamp) -> Option<Timestamp> {
        let local = self.local(at)?;
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|t| Self::instant(&t))
    }

    /// How many slots lie strictly between `after` and `before`, counting at most `cap`.
    pub fn slots_between(&self, after: Timestamp, before: Timestamp, cap: usize) -> usize {
        let mut n = 0;
        let mut at = after;
        while n < cap {
            match self.next_after(at) {
                Some(next) if next < before => {
                    n += 1;
                    at = next;
                }
                _ => break,
            }
        }
        n
    }

    /// `2026-12-07 09:00 Europe/Berlin`: a slot as the schedule's zone reads it.
    pub fn wall_time(&self, at: Timestamp) -> String {
        match self.local(at) {
            Some(t) => format!("{} {}", t.format("%Y-%m-%d %H:%M"), self.zone.name()),
            None => format!("{} µs after the epoch", at.micros()),
        }
    }
}
