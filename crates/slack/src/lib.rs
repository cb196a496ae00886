//! # slack: Slack mentions and DMs
//!
//! What it is: the Slack surface. Events arrive signed at `POST /slack/events` (or over
//! Socket Mode); `app_mention` in channels, `message` in DMs, and follow-ups in a thread the
//! bot answered become requests of the actor `slack:<user>` with the origin
//! `{ slack:<channel>, thread }`, handled by `Registry::handle`. A command's reply goes to its
//! caller alone outside their own DM (ephemeral, with one line in the thread); a run posts one
//! "working" message in the thread and updates it with the outcome. A person of another
//! workspace (Slack Connect) is refused unless `allow_external_users`, and then holds only
//! their own grants entry.
//! While such a run is live, each tool call its agent asks the requester about is posted in
//! the thread with Approve / Deny buttons, whose clicks arrive signed at
//! `POST /slack/interactions` (or over Socket Mode) ([`approvals`]).
//! [`SlackChannelDirectory`] supplies channel visibility and the user's private-channel
//! memberships behind authz-core's `ChannelDirectory` seam. It depends on `commands` and
//! `authz-core` only (plus slack-morphism and its own small parts).
//!
//! What it must never do: read a body before its signature holds; decide anything (every
//! decision is the registry's `authorize`; memberships are facts the directory supplies,
//! never grants; whose click answers an ask is the approval desk's rule); start a second run
//! for an event id any replica has seen; post a capability link, or a command's reply outside
//! the caller's DM, anywhere but ephemerally to the person who asked; give a person of another
//! workspace the workspace's baseline; post agent text unescaped (no `@channel`, no forged links); log a
//! token, a signature or a body.
//!
//! Invariants: a bad or stale signature is 401 and writes nothing (no event id is spent, no
//! click counts); every accepted event is acknowledged at once with the work spawned; the
//! bot's own messages, other bots', edits, deletes and joins are ignored; a failed lookup is
//! `unknown` visibility and no memberships (deny); a reply that cannot be posted is the run's
//! friction and the run keeps its outcome; a click counts only from the run's principal.
//!
//! ## Modules
//!
//! | module | what it holds |
//! | --- | --- |
//! | `signature` | `SigningSecret`: v0 HMAC-SHA256 over `v0:{ts}:{raw body}`, a 5-minute window, a constant-time compare; `Refused` reason tokens |
//! | `event` | `read(body, bot_user)`: `url_verification` → `Challenge`; `app_mention`, an `im` message and a thread message → `SlackRequest` (the mention stripped, the sender's workspace from `user_team` else `team`); subtypes, bots, edits and the bot's own messages → `Ignore(why)`; malformed, or an event id that is not Slack's shape → `Malformed` (400) |
//! | `text` | the mention stripped; `escape` (`&`, `<`, `>`); `messages`: split on lines under Slack's message size, never cut |
//! | `approvals` | Approve / Deny for a tool call waiting for its person: `offer` (the escaped ask and two buttons whose value is `<run>/<approval>`), posted into the run's thread while `serve` awaits the run (watching `ApprovalDesk::asked`, then reading `pending` for the requester); `read_form` / `read_payload` (a `block_actions` click → `Click`; other interactions and other apps' buttons → `Ignore`; malformed → `BadInteraction`, 400); a click is answered through the desk as `slack:<clicker>`, which counts only the principal's; the message is replaced with who answered, or "no longer waits"; another person's click is told so ephemerally |
//! | `api` | `SlackApi`: slack-morphism's client at `api_url` (https, or http on loopback only); `auth.test` (read directly, for the `x-oauth-scopes` header; the bot's user and team), `apps.connections.open` (the Socket Mode URL), post, update, ephemeral, `conversations.info` → visibility, `users.conversations` (paged) → private channels; `ratelimited` retried after `Retry-After`; each call bounded (then `timeout`); every failure an `ApiFault` token |
//! | `directory` | `SlackChannelDirectory`: moka caches of `(value, fetched_at)` on an injected clock (one lookup per channel or user per TTL, bounded, shared first lookups via `or_insert_with_if`, each run in a task of its own so a caller's bound never cancels it, LRU eviction so a newcomer is always admitted, failures cached as `unknown` / no memberships) |
//! | `lib.rs` | `SlackSurface`: the `/slack/events` and `/slack/interactions` routes (one `signed_body` check: body over the limit → 413, signature → 401 with nothing written, parse → 400, challenge, ignore → 200, a store fault → 503), `accept_within` (`accept` in a task of its own, Slack answered within `ACK_BOUND`: past it a 503 while the acceptance finishes; served at most once either way), `accept` (a follow-up only in an answered thread, from this process's memory or the store's answered threads; `first_delivery` across replicas; the work spawned under a `request` root span), `serve` (the caller with the directory's memberships, `Registry::handle`, the thread replies, the working message updated with the outcome, the ephemeral capability link, reply failures as run friction); a command's reply to its caller alone outside their DM (`reply_to_command`: ephemeral parts, one line in the thread); an outsider (another workspace, `Outsiders`) refused with an audit line, or resolved with `resolve_outsider` |
//! | `socket` | Socket Mode: `apps.connections.open`, then the WebSocket (frames bounded); each `events_api` payload read raw by `event::read` and taken by `accept`, acknowledged once taken (not when its id could not be recorded); each `interactive` payload read by `approvals::read_payload`; `disconnect` or a dropped connection reconnects with a backoff |
//!
//! More invariants: a bad or stale signature spends no event id; one run per event id across
//! replicas and transports; the bot never answers itself; a capability link is only ever
//! ephemeral; a member of a private channel reads its runs with no config entry, and loses them
//! within one TTL of leaving; a person of another workspace never holds the baseline or `slack:*`.
//!
//! Tests: `tests/directory.rs` (the directory against the fake Slack Web API of `test-support`);
//! the surface against the whole App in `crates/server/tests/app/slack_surface.rs`; two
//! replicas in `crates/cli/tests/switchboard/slack_replicas.rs`.
//!
//! Wiring (server's `slack_surface.rs`): `SlackState::build` makes the client and the directory
//! from `[slack]` and `SLACK_*` without I/O (the dispatcher stamps with the directory; a one-shot
//! CLI command never calls Slack); `serve` connects it (`auth.test`), mounts the routes (events
//! mode) or starts Socket Mode; the summary line says on (mode, bot user, missing scopes) or off
//! and why.

