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
//!
//! It depends on `commands` and `authz-core` (plus croner and chrono-tz).
//!
//! | module | what it holds |
//! | --- | --- |
//! | `decl` | `ScheduleDecl` (name, `CronSpec`, `Fires::Command` or `Fires::Prompt{agent, prompt}`) and the built-in `self-improvement` with the grants the registry declares for it |
//! | `cron` | a five-field cron (croner, seconds refused) read in an IANA zone (chrono-tz): the latest slot at or before an instant, the next after it, the slots between |
//! | `plan` | `plan`, pure: the firing's `Caller` (`schedule:<name>` with the grants table's grants, origin channel `schedule:<name>`, surface `schedule`), or `Misconfigured {key, reason}` when the actor holds nothing, is not admitted to its command, or may not run its agent |
//! | `scheduler` | `Scheduler`: the actors planned once, a cursor per schedule (the last handled slot and the next one; the first tick reads every schedule's last timer slot in one query), `tick(now)` (a schedule whose next slot has come claims its latest due slot through `Services::claim_firing`; the winner fires it under a root span of the `schedule` surface; a run of missed slots fires once and says how many), `spawn` (the timer: tick, sleep until the next slot, bounded), and the `ScheduleDesk` impl (`fire_now` claims a `manual:<id>` slot) |
//!
//! Tests: with the whole App in `crates/server/tests/app/schedule_surface.rs` (one firing per
//! slot across two replicas and two processes on one Postgres); the tick bench is
//! `crates/server/benches/schedule_tick.rs`. Both live in `server` because they build the App;
//! this crate's own unit tests need no App.

mod cron;
mod decl;
mod plan;
mod scheduler;

pub use cron::{CronSpec, CronSpecError};
pub use decl::{Fires, SELF_IMPROVEMENT, ScheduleDecl, builtin};
pub use plan::{Misconfigured, plan};
pub use scheduler::{Fired, Scheduler};
