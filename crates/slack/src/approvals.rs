//! Approve / Deny in Slack (docs/broker.md, "Who answers an ask"). While a run a
//! Slack request started is live, each tool call waiting for its principal's answer is posted
//! into the run's thread with two buttons. A click arrives signed at `POST /slack/interactions`
//! (or over Socket Mode) and counts only when the clicker is the run's principal: the desk
//! (commands' `ApprovalDesk`) decides that, by identity, as it does for the run page.

use std::collections::HashSet;

use authz_core::{ActorId, RunId};
use commands::{Answerer, ApprovalError, AskedWatch, RunOutcome, StartedRun};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{SlackRequest, SlackSurface, text};

/// The Approve button's `action_id`.
pub const APPROVE: &str = "switchboard_approve";
/// The Deny button's `action_id`.
pub const DENY: &str = "switchboard_deny";
/// The most characters of a call's arguments in one preformatted block; a longer call is shown
/// whole across several (the broker asks only about a call it can show whole).
const BLOCK_CHARS: usize = 2_500;
/// The longest approval id taken from a button's value (ours are 43 characters).
const MAX_APPROVAL_ID: usize = 128;

/// A person's click on one of our buttons, read from a signed payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Click {
    /// `slack:U…`: who clicked.
    pub clicker: ActorId,
    pub approve: bool,
    pub run: RunId,
    pub approval: String,
    /// Where the buttons' message is, to update it (absent for a click on an ephemeral one).
    pub message: Option<MessageRef>,
}

/// A message in a conversation, as the Web API names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRef {
    pub channel: String,
    pub ts: String,
    /// The thread it is in, for an ephemeral answer beside it.
    pub thread_ts: Option<String>,
}

/// What one interaction payload is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interaction {
    Click(Click),
    /// Acknowledged and dropped (another kind of interaction, another app's button); the
    /// reason is for the debug log.
    Ignore(&'static str),
}

/// Why a signed interaction body could not be read (400). Never quotes the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadInteraction {
    #[error("the body is not a form with one `payload` field")]
    NoPayload,
    #[error("the payload is not a JSON object with a \"type\" (line {line} column {column})")]
    Json { line: usize, column: usize },
    #[error("a block_actions payload needs a user id and one action")]
    Incomplete,
    #[error("the button's value is not <run id>/<approval id>")]
    BadValue,
    #[error("the user id is not a Slack user id")]
    BadUser,
}

#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "type")]
    kind: String,
    user: Option<User>,
    #[serde(default)]
    actions: Vec<ActionTaken>,
    container: Option<Container>,
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    thread_ts: Option<String>,
}

#[derive(Deserialize)]
struct User {
    id: String,
}

#[derive(Deserialize)]
struct ActionTaken {
    action_id: String,
    value: Option<String>,
}

#[derive(Deserialize)]
struct Container {
    message_ts: Option<String>,
    channel_id: Option<String>,
    thread_ts: Option<String>,
    #[serde(default)]
    is_ephemeral: bool,
}

/// Reads an Interactivity request body: a form whose `payload` field is the JSON.
pub fn read_form(body: &[u8]) -> Result<Interaction, BadInteraction> {
    let mut payloads = form_urlencoded::parse(body).filter(|(k, _)| k == "payload");
    let (Some((_, payload)), None) = (payloads.next(), payloads.next()) else {
        return Err(BadInteraction::NoPayload);
    };
    read_payload(payload.as_bytes())
}

/// Reads one interaction payload (the form's `payload`, or a Socket Mode envelope's).
pub fn read_payload(json: &[u8]) -> Result<Interaction, BadInteraction> {
    let payload: Payload = serde_json::from_slice(json).map_err(|e| BadInteraction::Json {
        line: e.line(),
        column: e.column(),
    })?;
    if payload.kind != "block_actions" {
        return Ok(Interaction::Ignore("not a button click"));
    }
    let (Some(user), [action]) = (payload.user, payload.actions.as_slice()) else {
        return Err(BadInteraction::Incomplete);
    };
    let approve = match action.action_id.as_str() {
        APPROVE => true,
        DENY => false,
        _ => return Ok(Interaction::Ignore("another app's action")),
    };
    let (run, approval) = action
        .value
        .as_deref()
        .and_then(parse_value)
        .ok_or(BadInteraction::BadValue)?;
    let clicker =
        ActorId::parse(&format!("slack:{}", user.id)).map_err(|_| BadInteraction::BadUser)?;
    let thread_ts = payload.message.and_then(|m| m.thread_ts);
    let message = payload.container.filter(|c| !c.is_ephemeral).and_then(|c| {
        Some(MessageRef {
            channel: c.channel_id?,
            ts: c.message_ts?,
            thread_ts: c.thread_ts.or(thread_ts),
        })
    });
    Ok(Interaction::Click(Click {
        clicker,
        approve,
        run,
        approval,
        message,
    }))
}

