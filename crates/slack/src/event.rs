//! What an Events API body (or a Socket Mode envelope's payload) asks for, read after its
//! signature held: a URL check, a request for Switchboard, or something to ignore (and why).

use authz_core::{ActorId, ChannelId};
use serde::Deserialize;

use crate::text;

/// An outer body, as much of it as this surface reads. Unknown fields are ignored; an
/// unknown `type` is ignored as a whole.
#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    challenge: Option<String>,
    event_id: Option<String>,
    event: Option<Event>,
}

#[derive(Debug, Default, Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    subtype: Option<String>,
    user: Option<String>,
    bot_id: Option<String>,
    text: Option<String>,
    channel: Option<String>,
    channel_type: Option<String>,
    ts: Option<String>,
    thread_ts: Option<String>,
    edited: Option<serde_json::Value>,
    /// The sender's own workspace, on an event from a shared (Slack Connect) channel.
    user_team: Option<String>,
    /// The workspace of the message, where `user_team` is absent.
    team: Option<String>,
}

/// A request for Switchboard from a person in Slack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackRequest {
    pub event_id: String,
    /// `slack:U…` or `slack:W…`: the actor the request proves.
    pub actor: ActorId,
    /// `slack:C…`, `slack:G…` or `slack:D…`: where it was said.
    pub channel: ChannelId,
    /// The thread the reply goes into: the message's `thread_ts`, else its `ts`.
    pub thread_ts: String,
    /// The text with the bot's mention stripped.
    pub text: String,
    /// How it arrived: a mention, a DM, or a message in a thread (a follow-up candidate).
    pub via: Via,
    /// The sender's workspace as the event names it (`user_team`, else `team`); absent on
    /// an event of the bot's own workspace that names none.
    pub team: Option<String>,
}

impl SlackRequest {
    /// The Slack user id (`U…`), as the Web API takes it.
    pub fn user(&self) -> &str {
        slack_part(self.actor.as_str())
    }

    /// The Slack conversation id (`C…`), as the Web API takes it.
    pub fn conversation(&self) -> &str {
        slack_part(self.channel.as_str())
    }

    /// Whether it was said in the requester's own DM with the bot (a `D…` conversation holds
    /// the bot and one person): the one place a reply to them alone can be a plain message.
    pub fn in_own_dm(&self) -> bool {
        self.conversation().starts_with('D')
    }

    /// Whether the sender belongs to another workspace than `bot_team` (Slack Connect).
    pub fn is_from_outside(&self, bot_team: &str) -> bool {
        self.team.as_deref().is_some_and(|t| t != bot_team)
    }
}

fn slack_part(id: &str) -> &str {
    id.strip_prefix("slack:").unwrap_or(id)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Mention,
    DirectMessage,
    /// A channel message in a thread; a request only if the bot answered that thread.
    ThreadMessage,
}

/// What one body asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// `url_verification`: answer with the challenge.
    Challenge(String),
    Request(SlackRequest),
    /// Acknowledged and dropped; the reason is for the debug log.
    Ignore(&'static str),
}

/// Why a body could not be read at all (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// Where the JSON went wrong; never serde's message, which can quote the body.
    #[error("the body is not a JSON object with a \"type\" (line {line} column {column})")]
    Json { line: usize, column: usize },
    #[error("an event_callback needs an event_id and an event")]
    Incomplete,
    /// An id longer than Slack's, or of other characters: never looked up in the store.
    #[error(
        "the event_id is not a Slack event id (at most {MAX_EVENT_ID} letters, digits, `-` and `_`)"
    )]
    BadEventId,
}

/// The longest event id taken; Slack's are about a dozen characters.
pub const MAX_EVENT_ID: usize = 64;

fn is_event_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_EVENT_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Reads a body whose signature already held. `bot_user` is the bot's own user id.
pub fn read(body: &[u8], bot_user: &str) -> Result<Inbound, Malformed> {
    let envelope: Envelope = serde_json::from_slice(body).map_err(|e| Malformed::Json {
        line: e.line(),
        column: e.column(),
    })?;
    match envelope.kind.as_str() {
        "url_verification" => Ok(envelope.challenge.map_or(
            Inbound::Ignore("url_verification without a challenge"),
            Inbound::Challenge,
        )),
        "event_callback" => {
            let (Some(event_id), Some(event)) = (envelope.event_id, envelope.event) else {
                return Err(Malformed::Incomplete);
            };
            if !is_event_id(&event_id) {
                return Err(Malformed::BadEventId);
            }
            Ok(classify(event_id, event, bot_user))
        }
        _ => Ok(Inbound::Ignore("not an event callback")),
    }
}

