//! The process-wide registry of live runs, and subscriptions filtered per viewer.
//!
//! A subscription holds the viewer's `predicate_for(viewer, runs:read, run)` and drops every
//! update whose run it does not match **before** handing anything over: a viewer never
//! receives a byte about a run it may not read.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use agents::CancellationToken;
use authz_core::{Action, Actor, BoxFuture, CommandGroup, Effect, Predicate, ResourceType, RunId};
use authz_core::{matches, predicate_for};
use commands::{LiveRun, LiveStream, LiveUpdate, RunStatus};
use tokio::sync::{Notify, broadcast, mpsc};

/// Why a live run is being cancelled; decides its final status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// `runs stop`: `stopped`.
    Stop,
    /// The agent's timeout: `failed`, with a timeout friction.
    Timeout,
    /// The server is shutting down past its grace: `interrupted`.
    Shutdown,
}

struct Entry {
    run: LiveRun,
    cancel: CancellationToken,
    reason: Option<StopReason>,
}

/// The live runs of this process.
pub struct LiveRuns {
    runs: Mutex<HashMap<RunId, Entry>>,
    tx: broadcast::Sender<LiveUpdate>,
    emptied: Notify,
    /// Where this replica's own upserts and ends go to reach other replicas, once the
    /// fan-out runs (`serve` on Postgres).
    outbox: OnceLock<mpsc::Sender<LiveUpdate>>,
}

impl Default for LiveRuns {
    fn default() -> Self {
        LiveRuns {
            runs: Mutex::new(HashMap::new()),
            tx: broadcast::channel(1024).0,
            emptied: Notify::new(),
            outbox: OnceLock::new(),
        }
    }
}

fn runs_read() -> Action {
    Action::Command(CommandGroup::Runs, Effect::Read)
}

