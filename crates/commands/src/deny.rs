//! Refusals: the one place a deny is audited and rendered. Every refusal — the registry's
//! admission, a handler's check of the resource it loaded, the dispatcher's agent admission —
//! becomes one audit line (actor, action, resource type, reason token, surface; never a body,
//! a token or a run id) and the reply its shape declares, which never carries the reason.

use std::sync::Mutex;

use authz_core::{Action, Resource, Verdict};
use serde::Serialize;

use crate::reply::Reply;
use crate::{Caller, Services, reply_texts};

/// A denied decision: what was asked, on what, and the verdict (for the audit line only).
#[derive(Debug, Clone)]
pub struct Refusal {
    pub action: Action,
    pub resource: Resource,
    pub verdict: Verdict,
}

/// How a command answers a refused caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyShape {
    /// A point read: `<what> not found`, exactly as for a missing id.
    NotFound(&'static str),
    /// Everything else: 🚫.
    Unauthorized,
}

/// What a refusal answers, by where it happened.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Denial<'a> {
    /// A command's own shape: not_found or the 🚫 naming the command.
    Command { shape: DenyShape, command: &'a str },
    /// An agent the caller may not run.
    Agent(&'a str),
    /// The channel tier of `config set`.
    ChannelConfig(&'a str),
    /// A repo a request names: answered as a repo that is not configured.
    Repo(&'a str),
}

/// Audits a refusal and renders its reply: the one function every deny goes through.
pub(crate) fn deny(
    services: &Services,
    caller: &Caller,
    refusal: &Refusal,
    denial: Denial<'_>,
) -> Reply {
    services.audit.deny(AuditLine::new(caller, refusal));
    crate::trace::mark_denied();
    let admins = services.table().admins_hint();
    match denial {
        Denial::Command {
            shape: DenyShape::NotFound(what),
            ..
        } => Reply::not_found(what),
        Denial::Command {
            shape: DenyShape::Unauthorized,
            command,
        } => Reply::unauthorized(reply_texts::unauthorized(command, &admins), &admins),
        Denial::Agent(agent) => {
            Reply::unauthorized(reply_texts::agent_refused(agent, &admins), &admins)
        }
        Denial::ChannelConfig(channel) => Reply::unauthorized(
            reply_texts::channel_config_denied(channel, &admins),
            &admins,
        ),
        Denial::Repo(slug) => Reply::of(
            crate::ReplyKind::Usage,
            reply_texts::repo_not_configured(slug),
        ),
    }
}

/// One deny, for the operator: actor, action, resource type, the reason's token and what it
/// is about (the channel the actor is not a member of, the repo, the grant missing), surface
/// — never a body, a token or a run id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditLine {
    pub actor: String,
    pub action: String,
    pub resource: &'static str,
    pub reason: &'static str,
    /// The failed condition's subject (`slack:C1` for `not-member`), when it has one.
    pub subject: Option<String>,
    /// The failed condition as a sentence (`not a member of slack:C1`).
    pub detail: String,
    pub surface: &'static str,
    /// Groups whose membership lookup failed for this request (they granted nothing).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unresolved_groups: Vec<String>,
}

impl std::fmt::Display for AuditLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[authz] deny actor={} action={} resource={} reason={}",
            self.actor, self.action, self.resource, self.reason
        )?;
        if let Some(subject) = &self.subject {
            write!(f, " subject={subject}")?;
        }
        write!(f, " surface={} ({})", self.surface, self.detail)?;
        if !self.unresolved_groups.is_empty() {
            write!(
                f,
                " unresolved_groups={} (the membership lookup failed, so they granted nothing)",
                self.unresolved_groups.join(",")
            )?;
        }
        Ok(())
    }
}

impl AuditLine {
    pub fn new(caller: &Caller, refusal: &Refusal) -> Self {
        let (reason, subject, detail) = match &refusal.verdict {
            Verdict::Deny(r) => (r.token(), r.subject(), r.to_string()),
            Verdict::Allow => ("allow", None, "allowed".to_owned()),
        };
        AuditLine {
            actor: caller.actor.id.to_string(),
            action: refusal.action.to_string(),
            resource: refusal.resource.resource_type().as_str(),
            reason,
            subject,
            detail,
            surface: caller.surface.as_str(),
            unresolved_groups: caller
                .actor
                .principal()
                .group_facts
                .unresolved
                .iter()
                .map(ToString::to_string)
                .collect(),
        }
    }
}

/// Where audit lines go.
pub trait Audit: Send + Sync {
    fn deny(&self, line: AuditLine);
}

/// Audit lines on the `audit` tracing target.
pub struct TracingAudit;

impl Audit for TracingAudit {
    fn deny(&self, line: AuditLine) {
        tracing::warn!(target: "audit", "{line}");
    }
}

/// Audit lines kept in memory (tests, `explain`-style tooling).
#[derive(Default)]
pub struct MemoryAudit(Mutex<Vec<AuditLine>>);

impl MemoryAudit {
    pub fn lines(&self) -> Vec<AuditLine> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Audit for MemoryAudit {
    fn deny(&self, line: AuditLine) {
        if let Ok(mut v) = self.0.lock() {
            v.push(line);
        }
    }
}
