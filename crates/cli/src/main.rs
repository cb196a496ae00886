//! # cli: the `switchboard` binary
//!
//! What it is: the operator's entry point. A fixed set of local verbs — `serve`, `ask`,
//! `authz` (`explain`, `matrix`, `diff`, `test`, `who-can`), `db` (`migrate`, `backup`), `config check`, `completions`, `version`,
//! and two hidden ones a sandbox runs (`sandbox-forward`, a command agent's network;
//! `sandbox-hook`, Claude Code's hook, read before the CLI is built) —
//! and everything else forwarded to the command registry as `cli:local`, in-process, against
//! the configured store (`switchboard runs list --status all`, `switchboard config get …`).
//!
//! What it must never do: decide anything itself. Every decision is authz-core's, every
//! command the registry's; this crate parses its own flags, loads the file, and renders.
//!
//! Invariants: exit 0 = ok (or allowed), 1 = refused, not found, not done, or a run it started
//! did not complete; 2 = usage or config error; human output by default, `--json` for scripts
//! on every verb (pretty-printed, an error as `{"error", "code"}` on standard output, the exit
//! status unchanged); colour only on a terminal.
//!
//! ## Modules
//!
//! | module | what it holds |
//! | --- | --- |
//! | `main.rs` | the verbs (`LOCAL_VERBS`, pinned by a test), the process allocator (mimalloc without transparent huge pages) |
//! | `ask` | `ask "<request>" [--agent NAME] [--policy-rule ACTION=DECISION]…`: an agent run as `cli:local`, in-process, recorded in `cli:local`; progress on stderr, the answer on stdout; Ctrl-C stops the run; the run's rules printed first |
//! | `approve` | a tool call that needs a person, asked on stderr and answered by a line of stdin |
//! | `forward` | command-shaped words to the registry as `cli:local` through the same `App` (and `db migrate`), with `--help` generated from the command's schema; a run such a command starts is followed to its end. Other words are an unknown command (an agent request is `ask`) |
//! | `check`, `explain` | `config check` (its report; what it finds is `server::config_check`'s); `authz explain` |
//! | `review` | `authz diff` (two files or `--git <rev>`; authz-core's `review::diff`, the agent policy's rules over every call they tell apart, `[[agent_grants]]` by id; exit 1 on a widening), `authz test` (a file of cases), `authz who-can` |
//! | `complete` | `completions <shell>`: the local verbs and every registry command with its arguments, from the registry's schema |
//! | `out` | `out!`, `outln!`: every command writes through them, and a reader gone early (`… \| head`) ends it quietly with status 0 |
//! | `render` | aligned tables, colour only on a terminal |
//! | `driven_clock` | cargo feature `driven-clock` (off in every shipped build): `scripts/replicas-check.sh` runs two `serve` on a faster clock that `SWITCHBOARD_DRIVEN_CLOCK` drives |
//!
//! A closed stdout or stderr never stops the server: log lines and the summary that cannot be
//! written are dropped. The release profile (fat LTO, one codegen unit, opt-level "s") is chosen
//! for idle resident memory (docs/benchmarks.md).
//!
//! Tests (`tests/switchboard/`, one binary, a module each) run the real binary: the registry
//! from the CLI (`registry_cli.rs`), `serve` (`serve.rs`, which also checks the default build
//! reads no driven-clock variable), replicas and faults (`slack_replicas.rs`,
//! `access_replicas.rs`, `replica_faults.rs`, `full_disk.rs`), agents against a scripted model
//! from `test-support` (`ask_tools.rs`, `agent_boundary.rs`, `workspaces.rs`), and generated
//! HTTP requests (`http_pass.rs`).

#[macro_use]
mod out;
mod approve;
mod ask;
mod check;
mod complete;
mod driven_clock;
mod explain;
mod forward;
mod render;
mod review;

use server::config as config_file;

/// mimalloc instead of glibc's allocator: a request allocates and frees many small strings
/// (rows, reply texts, JSON), where glibc spent a fifth of the server's CPU consolidating
/// and unlinking chunks (measured with perf under the ingress benchmark; docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

