//! # server: the composition root
//!
//! What it is: the one place that reads the config file and the environment, and the one
//! composition root: [`App::build`] wires store, channel directory, agent back ends,
//! dispatcher, registry and the ports the registry reaches them through. `serve`, `ask`, the
//! CLI's registry commands and every test harness build the same `App`. It also holds the
//! axum router of every surface this build has (`serve::router`: `/healthz`, `/readyz`,
//! `/ingress` and the trace log always; `/api` and `/runs` with an Access key set; `/slack/*` in
//! Events mode; `/mcp` when enabled), the replica's heartbeat, recovery and stop-request watch,
//! and graceful shutdown.
//!
//! What it must never do: decide anything (authorization is authz-core's, reached through the
//! registry and the dispatcher), start a surface whose secret is missing (it stays off and the
//! start-up summary says what it needs), or print a secret.
//!
//! Invariants:
//! - On start, this replica's own live runs from before are tombstoned `interrupted` (the
//!   store's recovery), then the heartbeat starts; every heartbeat also tombstones the live
//!   runs of replicas whose lease expired.
//! - On shutdown: stop accepting, let live runs finish until the grace passes, interrupt the
//!   rest, then tombstone anything still live of this replica.
//!
//! ## Modules
//!
//! | module | what it holds |
//! | --- | --- |
//! | `config/` | which file (`--config`, `$SWITCHBOARD_CONFIG`, `./switchboard.toml`, else the embedded default), parsed into `LoadedConfig`: the typed sections (serde-derived, each `deny_unknown_fields`, values checked as they are read so serde's errors carry the parser's spans; the unbuilt sections refused when not empty), the grants table (authz-core's parser), the agents' typed back ends (`BackendSpec`; `[agents]` read by one hand-written visitor that refuses keys of another back end with their position); every fault `file:line:col: key: message`; a plug-in surface's own section through `SurfaceSection` (`surface_section.rs`: its key, its secret variables, its typed section kept in `LoadedConfig::surface_sections`), and a top-level key no section reads fails the load. Every fault of a file is reported, not the first (`faults.rs`: each section read on its own, a bad key taken out and the section read again); with none, every path the file names is made absolute under the working directory (`paths.rs`), so nothing after the load joins a relative path |
//! | `config_check` | what `config check` finds beyond the load: everything `serve` would refuse at start in this environment (the token map, the agent-token secret, each agent's back end, the audit file's directory, MCP on Postgres without a shared secret), a schedule that could not fire (at its entry), no agent at all; warnings for a `command` agent's program not on its `PATH` and no default agent |
//! | `command_agent` | a command agent's environment (never a `SWITCHBOARD_*` variable of `env_allow`; on the broker's network no variable any `key_env` or `api_key_env` names) and its network (`agents::CommandNetwork`: the broker's proxy with the model endpoint and its key from the environment, a key that is not set refusing each model request, the forwarder this binary is; or the host's) |
//! | `secrets` | the token map (`SWITCHBOARD_INGRESS_TOKENS` or `[ingress] tokens_file`, parsed by `commands::tokens`), the agent-token secret (refused under 32 bytes or when it is a shipped placeholder), `api_key_env` values, `SLACK_BOT_TOKEN` / `SLACK_SIGNING_SECRET` / `SLACK_APP_TOKEN`, the allow-listed environment for command agents, the plug-in surfaces' secrets (`surface_secret`), and the values the sanitiser redacts |
//! | `access_surface` | `AccessState`: absent, missing (what `[access]` still needs), on (the `Verifier`, built without I/O) |
//! | `slack_surface` | `SlackState`: absent, missing secrets, built (client + directory, no I/O), on (after `auth.test`), failed; `connect` and `start_socket` for `serve`; held by the Slack plug-in (`surface/slack.rs`), which builds it in `prepare` |
//! | `surface` | `SurfacePlugin` (each built-in's impl in `surface/ingress.rs`, `mcp.rs`, `slack.rs`, `access.rs`): a surface's config section and secrets, what it builds from them (`prepare`, with its namespace's channel directory), summary line, routes, span route names and what it starts under `serve`; `builtin()` (ingress, MCP, Slack, Access); `App::surfaces` is those and any `Overrides::surfaces`; `load_config` reads the built-in surfaces' sections |
//! | `lib.rs` | `App::build` / `build_with(Overrides)` (clock, audit stream, channel directory, the span log: for tests and `serve`): the store, the agents (`build_agents`), the dispatcher, the scheduler (built-in and configured schedules, planned against the grants table), `Services` with its ports; `schedule_decls` and `schedule_plans` (what `config check` validates); `recover`, `spawn_background` (heartbeat, which also tombstones dead replicas' runs, the stop-request watch, and the live-run fan-out on Postgres), `spawn_schedule_timer` (only `serve` runs it) |
//! | `reload` | the policy reloads of `serve`: on SIGHUP, or when the config file's bytes change and hold still for two looks (`[server] config_poll_ms`), the exact bytes read are checked as `config check` would and, only when they pass (and declare the agents the server runs), the grants table and the org's agent rules are swapped whole in the `LivePolicy`; an audit line with the hash, the hash recorded in the store; `take_over_hangups` before the store opens |
//! | `serve` | `preflight` (Postgres with `/mcp` on needs the shared agent-token secret), bind, recover, start each surface (MCP tells the dispatcher the URL agents get; Slack connects), summary, `router` (the health checks, the trace log and each surface that is on, under the request-span middleware); on Ctrl-C or SIGTERM stop accepting, give live runs `shutdown_grace`, interrupt the rest, tombstone what is still live |
//! | `summary` | the start-up summary: each surface on, or off and what it needs; the `network` line (whose traffic the broker decides, whose not); the `retention` line; the `traces` line (log format, audit destination, span log, export) |
//! | `telemetry/mod.rs` | `init` (the process's subscriber from `[telemetry]`: `RUST_LOG` filter with the denied marker always on, JSON or human log lines without the marker, audit lines to their own file when set, the span log, the OTLP layer), `subscriber` (the same layers for tests, with any writer and exporter), `otlp_provider` / `provider_with` (batch export behind `DeniedTraceFilter`) |
//! | `telemetry/span_log.rs` | `SpanLog` (the bounded ring) and `SpanLogLayer`: span lines held on their trace's root until it closes, dropped whole when any span or event of the trace carries `denied = true` |
//! | `telemetry/otel.rs` | `DeniedTraceFilter`: an OpenTelemetry `SpanProcessor` holding each trace's ended spans until its root ends, then exporting or dropping it whole; bounded (open traces, spans per trace), never exporting unchecked |
//! | `telemetry/request.rs` | the HTTP middleware: a root span per request (health checks excepted) with surface and a known route (each surface names its own, else `other`), status and outcome; 401 and 403 marked denied |
//! | `telemetry/route.rs` | `GET /admin/trace/log?since=`: 503 with no token map, 401 without a known bearer, 403 without `trace:read` (audited), JSON lines otherwise |
//! | `fuzzing` (hidden) | `TARGETS`: the body of every fuzz target, one per parser of outside input, called by `fuzz/` and replayed on stable by `tests/app/fuzz_corpus.rs` |
//!
//! Tests: `tests/app/` is the crate's one test binary. It holds every surface against the
//! whole App (`access_surface.rs`, `ingress_surface.rs`, `mcp_surface.rs`,
//! `registry_behaviour/`, `schedule_surface.rs`, `slack_surface.rs`, and `plugin_surface.rs`, a
//! surface defined in the test and added through `Overrides::surfaces`; they live here because
//! an adapter that dev-depended on `server` would make a dependency cycle), `composition.rs`
//! (config, secrets, summary, health, shutdown), `telemetry.rs`, `agent_memory.rs` and
//! `fuzz_corpus.rs`. The schedule tick bench is `benches/schedule_tick.rs`.
//!
//! Decision: the replica id defaults to the host name (stable across restarts, so a restart
//! recovers its own runs at once); `switchboard ask` and a CLI registry command run as
//! `cli-<host>-<pid>` and heartbeat while they work, so a server never takes their runs for its
//! own.

