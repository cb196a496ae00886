//! # memory: what agents remember, and who may make a fact org-wide
//!
//! What it is: the four scope kinds (`org`, `user:<actor>`, `channel:<channel>`,
//! `repo:<owner/name>`) of a request ([`RunScopes`]); the context block a run is given
//! ([`Memory::context_block`]); the extractors that propose facts after a run ([`rules`],
//! and the `model` extractor over a [`ModelCall`]); and the reflection write gate
//! ([`Memory::reflect`], docs/memory.md, "How facts are written: reflection").
//!
//! What it must never do:
//! - gate a read: the context block reads its request's scopes and never calls `authorize`
//!   (a test spies on the decision to prove it);
//! - widen a write: a candidate goes to the scope the extractor named or to a narrower scope
//!   of the same run (an org fact from a dm, private or unknown origin), never wider, never
//!   rerouted after any other denial;
//! - let a fact's text reach a log line: the one `[memory]` line per reflection holds counts
//!   and reason tokens.
//!
//! Invariants:
//! - Every write is one store insert (atomic); a reflection stopped half-way keeps what it
//!   wrote and has written nothing partial.
//! - A `supersedes` is kept only when its target is live and in the scope written to, so the
//!   store's "hidden when superseded" rule never hides a record of another scope; a narrowed
//!   correction drops it, and the record it meant to retire stands.
//! - A malformed model answer writes nothing and becomes one friction entry.
//!
//! It depends on `authz-core` and the store's `MemoryStore` trait (agent memory's records; the
//! store's `InMemoryStore` is something else); `dispatch` wires it into runs.
//!
//! | module | what it holds |
//! | --- | --- |
//! | `scopes` | `RunScopes` (a request's org, user, channel, repo, from the request itself), `reflection_actor(principal, run)`: the principal holding the run's channel and repo as memberships, no action added, `all` left alone, the principal not mutated |
//! | `block` | `ContextBlock`: the live records newest first, within `context_max_records` (the store's limit) and `context_max_chars` (the first record that does not fit ends the block); `render()`, `counts()` per scope kind |
//! | `extract` | `Candidate` / `Audience` / `Extraction`; `rules` (`remember:` org, `remember for this channel:`, `remember for this repo:`, `note for me:` user, `forget that …`); the `model` extractor's prompt (the request and the remembered records, never the agent's answer) and its strict parser (`deny_unknown_fields`, a bounded number of facts of bounded length, one line each, ids well-formed; anything else fails the whole answer, its error naming line and column, never the text); `ModelCall`, which dispatch implements over a configured back end |
//! | `write_gate` | `route`: the audience resolved to one of the run's scopes, `authorize(reflection_actor, memory:write, memory-scope{scope, origin})`, an org candidate the origin may not write narrowed (dm → user, else channel; private or unknown → channel, else user; never repo), any other denial dropped with its reason token; `may_retire` (a forget or a supersedes: the write, and `repo:write` for a shared record); `Report` (counts and tokens only) |
//! | `lib.rs` | `Memory`: `context_block` (never calls the decision; `with_decide` lets a test spy on it), `reflect` (extract → gate → one insert per write; a `supersedes` kept only when its target is live, in the scope written to and `may_retire` allows it, dropped on a narrowed write; `forget that` forgets matching records `may_retire` allows; one `[memory]` line when anything narrowed or dropped) |
//!
//! Tests: `tests/memory/reflection.rs` (the gate and the seam: `the_context_block_never_calls_authorize_and_reflection_does`),
//! `tests/memory/gate_props.rs` (never wider than the origin allows); `cargo xtask tidy` checks that
//! this crate calls `authorize` only through its seam.
//!
//! Decisions: a user scope's records are shown to the extraction model only from a dm origin
//! (elsewhere it could copy a fact kept out of the room into a candidate for that room); a
//! `forget that …` is never narrowed (it would forget something else): denied, it is dropped.

mod block;
mod extract;
mod scopes;
mod write_gate;

use std::sync::Arc;
use std::time::Duration;

use authz_core::{Actor, ChannelVisibility, RunId, ScopeKey, authorize};
use store::{MemoryRecord, MemoryStore, NewMemory, StoreError, Timestamp};

pub use block::ContextBlock;
pub use extract::{
    Audience, Candidate, Extraction, MAX_FACT_CHARS, MAX_FACTS, ModelCall, Transcript,
    model_prompt, parse_model_answer, rules,
};
pub use scopes::{RunScopes, reflection_actor};
pub use write_gate::{Decide, Report, Route, may_retire, memory_write, route};

/// Which extractor proposes facts after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExtractorKind {
    /// Explicit statements (`remember: …`); needs no model.
    #[default]
    Rules,
    /// A configured agent's back end asked for strict JSON.
    Model,
}

/// `[memory]`: the bounds of the context block and of a reflection.
#[derive(Debug, Clone)]
pub struct MemorySettings {
    pub extractor: ExtractorKind,
    pub context_max_records: u32,
    pub context_max_chars: usize,
    pub reflection_timeout: Duration,
}

