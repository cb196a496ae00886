//! The scheduler as the `schedule` commands see it: the [`ScheduleDesk`] port. The `schedule`
//! crate implements it; a build or a test without a scheduler gets [`NoSchedules`].
//!
//! A firing always runs as `schedule:<name>`, never as the caller, so the port is handed the
//! registry and services of the invocation but never its caller.

use authz_core::{BoxFuture, RunId, ScheduleName};
use store::Timestamp;

use crate::{Registry, Services};

/// One declared schedule, as `schedule list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleView {
    pub name: ScheduleName,
    /// The cron expression as declared (`0 9 * * MON`).
    pub cron: String,
    /// The IANA time zone the expression is read in (`UTC`, `Europe/Berlin`).
    pub time_zone: String,
    /// What a firing runs: the command text, or `agent <name>: <prompt>`.
    pub runs: String,
    /// The next timer slot after now: its instant and its wall time in the schedule's zone.
    pub next: Option<(Timestamp, String)>,
    /// Why a firing would record `misconfigured` instead of running, when it would.
    pub misconfigured: Option<String>,
}

/// What `schedule fire` started: the run and its status, never its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualFiring {
    pub schedule: ScheduleName,
    pub run: Option<RunId>,
    /// `completed`, `failed`, `started` (an agent run still going) or `misconfigured`.
    pub status: String,
    /// Why nothing was sent, when nothing was (the misconfiguration, a refused start); never
    /// anything of a run's output.
    pub reason: Option<String>,
}

/// Why a manual firing did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FireError {
    #[error("no schedule `{name}`; the schedules are {known}")]
    Unknown { name: String, known: String },
    /// The manual slot could not be claimed (the operator log has the store's token).
    #[error("the store could not record the firing; nothing was fired")]
    Store,
}

/// The schedules and their manual firing.
pub trait ScheduleDesk: Send + Sync {
    /// Every declared schedule with its next slot after `now`, by name.
    fn schedules(&self, now: Timestamp) -> Vec<ScheduleView>;
    /// Fires `name` now, as `schedule:<name>`, with a manual slot of its own.
    fn fire_now<'a>(
        &'a self,
        name: &'a str,
        registry: &'a Registry,
        services: &'a Services,
    ) -> BoxFuture<'a, Result<ManualFiring, FireError>>;
}

/// No scheduler: no schedules, and `schedule fire` names none.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSchedules;

impl ScheduleDesk for NoSchedules {
    fn schedules(&self, _now: Timestamp) -> Vec<ScheduleView> {
        Vec::new()
    }

    fn fire_now<'a>(
        &'a self,
        name: &'a str,
        _registry: &'a Registry,
        _services: &'a Services,
    ) -> BoxFuture<'a, Result<ManualFiring, FireError>> {
        Box::pin(async move {
            Err(FireError::Unknown {
                name: name.to_owned(),
                known: "none".to_owned(),
            })
        })
    }
}