pub mod access_surface;
mod command_agent;
pub mod config;
pub mod config_check;
#[doc(hidden)]
pub mod fuzzing;
pub mod reload;
pub mod secrets;
mod serve;
pub mod slack_surface;
mod summary;
pub mod surface;
pub mod telemetry;

use std::collections::BTreeMap;
use std::sync::Arc;

use agents::sandbox::ConfiguredBind;
use agents::{
    AgentBackend, CommandBackend, CommandSettings, EchoBackend, EchoSettings, OpenAiBackend,
    OpenAiSettings,
};
use anyhow::Context;
use authz_core::{AgentName, ChannelDirectory, DirectoryByNamespace};
use commands::{Audit, Clock, Registry, Services, TracingAudit};
use dispatch::{AgentEntry, AgentTokens, DispatchSettings, Dispatcher, DispatcherParts};
use schedule::Scheduler;
use store::{ReplicaId, Store};

pub use config::{LoadedConfig, Source};
pub use secrets::Secrets;
pub use serve::{preflight, readiness, router, serve, shutdown_signal};
pub use summary::{Summary, summary};

/// Reads the config file of `source` with every built-in surface's section (the four built
/// in today read theirs as `LoadedConfig` fields, so the list is empty until one uses
/// `SurfacePlugin::section`): what `serve`, `config check` and every CLI command load.
pub fn load_config(source: Source) -> Result<LoadedConfig, config::ConfigFaults> {
    config::load_with(source, &surface::sections(&surface::builtin()))
}

