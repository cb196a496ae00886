//! `switchboard ask "<request>" [--agent NAME]`: an agent run as `cli:local`, in-process,
//! recorded in channel `cli:local`. Progress goes to stderr while the run is live; the answer
//! goes to stdout at the end. Ctrl-C stops the run (it is recorded `stopped`). Before it
//! exits it waits, bounded, for the run's memory reflection.
//!
//! Also what every in-process CLI verb shares: one [`server::App`] (the composition root),
//! this process's heartbeat and stop-request watch while it works, and following runs it
//! started to their end.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;
use authz_core::{ActorId, AgentName, ChannelId, RepoSlug, resolve_actor};
use commands::{CLI_CHANNEL, LiveFeed, LiveStream, LiveUpdate, RunOutcome, RunStatus};
use tracing::Instrument;

use crate::{check, forward, render};

/// This process's replica id: the host's, marked as a CLI process with its pid, so a server
/// on the same host never takes its live run for one of its own.
fn replica() -> anyhow::Result<store::ReplicaId> {
    let host = server::host_replica_id();
    Ok(store::ReplicaId::parse(&format!(
        "cli-{}-{}",
        host.as_str().chars().take(80).collect::<String>(),
        std::process::id()
    ))?)
}

/// Builds the [`server::App`] from `config` and runs `work` with it, this process's lease
/// renewed (so no sweep takes its runs for ghosts) and its stop requests watched meanwhile.
/// `prepare` sees the config once the logs are up (so a fault of the config is reported
/// first) and gives what the command runs with, or the exit status of a command it refused
/// (having said why).
pub fn with_app<F, Fut>(
    config: server::LoadedConfig,
    log_level: &str,
    prepare: impl FnOnce(server::LoadedConfig) -> Result<server::LoadedConfig, u8>,
    work: F,
) -> anyhow::Result<u8>
where
    F: FnOnce(std::sync::Arc<server::App>) -> Fut,
    Fut: Future<Output = anyhow::Result<u8>>,
{
    with_app_approving(config, log_level, prepare, None, work)
}

/// [`with_app`], with who answers the broker's asks for tool calls.
fn with_app_approving<F, Fut>(
    config: server::LoadedConfig,
    log_level: &str,
    prepare: impl FnOnce(server::LoadedConfig) -> Result<server::LoadedConfig, u8>,
    approver: Option<std::sync::Arc<dyn agents::tools::Approver>>,
    work: F,
) -> anyhow::Result<u8>
where
    F: FnOnce(std::sync::Arc<server::App>) -> Fut,
    Fut: Future<Output = anyhow::Result<u8>>,
{
    check::validate_table().map_err(anyhow::Error::msg)?;
    let telemetry = crate::init_logs(&config, log_level)?;
    let config = match prepare(config) {
        Ok(config) => config,
        Err(code) => return Ok(code),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let secrets = server::Secrets::from_env(&config)?;
        let overrides = server::Overrides {
            span_log: Some(telemetry.span_log()),
            approver,
            ..server::Overrides::default()
        };
        let app = std::sync::Arc::new(
            server::App::build_with(config, secrets, replica()?, overrides).await?,
        );
        // The lease exists before any run does, so no sweep can take the run for a ghost.
        app.store
            .heartbeat(&app.replica, store::wall_clock())
            .await?;
        let stop = tokio_util::sync::CancellationToken::new();
        let background = app.spawn_background(stop.clone());
        let code = work(app.clone()).await;
        stop.cancel();
        for task in background {
            task.await.ok();
        }
        code
    })
}

/// What `ask` was told besides the request.
pub struct Choices {
    pub agent: Option<String>,
    pub repo: Option<String>,
    pub policy_rules: Vec<String>,
}

