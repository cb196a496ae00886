//! The `ask` tool: start an agent run as a chat message would, and optionally wait for it.
//!
//! A bearer's run is recorded in its token's channel (or `mcp:<subject>`); an agent's run is
//! the child of the agent's own run — the launcher places it in the parent's channel with
//! the parent's stamp, for the parent's principal. Waiting is bounded by [`MAX_WAIT`], sends
//! progress notifications when the client asked for them, and ends when the client cancels
//! (disconnects): the wait stops, never the run.

use std::time::Instant;

use authz_core::{AgentName, RepoSlug};
use commands::{Caller, Handled, Reply, ReplyKind, RunOutcome, Services, StartedRun};
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, JsonObject, ProgressNotificationParam, Tool, ToolAnnotations};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use crate::result::tool_result;
use crate::{MAX_WAIT, Mcp, caller_key};

pub(crate) const ASK: &str = "ask";

const USAGE: &str = "usage: ask {\"request\": \"<text for an agent>\", \"agent\"?: \"<name>\", \"repo\"?: \"<owner/name>\", \"wait\"?: true|false}";

/// The `ask` tool's description and schema.
pub(crate) fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "request": {"type": "string", "description": "what to ask, as you would say it in chat (`@agent` at the start picks the agent)"},
            "agent": {"type": "string", "description": "the agent to run, when the request does not name one"},
            "repo": {"type": "string", "description": "the repo the run works in (owner/name, as `repo list` shows): it gets a working copy of the repo's committed HEAD of its own, and its changes are kept on the branch switchboard/<run id>"},
            "wait": {"type": "boolean", "description": "wait for the answer (at most 300 s); otherwise return the run id at once"}
        },
        "required": ["request"],
        "additionalProperties": false
    });
    let schema = match schema {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    };
    Tool::new(
        ASK,
        "Start an agent run with a request, as a chat message would; returns the run id, or the answer with wait: true.",
        schema,
    )
    .with_annotations(ToolAnnotations::new().read_only(false))
}

/// Whether `caller` may run any agent (what lists `ask`). The launcher still decides the
/// agent a call names.
pub(crate) fn may_ask(services: &Services, caller: &Caller) -> bool {
    let table = services.table();
    table
        .agents()
        .iter()
        .any(|a| table.can_run_agent(&caller.actor, a))
}

/// `ask`'s arguments.
#[derive(Debug, PartialEq)]
struct AskArgs {
    request: String,
    agent: Option<AgentName>,
    repo: Option<RepoSlug>,
    wait: bool,
}

fn parse(args: &JsonObject) -> Result<AskArgs, String> {
    let mut request = None;
    let mut agent = None;
    let mut repo = None;
    let mut wait = false;
    for (key, value) in args {
        match (key.as_str(), value) {
            ("request", Value::String(s)) => request = Some(s.clone()),
            ("request", _) => return Err("`request` must be a string".into()),
            ("agent", Value::String(s)) => {
                agent = Some(AgentName::parse(s).map_err(|e| format!("`agent`: {e}"))?);
            }
            ("agent", Value::Null) => {}
            ("agent", _) => return Err("`agent` must be a string".into()),
            ("repo", Value::String(s)) => {
                repo = Some(RepoSlug::parse(s).map_err(|e| format!("`repo`: {e}"))?);
            }
            ("repo", Value::Null) => {}
            ("repo", _) => return Err("`repo` must be a string like \"owner/name\"".into()),
            ("wait", Value::Bool(b)) => wait = *b,
            ("wait", _) => return Err("`wait` must be true or false".into()),
            (other, _) => return Err(format!("unknown argument `{other}`")),
        }
    }
    let request = request
        .filter(|r| !r.trim().is_empty())
        .ok_or_else(|| "`request` is required and must not be empty".to_owned())?;
    Ok(AskArgs {
        request,
        agent,
        repo,
        wait,
    })
}

