//! The vocabulary of runs and firings every layer shares: a run's status, and which firing of
//! a schedule a run came from. Plain data: the store keeps them, the scheduler makes slots,
//! surfaces show statuses; nothing here reads a clock or makes an id.

use std::fmt;

use crate::time::Timestamp;

/// A run's status. Terminal statuses never change again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Stopped,
    Interrupted,
    Misconfigured,
}

impl RunStatus {
    pub const ALL: [RunStatus; 7] = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Stopped,
        RunStatus::Interrupted,
        RunStatus::Misconfigured,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Stopped => "stopped",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Misconfigured => "misconfigured",
        }
    }

    /// Queued or running.
    pub fn is_live(self) -> bool {
        matches!(self, RunStatus::Queued | RunStatus::Running)
    }

    /// The status a word names (`completed`, …), or `None` for any other word.
    pub fn from_name(word: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|s| s.as_str() == word)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which firing of a schedule: a cron slot, or one asked for by `schedule fire`. Stored as a
/// key (`timer:<micros>`, `manual:<id>`), unique per schedule, so a manual firing never
/// collides with a timer slot and never counts as one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FiringSlot {
    Timer(Timestamp),
    /// `id` is unique per firing; `at` is when it was asked for.
    Manual {
        id: String,
        at: Timestamp,
    },
}

impl FiringSlot {
    /// The key the store keeps unique per schedule.
    pub fn key(&self) -> String {
        match self {
            FiringSlot::Timer(at) => format!("timer:{}", at.micros()),
            FiringSlot::Manual { id, .. } => format!("manual:{id}"),
        }
    }

    /// The slot's instant: the cron slot, or when a manual firing was asked for.
    pub fn at(&self) -> Timestamp {
        match self {
            FiringSlot::Timer(at) | FiringSlot::Manual { at, .. } => *at,
        }
    }

    /// The slot from its stored key and instant; `None` for a key of neither form.
    pub fn from_key(key: &str, at: Timestamp) -> Option<FiringSlot> {
        if let Some(micros) = key.strip_prefix("timer:") {
            let micros: i64 = micros.parse().ok()?;
            return (micros == at.micros()).then_some(FiringSlot::Timer(at));
        }
        let id = key.strip_prefix("manual:")?;
        (!id.is_empty()).then(|| FiringSlot::Manual {
            id: id.to_owned(),
            at,
        })
    }

    pub fn is_manual(&self) -> bool {
        matches!(self, FiringSlot::Manual { .. })
    }
}
