//! Reflection after the reply: finished within the shutdown grace, friction past its bound.

use super::*;

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
        now: store::wall_clock,
        tool_broker: Default::default(),
    })
}

/// A run of `echo` for `http:viewer`, waited for until its final record is out.
async fn finished_run(w: &World, d: &Dispatcher) -> store::RunRecord {
    let started = d
        .start(request(w, "http:viewer", "http:ops", "hello"))
        .await
        .unwrap();
    let id = started.id().clone();
    started.finished().await.unwrap();
    record(w, &id).await
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
