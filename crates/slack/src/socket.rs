//! Socket Mode: the same events and button clicks over slack-morphism's WebSocket client,
//! for deployments with no public URL. Each pushed event is read exactly as a signed HTTP
//! body is (after Slack's app-token handshake proved the connection) and taken by
//! [`SlackSurface::accept`], so the store's event-id check holds across replicas and
//! transports alike; each click is read as a `/slack/interactions` payload is.

use std::sync::Arc;

use slack_morphism::prelude::*;

use crate::{Inbound, SlackSurface, approvals, event};

/// Why Socket Mode could not start.
#[derive(Debug, thiserror::Error)]
#[error("Socket Mode could not connect with SLACK_APP_TOKEN ({0})")]
pub struct SocketError(String);

/// Connects with the app-level token (`xapp-…`) and serves events until `stop`.
pub async fn start_socket_mode(
    surface: Arc<SlackSurface>,
    app_token: &str,
    stop: tokio_util::sync::CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, SocketError> {
    let client = surface.api().client();
    let environment = Arc::new(
        SlackClientEventsListenerEnvironment::new(client)
            .with_error_handler(on_error)
            .with_user_state(surface),
    );
    let callbacks = SlackSocketModeListenerCallbacks::new()
        .with_push_events(on_push)
        .with_interaction_events(on_interaction);
    let listener = SlackClientSocketModeListener::new(
        &SlackClientSocketModeConfig::new(),
        environment,
        callbacks,
    );
    let token = SlackApiToken::new(SlackApiTokenValue::new(app_token.trim().to_owned()));
    listener
        .listen_for(&token)
        .await
        .map_err(|e| SocketError(crate::api::ApiFault::of(&e).0))?;
    Ok(tokio::spawn(async move {
        listener.start().await;
        stop.cancelled().await;
        listener.shutdown().await;
    }))
}

fn on_error(
    err: Box<dyn std::error::Error + Send + Sync>,
    _client: Arc<SlackHyperClient>,
    _state: SlackClientEventsUserState,
) -> HttpStatusCode {
    // The error's text may quote a payload; only that it happened is logged.
    let _ = err;
    tracing::warn!("[slack] a Socket Mode event could not be handled");
    HttpStatusCode::OK
}

async fn on_push(
    event: SlackPushEventCallback,
    _client: Arc<SlackHyperClient>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    let Some(surface) = surface_of(&state).await else {
        return Ok(());
    };
    let Some(body) = as_http_body(&event) else {
        tracing::warn!("[slack] a Socket Mode event could not be re-read");
        return Ok(());
    };
    match event::read(&body, surface.bot_user()) {
        Ok(Inbound::Request(req)) => {
            if surface.accept(req).await.is_err() {
                tracing::warn!(
                    "[slack] a Socket Mode event was dropped: its id could not be recorded"
                );
            }
        }
        Ok(Inbound::Ignore(why)) => tracing::debug!(why, "[slack] ignored an event"),
        Ok(Inbound::Challenge(_)) => {}
        Err(problem) => {
            tracing::warn!(problem = %problem, "[slack] a Socket Mode event could not be read")
        }
    }
    Ok(())
}

async fn on_interaction(
    interaction: SlackInteractionEvent,
    _client: Arc<SlackHyperClient>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    let Some(surface) = surface_of(&state).await else {
        return Ok(());
    };
    // Read back through the same reader as a signed `/slack/interactions` payload.
    let Ok(body) = serde_json::to_vec(&interaction) else {
        tracing::warn!("[slack] a Socket Mode interaction could not be re-read");
        return Ok(());
    };
    match approvals::read_payload(&body) {
        Ok(interaction) => surface.interaction(interaction),
        Err(problem) => {
            tracing::warn!(problem = %problem, "[slack] a Socket Mode interaction could not be read")
        }
    }
    Ok(())
}

/// The surface the listener was started for.
async fn surface_of(state: &SlackClientEventsUserState) -> Option<Arc<SlackSurface>> {
    let guard = state.read().await;
    guard.get_user_state::<Arc<SlackSurface>>().cloned()
}

/// The pushed event as the Events API body it stands for.
fn as_http_body(event: &SlackPushEventCallback) -> Option<Vec<u8>> {
    let mut v = serde_json::to_value(event).ok()?;
    v.as_object_mut()?
        .insert("type".to_owned(), serde_json::Value::from("event_callback"));
    serde_json::to_vec(&v).ok()
}
