//! The timer: each tick finds the schedules whose next slot has come, claims the latest due
//! slot in the store (one replica wins it), and fires it as the schedule's actor.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use authz_core::{BoxFuture, GrantsTable, RunId, ScheduleName};
use commands::{
    Caller, FireError, FiringSlot, ManualFiring, Registry, ReplyKind, ScheduleDesk, ScheduleView,
    Services, Timestamp, start_agent_run,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::decl::{Fires, ScheduleDecl};
use crate::plan::{Misconfigured, plan};

/// How many missed slots are counted (and said) after downtime; they still fire once.
const MISSED_COUNT_CAP: usize = 10_000;
/// The timer re-reads the clock at least this often, so a clock step is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(30);

/// A declared schedule with its actor built once from the grants table.
struct Entry {
    decl: ScheduleDecl,
    caller: Result<Caller, Misconfigured>,
}

/// Where a schedule's timer stands in this process.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    /// The latest timer slot this process has seen handled (by it or another replica).
    last: Timestamp,
    /// The first slot after `last`; nothing is due before it.
    next: Option<Timestamp>,
}

/// What one firing did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    pub name: ScheduleName,
    pub slot: FiringSlot,
    /// `completed`, `failed`, `started` (an agent run under way) or `misconfigured`.
    pub status: String,
    pub run: Option<RunId>,
    /// The misconfiguration, a launch refusal, or a catch-up note.
    pub detail: Option<String>,
}

/// The schedules of this process and their timers.
pub struct Scheduler {
    entries: Vec<Entry>,
    cursors: Mutex<HashMap<ScheduleName, Cursor>>,
    /// Every schedule has a cursor (the store was read once).
    cursors_ready: AtomicBool,
}

impl Scheduler {
    /// Declares `decls` (by name; a later duplicate is ignored, the config refuses them) and
    /// builds each actor from `table`.
    pub fn new(decls: Vec<ScheduleDecl>, table: &GrantsTable, registry: &Registry) -> Self {
        let mut decls = decls;
        // A stable sort: of two declarations of one name, the first stays.
        decls.sort_by(|a, b| a.name.cmp(&b.name));
        decls.dedup_by(|later, first| later.name == first.name);
        let entries = decls
            .into_iter()
            .map(|decl| Entry {
                caller: plan(&decl, table, registry),
                decl,
            })
            .collect();
        Scheduler {
            entries,
            cursors: Mutex::new(HashMap::new()),
            cursors_ready: AtomicBool::new(false),
        }
    }

    /// Each schedule and why it cannot fire, when it cannot.
    pub fn misconfigured(&self) -> Vec<(&ScheduleName, &Misconfigured)> {
        self.entries
            .iter()
            .filter_map(|e| e.caller.as_ref().err().map(|m| (&e.decl.name, m)))
            .collect()
    }

    /// The declared schedules' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &ScheduleName> {
        self.entries.iter().map(|e| &e.decl.name)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn cursor(&self, name: &ScheduleName) -> Option<Cursor> {
        self.cursors.lock().ok()?.get(name).copied()
    }

    /// Makes sure every schedule has a cursor, reading the store once for those that do not;
    /// false (nothing fires this tick) when the store cannot say where they stand.
    async fn cursors_read(&self, now: Timestamp, services: &Services) -> bool {
        if self.cursors_ready.load(Ordering::Acquire) {
            return true;
        }
        let last: HashMap<ScheduleName, Timestamp> = match services.last_timer_slots().await {
            Ok(slots) => slots.into_iter().collect(),
            Err(e) => {
                tracing::warn!(error = %e, "[schedule] cannot read the last slots; not firing this tick");
                return false;
            }
        };
        for entry in &self.entries {
            if self.cursor(&entry.decl.name).is_none() {
                let at = last.get(&entry.decl.name).copied().unwrap_or(now);
                self.set_cursor(&entry.decl, at);
            }
        }
        self.cursors_ready.store(true, Ordering::Release);
        true
    }

    fn set_cursor(&self, decl: &ScheduleDecl, last: Timestamp) {
        let next = decl.cron.next_after(last);
        if let Ok(mut c) = self.cursors.lock() {
            c.insert(decl.name.clone(), Cursor { last, next });
        }
    }

