//! An HTTP/1.1 request head as a proxy reads it from a sandboxed program: the request line and
//! the header fields, bounded, and refused whole when anything in it is malformed (a proxy
//! that guessed would decide one host and connect to another).

use tokio::io::{AsyncRead, AsyncReadExt};

/// The most a request head may hold.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;
/// The most header fields a request may have.
const MAX_FIELDS: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the connection closed before a request was read")]
    Closed,
    #[error("the request head is longer than {MAX_HEAD_BYTES} bytes")]
    TooLong,
    #[error("the request head is malformed: {0}")]
    Malformed(&'static str),
    #[error("reading the request failed: {0}")]
    Io(String),
}

/// Where a request goes, as its request line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `CONNECT host:port`: a tunnel.
    Authority { host: String, port: u16 },
    /// `GET http://host:port/path`: a request for another host, through the proxy.
    Absolute {
        host: String,
        port: u16,
        path: String,
    },
    /// `GET /path`: a request to the proxy itself (the model gateway, Switchboard's MCP).
    Origin { path: String },
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub method: String,
    pub target: Target,
    /// Field names lower-cased, values trimmed, in order.
    pub fields: Vec<(String, String)>,
}

impl Head {
    /// The first value of field `name` (lower case).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The fields without the hop-by-hop ones (and those a proxy sets itself), for the next
    /// hop: `Connection` and every field it names, `Proxy-*`, `Keep-Alive`, `TE`, `Trailer`,
    /// `Upgrade`, `Host`.
    pub fn end_to_end_fields(&self) -> Vec<(String, String)> {
        let named: Vec<String> = self
            .fields
            .iter()
            .filter(|(n, _)| n == "connection")
            .flat_map(|(_, v)| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
            .collect();
        self.fields
            .iter()
            .filter(|(n, _)| {
                !matches!(
                    n.as_str(),
                    "connection" | "keep-alive" | "te" | "trailer" | "upgrade" | "host"
                ) && !n.starts_with("proxy-")
                    && !named.contains(n)
            })
            .cloned()
            .collect()
    }
}

/// Reads a head from `stream`: the head and whatever bytes after it were read with it.
pub async fn read_head<R: AsyncRead + Unpin>(stream: &mut R) -> Result<(Head, Vec<u8>), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = find_end(&buf) {
            let rest = buf.split_off(end);
            return parse(&buf).map(|head| (head, rest));
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(HeadError::TooLong);
        }
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| HeadError::Io(e.to_string()))?;
        if n == 0 {
            return Err(if buf.is_empty() {
                HeadError::Closed
            } else {
                HeadError::Malformed("the connection closed inside the head")
            });
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
}

