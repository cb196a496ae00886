//! The in-memory back end: for unit tests of other crates. It evaluates list predicates with
//! `authz_core::matches`, the one truth table, and follows the same contract as the databases.

mod leases;
mod retention;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use authz_core::{ConfigTier, Predicate, RunId, ScheduleName, ScopeKey, Surface, matches};

use crate::merge::{assemble_page, check_limit};
use crate::plan::{self, Plan};
use crate::types::{new_id, tier_parts};
use crate::*;

#[derive(Default)]
struct State {
    runs: BTreeMap<RunId, RunRecord>,
    events: BTreeMap<RunId, Vec<RunEvent>>,
    friction: Vec<Friction>,
    memory: BTreeMap<RunId, MemoryRecord>,
    config: BTreeMap<(&'static str, String, String), ConfigValue>,
    firings: BTreeMap<(String, String), Firing>,
    event_ids: BTreeMap<(Surface, String), Timestamp>,
    answered_threads: BTreeMap<(Surface, String, String), Timestamp>,
    approvals: BTreeMap<String, ApprovalRecord>,
    kept: BTreeMap<RunId, KeptChanges>,
    leases: leases::Leases,
}

/// All state behind one mutex; every operation is atomic.
#[derive(Default)]
pub struct InMemoryStore {
    state: Mutex<State>,
    max_width: usize,
}

/// A live run, to change: `NoSuchRun` when missing, `AlreadyFinished` when it has ended.
fn live_mut<'s>(s: &'s mut State, id: &RunId) -> Result<&'s mut RunRecord> {
    match s.runs.get_mut(id) {
        None => Err(StoreError::NoSuchRun(id.clone())),
        Some(r) if !r.status.is_live() => Err(StoreError::AlreadyFinished {
            id: id.clone(),
            status: r.status,
        }),
        Some(r) => Ok(r),
    }
}

impl InMemoryStore {
    pub fn new() -> Self {
        InMemoryStore {
            state: Mutex::default(),
            max_width: DEFAULT_MAX_PREDICATE_WIDTH,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut guard = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut guard)
    }

    fn admits(&self, p: &Predicate) -> Result<bool> {
        Ok(!matches!(plan::plan(p, self.max_width)?, Plan::Nothing))
    }
}

fn status_ok(filter: StatusFilter, s: RunStatus) -> bool {
    match filter {
        StatusFilter::All => true,
        StatusFilter::Live => s.is_live(),
        StatusFilter::Finished => !s.is_live(),
    }
}

#[async_trait]
impl RunStore for InMemoryStore {
    async fn create_run(&self, new: NewRun) -> Result<RunRecord> {
        let id = RunId::parse(&new_id(new.created_at))
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let record = RunRecord {
            id: id.clone(),
            surface: new.surface,
            channel_id: new.channel_id,
            thread_key: new.thread_key,
            user_id: new.user_id,
            agent: new.agent,
            repo: new.repo,
            status: RunStatus::Queued,
            channel_visibility: new.channel_visibility,
            request: new.request,
            answer: None,
            error: None,
            created_at: new.created_at,
            finished_at: None,
            capability_token: new.capability_token,
            agent_token: new.agent_token,
            owner: new.owner.map(|o| o.as_str().to_owned()),
            stop_requested_at: None,
            parent_run: new.parent_run,
        };
        self.with(|s| s.runs.insert(id, record.clone()));
        Ok(record)
    }

    async fn start_run(&self, id: &RunId) -> Result<()> {
        self.with(|s| match s.runs.get_mut(id) {
            None => Err(StoreError::NoSuchRun(id.clone())),
            Some(r) if r.status == RunStatus::Queued => {
                r.status = RunStatus::Running;
                Ok(())
            }
            Some(r) if r.status == RunStatus::Running => Ok(()),
            Some(r) => Err(StoreError::AlreadyFinished {
                id: id.clone(),
                status: r.status,
            }),
        })
    }

