//! The start-up summary: which surfaces are on, which are off, and what each off one needs.

use std::net::SocketAddr;

use serde::Serialize;

use crate::App;
use crate::secrets::TokensFrom;

#[derive(Debug, Clone, Serialize)]
pub struct SurfaceLine {
    pub surface: &'static str,
    pub on: bool,
    /// What it does when on; what it needs when off.
    pub note: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub version: &'static str,
    pub listening: String,
    pub replica: String,
    pub config: String,
    pub store: String,
    pub agents: Vec<String>,
    /// The extractor and the context block's bounds.
    pub memory: String,
    /// Log format, the span log, and where spans are exported (if anywhere).
    pub telemetry: String,
    pub surfaces: Vec<SurfaceLine>,
}

/// The summary of a built app listening on `addr`.
pub fn summary(app: &App, addr: SocketAddr) -> Summary {
    let c = &app.config;
    let agents = c
        .agent_specs
        .iter()
        .map(|(name, spec)| {
            let mut line = format!("{name} ({}", spec.backend.kind());
            if c.default_agent.as_ref() == Some(name) {
                line.push_str(", default");
            }
            if name.as_str() == commands::CODING_AGENT {
                line.push_str(", coding");
            }
            line.push(')');
            line
        })
        .collect();
    let on = |surface, note: &str| SurfaceLine {
        surface,
        on: true,
        note: note.to_owned(),
    };
    let mut surfaces = vec![
        on(
            "/healthz /readyz",
            "liveness, and readiness (the store answers)",
        ),
        on(
            "cli",
            "`switchboard <command>` and `switchboard ask`, as cli:local",
        ),
    ];
    surfaces.extend(app.surfaces.iter().map(|s| s.summary_line(app)));
    surfaces.extend([
        policy_line(app),
        broker_line(app),
        sandbox_line(app),
        network_line(app),
        workspaces_line(app),
        retention_line(app),
        // Last: tests read the summary up to this line.
        schedules_line(app),
    ]);
    Summary {
        version: env!("CARGO_PKG_VERSION"),
        listening: format!("http://{addr}"),
        replica: app.replica.as_str().to_owned(),
        config: c.source.to_string(),
        store: format!("{} ({})", c.store.url.redacted(), app.store.backend()),
        agents,
        memory: memory_line(&c.memory),
        telemetry: telemetry_line(&c.telemetry),
        surfaces,
    }
}

/// The policy in force (its hash, its groups) and how it reloads.
fn policy_line(app: &App) -> SurfaceLine {
    let policy = app.services.policy.now();
    let groups = policy.table.group_entries().len();
    let reloads = match (&app.config.source, app.config.server.config_poll) {
        (crate::config::Source::EmbeddedDefault, _) => {
            "no file to reload (the embedded default; start with --config FILE)".to_owned()
        }
        (_, Some(poll)) => format!(
            "reloads on SIGHUP and when the file changes (looked at every {} ms)",
            poll.as_millis()
        ),
        (_, None) => "reloads on SIGHUP ([server] config_poll_ms = 0)".to_owned(),
    };
    SurfaceLine {
        surface: "policy",
        on: true,
        note: format!(
            "{}, {groups} group grant{}; {reloads}; docs/groups-and-reloads.md",
            policy.hash,
            if groups == 1 { "" } else { "s" }
        ),
    }
}

/// The tool broker: on when an agent calls tools (its grants, the org's rules, who answers an
/// ask under `serve`), or off and what turns it on.
fn broker_line(app: &App) -> SurfaceLine {
    let c = &app.config;
    let calling: Vec<String> = c
        .agent_specs
        .iter()
        .filter_map(|(name, spec)| {
            if spec.backend.tool_model().is_some() {
                Some(name.to_string())
            } else {
                // A Claude Code agent's own calls, through its hook.
                spec.backend.claude_code_model().map(|_| {
                    format!(
                        "{name} (Claude Code {}, through its hook)",
                        agents::claude_code::TESTED_VERSIONS
                    )
                })
            }
        })
        .collect();
    if calling.is_empty() {
        return SurfaceLine {
            surface: "tool broker",
            on: false,
            note: "no agent calls tools (an openai or claude-code agent does; docs/broker.md)"
                .to_owned(),
        };
    }
    let policy = &c.tool_policy;
    SurfaceLine {
        surface: "tool broker",
        on: true,
        note: format!(
            "tool calls of {} pass it: {} grant{}, {} org rule{}; reviews by {}; a person answers on the run's page (/runs/<id>), `switchboard ask` on the terminal",
            calling.join(", "),
            policy.grants.len(),
            if policy.grants.len() == 1 { "" } else { "s" },
            policy.org_rules.len(),
            if policy.org_rules.len() == 1 { "" } else { "s" },
            policy.reviewer.as_ref().map_or_else(
                || "nobody (set [agent_policy] reviewer)".to_owned(),
                |r| format!("agent {r}")
            ),
        ),
    }
}

