//! The asks waiting for a person under `serve`: the broker's gate asks here ([`Approver`]), and
//! the run page and Slack's buttons answer here ([`ApprovalDesk`]). Each ask is a row of the
//! store's `tool_approvals`, so an answer counts from whichever replica it reaches: the store's
//! conditional write lets exactly one answer count, and the replica whose run asked reads it
//! (at once when the answer reached it, within [`POLL`] when it reached another). Only the
//! run's principal (or whoever holds the run's capability link, who started it) can answer. An
//! ask that is dropped (its timeout, its run stopped) is closed, so a late answer finds nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agents::tools::{Answer, Approver, Question, Who};
use async_trait::async_trait;
use authz_core::{ActorId, BoxFuture, RunId};
use commands::{Answerer, ApprovalDesk, ApprovalError, AskedWatch, PendingApproval};
use store::{ApprovalRecord, ApprovalState, Store};
use tokio::sync::oneshot;

/// How often a waiting ask reads its state when no answer reached this replica.
pub const POLL: Duration = Duration::from_millis(500);
/// The most of a call's arguments kept with its ask (they are shown, not run).
const ARGUMENTS_KEPT: usize = 8 * 1024;

type Local = Arc<Mutex<HashMap<String, oneshot::Sender<bool>>>>;

pub struct PendingApprovals {
    store: Arc<dyn Store>,
    /// The asks of this process, by id: an answer that reaches this replica wakes its wait.
    local: Local,
    /// Counts this process's asks; a surface watching it offers each new one.
    asked: tokio::sync::watch::Sender<u64>,
    poll: Duration,
}

impl PendingApprovals {
    pub fn new(store: Arc<dyn Store>) -> PendingApprovals {
        PendingApprovals {
            store,
            local: Arc::default(),
            asked: tokio::sync::watch::Sender::new(0),
            poll: POLL,
        }
    }

    /// The same desk reading remote answers every `poll` (tests use a short one).
    pub fn with_poll(mut self, poll: Duration) -> PendingApprovals {
        self.poll = poll;
        self
    }

    fn take_local(&self, id: &str) -> Option<oneshot::Sender<bool>> {
        match self.local.lock() {
            Ok(mut local) => local.remove(id),
            Err(poisoned) => poisoned.into_inner().remove(id),
        }
    }

    /// Waits for the ask's answer: from this replica through `rx`, from another through the
    /// store. A store that cannot be read is read again at the next poll.
    async fn wait(&self, id: &str, mut rx: oneshot::Receiver<bool>) -> Answer {
        let mut tick = tokio::time::interval(self.poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                local = &mut rx => return match local {
                    Ok(true) => Answer::Yes,
                    Ok(false) => Answer::No,
                    Err(_) => Answer::Nobody,
                },
                _ = tick.tick() => {}
            }
            match self.store.approval_state(id).await {
                Ok(Some(ApprovalState::Approved)) => return Answer::Yes,
                Ok(Some(ApprovalState::Denied)) => return Answer::No,
                Ok(Some(ApprovalState::Closed) | None) => return Answer::Nobody,
                Ok(Some(ApprovalState::Open)) => {}
                Err(e) => {
                    tracing::warn!(error = %e.token(), "[broker] an ask's state could not be read")
                }
            }
        }
    }
}

/// Closes its ask when the asking future ends, answered or not: a row still open is closed
/// (timed out, run stopped), so no answer can count after the wait is over.
struct Leave {
    store: Arc<dyn Store>,
    local: Local,
    id: String,
}

impl Drop for Leave {
    fn drop(&mut self) {
        if let Ok(mut local) = self.local.lock() {
            local.remove(&self.id);
        }
        let (store, id) = (self.store.clone(), self.id.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = store.close_approval(&id, store::wall_clock()).await {
                    tracing::warn!(error = %e.token(), "[broker] an ask could not be closed");
                }
            });
        }
    }
}

