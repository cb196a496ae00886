//! `switchboard authz diff`, `authz test` and `authz who-can`: a policy change reviewed before
//! it ships. The decisions are authz-core's (`review::diff`, `review::who_can`, `explain`);
//! this module reads the files, compares the agent policies, and prints.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context;
use authz_core::review::{Change, diff, who_can};
use authz_core::{Action, GrantsTable, Resource, parse_resource_spec};
use broker::rules::{Layer, NamePattern, RuleDecision, RuleKey, RuleTable, ToolRule};
use serde_json::{Value, json};
use server::config::{LoadedConfig, Source};

use crate::explain;

/// A config read from `path`, or as committed at `rev` when it is given (`git show`).
pub fn load_at(path: &Path, rev: Option<&str>) -> anyhow::Result<LoadedConfig> {
    let text = match rev {
        None => std::fs::read_to_string(path).with_context(|| {
            format!(
                "cannot read {} (name an existing config file)",
                path.display()
            )
        })?,
        Some(rev) => committed(path, rev)?,
    };
    let source = Source::File(match rev {
        Some(rev) => PathBuf::from(format!("{rev}:{}", path.display())),
        None => path.to_path_buf(),
    });
    let sections = server::surface::builtin();
    Ok(server::config::parse_with(
        source,
        &text,
        &server::surface::sections(&sections),
    )?)
}

/// The file as committed at `rev`, read with git from the repository it is in.
fn committed(path: &Path, rev: &str) -> anyhow::Result<String> {
    anyhow::ensure!(
        !rev.starts_with('-') && !rev.is_empty(),
        "--git {rev:?}: a revision, like HEAD~1 or origin/main (never an option)"
    );
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().context("--git needs a file path")?;
    let spec = format!("{rev}:./{}", name.to_string_lossy());
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["show", "--no-textconv", &spec])
        .output()
        .context("running git (is it installed?)")?;
    anyhow::ensure!(
        out.status.success(),
        "git show {spec} in {}: {} (name a revision that has the file)",
        dir.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8(out.stdout).context("the committed file is not UTF-8")
}

/// One change of the agent policy: the call a rule key stands for, before and after.
struct RuleChange {
    loosened: bool,
    /// `decision`: the table's answer for a project with no rules of its own; `ceiling`: the
    /// org's cap over whatever a project's or a run's rules answer (`none`: no cap).
    what: &'static str,
    action: String,
    tool: String,
    model: Option<String>,
    agent_kind: Option<String>,
    before: &'static str,
    after: &'static str,
}

/// The names a pattern field takes: each exact name, each prefix and a name below it, and
/// one no rule names; with `none` too for the fields a call may lack.
fn field_values(patterns: impl Iterator<Item = NamePattern>, extra: &[&str]) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    for p in patterns {
        match p {
            NamePattern::Exact(n) => {
                out.insert(n);
            }
            NamePattern::Below(prefix) => {
                out.insert(format!("{prefix}.(unnamed)"));
                out.insert(prefix);
            }
        }
    }
    out.insert("(unnamed)".to_owned());
    out
}

/// The most calls `rule_changes` compares; more is refused (exit 2), never sampled.
const MAX_RULE_KEYS: usize = 2_000_000;