    async fn finish_run(&self, id: &RunId, finish: Finish) -> Result<RunRecord> {
        if finish.status.is_live() {
            return Err(StoreError::Invalid(format!(
                "{} is not a terminal status",
                finish.status
            )));
        }
        self.with(|s| {
            let r = live_mut(s, id)?;
            r.status = finish.status;
            r.answer = finish.answer;
            r.error = finish.error;
            r.finished_at = Some(finish.at);
            Ok(r.clone())
        })
    }

    async fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>> {
        Ok(self.with(|s| s.runs.get(id).cloned()))
    }

    async fn list_runs(&self, q: &ListRuns) -> Result<Page> {
        let limit = check_limit(q.limit)?;
        if !self.admits(&q.visible_to)? {
            return Ok(Page {
                runs: vec![],
                next: None,
            });
        }
        let before = q.before.as_ref().map(|c| (c.created_at, c.id.clone()));
        let runs: Vec<RunRecord> = self.with(|s| {
            s.runs
                .values()
                .filter(|r| status_ok(q.status, r.status))
                .filter(|r| {
                    before
                        .as_ref()
                        .is_none_or(|b| (r.created_at, r.id.clone()) < *b)
                })
                .filter(|r| matches(&q.visible_to, &r.facts()))
                .cloned()
                .collect()
        });
        Ok(assemble_page(runs, limit))
    }

    async fn append_event(&self, id: &RunId, at: Timestamp, kind: &str, body: &str) -> Result<i64> {
        self.with(|s| {
            if !s.runs.contains_key(id) {
                return Err(StoreError::NoSuchRun(id.clone()));
            }
            let events = s.events.entry(id.clone()).or_default();
            let seq = events.len() as i64 + 1;
            events.push(RunEvent {
                run_id: id.clone(),
                seq,
                at,
                kind: kind.to_owned(),
                body: body.to_owned(),
            });
            Ok(seq)
        })
    }

    async fn events(&self, id: &RunId) -> Result<Vec<RunEvent>> {
        Ok(self.with(|s| s.events.get(id).cloned().unwrap_or_default()))
    }

    async fn add_friction(&self, f: Friction) -> Result<()> {
        self.with(|s| {
            if !s.runs.contains_key(&f.run_id) {
                return Err(StoreError::NoSuchRun(f.run_id.clone()));
            }
            s.friction.push(f);
            Ok(())
        })
    }

    async fn friction(&self, id: &RunId) -> Result<Vec<Friction>> {
        Ok(self.with(|s| {
            s.friction
                .iter()
                .filter(|f| &f.run_id == id)
                .cloned()
                .collect()
        }))
    }

    async fn friction_recent(
        &self,
        visible_to: &Predicate,
        since: Timestamp,
        limit: u32,
    ) -> Result<Vec<FrictionOfRun>> {
        let limit = check_limit(limit)?;
        if !self.admits(visible_to)? {
            return Ok(vec![]);
        }
        let mut out: Vec<FrictionOfRun> = self.with(|s| {
            s.friction
                .iter()
                .filter(|f| f.at >= since)
                .filter_map(|f| {
                    let run = s.runs.get(&f.run_id)?;
                    matches(visible_to, &run.facts()).then(|| FrictionOfRun {
                        friction: f.clone(),
                        channel_id: run.channel_id.clone(),
                        agent: run.agent.clone(),
                    })
                })
                .collect()
        });
        out.sort_by_key(|f| std::cmp::Reverse(f.friction.at));
        out.truncate(limit);
        Ok(out)
    }

    async fn count_runs_since(&self, visible_to: &Predicate, since: Timestamp) -> Result<u64> {
        if !self.admits(visible_to)? {
            return Ok(0);
        }
        Ok(self.with(|s| {
            s.runs
                .values()
                .filter(|r| r.created_at >= since && matches(visible_to, &r.facts()))
                .count() as u64
        }))
    }

    async fn heartbeat(&self, replica: &ReplicaId, now: Timestamp) -> Result<()> {
        self.with(|s| s.leases.heartbeat(replica, now));
        Ok(())
    }

