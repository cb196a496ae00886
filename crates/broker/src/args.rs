//! Tool names, their arguments parsed strictly from the model's raw JSON, and the two matching
//! primitives every grant check stands on: [`inside`] (paths) and [`host_matches`] (hosts).
//!
//! Paths are lexical: `.` and `..` are resolved without touching the disk, so a decision never
//! depends on the file system. The executor re-checks the real path (symlinks resolved) before it
//! touches the disk.

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

/// The tools the broker decides. `restrict_self` is the broker's own tool and is never one of
/// these: `decide` answers an unknown name with `NoGrant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolName {
    ReadFile,
    WriteFile,
    Shell,
    HttpFetch,
    /// `{subcommand, args, cwd}`; covered by a grant's `paths` through `cwd`.
    Git,
    /// A configured MCP server's tool: `{server, tool, arguments}`.
    Mcp,
}

impl ToolName {
    pub const ALL: [ToolName; 6] = [
        ToolName::ReadFile,
        ToolName::WriteFile,
        ToolName::Shell,
        ToolName::HttpFetch,
        ToolName::Git,
        ToolName::Mcp,
    ];

    /// The tool a model names; `None` for anything else (including `restrict_self`).
    pub fn parse(name: &str) -> Option<ToolName> {
        Self::ALL.into_iter().find(|tool| tool.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::ReadFile => "read_file",
            ToolName::WriteFile => "write_file",
            ToolName::Shell => "shell",
            ToolName::HttpFetch => "http_fetch",
            ToolName::Git => "git",
            ToolName::Mcp => "mcp",
        }
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool call's arguments, parsed and checked. Paths are absolute and lexically normalised;
/// the host of a fetch is taken from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolArgs {
    ReadFile {
        path: String,
    },
    WriteFile {
        path: String,
        content: String,
    },
    Shell {
        command: String,
        cwd: Option<String>,
    },
    HttpFetch {
        url: String,
        method: HttpMethod,
        host: String,
        /// The URL's port (its scheme's when it names none).
        port: u16,
    },
    Git {
        subcommand: String,
        args: Vec<String>,
        cwd: String,
    },
    Mcp {
        server: String,
        tool: String,
        arguments: Value,
    },
}

impl ToolArgs {
    pub fn tool(&self) -> ToolName {
        match self {
            ToolArgs::ReadFile { .. } => ToolName::ReadFile,
            ToolArgs::WriteFile { .. } => ToolName::WriteFile,
            ToolArgs::Shell { .. } => ToolName::Shell,
            ToolArgs::HttpFetch { .. } => ToolName::HttpFetch,
            ToolArgs::Git { .. } => ToolName::Git,
            ToolArgs::Mcp { .. } => ToolName::Mcp,
        }
    }

    /// The rule table's action name for this call (docs/broker.md, "Rules"): `fs.read`, `fs.write`,
    /// `shell.exec`, `net.fetch`, `git.<subcommand>`, `mcp.<server>.<tool>`.
    pub fn action(&self) -> String {
        match self {
            ToolArgs::ReadFile { .. } => "fs.read".to_owned(),
            ToolArgs::WriteFile { .. } => "fs.write".to_owned(),
            ToolArgs::Shell { .. } => "shell.exec".to_owned(),
            ToolArgs::HttpFetch { .. } => "net.fetch".to_owned(),
            ToolArgs::Git { subcommand, .. } => format!("git.{subcommand}"),
            ToolArgs::Mcp { server, tool, .. } => format!("mcp.{server}.{tool}"),
        }
    }
}

/// The tool whose calls are named `action`, as the rule table's `tool` field reads it: what
/// a rule keyed on a tool is compared with when the broker weighs an action no call has made
/// yet (a `restrict_self` promise). `""` for a name no tool makes.
pub fn tool_for_action(action: &str) -> &'static str {
    let head = action.split('.').next().unwrap_or_default();
    match (head, action) {
        (_, "fs.read") => "read_file",
        (_, "fs.write") => "write_file",
        (_, "shell.exec") => "shell",
        (_, "net.fetch") => "http_fetch",
        (_, "policy.widen") => "widen_self",
        ("git", _) => "git",
        ("mcp", _) => "mcp",
        _ => "",
    }
}

