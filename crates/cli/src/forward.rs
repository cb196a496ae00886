//! Registry commands from the command line: as `cli:local`, in-process, through the same
//! [`server::App`] the server builds; and `db migrate`.
//!
//! Command-shaped words go to the registry exactly as `Registry::handle` sends command-shaped
//! text on any surface (the shell has split them already). Words whose first is no command
//! group are an unknown command here, never an agent run: that is `switchboard ask`. A
//! command that starts a run (`repo test`) is followed to its end, so the process never
//! leaves a run behind.

use std::path::PathBuf;

use commands::{RawInput, Registry, ReplyKind};
use tracing::Instrument;

/// Takes `--json` and `--config FILE` (or `--config=FILE`) out of a registry command's words.
pub fn split_globals(words: Vec<String>) -> (Vec<String>, bool, Option<PathBuf>) {
    let mut rest = Vec::new();
    let (mut json, mut config) = (false, None);
    let mut it = words.into_iter();
    while let Some(w) = it.next() {
        if w == "--json" {
            json = true;
        } else if w == "--config" {
            config = it.next().map(PathBuf::from);
        } else if let Some(path) = w.strip_prefix("--config=") {
            config = Some(PathBuf::from(path));
        } else {
            rest.push(w);
        }
    }
    (rest, json, config)
}

/// Exit code of a reply: 0 ok; 1 refused, not found or not done; 2 usage.
pub fn exit_code(kind: ReplyKind) -> u8 {
    match kind {
        ReplyKind::Ok => 0,
        ReplyKind::Usage | ReplyKind::UnknownCommand => 2,
        ReplyKind::NotFound
        | ReplyKind::Unauthorized
        | ReplyKind::Conflict
        | ReplyKind::Unavailable
        | ReplyKind::Busy
        | ReplyKind::Failed => 1,
    }
}

/// `<command words…> [--help]`: help from the schema, or the command as `cli:local`.
pub fn run(config: Option<PathBuf>, json: bool, words: Vec<String>) -> anyhow::Result<u8> {
    let registry = Registry::catalogue();
    if words.iter().any(|w| w == "--help" || w == "-h") {
        return help(&registry, &words, json);
    }
    // A group alone (`switchboard runs`) is asked for its commands.
    if words.len() == 1
        && registry.by_words(&words).is_none()
        && words.first().is_some_and(|w| registry.is_group(w))
    {
        return help(&registry, &words, json);
    }
    if !registry.addresses_registry(&words) {
        let first = words.first().map(String::as_str).unwrap_or_default();
        let known: Vec<&str> = registry
            .commands()
            .iter()
            .filter_map(|c| c.id.as_str().split('.').next())
            .chain(crate::LOCAL_VERBS)
            .collect();
        let near = commands::suggest::nearest(first, known);
        crate::out::failure(
            json,
            "unknown_command",
            &format!(
                "{} (a request for an agent is `switchboard ask \"…\"`)",
                commands::reply_texts::unknown_command_near(first, near)
            ),
        );
        return Ok(2);
    }
    let loaded = crate::load(config)?;
    let action = registry.by_words(&words).map(|(c, _)| c.action.clone());
    // A command that runs something (`repo test`, `schedule fire`) fails when its run does.
    let starts_runs = matches!(
        action,
        Some(authz_core::Action::Command(_, authz_core::Effect::Exec))
    );
    let prepare = |loaded| {
        store_to_use(loaded, action).map_err(|absent| {
            crate::out::failure(json, "no_store", &absent);
            1
        })
    };
    crate::ask::with_app(loaded, "warn", prepare, |app| async move {
        // Asked where `switchboard ask` records its runs: the channel tier, memory and a
        // started run are `cli:local`'s.
        let channel = authz_core::ChannelId::parse(commands::CLI_CHANNEL).ok();
        let caller = commands::identity::local_caller(&app.services, channel);
        let feed = crate::ask::feed_of_this_process(&app);
        let route = app
            .registry
            .by_words(&words)
            .map_or_else(|| "unknown".to_owned(), |(c, _)| c.id.as_str().to_owned());
        let span = commands::trace::request_span("cli", &route);
        let reply = app
            .registry
            .invoke(&caller, RawInput::Words(words), &app.services)
            .instrument(span.clone())
            .await;
        span.record("outcome", commands::trace::outcome_of(reply.kind));
        drop(span);
        if json {
            outln!("{}", serde_json::to_string_pretty(&reply.data)?);
        } else if reply.kind == ReplyKind::Ok {
            outln!("{}", reply.text);
        } else {
            eprintln!("{}", reply.text);
        }
        let started = reply
            .data
            .get("run_id")
            .and_then(serde_json::Value::as_str)
            .filter(|_| starts_runs)
            .and_then(|id| authz_core::RunId::parse(id).ok());
        let ended = crate::ask::follow_runs_of_this_process(&app, json, feed, started).await;
        // A command whose run did not complete (`repo test` of a failing suite) failed.
        let code = exit_code(reply.kind);
        Ok(
            if code == 0 && ended.iter().any(|s| *s != commands::RunStatus::Completed) {
                1
            } else {
                code
            },
        )
    })
}

