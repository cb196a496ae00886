//! Time as the policy and everything above it counts it.

/// An instant, in microseconds since the Unix epoch, UTC: the one time type of the workspace
/// (the store records it, the broker compares grants' expiries with it, the scheduler's slots
/// are made of it). Nothing here reads a clock: callers pass time in (the wall clock is
/// `store::wall_clock`, for binaries and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const fn from_micros(micros: i64) -> Timestamp {
        Timestamp(micros)
    }

    pub const fn micros(self) -> i64 {
        self.0
    }

    /// `d` earlier, or the earliest instant there is.
    pub fn saturating_sub(self, d: core::time::Duration) -> Timestamp {
        let micros = i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_sub(micros))
    }

    /// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` (RFC 3339; `t` and `z` too). `None` for anything
    /// else, including out-of-range fields.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        let b = text.as_bytes();
        let num = |from: usize, len: usize| -> Option<i64> {
            let digits = text.get(from..from + len)?;
            digits
                .bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| digits.parse().ok())?
        };
        let sep = |at: usize, want: &[u8]| b.get(at).is_some_and(|c| want.contains(c));
        if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt") && sep(13, b":") && sep(16, b":")) {
            return None;
        }
        let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
        let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let month_days = [
            31,
            if leap { 29 } else { 28 },
            31,
            30,
            31,
            30,
            31,
            31,
            30,
            31,
            30,
            31,
        ];
        let days_in_month = *month_days.get(usize::try_from(month - 1).ok()?)?;
        if !(1..=days_in_month).contains(&day) || hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        let mut rest = text.get(19..)?;
        let mut micros = 0i64;
        if let Some(fraction) = rest.strip_prefix('.') {
            let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            let kept: String = fraction.chars().take(digits.min(6)).collect();
            micros = kept.parse::<i64>().ok()? * 10i64.pow(6 - u32::try_from(kept.len()).ok()?);
            rest = fraction.get(digits..)?;
        }
        let offset_seconds = match rest {
            "Z" | "z" => 0,
            _ => {
                let sign = match rest.as_bytes().first()? {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                if rest.len() != 6 || rest.as_bytes().get(3) != Some(&b':') {
                    return None;
                }
                let (h, m) = (num_in(rest, 1)?, num_in(rest, 4)?);
                if h > 23 || m > 59 {
                    return None;
                }
                sign * (h * 3600 + m * 60)
            }
        };
        let days = days_from_civil(year, month, day);
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
        Some(Timestamp(
            seconds.checked_mul(1_000_000)?.checked_add(micros)?,
        ))
    }
}

fn num_in(text: &str, from: usize) -> Option<i64> {
    let digits = text.get(from..from + 2)?;
    digits
        .bytes()
        .all(|c| c.is_ascii_digit())
        .then(|| digits.parse().ok())?
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
