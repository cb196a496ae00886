//! The MCP handler: the registry's commands as tools, listed per caller, called through
//! `Registry::invoke`.

use std::sync::Arc;

use authz_core::{Action, Effect};
use commands::{Caller, Command, RawInput, Reply, ReplyKind};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value};

use crate::Mcp;
use crate::ask::{self, ASK};
use crate::result::tool_result;

/// The MCP handler; one per request (stateless), sharing the surface.
#[derive(Clone)]
pub(crate) struct Handler {
    mcp: Arc<Mcp>,
}

impl Handler {
    pub(crate) fn new(mcp: Arc<Mcp>) -> Self {
        Handler { mcp }
    }

    /// The tools `caller` may call: each command whose admission passes, then `ask` when it
    /// may run some agent.
    fn tools_for(&self, caller: &Caller) -> Vec<Tool> {
        let registry = &self.mcp.registry;
        let mut tools: Vec<Tool> = registry
            .commands()
            .iter()
            .filter(|c| {
                let raw = RawInput::Json {
                    id: c.id.as_str().to_owned(),
                    args: Map::new(),
                };
                registry.admission(caller, c, &raw).is_allow()
            })
            .map(command_tool)
            .collect();
        if ask::may_ask(&self.mcp.services, caller) {
            tools.push(ask::tool());
        }
        tools
    }

    async fn call(
        &self,
        caller: &Caller,
        name: &str,
        arguments: JsonObject,
        ctx: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        if name == ASK {
            return ask::call(&self.mcp, caller, arguments, ctx).await;
        }
        let Some(command) = self
            .mcp
            .registry
            .commands()
            .iter()
            .find(|c| is_tool_of(name, c))
        else {
            // Not a tool: the registry's unknown-command reply (a tool error, not a protocol
            // error). A command id spelled with dots is not a tool name either.
            let text = commands::reply_texts::unknown_command(name);
            return tool_result(Reply::of(ReplyKind::UnknownCommand, text));
        };
        let id = command.id.as_str().to_owned();
        let reply = self
            .mcp
            .registry
            .invoke(
                caller,
                RawInput::Json {
                    id,
                    args: arguments,
                },
                &self.mcp.services,
            )
            .await;
        // The request's root span names the caller and the outcome; a refused call's trace
        // is dropped whole, leaving only its audit line (operations.md).
        tool_result(reply)
    }
}

/// Whether `name` is `command`'s tool name (its id with `_` for `.`), without building it.
fn is_tool_of(name: &str, command: &Command) -> bool {
    let id = command.id.as_str();
    name.len() == id.len()
        && name
            .bytes()
            .zip(id.bytes())
            .all(|(n, i)| if i == b'.' { n == b'_' } else { n == i })
}

/// A command as a tool: `runs.list` → `runs_list`, its argument schema, its summary, and
/// `readOnlyHint` when its action only reads.
fn command_tool(command: &Command) -> Tool {
    let schema = match command.args.json_schema() {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let read_only = matches!(command.action, Action::Command(_, Effect::Read));
    Tool::new(command.tool_name(), command.summary, schema)
        .with_annotations(ToolAnnotations::new().read_only(read_only))
}

/// The caller the gate proved; `None` only if the handler is reached without the gate.
fn caller_of(ctx: &RequestContext<RoleServer>) -> Option<Caller> {
    ctx.extensions
        .get::<axum::http::request::Parts>()?
        .extensions
        .get::<Caller>()
        .cloned()
}

fn unproven() -> ErrorData {
    // Unreachable behind the gate; fail closed all the same.
    ErrorData::invalid_request("unauthenticated", None)
}

/// `tools/list` cursors are the offset of the page's first tool, as text.
fn page_start(cursor: Option<&str>, len: usize) -> Result<usize, ErrorData> {
    match cursor {
        None => Ok(0),
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0 && n < len)
            .ok_or_else(|| ErrorData::invalid_params("unknown cursor", None)),
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "switchboard",
                self.mcp.services.version,
            ))
            .with_instructions(
                "Switchboard's registry commands as tools (runs, friction, config, memory, schedules) and `ask` to start an agent run. Every call is decided by the same policy as every other surface.",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller_of(&ctx).ok_or_else(unproven)?;
        let tools = self.tools_for(&caller);
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let start = page_start(cursor, tools.len())?;
        let size = self.mcp.settings.page_size.max(1);
        let end = start.saturating_add(size).min(tools.len());
        let page = tools.get(start..end).unwrap_or_default().to_vec();
        let mut result = ListToolsResult::with_all_items(page);
        result.next_cursor = (end < tools.len()).then(|| end.to_string());
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller_of(&ctx).ok_or_else(unproven)?;
        let arguments = request.arguments.unwrap_or_default();
        Ok(self
            .call(&caller, &request.name, arguments, &ctx)
            .await
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_map_back_to_their_commands() {
        let registry = commands::Registry::catalogue();
        for c in registry.commands() {
            let name = c.tool_name();
            let found: Vec<&str> = registry
                .commands()
                .iter()
                .filter(|o| is_tool_of(&name, o))
                .map(|o| o.id.as_str())
                .collect();
            assert_eq!(found, [c.id.as_str()], "{name}");
        }
        let runs_list = registry.by_id("runs.list").unwrap();
        for not in ["runs.list", "runs_lis", "runs_listx", "runsXlist", ""] {
            assert!(!is_tool_of(not, runs_list), "{not}");
        }
    }

    #[test]
    fn cursors_are_offsets_inside_the_list() {
        assert_eq!(page_start(None, 3).unwrap(), 0);
        assert_eq!(page_start(Some("2"), 3).unwrap(), 2);
        for bad in ["0", "3", "-1", "x", "", "99999999999999999999999"] {
            assert!(page_start(Some(bad), 3).is_err(), "{bad}");
        }
    }
}
