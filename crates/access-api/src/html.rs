//! HTML: escaping, the page frame, and the headers every page carries.
//!
//! Every value that did not come from this file is escaped (agent answers, requests, event
//! bodies, ids). Pages run no inline script except the live feed's, which carries the
//! response's nonce; the Content-Security-Policy allows nothing else. The Referrer-Policy keeps
//! a capability token in a page's URL from leaving in a Referer header.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A fresh nonce for one response's script.
pub fn nonce() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(hex::encode(bytes))
}

/// The policy: styles from this server's stylesheet, scripts only with this response's nonce
/// (none at all without one), connections only to this origin, forms only to this origin.
fn content_security_policy(nonce: Option<&str>) -> String {
    let script = match nonce {
        Some(n) => format!("'nonce-{n}'"),
        None => "'none'".to_owned(),
    };
    format!(
        "default-src 'none'; style-src 'self'; script-src {script}; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )
}

/// The headers every response of the `/runs` pages carries.
pub fn secure(response: &mut Response, nonce: Option<&str>) {
    let h = response.headers_mut();
    if let Ok(csp) = HeaderValue::from_str(&content_security_policy(nonce)) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// The same headers on every answer that set none of its own: `/api`'s JSON, and what the
/// framework answers by itself (a refused method, an unreadable body). An answer's own
/// policy (a page's nonce) is kept.
pub async fn secure_by_default(mut response: Response) -> Response {
    let h = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        h.entry(name).or_insert(HeaderValue::from_static(value));
    }
    response
}

/// A page: the frame around `body`, with `script` (run under the response's nonce) when given.
pub fn page(status: StatusCode, title: &str, body: &str, script: Option<&str>) -> Response {
    let nonce = script.and_then(|_| nonce());
    let script_tag = match (script, &nonce) {
        (Some(js), Some(n)) => format!("<script nonce=\"{n}\">{js}</script>"),
        // No nonce could be had: the page works without its live updates.
        _ => String::new(),
    };
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title} · Switchboard</title><link rel=\"stylesheet\" href=\"/runs/assets/style.css\"></head><body>{body}{script_tag}</body></html>\n",
        title = escape(title),
    );
    let mut response = Response::new(Body::from(html));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    secure(&mut response, nonce.as_deref());
    response
}

/// Plain text with the pages' headers.
pub fn text(status: StatusCode, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    secure(&mut response, None);
    response
}

/// The one 404 page: an unknown id, a run the viewer may not read, a wrong capability token
/// and a viewer with no `runs:read` all get these bytes.
pub fn not_found() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "Not found",
        "<main><h1>Not found</h1><p>No run with that id, or none you can see.</p><p><a href=\"/runs\">All runs</a></p></main>",
        None,
    )
}

/// Unix microseconds as `2026-12-03T04:16:11Z`.
pub fn utc(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// The stylesheet every page links.
pub const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#fafbfc}\
main{max-width:72rem;margin:0 auto;padding:1rem 1.5rem}\
nav a{margin-right:1rem}\
table{border-collapse:collapse;width:100%}\
th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #e3e6ea;vertical-align:top}\
td.id{font-family:ui-monospace,monospace;font-size:13px}\
pre{white-space:pre-wrap;background:#f0f2f5;padding:.75rem;border-radius:4px}\
.status-running,.status-queued{color:#0a6cce}.status-completed{color:#187a2f}\
.status-failed,.status-interrupted,.status-misconfigured{color:#b42318}.status-stopped{color:#6b7280}\
button{font:inherit;padding:.3rem .9rem}\
details.file{margin:.5rem 0}details.file summary{cursor:pointer}\
pre.diff{white-space:pre;overflow-x:auto;font-size:13px}pre.message{margin:.2rem 0}\
.add{color:#187a2f}.del{color:#b42318}.hunk{color:#6b7280}\
.muted{color:#6b7280}\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn utc_times_read_as_calendar_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_271_371_500_000), "2026-12-03T04:16:11Z");
        assert_eq!(utc(-1_000_000), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn pages_carry_the_policy_and_the_nonce_only_on_their_own_script() {
        let r = page(StatusCode::OK, "t", "<p>x</p>", Some("1+1"));
        let csp = r.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        let n = csp
            .split("'nonce-")
            .nth(1)
            .unwrap()
            .split('\'')
            .next()
            .unwrap();
        assert_eq!(n.len(), 32);
        assert_eq!(r.headers()[header::REFERRER_POLICY], "no-referrer");
        let plain = page(StatusCode::OK, "t", "", None);
        let csp = plain.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(csp.contains("script-src 'none'"), "{csp}");
    }
}
