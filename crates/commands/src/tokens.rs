//! The bearer token map, shared by every surface that takes bearer tokens (the HTTP ingress,
//! the MCP server, the span-log route): a token, or its `sha256:<hex>`, → exactly
//! `{ subject, channel? }`. Each surface names its own actor from the subject (`http:<subject>`
//! on the ingress, `mcp:<subject>` on MCP). Any other field of an entry is ignored and can
//! never widen anything; the `channel` is where the token's runs are recorded, never a grant,
//! and must be a machine channel of a token surface (`http:…` or `mcp:…`).

use authz_core::{ActorId, ChannelId, ChannelVisibility, Namespace, Surface, static_visibility};
use serde_json::Value;
use store::TokenHash;

/// What a token proves: a subject, and where its runs go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenEntry {
    subject: String,
    channel: Option<ChannelId>,
}

impl TokenEntry {
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// `<surface>:<subject>` on a surface that takes bearer tokens.
    pub fn actor(&self, surface: Surface) -> Option<ActorId> {
        surface
            .takes_bearer_tokens()
            .then(|| ActorId::parse(&format!("{}:{}", surface.as_str(), self.subject)).ok())
            .flatten()
    }

    /// The token's `channel`, else `<surface>:<subject>`.
    pub fn run_channel(&self, surface: Surface) -> Option<ChannelId> {
        match &self.channel {
            Some(c) => Some(c.clone()),
            None => ChannelId::parse(self.actor(surface)?.as_str()).ok(),
        }
    }
}

/// Why a token map cannot be used. Messages name the entry by position or by subject, never
/// the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenMapError {
    #[error("the token map is not JSON: {0}")]
    NotJson(String),
    #[error("the token map must be a JSON object of token -> {{\"subject\": …, \"channel\": …}}")]
    NotObject,
    #[error("token map entry #{index}: {problem}")]
    Entry { index: usize, problem: String },
    #[error(
        "token map entry for subject {subject:?}: channel {channel:?} is not a machine channel of a token surface; use http:<name> or mcp:<name> (a token's channel is where its runs are recorded, and a Slack or Access channel would stamp them as that channel's)"
    )]
    Channel { subject: String, channel: String },
}

#[derive(Clone)]
pub struct TokenMap {
    entries: Vec<(TokenHash, TokenEntry)>,
}

impl std::fmt::Debug for TokenMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenMap({} tokens)", self.entries.len())
    }
}

/// A subject is the part after `http:` / `mcp:` of an actor id: the same rule on both.
fn check_subject(subject: &str) -> Result<(), String> {
    match ActorId::parse(&format!("http:{subject}")) {
        Ok(id) if id.namespace() == Namespace::Http => Ok(()),
        Ok(_) => Err(format!("subject {subject:?} is not a plain name")),
        Err(e) => Err(format!("subject {subject:?}: {e}")),
    }
}

/// A token's channel: a machine channel of a token surface.
fn is_token_channel(channel: &ChannelId) -> bool {
    Surface::of_channel(channel).is_some_and(Surface::takes_bearer_tokens)
        && static_visibility(channel) == ChannelVisibility::Machine
}

