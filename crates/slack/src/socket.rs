//! Socket Mode: the same events and button clicks over a WebSocket, for deployments with no
//! public URL. The connection is opened with the app-level token (`apps.connections.open`,
//! which proves it), and each frame's payload is read **raw**, exactly as a signed HTTP body
//! is: an event by [`event::read`], then taken by [`SlackSurface::accept`] (so the store's
//! event-id check holds across replicas and transports alike); a click by
//! [`approvals::read_payload`]. Nothing is re-serialised through typed events, which drop
//! fields the checks read (`bot_id`, `user_team`).
//!
//! An envelope is acknowledged once it is taken. An event whose id could not be recorded is
//! not acknowledged, so Slack delivers it again. Slack's `disconnect`, a closed or failed
//! connection and an oversized frame reconnect, with a backoff while reconnecting fails.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::{Inbound, MAX_BODY_BYTES, SlackSurface, approvals, event};

/// How long opening a connection (the API call and the WebSocket handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// The first and the longest wait between failed reconnections.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Why Socket Mode could not start.
#[derive(Debug, thiserror::Error)]
#[error("Socket Mode could not connect with SLACK_APP_TOKEN ({0})")]
pub struct SocketError(String);

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects with the app-level token (`xapp-…`) and serves events until `stop`. The first
/// connection is made before this returns, so a bad token is reported at start-up.
pub async fn start_socket_mode(
    surface: Arc<SlackSurface>,
    app_token: &str,
    stop: tokio_util::sync::CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, SocketError> {
    let token = app_token.trim().to_owned();
    let first = connect(&surface, &token).await?;
    Ok(tokio::spawn(serve(surface, token, first, stop)))
}

async fn connect(surface: &SlackSurface, token: &str) -> Result<Socket, SocketError> {
    let opening = async {
        let url = surface
            .api()
            .open_socket(token)
            .await
            .map_err(|fault| SocketError(fault.0))?;
        // A frame is at most what the HTTP route reads, plus the envelope around it.
        let limit = MAX_BODY_BYTES + 64 * 1024;
        let config = WebSocketConfig::default()
            .max_message_size(Some(limit))
            .max_frame_size(Some(limit));
        let (socket, _) =
            tokio_tungstenite::connect_async_with_config(url.as_str(), Some(config), false)
                .await
                .map_err(|_| SocketError("websocket".to_owned()))?;
        Ok(socket)
    };
    tokio::time::timeout(CONNECT_TIMEOUT, opening)
        .await
        .map_err(|_| SocketError("timeout".to_owned()))?
}

async fn serve(
    surface: Arc<SlackSurface>,
    token: String,
    mut socket: Socket,
    stop: tokio_util::sync::CancellationToken,
) {
    loop {
        let stopped = tokio::select! {
            () = stop.cancelled() => true,
            () = read_until_closed(&surface, &mut socket) => false,
        };
        if stopped {
            let _ = socket.close(None).await;
            return;
        }
        let mut backoff = FIRST_BACKOFF;
        socket = loop {
            match connect(&surface, &token).await {
                Ok(next) => break next,
                Err(e) => {
                    tracing::warn!(error = %e, "[slack] Socket Mode reconnection failed; trying again");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        };
    }
}

/// Reads and takes frames until Slack says `disconnect` or the connection ends.
async fn read_until_closed(surface: &Arc<SlackSurface>, socket: &mut Socket) {
    while let Some(frame) = socket.next().await {
        let text = match frame {
            Ok(Message::Text(text)) => text,
            Ok(Message::Close(_)) | Err(_) => return,
            // Pings are answered by the library as the stream is read.
            Ok(_) => continue,
        };
        match take(surface, text.as_str()).await {
            Taken::Acknowledge(id) => {
                let ack = serde_json::json!({ "envelope_id": id }).to_string();
                if socket.send(Message::text(ack)).await.is_err() {
                    return;
                }
            }
            Taken::Unacknowledged => {}
            Taken::Disconnect => return,
        }
    }
}

/// One Socket Mode frame, as much of it as is read; the payload is kept raw.
#[derive(Deserialize)]
struct Frame {
    #[serde(rename = "type")]
    kind: String,
    envelope_id: Option<String>,
    payload: Option<serde_json::Value>,
}

#[derive(Debug, PartialEq, Eq)]
enum Taken {
    Acknowledge(String),
    /// Not acknowledged: Slack delivers it again (or it needs no answer).
    Unacknowledged,
    Disconnect,
}

/// Takes one frame's text.
async fn take(surface: &Arc<SlackSurface>, text: &str) -> Taken {
    let Ok(frame) = serde_json::from_str::<Frame>(text) else {
        tracing::warn!("[slack] a Socket Mode frame could not be read");
        return Taken::Unacknowledged;
    };
    let body = frame
        .payload
        .as_ref()
        .and_then(|p| serde_json::to_vec(p).ok())
        .unwrap_or_default();
    let acknowledge = || {
        frame
            .envelope_id
            .clone()
            .map_or(Taken::Unacknowledged, Taken::Acknowledge)
    };
    match frame.kind.as_str() {
        "hello" => Taken::Unacknowledged,
        "disconnect" => Taken::Disconnect,
        "events_api" => match event::read(&body, surface.bot_user()) {
            Ok(Inbound::Request(req)) => match surface.accept_within(req, crate::ACK_BOUND).await {
                Ok(()) => acknowledge(),
                Err(_) => {
                    tracing::warn!(
                        "[slack] a Socket Mode event was left unacknowledged: its id could not be recorded (Slack delivers it again)"
                    );
                    Taken::Unacknowledged
                }
            },
            Ok(Inbound::Ignore(why)) => {
                tracing::debug!(why, "[slack] ignored an event");
                acknowledge()
            }
            Ok(Inbound::Challenge(_)) => acknowledge(),
            Err(problem) => {
                tracing::warn!(problem = %problem, "[slack] a Socket Mode event could not be read");
                acknowledge()
            }
        },
        "interactive" => {
            match approvals::read_payload(&body) {
                Ok(interaction) => surface.interaction(interaction),
                Err(problem) => {
                    tracing::warn!(problem = %problem, "[slack] a Socket Mode interaction could not be read")
                }
            }
            acknowledge()
        }
        // Slash commands and the rest: acknowledged and left, as over HTTP.
        _ => acknowledge(),
    }
}
