//! Starting a run: its record and events, the agent's choice, admission, the channel's stamp.

use super::*;

#[tokio::test]
async fn a_request_is_recorded_run_and_finished_with_its_events() {
    let w = world().await;
    let d = dispatcher(&w, &Options::default());
    let started = d
        .start(request(&w, "http:viewer", "http:ops", "hello there"))
        .await
        .unwrap();
    let run = record(&w, started.id()).await;
    assert_eq!(run.channel_visibility, ChannelVisibility::Machine);
    assert_eq!(run.channel_id.as_str(), "http:ops");
    assert!(
        run.capability_token
            .as_ref()
            .unwrap()
            .matches(started.capability_token())
    );
    let id = started.id().clone();
    let done = started.finished().await.unwrap();
    assert_eq!(done.status(), RunStatus::Completed);
    assert!(done.answer().unwrap().contains("request: hello there"));
    let events = w.store.events(&id).await.unwrap();
    assert_eq!(events.len(), 3);
    assert!(d.live().is_empty());
}

#[tokio::test]
async fn the_agent_is_chosen_by_mention_then_flag_then_channel_then_org_then_default() {
    let w = world().await;
    let d = dispatcher(&w, &Options::default());
    // Each run is waited for, so the per-actor limit never refuses the next.
    async fn agent_of(s: commands::StartedRun) -> String {
        let agent = s.agent().to_owned();
        s.finished().await.unwrap();
        agent
    }
    let r = d
        .start(request(&w, "http:viewer", "http:ops", "@other hi"))
        .await
        .unwrap();
    assert_eq!(
        record(&w, r.id()).await.request,
        "hi",
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
        updated_at: store::wall_clock(),
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
        matches!(e, LaunchError::UnknownAgent { ref name } if name == "ghost"),
        "{e}"
    );
}

#[tokio::test]
async fn a_refused_agent_starts_and_records_nothing() {
    let w = world().await;
    let d = dispatcher(&w, &Options::default());
    let e = refused(&d, request(&w, "http:viewer", "http:ops", "@coding fix")).await;
    assert!(matches!(e, LaunchError::Refused(_)), "{e}");
    assert!(all_runs(&w).await.is_empty());
    let ok = d
        .start(request(&w, "http:coder", "http:ops", "@coding fix"))
        .await
        .unwrap();
    assert_eq!(ok.agent(), "coding");
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

#[tokio::test(start_paused = true)]
async fn a_slow_directory_stamps_unknown_at_its_timeout_logs_it_and_the_run_proceeds() {
    let captured = test_support::log::CapturedLog::default();
    let _guard = captured.install();
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
    assert_eq!(
        record(&w, started.id()).await.channel_visibility,
        ChannelVisibility::Unknown
    );
    assert_eq!(
        started.finished().await.unwrap().status(),
        RunStatus::Completed
    );
    let log = captured.text();
    assert!(log.contains("[authz] channel directory timed out"), "{log}");
    assert!(
        log.contains("slack:C1"),
        "the line names the channel: {log}"
    );
    assert!(!log.contains("hi\n"), "and never the request");
}
