//! The asks waiting for a person under `serve`: the broker's gate asks here
//! ([`Approver`]), and the run page answers here ([`ApprovalDesk`]). Only the run's principal
//! (or whoever holds the run's capability link, who started it) can answer. An ask that is
//! dropped (its timeout, its run stopped) leaves the desk with it. Held in this process: an
//! answer must reach the replica the run is live on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agents::tools::{Answer, Approver, Question, Who};
use async_trait::async_trait;
use authz_core::BoxFuture;
use authz_core::{ActorId, RunId};
use commands::{Answerer, ApprovalDesk, ApprovalError, AskedWatch, PendingApproval};
use tokio::sync::oneshot;

struct Waiting {
    view: PendingApproval,
    principal: Option<ActorId>,
    answer: oneshot::Sender<bool>,
}

pub struct PendingApprovals {
    waiting: Arc<Mutex<HashMap<String, Waiting>>>,
    /// Counts the asks so far; a surface watching it offers each new one.
    asked: tokio::sync::watch::Sender<u64>,
}

impl Default for PendingApprovals {
    fn default() -> Self {
        PendingApprovals {
            waiting: Arc::default(),
            asked: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl PendingApprovals {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Waiting>) -> T) -> T {
        let mut guard = match self.waiting.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }
}

/// Removes its ask from the desk when the asking future ends, answered or not.
struct Leave {
    waiting: Arc<Mutex<HashMap<String, Waiting>>>,
    id: String,
}

impl Drop for Leave {
    fn drop(&mut self) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.remove(&self.id);
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
            return Answer::Nobody;
        };
        let (tx, rx) = oneshot::channel();
        let view = PendingApproval {
            id: id.clone(),
            run: question.run.run().clone(),
            action: question.action.clone(),
            tool: question.tool.clone(),
            arguments: question.arguments.clone(),
        };
        self.with(|w| {
            w.insert(
                id.clone(),
                Waiting {
                    view,
                    principal: question.principal.clone(),
                    answer: tx,
                },
            )
        });
        let _leave = Leave {
            waiting: self.waiting.clone(),
            id,
        };
        self.asked.send_modify(|n| *n += 1);
        match rx.await {
            Ok(true) => Answer::Yes,
            Ok(false) => Answer::No,
            Err(_) => Answer::Nobody,
        }
    }
}

impl ApprovalDesk for PendingApprovals {
    fn pending(&self, run: &RunId, by: Answerer<'_>) -> Vec<PendingApproval> {
        let mut list: Vec<PendingApproval> = self.with(|w| {
            w.values()
                .filter(|p| &p.view.run == run && counts(p, by))
                .map(|p| p.view.clone())
                .collect()
        });
        list.sort_by(|a, b| a.id.cmp(&b.id));
        list
    }

    fn asked(&self) -> Box<dyn AskedWatch> {
        Box::new(Asked(self.asked.subscribe()))
    }

    fn answer(
        &self,
        run: &RunId,
        id: &str,
        by: Answerer<'_>,
        approve: bool,
    ) -> Result<(), ApprovalError> {
        self.with(|w| {
            let waiting = w
                .get(id)
                .filter(|p| &p.view.run == run)
                .ok_or(ApprovalError::NotPending)?;
            if !counts(waiting, by) {
                return Err(ApprovalError::NotThePrincipal);
            }
            let waiting = w.remove(id).ok_or(ApprovalError::NotPending)?;
            waiting
                .answer
                .send(approve)
                .map_err(|_| ApprovalError::NotPending)
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

/// Whether `by`'s answer counts for this ask.
fn counts(waiting: &Waiting, by: Answerer<'_>) -> bool {
    match by {
        Answerer::Capability => true,
        Answerer::Actor(actor) => waiting.principal.as_ref() == Some(actor),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker::SessionId;
    use std::time::Duration;

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

    async fn waiting(
        desk: &Arc<PendingApprovals>,
        principal: &str,
    ) -> (tokio::task::JoinHandle<Answer>, String) {
        let asking = desk.clone();
        let q = question(principal);
        let task = tokio::spawn(async move { asking.approve(&q).await });
        let run = RunId::parse("01JAPPROVE").unwrap();
        for _ in 0..100 {
            if let Some(p) = desk.pending(&run, Answerer::Capability).first() {
                return (task, p.id.clone());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the ask never reached the desk");
    }

    #[tokio::test]
    async fn only_the_principal_or_the_capability_answers_once() {
        let desk = Arc::new(PendingApprovals::default());
        let run = RunId::parse("01JAPPROVE").unwrap();
        let other_run = RunId::parse("01JOTHER").unwrap();
        let alice = ActorId::parse("access:alice").unwrap();
        let mallory = ActorId::parse("access:mallory").unwrap();

        let mut asked = desk.asked();
        let (task, id) = waiting(&desk, "access:alice").await;
        assert!(asked.changed().await, "a watcher hears of the new ask");
        assert_eq!(desk.pending(&run, Answerer::Actor(&alice)).len(), 1);
        assert!(
            desk.pending(&run, Answerer::Actor(&mallory)).is_empty(),
            "shown only to who may answer"
        );
        assert_eq!(
            desk.answer(&run, &id, Answerer::Actor(&mallory), true),
            Err(ApprovalError::NotThePrincipal)
        );
        assert_eq!(
            desk.answer(&other_run, &id, Answerer::Actor(&alice), true),
            Err(ApprovalError::NotPending)
        );
        assert_eq!(
            desk.answer(&run, "guess", Answerer::Actor(&alice), true),
            Err(ApprovalError::NotPending)
        );
        assert_eq!(
            desk.answer(&run, &id, Answerer::Actor(&alice), true),
            Ok(())
        );
        assert_eq!(task.await.unwrap(), Answer::Yes);
        assert_eq!(
            desk.answer(&run, &id, Answerer::Actor(&alice), true),
            Err(ApprovalError::NotPending)
        );
        assert!(desk.pending(&run, Answerer::Capability).is_empty());
        let quiet = tokio::time::timeout(Duration::from_millis(50), asked.changed()).await;
        assert!(quiet.is_err(), "an answer is not a new ask");

        let (task, id) = waiting(&desk, "access:alice").await;
        assert_eq!(desk.answer(&run, &id, Answerer::Capability, false), Ok(()));
        assert_eq!(task.await.unwrap(), Answer::No);
    }

    #[tokio::test]
    async fn an_ask_that_is_dropped_leaves_the_desk() {
        let desk = Arc::new(PendingApprovals::default());
        let run = RunId::parse("01JAPPROVE").unwrap();
        let (task, id) = waiting(&desk, "access:alice").await;
        task.abort();
        let _ = task.await;
        assert!(desk.pending(&run, Answerer::Capability).is_empty());
        assert_eq!(
            desk.answer(&run, &id, Answerer::Capability, true),
            Err(ApprovalError::NotPending)
        );
        // A reviewer's question is not a person's: nobody here answers it.
        let mut q = question("access:alice");
        q.who = Who::Reviewer;
        assert_eq!(desk.approve(&q).await, Answer::Nobody);
    }
}
