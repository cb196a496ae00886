//! The scheduler on a real store, driven by an injected clock: `tick(now)` with the test's
//! own instants. Apps are built from config text exactly as `serve` builds them.

use std::collections::BTreeMap;

use authz_core::{ChannelVisibility as V, Predicate, ScheduleName};
use commands::{FiringSlot, ScheduleDesk, Timestamp};
use server::config::{Source, parse};
use server::{App, Secrets};
use store::{Friction, ListRuns, NewRun, RunStatus, StatusFilter};

const MINUTE: i64 = 60_000_000;
/// Monday 2026-11-30 00:00 UTC: a minute boundary, so every-minute slots fall on `T0 + k·MINUTE`.
const T0: i64 = 1_795_996_800_000_000;

async fn app(store: &str, extra: &str) -> (App, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    (app_in(dir.path(), store, extra).await, dir)
}

/// An app whose SQLite file and data directory are in `dir` (a second process reuses them).
async fn app_in(dir: &std::path::Path, store: &str, extra: &str) -> App {
    let store = match store {
        "sqlite" => format!(
            "[store]\nurl = \"sqlite://{}\"\n",
            dir.join("sb.db").display()
        ),
        other => other.to_owned(),
    };
    let text = format!(
        "[server]\ndata_dir = \"{}\"\n{store}\n[agents]\ndefault = \"echo\"\n[agents.echo]\n{extra}",
        dir.join("data").display()
    );
    let config = parse(Source::File("test.toml".into()), &text).unwrap();
    let secrets = Secrets::from_lookup(&config, |_| None).unwrap();
    let replica = store::ReplicaId::parse("replica").unwrap();
    App::build(config, secrets, replica).await.unwrap()
}

fn postgres_store(tag: &str) -> String {
    test_support::postgres::store_section(&format!("sched_{tag}"))
}

const EVERY_MINUTE: &str = r#"
[[schedules]]
name = "minutely"
cron = "* * * * *"
command = "help"
[grants."schedule:minutely"]
actions = ["help:read"]
"#;

fn name(n: &str) -> ScheduleName {
    ScheduleName::parse(n).unwrap()
}

async fn tick(app: &App, at: i64) -> Vec<schedule::Fired> {
    app.scheduler
        .tick(Timestamp::from_micros(at), &app.registry, &app.services)
        .await
}

async fn all_runs(app: &App) -> Vec<store::RunRecord> {
    app.store
        .list_runs(&ListRuns {
            visible_to: Predicate::All,
            status: StatusFilter::All,
            limit: 1000,
            before: None,
        })
        .await
        .unwrap()
        .runs
}

#[tokio::test]
async fn a_slot_fires_once_as_the_schedule_in_its_own_channel() {
    let (app, _dir) = app("sqlite", EVERY_MINUTE).await;
    // The first tick of a deployment with no firing on record starts from now.
    assert!(tick(&app, T0 + 30_000_000).await.is_empty());
    // The next minute's slot has come: it fires once, however often the timer ticks.
    let fired = tick(&app, T0 + MINUTE + 1).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(
        fired[0].slot,
        FiringSlot::Timer(Timestamp::from_micros(T0 + MINUTE))
    );
    assert_eq!(fired[0].status, "completed");
    assert!(tick(&app, T0 + MINUTE + 2).await.is_empty());
    assert!(tick(&app, T0 + MINUTE + 59_000_000).await.is_empty());
    let runs = all_runs(&app).await;
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(Some(&run.id), fired[0].run.as_ref());
    assert_eq!(run.user_id.as_str(), "schedule:minutely");
    assert_eq!(run.channel_id.as_str(), "schedule:minutely");
    assert_eq!(run.channel_visibility, V::Machine);
    assert_eq!(run.request, "help");
    assert_eq!(run.status, RunStatus::Completed);
    assert!(
        run.answer.as_deref().unwrap_or("").contains("help"),
        "the reply is the answer"
    );
    let firings = app
        .store
        .recent_firings(&name("minutely"), 10)
        .await
        .unwrap();
    assert_eq!(firings.len(), 1);
    assert_eq!(firings[0].run_id.as_ref(), Some(&run.id));
}

