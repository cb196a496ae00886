//! `decide` and `redecide`: a tool call against the grant set, the session's state and
//! the time, all passed in. No I/O, no clock. This module is the only place a [`Decision`] or an
//! [`Ask`] is built, and the types carry the two facts callers must not have to remember:
//!
//! - `decide` never returns a `Decision` for an `ask` grant; it returns an `Ask`;
//! - `redecide` is the only way from an `Ask` to a `Decision`.
//!
//! Neither type can be built by hand, copied or decoded from outside. The first six examples do
//! not compile, and the seventh shows they fail because of `Decision` and `Ask`, not because the
//! example is wrong:
//!
//! ```compile_fail
//! let request = broker::ToolRequest {
//!     session: broker::SessionId::parse("s1").unwrap(),
//!     call: broker::CallId(1),
//!     tool: "shell".to_string(),
//!     arguments: r#"{"command":"ls"}"#.to_string(),
//! };
//! let args = broker::args::parse(broker::args::ToolName::Shell, &request.arguments).unwrap();
//! let _ = broker::decision::Decision { request, args, matched: todo!() };
//! ```
//!
//! ```compile_fail
//! fn needs_clone<T: Clone>() {}
//! needs_clone::<broker::decision::Decision>();
//! ```
//!
//! ```compile_fail
//! fn needs_decoding<T: serde::de::DeserializeOwned>() {}
//! needs_decoding::<broker::decision::Decision>();
//! ```
//!
//! ```compile_fail
//! let request = broker::ToolRequest {
//!     session: broker::SessionId::parse("s1").unwrap(),
//!     call: broker::CallId(1),
//!     tool: "shell".to_string(),
//!     arguments: r#"{"command":"ls"}"#.to_string(),
//! };
//! let args = broker::args::parse(broker::args::ToolName::Shell, &request.arguments).unwrap();
//! let _ = broker::decision::Ask { request, args, matched: todo!() };
//! ```
//!
//! ```compile_fail
//! fn needs_clone<T: Clone>() {}
//! needs_clone::<broker::decision::Ask>();
//! ```
//!
//! ```compile_fail
//! fn needs_decoding<T: serde::de::DeserializeOwned>() {}
//! needs_decoding::<broker::decision::Ask>();
//! ```
//!
//! ```
//! use broker::decision::{Outcome, SessionState, decide};
//! use broker::{DenyReason, ToolGrants, Timestamp};
//! fn needs_clone<T: Clone>() {}
//! fn needs_decoding<T: serde::de::DeserializeOwned>() {}
//! let request = broker::ToolRequest {
//!     session: broker::SessionId::parse("s1").unwrap(),
//!     call: broker::CallId(1),
//!     tool: "shell".to_string(),
//!     arguments: r#"{"command":"ls"}"#.to_string(),
//! };
//! let args = broker::args::parse(broker::args::ToolName::Shell, &request.arguments).unwrap();
//! assert_eq!(args.action(), "shell.exec");
//! needs_clone::<broker::ToolRequest>();
//! needs_decoding::<broker::ToolRequest>();
//! let now = Timestamp::from_micros(0);
//! match decide(request, &ToolGrants::default(), SessionState::default(), now) {
//!     Outcome::Denied(denial) => assert_eq!(denial.reason, DenyReason::NoGrant),
//!     other => panic!("expected a NoGrant denial, got {other:?}"),
//! }
//! ```

use crate::args::{self, ToolArgs, ToolName};
use crate::grant::{DataClass, Grant, Hash32, Mode, Timestamp, ToolGrants};
use crate::request::ToolRequest;
use std::sync::Arc;

/// What the session has read so far: the highest class and whether anything was untrusted.
/// It only rises, from the labels of tool results, and lives in the run's event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionState {
    pub taint: DataClass,
    pub untrusted: bool,
}

impl SessionState {
    /// The state after reading a result with `label`.
    pub fn after(self, label: Label) -> SessionState {
        SessionState {
            taint: self.taint.max(label.class),
            untrusted: self.untrusted || label.untrusted,
        }
    }
}

/// The label a call's result will carry: over every grant left, the highest class and
/// untrusted if any says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Label {
    pub class: DataClass,
    pub untrusted: bool,
}

/// Why a call was denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenyReason {
    NoGrant,
    InvalidArguments,
    DeniedByGrant,
    GrantExpired,
    TaintTooHigh,
}

impl DenyReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DenyReason::NoGrant => "no-grant",
            DenyReason::InvalidArguments => "invalid-arguments",
            DenyReason::DeniedByGrant => "denied-by-grant",
            DenyReason::GrantExpired => "grant-expired",
            DenyReason::TaintTooHigh => "taint-too-high",
        }
    }
}