#[async_trait]
impl Approver for PendingApprovals {
    async fn approve(&self, question: &Question) -> Answer {
        if question.who != Who::Person {
            return Answer::Nobody;
        }
        let Ok(id) = crate::random_token() else {
            return Answer::Unrecorded;
        };
        let record = ApprovalRecord {
            id: id.clone(),
            run_id: question.run.run().clone(),
            principal: question.principal.clone(),
            action: question.action.clone(),
            tool: question.tool.clone(),
            arguments: agents::cap(&question.arguments, ARGUMENTS_KEPT),
            state: ApprovalState::Open,
            asked_at: store::wall_clock(),
        };
        let (tx, rx) = oneshot::channel();
        if let Ok(mut local) = self.local.lock() {
            local.insert(id.clone(), tx);
        }
        let _leave = Leave {
            store: self.store.clone(),
            local: self.local.clone(),
            id: id.clone(),
        };
        if let Err(e) = self.store.open_approval(&record).await {
            tracing::warn!(error = %e.token(), "[broker] an ask could not be recorded; it is refused");
            return Answer::Unrecorded;
        }
        self.asked.send_modify(|n| *n += 1);
        self.wait(&id, rx).await
    }
}

impl ApprovalDesk for PendingApprovals {
    fn pending<'a>(
        &'a self,
        run: &'a RunId,
        by: Answerer<'a>,
    ) -> BoxFuture<'a, Vec<PendingApproval>> {
        Box::pin(async move {
            match self.store.open_approvals(run).await {
                Ok(open) => open
                    .into_iter()
                    .filter(|a| counts(a.principal.as_ref(), by))
                    .map(view)
                    .collect(),
                Err(e) => {
                    tracing::warn!(error = %e.token(), "[broker] the open asks could not be read; none is shown");
                    Vec::new()
                }
            }
        })
    }

    fn asked(&self) -> Box<dyn AskedWatch> {
        Box::new(Asked(self.asked.subscribe()))
    }

    fn answer<'a>(
        &'a self,
        run: &'a RunId,
        id: &'a str,
        by: Answerer<'a>,
        approve: bool,
    ) -> BoxFuture<'a, Result<(), ApprovalError>> {
        Box::pin(async move {
            let open = self.store.open_approvals(run).await.map_err(|e| {
                tracing::warn!(error = %e.token(), "[broker] the open asks could not be read");
                ApprovalError::Unrecorded
            })?;
            let ask = open
                .iter()
                .find(|a| a.id == id)
                .ok_or(ApprovalError::NotPending)?;
            if !counts(ask.principal.as_ref(), by) {
                return Err(ApprovalError::NotThePrincipal);
            }
            let who = match by {
                Answerer::Capability => "the run's capability link",
                Answerer::Actor(actor) => actor.as_str(),
            };
            let counted = self
                .store
                .answer_approval(id, run, approve, who, store::wall_clock())
                .await
                .map_err(|e| {
                    tracing::warn!(error = %e.token(), "[broker] an answer could not be recorded");
                    ApprovalError::Unrecorded
                })?;
            if !counted {
                return Err(ApprovalError::NotPending);
            }
            // The ask is this replica's: its wait wakes now rather than at the next poll.
            if let Some(waiting) = self.take_local(id) {
                let _ = waiting.send(approve);
            }
            Ok(())
        })
    }
}

/// A watch on the desk's count of asks.
struct Asked(tokio::sync::watch::Receiver<u64>);

impl AskedWatch for Asked {
    fn changed(&mut self) -> BoxFuture<'_, bool> {
        Box::pin(async move { self.0.changed().await.is_ok() })
    }
}

/// Whether `by`'s answer counts for an ask of `principal`.
fn counts(principal: Option<&ActorId>, by: Answerer<'_>) -> bool {
    match by {
        Answerer::Capability => true,
        Answerer::Actor(actor) => principal == Some(actor),
    }
}

