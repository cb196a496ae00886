//! The dispatcher over a real SQLite store: agent choice, admission, the stamp, limits, stop
//! (here and through the store), caps, live-run filtering and repo workspaces. Where time is
//! the subject (the directory's timeout, an agent's timeout, the shutdown grace, abandoning a
//! deaf back end) the tests run on tokio's paused clock over the in-memory store, so they
//! advance time rather than wait for it and cannot flake on a busy machine.
// A test binary: a failed expectation panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
#![allow(clippy::field_reassign_with_default)] // Options are built step by step per test.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agents::{
    AgentBackend, CommandBackend, CommandSettings, EchoBackend, EchoBehaviour, EchoSettings,
    OutputCaps, RequestVia,
};
use authz_core::{
    ActorId, AgentName, BoxFuture, ChannelDirectory, ChannelId, ChannelVisibility, ConfigTier,
    GrantsTable, Membership, RepoSlug, StaticChannelDirectory, resolve_actor,
};
use commands::{LiveUpdate, RepoTask, RunRequest};
use dispatch::{
    AgentEntry, AgentTokens, Busy, DispatchError, DispatchSettings, Dispatcher, DispatcherParts,
};
use store::{ConfigValue, ListRuns, RunStatus, StatusFilter, Store, Timestamp};

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
        now: Timestamp::now,
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
async fn refused(d: &Dispatcher, req: RunRequest) -> DispatchError {
    match d.start(req).await {
        Ok(s) => panic!("started {} instead of refusing", s.run.id),
        Err(e) => e,
    }
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

#[tokio::test]
async fn a_request_is_recorded_run_and_finished_with_its_events() {
    let w = world().await;
    let d = dispatcher(&w, &Options::default());
    let started = d
        .start(request(&w, "http:viewer", "http:ops", "hello there"))
        .await
        .unwrap();
    assert_eq!(started.run.channel_visibility, ChannelVisibility::Machine);
    assert_eq!(started.run.channel_id.as_str(), "http:ops");
    assert!(
        started
            .run
            .capability_token
            .as_ref()
            .unwrap()
            .matches(&started.capability_token)
    );
    let id = started.run.id.clone();
    let done = started.finished().await.unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert!(done.answer.unwrap().contains("request: hello there"));
    let events = w.store.events(&id).await.unwrap();
    assert_eq!(events.len(), 3);
    assert!(d.live().is_empty());
}

#[tokio::test]
async fn the_agent_is_chosen_by_mention_then_flag_then_channel_then_org_then_default() {
    let w = world().await;
    let d = dispatcher(&w, &Options::default());
    // Each run is waited for, so the per-actor limit never refuses the next.
    async fn agent_of(s: dispatch::Started) -> String {
        let agent = s.run.agent.clone();
        s.finished().await.unwrap();
        agent
    }
    let r = d
        .start(request(&w, "http:viewer", "http:ops", "@other hi"))
        .await
        .unwrap();
    assert_eq!(
        r.run.request, "hi",
        "the mention is not part of the request"
    );
    assert_eq!(agent_of(r).await, "other");
    let mut flagged = request(&w, "http:viewer", "http:ops", "hi");
    flagged.agent = AgentName::parse("failer").ok();
    assert_eq!(agent_of(d.start(flagged).await.unwrap()).await, "failer");
    let set = |tier: ConfigTier, agent: &str| ConfigValue {
        tier,
        key: "agent".into(),
        value: agent.into(),
        updated_by: ActorId::cli_local(),
        updated_at: Timestamp::now(),
    };
    w.store
        .set_config(set(ConfigTier::Org, "other"))
        .await
        .unwrap();
    assert_eq!(
        agent_of(
            d.start(request(&w, "http:viewer", "http:ops", "hi"))
                .await
                .unwrap()
        )
        .await,
        "other"
    );
    let ops = ChannelId::parse("http:ops").unwrap();
    w.store
        .set_config(set(ConfigTier::Channel(ops), "failer"))
        .await
        .unwrap();
    assert_eq!(
        agent_of(
            d.start(request(&w, "http:viewer", "http:ops", "hi"))
                .await
                .unwrap()
        )
        .await,
        "failer"
    );
    assert_eq!(
        agent_of(
            d.start(request(&w, "http:viewer", "http:ci", "hi"))
                .await
                .unwrap()
        )
        .await,
        "other"
    );
    let e = refused(&d, request(&w, "http:viewer", "http:ops", "@ghost hi")).await;
    assert!(
        matches!(e, DispatchError::UnknownAgent(ref name) if name == "ghost"),
        "{e}"
    );
}

#[tokio::test]
async fn a_refused_agent_starts_and_records_nothing() {
    let w = world().await;
    let d = dispatcher(&w, &Options::default());
    let e = refused(&d, request(&w, "http:viewer", "http:ops", "@coding fix")).await;
    assert!(matches!(e, DispatchError::Refused(_)), "{e}");
    assert!(all_runs(&w).await.is_empty());
    let ok = d
        .start(request(&w, "http:coder", "http:ops", "@coding fix"))
        .await
        .unwrap();
    assert_eq!(ok.run.agent, "coding");
}

/// A directory that never answers in time.
struct SlowDirectory;

impl ChannelDirectory for SlowDirectory {
    fn info<'a>(&'a self, _c: &'a ChannelId) -> BoxFuture<'a, ChannelVisibility> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            ChannelVisibility::Public
        })
    }
    fn is_member<'a>(&'a self, _a: &'a ActorId, _c: &'a ChannelId) -> BoxFuture<'a, Membership> {
        Box::pin(async { Membership::Unknown })
    }
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_directory_stamps_unknown_at_its_timeout_logs_it_and_the_run_proceeds() {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let w = memory_world().await;
    let mut o = Options::default();
    o.directory = Arc::new(SlowDirectory);
    o.settings.channel_directory_timeout = Duration::from_millis(1500);
    let d = dispatcher(&w, &o);
    let begun = tokio::time::Instant::now();
    let started = d
        .start(request(&w, "http:viewer", "slack:C1", "hi"))
        .await
        .unwrap();
    assert_eq!(
        begun.elapsed(),
        Duration::from_millis(1500),
        "stamped exactly at the timeout, not before and not at the directory's 30 s"
    );
    assert_eq!(started.run.channel_visibility, ChannelVisibility::Unknown);
    assert_eq!(
        started.finished().await.unwrap().status,
        RunStatus::Completed
    );
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("[authz] channel directory timed out"), "{log}");
    assert!(
        log.contains("slack:C1"),
        "the line names the channel: {log}"
    );
    assert!(!log.contains("hi\n"), "and never the request");
}