/// Everything a process needs to answer requests and run agents.
pub struct App {
    pub config: LoadedConfig,
    pub store: Arc<dyn Store>,
    pub registry: Arc<Registry>,
    pub services: Arc<Services>,
    pub dispatcher: Dispatcher,
    pub secrets: Secrets,
    pub replica: ReplicaId,
    /// The built-in and configured schedules, and their timer.
    pub scheduler: Arc<Scheduler>,
    /// The span log `GET /admin/trace/log` serves.
    pub span_log: telemetry::SpanLog,
    /// The channel directory the dispatcher stamps with; the Slack surface asks it for a
    /// request's memberships.
    pub directory: Arc<dyn ChannelDirectory>,
    /// `/api` and `/runs`: absent, off (and why), or on with their token verifier.
    pub access: access_surface::AccessState,
    /// Every surface `serve` serves, the built-in ones first (`surface::builtin`), then any
    /// `Overrides::surfaces` added.
    pub surfaces: Vec<Arc<dyn surface::SurfacePlugin>>,
}

/// What a test may replace when it builds an [`App`]: the clock, the audit stream, the
/// channel directory. Everything else comes from the config, as in production.
pub struct Overrides {
    pub clock: Clock,
    pub audit: Arc<dyn Audit>,
    /// The dispatcher's channel directory; default: chosen per namespace (Slack's for `slack:`
    /// when `[slack]` is built, each surface's own, what the id establishes for the rest).
    pub directory: Option<Arc<dyn ChannelDirectory>>,
    /// The span log the process's subscriber feeds (`telemetry::init`); without one the
    /// route serves a log nothing writes to.
    pub span_log: Option<telemetry::SpanLog>,
    /// Who answers a person's ask for a tool call (`switchboard ask`: a prompt on the
    /// terminal); default: the run page's Approve / Deny form (`PendingApprovals`).
    pub approver: Option<Arc<dyn agents::tools::Approver>>,
    /// Surfaces added after the built-in ones: served, summarised and traced like them.
    pub surfaces: Vec<Arc<dyn surface::SurfacePlugin>>,
}

impl Default for Overrides {
    fn default() -> Self {
        Overrides {
            clock: Clock::system(),
            audit: Arc::new(TracingAudit),
            directory: None,
            span_log: None,
            approver: None,
            surfaces: Vec::new(),
        }
    }
}

/// How often a process checks the store for stop requests of its runs (`runs stop` from
/// another process is honoured within this, well inside 2 s).
pub const STOP_WATCH: std::time::Duration = std::time::Duration::from_millis(500);

/// Every schedule this config declares: the built-in ones, then the configured ones.
pub fn schedule_decls(config: &LoadedConfig) -> Vec<schedule::ScheduleDecl> {
    schedule::builtin()
        .into_iter()
        .map(|(decl, _)| decl)
        .chain(config.schedules.iter().cloned())
        .collect()
}

/// Every schedule this config declares, each with the reason it would record `misconfigured`
/// instead of firing. `config check` fails on the first.
pub fn schedule_plans(
    config: &LoadedConfig,
) -> Vec<(schedule::ScheduleDecl, Option<schedule::Misconfigured>)> {
    let registry = Registry::catalogue();
    schedule_decls(config)
        .into_iter()
        .map(|decl| {
            let fault = schedule::plan(&decl, &config.table, &registry).err();
            (decl, fault)
        })
        .collect()
}

