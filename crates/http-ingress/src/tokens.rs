//! The token map: a bearer token (or its `sha256:<hex>`) → exactly `{ subject, channel? }`.
//! Any other field of an entry is ignored and can never widen anything; the `channel` is where
//! the token's runs are recorded, never a grant.

use authz_core::{ActorId, ChannelId};
use serde_json::Value;
use store::TokenHash;

/// What a token proves: the actor `http:<subject>` and the channel its runs go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenEntry {
    pub actor: ActorId,
    /// The token's `channel`, or `http:<subject>` without one.
    pub run_channel: ChannelId,
}

/// Why a token map cannot be used. Messages name the entry by position, never the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenMapError {
    #[error("the token map is not JSON: {0}")]
    NotJson(String),
    #[error("the token map must be a JSON object of token -> {{\"subject\": …, \"channel\": …}}")]
    NotObject,
    #[error("token map entry #{index}: {problem}")]
    Entry { index: usize, problem: String },
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
            let actor: ActorId = format!("http:{subject}")
                .parse()
                .map_err(|e| fault(format!("subject {subject:?}: {e}")))?;
            let run_channel = match value.get("channel") {
                None | Some(Value::Null) => ChannelId::parse(actor.as_str()),
                Some(Value::String(c)) => ChannelId::parse(c),
                Some(_) => {
                    return Err(fault(
                        "\"channel\" must be a string such as \"http:ops\"".into(),
                    ));
                }
            }
            .map_err(|e| fault(format!("channel: {e}")))?;
            if entries
                .iter()
                .any(|(h, _): &(TokenHash, TokenEntry)| h.ct_eq(&hash))
            {
                return Err(fault("the same token appears twice".into()));
            }
            entries.push((hash, TokenEntry { actor, run_channel }));
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
}

fn position(e: &serde_json::Error) -> String {
    format!("line {} column {}", e.line(), e.column())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "tok-0123456789abcdef";

    #[test]
    fn plaintext_and_hashed_keys_resolve_and_extra_fields_are_ignored() {
        let hashed = TokenHash::of("tok-hashed-0123456789").to_hex();
        let json = format!(
            r#"{{"{TOKEN}": {{"subject": "ops-bot", "channel": "http:ops", "grants": "all", "admin": true}},
                "sha256:{hashed}": {{"subject": "ci"}}}}"#
        );
        let map = TokenMap::parse(&json).unwrap();
        let e = map.lookup(TOKEN).unwrap();
        assert_eq!(e.actor.as_str(), "http:ops-bot");
        assert_eq!(e.run_channel.as_str(), "http:ops");
        let ci = map.lookup("tok-hashed-0123456789").unwrap();
        assert_eq!(
            ci.run_channel.as_str(),
            "http:ci",
            "no channel: http:<subject>"
        );
        assert!(map.lookup("tok-0123456789abcdeX").is_none());
        assert!(map.lookup("").is_none());
        assert_eq!(
            format!("{map:?}"),
            "TokenMap(2 tokens)",
            "Debug never shows a token"
        );
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
}