pub fn run(
    config: Option<PathBuf>,
    json: bool,
    request: String,
    choices: Choices,
) -> anyhow::Result<u8> {
    let agent = choices
        .agent
        .map(|a| AgentName::parse(&a).with_context(|| format!("--agent {a:?}")))
        .transpose()?;
    let repo = choices
        .repo
        .map(|r| RepoSlug::parse(&r).with_context(|| format!("--repo {r:?}")))
        .transpose()?;
    // Each rule is read here, once: a rule that does not read stops before anything starts,
    // and what it reads as is what the run's first lines say.
    let mut said = Vec::new();
    let mut rules = Vec::new();
    for text in &choices.policy_rules {
        said.push(format!(
            "policy rule for this run: {}",
            broker::rules::parse_run_rule(text)?
        ));
        rules.push(commands::RunRule(text.clone()));
    }
    let options = commands::RunOptions {
        agent,
        repo,
        policy_rules: rules,
    };
    let approver: std::sync::Arc<dyn agents::tools::Approver> =
        std::sync::Arc::new(crate::approve::TerminalApprover::new());
    with_app_approving(
        crate::load(config)?,
        "warn",
        Ok,
        Some(approver),
        |app| async move {
            let span = commands::trace::request_span("cli", "ask");
            span.record("actor", ActorId::cli_local().as_str());
            ask(&app, json, &request, options, &said)
                .instrument(span)
                .await
        },
    )
}

async fn ask(
    app: &server::App,
    json: bool,
    request: &str,
    options: commands::RunOptions,
    rules_said: &[String],
) -> anyhow::Result<u8> {
    let caller =
        commands::identity::local_caller(&app.services, Some(ChannelId::parse(CLI_CHANNEL)?));
    // Subscribe before starting, so no event is missed.
    let mut feed = app.dispatcher.subscribe(&caller.actor);
    // The one part of a run's policy no file records: said before the run starts.
    let progress = Progress::new(json);
    for line in rules_said {
        progress.line(line);
    }
    let handled = commands::start_agent_run_with(&caller, request, options, &app.services).await;
    let Some(started) = handled.run else {
        if json {
            outln!("{}", serde_json::to_string_pretty(&handled.reply.data)?);
        } else {
            eprintln!("{}", handled.reply.text);
        }
        return Ok(forward::exit_code(handled.reply.kind));
    };
    let id = started.id().clone();
    progress.line(&format!(
        "run {id} · agent {} · {}",
        started.agent(),
        started.channel()
    ));
    // The capability link, for whoever started the run (with `[server] public_url`).
    let link = app
        .services
        .public_url
        .as_deref()
        .map(|base| started.link(base));
    if let Some(link) = &link {
        progress.line(&format!("follow it live: {link}"));
    }
    let (mut stopping, mut feed_open) = (false, true);
    // The run's end, not its `Finished` update, ends the wait: a feed that lagged may have
    // dropped that update. Its events are all in the feed by then, and shown first.
    let finished = started.finished();
    tokio::pin!(finished);
    let outcome = loop {
        tokio::select! {
            biased;
            _ = tokio::signal::ctrl_c(), if !stopping => {
                stopping = true;
                progress.line("stopping the run (Ctrl-C)");
                app.dispatcher.stop(&id);
            }
            update = feed.recv(), if feed_open => match update {
                Some(LiveUpdate::Event { run, body, .. }) if run.id == id => progress.line(&body),
                Some(_) => {}
                None => feed_open = false,
            },
            outcome = &mut finished => break outcome,
        }
    };
    let outcome = outcome.context(
        "the run ended without a final record; `switchboard runs get` shows what the store has",
    )?;
    settle_memory(app, &progress).await;
    // What reflection said about the run (a fact it could not keep) is in the feed by now.
    while let Ok(Some(update)) = tokio::time::timeout(std::time::Duration::ZERO, feed.recv()).await
    {
        if let LiveUpdate::Event {
            run, kind, body, ..
        } = update
            && run.id == id
            && kind == "memory"
        {
            eprintln!("{body}");
        }
    }
    Ok(print_result(&outcome, json, link))
}

