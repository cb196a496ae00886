//! The Slack Web API, as this surface uses it: slack-morphism's client at a configurable base
//! URL, every call retried on `ratelimited` (honouring `Retry-After`), every failure a short
//! token for log lines and friction (never a token, never Slack's free text).

use std::collections::BTreeSet;
use std::time::Duration;

use authz_core::ChannelVisibility;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;

/// The scopes the surface needs; a missing one is named at start-up.
pub const REQUIRED_SCOPES: [&str; 6] = [
    "channels:read",
    "groups:read",
    "mpim:read",
    "im:history",
    "chat:write",
    "app_mentions:read",
];

/// Retries of a rate-limited call before it fails.
const RATE_LIMIT_RETRIES: u32 = 3;
/// The longest `Retry-After` honoured; a longer one is waited this long.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// How long one Web API call may take before it fails as `timeout` (Slack answers in well
/// under a second; a hung connection must not hold a reply task forever).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Pages of `users.conversations` read for one user before the walk is called failed.
const MAX_PAGES: usize = 50;

/// A failed call, as a token: `ratelimited`, `api:<slack error>`, `http:<status>`,
/// `timeout`, `transport`, `decode`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ApiFault(pub String);

impl ApiFault {
    /// Whether the call may succeed if made again later with nothing changed on this side:
    /// Slack unreachable, slow, rate-limited or failing on its own side (a 5xx, its
    /// `internal_error`), not a token or an address Slack refused.
    pub fn is_transient(&self) -> bool {
        let token = self.0.as_str();
        matches!(
            token,
            "transport" | "timeout" | "ratelimited" | "decode" | "http:429" | "api:ratelimited"
        ) || token
            .strip_prefix("http:")
            .is_some_and(|s| s.starts_with('5'))
            || matches!(
                token,
                "api:internal_error"
                    | "api:fatal_error"
                    | "api:service_unavailable"
                    | "api:request_timeout"
            )
    }

    /// Whether Slack refused the bot token itself.
    pub fn is_token_refused(&self) -> bool {
        matches!(
            self.0.as_str(),
            "api:invalid_auth"
                | "api:not_authed"
                | "api:account_inactive"
                | "api:token_revoked"
                | "api:token_expired"
                | "api:no_permission"
                | "api:not_allowed_token_type"
        )
    }

    pub(crate) fn of(e: &SlackClientError) -> ApiFault {
        ApiFault(match e {
            SlackClientError::ApiError(a) => format!("api:{}", a.code),
            SlackClientError::HttpError(h) => format!("http:{}", h.status_code.as_u16()),
            SlackClientError::RateLimitError(_) => "ratelimited".to_owned(),
            SlackClientError::ProtocolError(_) => "decode".to_owned(),
            _ => "transport".to_owned(),
        })
    }
}

/// The bot as `auth.test` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotIdentity {
    pub user_id: String,
    /// The bot's own workspace (`team_id`): a sender of another is an outsider.
    pub team_id: String,
    /// Required scopes the token lacks (from the `x-oauth-scopes` response header).
    pub missing_scopes: Vec<&'static str>,
}

type Connector = SlackClientHyperHttpsConnector;

/// A client for one workspace's bot token.
#[derive(Clone)]
pub struct SlackApi {
    client: std::sync::Arc<SlackClient<Connector>>,
    token: SlackApiToken,
    base: String,
    http: reqwest::Client,
    call_timeout: Duration,
}

impl std::fmt::Debug for SlackApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlackApi({})", self.base)
    }
}

