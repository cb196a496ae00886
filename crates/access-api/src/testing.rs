//! For tests and benchmarks (feature `testing`): a real issuer. It holds real 2048-bit RSA
//! keys, mints RS256 JWTs with them, and serves its JWKS on loopback. It counts the fetches,
//! and the key set can be swapped at run time to rotate keys.

// Test support only: a key that cannot be made or signed with is a failed test.
#![allow(clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::routing::get;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rsa::pkcs1::{EncodeRsaPrivateKey, EncodeRsaPublicKey};
use serde_json::{Value, json};

/// One signing key: its `kid`, the private key, and its public JWK.
pub struct SigningKey {
    pub kid: String,
    pub encoding: EncodingKey,
    pub jwk: Value,
    /// The public key, PKCS#1 DER (what an HS256-confusion attack would use as its secret).
    pub public_der: Vec<u8>,
}

impl SigningKey {
    /// A fresh 2048-bit RSA key.
    pub fn generate(kid: &str) -> SigningKey {
        let private = rsa::PrivateKey::new(&mut sysrng::SysRng, 2048).expect("an RSA key");
        let der = private.to_pkcs1_der().expect("PKCS#1 DER");
        let encoding = EncodingKey::from_rsa_der(der.as_bytes());
        let mut jwk = serde_json::to_value(
            Jwk::from_encoding_key(&encoding, Algorithm::RS256).expect("a JWK"),
        )
        .expect("JSON");
        if let Some(fields) = jwk.as_object_mut() {
            fields.insert("kid".into(), json!(kid));
            fields.insert("use".into(), json!("sig"));
        }
        let public_der = private
            .to_public_key()
            .to_pkcs1_der()
            .expect("DER")
            .as_bytes()
            .to_vec();
        SigningKey {
            kid: kid.to_owned(),
            encoding,
            jwk,
            public_der,
        }
    }

    /// An RS256 token with these claims, this key's `kid` in the header.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("a signed token")
    }
}

/// Unix seconds now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Claims for `sub` from `issuer` to `audience`, valid for an hour.
pub fn claims(issuer: &str, audience: &str, sub: &str) -> Value {
    json!({"iss": issuer, "aud": [audience], "sub": sub, "iat": now(), "nbf": now(), "exp": now() + 3600})
}

/// A JWKS served on loopback.
pub struct JwksServer {
    pub addr: SocketAddr,
    set: Arc<Mutex<Value>>,
    hits: Arc<AtomicUsize>,
    down: Arc<std::sync::atomic::AtomicBool>,
}

impl JwksServer {
    /// Serves `keys` at `http://<addr>/certs`.
    pub async fn start(keys: &[&SigningKey]) -> JwksServer {
        let set = Arc::new(Mutex::new(key_set(keys)));
        let hits = Arc::new(AtomicUsize::new(0));
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, h, d) = (set.clone(), hits.clone(), down.clone());
        let app = Router::new().route(
            "/certs",
            get(move || {
                let (s, h, d) = (s.clone(), h.clone(), d.clone());
                async move {
                    h.fetch_add(1, Ordering::SeqCst);
                    if d.load(Ordering::SeqCst) {
                        return (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            [("content-type", "text/plain")],
                            "down".to_owned(),
                        );
                    }
                    let body = s.lock().map(|v| v.to_string()).unwrap_or_default();
                    (
                        axum::http::StatusCode::OK,
                        [("content-type", "application/json")],
                        body,
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        JwksServer {
            addr,
            set,
            hits,
            down,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/certs", self.addr)
    }

    /// How many times the key set was fetched.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Answers 503 from now on (`true`), or the key set again (`false`).
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Serves these keys from now on (a rotation).
    pub fn replace(&self, keys: &[&SigningKey]) {
        if let Ok(mut s) = self.set.lock() {
            *s = key_set(keys);
        }
    }
}

/// `{"keys": [...]}` of these keys' public halves.
pub fn key_set(keys: &[&SigningKey]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()})
}

/// Reads a response's body (a live feed) until `until` is in it or `limit` passes; what it
/// read, as text.
pub async fn read_until(
    response: &mut reqwest::Response,
    until: &str,
    limit: std::time::Duration,
) -> String {
    let mut seen = String::new();
    let _ = tokio::time::timeout(limit, async {
        while let Ok(Some(chunk)) = response.chunk().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains(until) {
                return;
            }
        }
    })
    .await;
    seen
}

/// Whether a response's body (a live feed) ends within `limit`.
pub async fn ends_within(response: &mut reqwest::Response, limit: std::time::Duration) -> bool {
    tokio::time::timeout(limit, async {
        while let Ok(Some(_)) = response.chunk().await {}
    })
    .await
    .is_ok()
}
