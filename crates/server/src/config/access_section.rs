//! `[access]`: the raw section, its typed config and its checks.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::numbers::Positive;
use super::urls::{is_base_url, secret_safe_fault};
use super::{LoadError, Text};

/// `[access]`: on when `issuer` and `audience` are both set.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessSection {
    pub issuer: Option<Spanned<String>>,
    pub audience: Option<Spanned<String>>,
    pub jwks_url: Option<Spanned<String>>,
    pub jwks_file: Option<Spanned<PathBuf>>,
    pub header: Option<Spanned<String>>,
    pub cookie: Option<Spanned<String>>,
    pub jwks_ttl_seconds: Option<Positive>,
    pub groups_claim: Option<Spanned<String>>,
}

/// `[access]`, checked. The surface is on when `issuer` and `audience` are both set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessConfig {
    pub issuer: Option<String>,
    pub audience: Option<String>,
    /// The key set: `jwks_url`, `jwks_file`, or `<issuer>/cdn-cgi/access/certs`.
    pub jwks: Option<access_api::JwksSource>,
    pub header: String,
    pub cookie: String,
    pub jwks_ttl: Duration,
    /// The claim path (`groups`, `custom.groups`) a token's groups are read from; none reads
    /// no groups.
    pub groups_claim: Option<Vec<String>>,
}

impl AccessConfig {
    /// The verifier's settings, or what the surface still needs to be on.
    pub fn settings(&self) -> Result<access_api::AccessSettings, &'static str> {
        let (issuer, audience) = match (&self.issuer, &self.audience) {
            (Some(i), Some(a)) => (i.clone(), a.clone()),
            (None, Some(_)) => return Err("[access] issuer"),
            (Some(_), None) => return Err("[access] audience"),
            (None, None) => return Err("[access] issuer and audience"),
        };
        Ok(access_api::AccessSettings {
            issuer,
            audience,
            jwks: self.jwks.clone().ok_or("[access] jwks_url or jwks_file")?,
            header: self.header.clone(),
            cookie: self.cookie.clone(),
            jwks_ttl: self.jwks_ttl,
            groups_claim: self.groups_claim.clone(),
        })
    }
}

fn non_empty(t: &Text<'_>, v: &Option<toml::Spanned<String>>) -> Result<Option<String>, LoadError> {
    match v {
        None => Ok(None),
        Some(s) if s.get_ref().trim().is_empty() => Err(t.at(
            s.span().start,
            "must not be empty; remove the key to leave it unset",
        )),
        Some(s) => Ok(Some(s.get_ref().clone())),
    }
}

