//! A run's status: a leaf both the error type and the records name. Reading one back from a
//! row (`RunStatus::parse`) is in `types`, beside the other parsers of stored strings.

use std::fmt;

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
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
