//! A command agent's network: the per-run proxy the server runs, and the forwarder that
//! reaches it from inside the sandbox.
//!
//! A sandboxed command agent with `network = "broker"` has no network of its own (its sandbox
//! unshares it). Its one way out is a Unix socket bound into its sandbox for that run alone,
//! at [`SANDBOX_PROXY_SOCKET`]; the `switchboard` binary, in its forwarding mode
//! ([`forwarder`]), listens on `127.0.0.1:`[`SANDBOX_PROXY_PORT`] inside and relays each
//! connection there, and the agent's `HTTP_PROXY`/`HTTPS_PROXY` name that port. On the
//! server's side, [`RunProxy`] reads each connection's request head ([`head`]) and:
//! - `CONNECT host:port` (HTTPS) and `GET http://host/…` are decided as `net.fetch` on that
//!   host through the run's broker gate ([`crate::tools::ToolGate::network`]: grants, the
//!   rule table, asks to the run's principal), then the name is resolved once, each address
//!   checked ([`crate::tools::net::checked`]: internal ranges only when the grant names the
//!   address) and the connection made to exactly that address; no proxy of the host's is
//!   used ([`upstream`]);
//! - a request to the proxy itself (`/path`) is the gateway: the agent's declared model
//!   endpoint for its API paths only, with the real credential put on by Switchboard (the
//!   agent holds a placeholder), and Switchboard's own MCP endpoint ([`model`]);
//! - the model endpoint's host is never tunnelled to, and refused on any other path;
//! - the run's own endpoints ([`agent_routes`]): Claude Code's tool hooks (each call decided
//!   through [`crate::tools::ToolGate::agent_call`]) and the broker's tools over MCP.
//!
//! Must never: connect before the broker allowed the host, connect to an address other than
//! the one it checked, pass the agent's own credential to the model endpoint, or answer a
//! malformed head with anything but a refusal.

pub mod agent_routes;
mod broker_mcp;
pub mod forwarder;
pub mod head;
pub mod hook_client;
mod model;
mod model_body;
mod upstream;

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};

use crate::EventSink;
use crate::tools::ToolGate;
use head::{Head, Target};
pub use model::{ModelApi, ModelEndpoint, ModelKey};

/// Where the proxy's socket is inside a sandbox.
pub const SANDBOX_PROXY_SOCKET: &str = "/run/switchboard/proxy.sock";
/// The loopback port the forwarder listens on inside a sandbox.
pub const SANDBOX_PROXY_PORT: u16 = 3128;
/// The key a command agent's environment holds for its model endpoint: worth nothing
/// outside; the gateway puts the real one on.
pub const PLACEHOLDER_KEY: &str = "switchboard-placeholder-key";

/// Each direction's buffer when bytes are relayed (tokio's default of 8 KiB costs a system
/// call per 8 KiB; the proxy bench measures the difference).
const RELAY_BUFFER: usize = 64 * 1024;

/// The proxy's URL inside a sandbox.
pub fn sandbox_proxy_url() -> String {
    format!("http://127.0.0.1:{SANDBOX_PROXY_PORT}")
}

/// Where the gateway sends what is not decided per host.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    /// The agent's declared model endpoint.
    pub model: Option<ModelEndpoint>,
    /// Switchboard's own MCP endpoint (`SWITCHBOARD_MCP_URL`), reached as the path it has.
    pub mcp: Option<url::Url>,
    /// The run's credential, which a tool hook must carry ([`agent_routes`]); `None` refuses
    /// every hook.
    pub credential: Option<String>,
}

