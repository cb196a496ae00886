//! What surfaces record through the registry's services, so none reaches past this crate: a
//! chat surface's event ids (a retry, on any replica, is seen once) and answered threads, each
//! keyed by surface; schedule firings (one per slot, across replicas); and a command's answer
//! recorded as a run (a schedule's firing).

use authz_core::{RunId, ScheduleName, Surface};
use store::{Firing, FiringSlot, RunStatus, Timestamp};

use crate::agent_run::run_request;
use crate::ports::{CommandRun, LaunchError};
use crate::{Caller, RawInput, Registry, Reply, ReplyKind, Services, reply_texts};

/// A store call that failed, as the store's short token (for log lines: never the
/// database's free text).
#[derive(Debug, thiserror::Error)]
#[error("the store could not answer ({0})")]
pub struct RecordError(String);

fn fault(e: store::StoreError) -> RecordError {
    RecordError(e.token())
}

/// A manual firing's slot, asked for at `at`, with a fresh id of its own.
pub fn manual_slot(at: Timestamp) -> FiringSlot {
    store::manual_slot(at)
}

impl Services {
    /// True the first time `surface` is sent this event id by any replica sharing the store;
    /// false for every retry. A malformed id is an error (and spends nothing).
    pub async fn first_delivery(
        &self,
        surface: Surface,
        event_id: &str,
    ) -> Result<bool, RecordError> {
        self.store
            .get()
            .first_sighting(surface, event_id, self.clock.now())
            .await
            .map_err(fault)
    }

    /// Records that `surface`'s bot answered a thread, so a follow-up without a mention is
    /// taken on any replica.
    pub async fn record_answered_thread(
        &self,
        surface: Surface,
        channel: &str,
        thread_key: &str,
    ) -> Result<(), RecordError> {
        self.store
            .get()
            .record_answered_thread(surface, channel, thread_key, self.clock.now())
            .await
            .map_err(fault)
    }

    /// Whether any replica recorded `surface` answering this thread.
    pub async fn thread_answered(
        &self,
        surface: Surface,
        channel: &str,
        thread_key: &str,
    ) -> Result<bool, RecordError> {
        self.store
            .get()
            .answered_thread(surface, channel, thread_key)
            .await
            .map_err(fault)
    }

    /// Records a surface's fault delivering a run's outcome (a Slack reply that could not be
    /// posted) as the run's friction, kind `reply`; the run keeps its outcome.
    pub async fn record_reply_friction(
        &self,
        run: &RunId,
        detail: &str,
    ) -> Result<(), RecordError> {
        self.store
            .get()
            .add_friction(store::Friction {
                run_id: run.clone(),
                at: self.clock.now(),
                kind: "reply".to_owned(),
                detail: detail.to_owned(),
            })
            .await
            .map_err(fault)
    }

    /// True for the one replica that claims `(name, slot)`; false for every other.
    pub async fn claim_firing(
        &self,
        name: &ScheduleName,
        slot: &FiringSlot,
    ) -> Result<bool, RecordError> {
        self.store
            .get()
            .claim_firing(name, slot, self.clock.now())
            .await
            .map_err(fault)
    }

    /// Records how a claimed firing ended (`completed`, `failed`, `misconfigured`, …).
    pub async fn record_firing(
        &self,
        name: &ScheduleName,
        slot: &FiringSlot,
        status: &str,
        run: Option<&RunId>,
        detail: Option<&str>,
    ) -> Result<(), RecordError> {
        self.store
            .get()
            .record_firing(name, slot, status, run, detail)
            .await
            .map_err(fault)
    }

    /// What records a claimed firing's end once its run ends: a future holding its own handle
    /// on the store, for the scheduler to spawn (it outlives the tick that fired). A store
    /// fault is logged by its token, never the database's text.
    pub fn record_firing_when_done(
        &self,
        started: crate::StartedRun,
        name: ScheduleName,
        slot: FiringSlot,
        note: Option<String>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let store = self.store.get().clone();
        async move {
            let Some(outcome) = started.finished().await else {
                return;
            };
            let status = outcome.status().as_str().to_owned();
            if let Err(e) = store
                .record_firing(&name, &slot, &status, Some(outcome.id()), note.as_deref())
                .await
            {
                tracing::warn!(schedule = %name, error = %e.token(), "[schedule] the run's end was not recorded on its firing");
            }
        }
    }

    /// The status, as the store has it now, of the one run `capability` opens (a viewer
    /// reads a run through the registry's `runs.get`, decided and audited there).
    pub async fn run_status(
        &self,
        capability: &crate::identity::Capability,
    ) -> Result<Option<RunStatus>, RecordError> {
        let found = self
            .store
            .get()
            .get_run(capability.id())
            .await
            .map_err(fault)?;
        Ok(found.map(|run| run.status))
    }

    /// Each schedule's latest timer slot any replica claimed (where catching up starts).
    pub async fn last_timer_slots(&self) -> Result<Vec<(ScheduleName, Timestamp)>, RecordError> {
        self.store.get().last_timer_slots().await.map_err(fault)
    }

    /// A schedule's latest firings, the most recently fired first.
    pub async fn recent_firings(
        &self,
        name: &ScheduleName,
        limit: u32,
    ) -> Result<Vec<Firing>, RecordError> {
        self.store
            .get()
            .recent_firings(name, limit)
            .await
            .map_err(fault)
    }
}

impl Registry {
    /// Runs command text as `caller`, exactly as `invoke` does, and records it as a run in the
    /// caller's origin channel: the run's request is the text, its answer the reply (its error
    /// when the reply is a refusal or a failure). A schedule's firing is recorded this way.
    pub async fn invoke_recorded(
        &self,
        caller: &Caller,
        text: &str,
        services: &Services,
    ) -> Result<(Reply, RunId), LaunchError> {
        let reply = self
            .invoke(caller, RawInput::Text(text.to_owned()), services)
            .await;
        let Some(request) = run_request(caller, text.to_owned(), None) else {
            return Err(LaunchError::Failed {
                detail: reply_texts::no_run_channel(),
            });
        };
        let run = services
            .runs
            .record_command_run(CommandRun {
                request,
                reply_text: reply.text.clone(),
                succeeded: reply.kind == ReplyKind::Ok,
            })
            .await?;
        Ok((reply, run.id))
    }
}