/// The methods `http_fetch` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum HttpMethod {
    #[serde(rename = "GET")]
    Get,
    #[serde(rename = "HEAD")]
    Head,
    #[serde(rename = "POST")]
    Post,
}

/// Why a call's arguments were refused (`DenyReason::InvalidArguments`). The message is for
/// the audit line and the model; it never echoes more than the offending field's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    #[error("the arguments are not the JSON object {tool} takes: {detail}")]
    Shape { tool: ToolName, detail: String },
    #[error("{field} must be an absolute path that stays under /")]
    Path { field: &'static str },
    #[error("url must be an http or https URL with a host")]
    Url,
    #[error("{field} must be a lower-case name ([a-z0-9_-], starting with a letter)")]
    Name { field: &'static str },
    /// Outside the `git` tool's vetted surface ([`crate::git`]).
    #[error("{0}")]
    Git(crate::git::GitRefusal),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadFileJson {
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteFileJson {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellJson {
    command: String,
    #[serde(default)]
    cwd: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpFetchJson {
    url: String,
    #[serde(default = "get")]
    method: HttpMethod,
}

fn get() -> HttpMethod {
    HttpMethod::Get
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GitJson {
    subcommand: String,
    #[serde(default)]
    args: Vec<String>,
    cwd: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct McpJson {
    server: String,
    tool: String,
    #[serde(default = "empty_object")]
    arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

fn shape<T: for<'de> Deserialize<'de>>(tool: ToolName, raw: &str) -> Result<T, ArgsError> {
    serde_json::from_str(raw).map_err(|e| ArgsError::Shape {
        tool,
        detail: e.to_string(),
    })
}

/// Parses a call's raw JSON arguments for `tool`, strictly: unknown fields, wrong types and
/// relative paths are errors.
pub fn parse(tool: ToolName, raw: &str) -> Result<ToolArgs, ArgsError> {
    match tool {
        ToolName::ReadFile => {
            let json: ReadFileJson = shape(tool, raw)?;
            Ok(ToolArgs::ReadFile {
                path: absolute(&json.path, "path")?,
            })
        }
        ToolName::WriteFile => {
            let json: WriteFileJson = shape(tool, raw)?;
            Ok(ToolArgs::WriteFile {
                path: absolute(&json.path, "path")?,
                content: json.content,
            })
        }
        ToolName::Shell => {
            let json: ShellJson = shape(tool, raw)?;
            let cwd = json.cwd.map(|c| absolute(&c, "cwd")).transpose()?;
            Ok(ToolArgs::Shell {
                command: json.command,
                cwd,
            })
        }
        ToolName::HttpFetch => {
            let json: HttpFetchJson = shape(tool, raw)?;
            let (host, port) = fetch_host(&json.url)?;
            Ok(ToolArgs::HttpFetch {
                url: json.url,
                method: json.method,
                host,
                port,
            })
        }
        ToolName::Git => {
            let json: GitJson = shape(tool, raw)?;
            let subcommand = name(json.subcommand, "subcommand")?;
            crate::git::check(&subcommand, &json.args).map_err(ArgsError::Git)?;
            Ok(ToolArgs::Git {
                subcommand,
                args: json.args,
                cwd: absolute(&json.cwd, "cwd")?,
            })
        }
        ToolName::Mcp => {
            let json: McpJson = shape(tool, raw)?;
            if !json.arguments.is_object() {
                return Err(ArgsError::Shape {
                    tool,
                    detail: "arguments must be a JSON object".to_owned(),
                });
            }
            Ok(ToolArgs::Mcp {
                server: name(json.server, "server")?,
                tool: name(json.tool, "tool")?,
                arguments: json.arguments,
            })
        }
    }
}

fn absolute(path: &str, field: &'static str) -> Result<String, ArgsError> {
    normalise(path).ok_or(ArgsError::Path { field })
}

/// A name that is one segment of an action (`git.<subcommand>`, `mcp.<server>.<tool>`).
fn name(value: String, field: &'static str) -> Result<String, ArgsError> {
    if is_name(&value) {
        Ok(value)
    } else {
        Err(ArgsError::Name { field })
    }
}

pub(crate) fn is_name(value: &str) -> bool {
    let mut chars = value.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// The URL's host (lower case, an IPv6 address without brackets) and its port.
fn fetch_host(raw: &str) -> Result<(String, u16), ArgsError> {
    let url = url::Url::parse(raw).map_err(|_| ArgsError::Url)?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ArgsError::Url);
    }
    let host = url.host_str().ok_or(ArgsError::Url)?;
    let port = url.port_or_known_default().ok_or(ArgsError::Url)?;
    Ok((
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase(),
        port,
    ))
}

/// `path` made absolute-and-lexical: `.` and empty segments dropped, `..` resolved. `None` when
/// the path is relative, holds a NUL, or climbs above `/`.
pub fn normalise(path: &str) -> Option<String> {
    if !path.starts_with('/') || path.contains('\0') {
        return None;
    }
    let mut out = String::with_capacity(path.len());
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                let parent = out.rfind('/')?;
                out.truncate(parent);
            }
            other => {
                out.push('/');
                out.push_str(other);
            }
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    Some(out)
}

/// True when `path` is `prefix` or lies below it. Both must be absolute; both are normalised
/// first, and a path that cannot be normalised is inside nothing.
pub fn inside(prefix: &str, path: &str) -> bool {
    let (Some(prefix), Some(path)) = (normalise(prefix), normalise(path)) else {
        return false;
    };
    inside_normalised(&prefix, &path)
}

/// [`inside`] for two paths already normalised (the hot path of `decide`).
pub(crate) fn inside_normalised(prefix: &str, path: &str) -> bool {
    if prefix == "/" {
        return true;
    }
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// A grant's host entry split into its host pattern and its port, when it names one
/// (`example.com:8443`, `127.0.0.1:5432`): digits after the last colon, 1 to 65535.
pub fn split_port(entry: &str) -> (&str, Option<u16>) {
    match entry.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            match port.parse::<u16>() {
                Ok(p) if p > 0 => (name, Some(p)),
                _ => (entry, None),
            }
        }
        _ => (entry, None),
    }
}

/// A grant's host entry against a request's host and port: the host as [`host_matches`]
/// says, and the port the entry names, when it names one (`github.com:443` is not a grant for
/// `github.com:22`; `github.com` is for every port of it).
pub fn host_port_matches(entry: &str, host: &str, port: u16) -> bool {
    let (pattern, want) = split_port(entry);
    host_matches(pattern, host) && want.is_none_or(|p| p == port)
}

/// A grant's host pattern against a request's host, ASCII case-insensitive. `*.example.com`
/// matches every subdomain at any depth and not `example.com`; any other pattern only itself.
/// Ports are [`host_port_matches`]'s.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(suffix) => {
            host.len() > suffix.len() + 1
                && host
                    .get(host.len() - suffix.len()..)
                    .is_some_and(|tail| tail.eq_ignore_ascii_case(suffix))
                && host.as_bytes().get(host.len() - suffix.len() - 1) == Some(&b'.')
        }
        None => pattern.eq_ignore_ascii_case(host),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_resolves_dots_and_refuses_climbing_out() {
        let cases = [
            ("/", Some("/")),
            ("/a/./b//c/", Some("/a/b/c")),
            ("/a/b/../c", Some("/a/c")),
            ("/a/..", Some("/")),
            ("/..", None),
            ("/a/../..", None),
            ("a/b", None),
            ("", None),
            ("/a\0b", None),
        ];
        for (path, want) in cases {
            assert_eq!(normalise(path).as_deref(), want, "{path:?}");
        }
    }

    #[test]
    fn a_host_entry_is_for_the_port_it_names_or_every_port() {
        let cases = [
            // entry, host, port, matches
            ("github.com", "github.com", 443, true),
            ("github.com", "github.com", 22, true),
            ("github.com:443", "github.com", 443, true),
            ("github.com:443", "github.com", 22, false),
            ("github.com:22", "github.com", 22, true),
            ("*.example.com:8443", "a.example.com", 8443, true),
            ("*.example.com:8443", "a.example.com", 443, false),
            ("*.example.com:8443", "example.com", 8443, false),
            ("127.0.0.1:3000", "127.0.0.1", 3000, true),
            ("127.0.0.1:3000", "127.0.0.1", 3001, false),
            ("a.com:99999", "a.com", 443, false),
        ];
        for (entry, host, port, want) in cases {
            assert_eq!(
                host_port_matches(entry, host, port),
                want,
                "{entry} vs {host}:{port}"
            );
        }
    }

    #[test]
    fn inside_is_a_path_prefix_not_a_string_prefix() {
        assert!(inside("/w", "/w"));
        assert!(inside("/w", "/w/a/b"));
        assert!(inside("/w/", "/w/a"));
        assert!(!inside("/w", "/wx"));
        assert!(!inside("/w", "/w/../etc/passwd"));
        assert!(inside("/", "/etc"));
        assert!(!inside("w", "w/a"));
    }

    #[test]
    fn host_patterns() {
        let cases = [
            ("example.com", "example.com", true),
            ("example.com", "EXAMPLE.com", true),
            ("example.com", "example.com.evil", false),
            ("example.com", "a.example.com", false),
            ("*.example.com", "a.example.com", true),
            ("*.example.com", "a.b.EXAMPLE.COM", true),
            ("*.example.com", "example.com", false),
            ("*.example.com", ".example.com", false),
            ("*.example.com", "evilexample.com", false),
            ("*.example.com", "example.com.evil", false),
        ];
        for (pattern, host, want) in cases {
            assert_eq!(host_matches(pattern, host), want, "{pattern} vs {host}");
        }
    }

    #[test]
    fn bad_arguments_table() {
        let cases: [(ToolName, &str); 16] = [
            (ToolName::ReadFile, "not json"),
            (ToolName::ReadFile, "[]"),
            (ToolName::ReadFile, r#"{"path":"relative"}"#),
            (ToolName::ReadFile, r#"{"path":"/a","extra":1}"#),
            (ToolName::ReadFile, r#"{"path":7}"#),
            (ToolName::ReadFile, r#"{"path":"/../etc"}"#),
            (ToolName::WriteFile, r#"{"path":"/a"}"#),
            (ToolName::Shell, r#"{"command":"ls","cwd":"w"}"#),
            (ToolName::Shell, r#"{"cmd":"ls"}"#),
            (ToolName::HttpFetch, r#"{"url":"file:///etc/passwd"}"#),
            (ToolName::HttpFetch, r#"{"url":"https://"}"#),
            (
                ToolName::HttpFetch,
                r#"{"url":"https://a.com","method":"DELETE"}"#,
            ),
            (ToolName::Git, r#"{"subcommand":"push --force","cwd":"/w"}"#),
            (ToolName::Git, r#"{"subcommand":"status"}"#),
            (ToolName::Mcp, r#"{"server":"Gh","tool":"x"}"#),
            (
                ToolName::Mcp,
                r#"{"server":"gh","tool":"x","arguments":[1]}"#,
            ),
        ];
        for (tool, raw) in cases {
            assert!(parse(tool, raw).is_err(), "{tool} {raw} was accepted");
        }
    }

    #[test]
    fn good_arguments_are_normalised() {
        let read = parse(ToolName::ReadFile, r#"{"path":"/w/./a/../b"}"#).unwrap();
        assert_eq!(
            read,
            ToolArgs::ReadFile {
                path: "/w/b".into()
            }
        );
        let fetch = parse(
            ToolName::HttpFetch,
            r#"{"url":"https://API.Example.com:8443/x"}"#,
        )
        .unwrap();
        assert!(
            matches!(fetch, ToolArgs::HttpFetch { ref host, method: HttpMethod::Get, .. } if host == "api.example.com")
        );
        let git = parse(ToolName::Git, r#"{"subcommand":"status","cwd":"/w"}"#).unwrap();
        assert_eq!(git.action(), "git.status");
        let mcp = parse(ToolName::Mcp, r#"{"server":"github","tool":"list_issues"}"#).unwrap();
        assert_eq!(mcp.action(), "mcp.github.list_issues");
    }
}