/// One run's proxy: it serves until dropped.
pub struct RunProxy {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RunProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What every connection of one run shares.
struct Shared {
    gate: Arc<dyn ToolGate>,
    routes: Routes,
    sink: EventSink,
    /// `host:port`s the run's principal said yes to in this run: not asked again.
    approved: Mutex<HashSet<String>>,
    /// `host:port`s refused in this run, and why: refused again without asking anyone.
    refused: Mutex<std::collections::HashMap<String, String>>,
    /// Held while a host is decided, so a run puts one question at a time to its person.
    deciding: tokio::sync::Mutex<()>,
    /// Moves on when a decision raises the run's taint: every connection decided before then
    /// is closed, and a new one is decided at the new taint.
    epoch: tokio::sync::watch::Sender<u64>,
    /// Model requests of this run in flight at once (each may hold a body of 32 MiB).
    model_turns: tokio::sync::Semaphore,
    /// Agent calls allowed by their hook and the label of what each returns, by the agent's
    /// call id, until their result comes.
    pending: Mutex<Vec<(String, broker::Label)>>,
    /// Hook and MCP bodies of this run being read at once (each may be 8 MiB).
    bodies: tokio::sync::Semaphore,
}

/// The most model requests one run sends through the gateway at once.
const MODEL_TURNS: usize = 4;

/// The most connections one run's proxy serves at once; past it a connection is closed at
/// once (each holds a descriptor of the server's).
const MAX_CONNECTIONS: usize = 64;
/// How long a program has to send its request head.
const HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// How long connecting to Switchboard's own MCP endpoint may take.
const MCP_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl Shared {
    /// What this run already learnt of `key` (`host:port`): the refusal it got, and whether
    /// its person said yes.
    fn remembered(&self, key: &str) -> (Option<String>, bool) {
        let refused = self
            .refused
            .lock()
            .ok()
            .and_then(|refused| refused.get(key).cloned());
        let approved = self
            .approved
            .lock()
            .map(|set| set.contains(key))
            .unwrap_or(false);
        (refused, approved)
    }
}

impl RunProxy {
    /// Binds `socket` (a path in a directory of the run's own) and serves it for the run.
    pub fn start(
        socket: &Path,
        gate: Arc<dyn ToolGate>,
        routes: Routes,
        sink: EventSink,
    ) -> std::io::Result<RunProxy> {
        let listener = UnixListener::bind(socket)?;
        let shared = Arc::new(Shared {
            gate,
            routes,
            sink,
            approved: Mutex::new(HashSet::new()),
            refused: Mutex::new(std::collections::HashMap::new()),
            deciding: tokio::sync::Mutex::new(()),
            epoch: tokio::sync::watch::channel(0).0,
            model_turns: tokio::sync::Semaphore::new(MODEL_TURNS),
            pending: Mutex::new(Vec::new()),
            bodies: tokio::sync::Semaphore::new(MODEL_TURNS),
        });
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    // Out of descriptors, say: the proxy waits and goes on serving, never
                    // stops for good.
                    Err(_) => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // Finished connections are reaped as new ones come.
                while connections.try_join_next().is_some() {}
                if connections.len() >= MAX_CONNECTIONS {
                    drop(stream);
                    continue;
                }
                connections.spawn(serve(stream, shared.clone()));
            }
        });
        Ok(RunProxy { task })
    }
}

