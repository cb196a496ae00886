//! A command's answer: text for text surfaces, data for structured ones, and its kind, which
//! surfaces map to a status or an exit code.

use serde::Serialize;
use serde_json::Value;

use crate::reply_texts;

/// What kind of answer a reply is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyKind {
    Ok,
    NotFound,
    Unauthorized,
    /// A conflict with the resource's state (a finished run asked to stop).
    Conflict,
    Usage,
    UnknownCommand,
    /// The part that would do this is not running here.
    Unavailable,
    /// A limit is full; nothing was started. Try again shortly.
    Busy,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reply {
    pub kind: ReplyKind,
    pub text: String,
    pub data: Value,
}

impl Reply {
    pub fn ok(text: impl Into<String>, data: Value) -> Self {
        Reply {
            kind: ReplyKind::Ok,
            text: text.into(),
            data,
        }
    }

    /// A reply whose data is `{"error": text, "code": kind}`.
    pub fn of(kind: ReplyKind, text: impl Into<String>) -> Self {
        let text = text.into();
        let data = serde_json::json!({ "error": text, "code": kind });
        Reply { kind, text, data }
    }

    /// The not_found reply: identical for a missing and a denied resource.
    pub fn not_found(what: &str) -> Self {
        let text = reply_texts::not_found(what);
        Reply {
            kind: ReplyKind::NotFound,
            data: serde_json::json!({"error": text, "code": "not_found"}),
            text,
        }
    }

    /// A 🚫 with its text; the data says no more than `unauthorized` and whom to ask (the
    /// ids the text names), never the reason.
    pub(crate) fn unauthorized(text: String, ask: &[authz_core::ActorId]) -> Self {
        let ask: Vec<String> = ask.iter().map(ToString::to_string).collect();
        Reply {
            kind: ReplyKind::Unauthorized,
            text,
            data: serde_json::json!({"error": "unauthorized", "code": "unauthorized", "ask": ask}),
        }
    }

    /// The actor ids the reply asks its reader to turn to (a 🚫's admins), for a surface
    /// that mentions people.
    pub fn asks(&self) -> Vec<&str> {
        self.data
            .get("ask")
            .and_then(serde_json::Value::as_array)
            .map(|ids| ids.iter().filter_map(serde_json::Value::as_str).collect())
            .unwrap_or_default()
    }
}