pub mod api;
pub mod approvals;
pub mod directory;
pub mod event;
pub mod signature;
mod socket;
pub mod text;

use std::sync::Arc;
use std::time::Duration;

use authz_core::RunId;
use authz_core::{ActorId, ChannelDirectory, GroupFacts, GroupId};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use commands::{Caller, Registry, Services, Surface, Wants};
use tracing::Instrument;

pub use api::{ApiFault, BotIdentity, REQUIRED_SCOPES, SlackApi};
pub use directory::{SlackChannelDirectory, system_clock};
pub use event::{Inbound, SlackRequest, Via};
pub use signature::{Refused, SigningSecret};
pub use socket::{SocketError, start_socket_mode};

/// The largest event body read; Slack's are a few kilobytes.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// How long a request's membership walk may take before it counts as failed (no memberships).
const MEMBERSHIP_BOUND: Duration = authz_core::DIRECTORY_ANSWER_BOUND;
/// How long an event waits for the store before Slack is answered (Slack gives up at 3 s).
pub const ACK_BOUND: Duration = Duration::from_millis(2_500);
/// How many answered threads (for follow-ups without a mention) a process keeps in memory
/// in front of the store's record...
const ANSWERED_THREADS: u64 = 100_000;
/// ...and for how long.
const ANSWERED_FOR: Duration = Duration::from_secs(7 * 24 * 3600);

/// Everything the surface needs, built once at start-up.
pub struct SlackSurface {
    registry: Arc<Registry>,
    services: Arc<Services>,
    api: SlackApi,
    /// Supplies a request's memberships (the Slack directory in production).
    directory: Arc<dyn ChannelDirectory>,
    secret: SigningSecret,
    /// The bot's own user id, from `auth.test`.
    bot_user: String,
    /// The bot's own workspace, from `auth.test`: a sender of another is an outsider.
    bot_team: String,
    outsiders: Outsiders,
    answered: moka::sync::Cache<(String, String), ()>,
}