/// Switchboard: one authorization decision for every surface of a bot backend.
///
/// Besides the verbs below, any registry command runs as the local operator (cli:local):
/// `switchboard help`, `switchboard runs list --status all`, `switchboard config get agent`.
#[derive(Parser)]
#[command(name = "switchboard", version, about, propagate_version = true, disable_help_subcommand = true, after_help = AFTER_HELP)]
pub struct Cli {
    /// Config file [default: $SWITCHBOARD_CONFIG, else ./switchboard.toml, else the embedded default]
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

const AFTER_HELP: &str = "Registry commands (run as cli:local; `switchboard help` lists them, `<command> --help` shows options):
  help, status, runs list|get|events|friction|stop, friction report|propose, config get|set,
  repo list|add|remove|test|build, memory list|forget, mcp list|add|remove, schedule list|fire";

/// The binary's own verbs. Anything else is a registry command.
pub const LOCAL_VERBS: [&str; 9] = [
    "serve",
    "sandbox-forward",
    "sandbox-hook",
    "ask",
    "authz",
    "db",
    "config",
    "completions",
    "version",
];

#[derive(Subcommand)]
enum Command {
    /// Start the server with every configured surface; prints which are on and off.
    ///
    /// With no config file it uses the embedded default: SQLite at ./switchboard.db, the
    /// built-in echo agent, HTTP on 127.0.0.1:8080. Ctrl-C or SIGTERM stops it gracefully.
    Serve {
        /// Listen here instead of [server] listen, e.g. 127.0.0.1:8080 or 0.0.0.0:80.
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
    },
    /// Ask an agent, as cli:local: shows progress while the run is live, then the answer.
    ///
    /// The run is recorded in channel cli:local like any other (`switchboard runs list`).
    /// Ctrl-C stops the run.
    Ask {
        /// The request (quote it, or give several words).
        #[arg(required = true)]
        request: Vec<String>,
        /// The agent to ask (default: @name in the request, then the configured default).
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
        /// The repo the run works in (`repo add` configured it): the run gets a working copy
        /// of the repo's committed HEAD made for it alone, and its changes are kept on the
        /// branch switchboard/<run id>. Default: `in owner/name:` at the start of the
        /// request, then the channel's `repo.default`.
        #[arg(long, value_name = "OWNER/NAME")]
        repo: Option<String>,
        /// A tool-policy rule for this run alone, like "net.fetch=allow" (repeatable). It
        /// answers instead of the project's rule for that action; the org's still caps it;
        /// sub-agents do not get it. When the broker asks you about a tool call, answer y.
        #[arg(long = "policy-rule", value_name = "ACTION=DECISION")]
        policy_rule: Vec<String>,
    },
    /// Ask the policy table about decisions.
    #[command(subcommand)]
    Authz(AuthzCommand),
    /// The store's database.
    #[command(subcommand)]
    Db(DbCommand),
    /// `config check` here; `config get|set` are registry commands.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print shell completions.
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
    /// Print the version.
    Version,
    /// Inside a command agent's sandbox (started by the server, never by hand): listen on
    /// the sandbox's loopback, run the program, relay each connection to the run's proxy.
    #[command(hide = true)]
    SandboxForward {
        /// The run's proxy socket, as the sandbox binds it.
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        /// The loopback port HTTP_PROXY names.
        #[arg(long)]
        port: u16,
        /// The program and its arguments.
        #[arg(last = true, required = true)]
        program: Vec<std::ffi::OsString>,
    },
    /// Inside a Claude Code agent's sandbox (named by its managed settings, never run by
    /// hand): hand the tool call on stdin to the run's broker and say its decision. Every
    /// fault exits 2, which blocks the call.
    #[command(hide = true)]
    SandboxHook {
        /// pre-tool-use or post-tool-use
        event: String,
        /// How long the broker may take (an ask waits for a person).
        #[arg(long, default_value_t = 360)]
        timeout_seconds: u64,
        /// The run's proxy socket, as the sandbox binds it.
        #[arg(long, value_name = "PATH", default_value = agents::netproxy::SANDBOX_PROXY_SOCKET)]
        socket: PathBuf,
    },
    #[command(external_subcommand)]
    Registry(Vec<String>),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Load and validate a config file as `serve` would start it (every section, the token
    /// map, the agent-token secret, each agent's back end, the audit file's directory, the
    /// schedules) and print every configured actor's effective grants. Exits 2 listing every
    /// fault, each with its file, line, column and key; `--json` prints {"ok": false,
    /// "faults": [...]} then.
    Check,
    #[command(external_subcommand)]
    Registry(Vec<String>),
}

#[derive(Subcommand)]
enum AuthzCommand {
    /// Decide one request and show every row tried and which condition failed in each.
    /// Exits 0 when allowed, 1 when denied, 2 on a usage or config error.
    #[command(after_help = EXPLAIN_EXAMPLES)]
    Explain(ExplainArgs),
    /// The conformance matrix (fixed actors × every command) for this config.
    Matrix,
    /// Every change of decision between two configs (every actor class × action × resource
    /// shape, and the agent policy). Exits 0 when nothing is granted or loosened, 1 when
    /// anything is, 2 on a config fault.
    #[command(after_help = DIFF_EXAMPLES)]
    Diff(DiffArgs),
    /// Check a file of [[case]] tables (actor, action, resource, expect = "allow" | "deny")
    /// against --config. Exits 1 when any case fails, 2 when the file does not read.
    #[command(
        after_help = "Example:\n  switchboard authz test config/authz-tests.toml --config config/switchboard.example.toml"
    )]
    Test {
        /// The cases file (TOML).
        file: PathBuf,
    },
    /// Every actor class allowed the action (on the resource, or on some resource), with the
    /// grant, group or baseline that allows it.
    #[command(
        after_help = "Example:\n  switchboard authz who-can runs:write --config config/switchboard.example.toml"
    )]
    WhoCan {
        /// The action, e.g. runs:read.
        action: String,
        /// A resource spec (as `authz explain --resource` takes).
        resource: Option<String>,
    },
}

