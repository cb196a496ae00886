//! The ports `commands` defines, implemented by the [`Dispatcher`]: starting runs, the live
//! feed, checking an agent token, and reading a run's kept changes.

use authz_core::{Actor, BoxFuture, RepoSlug, RunId};
use commands::run_changes::{ChangesError, RunChanges, RunChangesReader};
use commands::{
    AgentTokenCheck, CommandRun, LaunchError, LiveFeed, LiveRun, LiveStream, RepoTask, RunLauncher,
    RunRequest, StartedRun,
};
use store::RunRecord;
use tracing::Instrument;

use crate::Dispatcher;

impl RunLauncher for Dispatcher {
    fn start(&self, req: RunRequest) -> BoxFuture<'_, Result<StartedRun, LaunchError>> {
        // The admission, the stamp and the record, as a span of the request that asked.
        let span = tracing::info_span!("dispatch");
        Box::pin(Dispatcher::start(self, req).instrument(span))
    }

    fn start_repo(
        &self,
        req: RunRequest,
        repo: RepoSlug,
        task: RepoTask,
    ) -> BoxFuture<'_, Result<StartedRun, LaunchError>> {
        let span = tracing::info_span!("dispatch", repo = %repo);
        Box::pin(Dispatcher::start_repo(self, req, repo, task).instrument(span))
    }

    fn stop_here(&self, id: &RunId) -> bool {
        self.stop(id)
    }

    fn record_command_run(&self, run: CommandRun) -> BoxFuture<'_, Result<RunRecord, LaunchError>> {
        let span = tracing::info_span!("dispatch.record_command_run");
        Box::pin(self.inner.record_command_run(run).instrument(span))
    }
}

impl LiveFeed for Dispatcher {
    fn snapshot(&self, viewer: &Actor) -> Vec<LiveRun> {
        self.inner.live.snapshot(viewer)
    }

    fn subscribe(&self, viewer: &Actor) -> Box<dyn LiveStream> {
        Box::new(self.inner.live.subscribe(viewer))
    }

    fn subscribe_run(&self, run: &RunId) -> Box<dyn LiveStream> {
        Box::new(self.inner.live.subscribe_run(run))
    }
}

impl AgentTokenCheck for Dispatcher {
    fn run_of(&self, token: &str) -> Option<RunId> {
        let claims = self.inner.tokens.verify(token).ok()?;
        RunId::parse(&claims.run).ok()
    }
}

impl RunChangesReader for Dispatcher {
    fn changes<'a>(
        &'a self,
        run: &'a RunRecord,
        lines: usize,
    ) -> BoxFuture<'a, Result<RunChanges, ChangesError>> {
        let span = tracing::info_span!("dispatch.run_changes");
        Box::pin(self.inner.run_changes(run, lines).instrument(span))
    }
}