#[tokio::test]
async fn after_downtime_a_missed_run_of_slots_fires_once_and_says_so() {
    let (app, dir) = app("sqlite", EVERY_MINUTE).await;
    tick(&app, T0).await;
    assert_eq!(tick(&app, T0 + MINUTE).await.len(), 1);
    // A new process after 10 minutes down: it reads the last slot from the store.
    let second = app_in(dir.path(), "sqlite", EVERY_MINUTE).await;
    let fired = tick(&second, T0 + 11 * MINUTE + 5).await;
    assert_eq!(fired.len(), 1, "one firing for the whole gap: {fired:?}");
    assert_eq!(
        fired[0].slot,
        FiringSlot::Timer(Timestamp::from_micros(T0 + 11 * MINUTE))
    );
    assert_eq!(
        fired[0].detail.as_deref(),
        Some("caught up after downtime: 9 missed slot(s) since 2026-11-30 00:01 UTC fired once")
    );
    assert!(tick(&second, T0 + 11 * MINUTE + 6).await.is_empty());
    assert_eq!(all_runs(&app).await.len(), 2);
}

#[tokio::test]
async fn a_manual_firing_takes_its_own_slot_and_never_stands_for_a_timer_slot() {
    let (app, _dir) = app("sqlite", EVERY_MINUTE).await;
    tick(&app, T0).await;
    let manual = app
        .scheduler
        .fire_now("minutely", &app.registry, &app.services)
        .await
        .unwrap();
    assert_eq!(manual.status, "completed");
    assert!(manual.run.is_some());
    // The timer slot that follows still fires: the manual firing did not take it.
    assert_eq!(tick(&app, T0 + MINUTE).await.len(), 1);
    let firings = app
        .store
        .recent_firings(&name("minutely"), 10)
        .await
        .unwrap();
    assert_eq!(firings.iter().filter(|f| f.slot.is_manual()).count(), 1);
    assert_eq!(
        app.store.last_timer_slots().await.unwrap(),
        [(name("minutely"), Timestamp::from_micros(T0 + MINUTE))]
    );
    let unknown = app
        .scheduler
        .fire_now("nope", &app.registry, &app.services)
        .await
        .unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "no schedule `nope`; the schedules are minutely, self-improvement"
    );
}

