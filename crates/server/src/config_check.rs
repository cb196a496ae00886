//! What `config check` finds: every fault of the file (the load's own), then everything `serve`
//! would refuse at start with this environment (the token map, the agent-token secret, each
//! agent's back end, the audit file's directory, the store and MCP together), a schedule that
//! could not fire, and a config with no agent to run. Warnings are what `serve` starts with
//! but a user would trip on: a `command` agent's program not on its `PATH`, no default agent.
//! Each fault names the file, line, column and key where there is one, and the fix.

use std::path::Path;

use authz_core::ScheduleName;
use toml::de::{DeTable, DeValue};

use crate::Secrets;
use crate::config::{self, BackendSpec, LoadError, LoadedConfig, Source, Text};
use crate::secrets::{AGENT_TOKEN_SECRET_ENV, INGRESS_TOKENS_ENV};

/// What a check found. `config` is the loaded file when it loaded.
pub struct CheckOutcome {
    pub config: Option<LoadedConfig>,
    pub faults: Vec<LoadError>,
    pub warnings: Vec<LoadError>,
}

impl CheckOutcome {
    pub fn ok(&self) -> bool {
        self.faults.is_empty() && self.config.is_some()
    }
}

/// Checks the file of `source` as `serve` would load and start it, in the environment `env`.
pub fn check(source: Source, env: impl Fn(&str) -> Option<String>) -> CheckOutcome {
    match config::read_text(&source) {
        Ok(text) => check_text(source, &text, env),
        Err(e) => refused(vec![e]),
    }
}

fn refused(faults: Vec<LoadError>) -> CheckOutcome {
    CheckOutcome {
        config: None,
        faults,
        warnings: Vec::new(),
    }
}

/// [`check`] of `text`, read from `source` already: a reload checks exactly the bytes it
/// hashed, never a second read of a file that may be changing.
pub fn check_text(
    source: Source,
    text: &str,
    env: impl Fn(&str) -> Option<String>,
) -> CheckOutcome {
    let sections = crate::surface::builtin();
    let config =
        match config::parse_with(source.clone(), text, &crate::surface::sections(&sections)) {
            Ok(c) => c,
            Err(faults) => return refused(faults.0),
        };
    let t = Text::new(&source, text);
    let mut found = Found::default();
    let secrets = environment(&t, &config, &env, &mut found);
    if let Some(secrets) = &secrets {
        agents(&t, &config, secrets, &mut found);
    }
    audit_directory(&t, &config, &mut found);
    directories(&t, &config, &mut found);
    schedules(&t, text, &config, &mut found);
    found
        .faults
        .sort_by_key(|e| (e.line.is_none(), e.line, e.column));
    CheckOutcome {
        config: Some(config),
        faults: found.faults,
        warnings: found.warnings,
    }
}

#[derive(Default)]
struct Found {
    faults: Vec<LoadError>,
    warnings: Vec<LoadError>,
}

/// The secrets `serve` reads at start, each refused as it would refuse it; the whole set when
/// every one reads.
fn environment(
    t: &Text<'_>,
    config: &LoadedConfig,
    env: &impl Fn(&str) -> Option<String>,
    found: &mut Found,
) -> Option<Secrets> {
    let from_env = |var: &str| env(var).is_some_and(|v| !v.trim().is_empty());
    let mut clean = true;
    if let Err(e) = crate::secrets::token_map(config, env) {
        clean = false;
        found.faults.push(if from_env(INGRESS_TOKENS_ENV) {
            t.nowhere(format!("{e:#}"))
        } else {
            t.key(&["ingress", "tokens_file"], format!("{e:#}"))
        });
    }
    if let Err(e) = crate::secrets::agent_token_secret(config, env) {
        clean = false;
        found.faults.push(if from_env(AGENT_TOKEN_SECRET_ENV) {
            t.nowhere(format!("{e:#}"))
        } else {
            t.key(&["server", "agent_token_secret_file"], format!("{e:#}"))
        });
    }
    // The rest is read without the two above, so a fault in them hides no other.
    let mut rest = config.clone();
    rest.ingress.tokens_file = None;
    rest.server.agent_token_secret_file = None;
    let without = |k: &str| match k {
        INGRESS_TOKENS_ENV | AGENT_TOKEN_SECRET_ENV => None,
        _ => env(k),
    };
    let secrets = match Secrets::from_lookup(&rest, without) {
        Ok(s) => s,
        Err(e) => {
            found.faults.push(t.nowhere(format!("{e:#}")));
            return None;
        }
    };
    if clean {
        let full = Secrets::from_lookup(config, env);
        match full.as_ref().map(|s| crate::preflight(config, s)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => found
                .faults
                .push(t.key(&["mcp", "enabled"], format!("{e:#}"))),
            Err(e) => found.faults.push(t.nowhere(format!("{e:#}"))),
        }
    }
    Some(secrets)
}