/// bubblewrap: which programs run under it, which `command` agents opted out, and whether it
/// can run here at all (probed once; a sandboxed run fails without it).
fn sandbox_line(app: &App) -> SurfaceLine {
    let specs = &app.config.agent_specs;
    let command = |sandboxed: bool| -> Vec<String> {
        specs
            .iter()
            .filter(|(_, spec)| {
                matches!(spec.backend, crate::config::BackendSpec::Command { sandbox, .. } if sandbox == sandboxed)
            })
            .map(|(name, _)| name.to_string())
            .collect()
    };
    let (boxed, open) = (command(true), command(false));
    let tools = specs.values().any(|s| s.backend.tool_model().is_some());
    let mut users = Vec::new();
    if !boxed.is_empty() {
        users.push(format!("command agents {}", boxed.join(", ")));
    }
    if tools {
        users.push("the tool loop's shell and git calls".to_owned());
    }
    let opted_out = if open.is_empty() {
        String::new()
    } else {
        format!(
            "; NOT sandboxed (sandbox = false): {} (a project's deny_read still sandboxes them)",
            open.join(", ")
        )
    };
    if users.is_empty() {
        return SurfaceLine {
            surface: "sandbox",
            on: false,
            note: format!(
                "no program runs under it (no sandboxed command agent, no tool-calling agent){opted_out}"
            ),
        };
    }
    match agents::sandbox::available() {
        Ok(()) => {
            let limits = agents::sandbox::SandboxLimits::default();
            let who = match agents::sandbox::host_user() {
                Some(user) => format!(
                    "as host uid {} gid {}, never root ([sandbox] user_id, group_id)",
                    user.uid, user.gid
                ),
                None => "as this server's own user".to_owned(),
            };
            SurfaceLine {
                surface: "sandbox",
                on: true,
                note: format!(
                    "bubblewrap runs {} {who} (each sandbox: /tmp {} MiB, {} processes){opted_out}",
                    users.join(" and "),
                    limits.tmp_bytes / (1024 * 1024),
                    limits.processes
                ),
            }
        }
        Err(e) => SurfaceLine {
            surface: "sandbox",
            on: false,
            note: format!(
                "BROKEN: {e}; every run of {} fails until it can{opted_out}",
                users.join(" and ")
            ),
        },
    }
}

/// Command agents' networks: which go through the broker's per-run proxy (each host
/// decided), and which have the host's, undecided (`network = "host"`, or unsandboxed).
fn network_line(app: &App) -> SurfaceLine {
    use crate::config::{AgentNetwork, BackendSpec};
    let (mut decided, mut undecided) = (Vec::new(), Vec::new());
    for (name, spec) in &app.config.agent_specs {
        match &spec.backend {
            BackendSpec::Command {
                network: AgentNetwork::Broker { model },
                ..
            } => decided.push(match model {
                Some(m) => {
                    let key = match &m.key_env {
                        Some(var) if !app.secrets.api_keys.contains_key(var) => {
                            format!(", its key {var} NOT set: model requests refused")
                        }
                        Some(var) => format!(", key from {var}"),
                        None => String::new(),
                    };
                    format!(
                        "{name} (model endpoint {}, {} API{key})",
                        m.url,
                        m.api.as_str()
                    )
                }
                None => name.to_string(),
            }),
            BackendSpec::Command { sandbox, .. } => undecided.push(format!(
                "{name} ({})",
                if *sandbox {
                    "network = \"host\""
                } else {
                    "sandbox = false"
                }
            )),
            _ => {}
        }
    }
    let undecided = if undecided.is_empty() {
        String::new()
    } else {
        format!(
            "; NOT decided, the host's network: {}",
            undecided.join(", ")
        )
    };
    if decided.is_empty() {
        return SurfaceLine {
            surface: "network",
            on: false,
            note: format!("no command agent's traffic goes through the broker{undecided}"),
        };
    }
    let forwarder = if agents::netproxy::forwarder::binary().is_some() {
        ""
    } else {
        "BROKEN: this process is not the switchboard binary, so no forwarder can run in a sandbox and their runs fail; "
    };
    SurfaceLine {
        surface: "network",
        on: true,
        note: format!(
            "{forwarder}command agents {}: no network but the run's proxy, each host decided by the broker (net.fetch){undecided}",
            decided.join(", ")
        ),
    }
}

