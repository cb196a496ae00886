//! The URL checks several sections share: a base URL as written, and one a secret may be sent
//! to (https, or http on loopback only).

/// An http(s) URL with a host and no query or fragment, as written (a trailing `/` kept).
pub(super) fn is_base_url(url: &str) -> bool {
    // No user part in the host (`http://localhost:80@elsewhere/` goes elsewhere), and no
    // backslash, which URL parsers read as a slash.
    let authority_ok = |r: &str| {
        !r.split('/')
            .next()
            .unwrap_or_default()
            .contains(['@', '\\'])
    };
    url.strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .is_some_and(|r| {
            !(r.is_empty() || r.starts_with('/') || r.contains(['?', '#', ' '])) && authority_ok(r)
        })
}

/// Whether `url` is a base URL a secret may be sent to: https, or http on loopback only.
pub(super) fn is_secret_safe_base_url(url: &str) -> bool {
    is_base_url(url) && (url.starts_with("https://") || is_loopback_http(url))
}

/// Whether an http URL's host is loopback (tests and sidecars may skip TLS there).
fn is_loopback_http(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