#[tokio::test]
async fn over_a_limit_the_reply_is_busy_and_nothing_starts() {
    let w = world().await;
    let mut o = Options::default();
    o.settings.max_per_actor = 1;
    o.settings.max_concurrent = 2;
    let d = dispatcher(&w, &o);
    let first = d
        .start(request(&w, "http:viewer", "http:ops", "@staller a"))
        .await
        .unwrap();
    let e = refused(&d, request(&w, "http:viewer", "http:ops", "@echo b")).await;
    assert!(
        matches!(e, DispatchError::Busy(Busy::Actor { limit: 1 })),
        "{e}"
    );
    assert!(
        e.to_string()
            .starts_with("busy: you already have 1 runs going"),
        "{e}"
    );
    let _second = d
        .start(request(&w, "http:fleet", "http:ops", "@staller c"))
        .await
        .unwrap();
    let e = refused(&d, request(&w, "http:coder", "http:ops", "@echo d")).await;
    assert!(
        matches!(e, DispatchError::Busy(Busy::Global { limit: 2 })),
        "{e}"
    );
    assert_eq!(
        all_runs(&w).await.len(),
        2,
        "the refused requests recorded nothing"
    );
    assert!(d.stop(&first.run.id));
    first.finished().await.unwrap();
    assert!(
        d.start(request(&w, "http:viewer", "http:ops", "@echo e"))
            .await
            .is_ok(),
        "the slot came back"
    );
}