/// What the store prunes, and how often.
fn retention_line(app: &App) -> SurfaceLine {
    let r = &app.config.retention;
    let kept = |what: &str, age: Option<std::time::Duration>| match age {
        Some(d) => format!("{what} {} d", d.as_secs() / (24 * 3600)),
        None => format!("{what} kept"),
    };
    let kinds = [
        kept("chat event ids", r.rules.event_ids),
        kept("answered threads", r.rules.answered_threads),
        kept("approvals", r.rules.approvals),
        kept("firings", r.rules.firings),
        kept("runs", r.rules.runs),
    ];
    let note = format!(
        "{}; pruned every {} min in batches of {}",
        kinds.join(", "),
        r.interval.as_secs() / 60,
        r.rules.batch
    );
    SurfaceLine {
        surface: "retention",
        on: true,
        note,
    }
}

/// Runs' own workspaces: where they are made, how URL repos are refetched and how long run
/// branches are kept.
fn workspaces_line(app: &App) -> SurfaceLine {
    let repos = &app.config.repos;
    let kept = match repos.branch_retention {
        Some(d) => format!("run branches kept {} days", d.as_secs() / (24 * 3600)),
        None => "run branches kept".to_owned(),
    };
    SurfaceLine {
        surface: "workspaces",
        on: true,
        note: format!(
            "one per run in {}; URL repos fetched again after {} s; {kept}",
            app.config.server.data_dir.join("runs").display(),
            repos.fetch_interval.as_secs()
        ),
    }
}

/// `/api` and `/runs`: on (whose tokens, where the keys come from), or off and what it needs.
pub(crate) fn access_line(app: &App) -> SurfaceLine {
    use crate::access_surface::AccessState;
    let line = |on, note: String| SurfaceLine {
        surface: "/api /runs",
        on,
        note,
    };
    match &app.access {
        AccessState::Absent => line(
            false,
            "needs an [access] section with issuer and audience (docs/access.md)".to_owned(),
        ),
        AccessState::Missing(what) => line(false, format!("[access] is set but needs {what}")),
        AccessState::On(v) => {
            let s = v.settings();
            let keys = match &s.jwks {
                access_api::JwksSource::Url(u) => u.clone(),
                access_api::JwksSource::File(f) => f.display().to_string(),
            };
            let links = match &app.config.server.public_url {
                Some(u) => format!("capability links under {u}"),
                None => "no capability links (set [server] public_url)".to_owned(),
            };
            line(
                true,
                format!(
                    "Access JWTs from {} for audience {} (keys: {keys}, kept {}s); {links}",
                    s.issuer,
                    s.audience,
                    s.jwks_ttl.as_secs()
                ),
            )
        }
    }
}

/// The Slack surface: on (how events arrive, as whom, missing scopes), or off and what it
/// needs.
pub(crate) fn slack_line(
    state: &crate::slack_surface::SlackState,
    config: Option<&crate::config::SlackConfig>,
) -> SurfaceLine {
    use crate::slack_surface::SlackState;
    let line = |on, note: String| SurfaceLine {
        surface: "slack",
        on,
        note,
    };
    match state {
        SlackState::Absent => line(
            false,
            "needs a [slack] section and SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET (docs/slack.md)"
                .to_owned(),
        ),
        SlackState::Missing(vars) => line(
            false,
            format!("[slack] is set but needs {}", vars.join(", ")),
        ),
        SlackState::Failed(why) => line(false, why.clone()),
        SlackState::Retrying { why, .. } => line(false, why.clone()),
        SlackState::Built(_) => line(
            false,
            "configured; it connects when `serve` starts".to_owned(),
        ),
        SlackState::On {
            surface,
            mode,
            missing_scopes,
            ..
        } => {
            let how = match mode {
                slack::SlackMode::Events => {
                    "events at POST /slack/events, clicks at POST /slack/interactions"
                }
                slack::SlackMode::Socket => "Socket Mode",
            };
            let (ttl, outsiders) = config.map_or((0, ""), |c| {
                let outsiders = match c.outsiders {
                    slack::Outsiders::Refused => "other workspaces' users refused",
                    slack::Outsiders::OwnEntryOnly => {
                        "other workspaces' users hold only their own grants entry"
                    }
                };
                (c.directory_ttl.as_secs(), outsiders)
            });
            let mut note = format!(
                "{how}, as bot user {}; directory TTL {ttl}s; {outsiders}",
                surface.bot_user()
            );
            if !missing_scopes.is_empty() {
                note.push_str(&format!("; MISSING SCOPES: {}", missing_scopes.join(", ")));
            }
            line(true, note)
        }
    }
}