impl Default for MemorySettings {
    fn default() -> Self {
        MemorySettings {
            extractor: ExtractorKind::Rules,
            context_max_records: 20,
            context_max_chars: 4_000,
            reflection_timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("the memory store failed: {0}")]
    Store(#[from] StoreError),
    #[error("the model extractor is configured but no model was given to it")]
    NoModel,
}

impl MemoryError {
    /// A short token for log lines (never the database's free text).
    pub fn token(&self) -> String {
        match self {
            MemoryError::Store(e) => format!("store:{}", e.token()),
            MemoryError::NoModel => "no-model".into(),
        }
    }
}

/// How many of a run's live records a `forget that …` looks through (the store's page bound).
const FORGET_SEARCH: u32 = 1_000;

/// The friction kind a failed extraction is recorded under.
pub const EXTRACTION_FRICTION: &str = "memory_extraction";

/// What one run is reflected from.
pub struct ReflectionInput<'a> {
    pub run_id: &'a RunId,
    pub scopes: &'a RunScopes,
    /// The run's stamped channel visibility (`unknown` when unstamped).
    pub origin: ChannelVisibility,
    /// The run's principal, as the surface resolved it.
    pub principal: &'a Actor,
    pub transcript: &'a Transcript,
}

/// What a reflection did: its report, the friction to record on the run, and what the person
/// who asked should be told (a fact they asked to keep that could not be kept, and why).
#[derive(Debug, Clone, Default)]
pub struct Reflection {
    pub report: Report,
    pub friction: Option<(String, String)>,
    pub notes: Vec<String>,
}

/// What the person is told of a fact they asked to keep that had nowhere to go: a repo's with
/// no repo, a channel's with no channel. A fact the gate refused is not explained (its reason
/// is the policy's, on the log only).
fn not_kept(audience: Audience, reason: &str) -> Option<String> {
    match (audience, reason) {
        (Audience::Repo, "no-scope") => Some(
            "not kept: `remember for this repo:` needs a run in a repo, and this one is in none; say it in a run in the repo (`ask --repo owner/name`, or start the request with `in owner/name:`)".to_owned(),
        ),
        (Audience::Channel, "no-scope") => Some(
            "not kept: `remember for this channel:` needs a run in a channel, and this one is in none".to_owned(),
        ),
        _ => None,
    }
}

/// Memory over a store: the context block and reflection.
#[derive(Clone)]
pub struct Memory {
    store: Arc<dyn MemoryStore>,
    settings: MemorySettings,
    decide: Arc<Decide>,
    model: Option<Arc<dyn ModelCall>>,
    now: fn() -> Timestamp,
}

impl Memory {
    pub fn new(store: Arc<dyn MemoryStore>, settings: MemorySettings) -> Self {
        Memory {
            store,
            settings,
            decide: Arc::new(authorize),
            model: None,
            now: store::wall_clock,
        }
    }

    /// The decision the write gate asks; tests pass a spy around `authorize`.
    pub fn with_decide(mut self, decide: Arc<Decide>) -> Self {
        self.decide = decide;
        self
    }

    /// The model the `model` extractor asks.
    pub fn with_model(mut self, model: Arc<dyn ModelCall>) -> Self {
        self.model = Some(model);
        self
    }

    pub fn with_clock(mut self, now: fn() -> Timestamp) -> Self {
        self.now = now;
        self
    }

    pub fn settings(&self) -> &MemorySettings {
        &self.settings
    }

    /// `memory_context_block(request)`: the live records of the request's scopes, newest
    /// first, within `context_max_records` and `context_max_chars`. Not policy-gated.
    pub async fn context_block(&self, scopes: &RunScopes) -> Result<ContextBlock, MemoryError> {
        let records = self
            .store
            .memory_in_scopes(&scopes.keys(), self.settings.context_max_records)
            .await?;
        Ok(ContextBlock::bounded(
            records,
            self.settings.context_max_chars,
        ))
    }

    /// Extracts candidates from a finished run and writes what the gate allows. Store
    /// failures end the reflection; what was written before stays.
    pub async fn reflect(&self, input: &ReflectionInput<'_>) -> Result<Reflection, MemoryError> {
        let extraction = self.extract(input).await?;
        let mut out = Reflection::default();
        if let Some(why) = extraction.failure {
            out.friction = Some((EXTRACTION_FRICTION.to_owned(), why));
            return Ok(out);
        }
        let actor = reflection_actor(input.principal, input.scopes);
        for candidate in extraction.candidates() {
            if let Some(note) = self
                .write(input, &actor, candidate, &mut out.report)
                .await?
            {
                out.notes.push(note);
            }
        }
        if !extraction.forget.is_empty() {
            // One read of the run's records serves every `forget that …` of the reflection.
            let records = self
                .store
                .memory_in_scopes(&input.scopes.keys(), FORGET_SEARCH)
                .await?;
            for text in &extraction.forget {
                self.forget(input, &actor, &records, text, &mut out.report)
                    .await?;
            }
        }
        if out.report.is_notable() {
            tracing::info!(target: "memory", run = %input.run_id, "[memory] {}", out.report);
        }
        Ok(out)
    }