#[tokio::test(start_paused = true)]
async fn stop_ends_a_live_run_stopped_and_a_timeout_ends_it_failed_with_friction() {
    let w = memory_world().await;
    let mut o = Options::default();
    o.settings.max_per_actor = 4;
    let d = dispatcher(&w, &o);
    let stalled = d
        .start(request(&w, "http:viewer", "http:ops", "@staller wait"))
        .await
        .unwrap();
    let id = stalled.run.id.clone();
    tokio::time::advance(Duration::from_millis(100)).await;
    assert!(d.stop(&id), "live here");
    let r = stalled.finished().await.unwrap();
    assert_eq!(r.status, RunStatus::Stopped);
    assert!(!d.stop(&id), "a finished run is not live");

    // The staller's timeout is 300 ms: live just before it, failed just after.
    let timed = d
        .start(request(&w, "http:viewer", "http:ops", "@staller wait"))
        .await
        .unwrap();
    let id = timed.run.id.clone();
    running(&w, &id).await;
    tokio::time::advance(Duration::from_millis(299)).await;
    assert!(!d.live().is_empty(), "still live at 299 ms");
    let begun = tokio::time::Instant::now();
    let r = timed.finished().await.unwrap();
    assert!(
        begun.elapsed() <= Duration::from_millis(2),
        "ended at its timeout"
    );
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.error.as_deref(), Some("timed out after 300ms"));
    let f = w.store.friction(&id).await.unwrap();
    assert!(f.iter().any(|f| f.kind == "timeout"), "{f:?}");
}

/// Lets the run's task start (its timeout starts with it).
async fn running(w: &World, id: &authz_core::RunId) {
    while w.store.get_run(id).await.unwrap().unwrap().status != RunStatus::Running {
        tokio::task::yield_now().await;
    }
}

/// Fault 9: a stop asked through the store (from another process) stops the run in the
/// process that owns it. (Before: `runs stop` reached only runs of its own process.)
#[tokio::test]
async fn a_stop_requested_through_the_store_stops_the_owners_run() {
    let w = world().await;
    let d = dispatcher(&w, &Options::default());
    let stalled = d
        .start(request(&w, "http:viewer", "http:ops", "@staller wait"))
        .await
        .unwrap();
    let id = stalled.run.id.clone();
    assert_eq!(d.stop_requested().await.unwrap(), 0, "nobody asked yet");
    // Another process asks: it only writes to the store.
    let asked = w.store.request_stop(&id, Timestamp::now()).await.unwrap();
    assert_eq!(asked.owner.as_deref(), Some("test-replica"));
    assert_eq!(d.stop_requested().await.unwrap(), 1);
    let r = stalled.finished().await.unwrap();
    assert_eq!(r.status, RunStatus::Stopped);
    assert!(matches!(
        w.store.request_stop(&id, Timestamp::now()).await,
        Err(store::StoreError::AlreadyFinished { .. })
    ));
}

/// The watch honours a stop request within one period.
#[tokio::test(start_paused = true)]
async fn the_stop_watch_honours_a_request_within_its_period() {
    let w = memory_world().await;
    let d = dispatcher(&w, &Options::default());
    let stop = agents::CancellationToken::new();
    let watch = d.watch_stop_requests(Duration::from_millis(500), stop.clone());
    let stalled = d
        .start(request(&w, "http:viewer", "http:ops", "@staller wait"))
        .await
        .unwrap();
    let id = stalled.run.id.clone();
    w.store.request_stop(&id, Timestamp::now()).await.unwrap();
    let begun = tokio::time::Instant::now();
    let r = stalled.finished().await.unwrap();
    assert_eq!(r.status, RunStatus::Stopped);
    assert!(
        begun.elapsed() <= Duration::from_millis(500),
        "{:?}",
        begun.elapsed()
    );
    stop.cancel();
    watch.await.unwrap();
}

#[tokio::test]
async fn output_past_the_cap_is_dropped_and_recorded_as_friction() {
    let w = world().await;
    let mut o = Options::default();
    o.chatty_caps = OutputCaps {
        event_bytes: 64,
        total_bytes: 200,
        answer_bytes: 32,
    };
    let d = dispatcher(&w, &o);
    let s = d
        .start(request(&w, "http:viewer", "http:ops", "@chatty go"))
        .await
        .unwrap();
    let id = s.run.id.clone();
    let r = s.finished().await.unwrap();
    assert_eq!(r.status, RunStatus::Completed);
    assert!(r.answer.unwrap().len() <= 32);
    let events = w.store.events(&id).await.unwrap();
    assert!(
        events.len() < 50 && !events.is_empty(),
        "{} events",
        events.len()
    );
    let f = w.store.friction(&id).await.unwrap();
    assert_eq!(f.iter().filter(|f| f.kind == "output_capped").count(), 1);
}

