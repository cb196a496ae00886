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

/// Five-field cron (minute resolution) in a time zone, with Vixie cron's convention at a DST
/// change (croner's): a wall time fixed in both minute and hour that the zone skips fires
/// once, at the end of the gap, and one it repeats fires once, in its first copy; a wildcard
/// in the hour or the minute (`0 * * * *`, `*/15 * * * *`, `* 2 * * *`) fires at each wall
/// time that exists, so none in a gap and both copies of a repeated hour. `@midnight` is
/// `@daily`, as in Vixie cron.
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
        // croner knows every nickname but this one.
        let text = if expr.trim().eq_ignore_ascii_case("@midnight") {
            "@daily"
        } else {
            expr
        };
        let cron = parser.parse(text).map_err(|e| refused(e.to_string()))?;
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

    /// Whether the expression names a slot within `years` years after `now` (`0 0 31 2 *`
    /// names none, ever; `0 0 29 2 *` one every leap year).
    pub fn fires_within_years(&self, now: Timestamp, years: i64) -> bool {
        let horizon = now
            .micros()
            .saturating_add(years.saturating_mul(366 * 86_400 * 1_000_000));
        self.next_after(now)
            .is_some_and(|next| next.micros() <= horizon)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> Timestamp {
        let t = DateTime::parse_from_rfc3339(rfc3339).unwrap_or_default();
        Timestamp::from_micros(t.timestamp_micros())
    }

    /// The slots in `[from, to)` as `UTC hh:mm = local wall time`.
    fn slots(expr: &str, zone: &str, from: &str, to: &str) -> Vec<String> {
        let Ok(cron) = CronSpec::parse(expr, zone) else {
            return vec![format!("{expr} did not parse")];
        };
        let (mut now, end) = (at(from), at(to));
        let mut out = Vec::new();
        while let Some(next) = cron.next_after(now) {
            if next >= end {
                break;
            }
            let utc = DateTime::<Utc>::from_timestamp_micros(next.micros()).unwrap_or_default();
            let wall = cron.wall_time(next);
            let local = wall.split(' ').nth(1).unwrap_or_default();
            out.push(format!("{}={local}", utc.format("%H:%M")));
            now = next;
        }
        out
    }

    /// The 2027 changes, on a fixed clock: a skipped fixed time fires at the end of the gap, a
    /// repeated fixed time once (its first copy), a wildcard hour at every wall time that
    /// exists. Lord Howe shifts by 30 minutes.
    #[test]
    fn dst_changes_follow_vixie_crons_convention() {
        let berlin = "Europe/Berlin";
        let ny = "America/New_York";
        let lord_howe = "Australia/Lord_Howe";
        // Berlin, 28 March 2027: 02:00 CET becomes 03:00 CEST (01:00 UTC).
        let (a, b) = ("2027-03-28T00:00:00Z", "2027-03-28T03:00:00Z");
        assert_eq!(slots("30 2 * * *", berlin, a, b), ["01:00=03:00"]);
        assert_eq!(slots("0 2 * * *", berlin, a, b), ["01:00=03:00"]);
        assert_eq!(
            slots("0 * * * *", berlin, a, b),
            ["01:00=03:00", "02:00=04:00"]
        );
        // Berlin, 31 October 2027: 03:00 CEST becomes 02:00 CET (01:00 UTC).
        let (a, b) = ("2027-10-30T23:00:00Z", "2027-10-31T03:00:00Z");
        assert_eq!(slots("30 2 * * *", berlin, a, b), ["00:30=02:30"]);
        assert_eq!(
            slots("0 * * * *", berlin, a, b),
            ["00:00=02:00", "01:00=02:00", "02:00=03:00"]
        );
        // New York, 14 March 2027: 02:00 EST becomes 03:00 EDT (07:00 UTC).
        let (a, b) = ("2027-03-14T05:00:00Z", "2027-03-14T09:00:00Z");
        assert_eq!(slots("30 2 * * *", ny, a, b), ["07:00=03:00"]);
        assert_eq!(
            slots("0 * * * *", ny, a, b),
            ["06:00=01:00", "07:00=03:00", "08:00=04:00"]
        );
        // New York, 7 November 2027: 02:00 EDT becomes 01:00 EST (06:00 UTC).
        let (a, b) = ("2027-11-07T04:00:00Z", "2027-11-07T08:00:00Z");
        assert_eq!(slots("45 1 * * *", ny, a, b), ["05:45=01:45"]);
        assert_eq!(slots("0 2 * * *", ny, a, b), ["07:00=02:00"]);
        assert_eq!(
            slots("30 * * * *", ny, a, b),
            ["04:30=00:30", "05:30=01:30", "06:30=01:30", "07:30=02:30"]
        );
        // A fixed hour with a wildcard minute is a wildcard too: both copies (docs/schedules.md);
        // so is a list of minutes.
        assert_eq!(
            slots("*/30 1 * * *", ny, a, b),
            ["05:00=01:00", "05:30=01:30", "06:00=01:00", "06:30=01:30"]
        );
        assert_eq!(
            slots("0,30 1 * * *", ny, a, b),
            ["05:00=01:00", "05:30=01:30", "06:00=01:00", "06:30=01:30"]
        );
        // Lord Howe, 4 April 2027: 02:00 (+11) becomes 01:30 (+10:30); 01:30-02:00 repeats.
        let (a, b) = ("2027-04-03T13:00:00Z", "2027-04-03T17:00:00Z");
        assert_eq!(slots("45 1 * * *", lord_howe, a, b), ["14:45=01:45"]);
        assert_eq!(
            slots("*/15 1 * * *", lord_howe, a, b),
            [
                "14:00=01:00",
                "14:15=01:15",
                "14:30=01:30",
                "14:45=01:45",
                "15:00=01:30",
                "15:15=01:45"
            ]
        );
        // Lord Howe, 3 October 2027: 02:00 (+10:30) becomes 02:30 (+11); 02:00-02:30 is skipped.
        let (a, b) = ("2027-10-02T14:00:00Z", "2027-10-02T18:00:00Z");
        assert_eq!(slots("15 2 * * *", lord_howe, a, b), ["15:30=02:30"]);
        assert_eq!(slots("30 2 * * *", lord_howe, a, b), ["15:30=02:30"]);
        assert_eq!(
            slots("0 * * * *", lord_howe, a, b),
            ["14:30=01:00", "16:00=03:00", "17:00=04:00"]
        );
    }

    /// The scheduler fires the latest slot at or before now: in the second copy of a repeated
    /// hour, a fixed time's latest slot is still its first copy, so it fires once.
    #[test]
    fn a_repeated_fixed_time_is_the_latest_slot_once() {
        let cron = CronSpec::parse("30 2 * * *", "Europe/Berlin").unwrap_or_else(|e| panic!("{e}"));
        // 01:45 UTC is 02:45 CET, the second copy of 02:00-03:00.
        assert_eq!(
            cron.latest_at_or_before(at("2027-10-31T01:45:00Z")),
            Some(at("2027-10-31T00:30:00Z"))
        );
    }

    #[test]
    fn nicknames_and_slotless_expressions() {
        let now = at("2026-12-04T00:00:00Z");
        for nickname in ["@midnight", "@MIDNIGHT", "@daily"] {
            let cron = CronSpec::parse(nickname, "UTC").unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                cron.next_after(now),
                Some(at("2026-12-05T00:00:00Z")),
                "{nickname}"
            );
        }
        assert!(CronSpec::parse("@hourly", "UTC").is_ok());
        assert!(CronSpec::parse("@fortnightly", "UTC").is_err());
        let never = CronSpec::parse("0 0 31 2 *", "UTC").unwrap_or_else(|e| panic!("{e}"));
        assert!(!never.fires_within_years(now, 28));
        let leap = CronSpec::parse("0 0 29 2 *", "UTC").unwrap_or_else(|e| panic!("{e}"));
        assert!(leap.fires_within_years(now, 28));
        assert!(leap.fires_within_years(now, 4));
    }
}