/// A button's value: `<run id>/<approval id>`.
fn parse_value(value: &str) -> Option<(RunId, String)> {
    let (run, approval) = value.split_once('/')?;
    let ok = !approval.is_empty()
        && approval.len() <= MAX_APPROVAL_ID
        && approval
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ok.then_some(())?;
    Some((RunId::parse(run).ok()?, approval.to_owned()))
}

/// The message offering one ask: its plain-text fallback and its blocks. The call's arguments
/// are shown whole and exactly as they will run, as preformatted rich text (literal text: no
/// mention, link or formatting in them is read as such); the header names only the action
/// and the tool, escaped.
pub fn offer(
    run: &RunId,
    approval: &str,
    action: &str,
    tool: &str,
    arguments: &str,
    principal: &str,
) -> (String, Value) {
    let action = text::escape(action);
    let tool = text::escape(tool);
    let fallback = format!(
        "Run {run}: the agent asks to {action} with {tool}. Approve or deny it here or on the run's page."
    );
    let header = format!(
        ":raised_hand: Run {run}: the agent asks to `{action}` with `{tool}`, with the arguments below. Only <@{principal}> can answer."
    );
    let value = format!("{run}/{approval}");
    let mut blocks = vec![json!({"type": "section", "text": {"type": "mrkdwn", "text": header}})];
    let chars: Vec<char> = arguments.chars().collect();
    for chunk in chars.chunks(BLOCK_CHARS) {
        let text: String = chunk.iter().collect();
        blocks.push(json!({"type": "rich_text", "elements": [
            {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": text}]}
        ]}));
    }
    blocks.push(
        json!({"type": "actions", "block_id": "switchboard_approval", "elements": [
            {"type": "button", "action_id": APPROVE, "style": "primary", "value": value,
             "text": {"type": "plain_text", "text": "Approve"}},
            {"type": "button", "action_id": DENY, "style": "danger", "value": value,
             "text": {"type": "plain_text", "text": "Deny"}}
        ]}),
    );
    (fallback, Value::Array(blocks))
}

/// The arguments an offer shows, put back together from its preformatted blocks.
pub fn shown_arguments(blocks: &Value) -> String {
    blocks
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "rich_text")
        .flat_map(|b| b["elements"].as_array().into_iter().flatten())
        .flat_map(|e| e["elements"].as_array().into_iter().flatten())
        .filter_map(|t| t["text"].as_str())
        .collect()
}

impl SlackSurface {
    /// Waits for a run's outcome, offering each ask waiting for the person who asked in the
    /// meantime. `asked` was watched before the run could ask anything.
    pub(crate) async fn finished_offering_asks(
        &self,
        req: &SlackRequest,
        run: StartedRun,
        asked: Box<dyn AskedWatch>,
    ) -> Option<RunOutcome> {
        let id = run.id().clone();
        let mut finished = std::pin::pin!(run.finished());
        tokio::select! {
            done = &mut finished => done,
            () = self.offer_asks(req, &id, asked) => finished.await,
        }
    }

    /// Posts every ask of `run` its principal may answer, each once, as they come; returns
    /// only when no ask can ever wait (a process with no approval desk).
    async fn offer_asks(&self, req: &SlackRequest, run: &RunId, mut asked: Box<dyn AskedWatch>) {
        let mut offered = HashSet::new();
        loop {
            for ask in self
                .services
                .approvals
                .pending(run, Answerer::Actor(&req.actor))
                .await
            {
                if offered.insert(ask.id.clone()) {
                    let (fallback, blocks) = offer(
                        run,
                        &ask.id,
                        &ask.action,
                        &ask.tool,
                        &ask.arguments,
                        req.user(),
                    );
                    let posted = self
                        .api
                        .post_blocks(req.conversation(), &req.thread_ts, &fallback, blocks)
                        .await;
                    if let Err(fault) = posted {
                        self.friction(run, "an approval's buttons", &fault).await;
                    }
                }
            }
            if !asked.changed().await {
                return;
            }
        }
    }