#[tokio::test]
async fn live_updates_reach_only_viewers_who_may_read_the_run() {
    let w = world().await;
    let d = dispatcher(&w, &Options::default());
    let viewer = |id: &str| resolve_actor(id.parse().unwrap(), &w.table);
    let mut ops_viewer = d.live().subscribe(&viewer("http:viewer"));
    let mut fleet = d.live().subscribe(&viewer("http:fleet"));
    let mut nobody = d.live().subscribe(&viewer("http:nobody"));
    let ci = d
        .start(request(&w, "http:coder", "http:ci", "@echo one"))
        .await
        .unwrap();
    ci.finished().await.unwrap();
    let ops = d
        .start(request(&w, "http:coder", "http:ops", "@echo two"))
        .await
        .unwrap();
    let ops_id = ops.run.id.clone();
    ops.finished().await.unwrap();
    let drain = |sub: &mut dispatch::Subscription| {
        let mut seen = Vec::new();
        while let Some(u) = sub.try_next() {
            seen.push(u);
        }
        seen
    };
    let fleet_seen = drain(&mut fleet);
    let ops_seen = drain(&mut ops_viewer);
    assert!(
        drain(&mut nobody).is_empty(),
        "a viewer with no runs:read sees nothing"
    );
    assert!(
        fleet_seen
            .iter()
            .any(|u| u.run().unwrap().channel_id.as_str() == "http:ci")
    );
    assert!(!ops_seen.is_empty());
    assert!(
        ops_seen.iter().all(|u| u.run().unwrap().id == ops_id),
        "only http:ops runs"
    );
    assert!(
        ops_seen
            .iter()
            .any(|u| matches!(u, LiveUpdate::Finished { .. }))
    );
    let stalled = d
        .start(request(&w, "http:coder", "http:ci", "@staller x"))
        .await
        .unwrap();
    assert_eq!(d.live().snapshot(&viewer("http:fleet")).len(), 1);
    assert!(d.live().snapshot(&viewer("http:viewer")).is_empty());
    d.stop(&stalled.run.id);
}

/// A capability token's feed: one run's updates, its end included, and no other run's.
#[tokio::test]
async fn a_runs_own_feed_carries_that_run_only() {
    let w = world().await;
    let d = dispatcher(&w, &Options::default());
    let stalled = d
        .start(request(&w, "http:coder", "http:ci", "@staller wait"))
        .await
        .unwrap();
    let id = stalled.run.id.clone();
    let mut feed = d.live().subscribe_run(&id);
    let other = d
        .start(request(&w, "http:coder", "http:ci", "@echo another"))
        .await
        .unwrap();
    other.finished().await.unwrap();
    d.stop(&id);
    stalled.finished().await.unwrap();
    let mut seen = Vec::new();
    while let Some(u) = feed.try_next() {
        seen.push(u);
    }
    assert!(seen.iter().all(|u| u.run().unwrap().id == id), "{seen:?}");
    assert!(
        seen.iter()
            .any(|u| matches!(u, LiveUpdate::Finished { .. }))
    );
}

