//! MCP servers' tools, reached only through the broker: the servers `mcp add` configured for the
//! run's channel and the org, each spoken to with rmcp's Streamable HTTP client from this process
//! (never from the sandbox). The model sees one tool, `mcp`, whose description lists every tool
//! the servers offered when the run started; each call is the action `mcp.<server>.<tool>`,
//! decided like any other before it is sent.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::capped::capped;

/// One configured server: its name (the middle of `mcp.<server>.<tool>`) and URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    pub name: String,
    pub url: String,
}

/// One tool a server offered.
#[derive(Debug, Clone, PartialEq)]
struct McpTool {
    name: String,
    description: String,
    /// Its arguments' JSON Schema, shown to the model.
    input_schema: Value,
}

/// A server as the run found it.
#[derive(Debug, Clone, PartialEq)]
struct Listed {
    server: McpServer,
    tools: Vec<McpTool>,
    /// Why its tools could not be listed, when they could not.
    problem: Option<String>,
}

type Client = RunningService<RoleClient, ()>;

/// One server's listing: its open session and its tools, or why not.
type Listing = Result<(Client, Vec<McpTool>), String>;

/// How long listing a server's tools at a run's start may take (a server that does not answer
/// delays every run by this much), and how long one call may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpTimeouts {
    pub list: Duration,
    pub call: Duration,
}

impl Default for McpTimeouts {
    fn default() -> Self {
        McpTimeouts {
            list: Duration::from_secs(10),
            call: Duration::from_secs(30),
        }
    }
}

/// The run's MCP servers: what each offered, and one open session per server, made at the
/// listing (or at the first call after a failed one) and closed with the run.
pub struct McpServers {
    listed: Vec<Listed>,
    sessions: tokio::sync::Mutex<HashMap<String, Arc<Client>>>,
    timeout: Duration,
}

/// The most of a tool description shown to the model; a server's text is not ours to trust.
const DESCRIPTION_CHARS: usize = 300;
/// The most tools listed per server.
const TOOLS_PER_SERVER: usize = 64;

impl McpServers {
    /// No servers: the model is offered no `mcp` tool.
    pub fn none() -> McpServers {
        McpServers {
            listed: Vec::new(),
            sessions: tokio::sync::Mutex::new(HashMap::new()),
            timeout: Duration::from_secs(30),
        }
    }

    /// Connects to every server at once and lists its tools, each within `timeouts.list`. A
    /// server that cannot be reached keeps its place with the reason; the run goes on without
    /// its tools.
    pub async fn connect(servers: Vec<McpServer>, timeouts: McpTimeouts) -> McpServers {
        let wait = timeouts.list;
        let listings: Vec<_> = servers
            .iter()
            .map(|server| {
                let url = server.url.clone();
                tokio::spawn(async move { tokio::time::timeout(wait, open_and_list(&url)).await })
            })
            .collect();
        let mut listed = Vec::new();
        let mut sessions = HashMap::new();
        for (server, listing) in servers.into_iter().zip(listings) {
            let found = match listing.await {
                Ok(Ok(found)) => found,
                Ok(Err(_)) => Err(format!("no answer within {} s", wait.as_secs())),
                Err(_) => Err("the listing failed".to_owned()),
            };
            match found {
                Ok((client, tools)) => {
                    sessions.insert(server.name.clone(), Arc::new(client));
                    listed.push(Listed {
                        server,
                        tools,
                        problem: None,
                    });
                }
                Err(problem) => listed.push(unreachable(server, problem)),
            }
        }
        McpServers {
            listed,
            sessions: tokio::sync::Mutex::new(sessions),
            timeout: timeouts.call,
        }
    }

    /// The servers whose tools could not be listed, with why.
    pub fn problems(&self) -> Vec<(String, String)> {
        self.listed
            .iter()
            .filter_map(|l| Some((l.server.name.clone(), l.problem.clone()?)))
            .collect()
    }