pub(crate) async fn call(
    mcp: &Mcp,
    caller: &Caller,
    arguments: JsonObject,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResult {
    let args = match parse(&arguments) {
        Ok(a) => a,
        Err(problem) => {
            return tool_result(Reply::of(ReplyKind::Usage, format!("{problem}\n{USAGE}")));
        }
    };
    // An agent's run is its own run's child: `start_agent_run_with` reads that from the
    // caller (and gives an agent no link).
    let options = commands::RunOptions {
        agent: args.agent,
        repo: args.repo,
        policy_rules: Vec::new(),
    };
    let Handled { reply, run } =
        commands::start_agent_run_with(caller, &args.request, options, &mcp.services).await;
    let Some(run) = run else {
        return tool_result(reply);
    };
    tracing::info!(surface = "mcp", tool = ASK, actor = %caller.actor.id, run = %run.id(), "run started");
    if !args.wait {
        return tool_result(reply);
    }
    let id = run.id().to_string();
    let request_id = serde_json::to_string(&ctx.id).unwrap_or_default();
    let waiting = mcp.waits.register(caller_key(caller), request_id);
    match wait_for(run, mcp, ctx, &waiting.cancelled).await {
        Some(done) => finished_result(&done),
        None => tool_result(Reply::ok(
            format!("run {id} is still running; follow it with `runs get {id}`"),
            json!({"run_id": id, "status": "running"}),
        )),
    }
}

/// Waits for the run's end, up to [`MAX_WAIT`] or until the client cancels (disconnects, or
/// sends `notifications/cancelled` for this request), sending progress when asked. `None`
/// when it did not end in time (or the client went away).
async fn wait_for(
    run: StartedRun,
    mcp: &Mcp,
    ctx: &RequestContext<RoleServer>,
    cancelled: &tokio_util::sync::CancellationToken,
) -> Option<RunOutcome> {
    let started = Instant::now();
    let token = ctx.meta.get_progress_token();
    let finished = run.finished();
    tokio::pin!(finished);
    let deadline = tokio::time::sleep(MAX_WAIT);
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval(mcp.settings.progress_every);
    tick.tick().await;
    loop {
        tokio::select! {
            done = &mut finished => return done,
            () = &mut deadline => return None,
            () = ctx.ct.cancelled() => return None,
            () = cancelled.cancelled() => return None,
            _ = tick.tick() => {
                if let Some(token) = &token {
                    let secs = started.elapsed().as_secs_f64();
                    let mut p = ProgressNotificationParam::new(token.clone(), secs.floor());
                    p.message = Some(format!("the run is still going ({}s)", secs as u64));
                    // A client that stopped listening is not an error of the run.
                    let _ = ctx.peer.notify_progress(p).await;
                }
            }
        }
    }
}

/// A finished run as a tool result: its answer; `isError` unless it completed.
fn finished_result(done: &RunOutcome) -> CallToolResult {
    let kind = if done.status() == commands::RunStatus::Completed {
        ReplyKind::Ok
    } else {
        ReplyKind::Failed
    };
    let mut reply = Reply::ok(done.text(), done.json());
    reply.kind = kind;
    tool_result(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> JsonObject {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn ask_arguments_parse_or_say_what_is_wrong() {
        assert_eq!(
            parse(&obj(
                json!({"request": "hi", "agent": "echo", "repo": "Acme/Web", "wait": true})
            ))
            .unwrap(),
            AskArgs {
                request: "hi".into(),
                agent: Some(AgentName::parse("echo").unwrap()),
                repo: Some(RepoSlug::parse("acme/web").unwrap()),
                wait: true
            }
        );
        for (args, want) in [
            (json!({}), "`request` is required"),
            (json!({"request": "  "}), "`request` is required"),
            (json!({"request": 3}), "`request` must be a string"),
            (
                json!({"request": "x", "wait": "yes"}),
                "`wait` must be true or false",
            ),
            (
                json!({"request": "x", "agent": 1}),
                "`agent` must be a string",
            ),
            (json!({"request": "x", "agent": "no spaces"}), "`agent`:"),
            (
                json!({"request": "x", "repo": 7}),
                "`repo` must be a string",
            ),
            (json!({"request": "x", "repo": "no-slash"}), "`repo`:"),
            (json!({"request": "x", "repo": "a/../b"}), "`repo`:"),
            (
                json!({"request": "x", "channel": "slack:C1"}),
                "unknown argument `channel`",
            ),
        ] {
            let e = parse(&obj(args.clone())).unwrap_err();
            assert!(e.contains(want), "{args}: {e}");
        }
    }
}