/// What a follower relies on (the CLI waits for a command's runs this way): once the live set
/// is empty, every run's `Finished` is already in a feed subscribed before, so waiting for
/// emptiness and then draining the feed shows every end; and the wait returns even when the
/// viewer never reads its feed.
#[tokio::test]
async fn a_runs_finished_update_is_in_the_feed_before_it_leaves_the_live_set() {
    let w = world().await;
    let mut o = Options::default();
    o.settings.max_per_actor = 8;
    let d = dispatcher(&w, &o);
    let fleet = resolve_actor("http:fleet".parse().unwrap(), &w.table);
    let mut feed = d.live().subscribe(&fleet);
    let mut ids = Vec::new();
    for i in 0..5 {
        let text = format!("@echo run {i}");
        let s = d
            .start(request(&w, "http:coder", "http:ci", &text))
            .await
            .unwrap();
        ids.push(s.run.id.clone());
    }
    d.live().until_empty().await;
    let mut ended = Vec::new();
    while let Some(u) = feed.try_next() {
        if let LiveUpdate::Finished { run, status, .. } = u {
            assert_eq!(status, RunStatus::Completed);
            ended.push(run.id);
        }
    }
    ended.sort();
    ids.sort();
    assert_eq!(
        ended, ids,
        "every run's end was in the feed when the set emptied"
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_short_runs_finish_and_interrupts_the_rest() {
    let w = memory_world().await;
    let mut o = Options::default();
    o.settings.max_per_actor = 4;
    let d = dispatcher(&w, &o);
    let quick = d
        .start(request(&w, "http:viewer", "http:ops", "@echo a"))
        .await
        .unwrap();
    let stalled = d
        .start(request(&w, "http:viewer", "http:ops", "@staller b"))
        .await
        .unwrap();
    running(&w, &stalled.run.id).await;
    // The grace is shorter than the staller's 300 ms timeout: shutdown interrupts it.
    let begun = tokio::time::Instant::now();
    let cancelled = d
        .shutdown(Duration::from_millis(200), Duration::from_secs(5))
        .await;
    assert_eq!(cancelled, 1);
    assert!(
        begun.elapsed() >= Duration::from_millis(200),
        "the whole grace was given"
    );
    assert_eq!(quick.finished().await.unwrap().status, RunStatus::Completed);
    assert_eq!(
        stalled.finished().await.unwrap().status,
        RunStatus::Interrupted
    );
    let e = refused(&d, request(&w, "http:viewer", "http:ops", "@echo c")).await;
    assert!(matches!(e, DispatchError::ShuttingDown));
}

/// A back end that never looks at its cancellation token.
struct Deaf;

#[async_trait::async_trait]
impl AgentBackend for Deaf {
    fn kind(&self) -> &'static str {
        "deaf"
    }
    async fn run(
        &self,
        _job: agents::AgentJob,
        sink: agents::EventSink,
        _cancel: agents::CancellationToken,
    ) -> agents::AgentOutcome {
        sink.event("progress", "not listening").await;
        tokio::time::sleep(Duration::from_secs(3600)).await;
        sink.answered("too late")
    }
}

#[tokio::test(start_paused = true)]
async fn a_back_end_that_ignores_its_stop_is_abandoned_and_the_run_still_ends() {
    let w = memory_world().await;
    let mut agents = BTreeMap::new();
    agents.insert(
        AgentName::parse("echo").unwrap(),
        entry(Arc::new(Deaf), Duration::from_millis(100)),
    );
    let d = Dispatcher::new(DispatcherParts {
        store: w.store.clone(),
        directory: Arc::new(StaticChannelDirectory),
        agents,
        settings: DispatchSettings {
            default_agent: AgentName::parse("echo").ok(),
            cancel_grace: Duration::from_millis(100),
            ..Default::default()
        },
        replica: store::ReplicaId::parse("test-replica").unwrap(),
        tokens: AgentTokens::ephemeral().unwrap(),
        secrets: vec![],
        now: Timestamp::now,
        tool_broker: Default::default(),
    });
    let s = d
        .start(request(&w, "http:viewer", "http:ops", "hello"))
        .await
        .unwrap();
    let id = s.run.id.clone();
    let begun = tokio::time::Instant::now();
    let r = s.finished().await.unwrap();
    assert_eq!(
        begun.elapsed(),
        Duration::from_millis(200),
        "its timeout, then the grace, then abandoned"
    );
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.error.as_deref(), Some("timed out after 100ms"));
    let kinds: Vec<String> = w
        .store
        .friction(&id)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.kind)
        .collect();
    assert!(
        kinds.contains(&"unresponsive".to_owned()) && kinds.contains(&"timeout".to_owned()),
        "{kinds:?}"
    );
    assert!(d.live().is_empty());
}