    async fn announce_server(
        &self,
        replica: &ReplicaId,
        version: &str,
        started_at: Timestamp,
        now: Timestamp,
    ) -> Result<()> {
        self.with(|s| s.leases.announce(replica, version, started_at, now));
        Ok(())
    }

    async fn record_policy(&self, replica: &ReplicaId, hash: &str) -> Result<()> {
        self.with(|s| s.leases.record_policy(replica, hash));
        Ok(())
    }

    async fn retire_server(&self, replica: &ReplicaId) -> Result<()> {
        self.with(|s| s.leases.retire(replica));
        Ok(())
    }

    async fn servers(&self, since: Timestamp) -> Result<Vec<ServerInfo>> {
        Ok(self.with(|s| s.leases.servers(since)))
    }

    async fn tombstone_orphans(
        &self,
        replica: &ReplicaId,
        now: Timestamp,
        lease: Duration,
        own: bool,
    ) -> Result<Vec<RunId>> {
        let expired_before = now.saturating_sub(lease);
        Ok(self.with(|s| {
            let dead = |owner: &Option<String>| match owner {
                None => own,
                Some(o) if o == replica.as_str() => own,
                Some(o) => s
                    .leases
                    .heartbeat_of(o)
                    .is_none_or(|hb| hb < expired_before),
            };
            let ids: Vec<RunId> = s
                .runs
                .values()
                .filter(|r| r.status.is_live() && dead(&r.owner))
                .map(|r| r.id.clone())
                .collect();
            for id in &ids {
                if let Some(r) = s.runs.get_mut(id) {
                    r.status = RunStatus::Interrupted;
                    r.finished_at = Some(now);
                    r.error = Some(INTERRUPTED.to_owned());
                }
            }
            ids
        }))
    }

    async fn request_stop(&self, id: &RunId, at: Timestamp) -> Result<RunRecord> {
        self.with(|s| {
            let r = live_mut(s, id)?;
            r.stop_requested_at.get_or_insert(at);
            Ok(r.clone())
        })
    }

    async fn stop_requests(&self, owner: &ReplicaId) -> Result<Vec<RunId>> {
        Ok(self.with(|s| {
            s.runs
                .values()
                .filter(|r| {
                    r.status.is_live()
                        && r.stop_requested_at.is_some()
                        && r.owner.as_deref() == Some(owner.as_str())
                })
                .map(|r| r.id.clone())
                .collect()
        }))
    }
}

#[async_trait]
impl crate::MemoryStore for InMemoryStore {
    async fn add_memory(&self, new: NewMemory) -> Result<MemoryRecord> {
        let id = RunId::parse(&new_id(new.created_at))
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let record = MemoryRecord {
            id: id.clone(),
            scope: new.scope,
            text: new.text,
            supersedes: new.supersedes,
            source_run: new.source_run,
            created_at: new.created_at,
            forgotten_at: None,
        };
        self.with(|s| s.memory.insert(id, record.clone()));
        Ok(record)
    }

    async fn get_memory(&self, id: &MemoryId) -> Result<Option<MemoryRecord>> {
        Ok(self.with(|s| s.memory.get(id).cloned()))
    }

    async fn memory_in_scopes(&self, scopes: &[ScopeKey], limit: u32) -> Result<Vec<MemoryRecord>> {
        let limit = check_limit(limit)?;
        let mut out: Vec<MemoryRecord> = self.with(|s| {
            let live = |r: &MemoryRecord| r.forgotten_at.is_none();
            let superseded = |r: &MemoryRecord| {
                s.memory
                    .values()
                    .any(|o| live(o) && o.supersedes.as_ref() == Some(&r.id))
            };
            s.memory
                .values()
                .filter(|r| scopes.contains(&r.scope) && live(r) && !superseded(r))
                .cloned()
                .collect()
        });
        out.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        out.truncate(limit);
        Ok(out)
    }

