//! `switchboard authz explain`: one decision, every row tried, and which condition failed.

use authz_core::{
    Action, Actor, ActorId, Explanation, GrantSource, Grants, GrantsTable, GroupFacts, GroupId,
    GroupKind, Namespace, Resource, RowOutcome, Verdict, explain, parse_resource_spec,
    resolve_agent,
};
use serde::Serialize;

use crate::render;

/// A usage fault in the explain arguments: which flag, and why.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("--actor: {0}")]
    Actor(authz_core::IdError),
    #[error("--on-behalf-of: {0}")]
    Principal(authz_core::IdError),
    #[error(
        "--on-behalf-of makes the actor an agent acting for that principal: --actor must be agent:<name>, not {0}"
    )]
    PrincipalForNonAgent(String),
    #[error(
        "--on-behalf-of: an agent acts for a person or credential, not for another agent ({0})"
    )]
    AgentPrincipal(String),
    #[error("--action: {0}")]
    Action(authz_core::ActionError),
    #[error("--resource: {0}")]
    Resource(authz_core::SpecError),
    #[error("--group: {0}")]
    Group(authz_core::IdError),
    #[error(
        "--group {0}: a declared group's members are listed under [groups]; --group is for what a surface learns (group:slack:S…, group:access:<name>)"
    )]
    DeclaredGroup(String),
}

/// The request, resolved against the config.
pub struct Request {
    /// Where each of the deciding actor's grants came from (an agent's principal's, for an
    /// agent acting for one: what bounds it).
    pub sources: Vec<GrantSource>,
    pub actor: Actor,
    pub action: Action,
    pub resource: Resource,
}

pub fn resolve(
    table: &GrantsTable,
    actor: &str,
    on_behalf_of: Option<&str>,
    groups: &[String],
    action: &str,
    resource: &str,
) -> Result<Request, ExplainError> {
    let facts = group_facts(groups)?;
    let id = ActorId::parse(actor).map_err(ExplainError::Actor)?;
    let actor = match (id.namespace(), on_behalf_of) {
        (Namespace::Agent, principal) => {
            let principal = principal
                .map(|p| {
                    let pid = ActorId::parse(p).map_err(ExplainError::Principal)?;
                    if pid.namespace() == Namespace::Agent {
                        return Err(ExplainError::AgentPrincipal(p.to_owned()));
                    }
                    Ok(table.resolve(pid, facts.clone(), false))
                })
                .transpose()?;
            let name = authz_core::AgentName::parse(id.subject()).map_err(ExplainError::Actor)?;
            resolve_agent(&name, principal, table)
        }
        (_, Some(_)) => return Err(ExplainError::PrincipalForNonAgent(actor.to_owned())),
        (_, None) => table.resolve(id, facts, false),
    };
    let action = Action::parse(action).map_err(ExplainError::Action)?;
    let sources = table.sources_holding(actor.principal(), &action);
    Ok(Request {
        sources,
        actor,
        action,
        resource: parse_resource_spec(resource, table).map_err(ExplainError::Resource)?,
    })
}

/// `--group` values: the groups a surface would learn the actor is in.
fn group_facts(groups: &[String]) -> Result<GroupFacts, ExplainError> {
    let mut facts = GroupFacts::default();
    for g in groups {
        let id = GroupId::parse(g).map_err(ExplainError::Group)?;
        if id.kind() == GroupKind::Declared {
            return Err(ExplainError::DeclaredGroup(g.clone()));
        }
        facts.member_of.insert(id);
    }
    Ok(facts)
}

#[derive(Serialize)]
struct JsonRow<'a> {
    row: &'a str,
    conditions: Vec<String>,
    #[serde(flatten)]
    outcome: &'a RowOutcome,
}

/// The explanation as data. The deny reason is nested under `reason`: its own fields (a
/// reason names an action too) never overwrite the request's.
#[derive(Serialize)]
struct JsonExplanation<'a> {
    actor: &'a str,
    on_behalf_of: Option<&'a str>,
    effective_grants: Grants,
    /// The groups whose grants the deciding actor (an agent's principal) holds.
    groups: Vec<String>,
    /// The baseline, entries and groups that hold the action.
    granted_by: Vec<&'a str>,
    action: String,
    resource: &'a Resource,
    verdict: &'static str,
    reason: Option<JsonReason<'a>>,
    rows: Vec<JsonRow<'a>>,
}

#[derive(Serialize)]
struct JsonReason<'a> {
    text: String,
    #[serde(flatten)]
    detail: &'a authz_core::Reason,
}

pub fn decide(req: &Request) -> Explanation<'static> {
    explain(&req.actor, &req.action, &req.resource)
}