/// A firing is a new request: after a reload that takes the schedule's grant away, its next
/// firing decides under the policy in force (refused), never under the one it started with.
#[tokio::test]
async fn a_firing_after_a_reload_decides_under_the_policy_in_force() {
    let (app, _dir) = app("sqlite", EVERY_MINUTE).await;
    let before = app
        .scheduler
        .fire_now("minutely", &app.registry, &app.services)
        .await
        .unwrap();
    assert_eq!(before.status, "completed");
    let table = authz_core::GrantsTable::empty(app.services.table().agents().clone());
    app.services.policy.replace(commands::PolicyInForce {
        table: std::sync::Arc::new(table),
        org_rules: Vec::new(),
        hash: "sha256:revoked".to_owned(),
    });
    let after = app
        .scheduler
        .fire_now("minutely", &app.registry, &app.services)
        .await
        .unwrap();
    assert_ne!(after.status, "completed", "{after:?}");
    let run = app
        .store
        .get_run(after.run.as_ref().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert!(
        run.error.as_deref().unwrap_or_default().contains("🚫"),
        "{run:?}"
    );
}

#[tokio::test]
async fn a_misconfigured_schedule_records_why_and_sends_nothing() {
    // A prompt firing whose grants lack agent:run:echo, and a command schedule with no grants.
    let extra = r#"
[[schedules]]
name = "digest"
cron = "* * * * *"
agent = "echo"
prompt = "summarise the day"
[grants."schedule:digest"]
actions = ["help:read"]

[[schedules]]
name = "orphan"
cron = "* * * * *"
command = "runs list"
"#;
    let (app, _dir) = app("sqlite", extra).await;
    let bad = app.scheduler.misconfigured();
    assert_eq!(bad.len(), 2, "{bad:?}");
    let summary = server::summary(&app, "127.0.0.1:8080".parse().unwrap()).to_string();
    assert!(
        summary.contains("on  schedules          3 schedules (digest, orphan, self-improvement); fired in process")
            && summary.contains("; 2 misconfigured, recording `misconfigured` and sending nothing: digest (grants.\"schedule:digest\".actions: schedule:digest may not run agent `echo`"),
        "{summary}"
    );
    tick(&app, T0).await;
    let fired = tick(&app, T0 + MINUTE).await;
    let by_name: BTreeMap<&str, &schedule::Fired> =
        fired.iter().map(|f| (f.name.as_str(), f)).collect();
    assert_eq!(by_name.len(), 2);
    for (n, key) in [
        (
            "digest",
            "grants.\"schedule:digest\".actions: schedule:digest may not run agent `echo`; its grants need \"agent:run:echo\"",
        ),
        (
            "orphan",
            "grants.\"schedule:orphan\".actions: schedule:orphan may not run `runs list`; its grants need \"runs:read\"",
        ),
    ] {
        let f = by_name[n];
        assert_eq!(f.status, "misconfigured");
        assert_eq!(f.run, None);
        assert_eq!(f.detail.as_deref(), Some(key));
        let recorded = app.store.recent_firings(&name(n), 1).await.unwrap();
        assert_eq!(recorded[0].status, "misconfigured");
        assert_eq!(recorded[0].detail.as_deref(), Some(key));
    }
    assert!(all_runs(&app).await.is_empty(), "nothing was sent");
    let views = app.scheduler.schedules(Timestamp::from_micros(T0));
    assert!(views.iter().filter(|v| v.misconfigured.is_some()).count() == 2);
}

#[tokio::test]
async fn an_agent_prompt_firing_is_an_ordinary_agent_run_and_its_firing_follows_it() {
    let extra = r#"
[[schedules]]
name = "digest"
cron = "30 6 * * *"
time_zone = "Europe/Berlin"
agent = "echo"
prompt = "summarise the day"
[grants."schedule:digest"]
actions = ["agent:run:echo"]
"#;
    let (app, _dir) = app("sqlite", extra).await;
    tick(&app, T0).await;
    // 06:30 in Berlin on 2026-11-30 is 05:30 UTC.
    let slot = T0 + 5 * 60 * MINUTE + 30 * MINUTE;
    assert!(tick(&app, slot - 1).await.is_empty());
    let fired = tick(&app, slot).await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].status, "started");
    let run_id = fired[0].run.clone().unwrap();
    let mut status = String::new();
    // Polled for up to 30 s: on a loaded machine the echo run can take seconds to end.
    for _ in 0..1500 {
        status = app.store.recent_firings(&name("digest"), 1).await.unwrap()[0]
            .status
            .clone();
        if status != "started" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status, "completed", "the firing follows its run to the end");
    let run = app.store.get_run(&run_id).await.unwrap().unwrap();
    assert_eq!(run.agent, "echo");
    assert_eq!(run.user_id.as_str(), "schedule:digest");
    assert_eq!(run.request, "summarise the day");
    let view = app
        .scheduler
        .schedules(Timestamp::from_micros(slot))
        .into_iter()
        .find(|v| v.name.as_str() == "digest")
        .unwrap();
    assert_eq!(view.next.unwrap().1, "2026-12-01 06:30 Europe/Berlin");
}

