//! Logs and traces: human or JSON log lines on stderr (`RUST_LOG` sets the filter), audit
//! lines (`target: "audit"`) as their own stream (stderr, or `[telemetry] audit_file`), the
//! span log behind `GET /admin/trace/log`, and, with `[telemetry] otlp_endpoint`, spans
//! exported over OTLP/HTTP. Without an endpoint nothing leaves the process.
//!
//! A denied trace (a request that ended 401 or 403, or any request a refusal answered) is
//! never written to the span log and never exported: both sinks hold a trace until its root
//! closes and drop a denied one whole. What a line never holds (a token, a query string, a
//! body, a free-text remote error) is kept out where spans and events are made: root spans
//! carry the surface, the route (a path, never a query), the actor id and the outcome.

mod otel;
mod request;
mod route;
mod span_log;

use std::fs::OpenOptions;
use std::sync::Mutex;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanExporter,
};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::filter::{EnvFilter, FilterFn};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry};

pub use otel::{DeniedTraceFilter, EXPORT_WARNING_EVERY, WarnOnFailure};
pub use request::request_span;
pub use route::trace_log_route;
pub use span_log::{DENIED_FIELD, SpanLine, SpanLog, SpanLogLayer};

use crate::config::TelemetryConfig;

/// rmcp's own events never reach the log or the export, whatever `RUST_LOG` says: they
/// quote requests (an unknown method's name, a rejected header's value), and neither holds
/// request text. Its spans still pass (a call's trace keeps its children). The gate and the
/// tools log what happened to a request, in tokens.
pub fn silenced() -> FilterFn<fn(&Metadata<'_>) -> bool> {
    fn passes(m: &Metadata<'_>) -> bool {
        let rmcp = m.target() == "rmcp" || m.target().starts_with("rmcp::");
        !(rmcp && m.is_event())
    }
    FilterFn::new(passes)
}

/// The audit stream's target.
pub const AUDIT_TARGET: &str = "audit";

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "[telemetry] audit_file {path}: cannot open it for appending: {reason} (create its directory, or fix the permissions)"
    )]
    AuditFile { path: String, reason: String },
    #[error("[telemetry] otlp_endpoint: the OTLP exporter could not be built: {0}")]
    Exporter(String),
    #[error("a tracing subscriber is already installed in this process")]
    AlreadySet,
}

/// What `init` set up: the span log to serve, and the exporter to flush at exit.
pub struct Telemetry {
    span_log: SpanLog,
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    pub fn span_log(&self) -> SpanLog {
        self.span_log.clone()
    }

    /// Exports what is pending and stops the exporter (bounded by its timeout).
    pub fn shutdown(&self) {
        // The exporter's error text may quote the collector; the line says only that it failed.
        if let Some(p) = &self.provider
            && p.shutdown().is_err()
        {
            tracing::warn!(
                "the span exporter did not shut down cleanly; pending spans may be lost"
            );
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The log filter: `RUST_LOG`, else `default_level`.
pub fn env_filter(default_level: &str) -> EnvFilter {
    let directives = std::env::var("RUST_LOG").unwrap_or_else(|_| default_level.to_owned());
    filter_of(&directives)
}

/// A filter of `directives` (`RUST_LOG` syntax; a malformed one is skipped) in which the
/// denied marker always passes, so no filter lets a denied trace through unmarked.
pub fn filter_of(directives: &str) -> EnvFilter {
    let mut filter = EnvFilter::builder().parse_lossy(directives);
    if let Ok(d) = format!("{}=warn", commands::DENIED_TARGET).parse() {
        filter = filter.add_directive(d);
    }
    filter
}

/// The exporter pipeline for `endpoint` (`…/v1/traces` appended): OTLP/HTTP protobuf, in
/// batches from a thread of its own, denied traces dropped before they reach it.
pub fn otlp_provider(
    endpoint: &str,
    service_name: &str,
) -> Result<SdkTracerProvider, TelemetryError> {
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{endpoint}/v1/traces"))
        .with_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    Ok(provider_with(
        otel::WarnOnFailure::new(exporter, endpoint, otel::EXPORT_WARNING_EVERY),
        service_name,
        Duration::from_secs(2),
    ))
}

/// A provider exporting through `exporter` in batches every `delay` (tests pass an
/// in-memory exporter).
pub fn provider_with<E: SpanExporter + 'static>(
    exporter: E,
    service_name: &str,
    delay: Duration,
) -> SdkTracerProvider {
    let batch = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_scheduled_delay(delay)
                .build(),
        )
        .build();
    SdkTracerProvider::builder()
        .with_span_processor(DeniedTraceFilter::new(batch))
        .with_resource(
            Resource::builder()
                .with_service_name(service_name.to_owned())
                .build(),
        )
        .build()
}

fn is_audit(m: &Metadata<'_>) -> bool {
    m.target() == AUDIT_TARGET
}

/// The subscriber: filter, log lines to `log_writer`, audit lines to `audit` (else with the
/// log lines), the span log, and the exporter when there is one.
pub fn subscriber<W>(
    config: &TelemetryConfig,
    filter: EnvFilter,
    log_writer: W,
    audit: Option<std::fs::File>,
    span_log: &SpanLog,
    provider: Option<&SdkTracerProvider>,
) -> impl Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let separate_audit = audit.is_some();
    let log_lines = FilterFn::new(move |m: &Metadata<'_>| {
        m.target() != commands::DENIED_TARGET && !(separate_audit && is_audit(m))
    });
    // A JSON line carries the fields of the spans it is in (the request's trace id, surface,
    // route and actor), as a human line shows them before its message.
    let logs: Box<dyn Layer<Registry> + Send + Sync> = if config.json_logs {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_writer(log_writer)
            .log_internal_errors(false)
            .with_filter(log_lines)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(log_writer)
            .with_ansi(false)
            .log_internal_errors(false)
            .with_filter(log_lines)
            .boxed()
    };
    // The audit file is in the log's format: JSON lines with `log_format = "json"`.
    let json = config.json_logs;
    let audit_lines = audit.map(|file| {
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(Mutex::new(file))
            .with_ansi(false)
            .log_internal_errors(false);
        if json {
            // Spans pass too, so the layer records the request's fields each line carries.
            layer
                .json()
                .with_current_span(true)
                .with_span_list(true)
                .with_filter(FilterFn::new(|m: &Metadata<'_>| {
                    !m.is_event() || is_audit(m)
                }))
                .boxed()
        } else {
            layer.with_filter(FilterFn::new(is_audit)).boxed()
        }
    });
    // Both write lines: one list, so each layer's type is the registry's.
    let lines: Vec<Box<dyn Layer<Registry> + Send + Sync>> =
        std::iter::once(logs).chain(audit_lines).collect();
    let otel = provider.map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("switchboard"))
            .with_location(false)
    });
    tracing_subscriber::registry()
        .with(lines)
        .with(span_log.layer())
        .with(otel)
        .with(filter)
        .with(silenced())
}