    /// The earliest instant any schedule is next due, as far as this process knows.
    pub fn next_due(&self) -> Option<Timestamp> {
        let c = self.cursors.lock().ok()?;
        c.values().filter_map(|c| c.next).min()
    }

    /// One pass of the timer at `now`. The first pass reads every schedule's latest timer
    /// slot from the store in one query (a schedule with none starts from `now`, so a new
    /// deployment fires no past slot). A due schedule claims its latest due slot; a missed run
    /// of slots fires once, and says how many it stands for. Returns what this replica fired.
    pub async fn tick(
        &self,
        now: Timestamp,
        registry: &Registry,
        services: &Services,
    ) -> Vec<Fired> {
        if !self.cursors_read(now, services).await {
            return Vec::new();
        }
        let mut fired = Vec::new();
        for entry in &self.entries {
            let name = &entry.decl.name;
            let Some(cursor) = self.cursor(name) else {
                continue;
            };
            if cursor.next.is_none_or(|next| next > now) {
                continue;
            }
            let Some(due) = entry.decl.cron.latest_at_or_before(now) else {
                continue;
            };
            if due <= cursor.last {
                continue;
            }
            let slot = FiringSlot::Timer(due);
            match services.claim_firing(name, &slot).await {
                Ok(true) => {}
                Ok(false) => {
                    // Another replica fired it.
                    self.set_cursor(&entry.decl, due);
                    continue;
                }
                Err(e) => {
                    tracing::warn!(schedule = %name, error = %e, "[schedule] cannot claim the slot; trying again next tick");
                    continue;
                }
            }
            self.set_cursor(&entry.decl, due);
            let missed = entry
                .decl
                .cron
                .slots_between(cursor.last, due, MISSED_COUNT_CAP);
            let note = (missed > 0).then(|| {
                let more = if missed >= MISSED_COUNT_CAP { "+" } else { "" };
                format!(
                    "caught up after downtime: {missed}{more} missed slot(s) since {} fired once",
                    entry.decl.cron.wall_time(cursor.last)
                )
            });
            if let Some(note) = &note {
                tracing::warn!(schedule = %name, missed, "[schedule] {note}");
            }
            fired.push(fire(entry, slot, note, registry, services).await);
        }
        fired
    }

    /// The timer until `stop`: tick, then sleep until the next slot (at most 30 s).
    pub fn spawn(
        self: Arc<Self>,
        registry: Arc<Registry>,
        services: Arc<Services>,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                let now = services.clock.now();
                self.tick(now, &registry, &services).await;
                let wait = self
                    .next_due()
                    .map(|next| micros_until(now, next))
                    .unwrap_or(MAX_SLEEP)
                    .min(MAX_SLEEP);
                tokio::select! {
                    () = tokio::time::sleep(services.clock.wall_wait(wait)) => {}
                    () = stop.cancelled() => return,
                }
            }
        })
    }

    fn find(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.decl.name.as_str() == name)
    }
}

fn micros_until(now: Timestamp, next: Timestamp) -> Duration {
    let micros = next.micros().saturating_sub(now.micros()).max(0);
    Duration::from_micros(u64::try_from(micros).unwrap_or(0))
}

/// Fires one claimed slot as one request of the schedule surface: its own root span,
/// carrying the schedule's actor and the firing's status.
async fn fire(
    entry: &Entry,
    slot: FiringSlot,
    note: Option<String>,
    registry: &Registry,
    services: &Services,
) -> Fired {
    let span = commands::trace::request_span("schedule", entry.decl.name.as_str());
    commands::trace::name_actor(&span, entry.decl.name.actor_id().as_str());
    let fired = fire_slot(entry, slot, note, registry, services)
        .instrument(span.clone())
        .await;
    span.record("outcome", fired.status.as_str());
    fired
}

