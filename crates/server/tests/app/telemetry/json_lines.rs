//! JSON logs: every line JSON, the audit file's too, each with its request span's fields.

use super::*;

/// With `log_format = "json"` every line is JSON, the audit file's included, and each carries
/// the fields of the request span it was written in: its trace id, surface, route and actor.
#[tokio::test]
async fn json_lines_carry_the_request_span_and_the_audit_file_is_json_too() {
    let dir = tempfile::tempdir().unwrap();
    let audit_path = dir.path().join("audit.log");
    let config = TelemetryConfig {
        audit_file: Some(audit_path.clone()),
        json_logs: true,
        ..TelemetryConfig::default()
    };
    let sinks = a_refusal_and_a_run(dir.path(), &config).await;
    let json_lines = |text: &str| -> Vec<serde_json::Value> {
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    };
    // The request span a line was written in, by name, from the line's span list.
    let request_of = |line: &serde_json::Value| -> serde_json::Value {
        line["spans"]
            .as_array()
            .and_then(|spans| spans.iter().find(|s| s["name"] == "request"))
            .cloned()
            .unwrap_or(serde_json::Value::Null)
    };
    let audit = json_lines(&std::fs::read_to_string(&audit_path).unwrap());
    assert_eq!(audit.len(), 1, "{audit:?}");
    let deny = &audit[0];
    assert!(
        deny["fields"]["message"]
            .as_str()
            .unwrap()
            .starts_with("[authz] deny actor=http:ops action=schedule:exec"),
        "{deny}"
    );
    let request = request_of(deny);
    assert_eq!(request["actor"], "http:ops", "{deny}");
    assert_eq!(request["route"], "/ingress", "{deny}");
    assert_eq!(request["surface"], "http", "{deny}");
    assert!(
        request["trace_id"].as_str().is_some_and(|t| !t.is_empty()),
        "{deny}"
    );
    let log = json_lines(&sinks.log.text());
    let started = log
        .iter()
        .find(|l| l["fields"]["message"] == "run started")
        .unwrap_or_else(|| panic!("{log:?}"));
    let request = request_of(started);
    assert_eq!(request["actor"], "http:ops", "{started}");
    assert_eq!(request["route"], "/ingress", "{started}");
    assert!(
        request["trace_id"].as_str().is_some_and(|t| !t.is_empty()),
        "{started}"
    );
}