pub fn to_json(req: &Request, e: &Explanation<'_>) -> serde_json::Value {
    let rows = e
        .rows
        .iter()
        .map(|t| JsonRow {
            row: &t.rule.id,
            conditions: t.rule.when.iter().map(ToString::to_string).collect(),
            outcome: &t.outcome,
        })
        .collect();
    let j = JsonExplanation {
        actor: req.actor.id.as_str(),
        on_behalf_of: req.actor.on_behalf_of.as_ref().map(|p| p.id.as_str()),
        effective_grants: req.actor.effective_grants().into_owned(),
        groups: req
            .actor
            .principal()
            .groups
            .iter()
            .map(ToString::to_string)
            .collect(),
        granted_by: req.sources.iter().map(|s| s.from.as_str()).collect(),
        action: req.action.to_string(),
        resource: &req.resource,
        verdict: match e.verdict {
            Verdict::Allow => "allow",
            Verdict::Deny(_) => "deny",
        },
        reason: match &e.verdict {
            Verdict::Allow => None,
            Verdict::Deny(r) => Some(JsonReason {
                text: r.to_string(),
                detail: r,
            }),
        },
        rows,
    };
    serde_json::to_value(j).unwrap_or(serde_json::Value::Null)
}

pub fn render_human(req: &Request, e: &Explanation<'_>, colour: bool) -> String {
    let who = match &req.actor.on_behalf_of {
        Some(p) => format!("{} on behalf of {}", req.actor.id, p.id),
        None => req.actor.id.to_string(),
    };
    let headline = match &e.verdict {
        Verdict::Allow => render::paint("ALLOW", "1;32", colour),
        Verdict::Deny(_) => render::paint("DENY", "1;31", colour),
    };
    let mut out = format!(
        "{headline}  {who}  {}  {}\n",
        req.action,
        resource_label(&req.resource)
    );
    if let Verdict::Deny(reason) = &e.verdict {
        out.push_str(&format!("reason: {reason} ({})\n", reason.token()));
    }
    let [actions, channels, repos] = render::grants_cells(&req.actor.effective_grants());
    out.push_str(&format!(
        "\neffective grants ({} actor)\n  actions   {actions}\n  channels  {channels}\n  repos     {repos}\n",
        req.actor.kind.as_str()
    ));
    out.push_str(&granted_by(req));
    if e.rows.is_empty() {
        let why = if req.actor.is_consistent() {
            "no row of the policy table answers this action on this resource"
        } else {
            "none: an inconsistent actor is denied before any row"
        };
        out.push_str(&format!("\nrows tried: {why}\n"));
        return out;
    }
    let rows: Vec<Vec<String>> = e
        .rows
        .iter()
        .map(|t| {
            let (mark, what) = match &t.outcome {
                RowOutcome::Allowed => (render::paint("✔", "32", colour), "allows".to_owned()),
                RowOutcome::NotSelected { reason } => (
                    render::paint("·", "33", colour),
                    format!("does not apply: {reason}"),
                ),
                RowOutcome::ConditionFailed { condition, reason } => (
                    render::paint("✘", "31", colour),
                    format!("{condition} failed: {reason}"),
                ),
            };
            let conditions: Vec<String> = t.rule.when.iter().map(ToString::to_string).collect();
            let conditions = if conditions.is_empty() {
                "(none)".to_owned()
            } else {
                conditions.join(" ∧ ")
            };
            vec![mark, t.rule.id.clone(), conditions, what]
        })
        .collect();
    out.push_str("\nrows tried (OR; conditions AND)\n");
    out.push_str(&render::table(&["", "ROW", "CONDITIONS", "OUTCOME"], &rows));
    out
}

/// Which baseline, entries and groups hold the action (for an agent, its principal's).
fn granted_by(req: &Request) -> String {
    let whose = match &req.actor.on_behalf_of {
        Some(p) => format!("{}'s ", p.id),
        None => String::new(),
    };
    let groups: Vec<String> = req
        .actor
        .principal()
        .groups
        .iter()
        .map(ToString::to_string)
        .collect();
    let mut out = String::new();
    if !groups.is_empty() {
        out.push_str(&format!("  groups    {}\n", groups.join(", ")));
    }
    let from: Vec<&str> = req.sources.iter().map(|s| s.from.as_str()).collect();
    match from.is_empty() {
        true => out.push_str(&format!("{}: held by none of {whose}grants\n", req.action)),
        false => out.push_str(&format!(
            "{}: granted by {whose}{}\n",
            req.action,
            from.join(", ")
        )),
    }
    out
}

fn resource_label(r: &Resource) -> String {
    match r {
        Resource::Run(run) => format!(
            "run {} in {} by {} ({}{})",
            run.id,
            run.channel_id,
            run.user_id,
            run.channel_visibility,
            run.repo
                .as_ref()
                .map(|r| format!(", repo {r}"))
                .unwrap_or_default()
        ),
        Resource::Channel { id, visibility } => format!("channel {id} ({visibility})"),
        Resource::MemoryScope {
            scope,
            origin_visibility,
        } => {
            format!("memory scope {} (origin {origin_visibility})", scope.key())
        }
        Resource::Repo { slug, restricted } => {
            format!(
                "repo {slug}{}",
                if *restricted { " (restricted)" } else { "" }
            )
        }
        Resource::ConfigScope(tier) => match tier {
            authz_core::ConfigTier::Channel(c) => format!("config scope channel {c}"),
            authz_core::ConfigTier::User(u) => format!("config scope user {u}"),
            authz_core::ConfigTier::Org => "config scope org".to_owned(),
        },
        Resource::Agent { name } => format!("agent {name}"),
        Resource::Command { id } => format!("command {id}"),
    }
}