/// `human logs; span log of 1000 lines at /admin/trace/log (trace:read); no export`.
fn telemetry_line(t: &crate::config::TelemetryConfig) -> String {
    let format = if t.json_logs { "json" } else { "human" };
    let audit = match &t.audit_file {
        Some(path) => format!("audit lines to {}", path.display()),
        None => "audit lines with the log".to_owned(),
    };
    let export = match &t.otlp_endpoint {
        Some(endpoint) => format!("spans exported to {endpoint}/v1/traces (OTLP/HTTP)"),
        None => "no span export ([telemetry] otlp_endpoint)".to_owned(),
    };
    format!(
        "{format} logs; {audit}; span log of {} lines at /admin/trace/log (trace:read); {export}",
        t.span_log_capacity
    )
}

/// `rules extractor; block ≤ 20 records, 4000 chars; reflection ≤ 30s`.
fn memory_line(m: &crate::config::MemoryConfig) -> String {
    let s = &m.settings;
    let extractor = match &m.model_agent {
        Some(agent) => format!("model extractor (agent {agent})"),
        None => "rules extractor".to_owned(),
    };
    format!(
        "{extractor}; block ≤ {} records, {} chars; reflection ≤ {}s",
        s.context_max_records,
        s.context_max_chars,
        s.reflection_timeout.as_secs()
    )
}

/// `2 schedules (nightly, self-improvement), timer in process; 1 misconfigured: …`.
fn schedules_line(app: &App) -> SurfaceLine {
    let names: Vec<&str> = app.scheduler.names().map(|n| n.as_str()).collect();
    let mut note = format!(
        "{} ({}); fired in process, one firing per slot across replicas; `schedule fire <name>` fires one now",
        plural(names.len(), "schedule"),
        names.join(", ")
    );
    let bad = app.scheduler.misconfigured();
    if !bad.is_empty() {
        let what: Vec<String> = bad.iter().map(|(n, m)| format!("{n} ({m})")).collect();
        note.push_str(&format!(
            "; {} misconfigured, recording `misconfigured` and sending nothing: {}",
            bad.len(),
            what.join("; ")
        ));
    }
    SurfaceLine {
        surface: "schedules",
        on: !names.is_empty(),
        note,
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `POST /ingress`: on with its token map, or off and what it needs.
pub(crate) fn ingress_line(app: &App) -> SurfaceLine {
    let (on, note) = match &app.secrets.ingress_tokens {
        Some((map, TokensFrom::Env)) => (
            true,
            format!("{} from SWITCHBOARD_INGRESS_TOKENS", tokens(map.len())),
        ),
        Some((map, TokensFrom::File(f))) => (true, format!("{} from {f}", tokens(map.len()))),
        None => (
            false,
            "needs a token map: SWITCHBOARD_INGRESS_TOKENS or [ingress] tokens_file (the route answers 503)".to_owned(),
        ),
    };
    SurfaceLine {
        surface: "/ingress",
        on,
        note,
    }
}

pub(crate) fn mcp_line(app: &App) -> SurfaceLine {
    let c = &app.config.mcp;
    let (on, note) = match (c.enabled, &app.secrets.ingress_tokens) {
        (true, Some((map, _))) => {
            let hosts: Vec<String> = c.settings.allowed_hosts.iter().map(ToString::to_string).collect();
            (
                true,
                format!(
                    "stateless Streamable HTTP; {} and run-scoped agent tokens; hosts {}",
                    tokens(map.len()),
                    hosts.join(", ")
                ),
            )
        }
        (true, None) => (
            false,
            "[mcp] enabled, but it needs a token map: SWITCHBOARD_INGRESS_TOKENS or [ingress] tokens_file (the route answers 503)".to_owned(),
        ),
        (false, _) => (
            false,
            "needs [mcp] enabled = true and a token map (SWITCHBOARD_INGRESS_TOKENS or [ingress] tokens_file)".to_owned(),
        ),
    };
    SurfaceLine {
        surface: "/mcp",
        on,
        note,
    }
}

fn tokens(n: usize) -> String {
    if n == 1 {
        "1 bearer token".to_owned()
    } else {
        format!("{n} bearer tokens")
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "switchboard {} serving on {} (replica {})",
            self.version, self.listening, self.replica
        )?;
        writeln!(f, "  config  {}", self.config)?;
        writeln!(f, "  store   {}", self.store)?;
        let agents = if self.agents.is_empty() {
            "none declared ([agents.<name>])".to_owned()
        } else {
            self.agents.join(", ")
        };
        writeln!(f, "  agents  {agents}")?;
        writeln!(f, "  memory  {}", self.memory)?;
        writeln!(f, "  traces  {}", self.telemetry)?;
        for s in &self.surfaces {
            let state = if s.on { "on " } else { "off" };
            writeln!(f, "  {state} {:<18} {}", s.surface, s.note)?;
        }
        Ok(())
    }
}