/// Where the head ends (after its blank line), if it has.
fn find_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Parses a whole head (ending with its blank line).
pub fn parse(raw: &[u8]) -> Result<Head, HeadError> {
    if raw.len() > MAX_HEAD_BYTES {
        return Err(HeadError::TooLong);
    }
    let text = std::str::from_utf8(raw).map_err(|_| HeadError::Malformed("not UTF-8"))?;
    let text = text
        .strip_suffix("\r\n\r\n")
        .ok_or(HeadError::Malformed("no blank line ends it"))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed(
            "the request line is not METHOD TARGET VERSION",
        ));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(HeadError::Malformed("the method is not a token"));
    }
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(HeadError::Malformed("the version is not HTTP/1.x"));
    }
    let target = if method == "CONNECT" {
        let (host, port) = authority(target)?;
        Target::Authority { host, port }
    } else {
        request_target(target)?
    };
    let mut fields = Vec::new();
    for line in lines {
        if fields.len() >= MAX_FIELDS {
            return Err(HeadError::Malformed("too many header fields"));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or(HeadError::Malformed("a header line has no colon"))?;
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(HeadError::Malformed("a header name is not a token"));
        }
        if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(HeadError::Malformed("a header value holds a control byte"));
        }
        fields.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    // Two lengths, or a length beside chunking, is how one request is smuggled in another.
    let lengths = fields.iter().filter(|(n, _)| n == "content-length").count();
    let chunked = fields.iter().any(|(n, _)| n == "transfer-encoding");
    if lengths > 1 || (lengths == 1 && chunked) {
        return Err(HeadError::Malformed(
            "Content-Length is given twice, or beside Transfer-Encoding",
        ));
    }
    Ok(Head {
        method: method.to_owned(),
        target,
        fields,
    })
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `host:port`, `[v6]:port`: a host of letters, digits, `-`, `.` (or an IPv6 literal) and a
/// port of 1-65535. The host is in its one spelling: lower case, an address as the URL
/// parser reads it (`2130706433`, `127.1` and `0x7f.0.0.1` are all `127.0.0.1`), an IPv6
/// address compressed and without brackets; so the host decided, the host remembered and the
/// host connected to are one.
fn authority(raw: &str) -> Result<(String, u16), HeadError> {
    let bad = HeadError::Malformed("the authority is not host:port");
    let (host, port) = if let Some(rest) = raw.strip_prefix('[') {
        let (v6, port) = rest.split_once("]:").ok_or(bad.clone())?;
        let v6 = v6.parse::<std::net::Ipv6Addr>().map_err(|_| bad.clone())?;
        (v6.to_string(), port)
    } else {
        let (host, port) = raw.rsplit_once(':').ok_or(bad.clone())?;
        let name_ok = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            && !host.starts_with('.')
            && !host.starts_with('-');
        if !name_ok {
            return Err(bad);
        }
        let host = match url::Host::parse(host) {
            Ok(url::Host::Ipv4(ip)) => ip.to_string(),
            Ok(url::Host::Domain(name)) => name,
            _ => return Err(bad),
        };
        (host, port)
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad);
    }
    let port: u16 = port.parse().map_err(|_| bad.clone())?;
    if port == 0 {
        return Err(bad);
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// An origin-form (`/path`) or absolute-form `http://` target. An `https://` absolute form is
/// refused: HTTPS goes through a CONNECT tunnel.
fn request_target(raw: &str) -> Result<Target, HeadError> {
    if raw.starts_with('/') {
        return path(raw).map(|path| Target::Origin { path });
    }
    let rest = raw.strip_prefix("http://").ok_or(HeadError::Malformed(
        "the target is neither /path nor http://host/path (HTTPS goes through CONNECT)",
    ))?;
    let (authority_part, path_part) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    if authority_part.contains('@') {
        return Err(HeadError::Malformed("the target holds user information"));
    }
    let with_port = if authority_part.ends_with(']') || !authority_part.contains(':') {
        format!("{authority_part}:80")
    } else {
        authority_part.to_owned()
    };
    let (host, port) = authority(&with_port)?;
    Ok(Target::Absolute {
        host,
        port,
        path: path(path_part)?,
    })
}

/// A path and query of visible ASCII, with no fragment.
fn path(raw: &str) -> Result<String, HeadError> {
    if !raw.starts_with('/') || !raw.bytes().all(|b| b.is_ascii_graphic()) || raw.contains('#') {
        return Err(HeadError::Malformed("the path is not visible ASCII"));
    }
    Ok(raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &str) -> Result<Head, HeadError> {
        parse(s.as_bytes())
    }

    #[test]
    fn the_three_forms_are_read() {
        let h = head("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n").unwrap();
        assert_eq!(
            h.target,
            Target::Authority {
                host: "example.com".into(),
                port: 443
            }
        );
        let h = head("GET http://Example.COM/a?b=1 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(
            h.target,
            Target::Absolute {
                host: "example.com".into(),
                port: 80,
                path: "/a?b=1".into()
            }
        );
        for spelling in [
            "2130706433",
            "127.1",
            "0x7f.0.0.1",
            "0177.0.0.1",
            "127.0.0.1",
        ] {
            let h = head(&format!("CONNECT {spelling}:5432 HTTP/1.1\r\n\r\n")).unwrap();
            assert_eq!(
                h.target,
                Target::Authority {
                    host: "127.0.0.1".into(),
                    port: 5432
                },
                "{spelling}"
            );
        }
        let h = head("CONNECT [0:0:0:0:0:0:0:1]:443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(
            h.target,
            Target::Authority {
                host: "::1".into(),
                port: 443
            }
        );
        let h = head("GET http://[::1]:8080 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(
            h.target,
            Target::Absolute {
                host: "::1".into(),
                port: 8080,
                path: "/".into()
            }
        );
        let h = head("POST /v1/messages?beta=true HTTP/1.1\r\nX-Api-Key: k\r\n\r\n").unwrap();
        assert_eq!(
            h.target,
            Target::Origin {
                path: "/v1/messages?beta=true".into()
            }
        );
        assert_eq!(h.field("x-api-key"), Some("k"));
    }

    #[test]
    fn malformed_heads_are_refused_whole() {
        for bad in [
            "",
            "GET / HTTP/1.1\r\n",
            "GET / HTTP/1.1\r\n\r\nextra",
            "GET /  HTTP/1.1\r\n\r\n",
            "GET / HTTP/2\r\n\r\n",
            "get / HTTP/1.1\r\n\r\n",
            "GET\r\n\r\n",
            "GET https://example.com/ HTTP/1.1\r\n\r\n",
            "GET ftp://example.com/ HTTP/1.1\r\n\r\n",
            "GET example.com/ HTTP/1.1\r\n\r\n",
            "GET http://user@evil.com@good.com/ HTTP/1.1\r\n\r\n",
            "GET http://exa mple.com/ HTTP/1.1\r\n\r\n",
            "GET http://example.com:0/ HTTP/1.1\r\n\r\n",
            "GET http://example.com:99999/ HTTP/1.1\r\n\r\n",
            "GET http://example.com:/ HTTP/1.1\r\n\r\n",
            "GET http://.example.com/ HTTP/1.1\r\n\r\n",
            "GET http://example.com/a#frag HTTP/1.1\r\n\r\n",
            "GET /caf\u{e9} HTTP/1.1\r\n\r\n",
            "CONNECT example.com HTTP/1.1\r\n\r\n",
            "CONNECT example.com:https HTTP/1.1\r\n\r\n",
            "CONNECT [::1:443 HTTP/1.1\r\n\r\n",
            "CONNECT [nothost]:443 HTTP/1.1\r\n\r\n",
            "CONNECT a/b:443 HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
            "GET / HTTP/1.1\r\n: x\r\n\r\n",
            "GET / HTTP/1.1\r\nA: x\u{0}y\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            assert!(head(bad).is_err(), "{bad:?} was read");
        }
        let mut long = "GET / HTTP/1.1\r\n".to_owned();
        long.push_str(&"A: b\r\n".repeat(MAX_HEAD_BYTES / 6 + 1));
        long.push_str("\r\n");
        assert_eq!(head(&long), Err(HeadError::TooLong));
        let mut many = "GET / HTTP/1.1\r\n".to_owned();
        many.push_str(&"A: b\r\n".repeat(MAX_FIELDS + 1));
        many.push_str("\r\n");
        assert!(head(&many).is_err());
    }

    #[test]
    fn hop_by_hop_fields_stay_behind() {
        let h = head(
            "GET http://a/ HTTP/1.1\r\nHost: evil\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nProxy-Authorization: p\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            h.end_to_end_fields(),
            vec![("accept".to_owned(), "*/*".to_owned())]
        );
    }

    #[tokio::test]
    async fn a_head_read_from_a_stream_keeps_what_follows_it() {
        let mut input: &[u8] = b"POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
        let (h, rest) = read_head(&mut input).await.unwrap();
        assert_eq!(h.method, "POST");
        assert_eq!(rest, b"abc");
        let mut closed: &[u8] = b"";
        assert_eq!(read_head(&mut closed).await, Err(HeadError::Closed));
        let mut cut: &[u8] = b"GET / HTTP/1.1\r\n";
        assert!(matches!(
            read_head(&mut cut).await,
            Err(HeadError::Malformed(_))
        ));
    }
}
