//! A run's life once it started: its events recorded and published as they come, its timeout
//! and stop, its workspace kept on its branch and removed, and its one finish.

use std::sync::Arc;
use std::time::Duration;

use agents::SinkItem;
use agents::{AgentJob, AgentOutcome, CancellationToken, EventSink};
use authz_core::AgentName;
use commands::LiveUpdate;
use store::{Finish, Friction, RunRecord, RunStatus};
use tracing::Instrument;

use crate::workspace;
use crate::{AgentEntry, Inner, KEEP_TIMEOUT, RunPlace, StopReason, WorkspaceError, reflect};

impl Inner {
    /// Appends a run event the dispatcher itself writes (cleaned like the agent's) and
    /// publishes it to live viewers.
    pub(crate) async fn record_event(&self, run: &RunRecord, kind: &str, body: &str) -> bool {
        let cleaned = self
            .sanitizer
            .for_run(run.id.as_str(), run.thread_key.as_deref())
            .clean(body);
        let body = agents::cap(&cleaned, agents::OutputCaps::default().event_bytes);
        match self
            .store
            .append_event(&run.id, (self.now)(), kind, &body)
            .await
        {
            Ok(seq) => {
                self.live.publish(LiveUpdate::Event {
                    run: run.facts(),
                    seq,
                    kind: kind.to_owned(),
                    body,
                });
                true
            }
            Err(e) => {
                tracing::error!(run = %run.id, error = %e.token(), "recording an event failed");
                false
            }
        }
    }

    /// When the run has ended: what it changed kept on its branch (for a run in a repo), then
    /// its directory removed. Returns the friction to record.
    pub(crate) async fn close_workspace(
        &self,
        run: &RunRecord,
        place: &RunPlace,
    ) -> Vec<(String, String)> {
        let mut frictions = Vec::new();
        if let Some(base) = &place.base {
            let keeping = workspace::keep(base, &run.id, &place.dir);
            let kept = tokio::time::timeout(KEEP_TIMEOUT, keeping)
                .await
                .unwrap_or_else(|_| {
                    Err(WorkspaceError::Keep(format!(
                        "keeping the run's changes took longer than {}",
                        human(KEEP_TIMEOUT)
                    )))
                });
            match kept {
                Ok(kept) => {
                    let mut body = format!(
                        "kept {} commit{} on {} in repo {}",
                        kept.commits,
                        if kept.commits == 1 { "" } else { "s" },
                        kept.branch,
                        base.slug
                    );
                    if kept.dropped_count > 0 {
                        let dropped: Vec<String> =
                            kept.dropped.iter().map(|p| shown_path(p)).collect();
                        let more = kept.dropped_count.saturating_sub(dropped.len());
                        body.push_str(&format!(
                            "; {} change{} not kept (denied, protected, .switchboard/, a submodule or a link out): {}{}",
                            kept.dropped_count,
                            if kept.dropped_count == 1 { "" } else { "s" },
                            dropped.join(", "),
                            if more > 0 {
                                format!(" and {more} more")
                            } else {
                                String::new()
                            }
                        ));
                    }
                    for note in &kept.notes {
                        body.push_str(&format!("; {note}"));
                    }
                    if kept.tip.is_none() {
                        body.push_str("; no branch was made");
                    }
                    self.record_kept(run, base, &kept).await;
                    self.record_event(run, "branch", &body).await;
                }
                Err(e) => {
                    // The cause for the operator; the run's readers get the sentence.
                    tracing::warn!(run = %run.id, cause = %e, "{}", e.public());
                    self.record_event(run, "branch", &e.public()).await;
                    frictions.push(("branch_not_kept".to_owned(), e.public()));
                }
            }
        }
        workspace::remove(&place.dir).await;
        frictions
    }

    /// Records what keeping left (`runs diff` reads it); a failure is the operator's to see,
    /// and the run's changes stay on its branch.
    async fn record_kept(&self, run: &RunRecord, base: &workspace::Base, kept: &workspace::Kept) {
        let record = store::KeptChanges {
            run_id: run.id.clone(),
            repo: base.slug.clone(),
            start: kept.start.clone(),
            tip: kept.tip.clone(),
            commits: kept.commits as u64,
            not_kept: kept.dropped.iter().cloned().collect(),
            not_kept_count: kept.dropped_count as u64,
            kept_at: (self.now)(),
        };
        if let Err(e) = self.store.record_kept(&record).await {
            tracing::error!(run = %run.id, error = %e.token(), "recording what keeping left failed");
        }
    }

