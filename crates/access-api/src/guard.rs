//! Cross-site request refusal for every state-changing route.
//!
//! The Access cookie rides along on a post from any site, so a post counts only when the
//! browser says it came from this origin: `Sec-Fetch-Site: same-origin` (or `none`, typed by
//! the user), else an `Origin` whose host is this request's `Host` or `[server] public_url`'s.
//! A request with neither header is not a browser's cross-site post (every current browser
//! sends `Origin` on those): scripts and `curl` with the header token pass.

use axum::http::{HeaderMap, header};

/// Whether a state-changing request may go on.
pub fn same_origin(headers: &HeaderMap, public_url: Option<&str>) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return matches!(site.to_str(), Ok("same-origin" | "none"));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some(origin_host) = origin.to_str().ok().and_then(authority) else {
        // `Origin: null` (a sandboxed frame, a redirect from elsewhere) or garbage.
        return false;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    host.is_some_and(|h| h.eq_ignore_ascii_case(origin_host))
        || public_url
            .and_then(authority)
            .is_some_and(|p| p.eq_ignore_ascii_case(origin_host))
}

/// `host[:port]` of `scheme://host[:port][/…]`.
fn authority(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme, "http" | "https") {
        return None;
    }
    let host = rest.split(['/', '?', '#']).next()?;
    (!host.is_empty() && !host.contains('@')).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_this_origin_may_post() {
        let public = Some("https://sb.example.com");
        for (pairs, want) in [
            (vec![], true),
            (vec![("sec-fetch-site", "same-origin")], true),
            (vec![("sec-fetch-site", "none")], true),
            (vec![("sec-fetch-site", "cross-site")], false),
            (vec![("sec-fetch-site", "same-site")], false),
            (
                vec![
                    ("sec-fetch-site", "cross-site"),
                    ("origin", "http://127.0.0.1:8080"),
                    ("host", "127.0.0.1:8080"),
                ],
                false,
            ),
            (
                vec![
                    ("origin", "http://127.0.0.1:8080"),
                    ("host", "127.0.0.1:8080"),
                ],
                true,
            ),
            (
                vec![
                    ("origin", "https://sb.example.com"),
                    ("host", "10.0.0.5:8080"),
                ],
                true,
            ),
            (
                vec![
                    ("origin", "https://evil.example"),
                    ("host", "127.0.0.1:8080"),
                ],
                false,
            ),
            (
                vec![("origin", "https://sb.example.com.evil"), ("host", "x")],
                false,
            ),
            (vec![("origin", "null"), ("host", "127.0.0.1:8080")], false),
            (vec![("origin", "http://127.0.0.1:8080")], false),
            (
                vec![
                    ("origin", "javascript://127.0.0.1:8080"),
                    ("host", "127.0.0.1:8080"),
                ],
                false,
            ),
            (
                vec![
                    ("origin", "http://u@127.0.0.1:8080"),
                    ("host", "u@127.0.0.1:8080"),
                ],
                false,
            ),
        ] {
            assert_eq!(same_origin(&headers(&pairs), public), want, "{pairs:?}");
        }
    }
}