const DIFF_EXAMPLES: &str = "Examples:
  switchboard authz diff old.toml new.toml
  switchboard authz diff --git HEAD~1 config/switchboard.toml   (the file as committed at HEAD~1, against it now)";

#[derive(clap::Args)]
struct DiffArgs {
    /// The config before (with --git: the one file, read at <rev> and as it is now).
    old: PathBuf,
    /// The config after.
    new: Option<PathBuf>,
    /// Compare the file as committed at this revision with the file as it is.
    #[arg(long, value_name = "REV")]
    git: Option<String>,
}

#[derive(Subcommand)]
enum DbCommand {
    /// Create the database if needed and apply every migration.
    Migrate,
    /// Copy a live SQLite store to a new file, consistently, while serve runs (Postgres: use
    /// pg_dump).
    #[command(after_help = "Example:\n  switchboard db backup /backups/switchboard-$(date +%F).db")]
    Backup {
        /// The copy to write; it must not exist yet.
        file: PathBuf,
    },
}

const EXPLAIN_EXAMPLES: &str = "Resource specs (<type>:<key>=<value>,…):
  run:id=r1,channel=slack:C1,user=slack:U2,visibility=public,repo=acme/web   (no visibility = unstamped)
  channel:id=slack:C1,visibility=private
  memory-scope:kind=org,key=org,origin=dm
  repo:slug=acme/web                      (restricted or not comes from the config)
  config-scope:tier=channel,id=slack:C1   (tier=user,id=slack:U1 | tier=org)
  agent:name=coding
  command:id=runs.list

Example:
  switchboard authz explain --config config/switchboard.example.toml \\
    --actor slack:U024BE7LH --action runs:read \\
    --resource run:id=r1,channel=slack:G1,user=slack:U2,visibility=private";

#[derive(Args)]
struct ExplainArgs {
    /// The actor id, e.g. slack:U024BE7LH, http:ops-bot, access:svc:deploy, agent:coding.
    #[arg(long, value_name = "ID")]
    actor: String,
    /// Make the actor (agent:<name>) act on behalf of this principal.
    #[arg(long, value_name = "ID")]
    on_behalf_of: Option<String>,
    /// The action, e.g. runs:read, config:write, agent:run:coding, repo:use.
    #[arg(long, value_name = "ACTION")]
    action: String,
    /// The resource spec; see below.
    #[arg(long, value_name = "SPEC")]
    resource: String,
    /// A group the actor (or its principal) is in as a surface would learn it for the
    /// request: group:slack:S… (Slack's directory) or group:access:<name> (the Access token's
    /// groups claim). Repeatable. Declared groups ([groups]) need no flag.
    #[arg(long = "group", value_name = "GROUP")]
    groups: Vec<String>,
}