impl LiveRuns {
    pub(crate) fn insert(&self, run: LiveRun, cancel: CancellationToken) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.insert(
                run.facts.id.clone(),
                Entry {
                    run: run.clone(),
                    cancel,
                    reason: None,
                },
            );
        }
        self.publish_local(LiveUpdate::Upsert(run));
    }

    pub(crate) fn set_status(&self, id: &RunId, status: RunStatus) {
        let updated = self.runs.lock().ok().and_then(|mut runs| {
            runs.get_mut(id).map(|e| {
                e.run.status = status;
                e.run.clone()
            })
        });
        if let Some(run) = updated {
            self.publish_local(LiveUpdate::Upsert(run));
        }
    }

    /// To this replica's subscribers.
    pub(crate) fn publish(&self, update: LiveUpdate) {
        // No subscriber is not an error.
        let _ = self.tx.send(update);
    }

    /// A change to one of this replica's runs: to its subscribers, and to the other
    /// replicas' when the fan-out runs.
    fn publish_local(&self, update: LiveUpdate) {
        if let Some(outbox) = self.outbox.get()
            && matches!(update, LiveUpdate::Upsert(_) | LiveUpdate::Finished { .. })
            && outbox.try_send(update.clone()).is_err()
        {
            tracing::warn!("the live-run fan-out is behind; other replicas miss an update");
        }
        self.publish(update);
    }

    pub(crate) fn set_outbox(&self, outbox: mpsc::Sender<LiveUpdate>) {
        let _ = self.outbox.set(outbox);
    }

    /// A run ends: it leaves the live set and its `Finished` update is published, in one step
    /// under the lock that `subscribe`, `snapshot` and `len` take. So an observer that
    /// subscribed and then still sees the run live receives its `Finished`; one that sees it
    /// gone finds the `Finished` already in its subscription (when it subscribed before).
    pub(crate) fn finish(&self, id: &RunId, finished: LiveUpdate) {
        let empty = match self.runs.lock() {
            Ok(mut runs) => {
                runs.remove(id);
                self.publish_local(finished);
                runs.is_empty()
            }
            Err(_) => true,
        };
        if empty {
            self.emptied.notify_waiters();
        }
    }

    /// Cancels a live run for `reason` (the first reason wins). False when it is not live here.
    pub(crate) fn cancel(&self, id: &RunId, reason: StopReason) -> bool {
        let Ok(mut runs) = self.runs.lock() else {
            return false;
        };
        match runs.get_mut(id) {
            Some(e) => {
                e.reason.get_or_insert(reason);
                e.cancel.cancel();
                true
            }
            None => false,
        }
    }

    pub(crate) fn reason(&self, id: &RunId) -> Option<StopReason> {
        self.runs
            .lock()
            .ok()
            .and_then(|runs| runs.get(id).and_then(|e| e.reason))
    }

    /// Cancels every live run (shutdown past its grace); returns how many.
    pub(crate) fn cancel_all(&self, reason: StopReason) -> usize {
        let ids: Vec<RunId> = self
            .runs
            .lock()
            .map(|runs| runs.keys().cloned().collect())
            .unwrap_or_default();
        ids.iter().filter(|id| self.cancel(id, reason)).count()
    }

    pub fn len(&self) -> usize {
        self.runs.lock().map(|r| r.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until no run is live.
    pub async fn until_empty(&self) {
        loop {
            // Created before the check, so an emptying between the two still wakes it.
            let notified = self.emptied.notified();
            if self.is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// Waits until no run is live, or `deadline` passes; true when empty.
    pub async fn wait_empty(&self, deadline: tokio::time::Instant) -> bool {
        tokio::time::timeout_at(deadline, self.until_empty())
            .await
            .is_ok()
            || self.is_empty()
    }

    /// The live runs `viewer` may read, newest first.
    pub fn snapshot(&self, viewer: &Actor) -> Vec<LiveRun> {
        let predicate = predicate_for(viewer, &runs_read(), ResourceType::Run);
        let mut out: Vec<LiveRun> = self
            .runs
            .lock()
            .map(|runs| {
                runs.values()
                    .filter(|e| matches(&predicate, &e.run.facts))
                    .map(|e| e.run.clone())
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by_key(|r| std::cmp::Reverse(r.created_at));
        out
    }

    /// Updates about the runs `viewer` may read, from now on. Every run live in a snapshot
    /// taken after subscribing gets its `Finished` on this subscription (see `finish`).
    pub fn subscribe(&self, viewer: &Actor) -> Subscription {
        let predicate = predicate_for(viewer, &runs_read(), ResourceType::Run);
        // Under the runs lock (held, poisoned or not, until the end of this function), so no
        // run ends halfway through this subscription.
        let _ordered = self.runs.lock();
        Subscription {
            rx: self.tx.subscribe(),
            filter: Filter::Viewer(predicate),
        }
    }

    /// Updates about one run, from now on (its capability token's holder).
    pub fn subscribe_run(&self, run: &RunId) -> Subscription {
        let _ordered = self.runs.lock();
        Subscription {
            rx: self.tx.subscribe(),
            filter: Filter::Run(run.clone()),
        }
    }
}

/// Which updates a subscription hands over.
enum Filter {
    /// Runs the viewer's `predicate_for(viewer, runs:read, run)` matches.
    Viewer(Predicate),
    /// One run, for a capability token.
    Run(RunId),
}

impl Filter {
    fn admits(&self, run: &authz_core::RunFacts) -> bool {
        match self {
            Filter::Viewer(predicate) => matches(predicate, run),
            Filter::Run(id) => &run.id == id,
        }
    }
}

/// One viewer's feed: only updates whose run its filter admits.
pub struct Subscription {
    rx: broadcast::Receiver<LiveUpdate>,
    filter: Filter,
}

impl Subscription {
    /// The next update this viewer may see; `None` when the registry is gone.
    pub async fn recv(&mut self) -> Option<LiveUpdate> {
        loop {
            match self.rx.recv().await {
                Ok(update) => match update.run() {
                    Some(run) if self.filter.admits(run) => return Some(update),
                    _ => continue,
                },
                Err(broadcast::error::RecvError::Lagged(n)) => return Some(LiveUpdate::Lagged(n)),
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The next update already waiting for this viewer, without waiting.
    pub fn try_next(&mut self) -> Option<LiveUpdate> {
        loop {
            match self.rx.try_recv() {
                Ok(update) => match update.run() {
                    Some(run) if self.filter.admits(run) => return Some(update),
                    _ => continue,
                },
                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                    return Some(LiveUpdate::Lagged(n));
                }
                Err(_) => return None,
            }
        }
    }
}

impl LiveStream for Subscription {
    fn recv(&mut self) -> BoxFuture<'_, Option<LiveUpdate>> {
        Box::pin(Subscription::recv(self))
    }

    fn try_next(&mut self) -> Option<LiveUpdate> {
        Subscription::try_next(self)
    }
}