async fn add_repo(w: &World, slug: &str, source: store::repos::RepoSource) {
    store::repos::set(
        w.store.as_ref(),
        &slug.parse().unwrap(),
        &source,
        &ActorId::cli_local(),
        Timestamp::now(),
    )
    .await
    .unwrap();
}

/// `git` in `dir` as a test's author.
fn git_in(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository with one commit.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git_in(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("README"), "hi").unwrap();
    git_in(dir.path(), &["add", "README"]);
    git_in(dir.path(), &["commit", "-qm", "init"]);
    dir
}

#[tokio::test]
async fn repo_runs_work_in_a_copy_of_their_own_made_from_the_base() {
    let w = world().await;
    let data = tempfile::tempdir().unwrap();
    let mut o = Options::default();
    o.settings.data_dir = data.path().to_path_buf();
    let d = dispatcher(&w, &o);
    let local = repository();
    let local_path = std::fs::canonicalize(local.path()).unwrap();
    add_repo(
        &w,
        "acme/web",
        store::repos::RepoSource::Path(local_path.display().to_string()),
    )
    .await;
    let slug = RepoSlug::parse("acme/web").unwrap();
    // The admission is asked again here: without repo:exec or agent:run:coding, nothing starts.
    let e = d
        .start_repo(
            request(&w, "http:viewer", "http:ops", ""),
            slug.clone(),
            RepoTask::Test,
        )
        .await
        .err()
        .unwrap();
    assert!(matches!(e, DispatchError::Refused(_)), "{e}");
    assert!(all_runs(&w).await.is_empty());
    let req = request(&w, "http:coder", "http:ops", "");
    let s = d
        .start_repo(req.clone(), slug.clone(), RepoTask::Test)
        .await
        .unwrap();
    assert_eq!(s.run.repo.as_ref(), Some(&slug));
    assert!(s.run.request.starts_with("Run the test suite of acme/web"));
    let id = s.run.id.clone();
    let r = s.finished().await.unwrap();
    let own = std::fs::canonicalize(data.path())
        .unwrap()
        .join(format!("runs/{id}/work"));
    assert_eq!(
        r.answer.as_deref(),
        Some(own.to_str().unwrap()),
        "ran in a workspace of its own"
    );
    assert!(!own.exists(), "the workspace is removed when the run ends");
    // Its branch is in the user's repository, at the base (it changed nothing).
    let head = git_in(&local_path, &["rev-parse", "HEAD"]);
    assert_eq!(
        git_in(&local_path, &["rev-parse", &format!("switchboard/{id}")]),
        head
    );

    // A URL: mirrored into the data directory; each run gets its own copy too.
    let origin = repository();
    add_repo(
        &w,
        "acme/api",
        store::repos::RepoSource::Url(format!("file://{}", origin.path().display())),
    )
    .await;
    let api = RepoSlug::parse("acme/api").unwrap();
    let s = d
        .start_repo(req.clone(), api.clone(), RepoTask::Build)
        .await
        .unwrap();
    let id = s.run.id.clone();
    let r = s.finished().await.unwrap();
    let mirror = data.path().join("repos/acme/api.git");
    assert!(mirror.join("switchboard-fetched").is_file());
    assert!(
        r.answer
            .as_deref()
            .unwrap()
            .ends_with(&format!("runs/{id}/work"))
    );

    let ghost = RepoSlug::parse("acme/ghost").unwrap();
    let e = d
        .start_repo(req.clone(), ghost, RepoTask::Test)
        .await
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("repo acme/ghost is not configured"),
        "{e}"
    );
    // A path that is not a git repository is refused for runs, saying why.
    let plain = tempfile::tempdir().unwrap();
    add_repo(
        &w,
        "acme/plain",
        store::repos::RepoSource::Path(plain.path().display().to_string()),
    )
    .await;
    let e = d
        .start_repo(req, RepoSlug::parse("acme/plain").unwrap(), RepoTask::Test)
        .await
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("is not the top of a git repository"),
        "{e}"
    );
}

/// A model that takes `delay` to answer with one org fact (for the `model` extractor).
struct SlowModel {
    delay: Duration,
}