/// Deliberate change (a): the self-improvement firing analyses every channel's runs; a plain
/// Slack user's report counts only what it may read.
#[tokio::test]
async fn the_self_improvement_run_sees_every_channels_friction_and_a_plain_users_report_does_not() {
    let (app, _dir) = app("sqlite", "").await;
    let now = store::wall_clock().micros();
    for (channel, user, vis) in [
        ("slack:C1", "slack:UA", V::Public),
        ("slack:G0OPS", "slack:UADMIN", V::Private),
        ("slack:D1", "slack:UB", V::Dm),
        ("http:billing", "http:billing-bot", V::Machine),
    ] {
        let run = app
            .store
            .create_run(NewRun::fixture(
                channel.parse().unwrap(),
                user.parse().unwrap(),
                vis,
                Timestamp::from_micros(now - 3_600_000_000),
            ))
            .await
            .unwrap();
        app.store
            .add_friction(Friction {
                run_id: run.id.clone(),
                at: Timestamp::from_micros(now - 3_000_000_000),
                kind: "tool error".into(),
                detail: "d".into(),
            })
            .await
            .unwrap();
    }
    // The built-in schedule fires Mondays at 09:00 UTC; tick across one such slot.
    let monday_9 = T0 + 9 * 60 * MINUTE;
    tick(&app, monday_9 - MINUTE).await;
    let fired = tick(&app, monday_9).await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].name.as_str(), "self-improvement");
    let run = app
        .store
        .get_run(fired[0].run.as_ref().unwrap())
        .await
        .unwrap()
        .unwrap();
    let answer = run.answer.unwrap();
    assert!(
        answer.starts_with("🔍 4 runs analysed over the last 7 days; 4 friction entries."),
        "the fleet: {answer}"
    );
    assert!(answer.contains("tool error ×4"), "the patterns: {answer}");
    let plain = commands::Caller::new(
        authz_core::resolve_actor("slack:UPLAIN".parse().unwrap(), &app.services.table()),
        commands::Surface::Slack,
    );
    let report = app
        .registry
        .invoke(
            &plain,
            commands::RawInput::Text("friction report".into()),
            &app.services,
        )
        .await;
    assert_eq!(
        report.data["runs_analysed"], 1,
        "the public run only: {}",
        report.text
    );
}

/// Two replicas on one Postgres, each its own app, pool and scheduler, tick the same 100
/// slots concurrently: every slot fires exactly once, on one of them.
#[tokio::test]
async fn two_replicas_on_one_postgres_fire_each_of_100_slots_exactly_once() {
    let store = postgres_store("pair");
    let (a, _da) = app(&store, EVERY_MINUTE).await;
    let (b, _db) = app(&store, EVERY_MINUTE).await;
    tick(&a, T0).await;
    tick(&b, T0).await;
    let mut fired_by = [0usize; 2];
    for k in 1..=100 {
        // Both see the slot within the same instant; one of them wins it in the store.
        let at = T0 + k * MINUTE + (k % 7) * 1_000;
        let (fa, fb) = tokio::join!(tick(&a, at), tick(&b, at));
        assert_eq!(fa.len() + fb.len(), 1, "slot {k}: {fa:?} {fb:?}");
        fired_by[0] += fa.len();
        fired_by[1] += fb.len();
    }
    let firings = a
        .store
        .recent_firings(&name("minutely"), 500)
        .await
        .unwrap();
    assert_eq!(firings.len(), 100);
    let slots: std::collections::BTreeSet<_> = firings.iter().map(|f| f.slot.clone()).collect();
    assert_eq!(slots.len(), 100, "one row per slot");
    let runs = all_runs(&a).await;
    assert_eq!(runs.len(), 100, "one run per slot");
    eprintln!("slots fired by each replica: {fired_by:?}");
}

/// The child side of the two-process test: a replica of its own (its own process, app, pool
/// and scheduler) that ticks through the 100 slots once the shared start instant has come,
/// printing `FIRED <k>` for each slot it won.
async fn replica_child(store: String, go_at: i64) {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path(), &store, EVERY_MINUTE).await;
    tick(&app, T0).await;
    let wait = go_at - store::wall_clock().micros();
    if wait > 0 {
        tokio::time::sleep(std::time::Duration::from_micros(wait as u64)).await;
    }
    for k in 1..=100 {
        for fired in tick(&app, T0 + k * MINUTE).await {
            assert_eq!(fired.status, "completed");
            println!("FIRED {k}");
        }
    }
}