/// A denial. `grant` and `grant_sha256` are `Some` only for `DeniedByGrant`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub reason: DenyReason,
    pub grant: Option<String>,
    pub grant_sha256: Option<Hash32>,
}

impl Denial {
    pub fn new(reason: DenyReason) -> Denial {
        Denial {
            reason,
            grant: None,
            grant_sha256: None,
        }
    }

    fn by_grant(won: &Won<'_>) -> Denial {
        Denial {
            reason: DenyReason::DeniedByGrant,
            grant: Some(won.grant.id.as_str().to_owned()),
            grant_sha256: Some(*won.sha256),
        }
    }
}

/// The grant that won, and what the executor needs from it.
#[derive(Debug)]
struct Matched {
    grant: Arc<Grant>,
    grant_sha256: Hash32,
    /// An index into the grant's paths.
    matched_path: Option<usize>,
    label: Label,
}

impl Matched {
    fn path(&self) -> Option<&str> {
        self.matched_path
            .and_then(|i| self.grant.paths.get(i))
            .map(String::as_str)
    }
}

/// Permission to run one call, built at the moment of execution. The executor takes one.
#[derive(Debug)]
pub struct Decision {
    request: ToolRequest,
    args: ToolArgs,
    matched: Matched,
}

/// A call an `ask` grant won: it needs a person's answer, then [`redecide`].
#[derive(Debug)]
pub struct Ask {
    request: ToolRequest,
    args: ToolArgs,
    matched: Matched,
}

macro_rules! getters {
    ($type:ty) => {
        impl $type {
            pub fn request(&self) -> &ToolRequest {
                &self.request
            }
            pub fn args(&self) -> &ToolArgs {
                &self.args
            }
            /// The winning grant's id.
            pub fn grant(&self) -> &str {
                self.matched.grant.id.as_str()
            }
            pub fn grant_sha256(&self) -> Hash32 {
                self.matched.grant_sha256
            }
            /// The longest path of the winning grant that covered the call.
            pub fn matched_path(&self) -> Option<&str> {
                self.matched.path()
            }
            /// All the winning grant's paths (the sandbox mounts them).
            pub fn paths(&self) -> &[String] {
                &self.matched.grant.paths
            }
            pub fn hosts(&self) -> &[String] {
                &self.matched.grant.hosts
            }
            pub fn expires(&self) -> Option<Timestamp> {
                self.matched.grant.expires
            }
            pub fn label(&self) -> Label {
                self.matched.label
            }
        }
    };
}
getters!(Decision);
getters!(Ask);

#[derive(Debug)]
pub enum Outcome {
    Allowed(Decision),
    Ask(Ask),
    Denied(Denial),
}

/// Decides one call: the tool name, its arguments, then matching (M1–M5), then the winner's mode.
pub fn decide(
    request: ToolRequest,
    grants: &ToolGrants,
    state: SessionState,
    now: Timestamp,
) -> Outcome {
    let Some(tool) = ToolName::parse(&request.tool) else {
        return Outcome::Denied(Denial::new(DenyReason::NoGrant));
    };
    let args = match args::parse(tool, &request.arguments) {
        Ok(args) => args,
        Err(_) => return Outcome::Denied(Denial::new(DenyReason::InvalidArguments)),
    };
    match winner(&args, grants, state, now) {
        Err(reason) => Outcome::Denied(Denial::new(reason)),
        Ok(won) => match won.grant.mode {
            Mode::Deny => Outcome::Denied(Denial::by_grant(&won)),
            Mode::Ask => {
                let matched = won.matched();
                Outcome::Ask(Ask {
                    request,
                    args,
                    matched,
                })
            }
            Mode::Auto => {
                let matched = won.matched();
                Outcome::Allowed(Decision {
                    request,
                    args,
                    matched,
                })
            }
        },
    }
}

/// An approved `Ask` decided again against the grants, state and time given now: an `ask` or
/// `auto` winner gives the `Decision` (from the grant that won now), a `deny` winner or no grant
/// left is the denial. An approval that arrives after the grant expired is therefore a denial.
pub fn redecide(
    ask: Ask,
    grants: &ToolGrants,
    state: SessionState,
    now: Timestamp,
) -> Result<Decision, Denial> {
    let won = match winner(&ask.args, grants, state, now) {
        Ok(won) => won,
        Err(reason) => return Err(Denial::new(reason)),
    };
    match won.grant.mode {
        Mode::Deny => Err(Denial::by_grant(&won)),
        Mode::Ask | Mode::Auto => {
            let matched = won.matched();
            Ok(Decision {
                request: ask.request,
                args: ask.args,
                matched,
            })
        }
    }
}

