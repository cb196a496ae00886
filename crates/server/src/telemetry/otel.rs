//! OTLP export with denied traces dropped whole: [`DeniedTraceFilter`] holds each trace's
//! ended spans until its root ends, then hands the trace to the exporting processor — or
//! drops it, children included, when any span of it carries `denied = true` (as an attribute
//! or on an event). Bounded: past the limits a trace is dropped, never exported unchecked.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry::{Context, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};

use super::span_log::DENIED_FIELD;

/// Open traces held at once; a new trace past this is dropped (counted in `dropped`).
const MAX_OPEN_TRACES: usize = 10_000;
/// Spans held per open trace; past this the trace is dropped.
const MAX_SPANS_PER_TRACE: usize = 512;

/// Wraps the exporting processor; see the module doc.
#[derive(Debug)]
pub struct DeniedTraceFilter<P> {
    inner: P,
    open: Mutex<HashMap<TraceId, Held>>,
}

#[derive(Debug, Default)]
struct Held {
    spans: Vec<SpanData>,
    denied: bool,
    overflowed: bool,
}

fn is_denied(span: &SpanData) -> bool {
    let marks = |kv: &opentelemetry::KeyValue| {
        kv.key.as_str() == DENIED_FIELD && matches!(kv.value, Value::Bool(true))
    };
    span.attributes.iter().any(marks) || span.events.iter().any(|e| e.attributes.iter().any(marks))
}

impl<P: SpanProcessor> DeniedTraceFilter<P> {
    pub fn new(inner: P) -> Self {
        DeniedTraceFilter {
            inner,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The trace to hand on, once `span` (its root) has ended and nothing marked it denied.
    fn settle(&self, span: SpanData) -> Option<Vec<SpanData>> {
        let trace = span.span_context.trace_id();
        let root = span.parent_span_id == SpanId::INVALID;
        let mut open = self.open.lock().ok()?;
        if !root {
            if !open.contains_key(&trace) && open.len() >= MAX_OPEN_TRACES {
                return None;
            }
            let held = open.entry(trace).or_default();
            held.denied |= is_denied(&span);
            if held.spans.len() >= MAX_SPANS_PER_TRACE {
                held.overflowed = true;
            } else if !held.denied {
                held.spans.push(span);
            }
            return None;
        }
        let held = open.remove(&trace).unwrap_or_default();
        if held.denied || held.overflowed || is_denied(&span) {
            return None;
        }
        let mut spans = held.spans;
        spans.push(span);
        Some(spans)
    }
}

impl<P: SpanProcessor> SpanProcessor for DeniedTraceFilter<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if let Some(trace) = self.settle(span) {
            for span in trace {
                self.inner.on_end(span);
            }
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        // Traces whose root never ended are dropped, never exported unchecked.
        if let Ok(mut open) = self.open.lock() {
            open.clear();
        }
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// How often a collector that does not take the spans is warned about.
pub const EXPORT_WARNING_EVERY: Duration = Duration::from_secs(60);

/// Wraps the OTLP exporter: an export that fails (the collector refused, timed out, or
/// answered an error) is warned about on the log, at most once per [`EXPORT_WARNING_EVERY`],
/// never silently. The line names the endpoint and what happened, never the collector's own
/// words. Spans of a failed export are dropped (the exporter's own retries are its own).
#[derive(Debug)]
pub struct WarnOnFailure<E> {
    inner: E,
    endpoint: String,
    every: Duration,
    last: Mutex<Option<std::time::Instant>>,
}

impl<E> WarnOnFailure<E> {
    pub fn new(inner: E, endpoint: &str, every: Duration) -> Self {
        WarnOnFailure {
            inner,
            endpoint: endpoint.to_owned(),
            every,
            last: Mutex::new(None),
        }
    }

    /// Warns unless a warning went out less than `every` ago.
    fn warn(&self, what: &str) {
        let now = std::time::Instant::now();
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        if last.is_some_and(|at| now.duration_since(at) < self.every) {
            return;
        }
        *last = Some(now);
        tracing::warn!(
            endpoint = %self.endpoint,
            "[telemetry] the OTLP export to {} {what}; its spans were dropped (said at most once a minute while it lasts)",
            self.endpoint
        );
    }
}

impl<E: opentelemetry_sdk::trace::SpanExporter> opentelemetry_sdk::trace::SpanExporter
    for WarnOnFailure<E>
{
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => {}
            Err(opentelemetry_sdk::error::OTelSdkError::Timeout(_)) => {
                self.warn("timed out");
            }
            Err(_) => self.warn("failed: the collector refused it or did not answer"),
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}