fn classify(event_id: String, e: Event, bot_user: &str) -> Inbound {
    let via = match (e.kind.as_str(), e.channel_type.as_deref()) {
        ("app_mention", _) => Via::Mention,
        ("message", Some("im")) => Via::DirectMessage,
        ("message", Some("channel" | "group")) if e.thread_ts.is_some() => Via::ThreadMessage,
        ("message", _) => return Inbound::Ignore("a channel message outside a thread"),
        _ => return Inbound::Ignore("an event type this surface does not take"),
    };
    if e.subtype.is_some() {
        // edits, deletes, joins, bot_message, …: never requests (no loops).
        return Inbound::Ignore("a message subtype");
    }
    if e.bot_id.is_some() || e.edited.is_some() {
        return Inbound::Ignore("a bot's message or an edit");
    }
    let Some(user) = e.user else {
        return Inbound::Ignore("no user");
    };
    if user == bot_user {
        return Inbound::Ignore("the bot's own message");
    }
    // The one rule for Slack user ids is ActorId's.
    let Ok(actor) = ActorId::parse(&format!("slack:{user}")) else {
        return Inbound::Ignore("not a Slack user id");
    };
    let raw = e.text.unwrap_or_default();
    // A mention in a thread arrives twice (app_mention and message); the mention serves it.
    if via == Via::ThreadMessage && text::mentions(&raw, bot_user) {
        return Inbound::Ignore("a mention, served by its app_mention");
    }
    let channel = e
        .channel
        .filter(|c| is_conversation_id(c))
        .and_then(|c| ChannelId::parse(&format!("slack:{c}")).ok());
    let (Some(channel), Some(ts)) = (channel, e.ts) else {
        return Inbound::Ignore("no channel or ts");
    };
    let text = text::strip_mention(&raw, bot_user);
    if text.is_empty() {
        return Inbound::Ignore("no text");
    }
    let team = e.user_team.or(e.team).filter(|t| !t.is_empty());
    Inbound::Request(SlackRequest {
        event_id,
        actor,
        channel,
        thread_ts: e.thread_ts.unwrap_or(ts),
        text,
        via,
        team,
    })
}

