//! The numbers a config key may hold, checked as they are read (so a fault carries the
//! parser's position): every section's counts and durations are one of these.

use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer};

/// A whole number above 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Positive(pub u64);

impl<'de> Deserialize<'de> for Positive {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match i64::deserialize(d) {
            Ok(n) if n > 0 => Ok(Positive(n.unsigned_abs())),
            _ => Err(de::Error::custom("must be a whole number above 0")),
        }
    }
}

impl Positive {
    pub fn seconds(self) -> Duration {
        Duration::from_secs(self.0)
    }

    pub fn millis(self) -> Duration {
        Duration::from_millis(self.0)
    }

    pub fn usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

/// A whole number, 0 or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Whole(pub u64);

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match i64::deserialize(d) {
            Ok(n) if n >= 0 => Ok(Whole(n.unsigned_abs())),
            _ => Err(de::Error::custom("must be a whole number, 0 or more")),
        }
    }
}
