//! A fake Slack Web API on loopback, for the slack crate's tests and benches and the server's.
//! It answers the methods the surface calls the way Slack does (the
//! `{"ok": …}` envelope, `x-oauth-scopes`, `429` with `Retry-After`), records every call, and
//! signs event bodies with Slack's scheme.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Value, json};

/// What `conversations.info` answers for a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversation {
    Public,
    Private,
    Im,
    Mpim,
    /// `{"ok": false, "error": "missing_scope"}`
    MissingScope,
    /// HTTP 500.
    ServerError,
}

/// One call the fake received.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    /// Query and body parameters, merged.
    pub params: BTreeMap<String, String>,
}

impl Call {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }
}

#[derive(Default)]
struct Inner {
    /// `apps.connections.open`'s answer, once a Socket Mode endpoint is served.
    socket_url: Option<String>,
    /// Envelope ids the Socket Mode client acknowledged.
    acks: Vec<String>,
    calls: Vec<Call>,
    conversations: BTreeMap<String, Conversation>,
    /// user → private channels and group DMs shared with the bot.
    members: BTreeMap<String, BTreeSet<String>>,
    /// user group (`S…`) → its members; any other group is `no_such_subteam`.
    user_groups: BTreeMap<String, BTreeSet<String>>,
    /// How many more calls of a method answer 429.
    rate_limited: BTreeMap<String, usize>,
    /// Methods that always fail with this error.
    failing: BTreeMap<String, String>,
    /// Methods that never answer.
    hanging: BTreeSet<String>,
    /// Methods that answer only after this long.
    slow: BTreeMap<String, std::time::Duration>,
    next_ts: u64,
}

/// The fake API's state, shared with its server.
#[derive(Clone)]
pub struct FakeSlack {
    inner: Arc<Mutex<Inner>>,
    /// Frames for the Socket Mode connections; each goes to one of them.
    frames: Arc<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<String>>>,
    frames_tx: tokio::sync::mpsc::UnboundedSender<String>,
    scopes: Arc<Mutex<String>>,
    pub bot_user: String,
    /// `users.conversations` page size (a small one makes the walk page).
    pub page_size: usize,
}

/// Every scope the surface needs, and the thread history ones.
pub const ALL_SCOPES: &str = "app_mentions:read,channels:read,groups:read,mpim:read,im:history,chat:write,channels:history,groups:history";

