//! The dispatcher over a real SQLite store: agent choice, admission, the stamp, limits, stop
//! (here and through the store), caps, live-run filtering and repo workspaces. Where time is
//! the subject (the directory's timeout, an agent's timeout, the shutdown grace, abandoning a
//! deaf back end) the tests run on tokio's paused clock over the in-memory store, so they
//! advance time rather than wait for it and cannot flake on a busy machine.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use agents::{
    AgentBackend, CommandBackend, CommandSettings, EchoBackend, EchoBehaviour, EchoSettings,
    OutputCaps, RequestVia,
};
use authz_core::{
    ActorId, AgentName, BoxFuture, ChannelDirectory, ChannelId, ChannelVisibility, ConfigTier,
    GrantsTable, Membership, RepoSlug, StaticChannelDirectory, resolve_actor,
};
use commands::{LaunchError, LiveUpdate, RepoTask, RunRequest};
use dispatch::{AgentEntry, AgentTokens, Busy, DispatchSettings, Dispatcher, DispatcherParts};
use store::{ConfigValue, ListRuns, RunStatus, StatusFilter, Store};

struct World {
    store: Arc<dyn Store>,
    table: GrantsTable,
    _dir: tempfile::TempDir,
}

const CONFIG: &str = r#"
[restrict]
agents = ["coding"]

[grants."http:viewer"]
actions = ["runs:read", "agent:run:echo", "agent:run:other", "agent:run:staller", "agent:run:failer", "agent:run:chatty"]
channels = ["http:ops"]

[grants."http:fleet"]
actions = ["runs:read", "agent:run:*"]
channels = "all"

[grants."http:coder"]
actions = ["agent:run:coding", "agent:run:echo", "agent:run:staller"]
"#;

fn names() -> BTreeSet<AgentName> {
    ["echo", "other", "staller", "failer", "coding", "chatty"]
        .into_iter()
        .map(|n| AgentName::parse(n).unwrap())
        .collect()
}

async fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("sb.db").display());
    world_on(&url, dir).await
}

/// The in-memory store: no I/O, so tokio's paused clock advances only through timers.
async fn memory_world() -> World {
    world_on("memory:", tempfile::tempdir().unwrap()).await
}

async fn world_on(url: &str, dir: tempfile::TempDir) -> World {
    let store = store::open(url).await.unwrap();
    let doc: toml::Table = toml::from_str(CONFIG).unwrap();
    let table = GrantsTable::from_config(&doc, names()).unwrap();
    World {
        store,
        table,
        _dir: dir,
    }
}

fn echo(behaviour: EchoBehaviour) -> Arc<dyn AgentBackend> {
    Arc::new(EchoBackend::new(EchoSettings {
        behaviour,
        delay: Duration::ZERO,
    }))
}

fn entry(backend: Arc<dyn AgentBackend>, timeout: Duration) -> AgentEntry {
    AgentEntry {
        backend,
        timeout,
        caps: OutputCaps::default(),
        tools: None,
        workspace: false,
        undecided_network: false,
    }
}

fn script(dir: &std::path::Path, body: &str) -> String {
    let path = dir.join(format!("agent-{}.sh", body.len()));
    let mut f = std::fs::File::create(&path).unwrap();
    writeln!(f, "#!/bin/sh\n{body}").unwrap();
    drop(f);
    let mut p = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o755);
    std::fs::set_permissions(&path, p).unwrap();
    path.to_string_lossy().into_owned()
}

struct Options {
    settings: DispatchSettings,
    directory: Arc<dyn ChannelDirectory>,
    chatty_caps: OutputCaps,
    scripts: tempfile::TempDir,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            settings: DispatchSettings {
                default_agent: AgentName::parse("echo").ok(),
                ..Default::default()
            },
            directory: Arc::new(StaticChannelDirectory),
            chatty_caps: OutputCaps::default(),
            scripts: tempfile::tempdir().unwrap(),
        }
    }
}

fn dispatcher(w: &World, o: &Options) -> Dispatcher {
    let mut agents = BTreeMap::new();
    let n = |s: &str| AgentName::parse(s).unwrap();
    let long = Duration::from_secs(30);
    agents.insert(n("echo"), entry(echo(EchoBehaviour::Answer), long));
    agents.insert(n("other"), entry(echo(EchoBehaviour::Answer), long));
    agents.insert(
        n("staller"),
        entry(echo(EchoBehaviour::Stall), Duration::from_millis(300)),
    );
    agents.insert(n("failer"), entry(echo(EchoBehaviour::Fail), long));
    let pwd = CommandBackend::new(CommandSettings {
        network: agents::CommandNetwork::Host,
        claude_code: None,
        argv: vec![script(o.scripts.path(), "echo working\necho\npwd")],
        request_via: RequestVia::Stdin,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        sandbox: false,
        sandbox_binds: vec![],
        private: vec![],
    })
    .unwrap();
    agents.insert(
        n("coding"),
        AgentEntry {
            workspace: true,
            ..entry(Arc::new(pwd), long)
        },
    );
    let chatty = CommandBackend::new(CommandSettings {
        network: agents::CommandNetwork::Host,
        claude_code: None,
        argv: vec![script(
            o.scripts.path(),
            "i=0\nwhile [ $i -lt 50 ]; do echo \"line $i of output\"; i=$((i+1)); done",
        )],
        request_via: RequestVia::Stdin,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        sandbox: false,
        sandbox_binds: vec![],
        private: vec![],
    })
    .unwrap();
    agents.insert(
        n("chatty"),
        AgentEntry {
            backend: Arc::new(chatty),
            timeout: long,
            caps: o.chatty_caps,
            tools: None,
            workspace: false,
            undecided_network: false,
        },
    );
    Dispatcher::new(DispatcherParts {
        store: w.store.clone(),
        directory: o.directory.clone(),
        agents,
        settings: o.settings.clone(),
        replica: store::ReplicaId::parse("test-replica").unwrap(),
        tokens: AgentTokens::ephemeral().unwrap(),
        secrets: vec![],
        now: store::wall_clock,
        tool_broker: Default::default(),
    })
}

fn request(w: &World, actor: &str, channel: &str, text: &str) -> RunRequest {
    RunRequest {
        actor: resolve_actor(actor.parse().unwrap(), &w.table),
        surface: authz_core::Surface::Http,
        channel: ChannelId::parse(channel).unwrap(),
        thread_key: None,
        text: text.into(),
        agent: None,
        parent: None,
        policy_rules: vec![],
        repo: None,
    }
}

/// A request the dispatcher must refuse; its error.
async fn refused(d: &Dispatcher, req: RunRequest) -> LaunchError {
    match d.start(req).await {
        Ok(s) => panic!("started {} instead of refusing", s.id()),
        Err(e) => e,
    }
}

/// A run's record as the store has it now.
async fn record(w: &World, id: &authz_core::RunId) -> store::RunRecord {
    w.store.get_run(id).await.unwrap().unwrap()
}

async fn all_runs(w: &World) -> Vec<store::RunRecord> {
    let q = ListRuns {
        visible_to: authz_core::Predicate::All,
        status: StatusFilter::All,
        before: None,
        limit: 100,
    };
    w.store.list_runs(&q).await.unwrap().runs
}

mod admission;
mod limits;
mod live_feed;
mod reflection;
mod stops;
mod workspace;
