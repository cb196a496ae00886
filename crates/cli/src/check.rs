//! `switchboard config check`: load and validate, then show what every configured actor holds.

use std::collections::BTreeSet;

use authz_core::{
    ActorId, ActorKind, CATALOGUE_ACTIONS, Grants, GrantsTable, Policy, policy::builtin_rules,
    resolve_actor,
};
use serde::Serialize;

use crate::config_file::{LoadError, LoadedConfig};
use crate::render;

/// One row of the report: an actor (or a surface entry, or an unlisted baseline) and the
/// grants it holds.
#[derive(Debug, Serialize)]
pub struct ActorRow {
    pub id: String,
    pub kind: &'static str,
    /// Where the grants come from: `entry`, `baseline`, `surface entry`, `schedule registry`.
    pub source: String,
    pub grants: Grants,
}

#[derive(Debug, Serialize)]
pub struct Report {
    /// Always true here: a config with a fault is reported as [`Refused`].
    pub ok: bool,
    pub config: String,
    /// The store URL, any password removed.
    pub store: String,
    pub agents: Vec<String>,
    pub default_agent: Option<String>,
    pub restricted_agents: Vec<String>,
    pub restricted_repos: Vec<String>,
    pub policy_rows: usize,
    pub admins: Vec<String>,
    pub actors: Vec<ActorRow>,
    pub schedules: Vec<ScheduleRow>,
    /// What `serve` starts with but a user would trip on, each `file:line:col: key: message`.
    pub warnings: Vec<LoadError>,
}

/// A config `serve` would refuse: every fault, and the warnings.
#[derive(Debug, Serialize)]
pub struct Refused {
    pub ok: bool,
    pub faults: Vec<LoadError>,
    pub warnings: Vec<LoadError>,
}

/// One declared schedule: when it fires and what it runs, as `schedule:<name>`.
#[derive(Debug, Serialize)]
pub struct ScheduleRow {
    pub name: String,
    pub cron: String,
    pub time_zone: String,
    pub runs: String,
    /// Set when the cron names no slot in the next [`SLOTLESS_YEARS`] years.
    pub warning: Option<String>,
}

/// A cron with no slot in this many years is reported: it will in effect never fire.
pub const SLOTLESS_YEARS: i64 = 28;

/// The declared schedules, each with when it fires and a warning when it never will (one
/// that cannot fire at all is a fault of `server::config_check`).
pub fn schedules(config: &LoadedConfig) -> Vec<ScheduleRow> {
    let now = store::wall_clock();
    server::schedule_decls(config)
        .into_iter()
        .map(|decl| {
            let warning = (!decl.cron.fires_within_years(now, SLOTLESS_YEARS)).then(|| {
                format!(
                    "schedule `{}`: cron `{}` names no time in the next {SLOTLESS_YEARS} years, so it never fires; fix its `cron`",
                    decl.name,
                    decl.cron.expr()
                )
            });
            ScheduleRow {
                name: decl.name.to_string(),
                cron: decl.cron.expr().to_owned(),
                time_zone: decl.cron.zone().to_owned(),
                runs: decl.fires.describe(),
                warning,
            }
        })
        .collect()
}

/// Validates the policy table against the catalogue's declared actions.
pub fn validate_table() -> Result<usize, String> {
    let declared: BTreeSet<_> = CATALOGUE_ACTIONS.into_iter().collect();
    Policy::new(builtin_rules(), &declared)
        .map(|p| p.rules().len())
        .map_err(|faults| {
            let lines: Vec<String> = faults.iter().map(ToString::to_string).collect();
            format!("the policy table is invalid:\n  {}", lines.join("\n  "))
        })
}

pub fn report(
    config: &LoadedConfig,
    policy_rows: usize,
    schedules: Vec<ScheduleRow>,
    warnings: Vec<LoadError>,
) -> Report {
    let t = &config.table;
    let names = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>();
    Report {
        ok: true,
        warnings,
        config: config.source.to_string(),
        store: config.store.url.redacted(),
        agents: names(&mut config.agents.iter().map(ToString::to_string)),
        default_agent: config.default_agent.as_ref().map(ToString::to_string),
        restricted_agents: names(&mut t.restrict().agents.iter().map(ToString::to_string)),
        restricted_repos: names(&mut t.restrict().repos.iter().map(ToString::to_string)),
        policy_rows,
        admins: names(&mut t.admins_hint().iter().map(ToString::to_string)),
        actors: actor_rows(t),
        schedules,
    }
}

fn kind_of(id: &ActorId) -> &'static str {
    ActorKind::of_namespace(id.namespace()).as_str()
}