impl TokenMap {
    /// Parses `{"<token>|sha256:<hex>": {"subject": "ops-bot", "channel": "http:ops"}, …}`.
    pub fn parse(json: &str) -> Result<Self, TokenMapError> {
        let v: Value =
            serde_json::from_str(json).map_err(|e| TokenMapError::NotJson(position(&e)))?;
        let Value::Object(map) = v else {
            return Err(TokenMapError::NotObject);
        };
        let mut entries = Vec::with_capacity(map.len());
        for (index, (key, value)) in map.iter().enumerate() {
            let index = index + 1;
            let fault = |problem: String| TokenMapError::Entry { index, problem };
            let hash = match key.strip_prefix("sha256:") {
                Some(hex) => TokenHash::from_hex(hex)
                    .map_err(|_| fault("sha256: must be followed by 64 hex digits".into()))?,
                None if key.len() < 16 => {
                    return Err(fault(
                        "the token is shorter than 16 characters; use a long random token".into(),
                    ));
                }
                None => TokenHash::of(key),
            };
            let subject = value
                .get("subject")
                .and_then(Value::as_str)
                .ok_or_else(|| fault("needs \"subject\": a string such as \"ops-bot\"".into()))?;
            check_subject(subject).map_err(fault)?;
            let channel = match value.get("channel") {
                None | Some(Value::Null) => None,
                Some(Value::String(c)) => {
                    let channel =
                        ChannelId::parse(c).map_err(|e| fault(format!("channel: {e}")))?;
                    if !is_token_channel(&channel) {
                        return Err(TokenMapError::Channel {
                            subject: subject.to_owned(),
                            channel: c.clone(),
                        });
                    }
                    Some(channel)
                }
                Some(_) => {
                    return Err(fault(
                        "\"channel\" must be a string such as \"http:ops\"".into(),
                    ));
                }
            };
            if entries
                .iter()
                .any(|(h, _): &(TokenHash, TokenEntry)| h.ct_eq(&hash))
            {
                return Err(fault("the same token appears twice".into()));
            }
            entries.push((
                hash,
                TokenEntry {
                    subject: subject.to_owned(),
                    channel,
                },
            ));
        }
        Ok(TokenMap { entries })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of a presented token. Hashes it once and compares against every entry in
    /// constant time, without stopping at a match.
    pub fn lookup(&self, presented: &str) -> Option<&TokenEntry> {
        let hash = TokenHash::of(presented);
        let mut found = None;
        for (h, entry) in &self.entries {
            if h.ct_eq(&hash) {
                found = Some(entry);
            }
        }
        found
    }

    /// The plaintext tokens of a map's JSON (not the `sha256:` ones), for redaction from agent
    /// text. The JSON parsed already; this only lists its keys.
    pub fn plaintext_tokens(json: &str) -> Vec<String> {
        serde_json::from_str::<serde_json::Map<String, Value>>(json)
            .map(|m| {
                m.into_iter()
                    .map(|(k, _)| k)
                    .filter(|k| !k.starts_with("sha256:"))
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn position(e: &serde_json::Error) -> String {
    format!("line {} column {}", e.line(), e.column())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "tok-0123456789abcdef";

    #[test]
    fn plaintext_and_hashed_keys_resolve_per_surface_and_extra_fields_are_ignored() {
        let hashed = TokenHash::of("tok-hashed-0123456789").to_hex();
        let json = format!(
            r#"{{"{TOKEN}": {{"subject": "ops-bot", "channel": "http:ops", "grants": "all", "admin": true}},
                "sha256:{hashed}": {{"subject": "ci"}}}}"#
        );
        let map = TokenMap::parse(&json).unwrap();
        let e = map.lookup(TOKEN).unwrap();
        assert_eq!(e.actor(Surface::Http).unwrap().as_str(), "http:ops-bot");
        assert_eq!(e.actor(Surface::Mcp).unwrap().as_str(), "mcp:ops-bot");
        assert_eq!(e.actor(Surface::Slack), None, "only token surfaces");
        assert_eq!(e.run_channel(Surface::Mcp).unwrap().as_str(), "http:ops");
        let ci = map.lookup("tok-hashed-0123456789").unwrap();
        assert_eq!(ci.run_channel(Surface::Http).unwrap().as_str(), "http:ci");
        assert_eq!(ci.run_channel(Surface::Mcp).unwrap().as_str(), "mcp:ci");
        assert!(map.lookup("tok-0123456789abcdeX").is_none());
        assert!(map.lookup("").is_none());
        assert_eq!(
            format!("{map:?}"),
            "TokenMap(2 tokens)",
            "Debug never shows a token"
        );
        assert_eq!(TokenMap::plaintext_tokens(&json), vec![TOKEN.to_owned()]);
    }

    #[test]
    fn malformed_maps_name_the_entry_and_never_the_token() {
        for (json, want) in [
            ("[1]", "must be a JSON object"),
            ("{", "not JSON: line 1 column 1"),
            (
                r#"{"short": {"subject": "a"}}"#,
                "entry #1: the token is shorter",
            ),
            (
                r#"{"sha256:abc": {"subject": "a"}}"#,
                "entry #1: sha256: must be followed",
            ),
            (
                r#"{"tok-0123456789abcdef": {}}"#,
                "entry #1: needs \"subject\"",
            ),
            (
                r#"{"tok-0123456789abcdef": {"subject": "has space"}}"#,
                "entry #1: subject",
            ),
            (
                r#"{"tok-0123456789abcdef": {"subject": "svc:x"}}"#,
                "entry #1: subject",
            ),
            (
                r#"{"tok-0123456789abcdef": {"subject": "a", "channel": 3}}"#,
                "entry #1: \"channel\" must be a string",
            ),
            (
                r#"{"tok-0123456789abcdef": {"subject": "a", "channel": "nope"}}"#,
                "entry #1: channel:",
            ),
        ] {
            let e = TokenMap::parse(json).unwrap_err().to_string();
            assert!(e.contains(want), "{json}: {e}");
            assert!(!e.contains("tok-0123456789abcdef"), "{e}");
        }
        let twice = format!(
            r#"{{"{TOKEN}": {{"subject": "a"}}, "sha256:{}": {{"subject": "b"}}}}"#,
            TokenHash::of(TOKEN).to_hex()
        );
        assert!(
            TokenMap::parse(&twice)
                .unwrap_err()
                .to_string()
                .contains("appears twice")
        );
    }

    /// A token's channel decides its runs' stamp: a Slack, Access, CLI or schedule channel
    /// would record them as that channel's (a private `slack:G…` one, say).
    #[test]
    fn a_token_channel_must_be_a_machine_channel_of_a_token_surface() {
        for bad in [
            "slack:G123",
            "slack:C1",
            "slack:D1",
            "access:alice",
            "access:svc:x",
            "cli:local",
            "schedule:nightly",
            "web:x",
        ] {
            let json = format!(r#"{{"{TOKEN}": {{"subject": "ops-bot", "channel": "{bad}"}}}}"#);
            let e = TokenMap::parse(&json).unwrap_err();
            assert!(
                matches!(&e, TokenMapError::Channel { subject, channel } if subject == "ops-bot" && channel == bad),
                "{bad}: {e:?}"
            );
            let text = e.to_string();
            assert!(
                text.contains("\"ops-bot\"") && !text.contains(TOKEN),
                "{text}"
            );
        }
        for good in ["http:ops", "mcp:ci", "http:billing.team"] {
            let json = format!(r#"{{"{TOKEN}": {{"subject": "ops-bot", "channel": "{good}"}}}}"#);
            assert!(TokenMap::parse(&json).is_ok(), "{good}");
        }
    }
}
