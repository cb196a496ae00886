//! The span log: each trace's span lines are held until its root span closes, then kept in a
//! bounded ring (read by `GET /admin/trace/log`) — or, when the trace was denied, dropped
//! whole, children included, so the audit line is the only record of a denied request.
//!
//! A trace is denied when any span in it carries `denied = true`, as a field (the request
//! span of a 401/403) or on an event (the marker `commands` emits with every refusal).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The field that marks a trace denied.
pub const DENIED_FIELD: &str = "denied";
/// A trace keeps at most this many span lines while it is open; past it the trace's later
/// spans are not logged (the root still is).
const MAX_PENDING_PER_TRACE: usize = 512;

/// One closed span, as `GET /admin/trace/log` serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpanLine {
    /// When the span closed, µs since the epoch.
    pub at: i64,
    /// The trace's number in this process (1, 2, …; never reused): every span of one trace
    /// shares it.
    pub trace: u64,
    /// The span's id in this process.
    pub span: u64,
    pub parent: Option<u64>,
    pub name: &'static str,
    pub target: &'static str,
    pub duration_us: u64,
    pub fields: BTreeMap<&'static str, String>,
}

/// The ring of span lines: a cheap handle, shared by the layer and the route.
#[derive(Clone)]
pub struct SpanLog {
    ring: Arc<Mutex<Ring>>,
}

struct Ring {
    lines: VecDeque<SpanLine>,
    capacity: usize,
}

impl SpanLog {
    pub fn new(capacity: usize) -> Self {
        SpanLog {
            ring: Arc::new(Mutex::new(Ring {
                lines: VecDeque::with_capacity(capacity.min(4096)),
                capacity: capacity.max(1),
            })),
        }
    }

    /// The lines that closed after `since` (µs), oldest first.
    pub fn since(&self, since: i64) -> Vec<SpanLine> {
        match self.ring.lock() {
            Ok(r) => r.lines.iter().filter(|l| l.at > since).cloned().collect(),
            Err(_) => Vec::new(),
        }
    }

    fn keep(&self, lines: Vec<SpanLine>) {
        if let Ok(mut r) = self.ring.lock() {
            for line in lines {
                if r.lines.len() >= r.capacity {
                    r.lines.pop_front();
                }
                r.lines.push_back(line);
            }
        }
    }

    /// The layer that feeds this log.
    pub fn layer(&self) -> SpanLogLayer {
        SpanLogLayer {
            log: self.clone(),
            traces: AtomicU64::new(0),
        }
    }
}

/// Collects span lines per trace and hands allowed traces to the [`SpanLog`].
pub struct SpanLogLayer {
    log: SpanLog,
    /// The last trace number given to a root.
    traces: AtomicU64,
}

/// What the layer keeps on each span.
struct SpanState {
    started: Instant,
    /// The trace's number (the root's, for a child).
    trace: u64,
    fields: BTreeMap<&'static str, String>,
    /// Set on the root only: the trace was denied.
    denied: bool,
    /// Set on the root only: the lines of its closed descendants.
    pending: Vec<SpanLine>,
}

#[derive(Default)]
struct Fields {
    values: BTreeMap<&'static str, String>,
    denied: bool,
}

impl Visit for Fields {
    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == DENIED_FIELD && value {
            self.denied = true;
        }
        self.values.insert(field.name(), value.to_string());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.values.insert(field.name(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.values.insert(field.name(), format!("{value:?}"));
    }
}

fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl SpanLogLayer {
    /// Marks the trace `id` belongs to as denied.
    fn deny_trace<S>(id: &Id, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let Some(root) = ctx.span(id).and_then(|s| s.scope().from_root().next()) else {
            return;
        };
        if let Some(state) = root.extensions_mut().get_mut::<SpanState>() {
            state.denied = true;
            state.pending.clear();
        }
    }
}

impl<S> Layer<S> for SpanLogLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            // A child takes its parent's number (the parent opened first); a root a new one.
            let parent_trace = span
                .parent()
                .and_then(|p| p.extensions().get::<SpanState>().map(|s| s.trace));
            let trace =
                parent_trace.unwrap_or_else(|| self.traces.fetch_add(1, Ordering::Relaxed) + 1);
            span.extensions_mut().insert(SpanState {
                started: Instant::now(),
                trace,
                fields: fields.values,
                denied: false,
                pending: Vec::new(),
            });
        }
        if fields.denied {
            Self::deny_trace(id, &ctx);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        values.record(&mut fields);
        if let Some(span) = ctx.span(id)
            && let Some(state) = span.extensions_mut().get_mut::<SpanState>()
        {
            state.fields.extend(fields.values);
        }
        if fields.denied {
            Self::deny_trace(id, &ctx);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.denied
            && let Some(span) = ctx.event_span(event)
        {
            Self::deny_trace(&span.id(), &ctx);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(state) = span.extensions_mut().remove::<SpanState>() else {
            return;
        };
        let root = span.scope().from_root().next();
        let line = SpanLine {
            at: now_micros(),
            trace: state.trace,
            span: id.into_u64(),
            parent: span.parent().map(|p| p.id().into_u64()),
            name: span.name(),
            target: span.metadata().target(),
            duration_us: u64::try_from(state.started.elapsed().as_micros()).unwrap_or(u64::MAX),
            fields: state.fields,
        };
        match root {
            // A child: held on its root until the root closes.
            Some(root) if root.id() != id => {
                if let Some(root_state) = root.extensions_mut().get_mut::<SpanState>()
                    && !root_state.denied
                    && root_state.pending.len() < MAX_PENDING_PER_TRACE
                {
                    root_state.pending.push(line);
                }
            }
            // The root: its trace is kept, or dropped whole.
            _ => {
                if state.denied {
                    return;
                }
                let mut lines = state.pending;
                lines.push(line);
                self.log.keep(lines);
            }
        }
    }
}