    /// Takes a click: the desk counts it only from the run's principal. Acknowledged at
    /// once; the answer and what the clicker is told follow.
    pub(crate) fn interaction(self: &std::sync::Arc<Self>, interaction: Interaction) {
        let click = match interaction {
            Interaction::Click(click) => click,
            Interaction::Ignore(why) => {
                tracing::debug!(why, "[slack] ignored an interaction");
                return;
            }
        };
        let surface = self.clone();
        tokio::spawn(async move {
            let answered = surface
                .services
                .approvals
                .answer(
                    &click.run,
                    &click.approval,
                    Answerer::Actor(&click.clicker),
                    click.approve,
                )
                .await;
            let answer = if click.approve { "approved" } else { "denied" };
            match &answered {
                Ok(()) => {
                    tracing::info!(run = %click.run, by = %click.clicker, answer, "[slack] a tool call was answered")
                }
                Err(e) => {
                    tracing::warn!(by = %click.clicker, reason = %e, "[slack] a click did not count")
                }
            }
            surface.tell(&click, answered).await;
        });
    }

    /// Shows a click's result: the buttons' message says who answered (or that nothing waits
    /// any more); a click that did not count is told so, to the clicker alone.
    async fn tell(&self, click: &Click, answered: Result<(), ApprovalError>) {
        let user = slack_user(&click.clicker);
        let (replace, ephemeral) = match &answered {
            Ok(()) if click.approve => (Some(format!(":white_check_mark: Approved by <@{user}>.")), None),
            Ok(()) => (Some(format!(":no_entry_sign: Denied by <@{user}>.")), None),
            Err(ApprovalError::NotPending) => (
                Some("This tool call no longer waits for an answer (answered, timed out, or its run ended).".to_owned()),
                None,
            ),
            Err(ApprovalError::NotThePrincipal) => (
                None,
                Some("Only the person this run acts for can answer; your click did not count.".to_owned()),
            ),
            Err(ApprovalError::Unrecorded) => (
                None,
                Some("Your answer could not be recorded; nothing changed. Try again.".to_owned()),
            ),
        };
        let Some(message) = &click.message else {
            return;
        };
        if let Some(text) = replace
            && let Err(fault) = self.api.replace(&message.channel, &message.ts, &text).await
        {
            self.friction(&click.run, "an approval's answer", &fault)
                .await;
        }
        if let Some(text) = ephemeral {
            let thread = message.thread_ts.as_deref().unwrap_or(&message.ts);
            if let Err(fault) = self
                .api
                .post_ephemeral(&message.channel, user, thread, &text)
                .await
            {
                tracing::warn!(error = %fault, "[slack] a clicker could not be told their click did not count");
            }
        }
    }
}

