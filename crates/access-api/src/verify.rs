//! Who a request is: the Access JWT (the configured header, else the cookie), verified.
//!
//! RS256 only, the key found by `kid` in the issuer's key set; `iss` must equal the issuer,
//! `aud` (a string or a list) must contain the audience, `exp` and `nbf` hold within
//! [`LEEWAY_SECONDS`]. A non-empty `sub` is `access:<sub>`; an empty `sub` with a
//! `common_name` is the service token `access:svc:<common_name>`; neither is refused.
//!
//! A verified token is remembered by its SHA-256 for min(`exp`, the key set's TTL), so a page
//! and its live feed verify once per TTL; it is verified again once a refreshed key set no
//! longer holds its `kid`. Every refusal is one [`Refused`] token for the operator's log; the
//! caller sees the same 401 whatever it was, and the token itself is never logged.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use authz_core::{ActorId, GroupFacts, GroupId};
use axum::http::HeaderMap;
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::jwks::{Jwks, JwksSource};
pub use crate::refused::Refused;

/// How far `exp` and `nbf` may be off (clock skew between the issuer and this server).
pub const LEEWAY_SECONDS: u64 = 30;
/// How many verified tokens are remembered.
const VERIFIED_CAPACITY: u64 = 100_000;
/// The longest token read.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// `[access]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessSettings {
    /// `iss` must equal this.
    pub issuer: String,
    /// `aud` must contain this (the Access application's AUD tag).
    pub audience: String,
    pub jwks: JwksSource,
    /// The header carrying the token (`Cf-Access-Jwt-Assertion`).
    pub header: String,
    /// The cookie read when the header is absent (`CF_Authorization`).
    pub cookie: String,
    /// How long a fetched key set is used.
    pub jwks_ttl: Duration,
    /// `[access] groups_claim`, as a path of claim names: where a token's identity provider
    /// groups are (`group:access:<name>`). `None` reads no groups.
    pub groups_claim: Option<Vec<String>>,
}

/// A verified viewer: the actor its token proves, and when the token expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    pub actor: ActorId,
    /// The groups the token's groups claim names (none without `groups_claim`).
    pub groups: GroupFacts,
    /// `exp`, as Unix seconds.
    pub expires_at: u64,
}

impl Viewer {
    /// How long until the token expires (zero once it has).
    pub fn remaining(&self) -> Duration {
        Duration::from_secs(self.expires_at.saturating_sub(unix_now()))
    }
}

#[derive(Clone)]
struct Verified {
    viewer: Viewer,
    kid: String,
    keep_for: Duration,
}

struct KeepFor;

impl moka::Expiry<[u8; 32], Verified> for KeepFor {
    fn expire_after_create(
        &self,
        _key: &[u8; 32],
        value: &Verified,
        _created_at: std::time::Instant,
    ) -> Option<Duration> {
        Some(value.keep_for)
    }
}

