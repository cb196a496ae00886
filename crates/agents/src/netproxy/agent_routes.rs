//! The run's own endpoints on its proxy socket, beside the gateway: the tool hooks of an
//! outside agent (Claude Code's `PreToolUse` and `PostToolUse`, sent by `switchboard
//! sandbox-hook`), and the broker's tools over MCP for any agent ([`super::broker_mcp`]).
//! Only the run's sandbox reaches the socket; a hook must also carry the run's credential.
//!
//! A hook's answer is `{"allow": true}` or `{"allow": false, "reason": "…"}`; every fault is
//! an error status the hook turns into a refusal.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::head::Head;
use super::{FORBIDDEN, Refusal, Shared};
use crate::claude_code::mapping::{HookInput, agent_call};

/// `PreToolUse`: decide a call before it runs.
pub const HOOK_PRE: &str = "/switchboard/hook/pre-tool-use";
/// `PostToolUse`: what an allowed call returned, before the agent reads it.
pub const HOOK_POST: &str = "/switchboard/hook/post-tool-use";
/// The broker's tools over MCP (streamable HTTP, JSON answers).
pub const BROKER_MCP: &str = "/switchboard/mcp";
/// The header a hook sends the run's credential in.
pub const CREDENTIAL_HEADER: &str = "x-switchboard-run-credential";

/// The largest body a hook or an MCP message may have (a `Write` of a big file, say).
const MAX_BODY: usize = 8 * 1024 * 1024;
/// How long a body may take to arrive once its head has.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The most decided calls whose result is awaited at once; past it the oldest is dropped
/// (its result, if it ever comes, is then refused).
const MAX_PENDING: usize = 256;

/// Serves `path` when it is one of the run's own endpoints; `None` when it is not.
pub(super) async fn serve(
    stream: &mut UnixStream,
    head: &Head,
    path: &str,
    rest: Vec<u8>,
    shared: &Shared,
) -> Option<Result<(), Refusal>> {
    let route = path.split('?').next().unwrap_or(path);
    if ![HOOK_PRE, HOOK_POST, BROKER_MCP].contains(&route) {
        return None;
    }
    if route == BROKER_MCP && head.method != "POST" {
        // No server-sent stream: every answer is the POST's own.
        let reply = "HTTP/1.1 405 Method Not Allowed\r\nAllow: POST\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let _ = stream.write_all(reply.as_bytes()).await;
        return Some(Ok(()));
    }
    if head.method != "POST" {
        return Some(Err((FORBIDDEN, format!("{route} takes POST"))));
    }
    let hook = route != BROKER_MCP;
    // A hook's credential before its body is read; no more than a few bodies held at once.
    if hook && !holds_credential(head, shared) {
        shared
            .sink
            .event("tool", "a hook without the run's credential was refused")
            .await;
        return Some(Err((
            FORBIDDEN,
            "the hook must carry this run's credential".to_owned(),
        )));
    }
    let Ok(reading) = shared.bodies.acquire().await else {
        return Some(Err((
            "503 Service Unavailable",
            "the proxy is closing".to_owned(),
        )));
    };
    let read = tokio::time::timeout(BODY_TIMEOUT, read_body(stream, head, rest)).await;
    // Held while the bytes arrive, never while a decision waits for a person.
    drop(reading);
    let body = match read {
        Ok(Ok(body)) => body,
        Ok(Err(why)) => return Some(Err(("400 Bad Request", why))),
        Err(_) => {
            return Some(Err((
                "408 Request Timeout",
                "the body took too long".to_owned(),
            )));
        }
    };
    let answer = match route {
        BROKER_MCP => super::broker_mcp::answer(&body, shared).await,
        HOOK_PRE => Some(pre_tool_use(&body, shared).await),
        _ => Some(post_tool_use(&body, shared).await),
    };
    Some(match answer {
        Some(value) => reply(stream, "200 OK", &value).await,
        None => {
            let accepted =
                "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            let _ = stream.write_all(accepted.as_bytes()).await;
            Ok(())
        }
    })
}

async fn reply(stream: &mut UnixStream, status: &str, value: &Value) -> Result<(), Refusal> {
    let body = value.to_string();
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
    Ok(())
}