/// The configured entries, the surface entries, the declared schedules, and what an unlisted
/// actor of each namespace holds.
fn actor_rows(t: &GrantsTable) -> Vec<ActorRow> {
    let mut rows: Vec<ActorRow> = t
        .entries()
        .keys()
        .map(|id| ActorRow {
            id: id.to_string(),
            kind: kind_of(id),
            source: source_of(t, id).to_owned(),
            grants: resolve_actor(id.clone(), t).grants,
        })
        .collect();
    for (surface, grants) in t.surface_entries() {
        rows.push(ActorRow {
            id: surface.entry_key().unwrap_or_default().to_owned(),
            kind: "surface",
            source: "surface entry (added to every actor of the surface)".to_owned(),
            grants: grants.clone(),
        });
    }
    for (group, grants) in t.group_entries() {
        let members = match t.declared_groups().get(group) {
            Some(m) => format!(
                "group: {}",
                m.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None if group.kind() == authz_core::GroupKind::Slack => {
                "group (members from Slack's usergroups.users.list)".to_owned()
            }
            None => "group (members from the Access token's groups claim)".to_owned(),
        };
        rows.push(ActorRow {
            id: group.to_string(),
            kind: "group",
            source: format!("{members} (added to each member's own)"),
            grants: grants.clone(),
        });
    }
    for name in t.schedules().keys() {
        let id = name.actor_id();
        if !t.entries().contains_key(&id) {
            rows.push(ActorRow {
                id: id.to_string(),
                kind: "schedule",
                source: "schedule registry".to_owned(),
                grants: t.grants_for(&id),
            });
        }
    }
    let unlisted = [
        ("slack:U0", "slack:… (any unlisted Slack user)"),
        ("access:unlisted", "access:… (any unlisted browser session)"),
        ("http:unlisted", "http:… (any unlisted ingress token)"),
        ("mcp:unlisted", "mcp:… (any unlisted MCP token)"),
        (
            "access:svc:unlisted",
            "access:svc:… (any unlisted service token)",
        ),
        ("cli:local", "cli:local"),
    ];
    for (raw, shown) in unlisted {
        let Ok(id) = ActorId::parse(raw) else {
            continue;
        };
        if t.entries().contains_key(&id) {
            continue;
        }
        rows.push(ActorRow {
            id: shown.to_owned(),
            kind: kind_of(&id),
            source: "baseline".to_owned(),
            grants: t.grants_for(&id),
        });
    }
    rows
}

fn source_of(t: &GrantsTable, id: &ActorId) -> &'static str {
    use authz_core::{Baseline, Namespace};
    let has_surface =
        authz_core::Surface::entry_of(id).is_some_and(|s| t.surface_entries().contains_key(&s));
    match (id.namespace().baseline(), has_surface) {
        (Baseline::ChatPerson | Baseline::BrowserPerson, true) => {
            "baseline + entry + surface entry"
        }
        (Baseline::ChatPerson | Baseline::BrowserPerson, false) => "baseline + entry",
        (Baseline::Schedule, _) => "entry (replaces the registry's)",
        _ if id.namespace() == Namespace::Agent => "entry (replaces the agent baseline)",
        (_, true) => "entry + surface entry",
        _ => "entry",
    }
}

pub fn render_human(r: &Report, colour: bool) -> String {
    let list = |v: &[String]| {
        if v.is_empty() {
            "—".to_owned()
        } else {
            v.join(", ")
        }
    };
    let mut out = format!(
        "{} {}\n\nstore             {}\nagents            {}\ndefault agent     {}\nrestricted agents {}\nrestricted repos  {}\nadmins            {}\npolicy table      {} rows, valid\n\n",
        render::paint("ok", "32", colour),
        r.config,
        r.store,
        list(&r.agents),
        r.default_agent.as_deref().unwrap_or("—"),
        list(&r.restricted_agents),
        list(&r.restricted_repos),
        list(&r.admins),
        r.policy_rows,
    );
    let rows: Vec<Vec<String>> = r
        .actors
        .iter()
        .map(|a| {
            let [actions, channels, repos] = render::grants_cells(&a.grants);
            vec![
                a.id.clone(),
                a.kind.to_owned(),
                a.source.clone(),
                channels,
                repos,
                actions,
            ]
        })
        .collect();
    out.push_str(&render::table(
        &["ACTOR", "KIND", "FROM", "CHANNELS", "REPOS", "ACTIONS"],
        &rows,
    ));
    let schedules: Vec<Vec<String>> = r
        .schedules
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                format!("{} ({})", s.cron, s.time_zone),
                s.runs.clone(),
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&render::table(&["SCHEDULE", "CRON", "RUNS"], &schedules));
    let warnings = r
        .schedules
        .iter()
        .filter_map(|s| s.warning.clone())
        .chain(r.warnings.iter().map(ToString::to_string));
    for warning in warnings {
        out.push_str(&format!(
            "\n{} {warning}\n",
            render::paint("warning:", "33", colour)
        ));
    }
    out
}

/// Every fault, then the warnings, one a line; and how many.
pub fn render_refused(r: &Refused, colour: bool) -> String {
    let mut out = String::new();
    for fault in &r.faults {
        out.push_str(&format!(
            "{} {fault}\n",
            render::paint("error:", "31", colour)
        ));
    }
    for warning in &r.warnings {
        out.push_str(&format!(
            "{} {warning}\n",
            render::paint("warning:", "33", colour)
        ));
    }
    let n = r.faults.len();
    out.push_str(&format!(
        "{n} fault{} found; serve would refuse this config\n",
        if n == 1 { "" } else { "s" }
    ));
    out
}
