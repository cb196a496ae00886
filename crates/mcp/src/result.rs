//! A registry reply as an MCP tool result: the one shape every tool answers in.

use commands::{Reply, ReplyKind};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

/// A reply as a tool result: its text as content, its data as `structuredContent` (always an
/// object), and `isError` for anything but ok.
pub(crate) fn tool_result(reply: Reply) -> CallToolResult {
    let Reply { kind, text, data } = reply;
    let content = vec![ContentBlock::text(text)];
    let mut result = if kind == ReplyKind::Ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    result.structured_content = Some(as_object(data));
    result
}

/// `structuredContent` must be an object (2025-06-18+): an object stays as it is; anything
/// else is wrapped as `{"value": …}`.
fn as_object(data: Value) -> Value {
    match data {
        Value::Object(_) => data,
        Value::Null => json!({}),
        other => json!({ "value": other }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_content_is_always_an_object() {
        assert_eq!(as_object(json!({"a": 1})), json!({"a": 1}));
        assert_eq!(as_object(json!([1, 2])), json!({"value": [1, 2]}));
        assert_eq!(as_object(json!("x")), json!({"value": "x"}));
        assert_eq!(as_object(Value::Null), json!({}));
    }

    #[test]
    fn a_refusal_is_a_tool_error_with_the_registry_text() {
        let r = tool_result(Reply::not_found("run x"));
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.structured_content.unwrap()["code"], json!("not_found"));
        let ok = tool_result(Reply::ok("fine", json!({"runs": []})));
        assert_eq!(ok.is_error, Some(false));
    }
}
