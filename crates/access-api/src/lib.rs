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
//!
//! ## Modules
//!
//! Dependencies beyond `commands` and `authz-core`: jsonwebtoken, moka and reqwest (for the key
//! set).
//!
//! | module | what it holds |
//! | --- | --- |
//! | `verify` | `Verifier`: the one token from the configured header, else the cookie (two of either: `TwoTokens`, refused); the header's `alg` read first (only `RS256`), the key by `kid`, jsonwebtoken's validation (`iss`, `aud`, `exp`, `nbf`, a small leeway); `sub` → `access:<sub>` (never `svc:…`), else `common_name` → `access:svc:<cn>`; verified tokens cached by SHA-256 (moka, bounded, for min(`exp`, the key set's TTL), dropped when the fresh key set lacks their `kid`) |
//! | `refused` | `Refused`: the reason tokens of the `[access]` log line, shared by the verifier and the key set |
//! | `jwks` | `Jwks`: the key set from a URL or a file, RSA keys by `kid`, kept for the TTL; an unknown `kid` fetches again at most once a minute since the last fetch of any kind; one fetch at a time; a failed fetch keeps nothing (every token refused, retried soon after); its HTTP client is made at the first URL fetch |
//! | `api` | `GET /api/<id>?args` (`:read` commands only, else 405; the query read by `ArgsSchema::object_from_query`) and `POST /api/<id>` (a JSON object, same-origin only) → `Registry::invoke`; the reply's JSON and its status |
//! | `pages/` (`index.rs`, `run.rs`, `changes.rs`, `actions.rs`, `scheduled.rs`: a file per page or section, shared helpers in `mod.rs`) | `/runs` (live: `runs list --status live`; `?all=1`: history with the store's cursor), `/runs/<id>` (`runs get`, `runs events`, `runs friction` as the viewer, or the `Capability`; a finished repo run's Changes from `runs diff`, 5,000 lines at most), `/events`, `/friction` and `/diff` as text, `POST /stop` (`runs stop`, 303 back, 409 finished), the Approve / Deny forms of the asks the opener may answer and `POST /approvals/<approval>` (`ApprovalDesk::answer`: 303, 409 not waiting, 403 not the principal), `/runs/scheduled` (`schedule list`; a firing's run linked when `runs get` as the viewer answers ok); not_found and 🚫 on a run are the one 404 page |
//! | `feed` | SSE from `LiveFeed::subscribe(viewer)` (`sync` from the store after subscribing, then `upsert` / `finished` / `lagged`), one run's feed (`subscribe_run`, after `runs get` as the viewer or the capability check; its `event`s too; ends with the run); keep-alives; ends on shutdown and at the viewer's `exp`; the pages' two scripts |
//! | `guard` | `same_origin`: `Sec-Fetch-Site`, else `Origin` against `Host` or `public_url`, else (no browser) allowed |
//! | `html` | `escape`, the page frame, the headers every page carries (CSP with a per-response script nonce, `Referrer-Policy: no-referrer`, `nosniff`, `DENY` framing, `no-store`), the one 404 page, `utc` |
//! | `testing` (feature) | `SigningKey` (a real RSA key, RS256 tokens, its JWK), `JwksServer` (loopback, counts fetches, rotates), `claims` |
//!
//! More invariants: every refusal is the same 401; a denied run is the unknown-id 404 on `/api`
//! and on the pages, byte for byte; a feed never carries a run its viewer may not read, on one
//! replica or across two; agent text is always escaped; a cross-site post changes nothing.
//!
//! Tests: against the whole App in `crates/server/tests/app/access_surface.rs`; two replicas
//! in `crates/cli/tests/switchboard/access_replicas.rs`; a real browser in `scripts/browser-check.sh`.
//!
//! Wiring (server's `access_surface.rs`): `AccessState::build` makes the verifier from
//! `[access]` (no I/O); the router mounts the routes with the server's shutdown token; the
//! summary line says on (issuer, audience, key source, links) or off and what is missing.

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

use authz_core::Surface;
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
        .route("/runs/{id}/diff", get(pages::diff))
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
        .and_then(RunStatus::from_name)
        .is_some_and(RunStatus::is_live)
}

/// The caller a verified viewer is: its grants from the table, its own channel as origin.
fn caller_of(viewer: &Viewer, services: &Services) -> Caller {
    commands::identity::verified_caller(
        services,
        Surface::Access,
        viewer.actor.clone(),
        viewer.groups.clone(),
    )
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