/// Whether the request carries the run's credential (compared in constant time).
fn holds_credential(head: &Head, shared: &Shared) -> bool {
    let (Some(expected), Some(given)) = (&shared.routes.credential, head.field(CREDENTIAL_HEADER))
    else {
        return false;
    };
    let (a, b) = (expected.as_bytes(), given.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A `Content-Length` body of at most [`MAX_BODY`] bytes.
async fn read_body(stream: &mut UnixStream, head: &Head, rest: Vec<u8>) -> Result<Vec<u8>, String> {
    let Some(length) = head.field("content-length") else {
        return Err("send the body with a Content-Length".to_owned());
    };
    let length: usize = length
        .parse()
        .map_err(|_| "Content-Length is not a number".to_owned())?;
    if length > MAX_BODY {
        return Err(format!("the body is longer than {MAX_BODY} bytes"));
    }
    if rest.len() > length {
        return Err("more bytes than Content-Length".to_owned());
    }
    let mut body = rest;
    let mut more = vec![0u8; length - body.len()];
    stream
        .read_exact(&mut more)
        .await
        .map_err(|_| "the body ended early".to_owned())?;
    body.extend_from_slice(&more);
    Ok(body)
}

fn refusal(reason: impl Into<String>) -> Value {
    json!({"allow": false, "reason": reason.into()})
}

/// Decides the call; an allowed one's label waits for its result.
async fn pre_tool_use(body: &[u8], shared: &Shared) -> Value {
    let hook: HookInput = match serde_json::from_slice(body) {
        Ok(hook) => hook,
        Err(e) => return refusal(format!("refused: the hook's input does not read: {e}")),
    };
    let call = match agent_call(&hook) {
        Ok(call) => call,
        Err(why) => {
            let why = format!("refused: {why}");
            shared
                .sink
                .event("tool", &format!("{}: {why}", hook.tool_name))
                .await;
            return refusal(why);
        }
    };
    // Not under the run's one-question turn: Claude Code's parallel calls are each asked
    // about (once per call, within the hook's wait), and none waits behind another's ask.
    let decided = shared.gate.agent_call(&call, &shared.sink).await;
    let allowed = match decided {
        Ok(allowed) => allowed,
        Err(refused) => return refusal(refused),
    };
    // The taint the result will carry is raised, and stored, before the call runs: the
    // call cannot read and send at the taint it had.
    match shared.gate.agent_result(allowed.label, &shared.sink).await {
        Ok(true) => shared.epoch.send_modify(|epoch| *epoch += 1),
        Ok(false) => {}
        Err(why) => return refusal(why),
    }
    if let Ok(mut pending) = shared.pending.lock() {
        if pending.len() >= MAX_PENDING {
            pending.remove(0);
        }
        pending.push((hook.tool_use_id.clone(), allowed.label));
    }
    // A host the run's person just said yes to a fetch of is not asked about again when
    // the agent connects to it.
    if allowed.person_said_yes
        && call.actions.iter().any(|a| a == "net.fetch")
        && let Some(url) = hook
            .tool_input
            .get("url")
            .and_then(Value::as_str)
            .and_then(|u| url::Url::parse(u).ok())
        && let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default())
        && let Ok(mut approved) = shared.approved.lock()
    {
        let host = host.trim_matches(['[', ']']);
        approved.insert(super::authority(host, port));
        // Claude Code fetches an http URL of the default port over https.
        if url.scheme() == "http" && url.port().is_none() {
            approved.insert(super::authority(host, 443));
        }
    }
    json!({"allow": true})
}

#[derive(serde::Deserialize)]
struct PostInput {
    tool_name: String,
    #[serde(default)]
    tool_use_id: String,
    #[serde(default)]
    tool_response: Value,
}

/// What an allowed call returned: the session's taint raised again by the label the call was
/// decided with (it rose, and was stored, when the call was allowed), and a `tool_result`
/// event. A result no decision of the run is waiting for is refused (Claude Code tells the
/// model; the call has run).
async fn post_tool_use(body: &[u8], shared: &Shared) -> Value {
    let post: PostInput = match serde_json::from_slice(body) {
        Ok(post) => post,
        Err(e) => return refusal(format!("refused: the hook's input does not read: {e}")),
    };
    let label = shared.pending.lock().ok().and_then(|mut pending| {
        let at = pending.iter().position(|(id, _)| *id == post.tool_use_id)?;
        Some(pending.remove(at).1)
    });
    let Some(label) = label else {
        let why = format!(
            "refused: {} returned a result no decision of this run allowed",
            post.tool_name
        );
        shared.sink.event("tool", &why).await;
        return refusal(why);
    };
    match shared.gate.agent_result(label, &shared.sink).await {
        Ok(rose) => {
            if rose {
                shared.epoch.send_modify(|epoch| *epoch += 1);
            }
            let size = match &post.tool_response {
                Value::String(text) => text.len(),
                other => other.to_string().len(),
            };
            let untrusted = if label.untrusted { ", untrusted" } else { "" };
            shared
                .sink
                .event(
                    "tool_result",
                    &format!(
                        "{} returned {size} bytes ({}{untrusted})",
                        post.tool_name,
                        label.class.as_str()
                    ),
                )
                .await;
            json!({"allow": true})
        }
        Err(why) => refusal(why),
    }
}