/// The config a command runs with, as far as its store goes: a command that only reads never
/// creates a SQLite store where there is none (it says so, and how to start one); `help`
/// reads no store, so it runs on one that keeps nothing.
fn store_to_use(
    mut loaded: server::LoadedConfig,
    action: Option<authz_core::Action>,
) -> Result<server::LoadedConfig, String> {
    use authz_core::{Action, CommandGroup, Effect};
    let Some(file) = loaded
        .store
        .url
        .sqlite_file()
        .map(|f| f.split('?').next().unwrap_or(f).to_owned())
    else {
        return Ok(loaded);
    };
    if std::path::Path::new(&file).exists() {
        return Ok(loaded);
    }
    match action {
        Some(Action::Command(CommandGroup::Help, _)) => {
            loaded.store.url = store::StoreUrl::Memory;
            Ok(loaded)
        }
        // Words that name no command are answered without a store.
        None => {
            loaded.store.url = store::StoreUrl::Memory;
            Ok(loaded)
        }
        Some(Action::Command(_, Effect::Read)) => Err(format!(
            "there is no store here: {file} does not exist, so nothing has run with this config yet. `switchboard serve` or `switchboard ask \"…\"` starts one there (or `switchboard db migrate` creates it empty); --config names another config, whose [store] url says where its store is"
        )),
        _ => Ok(loaded),
    }
}

/// `switchboard runs list --help` (the command's usage) or `switchboard runs --help` (the
/// group's commands), generated from the same schema the registry parses with.
fn help(registry: &Registry, words: &[String], json: bool) -> anyhow::Result<u8> {
    let plain: Vec<String> = words
        .iter()
        .filter(|w| !w.starts_with('-'))
        .cloned()
        .collect();
    if let Some((command, _)) = registry.by_words(&plain) {
        if json {
            let value = serde_json::json!({"command": command.text_form(), "summary": command.summary, "usage": command.usage()});
            outln!("{}", serde_json::to_string_pretty(&value)?);
        } else {
            outln!("{}\n\n{}", command.summary, command.usage());
        }
        return Ok(0);
    }
    let group = plain.first().cloned().unwrap_or_default();
    let members: Vec<_> = registry
        .commands()
        .iter()
        .filter(|c| c.id.as_str().split('.').next() == Some(group.as_str()))
        .collect();
    if members.is_empty() {
        crate::out::failure(
            json,
            "unknown_command",
            &commands::reply_texts::unknown_command(&group),
        );
        return Ok(2);
    }
    if json {
        let commands: Vec<serde_json::Value> = members
            .iter()
            .map(|c| serde_json::json!({"command": c.text_form(), "summary": c.summary}))
            .collect();
        let value = serde_json::json!({"group": group, "commands": commands});
        outln!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(0);
    }
    for c in members {
        outln!("{:<18} {}", c.text_form(), c.summary);
    }
    Ok(0)
}

/// `db backup <file>`: a consistent copy of the live SQLite store.
pub fn backup(config: Option<PathBuf>, json: bool, file: &std::path::Path) -> anyhow::Result<u8> {
    let loaded = crate::load(config)?;
    let url = loaded.store.url.redacted();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let copy = rt
        .block_on(store::backup(&loaded.store, file))
        .map_err(|e| anyhow::anyhow!("db backup of the store at {url}: {e}"))?;
    if json {
        let value = serde_json::json!({"store": url, "file": file.display().to_string(), "bytes": copy.bytes, "runs": copy.runs});
        outln!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        outln!(
            "backed up the store at {url} to {} ({} runs, {} KiB)",
            file.display(),
            copy.runs,
            copy.bytes.div_ceil(1024)
        );
    }
    Ok(0)
}

/// `db migrate`: opening the store creates and migrates it.
pub fn migrate(config: Option<PathBuf>, json: bool) -> anyhow::Result<u8> {
    let loaded = crate::load(config)?;
    let url = loaded.store.url.redacted();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let backend = rt
        .block_on(async { store::open_spec(&loaded.store).await.map(|s| s.backend()) })
        .map_err(|e| anyhow::anyhow!("store {url}: {e}"))?;
    if json {
        let value = serde_json::json!({"store": url, "backend": backend, "migrated": true});
        outln!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        outln!("migrated the {backend} store at {url}");
    }
    Ok(0)
}