/// This machine's name as a replica id: the host name, else `local`.
pub fn host_replica_id() -> ReplicaId {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let cleaned: String = host
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(100)
        .collect();
    ReplicaId::parse(&cleaned)
        .or_else(|_| ReplicaId::parse("local"))
        .unwrap_or_else(|_| ReplicaId::random())
}

/// Whether `/mcp` is served: `[mcp] enabled = true` and a token map exists.
pub fn mcp_is_on(config: &LoadedConfig, secrets: &Secrets) -> bool {
    config.mcp.enabled && secrets.ingress_tokens.is_some()
}

/// The policy a loaded config says: its grants table, its org rules and their hash.
pub fn policy_in_force(config: &LoadedConfig) -> commands::PolicyInForce {
    commands::PolicyInForce {
        table: Arc::new(config.table.clone()),
        org_rules: config.tool_policy.org_rules.clone(),
        hash: config.policy_hash.clone(),
    }
}

impl App {
    /// Whether `/mcp` is served by this app.
    pub fn mcp_is_on(&self) -> bool {
        mcp_is_on(&self.config, &self.secrets)
    }

    /// Opens the store and builds the dispatcher and registry. `replica` names this process
    /// among the owners of live runs.
    pub async fn build(
        config: LoadedConfig,
        secrets: Secrets,
        replica: ReplicaId,
    ) -> anyhow::Result<App> {
        Self::build_with(config, secrets, replica, Overrides::default()).await
    }

    /// [`App::build`] with a test's clock, audit stream or channel directory.
    pub async fn build_with(
        config: LoadedConfig,
        secrets: Secrets,
        replica: ReplicaId,
        overrides: Overrides,
    ) -> anyhow::Result<App> {
        // Before any sandbox is made: under a root server, who its programs are on the host.
        agents::sandbox::set_host_user(config.sandbox_user)
            .context("[sandbox] user_id / group_id")?;
        let store = store::open_spec(&config.store).await.with_context(|| {
            format!(
                "opening the store {} ([store] url)",
                config.store.url.redacted()
            )
        })?;
        // Each run's workspace is made under it (`runs/<run id>`, which makes it), URL repos'
        // mirrors too; `serve` makes it at start. A one-shot command that starts no run (`help`,
        // `runs list`) leaves no directory behind.
        let data_dir = &config.server.data_dir;
        // The workspaces of runs that are not live any more (a crash left them): every process
        // that can start runs removes them when it starts.
        let swept = dispatch::sweep_workspaces(store.as_ref(), data_dir).await;
        if swept > 0 {
            tracing::info!(
                count = swept,
                "removed the workspaces of runs a crash left behind"
            );
        }
        let agents = build_agents(&config, &secrets)?;
        // A person's asks wait here for the run page's answer, unless the process answers
        // them itself (`switchboard ask`: the terminal).
        let approvals = Arc::new(dispatch::PendingApprovals::new(store.clone()));
        let tokens = match &secrets.agent_token_secret {
            Some(secret) => AgentTokens::new(secret).context(
                "the agent token secret (SWITCHBOARD_AGENT_TOKEN_SECRET or [server] agent_token_secret_file)",
            )?,
            None => AgentTokens::ephemeral()?,
        };
        let settings = DispatchSettings {
            default_agent: config.default_agent.clone(),
            max_concurrent: config.limits.max_concurrent,
            max_per_actor: config.limits.max_per_actor,
            channel_directory_timeout: config.limits.channel_directory_timeout,
            data_dir: config.server.data_dir.clone(),
            memory: config.memory.settings.clone(),
            memory_model: config.memory.model_agent.clone(),
            repos: config.repos,
            ..DispatchSettings::default()
        };
        let policy = Arc::new(commands::LivePolicy::new(policy_in_force(&config)));
        let surfaces: Vec<Arc<dyn surface::SurfacePlugin>> = surface::builtin()
            .into_iter()
            .chain(overrides.surfaces)
            .collect();
        surface::check_sections_were_read(&surfaces, &config)?;
        let by_namespace = directory_by_namespace(&surfaces, &config, &secrets)?;
        let directory = overrides.directory.unwrap_or(by_namespace);
        let dispatcher = Dispatcher::new(DispatcherParts {
            store: store.clone(),
            directory: directory.clone(),
            agents,
            settings,
            replica: replica.clone(),
            tokens,
            secrets: secrets.values_to_redact(),
            now: overrides.clock.now,
            tool_broker: dispatch::ToolBroker {
                policy: policy.clone(),
                grants: config.tool_policy.grants.clone(),
                approval_timeout: config.tool_policy.approval_timeout,
                person: overrides
                    .approver
                    .clone()
                    .unwrap_or_else(|| approvals.clone()),
                reviewer: config.tool_policy.reviewer.clone(),
                ..dispatch::ToolBroker::default()
            },
        });
        if let Some(url) = config
            .mcp
            .agent_url
            .clone()
            .filter(|_| mcp_is_on(&config, &secrets))
        {
            // A configured URL; otherwise `serve` gives the address it bound.
            dispatcher.set_mcp_url(url);
        }
        let table = policy.now().table.clone();
        let span_log = overrides
            .span_log
            .unwrap_or_else(|| telemetry::SpanLog::new(config.telemetry.span_log_capacity));
        let registry = Arc::new(Registry::catalogue());
        let scheduler = Arc::new(Scheduler::new(schedule_decls(&config), &table, &registry));
        for (name, fault) in scheduler.misconfigured() {
            tracing::warn!(schedule = %name, "[schedule] misconfigured, its firings will send nothing: {fault}");
        }
        let services = Arc::new(Services {
            store: commands::StoreAccess::new(store.clone()),
            policy,
            audit: overrides.audit,
            clock: overrides.clock,
            schedules: scheduler.clone(),
            version: env!("CARGO_PKG_VERSION"),
            server_lease: config.server.lease,
            runs: Arc::new(dispatcher.clone()),
            live: Arc::new(dispatcher.clone()),
            agent_tokens: Arc::new(dispatcher.clone()),
            tokens: secrets.ingress_tokens.as_ref().map(|(map, _)| map.clone()),
            public_url: config.server.public_url.clone(),
            approvals,
            changes: Arc::new(dispatcher.clone()),
        });
        let access = access_surface::AccessState::build(&config);
        Ok(App {
            config,
            store,
            registry,
            services,
            dispatcher,
            secrets,
            replica,
            scheduler,
            span_log,
            directory,
            access,
            surfaces,
        })
    }

