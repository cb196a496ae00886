//! The oracle: grant matching written the plainest way, with its own path and host
//! checks, so the property test compares two independent readings of the same rules (docs/broker.md,
//! "Grants"). Where the oracle and `broker::decision` disagree, the oracle is taken as right.

use broker::args::{ToolArgs, ToolName};
use broker::{DataClass, DenyReason, Grant, Mode, SessionState, Timestamp, ToolGrants};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    Allowed {
        grant: String,
        matched_path: Option<String>,
        class: DataClass,
        untrusted: bool,
    },
    Ask {
        grant: String,
        matched_path: Option<String>,
        class: DataClass,
        untrusted: bool,
    },
    Denied {
        reason: DenyReason,
        grant: Option<String>,
    },
}

/// `/a/./b/../c` as segments `["a", "c"]`; `None` when relative or climbing above `/`.
fn segments(path: &str) -> Option<Vec<String>> {
    if !path.starts_with('/') {
        return None;
    }
    let mut out: Vec<String> = Vec::new();
    for part in path.split('/') {
        if part.is_empty() || part == "." {
            continue;
        }
        if part == ".." {
            if out.is_empty() {
                return None;
            }
            out.pop();
        } else {
            out.push(part.to_string());
        }
    }
    Some(out)
}

/// True when `path`'s segments begin with all of `prefix`'s.
pub fn inside(prefix: &str, path: &str) -> bool {
    match (segments(prefix), segments(path)) {
        (Some(p), Some(q)) => q.len() >= p.len() && q[..p.len()] == p[..],
        _ => false,
    }
}

pub fn host_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    let host = host.to_ascii_lowercase();
    if let Some(domain) = pattern.strip_prefix("*.") {
        let dotted = format!(".{domain}");
        host.ends_with(&dotted) && host.len() > dotted.len()
    } else {
        pattern == host
    }
}

/// A host entry with an optional `:port`: without one, every port.
pub fn host_port_matches(entry: &str, host: &str, port: u16) -> bool {
    let (pattern, want) = match entry.rfind(':') {
        Some(i) if entry[i + 1..].chars().all(|c| c.is_ascii_digit()) && i + 1 < entry.len() => {
            match entry[i + 1..].parse::<u16>() {
                Ok(p) if p != 0 => (&entry[..i], Some(p)),
                _ => (entry, None),
            }
        }
        _ => (entry, None),
    };
    let port_ok = match want {
        Some(p) => p == port,
        None => true,
    };
    host_matches(pattern, host) && port_ok
}

fn tool_named(grant: &Grant, args: &ToolArgs) -> bool {
    match args {
        ToolArgs::Mcp { server, tool, .. } => {
            grant.tool == format!("mcp.{server}.{tool}") || grant.tool == format!("mcp.{server}.*")
        }
        other => grant.tool == other.tool().as_str(),
    }
}

/// Which of the grant's paths count for this call; `None` when the grant does not cover it.
fn coverage(grant: &Grant, args: &ToolArgs) -> Option<Option<String>> {
    let longest = |target: &str, equal_counts: bool| -> Option<Option<String>> {
        let mut counting: Vec<&String> = grant
            .paths
            .iter()
            .filter(|p| inside(p, target))
            .filter(|p| equal_counts || segments(p) != segments(target))
            .collect();
        counting.sort_by_key(|p| p.len());
        counting.last().map(|p| Some(p.to_string()))
    };
    match args {
        ToolArgs::ReadFile { path } => longest(path, true),
        ToolArgs::WriteFile { path, .. } => longest(path, false),
        ToolArgs::Shell { cwd: None, .. } => {
            if grant.paths.is_empty() {
                Some(None)
            } else {
                None
            }
        }
        ToolArgs::Shell { cwd: Some(cwd), .. } => longest(cwd, true),
        ToolArgs::Git { cwd, .. } => longest(cwd, true),
        ToolArgs::HttpFetch { host, port, .. } => {
            if grant
                .hosts
                .iter()
                .any(|p| host_port_matches(p, host, *port))
            {
                Some(None)
            } else {
                None
            }
        }
        ToolArgs::Mcp { .. } => Some(None),
    }
}

pub fn expect(
    tool: &str,
    raw_args: &str,
    grants: &ToolGrants,
    state: SessionState,
    now: Timestamp,
) -> Expected {
    let Some(name) = ToolName::parse(tool) else {
        return Expected::Denied {
            reason: DenyReason::NoGrant,
            grant: None,
        };
    };
    let Ok(args) = broker::args::parse(name, raw_args) else {
        return Expected::Denied {
            reason: DenyReason::InvalidArguments,
            grant: None,
        };
    };
    matching(&args, grants, state, now)
}

pub fn matching(
    args: &ToolArgs,
    grants: &ToolGrants,
    state: SessionState,
    now: Timestamp,
) -> Expected {
    let covering: Vec<(&Grant, Option<String>)> = grants
        .grants()
        .filter(|g| tool_named(g, args))
        .filter_map(|g| coverage(g, args).map(|path| (g, path)))
        .collect();
    let expired = |g: &Grant| matches!(g.expires, Some(at) if now >= at);
    let tainted = |g: &Grant| state.taint > g.max_taint;
    let mut left: Vec<&(&Grant, Option<String>)> = covering
        .iter()
        .filter(|(g, _)| !expired(g) && !tainted(g))
        .collect();
    if left.is_empty() {
        let reason = if covering.iter().any(|(g, _)| expired(g) && !tainted(g)) {
            DenyReason::GrantExpired
        } else if covering.iter().any(|(g, _)| tainted(g) && !expired(g)) {
            DenyReason::TaintTooHigh
        } else {
            DenyReason::NoGrant
        };
        return Expected::Denied {
            reason,
            grant: None,
        };
    }
    let class = left.iter().map(|(g, _)| g.result_class).max().unwrap();
    let untrusted = left.iter().any(|(g, _)| g.untrusted);
    let rank = |m: Mode| match m {
        Mode::Deny => 0,
        Mode::Ask => 1,
        Mode::Auto => 2,
    };
    left.sort_by(|(a, ap), (b, bp)| {
        rank(a.mode)
            .cmp(&rank(b.mode))
            .then(
                bp.as_ref()
                    .map_or(0, |p| p.len())
                    .cmp(&ap.as_ref().map_or(0, |p| p.len())),
            )
            .then(a.id.as_str().cmp(b.id.as_str()))
    });
    let (winner, matched_path) = left[0];
    let grant = winner.id.as_str().to_string();
    let matched_path = matched_path.clone();
    match winner.mode {
        Mode::Deny => Expected::Denied {
            reason: DenyReason::DeniedByGrant,
            grant: Some(grant),
        },
        Mode::Ask => Expected::Ask {
            grant,
            matched_path,
            class,
            untrusted,
        },
        Mode::Auto => Expected::Allowed {
            grant,
            matched_path,
            class,
            untrusted,
        },
    }
}

/// The real outcome in the oracle's terms.
pub fn observed(outcome: &broker::Outcome) -> Expected {
    match outcome {
        broker::Outcome::Allowed(d) => Expected::Allowed {
            grant: d.grant().to_string(),
            matched_path: d.matched_path().map(str::to_string),
            class: d.label().class,
            untrusted: d.label().untrusted,
        },
        broker::Outcome::Ask(a) => Expected::Ask {
            grant: a.grant().to_string(),
            matched_path: a.matched_path().map(str::to_string),
            class: a.label().class,
            untrusted: a.label().untrusted,
        },
        broker::Outcome::Denied(d) => Expected::Denied {
            reason: d.reason,
            grant: d.grant.clone(),
        },
    }
}