/// `sandbox-hook <event> [--timeout-seconds N] [--socket PATH]` read by hand, so a tool call
/// does not wait for the whole CLI to be built; `None` (clap reads it, and says why) for any
/// other shape, `--help` among them.
fn sandbox_hook_fast(args: Vec<String>) -> Option<u8> {
    let (event, mut rest) = args.split_first()?;
    if event.starts_with('-') {
        return None;
    }
    let mut timeout_seconds = 360;
    let mut socket = PathBuf::from(agents::netproxy::SANDBOX_PROXY_SOCKET);
    while let Some((flag, more)) = rest.split_first() {
        let (value, after) = more.split_first()?;
        match flag.as_str() {
            "--timeout-seconds" => timeout_seconds = value.parse().ok()?,
            "--socket" => socket = PathBuf::from(value),
            _ => return None,
        }
        rest = after;
    }
    Some(sandbox_hook(event, timeout_seconds, &socket))
}

/// `sandbox-hook`: one hook of a Claude Code agent; its status is Claude Code's to read (2
/// blocks the call), its output Claude Code's JSON.
fn sandbox_hook(event: &str, timeout_seconds: u64, socket: &std::path::Path) -> u8 {
    use agents::netproxy::hook_client::{self, BLOCK, CREDENTIAL_ENV, HookEvent};
    let exit = match HookEvent::parse(event) {
        Some(event) => hook_client::run(
            event,
            socket,
            std::env::var(CREDENTIAL_ENV).ok().as_deref(),
            std::time::Duration::from_secs(timeout_seconds),
            std::io::stdin().lock(),
        ),
        None => hook_client::HookExit {
            stdout: String::new(),
            stderr: format!(
                "switchboard: refused: {event:?} is not a hook this binary answers (pre-tool-use, post-tool-use)"
            ),
            status: BLOCK,
        },
    };
    if !exit.stdout.is_empty() {
        outln!("{}", exit.stdout);
    }
    if !exit.stderr.is_empty() {
        eprintln!("{}", exit.stderr);
    }
    u8::try_from(exit.status).unwrap_or(2)
}

const DENIED: u8 = 1;
const USAGE_OR_CONFIG: u8 = 2;

fn main() -> ExitCode {
    // Claude Code's hook, on every tool call: read before the whole CLI is (its time is each
    // call's), and failing closed: a panic anywhere in it exits 2, which blocks the call.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "sandbox-hook")
    {
        std::panic::set_hook(Box::new(|info| {
            eprintln!("switchboard: refused: the hook failed: {info}");
            std::process::exit(i32::from(USAGE_OR_CONFIG));
        }));
        if let Some(code) = sandbox_hook_fast(std::env::args().skip(2).collect()) {
            return ExitCode::from(code);
        }
    }
    // This binary is the forwarder inside a command agent's sandbox (`sandbox-forward`).
    if let Ok(me) = std::env::current_exe() {
        agents::netproxy::forwarder::set_binary(me);
    }
    // `--json` anywhere asks for JSON, errors included, before clap has read anything.
    let json = std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if json && e.use_stderr() => {
            let said = e.render().to_string();
            out::failure(true, "usage", said.trim_end());
            return ExitCode::from(USAGE_OR_CONFIG);
        }
        Err(e) => e.exit(),
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            match (e.downcast_ref::<config_file::ConfigFaults>(), json) {
                (Some(faults), true) => {
                    let value = serde_json::json!({"error": faults.to_string(), "code": "config", "faults": faults});
                    outln!(
                        "{}",
                        serde_json::to_string_pretty(&value).unwrap_or_default()
                    );
                }
                // Every fault of the file, one a line.
                (Some(faults), false) => {
                    for fault in &faults.0 {
                        eprintln!("error: {fault}");
                    }
                }
                (None, true) => out::failure(true, "error", &format!("{e:#}")),
                (None, false) => eprintln!("error: {e:#}"),
            }
            ExitCode::from(USAGE_OR_CONFIG)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let (mut json, mut config) = (cli.json, cli.config.clone());
    // Global flags written after a registry command's words arrive among those words.
    let mut take_globals = |words: Vec<String>| -> Vec<String> {
        let (rest, j, c) = forward::split_globals(words);
        json |= j;
        config = c.or(config.take());
        rest
    };
    let command = match cli.command {
        Command::Registry(words) => Command::Registry(take_globals(words)),
        Command::Config(ConfigCommand::Registry(words)) => {
            Command::Config(ConfigCommand::Registry(take_globals(words)))
        }
        other => other,
    };
    match command {
        Command::Version => {
            if json {
                let version = serde_json::json!({"version": env!("CARGO_PKG_VERSION")});
                outln!("{}", serde_json::to_string_pretty(&version)?);
            } else {
                outln!("switchboard {}", env!("CARGO_PKG_VERSION"));
            }
            Ok(0)
        }
        Command::Serve { listen } => serve(config, json, listen),
        Command::SandboxForward {
            socket,
            port,
            program,
        } => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let code = runtime.block_on(agents::netproxy::forwarder::run(&socket, port, &program));
            Ok(u8::try_from(code).unwrap_or(125))
        }
        Command::SandboxHook {
            event,
            timeout_seconds,
            socket,
        } => Ok(sandbox_hook(&event, timeout_seconds, &socket)),
        Command::Ask {
            request,
            agent,
            repo,
            policy_rule,
        } => ask::run(
            config,
            json,
            request.join(" "),
            ask::Choices {
                agent,
                repo,
                policy_rules: policy_rule,
            },
        ),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            let mut whole = complete::whole_command_line(Cli::command());
            clap_complete::generate(shell, &mut whole, "switchboard", &mut script);
            out::write_bytes(&script);
            Ok(0)
        }
        Command::Config(ConfigCommand::Check) => config_check(config, json),
        Command::Config(ConfigCommand::Registry(words)) => forward::run(
            config,
            json,
            std::iter::once("config".to_owned()).chain(words).collect(),
        ),
        Command::Authz(AuthzCommand::Explain(args)) => authz_explain(config, json, args),
        Command::Authz(AuthzCommand::Matrix) => authz_matrix(config, json),
        Command::Authz(AuthzCommand::Diff(args)) => authz_diff(json, args),
        Command::Authz(AuthzCommand::Test { file }) => {
            let config = load(config)?;
            let (failed, data, text) = review::test_cases(&config.table, &file)?;
            print(json, &data, &text)?;
            Ok(if failed == 0 { 0 } else { DENIED })
        }
        Command::Authz(AuthzCommand::WhoCan { action, resource }) => {
            let config = load(config)?;
            let (data, text) = review::who_can_report(&config.table, &action, resource.as_deref())?;
            print(json, &data, &text)?;
            Ok(0)
        }
        Command::Db(DbCommand::Migrate) => forward::migrate(config, json),
        Command::Db(DbCommand::Backup { file }) => forward::backup(config, json, &file),
        Command::Registry(words) => forward::run(config, json, words),
    }
}

