//! The gate in front of rmcp: `Host`, then the bearer, then the session header — all before
//! a byte of the body is read.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use commands::identity::{agent_caller, bearer_caller, bearer_token};
use commands::{Caller, Surface};

use crate::{Mcp, OFF, caller_key};

/// The session header of the Streamable HTTP transport.
const SESSION_HEADER: &str = "mcp-session-id";

/// One `allowed_hosts` entry: a host, and a port when the entry names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    host: String,
    port: Option<u16>,
}

/// Why an `allowed_hosts` entry is not a host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a host: write a host name or address, optionally with :port (\"localhost\", \"127.0.0.1:8080\", \"[::1]\")"
)]
pub struct BadHost(pub String);

impl HostRule {
    /// `localhost`, `mcp.example.com:8443`, `127.0.0.1`, `::1`, `[::1]:8080`.
    pub fn parse(entry: &str) -> Result<HostRule, BadHost> {
        let bad = || BadHost(entry.to_owned());
        let trimmed = entry.trim();
        // A bare IPv6 address (`::1`) has no port; brackets (`[::1]:8080`) allow one.
        if let Ok(v6) = trimmed.parse::<std::net::Ipv6Addr>() {
            return Ok(HostRule {
                host: v6.to_string(),
                port: None,
            });
        }
        let (host, port) = split_authority(trimmed).ok_or_else(bad)?;
        let bracketed = trimmed.starts_with('[');
        let valid = if bracketed {
            host.parse::<std::net::Ipv6Addr>().is_ok()
        } else {
            !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        };
        if !valid {
            return Err(bad());
        }
        Ok(HostRule { host, port })
    }

    fn admits(&self, host: &str, port: Option<u16>) -> bool {
        self.host == host && self.port.is_none_or(|p| Some(p) == port)
    }
}

impl std::fmt::Display for HostRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(p) => write!(f, "{host}:{p}"),
            None => f.write_str(&host),
        }
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port` → the lower-cased host (brackets removed) and the
/// port; `None` when it does not parse.
fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (host, port)
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((host.to_ascii_lowercase(), port))
}

/// Whether the request's `Origin`, when it sends one, names an allowed host (the MCP
/// transport asks servers to check it, against DNS rebinding). `Origin: null`, a value that is
/// not `scheme://authority`, or a host outside `rules` is not.
fn origin_allowed(headers: &HeaderMap, rules: &[HostRule]) -> bool {
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let Some(origin) = origins.next() else {
        return true;
    };
    if origins.next().is_some() {
        return false;
    }
    let authority = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .filter(|(scheme, rest)| matches!(*scheme, "http" | "https") && !rest.contains('/'))
        .map(|(_, authority)| authority);
    let Some((host, port)) = authority.and_then(split_authority) else {
        return false;
    };
    rules.iter().any(|r| r.admits(&host, port))
}

/// Whether the request's `Host` is one of `rules`. A missing or unparsable `Host` is not.
fn host_allowed(headers: &HeaderMap, uri: &axum::http::Uri, rules: &[HostRule]) -> bool {
    let authority = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()));
    let Some((host, port)) = authority.and_then(split_authority) else {
        return false;
    };
    rules.iter().any(|r| r.admits(&host, port))
}

/// The bearer token of an `Authorization` header, if it is one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    bearer_token(headers.get(header::AUTHORIZATION)?.to_str().ok()?)
}

/// The caller a bearer proves: a token of the map, else an agent token whose run is live.
async fn identify(mcp: &Mcp, token: &str) -> Option<Caller> {
    if let Some(caller) = bearer_caller(&mcp.services, Surface::Mcp, token) {
        return Some(caller);
    }
    match agent_caller(&mcp.services, Surface::Mcp, token).await {
        Ok(agent) => Some(agent),
        Err(why) => {
            // A reason token only, for the operator; never the token.
            tracing::debug!(target: "mcp", reason = %why, "[mcp] bearer refused");
            None
        }
    }
}