    /// Tombstones this replica's own live runs left from before (a restart) and renews its
    /// lease. Returns how many runs were tombstoned.
    pub async fn recover(&self) -> anyhow::Result<usize> {
        let now = store::wall_clock();
        let tombstoned = self
            .store
            .tombstone_orphans(&self.replica, now, self.config.server.lease, true)
            .await
            .context("recovering live runs left from before")?;
        self.store.heartbeat(&self.replica, now).await?;
        // The workspaces of runs that are not live any more (a crash left them).
        let swept =
            dispatch::sweep_workspaces(self.store.as_ref(), &self.config.server.data_dir).await;
        if swept > 0 {
            tracing::info!(
                count = swept,
                "removed the workspaces of runs a crash left behind"
            );
        }
        Ok(tombstoned.len())
    }

    /// This process's background work until `stop`: the heartbeat (which also tombstones dead
    /// replicas' runs), the watch for stop requests of its own runs, and, on Postgres, the
    /// live-run fan-out among replicas.
    pub fn spawn_background(
        &self,
        stop: tokio_util::sync::CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks = vec![
            self.spawn_heartbeat(stop.clone()),
            self.dispatcher
                .watch_stop_requests(STOP_WATCH, stop.clone()),
        ];
        tasks.extend(self.dispatcher.spawn_fanout(stop));
        tasks
    }

    /// The schedule timer until `stop`. Only `serve` runs it: a one-shot CLI command never
    /// fires a schedule it happens to find due.
    pub fn spawn_schedule_timer(
        &self,
        stop: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        self.scheduler
            .clone()
            .spawn(self.registry.clone(), self.services.clone(), stop)
    }

