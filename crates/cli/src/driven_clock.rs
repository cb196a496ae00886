//! The test-only driven clock (cargo feature `driven-clock`): `serve`'s clock running `pace`
//! times faster than the wall clock, so the replicas check sees a hundred minutely schedule
//! slots in seconds. Every replica given the same pace and anchor reads the same instant, as
//! two replicas on real clocks do. Never in a shipped build: the feature is off by default and
//! only scripts/replicas-check.sh turns it on; without it nothing reads the variable.

// The parser is built (and tested) in every build; only the feature's build calls it.
#![cfg_attr(not(feature = "driven-clock"), allow(dead_code))]

/// `SWITCHBOARD_DRIVEN_CLOCK`: `<pace>@<anchor>`, the anchor a wall-clock instant in Unix
/// microseconds from which the driven clock runs ahead. Unset: the system clock.
const VAR: &str = "SWITCHBOARD_DRIVEN_CLOCK";

/// How the clock is driven: `pace` times the wall clock, from `anchor` (Unix microseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Drive {
    pace: u32,
    anchor: i64,
}

impl Drive {
    fn parse(spec: &str) -> Result<Drive, String> {
        let (pace, anchor) = spec.split_once('@').ok_or_else(|| {
            format!("{VAR}={spec:?}: expected <pace>@<anchor micros>, e.g. 600@1765000000000000")
        })?;
        let pace = pace
            .parse::<u32>()
            .ok()
            .filter(|p| (1..=10_000).contains(p))
            .ok_or_else(|| {
                format!("{VAR}: the pace {pace:?} is not a whole number from 1 to 10000")
            })?;
        let anchor = anchor
            .parse::<i64>()
            .ok()
            .filter(|a| *a >= 0)
            .ok_or_else(|| format!("{VAR}: the anchor {anchor:?} is not Unix microseconds"))?;
        Ok(Drive { pace, anchor })
    }

    /// The driven instant at wall-clock instant `wall` (saturating, never wrapping).
    fn at(self, wall: i64) -> i64 {
        let ahead = wall.saturating_sub(self.anchor);
        self.anchor
            .saturating_add(ahead.saturating_mul(i64::from(self.pace)))
    }
}

#[cfg(feature = "driven-clock")]
mod wired {
    use std::sync::OnceLock;

    use commands::{Clock, Timestamp};

    use super::{Drive, VAR};

    static DRIVE: OnceLock<Drive> = OnceLock::new();

    fn driven_now() -> Timestamp {
        let wall = store::wall_clock().micros();
        Timestamp::from_micros(DRIVE.get().map_or(wall, |d| d.at(wall)))
    }

    /// The clock `serve` runs on: driven when the variable is set, else the system's.
    pub fn from_env() -> anyhow::Result<Clock> {
        let Ok(spec) = std::env::var(VAR) else {
            return Ok(Clock::system());
        };
        let drive = Drive::parse(&spec).map_err(anyhow::Error::msg)?;
        DRIVE
            .set(drive)
            .map_err(|_| anyhow::anyhow!("{VAR}: the driven clock was set twice"))?;
        eprintln!(
            "switchboard: {VAR}: this test build's clock runs {}x the wall clock",
            drive.pace
        );
        Ok(Clock {
            started_at: driven_now(),
            now: driven_now,
            pace: drive.pace,
        })
    }
}

#[cfg(feature = "driven-clock")]
pub use wired::from_env;

#[cfg(test)]
mod tests {
    use super::Drive;

    #[test]
    fn a_drive_is_a_pace_and_an_anchor() {
        assert_eq!(
            Drive::parse("600@1765000000000000"),
            Ok(Drive {
                pace: 600,
                anchor: 1_765_000_000_000_000
            })
        );
    }

    #[test]
    fn malformed_drives_are_refused_saying_what_is_wrong() {
        for (spec, says) in [
            ("", "expected <pace>@<anchor micros>"),
            ("600", "expected <pace>@<anchor micros>"),
            ("@1765000000000000", "the pace \"\""),
            ("0@1765000000000000", "the pace \"0\""),
            ("10001@1765000000000000", "the pace \"10001\""),
            ("-1@1765000000000000", "the pace \"-1\""),
            ("1.5@1765000000000000", "the pace \"1.5\""),
            ("600@", "the anchor \"\""),
            ("600@-5", "the anchor \"-5\""),
            ("600@99999999999999999999", "the anchor"),
            ("600@1@2", "the anchor \"1@2\""),
            ("６００@1765000000000000", "the pace"),
        ] {
            let err = Drive::parse(spec).expect_err(spec);
            assert!(err.contains(says), "{spec:?}: {err}");
            assert!(err.starts_with("SWITCHBOARD_DRIVEN_CLOCK"), "{err}");
        }
    }

    #[test]
    fn the_driven_clock_runs_pace_times_the_wall_clock_from_the_anchor() {
        let drive = Drive {
            pace: 600,
            anchor: 1_000_000,
        };
        assert_eq!(drive.at(1_000_000), 1_000_000);
        // 100 ms of wall time is a minute of the driven clock.
        assert_eq!(drive.at(1_100_000), 1_000_000 + 60_000_000);
        assert_eq!(drive.at(i64::MAX), i64::MAX, "saturates");
    }
}
