//! The gateway to a command agent's model endpoint: its API paths only, with the real
//! credential put on by Switchboard. The agent's environment holds a placeholder key and a
//! base URL naming the proxy; whatever key or authorization the agent sends is dropped, so
//! a stolen key is worth nothing and the endpoint cannot carry data to an account the agent
//! chose.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::Refusal;
use super::head::Head;
use super::model_body::{header_passes, reaches_out};

/// The most of a request body the gateway reads (a long conversation is a few MiB).
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// The most raw bytes a chunked body may take to say it (sizes, extensions, trailers).
const MAX_RAW_BYTES: usize = MAX_BODY_BYTES + 1024 * 1024;
/// The longest chunk-size line or trailer a chunked body may hold.
const MAX_CHUNK_LINE: usize = 4096;
/// The most trailer fields a chunked body may end with.
const MAX_TRAILERS: usize = 32;

/// Which API the endpoint speaks: where its paths are, and how its key is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelApi {
    /// Anthropic's Messages API (Claude Code): `x-api-key`.
    Anthropic,
    /// OpenAI's (Codex, any OpenAI-compatible server): `Authorization: Bearer`.
    OpenAi,
}

impl ModelApi {
    pub fn parse(name: &str) -> Option<ModelApi> {
        match name {
            "anthropic" => Some(ModelApi::Anthropic),
            "openai" => Some(ModelApi::OpenAi),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ModelApi::Anthropic => "anthropic",
            ModelApi::OpenAi => "openai",
        }
    }

    /// The API's inference calls, each a method and an exact path (a query may follow): a
    /// model is asked, never the account's stored batches, completions or responses read or
    /// changed. `GET /v1/models/<id>` is the one path with a segment of the caller's.
    pub fn routes(self) -> &'static [(&'static str, &'static str)] {
        match self {
            ModelApi::Anthropic => &[
                ("POST", "/v1/messages"),
                ("POST", "/v1/messages/count_tokens"),
                ("GET", "/v1/models"),
            ],
            ModelApi::OpenAi => &[
                ("POST", "/v1/chat/completions"),
                ("POST", "/v1/responses"),
                ("POST", "/v1/completions"),
                ("POST", "/v1/embeddings"),
                ("GET", "/v1/models"),
            ],
        }
    }

    /// The routes as the refusal names them.
    pub fn paths(self) -> Vec<String> {
        self.routes()
            .iter()
            .map(|(method, path)| format!("{method} {path}"))
            .collect()
    }

    /// Whether `method path` (the path with its query) is one of the API's routes, or
    /// `GET /v1/models/<one plain segment>`. Only plain segments: no `..`, no percent-escape,
    /// nothing a server might read as another path.
    pub fn allows(self, method: &str, path: &str) -> bool {
        let bare = path.split('?').next().unwrap_or_default();
        let model = bare
            .strip_prefix("/v1/models/")
            .is_some_and(|id| !id.is_empty() && !id.contains('/'));
        plain_path(path)
            && ((method == "GET" && model)
                || self
                    .routes()
                    .iter()
                    .any(|(m, p)| *m == method && *p == bare))
    }

    /// The environment variable the agent reads its base URL from, and the base URL it gets.
    pub fn base_url_env(self) -> (&'static str, String) {
        match self {
            ModelApi::Anthropic => ("ANTHROPIC_BASE_URL", super::sandbox_proxy_url()),
            ModelApi::OpenAi => (
                "OPENAI_BASE_URL",
                format!("{}/v1", super::sandbox_proxy_url()),
            ),
        }
    }

    /// The environment variable the agent reads its key from (it gets [`super::PLACEHOLDER_KEY`]).
    pub fn key_env(self) -> &'static str {
        match self {
            ModelApi::Anthropic => "ANTHROPIC_API_KEY",
            ModelApi::OpenAi => "OPENAI_API_KEY",
        }
    }
}