impl FakeSlack {
    pub fn new() -> FakeSlack {
        let (frames_tx, rx) = tokio::sync::mpsc::unbounded_channel();
        FakeSlack {
            inner: Arc::default(),
            frames: Arc::new(tokio::sync::Mutex::new(rx)),
            frames_tx,
            scopes: Arc::new(Mutex::new(ALL_SCOPES.to_owned())),
            bot_user: "UBOT".to_owned(),
            page_size: 2,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Serves the fake on an ephemeral loopback port; returns its `api_url`.
    pub async fn serve(&self) -> std::io::Result<String> {
        self.serve_at(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Serves the fake at `addr` (a port a test reserved, so a server can be pointed at it
    /// before it answers); returns its `api_url`.
    pub async fn serve_at(&self, addr: SocketAddr) -> std::io::Result<String> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/api/{method}", any(handle))
            .with_state(self.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(format!("http://{addr}/api/"))
    }

    /// Serves a Socket Mode endpoint (`apps.connections.open` then answers its `ws://` URL):
    /// each connection gets `hello`, then the events [`FakeSlack::push`] sends.
    pub async fn serve_socket(&self) -> std::io::Result<()> {
        use futures_util::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        self.lock().socket_url = Some(format!("ws://{}/link", listener.local_addr()?));
        let fake = self.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let fake = fake.clone();
                tokio::spawn(async move {
                    let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
                        return;
                    };
                    let (mut tx, mut rx) = ws.split();
                    let hello = json!({"type": "hello", "num_connections": 1,
                        "connection_info": {"app_id": "A1"}, "debug_info": {"host": "fake"}});
                    if tx.send(Message::text(hello.to_string())).await.is_err() {
                        return;
                    }
                    loop {
                        let frame = async { fake.frames.lock().await.recv().await };
                        tokio::select! {
                            Some(f) = frame => {
                                if tx.send(Message::text(f)).await.is_err() {
                                    return;
                                }
                            }
                            incoming = rx.next() => match incoming {
                                Some(Ok(Message::Text(t))) => {
                                    let v = serde_json::from_str::<Value>(t.as_str()).unwrap_or_default();
                                    if let Some(id) = v.get("envelope_id").and_then(|e| e.as_str()) {
                                        fake.lock().acks.push(id.to_owned());
                                    }
                                }
                                Some(Ok(_)) => {}
                                _ => return,
                            },
                        }
                    }
                });
            }
        });
        Ok(())
    }

    /// Sends an `event_callback` body over Socket Mode as envelope `envelope_id`.
    pub fn push(&self, envelope_id: &str, body: &[u8]) {
        let payload: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let frame = json!({"type": "events_api", "envelope_id": envelope_id,
            "accepts_response_payload": false, "payload": payload});
        let _ = self.frames_tx.send(frame.to_string());
    }

    /// Sends a button click (an interaction payload) over Socket Mode as envelope
    /// `envelope_id`.
    pub fn push_interactive(&self, envelope_id: &str, payload: &Value) {
        let frame = json!({"type": "interactive", "envelope_id": envelope_id,
            "accepts_response_payload": true, "payload": payload});
        let _ = self.frames_tx.send(frame.to_string());
    }

    /// The envelope ids the client acknowledged.
    pub fn acks(&self) -> Vec<String> {
        self.lock().acks.clone()
    }

    pub fn set_scopes(&self, scopes: &str) {
        *self.scopes.lock().unwrap_or_else(|p| p.into_inner()) = scopes.to_owned();
    }

    pub fn set_conversation(&self, channel: &str, c: Conversation) {
        self.lock().conversations.insert(channel.to_owned(), c);
    }

    pub fn set_members(&self, user: &str, channels: &[&str]) {
        self.lock().members.insert(
            user.to_owned(),
            channels.iter().map(|c| (*c).to_owned()).collect(),
        );
    }

    /// The next `n` calls of `method` answer 429 with `Retry-After: 0`.
    /// The members `usergroups.users.list` answers for `group`.
    pub fn set_user_group(&self, group: &str, users: &[&str]) {
        self.lock().user_groups.insert(
            group.to_owned(),
            users.iter().map(|u| (*u).to_owned()).collect(),
        );
    }

    pub fn rate_limit(&self, method: &str, n: usize) {
        self.lock().rate_limited.insert(method.to_owned(), n);
    }

    /// Every call of `method` hangs (never answers).
    pub fn hang(&self, method: &str) {
        self.lock().hanging.insert(method.to_owned());
    }

    /// Every call of `method` answers only after `delay`.
    pub fn slow(&self, method: &str, delay: std::time::Duration) {
        self.lock().slow.insert(method.to_owned(), delay);
    }

    /// Every call of `method` fails with Slack error `error`.
    pub fn fail(&self, method: &str, error: &str) {
        self.lock()
            .failing
            .insert(method.to_owned(), error.to_owned());
    }

    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }

    /// Waits up to `secs` for `method` to have been called `n` times, and returns its calls
    /// then.
    ///
    /// # Panics
    ///
    /// When the deadline passes first, naming the method and how many calls came, so a test
    /// fails where the wait did rather than at a later assertion.
    pub async fn wait_for(&self, method: &str, n: usize, secs: u64) -> Vec<Call> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let calls = self.calls_of(method);
            if calls.len() >= n {
                return calls;
            }
            assert!(
                tokio::time::Instant::now() <= deadline,
                "{method} was called {} times in {secs} s, not {n}: {calls:?}",
                calls.len()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Waits as [`FakeSlack::wait_for`] does, then a quiet moment more, and returns every
    /// call of `method` by then: for a test asserting there were exactly `n`, so an extra
    /// call that comes just after the `n`th is counted.
    pub async fn settled(&self, method: &str, n: usize, secs: u64) -> Vec<Call> {
        self.wait_for(method, n, secs).await;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        self.calls_of(method)
    }

    fn answer(&self, method: &str, params: &BTreeMap<String, String>) -> Response {
        let mut inner = self.lock();
        inner.calls.push(Call {
            method: method.to_owned(),
            params: params.clone(),
        });
        if let Some(n) = inner.rate_limited.get_mut(method).filter(|n| **n > 0) {
            *n -= 1;
            let mut r = (
                StatusCode::TOO_MANY_REQUESTS,
                [("content-type", "application/json")],
                json!({"ok": false, "error": "ratelimited"}).to_string(),
            )
                .into_response();
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("0"));
            return r;
        }
        if let Some(error) = inner.failing.get(method) {
            return ok_false(error);
        }
        let p = |k: &str| params.get(k).cloned().unwrap_or_default();
        match method {
            "auth.test" => {
                let mut r = json_ok(
                    json!({"ok": true, "url": "https://acme.slack.com/", "team": "Acme",
                    "user": "switchboard", "team_id": "T1", "user_id": self.bot_user, "bot_id": "B1"}),
                );
                let scopes = self
                    .scopes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                if let Ok(v) = HeaderValue::from_str(&scopes) {
                    r.headers_mut().insert("x-oauth-scopes", v);
                }
                r
            }
            "chat.postMessage" | "chat.update" => {
                inner.next_ts += 1;
                let ts = if method == "chat.update" {
                    p("ts")
                } else {
                    format!("1700000000.{:06}", inner.next_ts)
                };
                // What the message was given, so a test can tie an update to its thread.
                if let Some(call) = inner.calls.last_mut() {
                    call.params.insert("posted_ts".to_owned(), ts.clone());
                }
                json_ok(json!({"ok": true, "channel": p("channel"), "ts": ts,
                    "message": {"ts": ts, "text": p("text"), "user": self.bot_user, "bot_id": "B1"}}))
            }
            "apps.connections.open" => match &inner.socket_url {
                Some(url) => json_ok(json!({"ok": true, "url": url})),
                None => ok_false("not_allowed_token_type"),
            },
            "chat.postEphemeral" => json_ok(json!({"ok": true, "message_ts": "1700000000.000001"})),
            "conversations.info" => {
                let channel = p("channel");
                let flags = match inner.conversations.get(&channel).copied() {
                    None | Some(Conversation::Public) => {
                        json!({"is_channel": true, "is_private": false})
                    }
                    Some(Conversation::Private) => json!({"is_group": true, "is_private": true}),
                    Some(Conversation::Im) => json!({"is_im": true, "is_private": true}),
                    Some(Conversation::Mpim) => json!({"is_mpim": true, "is_private": true}),
                    Some(Conversation::MissingScope) => return ok_false("missing_scope"),
                    Some(Conversation::ServerError) => {
                        return (StatusCode::INTERNAL_SERVER_ERROR, "oops").into_response();
                    }
                };
                let mut channel_json =
                    json!({"id": channel, "created": 1_600_000_000, "name": "c"});
                if let (Some(o), Some(f)) = (channel_json.as_object_mut(), flags.as_object()) {
                    o.extend(f.clone());
                }
                json_ok(json!({"ok": true, "channel": channel_json}))
            }
            "users.conversations" => {
                let all: Vec<String> = inner
                    .members
                    .get(&p("user"))
                    .map(|s| s.iter().cloned().collect())
                    .unwrap_or_default();
                let start: usize = p("cursor").parse().unwrap_or(0);
                let page: Vec<Value> = all
                    .iter()
                    .skip(start)
                    .take(self.page_size)
                    .map(|c| json!({"id": c, "created": 1_600_000_000, "is_private": true}))
                    .collect();
                let next = if start + self.page_size < all.len() {
                    (start + self.page_size).to_string()
                } else {
                    String::new()
                };
                json_ok(
                    json!({"ok": true, "channels": page, "response_metadata": {"next_cursor": next}}),
                )
            }
            "usergroups.users.list" => match inner.user_groups.get(&p("usergroup")) {
                Some(users) => json_ok(json!({"ok": true, "users": users})),
                None => ok_false("no_such_subteam"),
            },
            _ => ok_false("unknown_method"),
        }
    }
}