    /// A finished run's kept changes, at most `lines` lines of diff.
    pub(crate) async fn run_changes(
        &self,
        run: &RunRecord,
        lines: usize,
    ) -> Result<commands::run_changes::RunChanges, commands::run_changes::ChangesError> {
        use commands::run_changes::ChangesError;
        if run.status.is_live() {
            return Err(ChangesError::Live);
        }
        let kept = match self.store.kept(&run.id).await {
            Ok(Some(kept)) => kept,
            Ok(None) => return Err(ChangesError::NotKept),
            Err(e) => {
                return Err(ChangesError::Failed {
                    detail: format!("reading what keeping left: {}", e.token()),
                });
            }
        };
        let clean = self
            .sanitizer
            .for_run(run.id.as_str(), run.thread_key.as_deref());
        let read = workspace::diff::read(
            self.store.as_ref(),
            &self.settings.data_dir,
            &kept,
            lines,
            &clean,
        )
        .await;
        if let Err(ChangesError::Failed { detail }) = &read {
            tracing::warn!(run = %run.id, cause = %detail, "[workspace] a run's changes could not be read");
        }
        read
    }

    pub(crate) async fn fail_before_start(&self, run: &RunRecord, why: &str) {
        let finish = Finish {
            status: RunStatus::Failed,
            answer: None,
            error: Some(why.to_owned()),
            at: (self.now)(),
        };
        if let Err(e) = self.store.finish_run(&run.id, finish).await {
            tracing::error!(run = %run.id, error = %e.token(), "recording a run that could not start failed");
        }
    }

    /// The run's task: start, run the back end under its timeout while recording events,
    /// finish. Returns the final record.
    pub(crate) async fn drive(
        self: Arc<Self>,
        run: RunRecord,
        name: AgentName,
        job: AgentJob,
        cancel: CancellationToken,
        place: RunPlace,
    ) -> Option<RunRecord> {
        let entry = self.agents.get(&name)?;
        let started = self.store.start_run(&run.id);
        if let Err(e) = started
            .instrument(tracing::info_span!("store.start_run"))
            .await
        {
            tracing::error!(run = %run.id, error = %e.token(), "marking the run running failed");
        }
        self.live.set_status(&run.id, RunStatus::Running);
        let mut job = job;
        let mut frictions = Vec::new();
        match self.memory.context_block(&reflect::scopes_of(&run)).await {
            Ok(block) => job.memory = reflect::block_for_agents(&block),
            Err(e) => {
                // Nothing remembered is safe; the run goes on without its block.
                tracing::warn!(run = %run.id, error = %e.token(), "reading the memory block failed");
                frictions.push((
                    "memory_unavailable".to_owned(),
                    "the memory block could not be read; the run had none".to_owned(),
                ));
            }
        }
        let had_workspace = job.workspace.is_some();
        let (outcome, agent_frictions) = self.supervise(&run, entry, job, &cancel).await;
        frictions.extend(agent_frictions);
        if had_workspace {
            frictions.extend(self.close_workspace(&run, &place).await);
        }
        let reason = self.live.reason(&run.id);
        let finish = self.finish_of(&outcome, reason, entry.timeout);
        if reason == Some(StopReason::Timeout) {
            let detail = format!("the agent did not finish within {}", human(entry.timeout));
            frictions.push(("timeout".to_owned(), detail));
        }
        for (kind, detail) in frictions {
            let f = Friction {
                run_id: run.id.clone(),
                at: (self.now)(),
                kind,
                detail,
            };
            if let Err(e) = self.store.add_friction(f).await {
                tracing::error!(run = %run.id, error = %e.token(), "recording friction failed");
            }
        }
        let status = finish.status;
        tracing::Span::current().record("status", status.as_str());
        let finishing = self.store.finish_run(&run.id, finish.clone());
        let record = match finishing
            .instrument(tracing::info_span!("store.finish_run"))
            .await
        {
            Ok(r) => Some(r),
            Err(e) => {
                // Left live: the store's recovery tombstones it; never reported as done.
                tracing::error!(run = %run.id, error = %e.token(), "recording the run's end failed");
                None
            }
        };
        tracing::info!(run = %run.id, status = %status, "run finished");
        let finished = LiveUpdate::Finished {
            run: run.facts(),
            status,
            answer: finish.answer,
            error: finish.error,
        };
        self.live.finish(&run.id, finished);
        record
    }