    async fn forget_memory(&self, id: &MemoryId, at: Timestamp) -> Result<bool> {
        Ok(self.with(|s| match s.memory.get_mut(id) {
            Some(r) if r.forgotten_at.is_none() => {
                r.forgotten_at = Some(at);
                true
            }
            _ => false,
        }))
    }
}

fn config_key(tier: &ConfigTier, key: &str) -> (&'static str, String, String) {
    let (t, id) = tier_parts(tier);
    (t, id, key.to_owned())
}

#[async_trait]
impl ConfigStore for InMemoryStore {
    async fn get_config(&self, tier: &ConfigTier, key: &str) -> Result<Option<ConfigValue>> {
        Ok(self.with(|s| s.config.get(&config_key(tier, key)).cloned()))
    }

    async fn set_config(&self, value: ConfigValue) -> Result<()> {
        self.with(|s| s.config.insert(config_key(&value.tier, &value.key), value));
        Ok(())
    }

    async fn delete_config(&self, tier: &ConfigTier, key: &str) -> Result<bool> {
        Ok(self.with(|s| s.config.remove(&config_key(tier, key)).is_some()))
    }

    async fn list_config(&self, tier: &ConfigTier, prefix: &str) -> Result<Vec<ConfigValue>> {
        let (t, id) = tier_parts(tier);
        Ok(self.with(|s| {
            s.config
                .iter()
                .filter(|((kt, kid, k), _)| *kt == t && *kid == id && k.starts_with(prefix))
                .map(|(_, v)| v.clone())
                .collect()
        }))
    }
}

#[async_trait]
impl ScheduleStore for InMemoryStore {
    async fn claim_firing(
        &self,
        name: &ScheduleName,
        slot: &FiringSlot,
        at: Timestamp,
    ) -> Result<bool> {
        Ok(self.with(|s| {
            let key = (name.to_string(), slot.key());
            if s.firings.contains_key(&key) {
                return false;
            }
            s.firings.insert(
                key,
                Firing {
                    name: name.clone(),
                    slot: slot.clone(),
                    fired_at: at,
                    status: "claimed".into(),
                    run_id: None,
                    detail: None,
                },
            );
            true
        }))
    }

    async fn record_firing(
        &self,
        name: &ScheduleName,
        slot: &FiringSlot,
        status: &str,
        run_id: Option<&RunId>,
        detail: Option<&str>,
    ) -> Result<()> {
        self.with(
            |s| match s.firings.get_mut(&(name.to_string(), slot.key())) {
                Some(f) => {
                    f.status = status.to_owned();
                    f.run_id = run_id.cloned();
                    f.detail = detail.map(str::to_owned);
                    Ok(())
                }
                None => Err(StoreError::Invalid(format!(
                    "no claimed firing of {name} at {}",
                    slot.key()
                ))),
            },
        )
    }

    async fn recent_firings(&self, name: &ScheduleName, limit: u32) -> Result<Vec<Firing>> {
        let limit = check_limit(limit)?;
        Ok(self.with(|s| {
            let mut v: Vec<Firing> = s
                .firings
                .values()
                .filter(|f| &f.name == name)
                .cloned()
                .collect();
            v.sort_by_key(|f| std::cmp::Reverse((f.fired_at, f.slot.key())));
            v.truncate(limit);
            v
        }))
    }

    async fn last_timer_slots(&self) -> Result<Vec<(ScheduleName, Timestamp)>> {
        Ok(self.with(|s| {
            let mut last: BTreeMap<ScheduleName, Timestamp> = BTreeMap::new();
            for f in s.firings.values().filter(|f| !f.slot.is_manual()) {
                let at = last.entry(f.name.clone()).or_insert(f.slot.at());
                *at = (*at).max(f.slot.at());
            }
            last.into_iter().collect()
        }))
    }
}

#[async_trait]
impl SurfaceEventStore for InMemoryStore {
    async fn first_sighting(
        &self,
        surface: Surface,
        event_id: &str,
        at: Timestamp,
    ) -> Result<bool> {
        check_event_id(event_id)?;
        Ok(self.with(|s| {
            let key = (surface, event_id.to_owned());
            if s.event_ids.contains_key(&key) {
                return false;
            }
            s.event_ids.insert(key, at);
            true
        }))
    }