/// A Slack conversation id: `C…`, `G…` or `D…`, then upper-case letters and digits (the
/// directory tells channels apart by that first letter).
fn is_conversation_id(s: &str) -> bool {
    s.len() > 1
        && s.len() <= 32
        && (s.starts_with('C') || s.starts_with('G') || s.starts_with('D'))
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn callback(event: serde_json::Value) -> Vec<u8> {
        json!({"type": "event_callback", "event_id": "Ev1", "event": event})
            .to_string()
            .into_bytes()
    }

    fn request(event: serde_json::Value) -> SlackRequest {
        match read(&callback(event), "UBOT").unwrap() {
            Inbound::Request(r) => r,
            other => panic!("{other:?}"),
        }
    }

    fn ignored(event: serde_json::Value) -> &'static str {
        match read(&callback(event), "UBOT").unwrap() {
            Inbound::Ignore(why) => why,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mentions_and_dms_are_requests_in_their_thread() {
        let r = request(json!({"type": "app_mention", "user": "U1", "channel": "C1",
            "ts": "1.2", "text": "<@UBOT> runs list"}));
        assert_eq!((r.user(), r.conversation()), ("U1", "C1"));
        assert_eq!(
            (r.actor.as_str(), r.channel.as_str()),
            ("slack:U1", "slack:C1")
        );
        assert_eq!(
            (r.thread_ts.as_str(), r.text.as_str()),
            ("1.2", "runs list")
        );
        assert_eq!(r.via, Via::Mention);
        let r = request(
            json!({"type": "message", "channel_type": "im", "user": "U1",
            "channel": "D1", "ts": "3.4", "thread_ts": "1.0", "text": "hello"}),
        );
        assert_eq!((r.thread_ts.as_str(), r.via), ("1.0", Via::DirectMessage));
        let r = request(
            json!({"type": "message", "channel_type": "channel", "user": "U1",
            "channel": "C1", "ts": "3.4", "thread_ts": "1.0", "text": "and then?"}),
        );
        assert_eq!(r.via, Via::ThreadMessage);
    }

    #[test]
    fn loops_edits_and_noise_are_ignored() {
        let subtype = "a message subtype";
        let bot = "a bot's message or an edit";
        for (event, why) in [
            (
                json!({"type": "message", "channel_type": "im", "subtype": "message_changed", "channel": "D1", "ts": "1"}),
                subtype,
            ),
            (
                json!({"type": "message", "channel_type": "im", "subtype": "message_deleted", "channel": "D1", "ts": "1"}),
                subtype,
            ),
            (
                json!({"type": "message", "channel_type": "channel", "subtype": "channel_join", "user": "U1", "channel": "C1", "ts": "1", "thread_ts": "1"}),
                subtype,
            ),
            (
                json!({"type": "message", "channel_type": "im", "subtype": "bot_message", "bot_id": "B1", "channel": "D1", "ts": "1", "text": "hi"}),
                subtype,
            ),
            (
                json!({"type": "message", "channel_type": "im", "bot_id": "B1", "user": "U1", "channel": "D1", "ts": "1", "text": "hi"}),
                bot,
            ),
            (
                json!({"type": "app_mention", "bot_id": "B2", "user": "U1", "channel": "C1", "ts": "1", "text": "<@UBOT> hi"}),
                bot,
            ),
            (
                json!({"type": "message", "channel_type": "im", "user": "UBOT", "channel": "D1", "ts": "1", "text": "hi"}),
                "the bot's own message",
            ),
            (
                json!({"type": "app_mention", "user": "UBOT", "channel": "C1", "ts": "1", "text": "<@UBOT> hi"}),
                "the bot's own message",
            ),
            (
                json!({"type": "app_mention", "user": "U1", "channel": "C1", "ts": "1", "text": "<@UBOT> hi", "edited": {"ts": "2"}}),
                bot,
            ),
            (
                json!({"type": "message", "channel_type": "channel", "user": "U1", "channel": "C1", "ts": "1", "text": "chatter"}),
                "a channel message outside a thread",
            ),
            (
                json!({"type": "message", "channel_type": "channel", "user": "U1", "channel": "C1", "ts": "2", "thread_ts": "1", "text": "<@UBOT> again"}),
                "a mention, served by its app_mention",
            ),
            (
                json!({"type": "reaction_added", "user": "U1"}),
                "an event type this surface does not take",
            ),
            (
                json!({"type": "app_mention", "user": "U1", "channel": "C1", "ts": "1", "text": "<@UBOT>"}),
                "no text",
            ),
            (
                json!({"type": "app_mention", "user": "not-a-user", "channel": "C1", "ts": "1", "text": "<@UBOT> x"}),
                "not a Slack user id",
            ),
            (
                json!({"type": "app_mention", "user": "U1", "channel": "#general", "ts": "1", "text": "<@UBOT> x"}),
                "no channel or ts",
            ),
            (
                json!({"type": "app_mention", "channel": "C1", "ts": "1", "text": "<@UBOT> x"}),
                "no user",
            ),
        ] {
            assert_eq!(ignored(event.clone()), why, "{event}");
        }
    }

    #[test]
    fn the_senders_workspace_is_its_user_team_else_its_team() {
        let base = json!({"type": "app_mention", "user": "U1", "channel": "C1", "ts": "1", "text": "<@UBOT> x"});
        let with = |extra: serde_json::Value| {
            let mut e = base.clone();
            for (k, v) in extra.as_object().unwrap() {
                e[k] = v.clone();
            }
            request(e)
        };
        assert_eq!(request(base.clone()).team, None);
        assert!(!request(base.clone()).is_from_outside("T1"));
        let r = with(json!({"team": "T1"}));
        assert!(!r.is_from_outside("T1"));
        let r = with(json!({"team": "T1", "user_team": "T9"}));
        assert_eq!(r.team.as_deref(), Some("T9"));
        assert!(r.is_from_outside("T1"), "user_team wins over team");
        assert!(with(json!({"team": "T9"})).is_from_outside("T1"));
        assert!(!with(json!({"user_team": "T1", "team": "T9"})).is_from_outside("T1"));
    }

    #[test]
    fn malformed_bodies_are_refused_and_other_types_ignored() {
        assert_eq!(
            read(br#"{"type":"url_verification","challenge":"abc"}"#, "UBOT").unwrap(),
            Inbound::Challenge("abc".into())
        );
        for body in [&b"not json"[..], b"[]", b"{\"no\":\"type\"}", b"{\"type\":"] {
            assert!(
                matches!(read(body, "UBOT"), Err(Malformed::Json { .. })),
                "{body:?}"
            );
        }
        // serde's own message would quote the value; the refusal says only where.
        let leak = br#"{"type":"event_callback","event_id":"E1","event":"xoxb-leak"}"#;
        let refused = read(leak, "UBOT").unwrap_err().to_string();
        assert!(
            refused.contains("line 1") && !refused.contains("xoxb-leak"),
            "{refused}"
        );
        assert_eq!(
            read(
                br#"{"type":"event_callback","event":{"type":"app_mention"}}"#,
                "UBOT"
            ),
            Err(Malformed::Incomplete)
        );
        assert!(matches!(
            read(br#"{"type":"app_rate_limited"}"#, "UBOT").unwrap(),
            Inbound::Ignore(_)
        ));
        let event =
            json!({"type": "app_mention", "user": "U1", "channel": "C1", "ts": "1", "text": "x"});
        for id in [
            "x".repeat(MAX_EVENT_ID + 1),
            "Ev 1".into(),
            "Ev/1".into(),
            String::new(),
            "Év1".into(),
        ] {
            let body =
                json!({"type": "event_callback", "event_id": id, "event": event}).to_string();
            assert_eq!(
                read(body.as_bytes(), "UBOT"),
                Err(Malformed::BadEventId),
                "{id:?}"
            );
        }
    }
}