/// The gate: 400 for two `Host` headers, 403 for a foreign `Host` or `Origin`, 503 without a
/// token map, 401 for an unproven bearer, 404 for a session id; otherwise the request goes on
/// with its [`Caller`] attached.
pub(crate) async fn gate(
    State(mcp): State<Arc<Mcp>>,
    mut request: Request,
    next: Next,
) -> Response {
    if request.headers().get_all(header::HOST).iter().count() > 1 {
        // RFC 9112 §3.2: a request with more than one Host is answered 400.
        return plain(
            StatusCode::BAD_REQUEST,
            "Bad Request: more than one Host header",
        );
    }
    if !origin_allowed(request.headers(), &mcp.settings.allowed_hosts) {
        return plain(
            StatusCode::FORBIDDEN,
            "Forbidden: this Origin is not in [mcp] allowed_hosts",
        );
    }
    if !host_allowed(
        request.headers(),
        request.uri(),
        &mcp.settings.allowed_hosts,
    ) {
        return plain(
            StatusCode::FORBIDDEN,
            "Forbidden: this Host is not in [mcp] allowed_hosts",
        );
    }
    if mcp.services.tokens.is_none() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, OFF);
    }
    let caller = match bearer(request.headers()) {
        Some(token) => identify(&mcp, token).await,
        None => None,
    };
    let Some(caller) = caller else {
        return unauthorized();
    };
    if request.headers().contains_key(SESSION_HEADER) {
        // Stateless: no session is ever issued, so every session id is unknown.
        return plain(StatusCode::NOT_FOUND, "Not Found: Session not found");
    }
    let identity_key = caller_key(&caller);
    // The request's root span names the caller here: rmcp's own spans sit between it and
    // the tool handler.
    commands::trace::record_actor(&caller);
    request.extensions_mut().insert(caller);
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    // The body is read here, once the caller is proven: bounded, and checked to be JSON, so
    // a malformed message gets a JSON-RPC parse error (400) rather than rmcp's 415.
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, mcp.settings.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Payload Too Large: the request is over [mcp] max_body_bytes",
            );
        }
    };
    match read_message(&bytes) {
        Ok(envelope) => {
            if let Some(id) = envelope.cancels() {
                // rmcp drops notifications in stateless mode; the wait it names stops here.
                mcp.waits.cancel(&identity_key, &id);
            }
        }
        Err((code, message)) => return jsonrpc_error(code, message),
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The body as one JSON-RPC 2.0 message, or the JSON-RPC error code and message saying why
/// it is not one.
pub(crate) fn read_message(bytes: &[u8]) -> Result<Envelope, (i64, String)> {
    // An object, first: serde reads a struct from an array too (its fields by position), so
    // `["2.0", "ping"]` would pass as a message (a batch, which this server does not take).
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some_and(|b| *b == b'[') {
        return Err((
            -32600,
            "Invalid Request: a batch (a JSON array) is not taken; send one JSON-RPC 2.0 message, an object".to_owned(),
        ));
    }
    match serde_json::from_slice::<Envelope>(bytes) {
        Ok(envelope) if envelope.is_message() => Ok(envelope),
        Ok(_) => Err((
            -32600,
            "Invalid Request: send one JSON-RPC 2.0 message, an object with \"jsonrpc\": \"2.0\" and a \"method\" (or a response's \"result\" or \"error\")".to_owned(),
        )),
        Err(e) if e.is_syntax() || e.is_eof() => Err((
            -32700,
            format!(
                "Parse error: the body is not valid JSON (line {} column {})",
                e.line(),
                e.column()
            ),
        )),
        Err(_) => Err((
            -32600,
            "Invalid Request: the body must be one JSON-RPC 2.0 message (an object)".to_owned(),
        )),
    }
}

/// What makes a body a JSON-RPC message, read without keeping its params (but the request id
/// a cancellation names).
#[derive(serde::Deserialize)]
pub(crate) struct Envelope {
    jsonrpc: Option<String>,
    method: Option<String>,
    params: Option<EnvelopeParams>,
    result: Option<serde::de::IgnoredAny>,
    error: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
pub(crate) struct EnvelopeParams {
    #[serde(rename = "requestId")]
    request_id: Option<serde_json::Value>,
}

impl Envelope {
    fn is_message(&self) -> bool {
        self.jsonrpc.as_deref() == Some("2.0")
            && (self.method.is_some() || self.result.is_some() || self.error.is_some())
    }

    /// The request id a `notifications/cancelled` names, in its JSON form.
    fn cancels(&self) -> Option<String> {
        if self.method.as_deref() != Some("notifications/cancelled") {
            return None;
        }
        let id = self.params.as_ref()?.request_id.as_ref()?;
        Some(id.to_string())
    }
}

/// A JSON-RPC error with no id, as HTTP 400.
fn jsonrpc_error(code: i64, message: String) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message}
    });
    respond(
        StatusCode::BAD_REQUEST,
        "application/json",
        body.to_string(),
    )
}