impl Default for FakeSlack {
    fn default() -> Self {
        FakeSlack::new()
    }
}

fn json_ok(v: Value) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn ok_false(error: &str) -> Response {
    json_ok(json!({"ok": false, "error": error}))
}

fn form_pairs(s: &str) -> impl Iterator<Item = (String, String)> + '_ {
    form_urlencoded::parse(s.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned()))
}

async fn handle(
    State(fake): State<FakeSlack>,
    Path(method): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut params: BTreeMap<String, String> =
        form_pairs(query.as_deref().unwrap_or_default()).collect();
    let json = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json {
        if let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(&body) {
            for (k, v) in o {
                let v = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                params.insert(k, v);
            }
        }
    } else if let Ok(text) = std::str::from_utf8(&body) {
        params.extend(form_pairs(text));
    }
    if !headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer "))
    {
        return ok_false("not_authed");
    }
    let (hangs, delay) = {
        let inner = fake.lock();
        (
            inner.hanging.contains(&method),
            inner.slow.get(&method).copied(),
        )
    };
    if hangs {
        std::future::pending::<()>().await;
    }
    // The call is counted when it arrives; its answer leaves after the delay.
    let answer = fake.answer(&method, &params);
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    answer
}

/// An `event_callback` body for `event`.
pub fn callback(event_id: &str, event: Value) -> Vec<u8> {
    json!({"token": "unused", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
        "event_id": event_id, "event_time": 1_700_000_000, "event": event})
    .to_string()
    .into_bytes()
}

/// A `block_actions` payload: `user` clicked the button `action_id` (with its `value`) on the
/// message `message_ts` in thread `thread_ts` of `channel`.
pub fn click(
    user: &str,
    action_id: &str,
    value: &str,
    channel: &str,
    message_ts: &str,
    thread_ts: &str,
) -> Value {
    json!({"type": "block_actions", "api_app_id": "A1", "trigger_id": "1.2.3",
        "team": {"id": "T1", "domain": "acme"},
        "user": {"id": user, "team_id": "T1"},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel,
            "is_ephemeral": false},
        "channel": {"id": channel, "name": "c"},
        "message": {"type": "message", "ts": message_ts, "thread_ts": thread_ts, "text": ""},
        "actions": [{"type": "button", "action_id": action_id, "block_id": "switchboard_approval",
            "value": value, "action_ts": "1700000001.000001"}]})
}

/// An Interactivity request body: `payload` as Slack form-encodes it.
pub fn interaction_form(payload: &Value) -> Vec<u8> {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
        .into_bytes()
}

/// The two headers Slack sends with `body` at `timestamp`.
pub fn signed_headers(secret: &str, timestamp: i64, body: &[u8]) -> [(String, String); 2] {
    let ts = timestamp.to_string();
    let sig = slack_signature(secret, &ts, body);
    [
        ("x-slack-request-timestamp".to_owned(), ts),
        ("x-slack-signature".to_owned(), sig),
    ]
}

/// Slack's request signature, written here from Slack's description of it rather than taken
/// from the surface, so the surface's check is tried against a signer it does not share:
/// `v0=` and the hex HMAC-SHA256, keyed by the signing secret, of `v0:<timestamp>:<body>`.
pub fn slack_signature(secret: &str, timestamp: &str, body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}
