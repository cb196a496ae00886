//! `switchboard ask "<request>" [--agent NAME]`: an agent run as `cli:local`, in-process,
//! recorded in channel `cli:local`. Progress goes to stderr while the run is live; the answer
//! goes to stdout at the end. Ctrl-C stops the run (it is recorded `stopped`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;
use authz_core::{ActorId, AgentName, ChannelId, Origin, resolve_actor};
use commands::{Caller, Surface, dispatch_text};
use dispatch::LiveUpdate;
use store::{RunRecord, RunStatus};

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

pub fn run(
    config: Option<PathBuf>,
    json: bool,
    request: String,
    agent: Option<String>,
) -> anyhow::Result<u8> {
    let config = crate::load(config)?;
    check::validate_table().map_err(anyhow::Error::msg)?;
    crate::init_logs(config.telemetry.json_logs, "warn");
    let agent = agent
        .map(|a| AgentName::parse(&a).with_context(|| format!("--agent {a:?}")))
        .transpose()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let secrets = server::Secrets::from_env(&config)?;
        let app = server::App::build(config, secrets, replica()?).await?;
        // The lease exists before the run does, so no sweep can take the run for a ghost.
        app.store
            .heartbeat(&app.replica, store::Timestamp::now())
            .await?;
        let stop = tokio_util::sync::CancellationToken::new();
        let heartbeat = app.spawn_heartbeat(stop.clone());
        let code = ask(&app, json, &request, agent).await;
        stop.cancel();
        heartbeat.await.ok();
        code
    })
}

async fn ask(
    app: &server::App,
    json: bool,
    request: &str,
    agent: Option<AgentName>,
) -> anyhow::Result<u8> {
    let local = ChannelId::parse("cli:local")?;
    let caller = Caller {
        actor: resolve_actor(ActorId::cli_local(), &app.services.table).with_origin(Origin {
            channel_id: local,
            thread_key: None,
        }),
        surface: Surface::Cli,
    };
    // Subscribe before starting, so no event is missed.
    let mut feed = app.dispatcher.live().subscribe(&caller.actor);
    let handled = dispatch_text(&caller, request, agent, &app.services).await;
    let Some(started) = handled.run else {
        eprintln!("{}", handled.reply.text);
        return Ok(forward::exit_code(handled.reply.kind));
    };
    let id = started.run.id.clone();
    let progress = Progress::new(json);
    progress.line(&format!(
        "run {id} · agent {} · {}",
        started.run.agent, started.run.channel_id
    ));
    let mut stopping = false;
    loop {
        tokio::select! {
            update = feed.recv() => match update {
                Some(LiveUpdate::Event { run, body, .. }) if run.id == id => progress.line(&body),
                Some(LiveUpdate::Finished { run, .. }) if run.id == id => break,
                Some(_) => {}
                None => break,
            },
            _ = tokio::signal::ctrl_c(), if !stopping => {
                stopping = true;
                progress.line("stopping the run (Ctrl-C)");
                app.dispatcher.stop(&id);
            }
        }
    }
    let record = started.finished().await.context(
        "the run ended without a final record; `switchboard runs get` shows what the store has",
    )?;
    Ok(print_result(&record, json))
}

fn print_result(run: &RunRecord, json: bool) -> u8 {
    if json {
        println!("{}", commands::outcome_json(run));
    } else if run.answer.is_some() {
        println!("{}", commands::outcome_text(run));
    } else {
        eprintln!("{}", commands::outcome_text(run));
    }
    match run.status {
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
