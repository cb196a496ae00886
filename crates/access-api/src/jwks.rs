//! The issuer's signing keys (a JWKS), by `kid`: fetched from a URL or read from a file,
//! kept for the TTL, and fetched again on an unknown `kid` at most once a minute, where the
//! last fetch of any kind counts. So a flood of tokens with made-up `kid`s costs the issuer
//! at most one request a minute.
//!
//! Only RSA keys are kept (RS256 is the only algorithm a token may use). A key set that cannot
//! be had is not replaced by an older one past its TTL: every token is refused until the next
//! fetch succeeds (fail closed).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{OnceLock, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, KeyAlgorithm};

use crate::refused::Refused;

/// An unknown `kid` fetches again only this long after the last fetch of any kind.
pub const UNKNOWN_KID_REFETCH: Duration = Duration::from_secs(60);
/// After a failed fetch, the next one waits this long (every token is refused meanwhile).
const AFTER_FAILURE: Duration = Duration::from_secs(5);
/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest key set read.
const MAX_JWKS_BYTES: usize = 1 << 20;

/// Where the key set comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// `https://<team>.cloudflareaccess.com/cdn-cgi/access/certs` (http only on loopback).
    Url(String),
    /// A file holding the key set (keys distributed by the operator).
    File(PathBuf),
}

#[derive(Default)]
struct KeyState {
    keys: HashMap<String, DecodingKey>,
    /// When the keys now held were fetched.
    loaded_at: Option<Instant>,
    /// When the last fetch of any kind ended, and whether it failed.
    last_fetch: Option<(Instant, bool)>,
}

/// What a lookup does next.
enum Plan {
    Have(DecodingKey),
    Refuse(Refused),
    Fetch,
}

/// The key set, cached.
pub(crate) struct Jwks {
    source: JwksSource,
    ttl: Duration,
    /// Made at the first fetch from a URL: a one-shot CLI command that builds the app never
    /// pays for an HTTP client it does not use.
    client: OnceLock<reqwest::Client>,
    state: RwLock<KeyState>,
    /// One fetch at a time; the others wait for it and read what it brought.
    fetching: tokio::sync::Mutex<()>,
}

impl Jwks {
    pub(crate) fn new(source: JwksSource, ttl: Duration) -> Self {
        Jwks {
            source,
            ttl,
            client: OnceLock::new(),
            state: RwLock::new(KeyState::default()),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// Whether the keys held now, fresh, still include `kid` (a verified token whose key
    /// left the set is verified no longer).
    pub(crate) fn holds(&self, kid: &str) -> bool {
        let Ok(s) = self.state.read() else {
            return false;
        };
        self.is_fresh(&s) && s.keys.contains_key(kid)
    }

    /// The key `kid` names.
    pub(crate) async fn key_for(&self, kid: &str) -> Result<DecodingKey, Refused> {
        if let Some(done) = self.decided(self.plan(kid, true)) {
            return done;
        }
        let _one = self.fetching.lock().await;
        // Another caller may have fetched while this one waited.
        if let Some(done) = self.decided(self.plan(kid, true)) {
            return done;
        }
        self.refresh().await;
        match self.plan(kid, false) {
            Plan::Have(k) => Ok(k),
            Plan::Refuse(r) => Err(r),
            Plan::Fetch => Err(Refused::JwksUnavailable),
        }
    }

    fn decided(&self, plan: Plan) -> Option<Result<DecodingKey, Refused>> {
        match plan {
            Plan::Have(k) => Some(Ok(k)),
            Plan::Refuse(r) => Some(Err(r)),
            Plan::Fetch => None,
        }
    }

    fn is_fresh(&self, s: &KeyState) -> bool {
        s.loaded_at.is_some_and(|t| t.elapsed() < self.ttl)
    }

    fn plan(&self, kid: &str, may_fetch: bool) -> Plan {
        let Ok(s) = self.state.read() else {
            return Plan::Refuse(Refused::JwksUnavailable);
        };
        let since_fetch = s.last_fetch.map(|(t, failed)| (t.elapsed(), failed));
        if self.is_fresh(&s) {
            if let Some(k) = s.keys.get(kid) {
                return Plan::Have(k.clone());
            }
            let may_refetch = since_fetch.is_none_or(|(e, _)| e >= UNKNOWN_KID_REFETCH);
            return if may_fetch && may_refetch {
                Plan::Fetch
            } else {
                Plan::Refuse(Refused::UnknownKid)
            };
        }
        // Stale or never loaded: fetch, unless the last fetch failed just now.
        match since_fetch {
            Some((e, true)) if e < AFTER_FAILURE => Plan::Refuse(Refused::JwksUnavailable),
            _ if may_fetch => Plan::Fetch,
            Some((_, true)) => Plan::Refuse(Refused::JwksUnavailable),
            _ => Plan::Refuse(Refused::UnknownKid),
        }
    }

    /// Fetches the key set and keeps it; a failure is logged and keeps nothing.
    async fn refresh(&self) {
        let fetched = self.fetch().await;
        let Ok(mut s) = self.state.write() else {
            return;
        };
        let now = Instant::now();
        match fetched {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), "[access] fetched the issuer's keys");
                s.keys = keys;
                s.loaded_at = Some(now);
                s.last_fetch = Some((now, false));
            }
            Err(why) => {
                tracing::warn!(
                    reason = why,
                    "[access] the issuer's keys could not be had; tokens are refused until they can"
                );
                s.last_fetch = Some((now, true));
            }
        }
    }

    async fn fetch(&self) -> Result<HashMap<String, DecodingKey>, &'static str> {
        let body = match &self.source {
            JwksSource::Url(url) => {
                let client = match self.client.get() {
                    Some(c) => c,
                    None => {
                        // No redirect is followed: the key set is where the config says, and a
                        // 3xx is a failed fetch like any other status.
                        let built = reqwest::Client::builder()
                            .timeout(FETCH_TIMEOUT)
                            .redirect(reqwest::redirect::Policy::none())
                            .build()
                            .map_err(|_| "jwks-client")?;
                        self.client.get_or_init(|| built)
                    }
                };
                let response = client
                    .get(url)
                    .send()
                    .await
                    .map_err(|_| "jwks-unreachable")?;
                if !response.status().is_success() {
                    return Err("jwks-status");
                }
                read_capped(response).await?
            }
            JwksSource::File(path) => {
                let size = tokio::fs::metadata(path)
                    .await
                    .map_err(|_| "jwks-file-unreadable")?
                    .len();
                if size > MAX_JWKS_BYTES as u64 {
                    return Err("jwks-too-large");
                }
                tokio::fs::read(path)
                    .await
                    .map_err(|_| "jwks-file-unreadable")?
            }
        };
        parse_key_set(&body)
    }
}