    async fn extract(&self, input: &ReflectionInput<'_>) -> Result<Extraction, MemoryError> {
        match self.settings.extractor {
            ExtractorKind::Rules => Ok(rules(input.transcript)),
            ExtractorKind::Model => {
                let model = self.model.as_ref().ok_or(MemoryError::NoModel)?;
                let shown = self.shown_to_model(input).await?;
                let prompt = model_prompt(input.transcript, &shown);
                Ok(match model.complete(input.run_id, prompt).await {
                    Err(e) => Extraction::failed(format!("the extraction model failed: {e}")),
                    Ok(answer) => parse_model_answer(&answer).unwrap_or_else(|e| {
                        Extraction::failed(format!("the extraction model's answer was {e}"))
                    }),
                })
            }
        }
    }

    /// The records the extraction model sees (so a correction can name one). A user scope's
    /// records are shown only from a dm origin: elsewhere the model could copy a fact kept
    /// out of the room into a candidate for that room.
    async fn shown_to_model(
        &self,
        input: &ReflectionInput<'_>,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        let keys: Vec<ScopeKey> = input
            .scopes
            .keys()
            .into_iter()
            .filter(|k| !matches!(k, ScopeKey::User(_)) || input.origin == ChannelVisibility::Dm)
            .collect();
        Ok(self
            .store
            .memory_in_scopes(&keys, self.settings.context_max_records)
            .await?)
    }

    async fn write(
        &self,
        input: &ReflectionInput<'_>,
        actor: &Actor,
        candidate: &Candidate,
        report: &mut Report,
    ) -> Result<Option<String>, MemoryError> {
        if candidate.text.chars().count() > MAX_FACT_CHARS {
            report.drop("dropped", "too-long");
            return Ok(Some(format!(
                "not kept: a fact to remember is at most {MAX_FACT_CHARS} characters"
            )));
        }
        let routed = route(
            candidate,
            input.scopes,
            input.origin,
            actor,
            self.decide.as_ref(),
        );
        let (scope, narrowed) = match routed {
            Route::Drop(reason) => {
                report.drop("dropped", reason);
                return Ok(not_kept(candidate.audience, reason));
            }
            Route::Write { scope, narrowed } => (scope, narrowed),
        };
        let supersedes = match &candidate.supersedes {
            _ if narrowed => {
                report.narrow(scope.kind());
                None
            }
            None => None,
            Some(target) => {
                self.kept_supersedes(input, actor, target, &scope, report)
                    .await?
            }
        };
        self.store
            .add_memory(NewMemory {
                scope,
                text: candidate.text.clone(),
                supersedes,
                source_run: Some(input.run_id.clone()),
                created_at: (self.now)(),
            })
            .await?;
        report.written += 1;
        Ok(None)
    }

    /// A correction's target, kept only when it is live, in the scope written to, and one the
    /// reflection actor may retire (a shared record needs `repo:write`). A dropped target
    /// never stops the fact itself being written.
    async fn kept_supersedes(
        &self,
        input: &ReflectionInput<'_>,
        actor: &Actor,
        target: &RunId,
        scope: &ScopeKey,
        report: &mut Report,
    ) -> Result<Option<RunId>, MemoryError> {
        match self.store.get_memory(target).await? {
            Some(r) if r.forgotten_at.is_none() && &r.scope == scope => {
                match may_retire(scope, input.origin, actor, self.decide.as_ref()) {
                    Ok(()) => Ok(Some(r.id)),
                    Err(reason) => {
                        report.drop("supersedes dropped", reason);
                        Ok(None)
                    }
                }
            }
            Some(r) if r.forgotten_at.is_none() => {
                report.drop("supersedes dropped", "other-scope");
                Ok(None)
            }
            _ => {
                report.drop("supersedes dropped", "not-live");
                Ok(None)
            }
        }
    }

    /// `forget that …`: the run's live `records` whose text is the one named (ignoring case,
    /// surrounding space and a final full stop), each forgotten when the reflection actor may
    /// write its scope.
    async fn forget(
        &self,
        input: &ReflectionInput<'_>,
        actor: &Actor,
        records: &[MemoryRecord],
        text: &str,
        report: &mut Report,
    ) -> Result<(), MemoryError> {
        let wanted = normalized(text);
        let matching: Vec<&MemoryRecord> = records
            .iter()
            .filter(|r| normalized(&r.text) == wanted)
            .collect();
        if matching.is_empty() {
            report.drop("forget dropped", "no-match");
        }
        for r in matching {
            match may_retire(&r.scope, input.origin, actor, self.decide.as_ref()) {
                Ok(()) => {
                    if self.store.forget_memory(&r.id, (self.now)()).await? {
                        report.forgotten += 1;
                    }
                }
                Err(reason) => report.drop("forget dropped", reason),
            }
        }
        Ok(())
    }
}

fn normalized(text: &str) -> String {
    text.trim().trim_end_matches('.').trim().to_lowercase()
}