    /// Prunes what is past its retention (`[retention]`) until `stop`: a pass of bounded
    /// batches every `interval`, each batch its own statements, so no request waits on it.
    /// Only `serve` runs it. A failed pass is logged and tried again at the next interval.
    pub fn spawn_pruning(
        &self,
        stop: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let store = self.store.clone();
        let retention = self.config.retention.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(retention.interval);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = stop.cancelled() => return,
                }
                let mut total = store::Pruned::default();
                loop {
                    let pass = tokio::select! {
                        pass = store.prune(&retention.rules, store::wall_clock()) => pass,
                        () = stop.cancelled() => return,
                    };
                    match pass {
                        Ok(p) => {
                            total = add(total, p);
                            if !p.full(retention.rules.batch) {
                                break;
                            }
                        }
                        Err(e) => {
                            tracing::error!(error = %e.token(), "pruning past retention failed");
                            break;
                        }
                    }
                    // Between batches, the store is others' first.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                if total.total() > 0 {
                    tracing::info!(
                        event_ids = total.event_ids,
                        answered_threads = total.answered_threads,
                        approvals = total.approvals,
                        firings = total.firings,
                        runs = total.runs,
                        "[retention] pruned records past their retention"
                    );
                }
            }
        })
    }

    /// Renews the lease every `heartbeat` and tombstones dead replicas' runs, until `stop`.
    fn spawn_heartbeat(
        &self,
        stop: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let store = self.store.clone();
        let replica = self.replica.clone();
        let (every, lease) = (self.config.server.heartbeat, self.config.server.lease);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = stop.cancelled() => return,
                }
                let now = store::wall_clock();
                if let Err(e) = store.heartbeat(&replica, now).await {
                    tracing::error!(error = %e.token(), "renewing this replica's lease failed");
                    continue;
                }
                match store.tombstone_orphans(&replica, now, lease, false).await {
                    Ok(ids) if !ids.is_empty() => {
                        tracing::warn!(
                            count = ids.len(),
                            "tombstoned the live runs of replicas whose lease expired"
                        );
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::error!(error = %e.token(), "sweeping dead replicas' runs failed")
                    }
                }
            }
        })
    }
}

/// Prepares every surface (`SurfacePlugin::prepare`) and chooses the channel directory per
/// namespace: each chat surface answers for its own channels and members (Slack's when
/// `[slack]` is built), the id alone for every other namespace. Refused: two directories for
/// one namespace (the visibility a run is stamped with must have one source), and a directory
/// for a namespace that takes none (it could only widen what the ids say).
fn directory_by_namespace(
    surfaces: &[Arc<dyn surface::SurfacePlugin>],
    config: &LoadedConfig,
    secrets: &Secrets,
) -> anyhow::Result<Arc<dyn ChannelDirectory>> {
    let mut taken = std::collections::BTreeSet::new();
    let mut by_namespace = DirectoryByNamespace::new();
    for (namespace, d) in surfaces.iter().filter_map(|s| s.prepare(config, secrets)) {
        if !namespace.takes_directory() {
            anyhow::bail!(
                "a surface claims the channels of {} for its directory (SurfacePlugin::prepare), but that namespace takes no directory: its ids alone say what its channels are (Namespace::takes_directory)",
                namespace.prefix()
            );
        }
        if !taken.insert(namespace) {
            anyhow::bail!(
                "two surfaces answer for the channels of {} (SurfacePlugin::prepare); one namespace has one directory",
                namespace.prefix()
            );
        }
        by_namespace = by_namespace.with(namespace, d);
    }
    Ok(Arc::new(by_namespace))
}

fn add(a: store::Pruned, b: store::Pruned) -> store::Pruned {
    store::Pruned {
        event_ids: a.event_ids + b.event_ids,
        answered_threads: a.answered_threads + b.answered_threads,
        approvals: a.approvals + b.approvals,
        firings: a.firings + b.firings,
        runs: a.runs + b.runs,
    }
}

/// An agent's configured binds, a leading `~/` under this process's `$HOME`.
fn binds(paths: &[String], writable: bool) -> anyhow::Result<Vec<ConfiguredBind>> {
    paths
        .iter()
        .map(|p| {
            let path = match p.strip_prefix("~/") {
                None => std::path::PathBuf::from(p),
                Some(rest) => std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|home| std::path::PathBuf::from(home).join(rest))
                    .with_context(|| {
                        format!("{p} starts with ~/ but HOME is not set; write the absolute path")
                    })?,
            };
            Ok(ConfiguredBind {
                path,
                writable,
                at: None,
            })
        })
        .collect()
}