/// What becomes of a request from a person of another workspace (a Slack Connect channel
/// shared with one): `[slack] allow_external_users`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Outsiders {
    /// Refused with a short reply (the default): nothing but the audit line is recorded.
    #[default]
    Refused,
    /// Served as actors holding only their own grants entry: no Slack baseline, no
    /// `slack:*`.
    OwnEntryOnly,
}

impl SlackSurface {
    pub fn new(
        registry: Arc<Registry>,
        services: Arc<Services>,
        api: SlackApi,
        directory: Arc<dyn ChannelDirectory>,
        secret: SigningSecret,
        bot: &BotIdentity,
        outsiders: Outsiders,
    ) -> Self {
        SlackSurface {
            registry,
            services,
            api,
            directory,
            secret,
            bot_user: bot.user_id.clone(),
            bot_team: bot.team_id.clone(),
            outsiders,
            answered: moka::sync::Cache::builder()
                .max_capacity(ANSWERED_THREADS)
                .time_to_live(ANSWERED_FOR)
                .build(),
        }
    }

    /// The bot's own user id (`auth.test`'s `user_id`).
    pub fn bot_user(&self) -> &str {
        &self.bot_user
    }

    /// The Web API client (Socket Mode connects through it).
    pub fn api(&self) -> &SlackApi {
        &self.api
    }
}

/// The `/slack/events` and `/slack/interactions` routes.
pub fn router(surface: Arc<SlackSurface>) -> Router {
    Router::new()
        .route("/slack/events", post(events))
        .route("/slack/interactions", post(interactions))
        .with_state(surface)
}

/// `POST /slack/events` for `surface`, for a server that holds the surface itself (one that
/// may connect later than it starts serving).
pub async fn handle_events(surface: Arc<SlackSurface>, request: Request) -> Response {
    events(State(surface), request).await
}

/// `POST /slack/interactions` for `surface`, as [`handle_events`].
pub async fn handle_interactions(surface: Arc<SlackSurface>, request: Request) -> Response {
    interactions(State(surface), request).await
}

fn status(code: StatusCode, text: &'static str) -> Response {
    (code, text).into_response()
}