/// Logs, the audit stream, the span log and (with `[telemetry] otlp_endpoint`) the span
/// export, as `[telemetry]` says; `RUST_LOG` overrides the level. Keep the guard: dropping it
/// flushes the export.
fn init_logs(
    config: &config_file::LoadedConfig,
    default_level: &str,
) -> anyhow::Result<server::telemetry::Telemetry> {
    use anyhow::Context;
    server::telemetry::init(&config.telemetry, default_level)
        .with_context(|| config.source.to_string())
}

fn serve(
    config: Option<PathBuf>,
    json: bool,
    listen: Option<std::net::SocketAddr>,
) -> anyhow::Result<u8> {
    let config = load(config)?;
    check::validate_table().map_err(anyhow::Error::msg)?;
    let telemetry = init_logs(&config, "info")?;
    let replica = config
        .server
        .replica_id
        .clone()
        .unwrap_or_else(server::host_replica_id);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        // First: a SIGHUP while the store opens must not end the server.
        server::reload::take_over_hangups();
        let secrets = server::Secrets::from_env(&config)?;
        server::preflight(&config, &secrets)?;
        let overrides = server::Overrides {
            span_log: Some(telemetry.span_log()),
            #[cfg(feature = "driven-clock")]
            clock: driven_clock::from_env()?,
            ..server::Overrides::default()
        };
        let app = server::App::build_with(config, secrets, replica, overrides).await?;
        server::serve(app, listen, server::shutdown_signal(), |addr, app| {
            let summary = server::summary(app, addr);
            // The summary is for whoever watches; a closed stdout must not stop the server.
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = if json {
                writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&summary).unwrap_or_default()
                )
            } else {
                write!(out, "{summary}")
            };
            let _ = out.flush();
        })
        .await?;
        Ok(0)
    })
}

fn load(config: Option<PathBuf>) -> anyhow::Result<config_file::LoadedConfig> {
    Ok(server::load_config(config_file::choose(config.as_deref()))?)
}

