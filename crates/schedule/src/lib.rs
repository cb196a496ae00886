//! # schedule: cron schedules with declared actors
//!
//! What it is: the schedule registry (the built-in `self-improvement` and the configured
//! `[[schedules]]`), each a name, a five-field cron in an IANA zone, and what a firing runs (a
//! command text or an agent prompt); the timer that fires them; and the
//! [`commands::ScheduleDesk`] port behind `schedule list` and `schedule fire`.
//!
//! What it must never do: fire as anyone but `schedule:<name>` (never the caller of
//! `schedule fire`); grant anything (the actor's grants are the grants table's: the
//! registry's declared baseline, or the `[grants."schedule:<name>"]` entry replacing it);
//! fire a slot it did not win in the store; fire every slot missed during downtime.
//!
//! Invariants:
//! - one firing per `(name, slot)` across replicas: the replica whose insert of the
//!   `schedule_firings` row succeeds fires it, every other sees the conflict and skips;
//! - after downtime the latest missed slot fires once, its firing saying how many it stands
//!   for; a deployment with no firing on record starts from now;
//! - a manual firing has a slot of its own (`manual:<id>`), never a timer slot, and is
//!   never counted by the missed-slot check;
//! - every firing is a run in channel `schedule:<name>`, principal `schedule:<name>`; a
//!   schedule whose actor cannot fire what it declares records `misconfigured` with the reason
//!   and sends nothing;
//! - the timer reads time only through `Services::clock` (tests drive [`Scheduler::tick`]
//!   with their own instants).

mod cron;
mod decl;
mod plan;
mod scheduler;

pub use cron::{CronSpec, CronSpecError};
pub use decl::{Fires, SELF_IMPROVEMENT, ScheduleDecl, builtin};
pub use plan::{Misconfigured, plan};
pub use scheduler::{Fired, Scheduler};