/// Two `serve`-like processes on one Postgres: each re-runs this test binary as a child
/// replica (`SB_SCHEDULE_REPLICA` set), both start ticking at the same instant through the
/// same 100 slots, and every slot fires exactly once, on one of them.
#[tokio::test]
async fn two_processes_on_one_postgres_fire_each_of_100_slots_exactly_once() {
    if let Ok(store) = std::env::var("SB_SCHEDULE_REPLICA") {
        let go_at = std::env::var("SB_SCHEDULE_GO").unwrap().parse().unwrap();
        return replica_child(store, go_at).await;
    }
    let store = postgres_store("procs");
    // Migrate once, so the children race on slots and not on the schema.
    let dir = tempfile::tempdir().unwrap();
    let parent = app_in(dir.path(), &store, EVERY_MINUTE).await;
    let go_at = store::wall_clock().micros() + 2_000_000;
    let spawn = || {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "schedule_surface::two_processes_on_one_postgres_fire_each_of_100_slots_exactly_once",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SB_SCHEDULE_REPLICA", &store)
            .env("SB_SCHEDULE_GO", go_at.to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let children = [spawn(), spawn()];
    let mut won: Vec<Vec<i64>> = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "a replica failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        won.push(
            stdout
                .lines()
                // libtest's `test … ` header has no newline before the first line printed.
                .filter_map(|l| l.split_once("FIRED ").map(|(_, k)| k))
                .map(|k| k.trim().parse().unwrap())
                .collect(),
        );
    }
    let mut all: Vec<i64> = won.concat();
    all.sort_unstable();
    assert_eq!(
        all,
        (1..=100).collect::<Vec<_>>(),
        "each slot once: {won:?}"
    );
    let firings = parent
        .store
        .recent_firings(&name("minutely"), 500)
        .await
        .unwrap();
    assert_eq!(firings.len(), 100);
    assert_eq!(all_runs(&parent).await.len(), 100, "one run per slot");
    eprintln!(
        "slots fired by each process: {} and {}",
        won[0].len(),
        won[1].len()
    );
}

/// A prompt firing whose run cannot start (here: the dispatcher is shutting down, which answers busy) sends
/// nothing, and `schedule fire` says so with the reason — not as a misconfiguration.
#[tokio::test]
async fn a_firing_whose_run_cannot_start_says_why_it_sent_nothing() {
    let extra = r#"
[[schedules]]
name = "digest"
cron = "0 6 * * *"
agent = "echo"
prompt = "summarise the day"
[grants."schedule:digest"]
actions = ["agent:run:echo"]
"#;
    let (app, _dir) = app("sqlite", extra).await;
    assert!(app.scheduler.misconfigured().is_empty());
    app.dispatcher
        .shutdown(std::time::Duration::ZERO, std::time::Duration::ZERO)
        .await;
    let cli = commands::Caller::new(
        authz_core::resolve_actor(authz_core::ActorId::cli_local(), &app.services.table()),
        commands::Surface::Cli,
    );
    let reply = app
        .registry
        .invoke(
            &cli,
            commands::RawInput::Text("schedule fire digest".into()),
            &app.services,
        )
        .await;
    assert_eq!(reply.kind, commands::ReplyKind::Failed);
    assert_eq!(
        reply.text,
        "`digest` sent nothing (failed): the run was not started (busy)"
    );
    assert!(reply.data["run_id"].is_null(), "{}", reply.data);
    let recorded = app.store.recent_firings(&name("digest"), 1).await.unwrap();
    assert_eq!(recorded[0].status, "failed");
    assert!(recorded[0].slot.is_manual());
    assert!(all_runs(&app).await.is_empty());
}