/// What no agent's `sandbox_bind` may reach: the config file, the data directory, a SQLite
/// store's file.
fn private_paths(config: &LoadedConfig) -> Vec<std::path::PathBuf> {
    let mut private = vec![config.server.data_dir.clone()];
    if let config::Source::File(path) = &config.source {
        private.push(path.clone());
    }
    if let Some(file) = config.store.url.sqlite_file() {
        let file = file.split('?').next().unwrap_or(file);
        private.push(std::path::PathBuf::from(file));
    }
    private
}

fn build_agents(
    config: &LoadedConfig,
    secrets: &Secrets,
) -> anyhow::Result<BTreeMap<AgentName, AgentEntry>> {
    // Every declared agent has its spec (the config parser reads both from the same tables).
    config
        .agent_specs
        .iter()
        .map(|(name, spec)| Ok((name.clone(), build_agent(config, secrets, name, spec)?)))
        .collect()
}

/// One declared agent's back end, as `serve` builds it (`config check` builds each too, to
/// report every one that would stop `serve`).
pub fn build_agent(
    config: &LoadedConfig,
    secrets: &Secrets,
    name: &AgentName,
    spec: &config::AgentSpec,
) -> anyhow::Result<AgentEntry> {
    let backend: Arc<dyn AgentBackend> = match &spec.backend {
        config::BackendSpec::Echo { behaviour, delay } => {
            Arc::new(EchoBackend::new(EchoSettings {
                behaviour: *behaviour,
                delay: *delay,
            }))
        }
        config::BackendSpec::Command {
            argv,
            request_via,
            sandbox,
            sandbox_bind,
            sandbox_read_only,
            network,
            claude_code,
        } => Arc::new(
            CommandBackend::new(CommandSettings {
                argv: argv.clone(),
                request_via: *request_via,
                env: command_agent::env(secrets, network),
                network: command_agent::network(secrets, name, network)?,
                sandbox: *sandbox,
                private: private_paths(config),
                sandbox_binds: binds(sandbox_bind, true)
                    .with_context(|| format!("agents.{name}.sandbox_bind"))?
                    .into_iter()
                    .chain(
                        binds(sandbox_read_only, false)
                            .with_context(|| format!("agents.{name}.sandbox_read_only"))?,
                    )
                    .collect(),
                claude_code: claude_code.as_ref().map(|c| {
                    agents::claude_code::ClaudeCodeSettings::for_approval_timeout(
                        c.model.clone(),
                        config.tool_policy.approval_timeout,
                    )
                }),
            })
            .with_context(|| format!("agents.{name}"))?,
        ),
        config::BackendSpec::OpenAi {
            base_url,
            model,
            api_key_env,
            system_prompt,
        } => {
            let api_key = match api_key_env {
                Some(var) => Some(secrets.api_keys.get(var).cloned().with_context(|| {
                    format!("agents.{name}.api_key_env names {var}, which is not set in the environment; export {var}=<key> or remove api_key_env")
                })?),
                None => None,
            };
            Arc::new(
                OpenAiBackend::new(OpenAiSettings {
                    base_url: base_url.clone(),
                    model: model.clone(),
                    api_key,
                    system_prompt: system_prompt.clone(),
                })
                .with_context(|| format!("agents.{name}"))?,
            )
        }
    };
    Ok(AgentEntry {
        backend,
        timeout: spec.timeout,
        caps: spec.caps,
        tools: spec
            .backend
            .tool_model()
            .map(|model| dispatch::ToolProfile {
                kind: spec.kind.clone(),
                model: Some(model.to_owned()),
            })
            .or_else(|| {
                spec.backend
                    .network_through_broker()
                    .then(|| dispatch::ToolProfile {
                        kind: spec.kind.clone(),
                        model: spec
                            .backend
                            .claude_code_model()
                            .flatten()
                            .map(str::to_owned),
                    })
            }),
        workspace: spec.backend.works_in_a_directory(),
        undecided_network: matches!(
            spec.backend,
            config::BackendSpec::Command {
                network: config::AgentNetwork::Host,
                ..
            }
        ),
    })
}
