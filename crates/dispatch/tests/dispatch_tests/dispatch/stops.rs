//! Stopping a run: here, through the store, at its timeout, at shutdown, and a deaf back end.

use super::*;

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
    let id = stalled.id().clone();
    tokio::time::advance(Duration::from_millis(100)).await;
    assert!(d.stop(&id), "live here");
    let r = stalled.finished().await.unwrap();
    assert_eq!(r.status(), RunStatus::Stopped);
    assert!(!d.stop(&id), "a finished run is not live");

    // The staller's timeout is 300 ms: live just before it, failed just after.
    let timed = d
        .start(request(&w, "http:viewer", "http:ops", "@staller wait"))
        .await
        .unwrap();
    let id = timed.id().clone();
    running(&w, &id).await;
    tokio::time::advance(Duration::from_millis(299)).await;
    assert!(!d.live().is_empty(), "still live at 299 ms");
    let begun = tokio::time::Instant::now();
    let r = timed.finished().await.unwrap();
    assert!(
        begun.elapsed() <= Duration::from_millis(2),
        "ended at its timeout"
    );
    assert_eq!(r.status(), RunStatus::Failed);
    assert_eq!(
        record(&w, &id).await.error.as_deref(),
        Some("timed out after 300ms")
    );
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
    let id = stalled.id().clone();
    assert_eq!(d.stop_requested().await.unwrap(), 0, "nobody asked yet");
    // Another process asks: it only writes to the store.
    let asked = w
        .store
        .request_stop(&id, store::wall_clock())
        .await
        .unwrap();
    assert_eq!(asked.owner.as_deref(), Some("test-replica"));
    assert_eq!(d.stop_requested().await.unwrap(), 1);
    let r = stalled.finished().await.unwrap();
    assert_eq!(r.status(), RunStatus::Stopped);
    assert!(matches!(
        w.store.request_stop(&id, store::wall_clock()).await,
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
    let id = stalled.id().clone();
    w.store
        .request_stop(&id, store::wall_clock())
        .await
        .unwrap();
    let begun = tokio::time::Instant::now();
    let r = stalled.finished().await.unwrap();
    assert_eq!(r.status(), RunStatus::Stopped);
    assert!(
        begun.elapsed() <= Duration::from_millis(500),
        "{:?}",
        begun.elapsed()
    );
    stop.cancel();
    watch.await.unwrap();
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
    running(&w, stalled.id()).await;
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
    assert_eq!(
        quick.finished().await.unwrap().status(),
        RunStatus::Completed
    );
    assert_eq!(
        stalled.finished().await.unwrap().status(),
        RunStatus::Interrupted
    );
    let e = refused(&d, request(&w, "http:viewer", "http:ops", "@echo c")).await;
    assert!(matches!(e, LaunchError::ShuttingDown));
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
        now: store::wall_clock,
        tool_broker: Default::default(),
    });
    let s = d
        .start(request(&w, "http:viewer", "http:ops", "hello"))
        .await
        .unwrap();
    let id = s.id().clone();
    let begun = tokio::time::Instant::now();
    let r = s.finished().await.unwrap();
    assert_eq!(
        begun.elapsed(),
        Duration::from_millis(200),
        "its timeout, then the grace, then abandoned"
    );
    assert_eq!(r.status(), RunStatus::Failed);
    assert_eq!(
        record(&w, &id).await.error.as_deref(),
        Some("timed out after 100ms")
    );
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
