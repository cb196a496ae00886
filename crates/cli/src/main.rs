//! # cli: the `switchboard` binary
//!
//! What it is: the operator's entry point. Today: `config check` (load and validate a config,
//! show what every configured actor holds) and `authz explain` (one decision with every row
//! tried). `serve` and the registry commands arrive with their crates.
//!
//! What it must never do: decide anything itself. Every decision is authz-core's; this crate
//! parses arguments, loads the file, and renders.
//!
//! Invariants: exit 0 = ok (or allowed), 1 = denied, 2 = usage or config error; human output by
//! default, `--json` for scripts; colour only on a terminal.

mod check;
mod config_file;
mod explain;
mod render;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Switchboard: one authorization decision for every surface of a bot backend.
#[derive(Parser)]
#[command(name = "switchboard", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect and validate configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Ask the policy table about a decision.
    #[command(subcommand)]
    Authz(AuthzCommand),
    /// Print the version.
    Version,
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Load and validate a config file (grants, restrict, agents, the policy table) and print
    /// every configured actor's effective grants. Exits 2 naming the first fault.
    Check(CheckArgs),
}

#[derive(Subcommand)]
enum AuthzCommand {
    /// Decide one request and show every row tried and which condition failed in each.
    /// Exits 0 when allowed, 1 when denied, 2 on a usage or config error.
    #[command(after_help = EXPLAIN_EXAMPLES)]
    Explain(ExplainArgs),
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
struct ConfigArg {
    /// Config file [default: $SWITCHBOARD_CONFIG, else ./switchboard.toml, else the embedded default]
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ExplainArgs {
    #[command(flatten)]
    config: ConfigArg,
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
    /// Print the decision as JSON.
    #[arg(long)]
    json: bool,
}

const DENIED: u8 = 1;
const USAGE_OR_CONFIG: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(USAGE_OR_CONFIG)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Version => {
            println!("switchboard {}", env!("CARGO_PKG_VERSION"));
            Ok(0)
        }
        Command::Config(ConfigCommand::Check(args)) => config_check(args),
        Command::Authz(AuthzCommand::Explain(args)) => authz_explain(args),
    }
}

fn config_check(args: CheckArgs) -> anyhow::Result<u8> {
    let config = config_file::load(config_file::choose(args.config.config.as_deref()))?;
    let rows = check::validate_table().map_err(anyhow::Error::msg)?;
    let report = check::report(&config, rows);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", check::render_human(&report, render::colour_on()));
    }
    Ok(0)
}

fn authz_explain(args: ExplainArgs) -> anyhow::Result<u8> {
    let config = config_file::load(config_file::choose(args.config.config.as_deref()))?;
    check::validate_table().map_err(anyhow::Error::msg)?;
    let req = explain::resolve(
        &config.table,
        &args.actor,
        args.on_behalf_of.as_deref(),
        &args.action,
        &args.resource,
    )?;
    let explanation = explain::decide(&req);
    if args.json {
        let value = explain::to_json(&req, &explanation);
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!(
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