fn config_check(config: Option<PathBuf>, json: bool) -> anyhow::Result<u8> {
    let rows = check::validate_table().map_err(anyhow::Error::msg)?;
    let source = config_file::choose(config.as_deref());
    let outcome = server::config_check::check(source, |k| std::env::var(k).ok());
    let (Some(loaded), true) = (&outcome.config, outcome.faults.is_empty()) else {
        let refused = check::Refused {
            ok: false,
            faults: outcome.faults,
            warnings: outcome.warnings,
        };
        if json {
            outln!("{}", serde_json::to_string_pretty(&refused)?);
        } else {
            eprint!("{}", check::render_refused(&refused, render::colour_err()));
        }
        return Ok(USAGE_OR_CONFIG);
    };
    let schedules = check::schedules(loaded);
    let report = check::report(loaded, rows, schedules, outcome.warnings.clone());
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!("{}", check::render_human(&report, render::colour_on()));
    }
    Ok(0)
}

fn authz_explain(config: Option<PathBuf>, json: bool, args: ExplainArgs) -> anyhow::Result<u8> {
    let config = load(config)?;
    check::validate_table().map_err(anyhow::Error::msg)?;
    let req = explain::resolve(
        &config.table,
        &args.actor,
        args.on_behalf_of.as_deref(),
        &args.groups,
        &args.action,
        &args.resource,
    )?;
    let explanation = explain::decide(&req);
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&explain::to_json(&req, &explanation))?
        );
    } else {
        out!(
            "{}",
            explain::render_human(&req, &explanation, render::colour_on())
        );
    }
    Ok(if explanation.verdict.is_allow() {
        0
    } else {
        DENIED
    })
}

/// The data as JSON, or the text.
fn print(json: bool, data: &serde_json::Value, text: &str) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(data)?);
    } else {
        out!("{text}");
    }
    Ok(())
}

fn authz_diff(json: bool, args: DiffArgs) -> anyhow::Result<u8> {
    let (old, new) = match (&args.git, &args.new) {
        (Some(rev), None) => (
            review::load_at(&args.old, Some(rev))?,
            review::load_at(&args.old, None)?,
        ),
        (None, Some(new)) => (
            review::load_at(&args.old, None)?,
            review::load_at(new, None)?,
        ),
        (Some(_), Some(_)) => {
            anyhow::bail!("--git compares one file with itself at a revision: give one file")
        }
        (None, None) => {
            anyhow::bail!("give two config files (old, new), or --git <rev> and one file")
        }
    };
    let review = review::review(&old, &new)?;
    print(json, &review.json, &review.text)?;
    Ok(if review.widens { DENIED } else { 0 })
}

fn authz_matrix(config: Option<PathBuf>, json: bool) -> anyhow::Result<u8> {
    let config = load(config)?;
    let registry = commands::Registry::catalogue();
    let actors = commands::conformance::actor_set(&config.table);
    if json {
        let registry = &registry;
        let cells: Vec<serde_json::Value> = registry
            .commands()
            .iter()
            .flat_map(|c| {
                actors.iter().map(move |a| {
                    serde_json::json!({"command": c.id.as_str(), "actor": a.label, "id": a.caller.actor.id.as_str(), "cell": commands::conformance::cell(registry, &a.caller, c)})
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&cells)?);
    } else {
        out!(
            "{}",
            commands::conformance::render_markdown(&registry, &actors)
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The local verbs are exactly the fixed set; everything else reaches the registry.
    #[test]
    fn the_local_verbs_are_the_fixed_set() {
        let cmd = Cli::command();
        let mut names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
        names.sort();
        let mut want = LOCAL_VERBS.to_vec();
        want.sort();
        assert_eq!(names, want);
        let config = cmd.find_subcommand("config").unwrap();
        let local: Vec<&str> = config.get_subcommands().map(|c| c.get_name()).collect();
        assert_eq!(
            local,
            vec!["check"],
            "config check is local; config get|set reach the registry"
        );
    }

    #[test]
    fn no_registry_command_is_shadowed_by_a_local_verb() {
        for c in commands::Registry::catalogue().commands() {
            let first = c.id.as_str().split('.').next().unwrap();
            let shadowed = LOCAL_VERBS.contains(&first) && first != "config";
            assert!(
                !shadowed,
                "{} would be unreachable behind the local verb `{first}`",
                c.id
            );
        }
    }
}
