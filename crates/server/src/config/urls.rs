//! The URL checks several sections share, each through the `url` crate's parser (so a port
//! past 65535, a user part or a host that is not one fails as the HTTP client would see it):
//! a base URL as written, and one a secret may be sent to (https, or http on loopback only).

/// Why `url` is not an http(s) base URL with a host, a port in range, no user part and no
/// query or fragment; `None` when it is one.
pub(super) fn base_url_fault(raw: &str) -> Option<String> {
    // A URL parser reads a backslash as a slash and drops surrounding spaces: as written, it
    // would not be the URL used.
    if raw.chars().any(|c| c == '\\' || c == ' ' || c.is_control()) {
        return Some("it holds a space, a control character or a backslash".to_owned());
    }
    // The parser forgives `https:///host` and `https:host`; as written, they name no host.
    let authority = raw
        .strip_prefix("http://")
        .or_else(|| raw.strip_prefix("https://"));
    match authority {
        None => return Some("it does not start with http:// or https://".to_owned()),
        Some(a) if a.is_empty() || a.starts_with('/') => {
            return Some("it names no host".to_owned());
        }
        Some(_) => {}
    }
    let url = match url::Url::parse(raw) {
        Ok(u) => u,
        Err(url::ParseError::InvalidPort) => {
            return Some("its port is not a number from 1 to 65535".to_owned());
        }
        Err(e) => return Some(format!("it does not parse as a URL ({e})")),
    };
    if url.host_str().is_none_or(str::is_empty) {
        return Some("it names no host".to_owned());
    }
    if url.port() == Some(0) {
        return Some("its port is 0".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Some("it has a user part (`user@`); credentials never go in a URL here".to_owned());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Some("it has a query or a fragment; give the base URL alone".to_owned());
    }
    None
}

/// An http(s) URL with a host, a valid port and no user part, query or fragment.
pub(super) fn is_base_url(url: &str) -> bool {
    base_url_fault(url).is_none()
}

/// Why `url` is not a base URL a secret may be sent to (https, or http on loopback only).
pub(super) fn secret_safe_fault(raw: &str) -> Option<String> {
    if let Some(fault) = base_url_fault(raw) {
        return Some(fault);
    }
    let url = url::Url::parse(raw).ok()?;
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    (url.scheme() == "http" && !loopback)
        .then(|| "it is plain http to a host that is not loopback".to_owned())
}

/// Whether `url` is a base URL a secret may be sent to: https, or http on loopback only.
#[cfg(test)]
fn is_secret_safe_base_url(url: &str) -> bool {
    secret_safe_fault(url).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_read_by_the_url_parser() {
        for good in [
            "https://slack.com/api/",
            "http://127.0.0.1:4318",
            "https://[::1]:8443/x",
            "https://switchboard.example.com",
        ] {
            assert_eq!(base_url_fault(good), None, "{good}");
        }
        let cases = [
            ("https://slack.com:99999/api/", "port"),
            ("https://slack.com:0/", "port is 0"),
            ("http://localhost:80@elsewhere/", "user part"),
            ("https://u:pw@host/", "user part"),
            ("https://host/?x=1", "query"),
            ("https://host/#f", "fragment"),
            ("ftp://host/", "http:// or https://"),
            ("https:host", "http:// or https://"),
            ("https:///path", "host"),
            ("https://ho st/", "space"),
            ("https://host\\@evil/", "backslash"),
            ("https://host/\r", "control character"),
            ("slack.com/api", "http:// or https://"),
            ("", "http:// or https://"),
            ("https://exa mple.com", "space"),
            ("https://[::1/", "does not parse"),
        ];
        for (bad, why) in cases {
            let fault = base_url_fault(bad).unwrap_or_else(|| panic!("{bad:?} passed"));
            assert!(fault.contains(why), "{bad:?}: {fault}");
        }
    }

    #[test]
    fn a_secret_goes_over_https_or_to_loopback() {
        for good in [
            "https://slack.com/api/",
            "http://127.0.0.1:9/",
            "http://localhost:9/",
            "http://[::1]:9/",
        ] {
            assert!(is_secret_safe_base_url(good), "{good}");
        }
        for bad in [
            "http://slack.com/api/",
            "http://10.0.0.1/",
            "http://localhost.evil.com/",
        ] {
            assert!(!is_secret_safe_base_url(bad), "{bad}");
        }
    }
}