#[async_trait::async_trait]
impl AgentBackend for SlowModel {
    fn kind(&self) -> &'static str {
        "slow-model"
    }
    async fn run(
        &self,
        job: agents::AgentJob,
        sink: agents::EventSink,
        _cancel: agents::CancellationToken,
    ) -> agents::AgentOutcome {
        assert!(job.request.contains("Answer with exactly one JSON object"));
        tokio::time::sleep(self.delay).await;
        sink.answered(
            r#"{"facts": [{"text": "backups run at 02:00", "audience": "org"}], "summary": null}"#,
        )
    }
}

/// A dispatcher whose memory uses the model extractor over a model taking 5 s.
fn reflecting_dispatcher(w: &World, reflection_timeout: Duration) -> Dispatcher {
    let n = |s: &str| AgentName::parse(s).unwrap();
    let mut agents = BTreeMap::new();
    let long = Duration::from_secs(30);
    agents.insert(n("echo"), entry(echo(EchoBehaviour::Answer), long));
    let model = SlowModel {
        delay: Duration::from_secs(5),
    };
    agents.insert(n("other"), entry(Arc::new(model), long));
    let mut settings = DispatchSettings {
        default_agent: Some(n("echo")),
        memory_model: Some(n("other")),
        ..Default::default()
    };
    settings.memory.extractor = memory::ExtractorKind::Model;
    settings.memory.reflection_timeout = reflection_timeout;
    Dispatcher::new(DispatcherParts {
        store: w.store.clone(),
        directory: Arc::new(StaticChannelDirectory),
        agents,
        settings,
        replica: store::ReplicaId::parse("test-replica").unwrap(),
        tokens: AgentTokens::ephemeral().unwrap(),
        secrets: vec![],
        now: Timestamp::now,
        tool_broker: Default::default(),
    })
}

/// A run of `echo` for `http:viewer`, waited for until its final record is out.
async fn finished_run(w: &World, d: &Dispatcher) -> store::RunRecord {
    let started = d
        .start(request(w, "http:viewer", "http:ops", "hello"))
        .await
        .unwrap();
    started.finished().await.unwrap()
}

async fn org_facts(w: &World) -> Vec<String> {
    w.store
        .memory_in_scopes(&[authz_core::ScopeKey::Org], 10)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect()
}

/// Reflection starts after the reply: the final record is out while it is in flight. A
/// shutdown whose grace covers it lets it finish; one whose grace does not returns at the
/// grace, leaving it counted as pending.
#[tokio::test(start_paused = true)]
async fn reflection_runs_after_the_reply_and_shutdown_finishes_it_within_the_grace() {
    let w = memory_world().await;
    let d = reflecting_dispatcher(&w, Duration::from_secs(60));
    let run = finished_run(&w, &d).await;
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(
        d.pending_reflections(),
        1,
        "the reply came before the reflection"
    );
    assert!(org_facts(&w).await.is_empty());
    let t0 = tokio::time::Instant::now();
    d.shutdown(Duration::from_secs(10), Duration::from_secs(1))
        .await;
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "it waited only as long as needed"
    );
    assert_eq!(d.pending_reflections(), 0);
    assert_eq!(org_facts(&w).await, vec!["backups run at 02:00"]);

    let w = memory_world().await;
    let d = reflecting_dispatcher(&w, Duration::from_secs(60));
    finished_run(&w, &d).await;
    let t0 = tokio::time::Instant::now();
    d.shutdown(Duration::from_secs(2), Duration::from_secs(1))
        .await;
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert_eq!(
        d.pending_reflections(),
        1,
        "abandoned at the end of the grace"
    );
    assert!(org_facts(&w).await.is_empty());
}

/// A reflection past its bound writes nothing and is one friction entry on the run.
#[tokio::test(start_paused = true)]
async fn a_reflection_past_its_bound_is_friction() {
    let w = memory_world().await;
    let d = reflecting_dispatcher(&w, Duration::from_secs(1));
    let run = finished_run(&w, &d).await;
    assert!(d.settle_reflections(Duration::from_secs(10)).await);
    assert!(org_facts(&w).await.is_empty());
    let friction = w.store.friction(&run.id).await.unwrap();
    assert_eq!(friction.len(), 1, "{friction:?}");
    assert_eq!(friction[0].kind, "memory_timeout");
}
