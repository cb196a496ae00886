//! What `start` gives back: the started run, or why nothing was started (converted to the
//! port's [`LaunchError`] at the port).

use authz_core::AgentName;
use commands::{LaunchError, Refusal, StartedRun};
use store::{RunRecord, StoreError};
use tokio::sync::watch;

use crate::{Busy, TokenError, WorkspaceError};

/// Why nothing was started, inside the dispatcher; [`LaunchError`] at the port.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("not permitted")]
    Refused(Box<Refusal>),
    #[error("there is no agent `{0}`")]
    UnknownAgent(String),
    #[error("no agent was named and none is the default")]
    NoAgent,
    #[error("no agent `{0}` is declared")]
    NoCodingAgent(AgentName),
    #[error("busy: {0}")]
    Busy(Busy),
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("the parent run is not live")]
    ParentEnded,
    #[error("{0}")]
    Workspace(#[from] WorkspaceError),
    #[error("the run could not be recorded: {0}")]
    Store(#[from] StoreError),
    #[error("the run's tokens could not be made: {0}")]
    Token(#[from] TokenError),
    #[error("{0}")]
    Policy(String),
}

impl From<DispatchError> for LaunchError {
    fn from(e: DispatchError) -> Self {
        match e {
            DispatchError::Refused(r) => LaunchError::Refused(r),
            DispatchError::UnknownAgent(name) => LaunchError::UnknownAgent { name },
            DispatchError::NoAgent => LaunchError::NoAgent,
            DispatchError::NoCodingAgent(name) => LaunchError::NoCodingAgent(name),
            DispatchError::Busy(b) => LaunchError::Busy(b),
            DispatchError::ShuttingDown => LaunchError::ShuttingDown,
            DispatchError::ParentEnded => LaunchError::ParentEnded,
            DispatchError::Workspace(w) => LaunchError::Workspace(w.to_string()),
            DispatchError::Policy(why) => LaunchError::Policy(why),
            DispatchError::Store(e) if e.is_transient() => {
                LaunchError::StoreUnavailable { reason: e.token() }
            }
            e @ (DispatchError::Store(_) | DispatchError::Token(_)) => LaunchError::Failed {
                detail: e.to_string(),
            },
        }
    }
}

/// A started run, inside the dispatcher: its record, the requester's capability token, and
/// the final record once it ends.
pub struct Started {
    pub run: RunRecord,
    pub capability_token: String,
    pub done: watch::Receiver<Option<RunRecord>>,
}

impl Started {
    /// Waits for the run's final record (`None` if its task vanished).
    pub async fn finished(mut self) -> Option<RunRecord> {
        loop {
            if let Some(r) = self.done.borrow().clone() {
                return Some(r);
            }
            if self.done.changed().await.is_err() {
                return self.done.borrow().clone();
            }
        }
    }

    pub(crate) fn into_port(self) -> StartedRun {
        let run = self.run.clone();
        let token = self.capability_token.clone();
        StartedRun::new(run, token, Box::pin(self.finished()))
    }
}