/// Every change of decision between two org rule sets, over every call their rules (and the
/// shipped defaults) tell apart: the answer with no project or run rules, and the org's
/// ceiling over whatever those answer.
fn rule_changes(old: &[ToolRule], new: &[ToolRule]) -> anyhow::Result<Vec<RuleChange>> {
    let all: Vec<&ToolRule> = old.iter().chain(new).collect();
    let shipped = broker::rules::shipped_rules();
    let pick = |f: fn(&ToolRule) -> Option<NamePattern>| {
        all.iter()
            .copied()
            .chain(shipped.iter())
            .filter_map(f)
            .collect::<Vec<_>>()
    };
    let tools: Vec<&str> = broker::agent_tools::AGENT_TOOLS
        .iter()
        .flat_map(|(a, b)| [*a, *b])
        .collect();
    let actions = field_values(pick(|r| r.action.clone()).into_iter(), &[]);
    let tools = field_values(pick(|r| r.tool.clone()).into_iter(), &tools);
    let models = field_values(pick(|r| r.model.clone()).into_iter(), &[]);
    let kinds = field_values(pick(|r| r.agent_kind.clone()).into_iter(), &[]);
    let keys = actions.len() * tools.len() * (models.len() + 1) * (kinds.len() + 1);
    anyhow::ensure!(
        keys <= MAX_RULE_KEYS,
        "[agent_policy]: the rules name too many distinct actions, tools, models and agent kinds to compare every call ({keys} calls, at most {MAX_RULE_KEYS}); review the change by hand or in smaller steps"
    );
    let (a, b) = (
        RuleTable::new(old.to_vec(), vec![], vec![]),
        RuleTable::new(new.to_vec(), vec![], vec![]),
    );
    let (cap_a, cap_b) = (Layer::new(old.to_vec()), Layer::new(new.to_vec()));
    let cap = |c: Option<RuleDecision>| {
        (
            c.unwrap_or(RuleDecision::Allow),
            c.map_or("none", RuleDecision::as_str),
        )
    };
    let optional = |set: &BTreeSet<String>| -> Vec<Option<String>> {
        std::iter::once(None)
            .chain(set.iter().cloned().map(Some))
            .collect()
    };
    let mut out = Vec::new();
    for action in &actions {
        for tool in &tools {
            for model in optional(&models) {
                for kind in optional(&kinds) {
                    let key = RuleKey {
                        action,
                        tool,
                        model: model.as_deref(),
                        agent_kind: kind.as_deref(),
                    };
                    let (before, after) = (a.lookup(&key).decision, b.lookup(&key).decision);
                    let ((cap_before, was), (cap_after, is)) =
                        (cap(cap_a.lookup(&key)), cap(cap_b.lookup(&key)));
                    let changed = [
                        ("decision", before, after, before.as_str(), after.as_str()),
                        ("ceiling", cap_before, cap_after, was, is),
                    ];
                    for (what, x, y, was, is) in changed {
                        if was != is {
                            out.push(RuleChange {
                                loosened: y > x,
                                what,
                                action: action.clone(),
                                tool: tool.clone(),
                                model: model.clone(),
                                agent_kind: kind.clone(),
                                before: was,
                                after: is,
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// `[[agent_grants]]` changed by id: added, changed or removed. Each counts as a widening
/// (read it): a grant's effect depends on the others (a `deny` grant outranks the rest, one's
/// labels raise the taint the others stop at), so removing one can widen too.
fn grant_changes(old: &LoadedConfig, new: &LoadedConfig) -> Vec<(String, &'static str)> {
    let by_id = |c: &LoadedConfig| -> BTreeMap<String, String> {
        c.tool_policy
            .grants
            .iter()
            .map(|g| (g.id.clone(), format!("{g:?}")))
            .collect()
    };
    let (a, b) = (by_id(old), by_id(new));
    let mut out = Vec::new();
    for (id, spec) in &b {
        match a.get(id) {
            None => out.push((id.clone(), "added")),
            Some(before) if before != spec => out.push((id.clone(), "changed")),
            Some(_) => {}
        }
    }
    out.extend(
        a.keys()
            .filter(|id| !b.contains_key(*id))
            .map(|id| (id.clone(), "removed")),
    );
    out
}

/// What `authz diff` found, and whether anything widens.
pub struct Review {
    pub widens: bool,
    pub json: Value,
    pub text: String,
}

pub fn review(old: &LoadedConfig, new: &LoadedConfig) -> anyhow::Result<Review> {
    let changes = diff(&old.table, &new.table);
    let rules = rule_changes(&old.tool_policy.org_rules, &new.tool_policy.org_rules)?;
    let mut grants = grant_changes(old, new);
    // Who reviews an `agent_review` call, and how long an ask waits: a setting, read by a person.
    if old.tool_policy.reviewer != new.tool_policy.reviewer {
        grants.push(("[agent_policy] reviewer".to_owned(), "changed"));
    }
    if old.tool_policy.approval_timeout != new.tool_policy.approval_timeout {
        grants.push((
            "[agent_policy] approval_timeout_seconds".to_owned(),
            "changed",
        ));
    }
    let widens = changes.iter().any(|c| c.change == "granted")
        || rules.iter().any(|r| r.loosened)
        || !grants.is_empty();
    let mut items: Vec<Value> = changes
        .iter()
        .map(|c| {
            let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
            if let Some(o) = v.as_object_mut() {
                o.insert("kind".into(), json!("authz"));
            }
            v
        })
        .collect();
    items.extend(rules.iter().map(|r| {
        json!({"kind": "agent_policy", "change": if r.loosened { "granted" } else { "revoked" },
            "what": r.what, "action": r.action, "tool": r.tool, "model": r.model, "agent_kind": r.agent_kind,
            "before": r.before, "after": r.after})
    }));
    items.extend(grants.iter().map(|(id, what)| {
        json!({"kind": "agent_grant", "change": if *what == "removed" { "revoked" } else { "granted" },
            "grant": id, "what": what})
    }));
    Ok(Review {
        widens,
        json: json!({"changes": items}),
        text: render(&changes, &rules, &grants),
    })
}

/// A resource shape in words, for the human report.
fn phrase(spec: &str, actor_id: &str, principal: Option<&str>) -> String {
    let fields: BTreeMap<&str, &str> = spec
        .split_once(':')
        .map(|(_, rest)| {
            rest.split(',')
                .filter_map(|kv| kv.split_once('='))
                .collect()
        })
        .unwrap_or_default();
    let get = |k: &str| fields.get(k).copied().unwrap_or("");
    let own = |u: &str| u == actor_id || Some(u) == principal;
    match spec.split(':').next().unwrap_or("") {
        "run" => format!(
            "{} runs in {}{}",
            get("visibility"),
            get("channel"),
            if own(get("user")) { " (their own)" } else { "" }
        ),
        "channel" => format!("{} channel {}", get("visibility"), get("id")),
        "memory-scope" => format!("{} memory {}", get("kind"), get("key")),
        "config-scope" => format!("{} config {}", get("tier"), get("id")),
        "repo" => format!("repo {}", get("slug")),
        "agent" => format!("agent {}", get("name")),
        "command" => "the command".to_owned(),
        _ => spec.to_owned(),
    }
}

/// Up to `n` of `items`, then how many more.
fn some_of(items: &[String], n: usize) -> String {
    let shown = items.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    match items.len().saturating_sub(n) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

fn render(changes: &[Change], rules: &[RuleChange], grants: &[(String, &'static str)]) -> String {
    if changes.is_empty() && rules.is_empty() && grants.is_empty() {
        return "no change of decision\n".to_owned();
    }
    // (actor, gains/loses, action) → the shapes in words; then actors alike in all three
    // are named together (an agent for each person of a group changes as they do).
    let mut by_actor: BTreeMap<(String, &str, String), BTreeSet<String>> = BTreeMap::new();
    for c in changes {
        let verb = if c.change == "granted" {
            "gain"
        } else {
            "lose"
        };
        by_actor
            .entry((c.actor.clone(), verb, c.action.clone()))
            .or_default()
            .insert(phrase(&c.resource, &c.actor_id, c.on_behalf_of.as_deref()));
    }
    let mut together: BTreeMap<(&str, String, Vec<String>), Vec<String>> = BTreeMap::new();
    for ((actor, verb, action), shapes) in by_actor {
        together
            .entry((verb, action, shapes.into_iter().collect()))
            .or_default()
            .push(actor);
    }
    let mut out = String::new();
    for ((verb, action, shapes), mut actors) in together {
        // People first, then the agents acting for them.
        actors.sort_by_key(|a| (a.starts_with("agent:"), a.clone()));
        out.push_str(&format!(
            "{} {verb} {action} on {} (--json lists each)\n",
            some_of(&actors, 4),
            some_of(&shapes, 6)
        ));
    }
    let mut calls: BTreeMap<(bool, &str, &str, &str, &str), Vec<String>> = BTreeMap::new();
    for r in rules {
        let mut call = format!("through {}", r.tool);
        for (what, v) in [("agent kind", &r.agent_kind), ("model", &r.model)] {
            if let Some(v) = v {
                call.push_str(&format!(" ({what} {v})"));
            }
        }
        calls
            .entry((r.loosened, r.what, r.action.as_str(), r.before, r.after))
            .or_default()
            .push(call);
    }
    for ((loosened, what, action, before, after), which) in calls {
        let what = match what {
            "ceiling" => "the org's ceiling on",
            _ => "",
        };
        out.push_str(&format!(
            "agent policy {} {what}{}{action}: {before} → {after}, for {} call(s): {}\n",
            if loosened { "loosens" } else { "tightens" },
            if what.is_empty() { "" } else { " " },
            which.len(),
            some_of(&which, 3)
        ));
    }
    for (id, what) in grants {
        out.push_str(&format!("agent grant {id:?} {what}\n"));
    }
    let granted = changes.iter().filter(|c| c.change == "granted").count()
        + rules.iter().filter(|r| r.loosened).count();
    let all = changes.len() + rules.len();
    out.push_str(&format!(
        "\n{all} change(s) of decision: {granted} granted or loosened, {} revoked or tightened; {} agent grant(s) changed\n",
        all - granted,
        grants.len()
    ));
    out
}

/// `authz who-can <action> [<resource>]`.
pub fn who_can_report(
    table: &GrantsTable,
    action: &str,
    resource: Option<&str>,
) -> anyhow::Result<(Value, String)> {
    let action = Action::parse(action).map_err(|e| anyhow::anyhow!("<action>: {e}"))?;
    let resource: Option<Resource> = resource
        .map(|r| parse_resource_spec(r, table).map_err(|e| anyhow::anyhow!("<resource>: {e}")))
        .transpose()?;
    let allowed = who_can(table, &action, resource.as_ref());
    let rows: Vec<Vec<String>> = allowed
        .iter()
        .map(|a| {
            let by = if a.granted_by.is_empty() {
                "(no grant needed: the policy table's own row)".to_owned()
            } else {
                a.granted_by.join(", ")
            };
            vec![a.actor.clone(), by]
        })
        .collect();
    let on = resource
        .as_ref()
        .map_or_else(|| "some resource".to_owned(), authz_core::review::spec_of);
    let text = format!(
        "{} actor class(es) may {action} on {on}\n{}",
        allowed.len(),
        crate::render::table(&["ACTOR", "GRANTED BY"], &rows)
    );
    Ok((
        json!({"action": action.to_string(), "resource": resource.as_ref().map(authz_core::review::spec_of), "allowed": allowed}),
        text,
    ))
}

/// One `[[case]]` of an `authz test` file.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    actor: String,
    #[serde(default)]
    on_behalf_of: Option<String>,
    #[serde(default)]
    groups: Vec<String>,
    action: String,
    resource: String,
    expect: String,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Cases {
    case: Vec<Case>,
}

/// `authz test <file>`: each case decided under `table`; the failures with explain's reasoning.
/// `Ok((failed, json, text))`; a file that does not read is an error (exit 2).
pub fn test_cases(table: &GrantsTable, file: &Path) -> anyhow::Result<(usize, Value, String)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let cases: Cases = toml::from_str(&text)
        .with_context(|| format!("{}: each case is a [[case]] table with actor, action, resource and expect = \"allow\" or \"deny\" (optional: on_behalf_of, groups, reason)", file.display()))?;
    let mut failures = Vec::new();
    let mut out = String::new();
    for (i, case) in cases.case.iter().enumerate() {
        let at = format!(
            "{}: case {} ({} {} {})",
            file.display(),
            i + 1,
            case.actor,
            case.action,
            case.resource
        );
        let want_allow = match case.expect.as_str() {
            "allow" => true,
            "deny" => false,
            other => anyhow::bail!("{at}: expect = {other:?}; write \"allow\" or \"deny\""),
        };
        let req = explain::resolve(
            table,
            &case.actor,
            case.on_behalf_of.as_deref(),
            &case.groups,
            &case.action,
            &case.resource,
        )
        .map_err(|e| anyhow::anyhow!("{at}: {e}"))?;
        let e = explain::decide(&req);
        let reason = match &e.verdict {
            authz_core::Verdict::Deny(r) => Some(r.token()),
            authz_core::Verdict::Allow => None,
        };
        let reason_ok = case
            .reason
            .as_deref()
            .is_none_or(|want| Some(want) == reason);
        if e.verdict.is_allow() != want_allow || !reason_ok {
            let why = match (&case.reason, reason) {
                (Some(want), got) if !reason_ok => format!(
                    " (expected reason {want}, got {})",
                    got.unwrap_or("none: allowed")
                ),
                _ => String::new(),
            };
            out.push_str(&format!("FAIL {at}: expected {}{why}\n", case.expect));
            out.push_str(&explain::render_human(&req, &e, false));
            out.push('\n');
            failures.push(json!({"case": i + 1, "actor": case.actor, "action": case.action, "resource": case.resource, "expect": case.expect, "got": if e.verdict.is_allow() { "allow" } else { "deny" }, "reason": reason}));
        }
    }
    out.push_str(&format!(
        "{} case(s), {} failed\n",
        cases.case.len(),
        failures.len()
    ));
    Ok((
        failures.len(),
        json!({"cases": cases.case.len(), "failed": failures}),
        out,
    ))
}