/// Waits (bounded by `[memory] reflection_timeout_seconds`) for the run's reflection, so a
/// fact said on the command line is kept before the process exits.
async fn settle_memory(app: &server::App, progress: &Progress) {
    if app.dispatcher.pending_reflections() == 0 {
        return;
    }
    progress.line("keeping what this run said (memory reflection)");
    let bound = app.config.memory.settings.reflection_timeout + std::time::Duration::from_secs(1);
    if !app.dispatcher.settle_reflections(bound).await {
        eprintln!(
            "warning: the run's memory reflection did not finish within {}s; what it wrote is kept, the rest is not",
            bound.as_secs()
        );
    }
}

/// The feed a command's runs are followed on: taken before the command runs, so no update of
/// a run it starts is missed.
pub fn feed_of_this_process(app: &server::App) -> Box<dyn LiveStream> {
    app.dispatcher
        .subscribe(&resolve_actor(ActorId::cli_local(), &app.services.table()))
}

/// Waits for the runs this process started (a `repo test` from the command line) to end,
/// showing their progress from `feed` (see [`feed_of_this_process`]); Ctrl-C stops them.
/// Returns the final status, as recorded, of each of them and of `started` (the run the
/// command's reply names, which may have ended before this is called).
pub async fn follow_runs_of_this_process(
    app: &server::App,
    json: bool,
    mut feed: Box<dyn LiveStream>,
    started: Option<authz_core::RunId>,
) -> Vec<RunStatus> {
    let me = resolve_actor(ActorId::cli_local(), &app.services.table());
    let mut started: Vec<authz_core::RunId> = started.into_iter().collect();
    for run in app.dispatcher.snapshot(&me) {
        if !started.contains(&run.facts.id) {
            started.push(run.facts.id);
        }
    }
    let live = app.dispatcher.live();
    let progress = Progress::new(json);
    if !live.is_empty() {
        progress.line("waiting for the run this command started (Ctrl-C stops it)");
    }
    let (mut stopping, mut feed_open) = (false, true);
    // Ends when no run of this process is live, which a lagged feed cannot hide. A run's
    // `Finished` is in the feed before it leaves the live set, so it is shown first; and its
    // end is recorded before either.
    loop {
        tokio::select! {
            biased;
            _ = tokio::signal::ctrl_c(), if !stopping => {
                stopping = true;
                for run in app.dispatcher.snapshot(&me) {
                    app.dispatcher.stop(&run.facts.id);
                }
            }
            update = feed.recv(), if feed_open => match update {
                Some(LiveUpdate::Event { body, .. }) => progress.line(&body),
                Some(LiveUpdate::Finished { run, status, .. }) => progress.line(&format!("run {} {status}", run.id)),
                Some(_) => {}
                None => feed_open = false,
            },
            () = live.until_empty() => break,
        }
    }
    let mut ended = Vec::new();
    for id in started {
        // Its end is recorded before it leaves the live set; one that cannot be read failed.
        let status = match app.store.get_run(&id).await {
            Ok(Some(run)) => run.status,
            _ => RunStatus::Failed,
        };
        ended.push(status);
    }
    ended
}

fn print_result(run: &RunOutcome, json: bool, link: Option<String>) -> u8 {
    if json {
        let mut data = run.json();
        if let (Some(link), Some(fields)) = (link, data.as_object_mut()) {
            fields.insert("link".to_owned(), serde_json::Value::String(link));
        }
        outln!(
            "{}",
            serde_json::to_string_pretty(&data).unwrap_or_default()
        );
    } else if run.answer().is_some() {
        outln!("{}", run.text());
    } else {
        eprintln!("{}", run.text());
    }
    match run.status() {
        RunStatus::Completed => 0,
        _ => 1,
    }
}

/// Progress lines on stderr (dimmed on a terminal); nothing with --json.
struct Progress {
    on: bool,
    colour: bool,
}

impl Progress {
    fn new(json: bool) -> Self {
        Progress {
            on: !json,
            colour: render::colour_on() && std::io::stderr().is_terminal(),
        }
    }

    fn line(&self, text: &str) {
        if !self.on {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = if self.colour {
            writeln!(err, "\x1b[2m│ {text}\x1b[0m")
        } else {
            writeln!(err, "│ {text}")
        };
    }
}