fn unauthorized() -> Response {
    let mut r = StatusCode::UNAUTHORIZED.into_response();
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    respond(status, "text/plain; charset=utf-8", text)
}

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Body>) -> Response {
    let mut r = Response::new(body.into());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(entries: &[&str]) -> Vec<HostRule> {
        entries
            .iter()
            .map(|e| HostRule::parse(e).unwrap())
            .collect()
    }

    fn allowed(host: Option<&str>, entries: &[&str]) -> bool {
        let mut h = HeaderMap::new();
        if let Some(host) = host {
            h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        }
        host_allowed(&h, &axum::http::Uri::from_static("/mcp"), &rules(entries))
    }

    #[test]
    fn an_origin_is_taken_only_when_it_names_an_allowed_host() {
        let entries = rules(&["localhost", "mcp.example.com:443"]);
        let with = |origins: &[&str]| {
            let mut h = HeaderMap::new();
            for o in origins {
                h.append(header::ORIGIN, HeaderValue::from_str(o).unwrap());
            }
            origin_allowed(&h, &entries)
        };
        assert!(with(&[]), "no Origin (a script, an SDK) is not a browser's");
        for good in ["http://localhost:6274", "https://mcp.example.com:443"] {
            assert!(with(&[good]), "{good}");
        }
        for bad in [
            "null",
            "https://evil.example",
            "http://localhost.evil.example",
            "https://mcp.example.com",
            "file://localhost",
            "http://localhost/path",
            "localhost",
            "",
        ] {
            assert!(!with(&[bad]), "{bad:?}");
        }
        assert!(
            !with(&["http://localhost", "http://localhost"]),
            "two Origins"
        );
    }

    #[test]
    fn a_batch_is_an_invalid_request_whatever_it_holds() {
        for body in [
            &b"[\"2.0\", \"ping\"]"[..],
            b"  [{\"jsonrpc\": \"2.0\", \"method\": \"ping\", \"id\": 1}]",
            b"[]",
        ] {
            assert_eq!(
                read_message(body).err().map(|e| e.0),
                Some(-32600),
                "{body:?}"
            );
        }
        assert!(read_message(br#"{"jsonrpc": "2.0", "method": "ping", "id": 1}"#).is_ok());
    }

    #[test]
    fn hosts_without_a_port_match_any_port_and_ports_match_exactly() {
        let loopback = ["localhost", "127.0.0.1", "::1"];
        for (host, want) in [
            (Some("localhost"), true),
            (Some("localhost:8080"), true),
            (Some("LOCALHOST:1"), true),
            (Some("127.0.0.1:9"), true),
            (Some("[::1]:8080"), true),
            (Some("[::1]"), true),
            (Some("evil.example"), false),
            (Some("localhost.evil.example"), false),
            (Some("127.0.0.1.nip.io:80"), false),
            (Some("localhost:notaport"), false),
            (Some("[::1"), false),
            (Some(""), false),
            (None, false),
        ] {
            assert_eq!(allowed(host, &loopback), want, "{host:?}");
        }
        let pinned = ["mcp.example.com:8443"];
        assert!(allowed(Some("mcp.example.com:8443"), &pinned));
        assert!(!allowed(Some("mcp.example.com:8080"), &pinned));
        assert!(!allowed(Some("mcp.example.com"), &pinned));
    }

    #[test]
    fn host_rules_parse_or_say_what_is_wrong() {
        for good in [
            "localhost",
            "a.b-c.example:443",
            "::1",
            "[::1]:80",
            "10.0.0.1",
        ] {
            assert!(HostRule::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "a b",
            "host:99999",
            "host:x",
            "[::1",
            "http://x",
            "x/y",
            "a:b:c",
            "not an:ip:v6",
            "[localhost]:80",
            "[::1]x",
        ] {
            let e = HostRule::parse(bad).unwrap_err();
            assert!(e.to_string().contains("is not a host"), "{bad}: {e}");
        }
        assert_eq!(HostRule::parse("[::1]:80").unwrap().to_string(), "[::1]:80");
    }
}