/// `[access]`: an https key-set URL (http on loopback only) or a file, not both; a header
/// name and a cookie name that are names; a TTL of at least a second.
pub(super) fn access_config(t: &Text<'_>, s: &AccessSection) -> Result<AccessConfig, LoadError> {
    let issuer = non_empty(t, &s.issuer)?;
    let audience = non_empty(t, &s.audience)?;
    let jwks = match (&s.jwks_url, &s.jwks_file) {
        (Some(url), Some(_)) => {
            return Err(t.at(url.span().start, "set jwks_url or jwks_file, not both"));
        }
        (Some(url), None) => {
            let u = url.get_ref();
            if let Some(why) = secret_safe_fault(u) {
                return Err(t.at(
                    url.span().start,
                    format!("must be the issuer's https key-set URL, like \"https://acme.cloudflareaccess.com/cdn-cgi/access/certs\" (http only on a loopback host); here {why}"),
                ));
            }
            Some(access_api::JwksSource::Url(u.clone()))
        }
        (None, Some(file)) => Some(access_api::JwksSource::File(file.get_ref().clone())),
        (None, None) => match &issuer {
            Some(i) if i.starts_with("https://") && is_base_url(i) => {
                Some(access_api::JwksSource::Url(format!(
                    "{}/cdn-cgi/access/certs",
                    i.trim_end_matches('/')
                )))
            }
            Some(_) => {
                let at = s.issuer.as_ref().map_or(0, |i| i.span().start);
                return Err(t.at(
                    at,
                    "is not an https URL, so the key set cannot be found from it; set jwks_url or jwks_file",
                ));
            }
            None => None,
        },
    };
    let header = match &s.header {
        Some(h) if axum::http::HeaderName::from_bytes(h.get_ref().as_bytes()).is_err() => {
            return Err(t.at(
                h.span().start,
                "must be an HTTP header name, like \"Cf-Access-Jwt-Assertion\"",
            ));
        }
        Some(h) => h.get_ref().to_ascii_lowercase(),
        None => "cf-access-jwt-assertion".to_owned(),
    };
    let cookie = match &s.cookie {
        Some(c)
            if c.get_ref().is_empty()
                || !c
                    .get_ref()
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b)) =>
        {
            return Err(t.at(
                c.span().start,
                "must be a cookie name (letters, digits, `_`, `-`, `.`), like \"CF_Authorization\"",
            ));
        }
        Some(c) => c.get_ref().clone(),
        None => "CF_Authorization".to_owned(),
    };
    let groups_claim = match &s.groups_claim {
        None => None,
        Some(path) => Some(claim_path(path.get_ref()).ok_or_else(|| {
            t.at(
                path.span().start,
                "must be a claim name, or a dotted path to one (\"groups\", \"custom.groups\"): non-empty names of letters, digits, `_`, `-` or `:`, joined by `.`",
            )
        })?),
    };
    Ok(AccessConfig {
        groups_claim,
        issuer,
        audience,
        jwks,
        header,
        cookie,
        jwks_ttl: s
            .jwks_ttl_seconds
            .map_or(Duration::from_secs(3600), |n| n.seconds()),
    })
}

/// A dotted claim path's names, each non-empty and plain.
fn claim_path(path: &str) -> Option<Vec<String>> {
    let names: Vec<String> = path.split('.').map(str::to_owned).collect();
    let plain = |n: &String| {
        !n.is_empty()
            && n.len() <= 128
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-:".contains(&b))
    };
    (names.len() <= 8 && names.iter().all(plain)).then_some(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::ok;

    #[test]
    fn access_is_on_with_issuer_and_audience_and_finds_its_keys() {
        let c = ok("[access]\nissuer = \"https://acme.cloudflareaccess.com/\"\naudience = \"aud\"");
        let s = c.access.unwrap().settings().unwrap();
        assert_eq!(
            s.jwks,
            access_api::JwksSource::Url(
                "https://acme.cloudflareaccess.com/cdn-cgi/access/certs".into()
            )
        );
        assert_eq!(
            (s.header.as_str(), s.cookie.as_str(), s.jwks_ttl),
            (
                "cf-access-jwt-assertion",
                "CF_Authorization",
                Duration::from_secs(3600)
            )
        );
        for url in [
            "http://127.0.0.1:9/certs",
            "http://[::1]:9/certs",
            "http://localhost/certs",
        ] {
            let c = ok(&format!(
                "[access]\nissuer = \"i\"\naudience = \"a\"\njwks_url = \"{url}\""
            ));
            assert_eq!(
                c.access.unwrap().settings().unwrap().jwks,
                access_api::JwksSource::Url(url.into())
            );
        }
        let file = ok(
            "[access]\nissuer = \"i\"\naudience = \"a\"\njwks_file = \"/etc/k.json\"\nheader = \"X-Token\"\njwks_ttl_seconds = 1",
        );
        let s = file.access.unwrap().settings().unwrap();
        assert_eq!(
            (s.header.as_str(), s.jwks_ttl),
            ("x-token", Duration::from_secs(1))
        );
        for (text, missing) in [
            ("[access]", "[access] issuer and audience"),
            (
                "[access]\nissuer = \"https://a.example\"",
                "[access] audience",
            ),
            ("[access]\naudience = \"a\"", "[access] issuer"),
        ] {
            assert_eq!(
                ok(text).access.unwrap().settings().unwrap_err(),
                missing,
                "{text}"
            );
        }
        assert!(ok("").access.is_none());
    }
}