/// Verifies Access JWTs.
pub struct Verifier {
    settings: AccessSettings,
    validation: Validation,
    keys: Jwks,
    verified: moka::sync::Cache<[u8; 32], Verified>,
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    common_name: Option<String>,
    exp: u64,
    /// Every other claim, for the groups claim's path.
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

/// The two header fields read before any key is looked up.
#[derive(Deserialize)]
struct RawHeader {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
}

impl Verifier {
    pub fn new(settings: AccessSettings) -> Self {
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[settings.issuer.as_str()]);
        validation.set_audience(&[settings.audience.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_nbf = true;
        let keys = Jwks::new(settings.jwks.clone(), settings.jwks_ttl);
        Verifier {
            validation,
            keys,
            verified: moka::sync::Cache::builder()
                .max_capacity(VERIFIED_CAPACITY)
                .expire_after(KeepFor)
                .build(),
            settings,
        }
    }

    pub fn settings(&self) -> &AccessSettings {
        &self.settings
    }

    /// The request's one token: the header, else the cookie. Two of either (two cookies of
    /// the name, in one header or in two) is [`Refused::TwoTokens`], whatever their values.
    pub fn token_in<'h>(&self, headers: &'h HeaderMap) -> Result<&'h str, Refused> {
        let mut headed = headers.get_all(self.settings.header.as_str()).iter();
        if let Some(v) = headed.next() {
            if headed.next().is_some() {
                return Err(Refused::TwoTokens);
            }
            let token = v.to_str().map_err(|_| Refused::Malformed)?.trim();
            return if token.is_empty() {
                Err(Refused::Missing)
            } else {
                Ok(token)
            };
        }
        let mut cookies = headers
            .get_all(axum::http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .filter(|(name, _)| *name == self.settings.cookie)
            .map(|(_, value)| value.trim());
        match (cookies.next(), cookies.next()) {
            (Some(_), Some(_)) => Err(Refused::TwoTokens),
            (Some(token), None) if !token.is_empty() => Ok(token),
            _ => Err(Refused::Missing),
        }
    }

    /// The viewer a request's token proves.
    pub async fn viewer(&self, headers: &HeaderMap) -> Result<Viewer, Refused> {
        self.verify(self.token_in(headers)?).await
    }

    /// The viewer `token` proves.
    pub async fn verify(&self, token: &str) -> Result<Viewer, Refused> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refused::Malformed);
        }
        let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // An entry outlives neither its `exp` nor the key set's TTL (its expiry says so).
        if let Some(v) = self.verified.get(&hash) {
            if self.keys.holds(&v.kid) {
                return Ok(v.viewer);
            }
            self.verified.invalidate(&hash);
        }
        let header = raw_header(token)?;
        if header.alg != "RS256" {
            return Err(Refused::BadAlg);
        }
        let kid = header.kid.ok_or(Refused::NoKid)?;
        let key = self.keys.key_for(&kid).await?;
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &self.validation)
            .map_err(|e| refused(e.kind()))?
            .claims;
        let actor = actor_of(&claims)?;
        let viewer = Viewer {
            groups: groups_of(&claims, self.settings.groups_claim.as_deref(), &actor),
            actor,
            expires_at: claims.exp,
        };
        let until_exp = Duration::from_secs(
            claims
                .exp
                .saturating_add(LEEWAY_SECONDS)
                .saturating_sub(unix_now()),
        );
        self.verified.insert(
            hash,
            Verified {
                viewer: viewer.clone(),
                kid,
                keep_for: until_exp.min(self.settings.jwks_ttl),
            },
        );
        Ok(viewer)
    }
}

