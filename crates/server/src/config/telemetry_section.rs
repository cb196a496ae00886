//! `[telemetry]`: the raw section, its typed config and its checks.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::numbers::Positive;
use super::urls::base_url_fault;
use super::{LoadError, Text};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

/// `[telemetry]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySection {
    pub log_format: Option<LogFormat>,
    pub otlp_endpoint: Option<Spanned<String>>,
    pub span_log_capacity: Option<Positive>,
    pub audit_file: Option<PathBuf>,
    pub service_name: Option<Spanned<String>>,
}

/// `[telemetry]`.
#[derive(Debug, Clone)]
pub struct TelemetryConfig {
    /// `human` (default) or `json` log lines.
    pub json_logs: bool,
    /// The OTLP/HTTP collector's base URL (`…/v1/traces` is appended); `None`: no export,
    /// and no network.
    pub otlp_endpoint: Option<String>,
    /// How many span lines `GET /admin/trace/log` keeps.
    pub span_log_capacity: usize,
    /// Audit lines go here (appended) instead of stderr.
    pub audit_file: Option<PathBuf>,
    /// `service.name` on exported spans.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            json_logs: false,
            otlp_endpoint: None,
            span_log_capacity: 1000,
            audit_file: None,
            service_name: "switchboard".to_owned(),
        }
    }
}

/// `[telemetry]`: the endpoint must be an http(s) URL with a host; a capacity above 0.
pub(super) fn telemetry_config(
    t: &Text<'_>,
    section: &TelemetrySection,
) -> Result<TelemetryConfig, LoadError> {
    let mut c = TelemetryConfig {
        json_logs: section.log_format == Some(LogFormat::Json),
        audit_file: section.audit_file.clone(),
        ..TelemetryConfig::default()
    };
    if let Some(endpoint) = &section.otlp_endpoint {
        let url = endpoint.get_ref().trim_end_matches('/');
        if let Some(why) = base_url_fault(url) {
            return Err(t.at(
                endpoint.span().start,
                format!("must be the collector's http(s) base URL, like \"http://127.0.0.1:4318\" (/v1/traces is appended); here {why}"),
            ));
        }
        c.otlp_endpoint = Some(url.to_owned());
    }
    if let Some(n) = section.span_log_capacity {
        c.span_log_capacity = n.usize();
    }
    if let Some(name) = &section.service_name {
        if name.get_ref().trim().is_empty() {
            return Err(t.at(name.span().start, "must not be empty"));
        }
        c.service_name = name.get_ref().clone();
    }
    Ok(c)
}