/// A refusal as the program reads it: a 403 (or 400 for a malformed request) whose body says
/// why, and the connection closed.
async fn refuse(stream: &mut UnixStream, status: &str, why: &str) {
    let body = format!("switchboard: {why}\n");
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

async fn serve(mut stream: UnixStream, shared: Arc<Shared>) {
    let read = tokio::time::timeout(HEAD_TIMEOUT, head::read_head(&mut stream)).await;
    let (head, rest) = match read {
        Ok(Ok(read)) => read,
        Ok(Err(head::HeadError::Closed)) | Err(_) => return,
        Ok(Err(e)) => {
            shared
                .sink
                .event("network", &format!("refused a request: {e}"))
                .await;
            return refuse(&mut stream, "400 Bad Request", &e.to_string()).await;
        }
    };
    if let Err((status, why)) = route(&mut stream, &head, rest, &shared).await {
        refuse(&mut stream, status, &why).await;
    }
}

/// `host:port` as a URL's authority (an IPv6 address in brackets).
fn authority(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Whether `host:port` is the proxy itself, as the sandbox names it.
fn is_self(host: &str, port: u16) -> bool {
    port == SANDBOX_PROXY_PORT && matches!(host, "127.0.0.1" | "localhost")
}

type Refusal = (&'static str, String);
pub(crate) const FORBIDDEN: &str = "403 Forbidden";

async fn route(
    stream: &mut UnixStream,
    head: &Head,
    rest: Vec<u8>,
    shared: &Shared,
) -> Result<(), Refusal> {
    let model = shared.routes.model.as_ref();
    let model_host = |host: &str, port: u16| model.is_some_and(|m| m.is_host(host, port));
    match &head.target {
        Target::Authority { host, port } if model_host(host, *port) || is_self(host, *port) => {
            Err((
                FORBIDDEN,
                format!(
                    "{} is not tunnelled to: the model endpoint is reached through the gateway ({}), on its API paths only",
                    authority(host, *port),
                    sandbox_proxy_url()
                ),
            ))
        }
        Target::Authority { host, port } => {
            let url = format!("https://{}/", authority(host, *port));
            let (upstream, closed) = open(shared, &url, host, *port).await?;
            upstream::tunnel(stream, upstream, rest, closed).await;
            Ok(())
        }
        Target::Absolute { host, port, path }
            if model_host(host, *port) || is_self(host, *port) =>
        {
            gateway(stream, head, path, rest, shared).await
        }
        Target::Absolute { host, port, path } => {
            // Decided (and shown to an approver) as the host and port: what a yes allows.
            let url = format!("http://{}/", authority(host, *port));
            let (upstream, closed) = open(shared, &url, host, *port).await?;
            let to = authority(host, *port);
            upstream::plain(stream, upstream, head, &to, path, rest, closed).await;
            Ok(())
        }
        Target::Origin { path } => gateway(stream, head, path, rest, shared).await,
    }
}

/// Decides `url`'s host through the run's gate (asking its principal once per host and port
/// in a run), then connects to a checked address; with what closes the connection (the run's
/// taint rising after it was decided).
async fn open(
    shared: &Shared,
    url: &str,
    host: &str,
    port: u16,
) -> Result<(tokio::net::TcpStream, upstream::Closer), Refusal> {
    let key = authority(host, port);
    let (mut earlier, mut approved) = shared.remembered(&key);
    // One question at a time; a host approved already is decided without waiting. What
    // another connection learnt while this one waited counts.
    let turn = match (&earlier, approved) {
        (None, false) => {
            let turn = shared.deciding.lock().await;
            (earlier, approved) = shared.remembered(&key);
            Some(turn)
        }
        _ => None,
    };
    if let Some(why) = earlier {
        return Err((
            FORBIDDEN,
            format!("{why} (earlier in this run; not asked again)"),
        ));
    }
    let decided = shared.gate.network(url, approved, &shared.sink).await;
    // The next host is decided while this one resolves and connects.
    drop(turn);
    let allowed = match decided {
        Ok(allowed) => allowed,
        Err(refusal) => {
            if let Ok(mut refused) = shared.refused.lock() {
                refused.insert(key, refusal.clone());
            }
            return Err((FORBIDDEN, refusal));
        }
    };
    if allowed.person_said_yes
        && let Ok(mut set) = shared.approved.lock()
    {
        set.insert(key.clone());
    }
    if allowed.taint_rose {
        shared.epoch.send_modify(|epoch| *epoch += 1);
    }
    let closed = shared.epoch.subscribe();
    match upstream::connect(host, port, &allowed.literal_hosts).await {
        Ok(tcp) => Ok((tcp, closed)),
        Err(why) => {
            shared
                .sink
                .event("network", &format!("{key}: refused: {why}"))
                .await;
            Err((FORBIDDEN, why))
        }
    }
}

/// A request to the proxy itself: Switchboard's MCP endpoint, or the model's API.
async fn gateway(
    stream: &mut UnixStream,
    head: &Head,
    path: &str,
    rest: Vec<u8>,
    shared: &Shared,
) -> Result<(), Refusal> {
    if let Some(served) = agent_routes::serve(stream, head, path, rest.clone(), shared).await {
        return served;
    }
    if let Some(mcp) = &shared.routes.mcp
        && model::same_route(path, mcp.path())
    {
        if !model::plain_path(path) {
            return Err((
                FORBIDDEN,
                format!("{path} is not a plain path of Switchboard's MCP endpoint"),
            ));
        }
        if mcp.scheme() != "http" {
            return Err((
                "502 Bad Gateway",
                "Switchboard's MCP endpoint is an https URL ([mcp] agent_url), which the proxy does not reach; use the server's own http address".to_owned(),
            ));
        }
        let host = mcp.host_str().unwrap_or_default().trim_matches(['[', ']']);
        let port = mcp.port_or_known_default().unwrap_or(80);
        let connect = tokio::net::TcpStream::connect((host, port));
        let upstream = match tokio::time::timeout(MCP_CONNECT_TIMEOUT, connect).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => {
                return Err((
                    "502 Bad Gateway",
                    format!("Switchboard's MCP endpoint: {e}"),
                ));
            }
            Err(_) => {
                return Err((
                    "504 Gateway Timeout",
                    "Switchboard's MCP endpoint: timed out".to_owned(),
                ));
            }
        };
        // Switchboard's own endpoint: no taint closes it (its sender lives as long as it).
        let (_open, closed) = tokio::sync::watch::channel(0);
        upstream::plain(
            stream,
            upstream,
            head,
            &authority(host, port),
            path,
            rest,
            closed,
        )
        .await;
        return Ok(());
    }
    let Some(endpoint) = &shared.routes.model else {
        return Err((
            FORBIDDEN,
            "this agent declares no model endpoint; a request to the proxy itself goes nowhere"
                .to_owned(),
        ));
    };
    if !endpoint.api.allows(&head.method, path) {
        shared
            .sink
            .event(
                "network",
                &format!(
                    "the model endpoint: refused {} {path}: not its API",
                    head.method
                ),
            )
            .await;
        return Err((
            FORBIDDEN,
            format!(
                "{} {path} is not an API call of the agent's model endpoint ({}); only those are let through",
                head.method,
                endpoint.api.paths().join(", ")
            ),
        ));
    }
    let Ok(_turn) = shared.model_turns.acquire().await else {
        return Err((
            "503 Service Unavailable",
            "the gateway is closing".to_owned(),
        ));
    };
    model::forward(stream, head, path, rest, endpoint).await
}