/// The Slack user id of a `slack:` actor.
fn slack_user(actor: &ActorId) -> &str {
    actor
        .as_str()
        .strip_prefix("slack:")
        .unwrap_or(actor.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(user: &str, action_id: &str, value: &str) -> Value {
        json!({"type": "block_actions", "user": {"id": user, "username": "ann"},
            "team": {"id": "T1"},
            "container": {"type": "message", "message_ts": "1700000000.000009",
                "channel_id": "C1", "is_ephemeral": false, "thread_ts": "1700000000.000001"},
            "actions": [{"action_id": action_id, "block_id": "switchboard_approval",
                "type": "button", "value": value, "action_ts": "1700000001.000000"}]})
    }

    fn form(v: &Value) -> Vec<u8> {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &v.to_string())
            .finish()
            .into_bytes()
    }

    #[test]
    fn a_click_on_our_button_is_read_whole() {
        let body = form(&payload("U1", APPROVE, "01JRUN/abc_DEF-123"));
        let Ok(Interaction::Click(click)) = read_form(&body) else {
            panic!("not a click");
        };
        assert_eq!(click.clicker.as_str(), "slack:U1");
        assert!(click.approve);
        assert_eq!(click.run.as_str(), "01JRUN");
        assert_eq!(click.approval, "abc_DEF-123");
        assert_eq!(
            click.message,
            Some(MessageRef {
                channel: "C1".into(),
                ts: "1700000000.000009".into(),
                thread_ts: Some("1700000000.000001".into()),
            })
        );
        let Ok(Interaction::Click(deny)) = read_form(&form(&payload("U1", DENY, "01JRUN/x")))
        else {
            panic!("not a click");
        };
        assert!(!deny.approve);
    }

    #[test]
    fn bad_interactions_get_their_reason_and_others_are_ignored() {
        let big = format!("01JRUN/{}", "a".repeat(MAX_APPROVAL_ID + 1));
        let no_actions = json!({"type": "block_actions", "user": {"id": "U1"}, "actions": []});
        let two = {
            let mut v = payload("U1", APPROVE, "01JRUN/a");
            v["actions"] = json!([v["actions"][0].clone(), v["actions"][0].clone()]);
            v
        };
        let cases: Vec<(&str, Vec<u8>, Result<Interaction, BadInteraction>)> = vec![
            ("empty body", vec![], Err(BadInteraction::NoPayload)),
            (
                "not a form",
                b"{\"type\":1}".to_vec(),
                Err(BadInteraction::NoPayload),
            ),
            (
                "two payloads",
                [
                    form(&payload("U1", APPROVE, "01JRUN/a")),
                    b"&payload=x".to_vec(),
                ]
                .concat(),
                Err(BadInteraction::NoPayload),
            ),
            (
                "not JSON",
                b"payload=%7Bnope".to_vec(),
                Err(BadInteraction::Json { line: 1, column: 2 }),
            ),
            (
                "no actions",
                form(&no_actions),
                Err(BadInteraction::Incomplete),
            ),
            ("two actions", form(&two), Err(BadInteraction::Incomplete)),
            (
                "value without a slash",
                form(&payload("U1", APPROVE, "01JRUN")),
                Err(BadInteraction::BadValue),
            ),
            (
                "empty approval",
                form(&payload("U1", APPROVE, "01JRUN/")),
                Err(BadInteraction::BadValue),
            ),
            (
                "bad run id",
                form(&payload("U1", APPROVE, "no such run!/a")),
                Err(BadInteraction::BadValue),
            ),
            (
                "odd approval",
                form(&payload("U1", APPROVE, "01JRUN/a b")),
                Err(BadInteraction::BadValue),
            ),
            (
                "long approval",
                form(&payload("U1", APPROVE, &big)),
                Err(BadInteraction::BadValue),
            ),
            (
                "bad user",
                form(&payload("not a user", APPROVE, "01JRUN/a")),
                Err(BadInteraction::BadUser),
            ),
            (
                "another app's button",
                form(&payload("U1", "their_button", "01JRUN/a")),
                Ok(Interaction::Ignore("another app's action")),
            ),
            (
                "a modal",
                form(&json!({"type": "view_submission", "user": {"id": "U1"}})),
                Ok(Interaction::Ignore("not a button click")),
            ),
        ];
        for (name, body, want) in cases {
            assert_eq!(read_form(&body), want, "{name}");
        }
    }

    #[test]
    fn a_click_on_an_ephemeral_message_names_no_message_to_update() {
        let mut v = payload("U1", APPROVE, "01JRUN/a");
        v["container"]["is_ephemeral"] = json!(true);
        let Ok(Interaction::Click(click)) = read_payload(v.to_string().as_bytes()) else {
            panic!("not a click");
        };
        assert_eq!(click.message, None);
    }

    #[test]
    fn the_offer_shows_the_call_whole_as_literal_text_and_carries_the_ids() {
        let run = RunId::parse("01JRUN").unwrap();
        let args = format!(
            "{{\"content\": \"<!channel> ```*bold* <https://evil|ok> {}\"}}",
            "x".repeat(3_000)
        );
        let (fallback, blocks) = offer(&run, "abc", "fs.write", "write_file", &args, "U1");
        assert!(fallback.contains("fs.write"));
        let header = blocks[0]["text"]["text"].as_str().unwrap();
        assert!(header.contains("`fs.write` with `write_file`"), "{header}");
        assert!(header.contains("Only <@U1> can answer."));
        assert!(
            !header.contains("channel"),
            "no agent text in the mrkdwn: {header}"
        );
        // Whole, exactly, across two preformatted blocks.
        assert_eq!(shown_arguments(&blocks), args);
        assert_eq!(
            blocks
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "rich_text")
                .count(),
            2
        );
        let actions = blocks.as_array().unwrap().last().unwrap();
        assert_eq!(actions["type"], "actions");
        assert_eq!(actions["elements"][0]["value"], "01JRUN/abc");
        assert_eq!(actions["elements"][0]["action_id"], APPROVE);
        assert_eq!(actions["elements"][1]["action_id"], DENY);
        // Slack-morphism reads them as Block Kit blocks.
        let typed: Result<Vec<slack_morphism::prelude::SlackBlock>, _> =
            serde_json::from_value(blocks);
        assert!(typed.is_ok(), "{typed:?}");
    }
}