/// A token's header, read before anything else: `alg` and `kid` only.
fn raw_header(token: &str) -> Result<RawHeader, Refused> {
    let (first, rest) = token.split_once('.').ok_or(Refused::Malformed)?;
    if rest.matches('.').count() != 1 {
        return Err(Refused::Malformed);
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(first.trim_end_matches('='))
        .map_err(|_| Refused::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| Refused::Malformed)
}

fn refused(kind: &ErrorKind) -> Refused {
    match kind {
        ErrorKind::InvalidSignature => Refused::BadSignature,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => Refused::BadAlg,
        ErrorKind::ExpiredSignature => Refused::Expired,
        ErrorKind::ImmatureSignature => Refused::NotYetValid,
        ErrorKind::InvalidAudience => Refused::WrongAudience,
        ErrorKind::InvalidIssuer => Refused::WrongIssuer,
        ErrorKind::MissingRequiredClaim(_) => Refused::MissingClaim,
        _ => Refused::Malformed,
    }
}

/// The most groups one token's claim may name; a longer list is read as none.
const MAX_GROUPS: usize = 256;

/// The groups a verified token's claim at `path` names: a list of names, or one name. A claim
/// of any other shape (objects too: a display name beside an id is not a key the operator
/// chose), or a name that is not a group name, reads as no groups at all (never part of
/// them), with the reason on the log.
fn groups_of(claims: &Claims, path: Option<&[String]>, actor: &ActorId) -> GroupFacts {
    let Some((first, rest)) = path.and_then(<[String]>::split_first) else {
        return GroupFacts::default();
    };
    let mut at = claims.other.get(first);
    for name in rest {
        at = at.and_then(|v| v.get(name));
    }
    let name_of = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    let names: Option<Vec<String>> = match at {
        None => Some(Vec::new()),
        Some(serde_json::Value::Array(items)) if items.len() <= MAX_GROUPS => {
            items.iter().map(name_of).collect()
        }
        Some(v @ serde_json::Value::String(_)) => name_of(v).map(|n| vec![n]),
        Some(_) => None,
    };
    let member_of = names.and_then(|names| {
        names
            .iter()
            .map(|n| GroupId::access(n).ok())
            .collect::<Option<std::collections::BTreeSet<_>>>()
    });
    match member_of {
        Some(member_of) => GroupFacts {
            member_of,
            unresolved: Default::default(),
        },
        None => {
            tracing::warn!(actor = %actor, "[access] the token's groups claim is not a list of group names; it grants no group");
            GroupFacts::default()
        }
    }
}

/// `access:<sub>`, else `access:svc:<common_name>`. A `sub` that would read as a service
/// token (`svc:…`) is refused: a browser session never becomes a service token.
fn actor_of(claims: &Claims) -> Result<ActorId, Refused> {
    let sub = claims.sub.as_deref().unwrap_or_default();
    let id = if !sub.is_empty() {
        if sub.starts_with("svc:") {
            return Err(Refused::BadSubject);
        }
        format!("access:{sub}")
    } else {
        match claims.common_name.as_deref() {
            Some(cn) if !cn.is_empty() => format!("access:svc:{cn}"),
            _ => return Err(Refused::NoSubject),
        }
    };
    ActorId::parse(&id).map_err(|_| Refused::BadSubject)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Entry points for the fuzz targets (`fuzz/`) and their corpus replay: the token's parts
/// read as [`Verifier::verify`] reads them before and after the signature holds. Each refuses
/// or accepts; none may panic.
#[doc(hidden)]
pub mod fuzzing {
    use super::{Claims, actor_of, raw_header};

    /// A token's header: split, base64, JSON, `alg` and `kid`.
    pub fn header(token: &str) -> bool {
        raw_header(token).is_ok()
    }

    /// A verified token's claims: their JSON and the actor they name.
    pub fn claims(json: &[u8]) -> bool {
        serde_json::from_slice::<Claims>(json)
            .ok()
            .is_some_and(|claims| actor_of(&claims).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(sub: Option<&str>, cn: Option<&str>) -> Claims {
        Claims {
            sub: sub.map(str::to_owned),
            common_name: cn.map(str::to_owned),
            exp: 0,
            other: Default::default(),
        }
    }

    #[test]
    fn a_groups_claim_is_a_list_of_names_or_reads_as_no_groups() {
        let actor = ActorId::parse("access:alice").unwrap();
        let path = |p: &str| p.split('.').map(str::to_owned).collect::<Vec<_>>();
        let read = |json: &str, at: &str| -> Vec<String> {
            let claims: Claims = serde_json::from_str(json).unwrap();
            groups_of(&claims, Some(&path(at)), &actor)
                .member_of
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        for (json, at, want) in [
            (
                r#"{"exp":1,"groups":["eng","ops"]}"#,
                "groups",
                vec!["group:access:eng", "group:access:ops"],
            ),
            (
                r#"{"exp":1,"groups":"eng"}"#,
                "groups",
                vec!["group:access:eng"],
            ),
            (
                r#"{"exp":1,"custom":{"groups":["Platform Team"]}}"#,
                "custom.groups",
                vec!["group:access:Platform Team"],
            ),
            // Absent, or at another path: no groups.
            (r#"{"exp":1}"#, "groups", vec![]),
            (r#"{"exp":1,"groups":["eng"]}"#, "custom.groups", vec![]),
            // Any other shape, or one bad name, reads as none at all (never as part).
            (r#"{"exp":1,"groups":7}"#, "groups", vec![]),
            (r#"{"exp":1,"groups":{"eng":true}}"#, "groups", vec![]),
            (r#"{"exp":1,"groups":["eng",7]}"#, "groups", vec![]),
            (r#"{"exp":1,"groups":["eng",""]}"#, "groups", vec![]),
            (r#"{"exp":1,"groups":["eng","a\nb"]}"#, "groups", vec![]),
            (r#"{"exp":1,"groups":[{"id":"1"}]}"#, "groups", vec![]),
            (
                r#"{"exp":1,"groups":[{"id":"1","name":"eng"}]}"#,
                "groups",
                vec![],
            ),
        ] {
            assert_eq!(read(json, at), want, "{json} at {at}");
        }
        let many = format!(
            r#"{{"exp":1,"groups":{:?}}}"#,
            (0..300).map(|i| format!("g{i}")).collect::<Vec<_>>()
        );
        assert!(
            read(&many, "groups").is_empty(),
            "over the bound reads as none"
        );
        let claims: Claims = serde_json::from_str(r#"{"exp":1,"groups":["eng"]}"#).unwrap();
        assert!(
            groups_of(&claims, None, &actor).is_empty(),
            "no groups_claim, no groups"
        );
    }

    #[test]
    fn subjects_become_access_actors_and_nothing_else() {
        for (sub, cn, want) in [
            (Some("3f2a-99"), None, Ok("access:3f2a-99")),
            (Some("3f2a-99"), Some("deploy"), Ok("access:3f2a-99")),
            (
                Some(""),
                Some("deploy.access"),
                Ok("access:svc:deploy.access"),
            ),
            (None, Some("deploy.access"), Ok("access:svc:deploy.access")),
            (None, None, Err(Refused::NoSubject)),
            (Some(""), Some(""), Err(Refused::NoSubject)),
            (Some("svc:deploy"), None, Err(Refused::BadSubject)),
            (Some("a b"), None, Err(Refused::BadSubject)),
            (Some("x\n"), None, Err(Refused::BadSubject)),
        ] {
            let got = actor_of(&claims(sub, cn)).map(|a| a.as_str().to_owned());
            assert_eq!(got, want.map(str::to_owned), "{sub:?} {cn:?}");
        }
    }

    #[test]
    fn headers_that_are_not_an_rs256_jwt_are_refused_before_any_key() {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        for (token, want) in [
            ("".to_owned(), Refused::Malformed),
            ("abc".to_owned(), Refused::Malformed),
            ("a.b".to_owned(), Refused::Malformed),
            ("!!.b.c".to_owned(), Refused::Malformed),
            (format!("{}.e30.", b64("not json")), Refused::Malformed),
            (
                format!("{}.e30.x.y", b64(r#"{"alg":"RS256"}"#)),
                Refused::Malformed,
            ),
        ] {
            assert_eq!(raw_header(&token).err(), Some(want), "{token}");
        }
        let none = raw_header(&format!("{}.e30.", b64(r#"{"alg":"none"}"#))).unwrap();
        assert_eq!((none.alg.as_str(), none.kid), ("none", None));
    }

    #[test]
    fn library_errors_map_to_reason_tokens() {
        assert_eq!(refused(&ErrorKind::ExpiredSignature), Refused::Expired);
        assert_eq!(refused(&ErrorKind::InvalidAudience), Refused::WrongAudience);
        assert_eq!(refused(&ErrorKind::InvalidToken), Refused::Malformed);
        assert_eq!(Refused::UnknownKid.to_string(), "unknown-kid");
    }
}
