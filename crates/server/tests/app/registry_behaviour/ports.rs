//! The ports a surface reaches the rest through, on the app the composition root builds: the
//! callers a bearer token, an agent token and a capability token prove; the live feed; Slack
//! event dedupe; schedule firings; a command's answer recorded as a run.

use authz_core::{Action, ActorKind, Origin, Resource, Surface, authorize};
use commands::identity::{AgentTokenRefused, Capability, agent_caller, bearer_caller};
use commands::{Caller, LiveUpdate, ReplyKind, RunStatus};
use store::{FiringSlot, Timestamp, TokenHash};

use crate::registry_behaviour::harness::*;

const SECRET: &str = "ports-test-agent-token-secret-0123456789";
const STALLER: &str = "[agents.staller]\nbehaviour = \"stall\"\n";

fn tokens() -> String {
    format!(
        r#"{{"reader-token-0123456789": {{"subject": "reader", "channel": "http:ops"}},
            "sha256:{}": {{"subject": "writer"}}}}"#,
        TokenHash::of("writer-token-0123456789").to_hex()
    )
}

async fn world() -> World {
    let tokens = tokens();
    sqlite_with(
        STALLER,
        &[
            ("SWITCHBOARD_INGRESS_TOKENS", tokens.as_str()),
            ("SWITCHBOARD_AGENT_TOKEN_SECRET", SECRET),
        ],
    )
    .await
}

/// A live run of the staller for `principal`, started in `channel`.
async fn live_run(w: &World, principal: &str, channel: &str) -> commands::StartedRun {
    let caller = w.in_channel(principal, channel);
    let h = w
        .registry
        .handle(&caller, "@staller wait", &w.services)
        .await;
    h.run.unwrap_or_else(|| panic!("no run: {}", h.reply.text))
}

/// An agent token for `run`, signed with `secret`, expiring at `exp` (seconds).
fn agent_token(secret: &[u8], run: &str, principal: &str, exp: u64) -> String {
    dispatch::AgentTokens::new(secret)
        .unwrap()
        .mint(&dispatch::AgentClaims {
            run: run.to_owned(),
            agent: "staller".into(),
            sub: principal.to_owned(),
            exp,
        })
        .unwrap()
}

async fn status(w: &World, id: &authz_core::RunId) -> RunStatus {
    w.store.get_run(id).await.unwrap().unwrap().status
}