/// Whether `path` (before its query) is plain segments: letters, digits, `-`, `_`, `.`, no
/// `.` or `..` segment, no empty one, no percent-escape; nothing a server might read as
/// another path.
pub fn plain_path(path: &str) -> bool {
    let bare = path.split('?').next().unwrap_or_default();
    bare.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.'))
        && !bare.split('/').any(|s| s == "." || s == "..")
        && !bare.contains("//")
}

/// Whether `path` is `route` or beneath it.
pub fn same_route(path: &str, route: &str) -> bool {
    path.strip_prefix(route)
        .is_some_and(|tail| tail.is_empty() || tail.starts_with('/') || tail.starts_with('?'))
}

/// The key the gateway puts on a model request.
#[derive(Clone, PartialEq, Eq)]
pub enum ModelKey {
    /// None is configured (a local server that needs none): none is sent.
    Unneeded,
    /// The real key, from the server's environment.
    Key(String),
    /// The environment variable the config names is not set: every request is refused,
    /// saying so, and nothing is sent.
    Missing(String),
}

impl std::fmt::Debug for ModelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelKey::Unneeded => f.write_str("Unneeded"),
            ModelKey::Key(_) => f.write_str("Key(…)"),
            ModelKey::Missing(var) => write!(f, "Missing({var})"),
        }
    }
}

/// An agent's declared model endpoint.
#[derive(Debug, Clone)]
pub struct ModelEndpoint {
    pub api: ModelApi,
    /// The endpoint's origin, and any path prefix the API's paths go beneath.
    pub url: url::Url,
    key: ModelKey,
    client: reqwest::Client,
}

impl ModelEndpoint {
    pub fn new(api: ModelApi, url: url::Url, key: ModelKey) -> Result<ModelEndpoint, String> {
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("{url} is not an http(s) URL with a host"));
        }
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("the model endpoint's client: {e}"))?;
        Ok(ModelEndpoint {
            api,
            url,
            key,
            client,
        })
    }

    /// Whether `host:port` is this endpoint's.
    pub fn is_host(&self, host: &str, port: u16) -> bool {
        self.url
            .host_str()
            .is_some_and(|h| h.trim_matches(['[', ']']).eq_ignore_ascii_case(host))
            && self.url.port_or_known_default() == Some(port)
    }

    fn upstream(&self, path: &str) -> String {
        format!("{}{path}", self.url.as_str().trim_end_matches('/'))
    }
}