    async fn record_answered_thread(
        &self,
        surface: Surface,
        channel: &str,
        thread_key: &str,
        at: Timestamp,
    ) -> Result<()> {
        check_thread(channel, thread_key)?;
        self.with(|s| {
            s.answered_threads
                .entry((surface, channel.to_owned(), thread_key.to_owned()))
                .or_insert(at);
        });
        Ok(())
    }

    async fn answered_thread(
        &self,
        surface: Surface,
        channel: &str,
        thread_key: &str,
    ) -> Result<bool> {
        check_thread(channel, thread_key)?;
        Ok(self.with(|s| {
            s.answered_threads
                .contains_key(&(surface, channel.to_owned(), thread_key.to_owned()))
        }))
    }
}

#[async_trait]
impl ChangesStore for InMemoryStore {
    async fn record_kept(&self, kept: &KeptChanges) -> Result<()> {
        self.with(|s| {
            if !s.runs.contains_key(&kept.run_id) {
                return Err(StoreError::NoSuchRun(kept.run_id.clone()));
            }
            if s.kept.contains_key(&kept.run_id) {
                return Err(StoreError::Invalid(format!(
                    "run {} already has its kept changes recorded",
                    kept.run_id
                )));
            }
            s.kept.insert(kept.run_id.clone(), kept.clone());
            Ok(())
        })
    }

    async fn kept(&self, run: &RunId) -> Result<Option<KeptChanges>> {
        Ok(self.with(|s| s.kept.get(run).cloned()))
    }
}

#[async_trait]
impl ApprovalStore for InMemoryStore {
    async fn open_approval(&self, ask: &ApprovalRecord) -> Result<()> {
        check_approval_id(&ask.id)?;
        if ask.state != ApprovalState::Open {
            return Err(StoreError::Invalid("a new ask is open".into()));
        }
        self.with(|s| {
            if s.approvals.contains_key(&ask.id) {
                return Err(StoreError::Invalid("an ask with this id exists".into()));
            }
            s.approvals.insert(ask.id.clone(), ask.clone());
            Ok(())
        })
    }

    async fn open_approvals(&self, run: &RunId) -> Result<Vec<ApprovalRecord>> {
        let mut open: Vec<ApprovalRecord> = self.with(|s| {
            s.approvals
                .values()
                .filter(|a| &a.run_id == run && a.state == ApprovalState::Open)
                .cloned()
                .collect()
        });
        open.sort_by(|a, b| a.asked_at.cmp(&b.asked_at).then(a.id.cmp(&b.id)));
        Ok(open)
    }

    async fn answer_approval(
        &self,
        id: &str,
        run: &RunId,
        approve: bool,
        _by: &str,
        _at: Timestamp,
    ) -> Result<bool> {
        check_approval_id(id)?;
        Ok(self.with(|s| match s.approvals.get_mut(id) {
            Some(a) if &a.run_id == run && a.state == ApprovalState::Open => {
                a.state = if approve {
                    ApprovalState::Approved
                } else {
                    ApprovalState::Denied
                };
                true
            }
            _ => false,
        }))
    }

    async fn approval_state(&self, id: &str) -> Result<Option<ApprovalState>> {
        check_approval_id(id)?;
        Ok(self.with(|s| s.approvals.get(id).map(|a| a.state)))
    }

    async fn close_approval(&self, id: &str, _at: Timestamp) -> Result<bool> {
        check_approval_id(id)?;
        Ok(self.with(|s| match s.approvals.get_mut(id) {
            Some(a) if a.state == ApprovalState::Open => {
                a.state = ApprovalState::Closed;
                true
            }
            _ => false,
        }))
    }
}

#[async_trait]
impl Store for InMemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn ping(&self) -> Result<()> {
        Ok(())
    }
}
