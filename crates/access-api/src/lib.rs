//! # access-api: `/api`, the `/runs` pages and their live feed, behind Cloudflare Access
//!
//! What it is: the surface for operators' browsers and service tokens. A request's identity is
//! the Access JWT ([`verify`]): `access:<sub>` or `access:svc:<common_name>`, resolved against
//! the grants table and asking as surface `access`. `GET|POST /api/<command id>` goes to
//! `Registry::invoke` and answers the registry's JSON ([`api`]); the `/runs` pages render the
//! registry's answers as HTML ([`pages`]) and stream live runs as Server-Sent Events from
//! `LiveFeed::subscribe(viewer)` ([`feed`]). A capability token (`/runs/<id>?token=…`) opens
//! one live run's page, stream and stop with no identity. It depends on `commands` and
//! `authz-core` only.
//!
//! What it must never do: decide anything itself (every read and write is a registry command
//! or a capability check in `commands`), say why a token was refused (one 401 body for every
//! reason, the reason token on the `[access]` log line only), log a token, tell a denied run
//! from an unknown one (one 404 page, byte for byte), put unescaped agent text in a page, or
//! act on a cross-site post ([`guard`]).
//!
//! Invariants: a feed hands over only updates the viewer's predicate admits (the dispatcher's
//! subscription filters before this crate sees anything) and closes at the viewer's `exp` and
//! on shutdown; a capability token opens only its own run, only while it is live.

pub mod api;
pub mod feed;
pub mod guard;
pub mod html;
mod jwks;
pub mod pages;
mod refused;
#[cfg(feature = "testing")]
pub mod testing;
pub mod verify;

use std::sync::Arc;
use std::time::Duration;

use authz_core::{ChannelId, Origin, Surface, resolve_actor};
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use commands::{Caller, RawInput, Registry, Reply, RunStatus, Services, Wants};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

pub use jwks::{JwksSource, UNKNOWN_KID_REFETCH};
pub use verify::{AccessSettings, Refused, Verifier, Viewer};

/// The body of every 401.
pub const UNAUTHORIZED: &str = "unauthorized\n";
/// How often an idle feed sends a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What the surface needs.
pub struct AccessApi {
    pub registry: Arc<Registry>,
    pub services: Arc<Services>,
    pub verifier: Arc<Verifier>,
    /// Ends every open feed (the server's shutdown).
    pub shutdown: CancellationToken,
    /// How often an idle feed sends a keep-alive.
    pub keep_alive: Duration,
    /// How often a run's feed reads its run's status from the store, so it ends even when
    /// the notification of the run's end was lost between replicas ([`RECHECK`]).
    pub recheck: Duration,
    /// The largest `POST /api` body.
    pub max_body_bytes: usize,
}

/// A run's feed reads its run's status this often.
pub const RECHECK: Duration = Duration::from_secs(30);

/// The routes: `/api/<id>`, `/runs…`.
pub fn router(api: Arc<AccessApi>) -> Router {
    Router::new()
        .route("/api/{id}", get(api::get).post(api::post))
        .route("/runs", get(pages::index))
        .route("/runs/stream", get(feed::index_stream))
        .route("/runs/scheduled", get(pages::scheduled))
        .route("/runs/assets/style.css", get(pages::style))
        .route("/runs/{id}", get(pages::run))
        .route("/runs/{id}/events", get(pages::events))
        .route("/runs/{id}/friction", get(pages::friction))
        .route("/runs/{id}/stream", get(feed::run_stream))
        .route("/runs/{id}/stop", post(pages::stop))
        .route("/runs/{id}/approvals/{approval}", post(pages::approve))
        .layer(axum::middleware::map_response(html::secure_by_default))
        .with_state(api)
}

impl AccessApi {
    /// Runs command `id` as the caller with `args` (a JSON object; anything else is no
    /// arguments), building the form of the reply the route shows.
    pub(crate) async fn invoke(
        &self,
        caller: &Caller,
        id: &str,
        args: Value,
        wants: Wants,
    ) -> Reply {
        let args = match args {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let raw = RawInput::Json {
            id: id.to_owned(),
            args,
        };
        self.registry
            .invoke_for(caller, raw, &self.services, wants)
            .await
    }

    /// The caller a request's token proves, with the viewer (for the feed's end); else the
    /// one 401, with the reason on the `[access]` log line.
    pub(crate) async fn caller(&self, headers: &HeaderMap) -> Result<(Caller, Viewer), Response> {
        match self.verifier.viewer(headers).await {
            Ok(viewer) => {
                let caller = caller_of(&viewer, &self.services);
                commands::trace::record_actor(&caller);
                Ok((caller, viewer))
            }
            Err(reason) => {
                tracing::warn!(reason = %reason, "[access] refused a request's token");
                Err(unauthorized())
            }
        }
    }
}

/// Whether a run as the registry's JSON shows it (`runs get`, a `runs list` row) is live,
/// read through the store's own spelling of a status.
pub(crate) fn is_live(run: &Value) -> bool {
    run.get("status")
        .and_then(Value::as_str)
        .and_then(|s| RunStatus::parse(s).ok())
        .is_some_and(RunStatus::is_live)
}

/// The caller a verified viewer is: its grants from the table, its own channel as origin.
fn caller_of(viewer: &Viewer, services: &Services) -> Caller {
    let mut actor = resolve_actor(viewer.actor.clone(), &services.table);
    if let Ok(channel) = ChannelId::parse(viewer.actor.as_str()) {
        actor = actor.with_origin(Origin {
            channel_id: channel,
            thread_key: None,
        });
    }
    Caller::new(actor, Surface::Access)
}

/// The one 401: the same short body whatever the reason.
pub fn unauthorized() -> Response {
    let mut r = Response::new(Body::from(UNAUTHORIZED));
    *r.status_mut() = StatusCode::UNAUTHORIZED;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The 403 for a cross-site post.
pub(crate) fn cross_site() -> Response {
    html::text(
        StatusCode::FORBIDDEN,
        "refused: this request came from another site\n".to_owned(),
    )
}