/// Sends one API request on to the endpoint with the real key, and streams its answer back.
pub async fn forward(
    stream: &mut UnixStream,
    head: &Head,
    path: &str,
    rest: Vec<u8>,
    endpoint: &ModelEndpoint,
) -> Result<(), Refusal> {
    if let ModelKey::Missing(var) = &endpoint.key {
        return Err((
            "502 Bad Gateway",
            format!(
                "the model endpoint's key is not set: the server's environment has no {var} (the operator exports it and restarts)"
            ),
        ));
    }
    // A client that waits to be told to send its body is told so; the expectation is ours.
    if head
        .field("expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
        && stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .is_err()
    {
        return Ok(());
    }
    let body = read_body(stream, head, rest)
        .await
        .map_err(|why| ("400 Bad Request", why))?;
    if let Some(why) = reaches_out(&body) {
        return Err((
            super::FORBIDDEN,
            format!("the model request is refused: {why}"),
        ));
    }
    let method = reqwest::Method::from_bytes(head.method.as_bytes())
        .map_err(|_| ("400 Bad Request", "the method is not one".to_owned()))?;
    let mut request = endpoint.client.request(method, endpoint.upstream(path));
    // Only what the API reads to shape its answer: never the program's own credential, an
    // organisation or project of its choosing, or a length (the body's is sent).
    for (name, value) in head.end_to_end_fields() {
        if header_passes(&name) {
            request = request.header(name, value);
        }
    }
    if let ModelKey::Key(key) = &endpoint.key {
        request = match endpoint.api {
            ModelApi::Anthropic => request.header("x-api-key", key),
            ModelApi::OpenAi => request.bearer_auth(key),
        };
    }
    let mut response = request.body(body).send().await.map_err(|e| {
        (
            "502 Bad Gateway",
            format!(
                "the model endpoint {}: {}",
                endpoint.url,
                if e.is_timeout() {
                    "timed out"
                } else {
                    "could not connect"
                }
            ),
        )
    })?;
    let status = response.status();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    for (name, value) in response.headers() {
        if matches!(
            name.as_str(),
            "connection" | "keep-alive" | "transfer-encoding" | "set-cookie"
        ) {
            continue;
        }
        if let Ok(value) = value.to_str() {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    if stream.write_all(out.as_bytes()).await.is_err() {
        return Ok(());
    }
    while let Ok(Some(chunk)) = response.chunk().await {
        if stream.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = stream.shutdown().await;
    Ok(())
}

/// The request's body: `Content-Length` bytes, or a chunked body decoded, at most
/// [`MAX_BODY_BYTES`].
async fn read_body(stream: &mut UnixStream, head: &Head, rest: Vec<u8>) -> Result<Vec<u8>, String> {
    if let Some(length) = head.field("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| "Content-Length is not a number".to_owned())?;
        if length > MAX_BODY_BYTES {
            return Err(format!("the body is longer than {MAX_BODY_BYTES} bytes"));
        }
        let mut body = rest;
        if body.len() > length {
            return Err("more bytes than Content-Length came before the answer".to_owned());
        }
        let mut more = vec![0u8; length - body.len()];
        stream
            .read_exact(&mut more)
            .await
            .map_err(|_| "the body ended early".to_owned())?;
        body.extend_from_slice(&more);
        return Ok(body);
    }
    match head.field("transfer-encoding") {
        None => Ok(rest),
        Some(te) if te.eq_ignore_ascii_case("chunked") => dechunk(stream, rest).await,
        Some(_) => Err("only the chunked transfer coding is read".to_owned()),
    }
}

/// A chunked body, decoded (chunk extensions and trailers dropped).
async fn dechunk(stream: &mut UnixStream, rest: Vec<u8>) -> Result<Vec<u8>, String> {
    let mut input = rest;
    let mut body = Vec::new();
    let mut at = 0;
    // What was read and decoded is dropped as it goes; its size counts toward the bound.
    let mut raw = 0usize;
    loop {
        let line = line_at(stream, &mut input, at).await?;
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| "a chunk size is not hexadecimal".to_owned())?;
        at += line.len() + 2;
        if size == 0 {
            // Trailers, up to the blank line.
            for _ in 0..=MAX_TRAILERS {
                let trailer = line_at(stream, &mut input, at).await?;
                at += trailer.len() + 2;
                if trailer.is_empty() {
                    return Ok(body);
                }
            }
            return Err("too many trailer fields".to_owned());
        }
        let too_long = || format!("the body is longer than {MAX_BODY_BYTES} bytes");
        let end = body
            .len()
            .checked_add(size)
            .filter(|n| *n <= MAX_BODY_BYTES)
            .and_then(|_| at.checked_add(size))
            .ok_or_else(too_long)?;
        fill(stream, &mut input, end + 2).await?;
        body.extend_from_slice(input.get(at..end).unwrap_or_default());
        if input.get(end..end + 2) != Some(b"\r\n") {
            return Err("a chunk does not end with CRLF".to_owned());
        }
        raw = raw.saturating_add(end + 2);
        input.drain(..end + 2);
        at = 0;
        if raw > MAX_RAW_BYTES {
            return Err(format!(
                "the chunked body takes more than {MAX_RAW_BYTES} bytes to send"
            ));
        }
    }
}

/// The line starting at `at` (without its CRLF), reading more as needed.
async fn line_at(
    stream: &mut UnixStream,
    input: &mut Vec<u8>,
    at: usize,
) -> Result<String, String> {
    loop {
        if let Some(end) = input
            .get(at..)
            .and_then(|tail| tail.windows(2).position(|w| w == b"\r\n"))
        {
            if end > MAX_CHUNK_LINE {
                return Err("a chunk line is too long".to_owned());
            }
            let line = input.get(at..at + end).unwrap_or_default();
            return String::from_utf8(line.to_vec())
                .map_err(|_| "a chunk line is not text".to_owned());
        }
        if input.len().saturating_sub(at) > MAX_CHUNK_LINE {
            return Err("a chunk line is too long".to_owned());
        }
        let want = input.len() + 1;
        fill(stream, input, want).await?;
    }
}

/// Reads until `input` holds at least `len` bytes, never more than [`MAX_RAW_BYTES`] in all.
async fn fill(stream: &mut UnixStream, input: &mut Vec<u8>, len: usize) -> Result<(), String> {
    let mut chunk = [0u8; 16 * 1024];
    if len > MAX_RAW_BYTES {
        return Err(format!(
            "the chunked body takes more than {MAX_RAW_BYTES} bytes to send"
        ));
    }
    while input.len() < len {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading the body: {e}"))?;
        if n == 0 {
            return Err("the body ended early".to_owned());
        }
        input.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_apis_own_paths_pass() {
        let a = ModelApi::Anthropic;
        for (method, ok) in [
            ("POST", "/v1/messages"),
            ("POST", "/v1/messages?beta=true"),
            ("POST", "/v1/messages/count_tokens?beta=true"),
            ("GET", "/v1/models"),
            ("GET", "/v1/models/claude-sonnet-4-5"),
        ] {
            assert!(a.allows(method, ok), "{method} {ok}");
        }
        for (method, refused) in [
            ("GET", "/"),
            ("POST", "/v1"),
            ("POST", "/v1/messagesX"),
            ("POST", "/v1/files"),
            ("POST", "/v1/messages/../files"),
            ("POST", "/v1/messages/%2e%2e/files"),
            ("POST", "/v1/messages//x"),
            ("POST", "/v2/messages"),
            ("POST", "/upload"),
            ("POST", "/v1/chat/completions"),
            ("GET", "/v1/messages"),
            ("DELETE", "/v1/messages"),
            ("GET", "/v1/messages/batches"),
            ("GET", "/v1/messages/batches/msgbatch_1/results"),
            ("POST", "/v1/messages/batches/msgbatch_1/cancel"),
            ("GET", "/v1/models/a/b"),
            ("POST", "/v1/models/x"),
        ] {
            assert!(!a.allows(method, refused), "{method} {refused}");
        }
        let o = ModelApi::OpenAi;
        assert!(o.allows("POST", "/v1/chat/completions"));
        assert!(o.allows("POST", "/v1/responses"));
        for (method, refused) in [
            ("POST", "/v1/files"),
            ("POST", "/v1/messages"),
            ("GET", "/v1/chat/completions"),
            ("GET", "/v1/chat/completions/chatcmpl-1/messages"),
            ("GET", "/v1/responses/resp_1"),
            ("DELETE", "/v1/responses/resp_1"),
        ] {
            assert!(!o.allows(method, refused), "{method} {refused}");
        }
    }

    #[test]
    fn the_endpoint_knows_its_host() {
        let e = ModelEndpoint::new(
            ModelApi::Anthropic,
            url::Url::parse("https://API.anthropic.com").unwrap(),
            ModelKey::Unneeded,
        )
        .unwrap();
        assert!(e.is_host("api.anthropic.com", 443));
        assert!(!e.is_host("api.anthropic.com", 80));
        assert!(!e.is_host("anthropic.com", 443));
        assert_eq!(
            e.upstream("/v1/messages?beta=true"),
            "https://api.anthropic.com/v1/messages?beta=true"
        );
        let prefixed = ModelEndpoint::new(
            ModelApi::OpenAi,
            url::Url::parse("http://127.0.0.1:9/openai/").unwrap(),
            ModelKey::Unneeded,
        )
        .unwrap();
        assert_eq!(
            prefixed.upstream("/v1/models"),
            "http://127.0.0.1:9/openai/v1/models"
        );
        assert!(
            ModelEndpoint::new(
                ModelApi::OpenAi,
                url::Url::parse("ftp://x/").unwrap(),
                ModelKey::Unneeded
            )
            .is_err()
        );
    }
}