/// Each agent built as `serve` builds it; at least one to run; a `command` agent's program
/// found where it will be looked for.
fn agents(t: &Text<'_>, config: &LoadedConfig, secrets: &Secrets, found: &mut Found) {
    if config.agent_specs.is_empty() {
        found.faults.push(t.key(
            &["agents"],
            "no agent is declared, so every request for one fails; declare one, like [agents.echo] (it runs no model) or a `command` agent such as [agents.coding] with command = [\"claude\", \"-p\"]",
        ));
        return;
    }
    if config.default_agent.is_none() {
        found.warnings.push(t.key(
            &["agents", "default"],
            "no default agent: a request must name one with @<agent>; set default = \"<one of your agents>\"",
        ));
    }
    let mut runnable = 0;
    for (name, spec) in &config.agent_specs {
        if let BackendSpec::OpenAi {
            api_key_env: Some(var),
            ..
        } = &spec.backend
            && !secrets.api_keys.contains_key(var)
        {
            found.faults.push(t.key(
                &["agents", name.as_str(), "api_key_env"],
                format!("names {var}, which is not set in the environment; export {var}=<key> or remove api_key_env"),
            ));
        } else if let Err(e) = crate::build_agent(config, secrets, name, spec) {
            found
                .faults
                .push(t.key(&["agents", name.as_str()], format!("{e:#}")));
        }
        if let BackendSpec::Command {
            network:
                crate::config::AgentNetwork::Broker {
                    model:
                        Some(crate::config::ModelEndpointSpec {
                            key_env: Some(var), ..
                        }),
                },
            ..
        } = &spec.backend
            && !secrets.api_keys.contains_key(var)
        {
            found.warnings.push(t.key(
                &["agents", name.as_str(), "model_endpoint"],
                format!("key_env names {var}, which is not set in the environment, so every request of this agent to its model is refused; export {var}=<key> and restart"),
            ));
        }
        let BackendSpec::Command { argv, .. } = &spec.backend else {
            runnable += 1;
            continue;
        };
        let Some(program) = argv.first() else {
            continue;
        };
        // A Claude Code agent names its program with `program`.
        let key = match spec.backend.claude_code_model() {
            Some(_) => "program",
            None => "command",
        };
        if program_exists(program, &secrets.agent_env) {
            runnable += 1;
        } else {
            found.warnings.push(t.key(
                &["agents", name.as_str(), key],
                format!(
                    "agent `{name}`'s program `{program}` is not on the PATH it gets ({}), so its runs will fail; install it, or write its absolute path",
                    agent_path(&secrets.agent_env)
                ),
            ));
        }
    }
    if runnable == 0 {
        found.faults.push(t.key(
            &["agents"],
            "no agent can run: every declared agent's program is missing (each is named in a warning), so every request for one fails; install one, or declare [agents.echo] (it runs no model)",
        ));
    }
}

/// The directories `serve` writes in: the SQLite file's (which must exist) and the data
/// directory (made at start, so the nearest of it and its parents that exists must be a
/// directory).
fn directories(t: &Text<'_>, config: &LoadedConfig, found: &mut Found) {
    if let Some(file) = config.store.url.sqlite_file() {
        let file = Path::new(file.split('?').next().unwrap_or(file));
        let dir = file.parent().unwrap_or(Path::new("/"));
        if !dir.is_dir() {
            found.faults.push(t.key(
                &["store", "url"],
                format!(
                    "the directory {} of the SQLite file does not exist, so serve cannot open the store; create it (mkdir -p {}) or point url elsewhere",
                    dir.display(),
                    dir.display()
                ),
            ));
        }
    }
    let data_dir = &config.server.data_dir;
    let existing = data_dir.ancestors().find(|p| p.exists());
    if let Some(existing) = existing.filter(|p| !p.is_dir()) {
        found.faults.push(t.key(
            &["server", "data_dir"],
            format!(
                "{} is not a directory, so serve cannot make the data directory {} there; point data_dir at a directory",
                existing.display(),
                data_dir.display()
            ),
        ));
    }
}

/// The `PATH` a command agent's program is looked up on: its own, else the default.
fn agent_path(env: &[(String, String)]) -> String {
    env.iter()
        .find(|(k, _)| k == "PATH")
        .map_or(agents::DEFAULT_PATH.to_owned(), |(_, v)| v.clone())
}

fn program_exists(program: &str, env: &[(String, String)]) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    agents::sandbox::find_in(program, std::ffi::OsStr::new(&agent_path(env))).is_some()
}

/// `[telemetry] audit_file` is appended to in a directory that must exist.
fn audit_directory(t: &Text<'_>, config: &LoadedConfig, found: &mut Found) {
    let Some(file) = &config.telemetry.audit_file else {
        return;
    };
    let dir = file.parent().unwrap_or(Path::new("/"));
    let fault = if !dir.is_dir() {
        Some(format!(
            "the directory {} does not exist, so serve cannot open the audit file; create it (mkdir -p {}) or point audit_file elsewhere",
            dir.display(),
            dir.display()
        ))
    } else if file.is_dir() {
        Some(format!(
            "{} is a directory; name a file in it, like {}/audit.log",
            file.display(),
            file.display()
        ))
    } else {
        None
    };
    if let Some(fault) = fault {
        found
            .faults
            .push(t.key(&["telemetry", "audit_file"], fault));
    }
}

/// A schedule that would record `misconfigured` instead of firing, at its entry (a configured
/// one) or at the grants entry that replaced a built-in one's grants.
fn schedules(t: &Text<'_>, text: &str, config: &LoadedConfig, found: &mut Found) {
    for (decl, fault) in crate::schedule_plans(config) {
        let Some(fault) = fault else { continue };
        let message = format!("schedule `{}` cannot fire: {fault}", decl.name);
        let grants = format!("schedule:{}", decl.name);
        let e = match schedule_entry_at(text, &decl.name) {
            Some(offset) => t.at(offset, message),
            None => t.key(&["grants", grants.as_str()], message),
        };
        found.faults.push(e);
    }
}

/// Where the `[[schedules]]` entry named `name` names itself.
fn schedule_entry_at(text: &str, name: &ScheduleName) -> Option<usize> {
    let doc = DeTable::parse(text).ok()?;
    let DeValue::Array(entries) = doc.get_ref().get("schedules")?.get_ref() else {
        return None;
    };
    entries.iter().find_map(|entry| {
        let DeValue::Table(entry) = entry.get_ref() else {
            return None;
        };
        let value = entry.get("name")?;
        (value.get_ref().as_str() == Some(name.as_str())).then(|| value.span().start)
    })
}