fn view(a: ApprovalRecord) -> PendingApproval {
    PendingApproval {
        id: a.id,
        run: a.run_id,
        action: a.action,
        tool: a.tool,
        arguments: a.arguments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker::SessionId;

    fn question(principal: &str) -> Question {
        Question {
            run: SessionId::parse("01JAPPROVE").unwrap(),
            principal: Some(ActorId::parse(principal).unwrap()),
            action: "fs.write".into(),
            tool: "write_file".into(),
            arguments: "{}".into(),
            who: Who::Person,
        }
    }

    /// Two replicas' desks over one store, reading remote answers every 20 ms.
    async fn desks() -> (Arc<PendingApprovals>, Arc<PendingApprovals>) {
        let store = store::open("memory:").await.unwrap();
        let desk =
            || Arc::new(PendingApprovals::new(store.clone()).with_poll(Duration::from_millis(20)));
        (desk(), desk())
    }

    async fn waiting(
        desk: &Arc<PendingApprovals>,
        principal: &str,
    ) -> (tokio::task::JoinHandle<Answer>, String) {
        let asking = desk.clone();
        let q = question(principal);
        let task = tokio::spawn(async move { asking.approve(&q).await });
        let run = RunId::parse("01JAPPROVE").unwrap();
        for _ in 0..100 {
            if let Some(p) = desk.pending(&run, Answerer::Capability).await.first() {
                return (task, p.id.clone());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the ask never reached the desk");
    }

    #[tokio::test]
    async fn only_the_principal_or_the_capability_answers_once() {
        let (desk, _) = desks().await;
        let run = RunId::parse("01JAPPROVE").unwrap();
        let other_run = RunId::parse("01JOTHER").unwrap();
        let alice = ActorId::parse("access:alice").unwrap();
        let mallory = ActorId::parse("access:mallory").unwrap();

        let mut asked = desk.asked();
        let (task, id) = waiting(&desk, "access:alice").await;
        assert!(asked.changed().await, "a watcher hears of the new ask");
        assert_eq!(desk.pending(&run, Answerer::Actor(&alice)).await.len(), 1);
        assert!(
            desk.pending(&run, Answerer::Actor(&mallory))
                .await
                .is_empty(),
            "shown only to who may answer"
        );
        assert_eq!(
            desk.answer(&run, &id, Answerer::Actor(&mallory), true)
                .await,
            Err(ApprovalError::NotThePrincipal)
        );
        assert_eq!(
            desk.answer(&other_run, &id, Answerer::Actor(&alice), true)
                .await,
            Err(ApprovalError::NotPending)
        );
        assert_eq!(
            desk.answer(&run, "guess", Answerer::Actor(&alice), true)
                .await,
            Err(ApprovalError::NotPending)
        );
        assert_eq!(
            desk.answer(&run, &id, Answerer::Actor(&alice), true).await,
            Ok(())
        );
        assert_eq!(task.await.unwrap(), Answer::Yes);
        assert_eq!(
            desk.answer(&run, &id, Answerer::Actor(&alice), true).await,
            Err(ApprovalError::NotPending)
        );
        assert!(desk.pending(&run, Answerer::Capability).await.is_empty());
        let quiet = tokio::time::timeout(Duration::from_millis(50), asked.changed()).await;
        assert!(quiet.is_err(), "an answer is not a new ask");

        let (task, id) = waiting(&desk, "access:alice").await;
        assert_eq!(
            desk.answer(&run, &id, Answerer::Capability, false).await,
            Ok(())
        );
        assert_eq!(task.await.unwrap(), Answer::No);
    }

    #[tokio::test]
    async fn an_answer_counts_from_another_replica() {
        let (here, there) = desks().await;
        let run = RunId::parse("01JAPPROVE").unwrap();
        let alice = ActorId::parse("access:alice").unwrap();
        let mallory = ActorId::parse("access:mallory").unwrap();
        let (task, id) = waiting(&here, "access:alice").await;
        // The other replica sees the ask, keeps to the same rule, and its answer counts.
        assert_eq!(there.pending(&run, Answerer::Actor(&alice)).await.len(), 1);
        assert_eq!(
            there
                .answer(&run, &id, Answerer::Actor(&mallory), true)
                .await,
            Err(ApprovalError::NotThePrincipal)
        );
        assert_eq!(
            there
                .answer(&run, &id, Answerer::Actor(&alice), false)
                .await,
            Ok(())
        );
        assert_eq!(task.await.unwrap(), Answer::No);
        assert_eq!(
            here.answer(&run, &id, Answerer::Actor(&alice), true).await,
            Err(ApprovalError::NotPending),
            "answered once, wherever"
        );
    }

    #[tokio::test]
    async fn an_ask_that_is_dropped_is_closed_everywhere() {
        let (here, there) = desks().await;
        let run = RunId::parse("01JAPPROVE").unwrap();
        let (task, id) = waiting(&here, "access:alice").await;
        task.abort();
        let _ = task.await;
        for _ in 0..100 {
            if there.pending(&run, Answerer::Capability).await.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(there.pending(&run, Answerer::Capability).await.is_empty());
        assert_eq!(
            there.answer(&run, &id, Answerer::Capability, true).await,
            Err(ApprovalError::NotPending)
        );
        // A reviewer's question is not a person's: nobody here answers it.
        let mut q = question("access:alice");
        q.who = Who::Reviewer;
        assert_eq!(here.approve(&q).await, Answer::Nobody);
    }
}
