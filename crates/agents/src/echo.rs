//! `echo`: the built-in back end. Deterministic, needs nothing outside the process, and says
//! plainly that it runs no model. It can be told to fail, stall or be slow (tests, demos).

use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::{AgentBackend, AgentJob, AgentOutcome, EventSink};

/// What the echo agent does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EchoBehaviour {
    /// Answer with a summary of what it was given.
    #[default]
    Answer,
    /// Fail, saying it was told to.
    Fail,
    /// Emit its first event and then wait until stopped (or timed out).
    Stall,
}

impl EchoBehaviour {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "answer" => Some(EchoBehaviour::Answer),
            "fail" => Some(EchoBehaviour::Fail),
            "stall" => Some(EchoBehaviour::Stall),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct EchoSettings {
    pub behaviour: EchoBehaviour,
    /// A pause before each event (a slow agent).
    pub delay: Duration,
}

pub struct EchoBackend {
    settings: EchoSettings,
}

impl EchoBackend {
    pub fn new(settings: EchoSettings) -> Self {
        EchoBackend { settings }
    }

    /// Waits `delay`; false when cancelled first.
    async fn pause(&self, cancel: &CancellationToken) -> bool {
        if self.settings.delay.is_zero() {
            return !cancel.is_cancelled();
        }
        tokio::select! {
            () = tokio::time::sleep(self.settings.delay) => true,
            () = cancel.cancelled() => false,
        }
    }
}

/// The answer: what it was given, and what it is.
pub fn summary(job: &AgentJob) -> String {
    // Counts only: a public run must not publish facts narrowed out of a DM.
    let memory = job.memory.counts();
    let repo = job.repo.as_ref().map_or("none", |r| r.as_str());
    format!(
        "echo agent `{}` (built in; it runs no model and only repeats what it was given)\n\
         request: {}\nmemory: {memory}\nrepo: {repo}\ntools: none in this build",
        job.agent, job.request
    )
}

#[async_trait]
impl AgentBackend for EchoBackend {
    fn kind(&self) -> &'static str {
        "echo"
    }

    async fn run(&self, job: AgentJob, sink: EventSink, cancel: CancellationToken) -> AgentOutcome {
        let steps = [
            format!(
                "received a request of {} characters",
                job.request.chars().count()
            ),
            format!("memory block: {}", job.memory.counts()),
            format!("repo: {}", job.repo.as_ref().map_or("none", |r| r.as_str())),
        ];
        for (i, step) in steps.iter().enumerate() {
            if !self.pause(&cancel).await {
                return sink.cancelled();
            }
            sink.event("progress", step).await;
            if i == 0 && self.settings.behaviour == EchoBehaviour::Stall {
                sink.event("progress", "stalling until stopped (behaviour = \"stall\")")
                    .await;
                cancel.cancelled().await;
                return sink.cancelled();
            }
        }
        if self.settings.behaviour == EchoBehaviour::Fail {
            return sink.failed("the echo agent was told to fail (behaviour = \"fail\")");
        }
        sink.answered(&summary(&job))
    }
}
