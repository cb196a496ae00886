//! The launcher port's one error, [`LaunchError`], from the dispatcher's own faults (its
//! workspace, its tokens), and a started run's end as the port hands it over.

use commands::{LaunchError, StartedRun};
use store::RunRecord;
use tokio::sync::watch;

use crate::{TokenError, WorkspaceError};

/// The caller is told the sentence ([`WorkspaceError::public`]); the cause (a path, git's own
/// message) goes to the operator's log here, which the local command line shows too.
impl From<WorkspaceError> for LaunchError {
    fn from(e: WorkspaceError) -> Self {
        tracing::warn!(cause = %e, "{}", e.public());
        LaunchError::Workspace(e.public())
    }
}

impl From<TokenError> for LaunchError {
    fn from(e: TokenError) -> Self {
        LaunchError::Failed {
            detail: format!("the run's tokens could not be made: {e}"),
        }
    }
}

/// The started run as the port hands it over: its record as created, the requester's
/// capability token, and its final record once the run's task sends it (`None` if the task
/// vanished).
pub(crate) fn started(
    run: RunRecord,
    capability_token: String,
    mut done: watch::Receiver<Option<RunRecord>>,
) -> StartedRun {
    let finished = async move {
        loop {
            if let Some(r) = done.borrow().clone() {
                return Some(r);
            }
            if done.changed().await.is_err() {
                return done.borrow().clone();
            }
        }
    };
    StartedRun::new(run, capability_token, Box::pin(finished))
}