struct Won<'g> {
    grant: &'g Arc<Grant>,
    sha256: &'g Hash32,
    matched_path: Option<usize>,
    label: Label,
}

impl Won<'_> {
    fn matched(&self) -> Matched {
        Matched {
            grant: Arc::clone(self.grant),
            grant_sha256: *self.sha256,
            matched_path: self.matched_path,
            label: self.label,
        }
    }
}

/// M1–M5. M1 is the set's index by tool; the rest reads only the grants it keeps.
fn winner<'g>(
    args: &ToolArgs,
    grants: &'g ToolGrants,
    state: SessionState,
    now: Timestamp,
) -> Result<Won<'g>, DenyReason> {
    let mut best: Option<Won<'g>> = None;
    let mut ruled_out_by_expiry = false;
    let mut ruled_out_by_taint = false;
    let mut label = Label::default();
    for (grant, sha256) in naming_tool(grants, args) {
        let Some(matched_path) = covers(grant, args) else {
            continue; // M2
        };
        let expired = grant.expires.is_some_and(|at| now >= at);
        let too_tainted = state.taint > grant.max_taint;
        match (expired, too_tainted) {
            (false, false) => {}
            (true, false) => {
                ruled_out_by_expiry = true;
                continue;
            }
            (false, true) => {
                ruled_out_by_taint = true;
                continue;
            }
            (true, true) => continue,
        } // M3
        label.class = label.class.max(grant.result_class); // M4
        label.untrusted |= grant.untrusted;
        let candidate = Won {
            grant,
            sha256,
            matched_path,
            label: Label::default(),
        };
        if best
            .as_ref()
            .is_none_or(|current| ranks_before(&candidate, current))
        {
            best = Some(candidate); // M5
        }
    }
    match best {
        Some(won) => Ok(Won { label, ..won }),
        None if ruled_out_by_expiry => Err(DenyReason::GrantExpired),
        None if ruled_out_by_taint => Err(DenyReason::TaintTooHigh),
        None => Err(DenyReason::NoGrant),
    }
}

/// M5's order: the more restrictive mode, then the longer matched path, then the lower id.
fn ranks_before(a: &Won<'_>, b: &Won<'_>) -> bool {
    let rank = |w: &Won<'_>| {
        (
            w.grant.mode,
            std::cmp::Reverse(
                w.matched_path
                    .and_then(|i| w.grant.paths.get(i))
                    .map_or(0, String::len),
            ),
        )
    };
    (rank(a), &a.grant.id) < (rank(b), &b.grant.id)
}

/// M1: the grants naming this call's tool; for MCP, `mcp.<server>.<tool>` and `mcp.<server>.*`.
fn naming_tool<'g>(
    grants: &'g ToolGrants,
    args: &ToolArgs,
) -> impl Iterator<Item = (&'g Arc<Grant>, &'g Hash32)> {
    let (exact, server_star) = match args {
        ToolArgs::Mcp { server, tool, .. } => (
            grants.naming(&format!("mcp.{server}.{tool}")),
            Some(grants.naming(&format!("mcp.{server}.*"))),
        ),
        other => (grants.naming(other.tool().as_str()), None),
    };
    exact.chain(server_star.into_iter().flatten())
}

/// M2: `Some(matched path)` when the grant covers the arguments (`Some(None)`: covered with no
/// path), `None` when it does not. The matched path is an index into the grant's paths.
fn covers(grant: &Grant, args: &ToolArgs) -> Option<Option<usize>> {
    let longest_inside = |path: &str, exclude_equal: bool| {
        grant
            .paths
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                args::inside_normalised(p, path) && !(exclude_equal && p.as_str() == path)
            })
            .max_by_key(|(_, p)| p.len())
            .map(|(i, _)| Some(i))
    };
    match args {
        ToolArgs::ReadFile { path } => longest_inside(path, false),
        ToolArgs::WriteFile { path, .. } => longest_inside(path, true),
        ToolArgs::Shell { cwd: None, .. } => grant.paths.is_empty().then_some(None),
        ToolArgs::Shell { cwd: Some(cwd), .. } | ToolArgs::Git { cwd, .. } => {
            longest_inside(cwd, false)
        }
        ToolArgs::HttpFetch { host, port, .. } => grant
            .hosts
            .iter()
            .any(|entry| args::host_port_matches(entry, host, *port))
            .then_some(None),
        ToolArgs::Mcp { .. } => Some(None),
    }
}