async fn events(State(surface): State<Arc<SlackSurface>>, request: Request) -> Response {
    let body = match surface.signed_body(request, "events").await {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let inbound = match event::read(&body, &surface.bot_user) {
        Ok(i) => i,
        Err(problem) => {
            tracing::warn!(problem = %problem, "[slack] a signed body could not be read");
            return status(StatusCode::BAD_REQUEST, "the body is not a Slack event");
        }
    };
    match inbound {
        Inbound::Challenge(challenge) => {
            let mut r = Response::new(Body::from(challenge));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            r
        }
        Inbound::Ignore(why) => {
            tracing::debug!(why, "[slack] ignored an event");
            StatusCode::OK.into_response()
        }
        Inbound::Request(req) => match surface.accept_within(req, ACK_BOUND).await {
            Ok(()) => StatusCode::OK.into_response(),
            Err(Unrecorded) => status(StatusCode::SERVICE_UNAVAILABLE, "try again"),
        },
    }
}

async fn interactions(State(surface): State<Arc<SlackSurface>>, request: Request) -> Response {
    let body = match surface.signed_body(request, "interactions").await {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    match approvals::read_form(&body) {
        Ok(interaction) => {
            surface.interaction(interaction);
            StatusCode::OK.into_response()
        }
        Err(problem) => {
            tracing::warn!(problem = %problem, "[slack] a signed interaction could not be read");
            status(
                StatusCode::BAD_REQUEST,
                "the body is not a Slack interaction",
            )
        }
    }
}

impl SlackSurface {
    /// The body of a request whose Slack signature holds; else the response refusing it
    /// (401 for a bad or stale signature, 413 for a body over 1 MiB), nothing read further.
    async fn signed_body(
        &self,
        request: Request,
        route: &str,
    ) -> Result<axum::body::Bytes, Response> {
        let (parts, body) = request.into_parts();
        let headers = parts.headers;
        let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
            .await
            .map_err(|_| status(StatusCode::PAYLOAD_TOO_LARGE, "the body is over 1 MiB"))?;
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if let Err(why) = self.secret.verify(
            header("x-slack-request-timestamp"),
            header("x-slack-signature"),
            &body,
            self.services.clock.now().micros() / 1_000_000,
        ) {
            commands::trace::mark_denied();
            tracing::warn!(reason = %why, "[slack] refused an {route} request");
            return Err(StatusCode::UNAUTHORIZED.into_response());
        }
        Ok(body)
    }
}

/// The store could not record or read what deciding to act needs (an event id, an answered
/// thread): nothing starts, and Slack retries the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the event id could not be recorded; nothing started")]
pub struct Unrecorded;

impl SlackSurface {
    /// [`SlackSurface::accept`] within `bound`, Slack's answer meanwhile: past it the caller
    /// gets `Unrecorded` (a 503, so Slack retries) while the acceptance goes on in a task of
    /// its own, never cut in the middle of a store write. If it records the event id, it
    /// starts the work and Slack's retry starts nothing; if it does not, the retry can.
    /// Either way the event is served at most once.
    pub(crate) async fn accept_within(
        self: &Arc<Self>,
        req: SlackRequest,
        bound: Duration,
    ) -> Result<(), Unrecorded> {
        let surface = self.clone();
        // In the request's span: a refusal inside (an outsider) still marks its trace denied.
        let accepting = tokio::spawn(
            async move { surface.accept(req).await }.instrument(tracing::Span::current()),
        );
        match tokio::time::timeout(bound, accepting).await {
            Ok(Ok(accepted)) => accepted,
            Ok(Err(_lost)) => Err(Unrecorded),
            Err(_late) => {
                tracing::warn!(
                    bound_ms = bound.as_millis() as u64,
                    "[slack] the store did not answer within the acknowledgement's bound; Slack was told to retry"
                );
                Err(Unrecorded)
            }
        }
    }

    /// Takes one request: a follow-up only in a thread the bot answered; an event id any
    /// replica has seen starts nothing; otherwise the work is spawned and this returns.
    pub(crate) async fn accept(self: &Arc<Self>, req: SlackRequest) -> Result<(), Unrecorded> {
        if req.is_from_outside(&self.bot_team) && self.outsiders == Outsiders::Refused {
            self.refuse_outsider(req);
            return Ok(());
        }
        if req.via == Via::ThreadMessage && !self.answered(&req).await? {
            tracing::debug!("[slack] ignored a thread message in a thread the bot did not answer");
            return Ok(());
        }
        match self
            .services
            .first_delivery(Surface::Slack, &req.event_id)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!("[slack] a retried event id; nothing starts");
                return Ok(());
            }
            Err(e) => {
                tracing::warn!(error = %e, "[slack] the event id could not be recorded");
                return Err(Unrecorded);
            }
        }
        let surface = self.clone();
        let span = commands::trace::request_span("slack", "event");
        tokio::spawn(async move { surface.serve(req).await }.instrument(span));
        Ok(())
    }

    /// A person of another workspace, refused: the audit line, and a short reply to them
    /// alone. No event id is spent and no run, thread or friction is recorded.
    fn refuse_outsider(self: &Arc<Self>, req: SlackRequest) {
        self.services.audit.deny(commands::AuditLine {
            actor: req.actor.to_string(),
            action: "request".to_owned(),
            resource: "workspace",
            reason: "external-user",
            subject: req.team.clone(),
            detail: "a person of another workspace".to_owned(),
            surface: Surface::Slack.as_str(),
            unresolved_groups: Vec::new(),
        });
        commands::trace::mark_denied();
        let surface = self.clone();
        tokio::spawn(async move {
            let text = "Sorry: this bot serves its own workspace's members only.";
            if let Err(fault) = surface
                .api
                .post_ephemeral(req.conversation(), req.user(), &req.thread_ts, text)
                .await
            {
                tracing::warn!(error = %fault, "[slack] the reply to an outsider could not be posted");
            }
        });
    }

    /// Whether the bot answered the request's thread: this process's memory, else the store
    /// (another replica may have). A store fault is `Unrecorded`: Slack retries later.
    async fn answered(&self, req: &SlackRequest) -> Result<bool, Unrecorded> {
        let key = thread_key(req);
        if self.answered.contains_key(&key) {
            return Ok(true);
        }
        match self
            .services
            .thread_answered(Surface::Slack, req.conversation(), &req.thread_ts)
            .await
        {
            Ok(answered) => {
                if answered {
                    self.answered.insert(key, ());
                }
                Ok(answered)
            }
            Err(e) => {
                tracing::warn!(error = %e, "[slack] whether a thread was answered could not be read");
                Err(Unrecorded)
            }
        }
    }

    /// Remembers that the bot answered the request's thread, here and in the store (once per
    /// thread per process).
    async fn mark_answered(&self, req: &SlackRequest) {
        let key = thread_key(req);
        if self.answered.contains_key(&key) {
            return;
        }
        self.answered.insert(key, ());
        if let Err(e) = self
            .services
            .record_answered_thread(Surface::Slack, req.conversation(), &req.thread_ts)
            .await
        {
            tracing::warn!(error = %e, "[slack] the answered thread was not recorded; follow-ups reach only this replica");
        }
    }

    /// The caller a request proves: `slack:<user>` from the grants table, its origin the
    /// channel and thread, with the memberships the directory supplies for this request.
    async fn caller(&self, req: &SlackRequest) -> Caller {
        let memberships =
            tokio::time::timeout(MEMBERSHIP_BOUND, self.directory.memberships(&req.actor))
                .await
                .unwrap_or_default();
        let from_outside = req.is_from_outside(&self.bot_team);
        // An outsider let in holds only their own entry (never the workspace's baseline or
        // a user group's grants), so their groups are not looked up.
        let groups = match from_outside {
            true => GroupFacts::default(),
            false => self.user_groups(&req.actor).await,
        };
        let at = commands::identity::ChatOrigin {
            channel: req.channel.clone(),
            thread_key: req.thread_ts.clone(),
            memberships: memberships.into_iter().collect(),
            from_outside,
            groups,
        };
        commands::identity::chat_caller(&self.services, Surface::Slack, req.actor.clone(), at)
    }

    /// The user groups the grants table names that `user` is in, from the directory within
    /// the membership bound; a group it could not learn in time is unresolved (grants
    /// nothing, and a refusal's audit line names it).
    async fn user_groups(&self, user: &ActorId) -> GroupFacts {
        let wanted: Vec<GroupId> = self.services.table().slack_groups().cloned().collect();
        if wanted.is_empty() {
            return GroupFacts::default();
        }
        tokio::time::timeout(MEMBERSHIP_BOUND, self.directory.groups(user, &wanted))
            .await
            .unwrap_or_else(|_| GroupFacts {
                member_of: Default::default(),
                unresolved: wanted.iter().cloned().collect(),
            })
    }

    async fn serve(&self, req: SlackRequest) {
        let caller = self.caller(&req).await;
        commands::trace::record_actor(&caller);
        let handled = self
            .registry
            .handle_for(&caller, &req.text, &self.services, Wants::Text)
            .await;
        tracing::Span::current().record("outcome", commands::trace::outcome_of(handled.reply.kind));
        match handled.run {
            None => self.reply_to_command(&req, &handled.reply).await,
            Some(run) => {
                // Watched before anything else, so no ask the agent makes is missed.
                let asked = self.services.approvals.asked();
                let id = run.id().clone();
                let working = self
                    .post(
                        &req,
                        &format!(":hourglass_flowing_sand: working on it (run {id})"),
                    )
                    .await;
                if let Err(fault) = &working {
                    self.friction(&id, "the working message", fault).await;
                }
                if let Some(base) = &self.services.public_url {
                    let link = format!(
                        "Follow run {id} live (only you can see this link): {}",
                        run.link(base)
                    );
                    if let Err(fault) = self
                        .api
                        .post_ephemeral(req.conversation(), req.user(), &req.thread_ts, &link)
                        .await
                    {
                        self.friction(&id, "the capability link", &fault).await;
                    }
                }
                let outcome = match self.finished_offering_asks(&req, run, asked).await {
                    Some(done) => done.text(),
                    None => format!("run {id} ended without an outcome; see `runs get {id}`"),
                };
                self.reply(&req, &outcome, Some((&id, working.ok()))).await;
            }
        }
    }

    async fn post(&self, req: &SlackRequest, text: &str) -> Result<String, ApiFault> {
        let ts = self
            .api
            .post(req.conversation(), &req.thread_ts, &text::escape(text))
            .await?;
        self.mark_answered(req).await;
        Ok(ts)
    }

    /// Posts `text` into the request's thread, split under Slack's limit. For a run, the
    /// first part updates its "working" message; a part that cannot be posted is friction.
    async fn reply(&self, req: &SlackRequest, text: &str, run: Option<(&RunId, Option<String>)>) {
        let parts = text::messages(text, text::MESSAGE_LIMIT);
        self.post_parts(req, &parts, run).await;
    }

    /// Posts messages already escaped into the request's thread, as [`Self::reply`] does.
    async fn post_parts(
        &self,
        req: &SlackRequest,
        parts: &[String],
        run: Option<(&RunId, Option<String>)>,
    ) {
        for (i, part) in parts.iter().enumerate() {
            let sent = match (i, &run) {
                (0, Some((_, Some(ts)))) => self.api.update(req.conversation(), ts, part).await,
                _ => self
                    .api
                    .post(req.conversation(), &req.thread_ts, part)
                    .await
                    .map(|_| ()),
            };
            match sent {
                Ok(()) => self.mark_answered(req).await,
                Err(fault) => match &run {
                    Some((id, _)) => self.friction(id, "a reply", &fault).await,
                    None => {
                        tracing::warn!(error = %fault, "[slack] a command's reply could not be posted")
                    }
                },
            }
        }
    }

    /// A command's reply is for its caller: what the policy let them read is theirs, not the
    /// room's. In their own DM it goes into the thread; anywhere else to them alone
    /// (ephemeral, split across messages, never cut), with one line in the thread saying
    /// so. If it cannot be sent privately it is not posted at all. The Slack users it asks the
    /// caller to turn to (a 🚫's admins) are mentioned; everything else stays escaped.
    async fn reply_to_command(&self, req: &SlackRequest, reply: &commands::Reply) {
        let mentions: Vec<&str> = reply
            .asks()
            .into_iter()
            .filter_map(|id| id.strip_prefix("slack:"))
            .collect();
        let parts = text::messages_mentioning(&reply.text, text::MESSAGE_LIMIT, &mentions);
        if req.in_own_dm() {
            return self.post_parts(req, &parts, None).await;
        }
        let mut sent = true;
        for part in parts {
            if let Err(fault) = self
                .api
                .post_ephemeral(req.conversation(), req.user(), &req.thread_ts, &part)
                .await
            {
                tracing::warn!(error = %fault, "[slack] a command's private reply could not be posted");
                sent = false;
                break;
            }
        }
        let note = if sent {
            PRIVATE_REPLY_NOTE
        } else {
            "The answer could not be sent privately, so it was not posted here: ask again, or ask me in a DM."
        };
        if let Err(fault) = self.post(req, note).await {
            tracing::warn!(error = %fault, "[slack] a command's reply could not be posted");
        }
    }

    pub(crate) async fn friction(&self, run: &RunId, what: &str, fault: &ApiFault) {
        tracing::warn!(run = %run, error = %fault, "[slack] {what} could not be posted");
        let detail = format!("slack: {what} could not be posted ({fault})");
        if let Err(e) = self.services.record_reply_friction(run, &detail).await {
            tracing::warn!(run = %run, error = %e, "[slack] the friction was not recorded");
        }
    }
}

/// The in-memory key of an answered thread.
fn thread_key(req: &SlackRequest) -> (String, String) {
    (req.conversation().to_owned(), req.thread_ts.clone())
}

/// The line a command's reply leaves in a channel's thread when the reply went to its
/// caller alone.
pub const PRIVATE_REPLY_NOTE: &str =
    "Answered privately: only the person who asked can see the reply.";

/// `[slack] api_url`'s default.
pub const DEFAULT_API_URL: &str = "https://slack.com/api/";

/// How events arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlackMode {
    /// `POST /slack/events`, signed.
    Events,
    /// Socket Mode over `SLACK_APP_TOKEN`.
    Socket,
}