/// A response's body as it streams, refused the moment it passes [`MAX_JWKS_BYTES`] (a
/// declared length past it is refused before anything is read).
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, &'static str> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
    {
        return Err("jwks-too-large");
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|_| "jwks-unreadable")? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err("jwks-too-large");
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The RSA keys of a key set, by `kid`. A key without a `kid`, of another type, or declared
/// for another algorithm is left out; a set with no usable key is an error.
pub(crate) fn parse_key_set(body: &[u8]) -> Result<HashMap<String, DecodingKey>, &'static str> {
    #[derive(serde::Deserialize)]
    struct RawSet {
        keys: Vec<serde_json::Value>,
    }
    let set: RawSet = serde_json::from_slice(body).map_err(|_| "jwks-malformed")?;
    // One key of a kind this library does not know leaves the others usable.
    let keys: HashMap<String, DecodingKey> = set
        .keys
        .into_iter()
        .filter_map(|v| serde_json::from_value::<Jwk>(v).ok())
        .filter(|k| matches!(k.algorithm, AlgorithmParameters::RSA(_)))
        .filter(|k| {
            k.common
                .key_algorithm
                .is_none_or(|a| a == KeyAlgorithm::RS256)
        })
        .filter_map(|k| Some((k.common.key_id.clone()?, DecodingKey::from_jwk(&k).ok()?)))
        .collect();
    if keys.is_empty() {
        return Err("jwks-no-rsa-keys");
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::{Jwks, JwksSource, parse_key_set};

    /// Serves `app` on loopback; its base URL.
    async fn serve(app: axum::Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    fn fetcher(url: String) -> Jwks {
        Jwks::new(JwksSource::Url(url), std::time::Duration::from_secs(60))
    }

    /// A redirect is not followed (to a key set that would parse), and a body past 1 MiB is
    /// refused whether it says its length or streams without one.
    #[tokio::test]
    async fn a_fetch_follows_no_redirect_and_streams_with_its_cap() {
        use axum::body::Body;
        use axum::response::{IntoResponse, Redirect};
        use axum::routing::get;
        let big = || "x".repeat(super::MAX_JWKS_BYTES + 1);
        let app = axum::Router::new()
            .route(
                "/moved",
                get(|| async { Redirect::temporary("/elsewhere") }),
            )
            .route("/elsewhere", get(|| async { "{\"keys\": []}" }))
            .route("/declared", get(move || async move { big() }))
            .route(
                "/streamed",
                get(move || async move {
                    let chunks = (0..17).map(|_| Ok::<_, std::io::Error>(vec![b' '; 64 * 1024]));
                    Body::from_stream(futures_util::stream::iter(chunks)).into_response()
                }),
            );
        let base = serve(app).await;
        let got = |path: &'static str| {
            let jwks = fetcher(format!("{base}{path}"));
            async move { jwks.fetch().await.err() }
        };
        assert_eq!(got("/moved").await, Some("jwks-status"));
        assert_eq!(got("/elsewhere").await, Some("jwks-no-rsa-keys"));
        assert_eq!(got("/declared").await, Some("jwks-too-large"));
        assert_eq!(got("/streamed").await, Some("jwks-too-large"));
    }

    #[test]
    fn key_sets_keep_only_usable_rsa_keys() {
        let rsa = r#"{"kty":"RSA","kid":"k1","alg":"RS256","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"}"#;
        let hs = r#"{"kty":"oct","kid":"h1","k":"c2VjcmV0"}"#;
        let es = r#"{"kty":"RSA","kid":"e1","alg":"RS512","n":"sXch","e":"AQAB"}"#;
        let odd = r#"{"kty":"XYZ","kid":"x1"}"#;
        let body = format!(r#"{{"keys":[{rsa},{hs},{es},{odd}]}}"#);
        let keys = parse_key_set(body.as_bytes()).unwrap();
        assert_eq!(keys.keys().collect::<Vec<_>>(), vec!["k1"]);
        for (body, why) in [
            ("", "jwks-malformed"),
            ("{\"keys\": 3}", "jwks-malformed"),
            ("{\"keys\": []}", "jwks-no-rsa-keys"),
            (&format!(r#"{{"keys":[{hs}]}}"#)[..], "jwks-no-rsa-keys"),
        ] {
            assert_eq!(parse_key_set(body.as_bytes()).err(), Some(why), "{body}");
        }
    }
}
