//! Peers on loopback for tests (feature `testing`):
//! - [`NotesServer`], a real MCP server: rmcp's Streamable HTTP server, with sessions,
//!   offering `shout` (upper-cases its `text`), `fail` (reports a tool error) and `erase_all`
//!   (stands for a destructive tool). It counts the calls it was sent.
//! - [`init_repository`] and [`git_repository`], a git repository with one commit, as
//!   `repo add --path` takes for runs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

/// The server, served until the process ends.
pub struct NotesServer {
    /// Its MCP endpoint, `http://127.0.0.1:<port>/mcp`.
    pub url: String,
    calls: Arc<AtomicU64>,
}

impl NotesServer {
    pub async fn serve() -> std::io::Result<NotesServer> {
        let calls = Arc::new(AtomicU64::new(0));
        let handler = Notes {
            calls: calls.clone(),
        };
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let app = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(NotesServer {
            url: format!("http://{addr}/mcp"),
            calls,
        })
    }

    /// How many `tools/call` requests it has answered.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct Notes {
    calls: Arc<AtomicU64>,
}

fn schema(v: Value) -> JsonObject {
    match v {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let text = schema(json!({"type": "object", "properties": {"text": {"type": "string"}}}));
        let none = schema(json!({"type": "object", "properties": {}}));
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("shout", "Upper-cases the text.", text),
            Tool::new("fail", "Always reports an error.", none.clone()),
            Tool::new("erase_all", "Erases every note.", none),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let args = request.arguments.unwrap_or_default();
        let result = match &*request.name {
            "shout" => CallToolResult::success(vec![ContentBlock::text(
                args.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_uppercase(),
            )]),
            "fail" => CallToolResult::error(vec![ContentBlock::text("the notes are locked")]),
            "erase_all" => CallToolResult::success(vec![ContentBlock::text("erased everything")]),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool named {other}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

/// Makes `dir` (which must exist) a git repository with one empty commit: a run in it starts
/// from that commit.
pub fn init_repository(dir: &std::path::Path) -> std::io::Result<()> {
    let steps: [&[&str]; 2] = [
        &["init", "-q"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    ];
    for args in steps {
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other(format!(
                "git {args:?} failed: {status}"
            )));
        }
    }
    Ok(())
}

/// A temporary git repository with one empty commit, removed when dropped.
pub fn git_repository() -> std::io::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    init_repository(dir.path())?;
    Ok(dir)
}