impl SlackApi {
    /// A client for `api_url` (`https://slack.com/api/`, or a loopback fake in tests; the
    /// method name is appended). Plain `http` is taken for any URL the config allowed.
    pub fn new(api_url: &str, bot_token: &str) -> Result<SlackApi, ApiFault> {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|_| ApiFault("tls-roots".to_owned()))?
            .https_or_http()
            .enable_http1()
            .build();
        let base = api_url.trim_end_matches('/').to_owned();
        let connector = SlackClientHyperConnector::with_connector(https).with_slack_api_url(&base);
        Ok(SlackApi {
            client: std::sync::Arc::new(SlackClient::new(connector)),
            token: SlackApiToken::new(SlackApiTokenValue::new(bot_token.trim().to_owned())),
            base,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .map_err(|_| ApiFault("transport".to_owned()))?,
            call_timeout: CALL_TIMEOUT,
        })
    }

    /// The same client with another per-call timeout (tests use a short one).
    pub fn with_call_timeout(mut self, timeout: Duration) -> SlackApi {
        self.call_timeout = timeout;
        self
    }

    /// `auth.test`: the bot's user id and the required scopes it lacks. Read directly
    /// because the scopes come in a response header slack-morphism does not surface.
    pub async fn auth_test(&self) -> Result<BotIdentity, ApiFault> {
        let token = self.token.token_value.value().clone();
        let (headers, body) = self.raw_call("auth.test", &token).await?;
        let scopes: BTreeSet<String> = headers
            .get("x-oauth-scopes")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_owned())
            .collect();
        let field = |name: &str| {
            body.get(name)
                .and_then(|u| u.as_str())
                .filter(|u| !u.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| ApiFault("decode".to_owned()))
        };
        let missing_scopes = REQUIRED_SCOPES
            .into_iter()
            .filter(|s| !scopes.contains(*s))
            .collect();
        Ok(BotIdentity {
            user_id: field("user_id")?,
            team_id: field("team_id")?,
            missing_scopes,
        })
    }

    /// `apps.connections.open` with the app-level token: a Socket Mode URL (`wss://…`; plain
    /// `ws://` only from an API reached over plain http, a loopback test double).
    pub async fn open_socket(&self, app_token: &str) -> Result<String, ApiFault> {
        let (_, body) = self
            .raw_call("apps.connections.open", app_token.trim())
            .await?;
        // The scheme, not an actor namespace: a plain-http API is a loopback test double.
        let plain_allowed = self
            .base
            .split_once("://")
            .is_some_and(|(scheme, _)| scheme == "http");
        body.get("url")
            .and_then(|u| u.as_str())
            .filter(|u| u.starts_with("wss://") || (plain_allowed && u.starts_with("ws://")))
            .map(str::to_owned)
            .ok_or_else(|| ApiFault("decode".to_owned()))
    }

    /// One call made directly (a form POST with `token` as the bearer): the response's
    /// headers and its `{"ok": true, …}` body, else the call's fault.
    async fn raw_call(
        &self,
        method: &str,
        token: &str,
    ) -> Result<(reqwest::header::HeaderMap, serde_json::Value), ApiFault> {
        let response = self
            .http
            .post(format!("{}/{method}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .map_err(|_| ApiFault("transport".to_owned()))?;
        if !response.status().is_success() {
            return Err(ApiFault(format!("http:{}", response.status().as_u16())));
        }
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .await
            .map_err(|_| ApiFault("transport".to_owned()))?;
        let body: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|_| ApiFault("decode".to_owned()))?;
        if body.get("ok") != Some(&serde_json::Value::Bool(true)) {
            let code = body
                .get("error")
                .and_then(|e| e.as_str())
                .filter(|c| {
                    c.len() <= 64 && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                })
                .unwrap_or("unknown");
            return Err(ApiFault(format!("api:{code}")));
        }
        Ok((headers, body))
    }

    /// Runs `call` until it is not rate-limited, at most [`RATE_LIMIT_RETRIES`] more times.
    async fn retrying<T, F, Fut>(&self, call: F) -> Result<T, ApiFault>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = ClientResult<T>>,
    {
        let mut attempt = 0;
        loop {
            let err = match tokio::time::timeout(self.call_timeout, call()).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => e,
                Err(_) => return Err(ApiFault("timeout".to_owned())),
            };
            let wait = match &err {
                SlackClientError::RateLimitError(r) => {
                    r.retry_after.unwrap_or(Duration::from_secs(1))
                }
                SlackClientError::ApiError(a) if a.code == "ratelimited" => Duration::from_secs(1),
                _ => return Err(ApiFault::of(&err)),
            };
            if attempt >= RATE_LIMIT_RETRIES {
                return Err(ApiFault::of(&err));
            }
            attempt += 1;
            tokio::time::sleep(wait.min(MAX_RETRY_AFTER)).await;
        }
    }

    fn session(&self) -> SlackClientSession<'_, Connector> {
        self.client.open_session(&self.token)
    }

    fn content(text: &str) -> SlackMessageContent {
        SlackMessageContent::new().with_text(text.to_owned())
    }

    /// `chat.postMessage` into a thread; the new message's `ts`.
    pub async fn post(
        &self,
        channel: &str,
        thread_ts: &str,
        text: &str,
    ) -> Result<String, ApiFault> {
        self.post_content(channel, thread_ts, Self::content(text))
            .await
    }

    /// `chat.postMessage` of Block Kit `blocks` (with `text` as the notification fallback)
    /// into a thread; the new message's `ts`. Blocks that are not Block Kit are `encode`.
    pub async fn post_blocks(
        &self,
        channel: &str,
        thread_ts: &str,
        text: &str,
        blocks: serde_json::Value,
    ) -> Result<String, ApiFault> {
        let blocks: Vec<SlackBlock> =
            serde_json::from_value(blocks).map_err(|_| ApiFault("encode".to_owned()))?;
        self.post_content(channel, thread_ts, Self::content(text).with_blocks(blocks))
            .await
    }

    async fn post_content(
        &self,
        channel: &str,
        thread_ts: &str,
        content: SlackMessageContent,
    ) -> Result<String, ApiFault> {
        let req = SlackApiChatPostMessageRequest::new(channel.into(), content)
            .with_thread_ts(thread_ts.into());
        let res = self
            .retrying(|| {
                let req = &req;
                async move { self.session().chat_post_message(req).await }
            })
            .await?;
        Ok(res.ts.0)
    }

    /// `chat.update` of a message this bot posted.
    pub async fn update(&self, channel: &str, ts: &str, text: &str) -> Result<(), ApiFault> {
        self.update_content(channel, ts, Self::content(text)).await
    }

    /// `chat.update` of a message this bot posted with blocks: `text` replaces it whole (its
    /// buttons go).
    pub async fn replace(&self, channel: &str, ts: &str, text: &str) -> Result<(), ApiFault> {
        self.update_content(channel, ts, Self::content(text).with_blocks(Vec::new()))
            .await
    }

    async fn update_content(
        &self,
        channel: &str,
        ts: &str,
        content: SlackMessageContent,
    ) -> Result<(), ApiFault> {
        let req = SlackApiChatUpdateRequest::new(channel.into(), content, ts.into());
        self.retrying(|| {
            let req = &req;
            async move { self.session().chat_update(req).await }
        })
        .await
        .map(|_| ())
    }

    /// `chat.postEphemeral`: seen only by `user`.
    pub async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        thread_ts: &str,
        text: &str,
    ) -> Result<(), ApiFault> {
        let req =
            SlackApiChatPostEphemeralRequest::new(channel.into(), user.into(), Self::content(text))
                .with_thread_ts(thread_ts.into());
        self.retrying(|| {
            let req = &req;
            async move { self.session().chat_post_ephemeral(req).await }
        })
        .await
        .map(|_| ())
    }

    /// `conversations.info`: `is_im`/`is_mpim` → dm, `is_private` → private, else public.
    pub async fn visibility(&self, channel: &str) -> Result<ChannelVisibility, ApiFault> {
        let req = SlackApiConversationsInfoRequest::new(channel.into());
        let res = self
            .retrying(|| {
                let req = &req;
                async move { self.session().conversations_info(req).await }
            })
            .await?;
        let f = &res.channel.flags;
        Ok(if f.is_im == Some(true) || f.is_mpim == Some(true) {
            ChannelVisibility::Dm
        } else if f.is_private == Some(true) {
            ChannelVisibility::Private
        } else {
            ChannelVisibility::Public
        })
    }

    /// `usergroups.users.list` (`usergroup=<S…>`): the user group's members (needs the
    /// `usergroups:read` scope).
    pub async fn user_group_members(&self, group: &str) -> Result<BTreeSet<String>, ApiFault> {
        let req = SlackApiUserGroupsUsersListRequest::new(SlackUserGroupId(group.to_owned()));
        let res = self
            .retrying(|| {
                let req = &req;
                async move { self.session().usergroups_users_list(req).await }
            })
            .await?;
        Ok(res.users.into_iter().map(|u| u.0).collect())
    }

    /// `users.conversations` (`user=<U>`, `types=private_channel,mpim`), every page: the
    /// private channels and group DMs a user shares with the bot.
    pub async fn private_channels_of(&self, user: &str) -> Result<BTreeSet<String>, ApiFault> {
        let mut out = BTreeSet::new();
        let mut cursor: Option<SlackCursorId> = None;
        for _ in 0..MAX_PAGES {
            let req = SlackApiUsersConversationsRequest::new()
                .with_user(user.into())
                .with_types(vec![
                    SlackConversationType::Private,
                    SlackConversationType::Mpim,
                ])
                .with_limit(200)
                .opt_cursor(cursor.clone());
            let res = self
                .retrying(|| {
                    let req = &req;
                    async move { self.session().users_conversations(req).await }
                })
                .await?;
            out.extend(res.channels.into_iter().map(|c| c.id.0));
            cursor = res
                .response_metadata
                .and_then(|m| m.next_cursor)
                .filter(|c| !c.0.is_empty());
            if cursor.is_none() {
                return Ok(out);
            }
        }
        Err(ApiFault("too-many-pages".to_owned()))
    }
}