    /// The `mcp` tool as the model sees it, when there is any server.
    pub fn definition(&self) -> Option<Value> {
        if self.listed.is_empty() {
            return None;
        }
        let mut catalogue = String::new();
        for l in &self.listed {
            if let Some(problem) = &l.problem {
                catalogue.push_str(&format!(
                    "\n- server {}: unreachable when the run started ({problem})",
                    l.server.name
                ));
            }
            for t in &l.tools {
                catalogue.push_str(&format!(
                    "\n- server {}, tool {}: {} Arguments: {}",
                    l.server.name, t.name, t.description, t.input_schema
                ));
            }
        }
        let names: Vec<&str> = self.listed.iter().map(|l| l.server.name.as_str()).collect();
        Some(json!({
            "type": "function",
            "function": {
                "name": "mcp",
                "description": format!(
                    "Call a tool of an MCP server. Each call is the action mcp.<server>.<tool> and needs a grant. Tools:{catalogue}"
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "server": {"type": "string", "enum": names},
                        "tool": {"type": "string"},
                        "arguments": {"type": "object"},
                    },
                    "required": ["server", "tool"],
                    "additionalProperties": false,
                },
            },
        }))
    }

    /// Calls `tool` on `server` (the broker has decided); the result as text, cut at
    /// `max_bytes`. A tool's own error is a result the model reads, marked as an error.
    pub(crate) async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: &Value,
        max_bytes: usize,
    ) -> Result<String, String> {
        let client = self.session(server).await?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map.clone());
        }
        let result = tokio::time::timeout(self.timeout, client.call_tool(params))
            .await
            .map_err(|_| {
                format!(
                    "mcp.{server}.{tool}: no answer within {} s",
                    self.timeout.as_secs()
                )
            })?
            .map_err(|e| format!("mcp.{server}.{tool} could not be called: {}", failure(&e)))?;
        Ok(capped(result_text(&result).as_bytes(), max_bytes))
    }

    /// The open session to `server`, opened again when the listing could not open one.
    async fn session(&self, server: &str) -> Result<Arc<Client>, String> {
        let Some(listed) = self.listed.iter().find(|l| l.server.name == server) else {
            return Err(format!(
                "no MCP server named {server} is configured for this run's channel or the org"
            ));
        };
        let mut sessions = self.sessions.lock().await;
        if let Some(client) = sessions.get(server) {
            return Ok(client.clone());
        }
        let client = tokio::time::timeout(self.timeout, open(&listed.server.url))
            .await
            .map_err(|_| format!("the MCP server {server} did not answer"))?
            .map_err(|e| format!("the MCP server {server} could not be reached: {e}"))?;
        let client = Arc::new(client);
        sessions.insert(server.to_owned(), client.clone());
        Ok(client)
    }
}

fn unreachable(server: McpServer, problem: String) -> Listed {
    tracing::warn!(server = %server.name, problem = %problem, "[broker] an MCP server's tools could not be listed");
    Listed {
        server,
        tools: Vec::new(),
        problem: Some(problem),
    }
}

async fn open(url: &str) -> Result<Client, String> {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    // Never the client's own text: a transport error can quote the URL, and a server's URL may
    // carry a token in its query.
    ().serve(transport)
        .await
        .map_err(|_| "the connection or the MCP handshake failed".to_owned())
}

async fn open_and_list(url: &str) -> Listing {
    let client = open(url).await?;
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {}", failure(&e)))?;
    let tools = tools
        .into_iter()
        .take(TOOLS_PER_SERVER)
        .map(|t| McpTool {
            name: t.name.to_string(),
            description: t
                .description
                .as_deref()
                .unwrap_or_default()
                .chars()
                .take(DESCRIPTION_CHARS)
                .collect(),
            input_schema: Value::Object((*t.input_schema).clone()),
        })
        .collect();
    Ok((client, tools))
}

/// Why a request to a server failed, in words that never quote the URL: the server's own
/// JSON-RPC refusal (its message), else what kind of failure it was.
fn failure(e: &ServiceError) -> String {
    match e {
        ServiceError::McpError(data) => format!("the server refused: {}", data.message),
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            "the connection failed".to_owned()
        }
        ServiceError::Timeout { .. } => "it timed out".to_owned(),
        _ => "the server's answer could not be used".to_owned(),
    }
}

/// A result's text parts, joined; other content is named, not shown.
fn result_text(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|c: &ContentBlock| match c.as_text() {
            Some(t) => t.text.clone(),
            None => "[non-text content omitted]".to_owned(),
        })
        .collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        format!("the tool reported an error: {text}")
    } else {
        text
    }
}