    /// Runs the back end under its timeout, recording its events as they come; returns its
    /// outcome and the friction it reported. Once cancelled (stop, timeout, shutdown) a back
    /// end gets `cancel_grace` to return; one that ignores its token is abandoned then, so a
    /// run always ends. The same grace bounds the draining of events after it returned.
    pub(crate) async fn supervise(
        &self,
        run: &RunRecord,
        entry: &AgentEntry,
        job: AgentJob,
        cancel: &CancellationToken,
    ) -> (AgentOutcome, Vec<(String, String)>) {
        let sanitizer = Arc::new(
            self.sanitizer
                .for_run(run.id.as_str(), run.thread_key.as_deref()),
        );
        let (sink, mut items) = EventSink::channel(entry.caps, sanitizer);
        let backend = entry.backend.clone();
        let agent_cancel = cancel.clone();
        let backend_span = tracing::info_span!("backend", kind = entry.backend.kind());
        let mut task = tokio::spawn(
            async move { backend.run(job, sink, agent_cancel).await }.instrument(backend_span),
        );
        let timer = tokio::time::sleep(entry.timeout);
        tokio::pin!(timer);
        let mut frictions = Vec::new();
        let mut outcome: Option<AgentOutcome> = None;
        let mut items_open = true;
        let mut abandon_at: Option<tokio::time::Instant> = None;
        let grace = self.settings.cancel_grace;
        while outcome.is_none() || items_open {
            let abandon = async {
                match abandon_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                item = items.recv(), if items_open => match item {
                    Some(item) => self.record_item(run, item, &mut frictions).await,
                    None => items_open = false,
                },
                joined = &mut task, if outcome.is_none() => {
                    abandon_at.get_or_insert(tokio::time::Instant::now() + grace);
                    outcome = Some(joined.unwrap_or_else(|_| AgentOutcome::crashed()));
                }
                () = &mut timer, if outcome.is_none() && !cancel.is_cancelled() => {
                    self.live.cancel(&run.id, StopReason::Timeout);
                }
                () = cancel.cancelled(), if abandon_at.is_none() => {
                    abandon_at = Some(tokio::time::Instant::now() + grace);
                }
                () = abandon => {
                    if outcome.is_none() {
                        task.abort();
                        outcome = Some(AgentOutcome::abandoned());
                        let detail = format!(
                            "the agent back end ignored its stop for {} and was abandoned",
                            human(grace)
                        );
                        frictions.push(("unresponsive".to_owned(), detail));
                    }
                    items_open = false;
                }
            }
        }
        (outcome.unwrap_or_else(AgentOutcome::abandoned), frictions)
    }

    pub(crate) async fn record_item(
        &self,
        run: &RunRecord,
        item: SinkItem,
        frictions: &mut Vec<(String, String)>,
    ) {
        match item {
            SinkItem::Event { kind, body, stored } => {
                let appended = self.store.append_event(&run.id, (self.now)(), &kind, &body);
                match appended
                    .instrument(tracing::info_span!("store.append_event"))
                    .await
                {
                    Ok(seq) => {
                        stored.answer(true);
                        self.live.publish(LiveUpdate::Event {
                            run: run.facts(),
                            seq,
                            kind,
                            body,
                        })
                    }
                    Err(e) => {
                        stored.answer(false);
                        tracing::error!(run = %run.id, error = %e.token(), "recording an event failed")
                    }
                }
            }
            SinkItem::Friction { kind, detail } => frictions.push((kind, detail)),
        }
    }

    pub(crate) fn finish_of(
        &self,
        outcome: &AgentOutcome,
        reason: Option<StopReason>,
        timeout: Duration,
    ) -> Finish {
        let at = (self.now)();
        let (status, answer, error) = if outcome.is_cancelled() {
            match reason {
                Some(StopReason::Timeout) => (
                    RunStatus::Failed,
                    None,
                    Some(format!("timed out after {}", human(timeout))),
                ),
                Some(StopReason::Shutdown) => (
                    RunStatus::Interrupted,
                    None,
                    Some("the server shut down before the run finished".to_owned()),
                ),
                Some(StopReason::Stop) | None => {
                    (RunStatus::Stopped, None, Some("stopped".to_owned()))
                }
            }
        } else if let Some(answer) = outcome.answer() {
            (RunStatus::Completed, Some(answer.to_owned()), None)
        } else {
            (
                RunStatus::Failed,
                None,
                Some(outcome.error().unwrap_or("the agent failed").to_owned()),
            )
        };
        Finish {
            status,
            answer,
            error,
            at,
        }
    }
}

/// `1.5s`, `300ms`, `2s`.
fn human(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// A path the run chose, as the `branch` event lists it: quoted when it holds what would
/// read as the list's own punctuation (`, `, `; `) or a control character.
fn shown_path(path: &str) -> String {
    if path.contains(", ") || path.contains("; ") || path.chars().any(char::is_control) {
        format!("{path:?}")
    } else {
        path.to_owned()
    }
}
