//! The broker's tools over MCP, on the run's own socket only (never the public `/mcp`): any
//! agent whose own tools are switched off (Codex, Gemini CLI, goose, …) calls `read_file`,
//! `write_file`, `shell`, `http_fetch`, `git`, `restrict_self` and `widen_self` here, and each
//! call passes the run's gate exactly as a call of the `openai` loop does.
//!
//! The streamable HTTP transport, answering every request with one JSON message (no
//! server-sent stream; `GET` is 405). One message per request; a batch is refused.

use serde_json::{Value, json};

use super::Shared;
use crate::tools::ToolCall;

/// The protocol versions this endpoint speaks, newest first.
const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The answer to one message; `None` for a notification (202, no body).
pub(super) async fn answer(body: &[u8], shared: &Shared) -> Option<Value> {
    let message: Value = match serde_json::from_slice(body) {
        Ok(Value::Object(m)) => Value::Object(m),
        Ok(_) => {
            return Some(error(
                &Value::Null,
                -32600,
                "one JSON-RPC message per request; batches are not taken",
            ));
        }
        Err(e) => return Some(error(&Value::Null, -32700, &format!("not JSON: {e}"))),
    };
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(id) = message.get("id").cloned() else {
        // A notification (initialized, cancelled) or a response: nothing to say.
        return None;
    };
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    Some(match method {
        "initialize" => {
            let asked = params.get("protocolVersion").and_then(Value::as_str);
            let version = asked
                .filter(|v| VERSIONS.contains(v))
                .unwrap_or(VERSIONS[0]);
            result(
                &id,
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": "switchboard-broker", "version": env!("CARGO_PKG_VERSION")},
                    "instructions": shared.gate.instructions(),
                }),
            )
        }
        "ping" => result(&id, json!({})),
        "tools/list" => result(&id, json!({"tools": tools(shared)})),
        "tools/call" => call(&id, &params, shared).await,
        "" => error(&id, -32600, "a request names its method"),
        other => error(&id, -32601, &format!("{other} is not offered here")),
    })
}

/// The gate's tools, as MCP tools.
fn tools(shared: &Shared) -> Vec<Value> {
    shared
        .gate
        .definitions()
        .iter()
        .filter_map(|d| {
            let f = d.get("function")?;
            Some(json!({
                "name": f.get("name")?,
                "description": f.get("description").cloned().unwrap_or(Value::Null),
                "inputSchema": f.get("parameters").cloned().unwrap_or(json!({"type": "object"})),
            }))
        })
        .collect()
}

async fn call(id: &Value, params: &Value, shared: &Shared) -> Value {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return error(id, -32602, "tools/call names its tool");
    };
    let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
    let call = ToolCall {
        id: format!("mcp-{id}"),
        name: name.to_owned(),
        arguments: arguments.to_string(),
    };
    // Not under the run's one-question turn: the call runs here, and a long `shell` would
    // hold every connection's decision.
    let rises = shared.gate.taint_rises();
    let text = shared.gate.call(&call, &shared.sink).await;
    // A result that raised the run's taint closes every connection decided before it.
    if shared.gate.taint_rises() != rises {
        shared.epoch.send_modify(|epoch| *epoch += 1);
    }
    let refused = text.starts_with("refused:");
    result(
        id,
        json!({"content": [{"type": "text", "text": text}], "isError": refused}),
    )
}