async fn until_finished(w: &World, id: &authz_core::RunId) -> RunStatus {
    for _ in 0..3000 {
        let s = status(w, id).await;
        if !s.is_live() {
            return s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("run {id} did not finish");
}

#[tokio::test]
async fn a_bearer_token_is_its_surfaces_actor_with_its_run_channel() {
    let w = world().await;
    let reader = bearer_caller(&w.services, Surface::Http, "reader-token-0123456789").unwrap();
    assert_eq!(reader.actor.id.as_str(), "http:reader");
    assert_eq!(reader.actor.origin.unwrap().channel_id.as_str(), "http:ops");
    let on_mcp = bearer_caller(&w.services, Surface::Mcp, "reader-token-0123456789").unwrap();
    assert_eq!(
        on_mcp.actor.id.as_str(),
        "mcp:reader",
        "each surface names its actor"
    );
    assert_eq!(on_mcp.surface, Surface::Mcp);
    let writer = bearer_caller(&w.services, Surface::Mcp, "writer-token-0123456789").unwrap();
    assert_eq!(
        writer.actor.origin.unwrap().channel_id.as_str(),
        "mcp:writer",
        "no channel: <surface>:<subject>"
    );
    assert!(bearer_caller(&w.services, Surface::Http, "reader-token-012345678X").is_none());
    assert!(bearer_caller(&w.services, Surface::Slack, "reader-token-0123456789").is_none());
    let no_map = sqlite().await;
    assert!(bearer_caller(&no_map.services, Surface::Http, "reader-token-0123456789").is_none());
}

#[tokio::test]
async fn an_agent_token_acts_for_the_runs_principal_only_while_the_run_is_live() {
    let w = world().await;
    // A Slack user's run in a private channel.
    let started = live_run(&w, "slack:UPLAIN", "slack:G0OPS").await;
    let id = started.id().clone();
    let exp = u64::try_from(store::wall_clock().micros() / 1_000_000).unwrap() + 600;
    let token = agent_token(SECRET.as_bytes(), &id.to_string(), "slack:UPLAIN", exp);
    let agent = agent_caller(&w.services, Surface::Mcp, &token)
        .await
        .unwrap();
    assert_eq!(agent.acting_in(), Some(&id), "the token names its own run");
    let caller = &agent;
    assert_eq!(caller.actor.kind, ActorKind::Agent);
    assert_eq!(caller.actor.id.as_str(), "agent:staller");
    let principal = caller.actor.on_behalf_of.as_ref().unwrap();
    assert_eq!(principal.id.as_str(), "slack:UPLAIN");
    assert_eq!(
        caller.actor.origin,
        Some(Origin {
            channel_id: "slack:G0OPS".parse().unwrap(),
            thread_key: None
        })
    );
    // Never more than the principal: a plain Slack user may not change config, so neither
    // may the agent acting for them.
    let write = Action::parse("config:write").unwrap();
    let org = Resource::ConfigScope(authz_core::ConfigTier::Org);
    assert!(!authorize(&caller.actor, &write, &org).is_allow());
    let admin_run = live_run(&w, "slack:UADMIN", "slack:C1").await;
    let admin_token = agent_token(
        SECRET.as_bytes(),
        &admin_run.id().to_string(),
        "slack:UADMIN",
        exp,
    );
    let admins_agent = agent_caller(&w.services, Surface::Mcp, &admin_token)
        .await
        .unwrap();
    // Nor, acting for an admin: what governs later runs is never an agent's to write.
    assert!(authorize(&w.caller("slack:UADMIN").actor, &write, &org).is_allow());
    assert!(!authorize(&admins_agent.actor, &write, &org).is_allow());
    let refused = w
        .say(
            &admins_agent,
            "mcp add notes https://notes.example.com/mcp --org",
        )
        .await;
    assert_eq!(refused.kind, ReplyKind::Unauthorized, "{}", refused.text);
    // Any run the agent starts is its own run's child: a repo run as much as an `ask`.
    let workspace = agents::testing::git_repository().unwrap();
    let add = format!("repo add acme/tools --path {}", workspace.path().display());
    let added = w.say(&w.caller("slack:UADMIN"), &add).await;
    assert_eq!(added.kind, ReplyKind::Ok, "{}", added.text);
    let started = w.say(&admins_agent, "repo test acme/tools").await;
    assert_eq!(started.kind, ReplyKind::Ok, "{}", started.text);
    let child: authz_core::RunId = started.data["run_id"].as_str().unwrap().parse().unwrap();
    let child = w.store.get_run(&child).await.unwrap().unwrap();
    assert_eq!(child.parent_run.as_ref(), Some(admin_run.id()));
    assert_eq!(child.channel_id.as_str(), "slack:C1");
    assert_eq!(
        child.user_id.as_str(),
        "slack:UADMIN",
        "for the agent's person"
    );

    // A token of another secret, an expired one, one naming no run: refused.
    let foreign = agent_token(
        b"another-secret-0123456789abcdef",
        &id.to_string(),
        "slack:UPLAIN",
        exp,
    );
    let expired = agent_token(SECRET.as_bytes(), &id.to_string(), "slack:UPLAIN", 1_000);
    let ghost = agent_token(
        SECRET.as_bytes(),
        "0000000000000NOSUCHRUN0000",
        "slack:UPLAIN",
        exp,
    );
    for (t, why) in [
        (foreign.as_str(), AgentTokenRefused::BadToken),
        (expired.as_str(), AgentTokenRefused::BadToken),
        ("not-a-jwt", AgentTokenRefused::BadToken),
        (ghost.as_str(), AgentTokenRefused::UnknownRun),
    ] {
        assert_eq!(
            agent_caller(&w.services, Surface::Mcp, t).await.err(),
            Some(why)
        );
    }
    // The run ends: the same token stops working (read from the store).
    let stopped = w
        .registry
        .handle(
            &w.caller("slack:UADMIN"),
            &format!("runs stop {id}"),
            &w.services,
        )
        .await;
    assert_eq!(stopped.reply.kind, ReplyKind::Ok, "{}", stopped.reply.text);
    assert_eq!(until_finished(&w, &id).await, RunStatus::Stopped);
    assert_eq!(
        agent_caller(&w.services, Surface::Mcp, &token).await.err(),
        Some(AgentTokenRefused::RunEnded)
    );
    w.services.runs.stop_here(admin_run.id());
}

/// A capability reads the status of its own run, the one run it names (a viewer reads a run's
/// status through the registry's `runs.get`, decided and audited there).
#[tokio::test]
async fn a_capability_reads_its_own_runs_status() {
    let w = world().await;
    let private = live_run(&w, "slack:UADMIN", "slack:G0OPS").await;
    let token = private.capability_token().to_owned();
    let own = Capability::open(&w.services, private.id(), &token)
        .await
        .unwrap();
    // Recorded queued, then running once its agent starts: read it once it has.
    for _ in 0..3000 {
        if status(&w, private.id()).await == RunStatus::Running {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        w.services.run_status(&own).await.unwrap(),
        Some(RunStatus::Running)
    );
    // Its end too: the status is read from the store each time.
    assert!(w.services.runs.stop_here(private.id()));
    assert_eq!(until_finished(&w, private.id()).await, RunStatus::Stopped);
    assert_eq!(
        w.services.run_status(&own).await.unwrap(),
        Some(RunStatus::Stopped)
    );
}

#[tokio::test]
async fn a_capability_opens_its_run_alone_and_nothing_else() {
    let w = world().await;
    let started = live_run(&w, "slack:UADMIN", "slack:G0OPS").await;
    let id = started.id().clone();
    let token = started.capability_token().to_owned();
    let cap = Capability::open(&w.services, &id, &token).await.unwrap();
    let run = cap.run(&w.services);
    assert_eq!(run.kind, ReplyKind::Ok);
    assert_eq!(run.data["id"], id.as_str());
    let events = cap.events(&w.services).await;
    assert_eq!(events.kind, ReplyKind::Ok);
    assert!(
        Capability::open(&w.services, &id, "wrong-token")
            .await
            .is_none()
    );
    let other = live_run(&w, "slack:UADMIN", "slack:C1").await;
    assert!(
        Capability::open(&w.services, other.id(), &token)
            .await
            .is_none(),
        "a capability opens its own run only"
    );
    assert!(
        Capability::open(
            &w.services,
            &"0000000000000NOSUCHRUN0000".parse().unwrap(),
            &token
        )
        .await
        .is_none()
    );
    let stop = cap.stop(&w.services).await;
    assert_eq!(stop.kind, ReplyKind::Ok, "{}", stop.text);
    assert_eq!(until_finished(&w, &id).await, RunStatus::Stopped);
    w.services.runs.stop_here(other.id());
}

#[tokio::test]
async fn the_live_feed_carries_only_runs_the_viewer_may_read() {
    let w = world().await;
    let fleet = w.caller("slack:UADMIN");
    let plain = w.caller("slack:UPLAIN");
    let mut admin_feed = w.services.live.subscribe(&fleet.actor);
    let mut plain_feed = w.services.live.subscribe(&plain.actor);
    let started = live_run(&w, "slack:UADMIN", "slack:G0OPS").await;
    let first = admin_feed.recv().await.unwrap();
    assert!(matches!(first, LiveUpdate::Upsert(ref r) if &r.facts.id == started.id()));
    assert_eq!(w.services.live.snapshot(&fleet.actor).len(), 1);
    assert!(w.services.live.snapshot(&plain.actor).is_empty());
    w.services.runs.stop_here(started.id());
    until_finished(&w, started.id()).await;
    assert!(
        plain_feed.try_next().is_none(),
        "a private run reached a plain user's feed"
    );
}

#[tokio::test]
async fn a_slack_event_id_is_seen_once_and_a_malformed_one_spends_nothing() {
    let w = world().await;
    assert!(
        w.services
            .first_delivery(Surface::Slack, "Ev0123ABC")
            .await
            .unwrap()
    );
    assert!(
        !w.services
            .first_delivery(Surface::Slack, "Ev0123ABC")
            .await
            .unwrap()
    );
    assert!(w.services.first_delivery(Surface::Slack, "").await.is_err());
    assert!(
        w.services
            .first_delivery(Surface::Slack, "Ev with space")
            .await
            .is_err()
    );
    assert!(
        w.services
            .first_delivery(Surface::Slack, "Ev0123ABD")
            .await
            .unwrap()
    );
    // Keyed by surface: another chat surface sent the same id has its own first delivery.
    assert!(
        w.services
            .first_delivery(Surface::Http, "Ev0123ABC")
            .await
            .unwrap()
    );
    assert!(
        !w.services
            .first_delivery(Surface::Http, "Ev0123ABC")
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn a_firing_slot_is_claimed_once_and_its_end_recorded() {
    let w = world().await;
    let name: authz_core::ScheduleName = "self-improvement".parse().unwrap();
    let slot = FiringSlot::Timer(Timestamp::from_micros(NOW));
    assert!(w.services.claim_firing(&name, &slot).await.unwrap());
    assert!(!w.services.claim_firing(&name, &slot).await.unwrap());
    assert_eq!(
        w.services.last_timer_slots().await.unwrap(),
        [(name.clone(), slot.at())]
    );
    assert!(
        w.services
            .record_firing(
                &name,
                &FiringSlot::Timer(Timestamp::from_micros(1)),
                "completed",
                None,
                None
            )
            .await
            .is_err(),
        "no claimed slot there"
    );
    w.services
        .record_firing(&name, &slot, "misconfigured", None, Some("no grants"))
        .await
        .unwrap();
    let recent = w.services.recent_firings(&name, 5).await.unwrap();
    assert_eq!(recent.len(), 1);
    assert_eq!(recent[0].status, "misconfigured");
    assert_eq!(recent[0].detail.as_deref(), Some("no grants"));
}

#[tokio::test]
async fn a_commands_answer_is_recorded_as_a_run_in_the_callers_channel() {
    let w = world().await;
    let schedule = Caller::new(
        w.caller("schedule:self-improvement")
            .actor
            .with_origin(Origin {
                channel_id: "schedule:self-improvement".parse().unwrap(),
                thread_key: None,
            }),
        Surface::Schedule,
    );
    let (reply, id) = w
        .registry
        .invoke_recorded(&schedule, "friction report --days 7", &w.services)
        .await
        .unwrap();
    assert_eq!(reply.kind, ReplyKind::Ok, "{}", reply.text);
    let run = w.store.get_run(&id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.answer.as_deref(), Some(reply.text.as_str()));
    assert_eq!(run.request, "friction report --days 7");
    assert_eq!(run.channel_id.as_str(), "schedule:self-improvement");
    assert_eq!(
        run.channel_visibility,
        authz_core::ChannelVisibility::Machine
    );
    assert_eq!(run.user_id.as_str(), "schedule:self-improvement");
    assert_eq!(run.surface, Surface::Schedule);
    // A refusal is recorded too, as the run's error.
    let (refused, id) = w
        .registry
        .invoke_recorded(&schedule, "runs list", &w.services)
        .await
        .unwrap();
    assert_eq!(refused.kind, ReplyKind::Unauthorized);
    let run = w.store.get_run(&id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.as_deref(), Some(refused.text.as_str()));
}
