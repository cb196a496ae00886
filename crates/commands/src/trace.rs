//! What every surface's tracing shares: the root span of one request, and the denied marker
//! every refusal emits. A trace holding the marker is dropped whole by the span sinks (the
//! span log, the exporter), so a denied request leaves only its audit line.
//!
//! A root span carries the surface, the route (a command or a path, never a query), the
//! actor id (never a token) and the outcome. Nothing here records a body.

use tracing::Span;
use tracing::field::Empty;

use crate::{Caller, ReplyKind};

/// The target of the denied marker. Log output leaves it out; span sinks read it.
pub const DENIED_TARGET: &str = "switchboard::denied";

/// A trace's id on its root span, so every log line inside it (human or JSON) names its
/// trace: this process's start (ms) and pid, and a count (`19a2c4e1f0-4d2a-17`), never reused
/// by one process. It finds one trace's lines in a log; it is not OpenTelemetry's trace id.
pub fn new_trace_id() -> String {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static PROCESS: OnceLock<String> = OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let process = PROCESS.get_or_init(|| {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        format!("{started:x}-{:x}", std::process::id())
    });
    format!("{process}-{}", COUNT.fetch_add(1, Ordering::Relaxed) + 1)
}

/// A new root span for one request on `surface` (`cli`, `schedule`, `http`, `mcp`, …).
pub fn request_span(surface: &str, route: &str) -> Span {
    tracing::info_span!(
        parent: None,
        "request",
        trace_id = %new_trace_id(),
        surface,
        route,
        actor = Empty,
        status = Empty,
        outcome = Empty,
        denied = Empty,
    )
}

/// Marks the current trace denied: a refusal, whatever status it is answered with.
pub fn mark_denied() {
    tracing::warn!(target: DENIED_TARGET, denied = true, "refused");
}

/// Names the caller on the current span (the request's root span when called from a
/// surface's handler; a no-op on a span without an `actor` field).
pub fn record_actor(caller: &Caller) {
    name_actor(&Span::current(), caller.actor.id.as_str());
}

/// Marks a span whose actor is named.
struct ActorNamed;

/// Records `actor` on `span` once: a surface names its caller and the registry does again,
/// and a log line would print each record (`actor=a actor=a`). Without the registry of
/// spans to keep the mark in, it records each time.
pub fn name_actor(span: &Span, actor: &str) {
    use tracing_subscriber::registry::LookupSpan;
    let first = span
        .with_subscriber(|(id, dispatch)| {
            let Some(found) = dispatch
                .downcast_ref::<tracing_subscriber::Registry>()
                .and_then(|registry| registry.span(id))
            else {
                return true;
            };
            let mut extensions = found.extensions_mut();
            if extensions.get_mut::<ActorNamed>().is_some() {
                return false;
            }
            extensions.insert(ActorNamed);
            true
        })
        .unwrap_or(true);
    if first {
        span.record("actor", actor);
    }
}

/// A reply kind as a root span's outcome.
pub fn outcome_of(kind: ReplyKind) -> &'static str {
    match kind {
        ReplyKind::Ok => "ok",
        ReplyKind::NotFound => "not_found",
        ReplyKind::Unauthorized => "unauthorized",
        ReplyKind::Conflict => "conflict",
        ReplyKind::Usage => "usage",
        ReplyKind::UnknownCommand => "unknown_command",
        ReplyKind::Unavailable => "unavailable",
        ReplyKind::Busy => "busy",
        ReplyKind::Failed => "failed",
    }
}