/// Installs the process's subscriber from `[telemetry]`: logs to stderr, `default_level`
/// unless `RUST_LOG` is set.
pub fn init(config: &TelemetryConfig, default_level: &str) -> Result<Telemetry, TelemetryError> {
    let audit = match &config.audit_file {
        Some(path) => Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| TelemetryError::AuditFile {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?,
        ),
        None => None,
    };
    let provider = match &config.otlp_endpoint {
        Some(endpoint) => Some(otlp_provider(endpoint, &config.service_name)?),
        None => None,
    };
    let span_log = SpanLog::new(config.span_log_capacity);
    let sub = subscriber(
        config,
        env_filter(default_level),
        std::io::stderr,
        audit,
        &span_log,
        provider.as_ref(),
    );
    tracing::subscriber::set_global_default(sub).map_err(|_| TelemetryError::AlreadySet)?;
    Ok(Telemetry { span_log, provider })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A request's actor, named by its surface and again by the registry (and, for a
    /// schedule, by the scheduler), is printed once on a log line.
    #[test]
    fn a_span_line_names_its_actor_once() {
        use tracing_subscriber::layer::SubscriberExt;
        let buf = Buf::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::registry()
            .with(super::filter_of("info"))
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(move || writer.clone()),
            );
        tracing::subscriber::with_default(subscriber, || {
            let span = commands::trace::request_span("schedule", "nightly");
            commands::trace::name_actor(&span, "schedule:nightly");
            span.in_scope(|| {
                commands::trace::name_actor(&tracing::Span::current(), "schedule:nightly");
                commands::trace::name_actor(&tracing::Span::current(), "schedule:nightly");
                tracing::info!("fired");
            });
        });
        let out = String::from_utf8(buf.0.lock().map(|b| b.clone()).unwrap_or_default())
            .unwrap_or_default();
        assert_eq!(out.matches("actor=").count(), 1, "{out}");
        assert!(out.contains("actor=\"schedule:nightly\""), "{out}");
    }

    /// Even a `RUST_LOG` that asks for rmcp's traces gets none of its events; its spans and
    /// the rest of the directives hold.
    #[test]
    fn rmcp_never_reaches_the_log() {
        use tracing_subscriber::layer::SubscriberExt;
        let buf = Buf::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::registry()
            .with(super::filter_of("info,rmcp=trace"))
            .with(super::silenced())
            .with(tracing_subscriber::fmt::layer().with_writer(move || writer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "rmcp::service", "unknown method request-text-marker");
            tracing::error!(target: "rmcp", "another request-text-marker");
            let span = tracing::info_span!(target: "rmcp::service", "serve_inner");
            span.in_scope(|| tracing::info!(target: "switchboard", "an operator's line"));
        });
        let out = String::from_utf8(buf.0.lock().map(|b| b.clone()).unwrap_or_default())
            .unwrap_or_default();
        assert!(!out.contains("request-text-marker"), "{out}");
        assert!(out.contains("an operator's line"), "{out}");
        assert!(
            out.contains("serve_inner"),
            "rmcp's spans still pass: {out}"
        );
    }
}