/// A misconfigured schedule records why and sends nothing; a command is recorded as a run
/// with the reply as its answer; a prompt starts an agent run, and the firing's status
/// follows the run to its end.
async fn fire_slot(
    entry: &Entry,
    slot: FiringSlot,
    note: Option<String>,
    registry: &Registry,
    services: &Services,
) -> Fired {
    let name = &entry.decl.name;
    // An agent's run is followed only once its firing is recorded `started`: a run that ends
    // at once would otherwise have its end written first and then overwritten.
    let mut to_follow = None;
    // A firing is a new request: its actor under the policy in force (a reload since start).
    let caller = entry
        .caller
        .as_ref()
        .map(|c| commands::identity::resolved_again(services, c));
    let (status, run, detail) = match &caller {
        Err(m) => {
            tracing::warn!(schedule = %name, key = %m.key, "[schedule] misconfigured; nothing sent");
            ("misconfigured".to_owned(), None, Some(m.to_string()))
        }
        Ok(caller) => match &entry.decl.fires {
            Fires::Command(text) => match registry.invoke_recorded(caller, text, services).await {
                Ok((reply, run)) => {
                    let status = if reply.kind == ReplyKind::Ok {
                        "completed"
                    } else {
                        "failed"
                    };
                    (status.to_owned(), Some(run), note.clone())
                }
                Err(e) => ("failed".to_owned(), None, Some(e.to_string())),
            },
            Fires::Prompt { agent, prompt } => {
                let handled = start_agent_run(caller, prompt, Some(agent.clone()), services).await;
                match handled.run {
                    Some(started) => {
                        let id = started.id().clone();
                        to_follow = Some(started);
                        ("started".to_owned(), Some(id), note.clone())
                    }
                    None => (
                        "failed".to_owned(),
                        None,
                        Some(format!(
                            "the run was not started ({})",
                            commands::trace::outcome_of(handled.reply.kind)
                        )),
                    ),
                }
            }
        },
    };
    if let Err(e) = services
        .record_firing(name, &slot, &status, run.as_ref(), detail.as_deref())
        .await
    {
        tracing::error!(schedule = %name, error = %e, "[schedule] the firing ran but its result was not recorded");
    }
    if let Some(started) = to_follow {
        follow(started, name.clone(), slot.clone(), note.clone(), services);
    }
    match &run {
        Some(run) => {
            tracing::info!(schedule = %name, run = %run, status = %status, "[schedule] fired")
        }
        None => {
            tracing::info!(schedule = %name, status = %status, "[schedule] fired without a run")
        }
    }
    Fired {
        name: name.clone(),
        slot,
        status,
        run,
        detail,
    }
}

/// Records an agent firing's final status when its run ends, detached: the future holds
/// its own handle on the store, so nothing here borrows the tick that fired.
fn follow(
    started: commands::StartedRun,
    name: ScheduleName,
    slot: FiringSlot,
    note: Option<String>,
    services: &Services,
) {
    tokio::spawn(services.record_firing_when_done(started, name, slot, note));
}

impl ScheduleDesk for Scheduler {
    fn schedules(&self, now: Timestamp) -> Vec<ScheduleView> {
        self.entries
            .iter()
            .map(|e| ScheduleView {
                name: e.decl.name.clone(),
                cron: e.decl.cron.expr().to_owned(),
                time_zone: e.decl.cron.zone().to_owned(),
                runs: e.decl.fires.describe(),
                next: e
                    .decl
                    .cron
                    .next_after(now)
                    .map(|at| (at, e.decl.cron.wall_time(at))),
                misconfigured: e.caller.as_ref().err().map(ToString::to_string),
            })
            .collect()
    }

    fn fire_now<'a>(
        &'a self,
        name: &'a str,
        registry: &'a Registry,
        services: &'a Services,
    ) -> BoxFuture<'a, Result<ManualFiring, FireError>> {
        Box::pin(async move {
            let Some(entry) = self.find(name) else {
                let known: Vec<&str> = self.names().map(|n| n.as_str()).collect();
                return Err(FireError::Unknown {
                    name: name.to_owned(),
                    known: if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    },
                });
            };
            let slot = commands::manual_slot(services.clock.now());
            match services.claim_firing(&entry.decl.name, &slot).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(schedule = %name, "[schedule] a fresh manual slot was already taken; nothing fired");
                    return Err(FireError::Store);
                }
                Err(e) => {
                    tracing::warn!(schedule = %name, error = %e, "[schedule] cannot claim a manual slot; nothing fired");
                    return Err(FireError::Store);
                }
            }
            let fired = fire(entry, slot, None, registry, services).await;
            // Why nothing was sent, when nothing was: the misconfiguration or the refused start.
            let reason = fired.run.is_none().then_some(fired.detail).flatten();
            Ok(ManualFiring {
                schedule: fired.name,
                run: fired.run,
                status: fired.status,
                reason,
            })
        })
    }
}
