//! Every command: its happy path, its refusal (right reply, no reason, an audit line) and its
//! bad input — on SQLite, and on Postgres when `SWITCHBOARD_TEST_POSTGRES_URL` is set.

use authz_core::ChannelVisibility as V;
use commands::ReplyKind;
use store::{Finish, FiringSlot, Friction, NewMemory, RunStatus, Timestamp};

use crate::registry_behaviour::harness::*;

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(crate::registry_behaviour::harness::sqlite().await).await })* }
        mod postgres { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(crate::registry_behaviour::harness::postgres().await).await })* }
    };
}

on_both!(
    help_and_status,
    runs_list_pages_what_each_caller_may_read,
    runs_point_reads_and_stop,
    friction_report_counts_the_visible_runs,
    friction_propose_records,
    config_get_and_set_on_the_tiers,
    repos_and_their_restriction,
    memory_list_and_forget,
    mcp_servers_on_channel_and_org,
    schedules,
);

/// A 🚫 with no reason in it, and the reason on a fresh audit line.
async fn refused(w: &World, caller: &commands::Caller, text: &str) {
    let before = w.audit.lines().len();
    let r = w.say(caller, text).await;
    assert_eq!(r.kind, ReplyKind::Unauthorized, "{text}: {r:?}");
    assert!(r.text.starts_with("🚫"), "{}", r.text);
    let lines = w.audit.lines();
    assert_eq!(
        lines.len(),
        before + 1,
        "{text}: one audit line per refusal"
    );
    let line = &lines[before];
    assert_eq!(line.actor, caller.actor.id.as_str());
    for leak in [line.reason, "grant", "member", "restricted"] {
        assert!(
            !r.text.contains(leak) && !r.data.to_string().contains(leak),
            "{text}: the reply carries `{leak}`: {}",
            r.text
        );
    }
}

async fn help_and_status(w: World) {
    let help = w.say(&w.caller("slack:UPLAIN"), "help").await;
    assert_eq!(help.kind, ReplyKind::Ok);
    assert!(
        help.text.contains("friction report") && help.text.contains("config set"),
        "{}",
        help.text
    );
    assert!(
        !help.text.contains("runs list"),
        "a plain Slack user holds no runs:read: {}",
        help.text
    );
    let token_help = w.say(&w.caller("http:reader"), "help").await;
    assert!(
        token_help.text.contains("runs list") && !token_help.text.contains("config set"),
        "{}",
        token_help.text
    );
    refused(&w, &w.caller("http:dispatch"), "help").await;

    w.run("slack:C1", "slack:UPLAIN", V::Public, 1).await;
    let status = w.say(&w.caller("http:reader"), "status").await;
    assert_eq!(status.kind, ReplyKind::Ok);
    assert!(
        status.text.contains("live runs you can see: 1"),
        "{}",
        status.text
    );
    assert!(status.text.contains("up since 1m ago"), "{}", status.text);
    assert_eq!(
        w.say(&w.caller("http:reader"), "status now").await.kind,
        ReplyKind::Usage
    );
    refused(&w, &w.caller("http:writer"), "status").await;
}

async fn runs_list_pages_what_each_caller_may_read(w: World) {
    let public = w.run("slack:C1", "slack:UPLAIN", V::Public, 50).await;
    let private = w.run("slack:G0OPS", "slack:UADMIN", V::Private, 40).await;
    let dm = w.run("slack:D1", "slack:UREPO", V::Dm, 30).await;
    let ops = w.run("http:ops", "http:ops-bot", V::Machine, 20).await;
    let billing = w
        .run("http:billing", "http:billing-bot", V::Machine, 10)
        .await;
    let ids = |r: &commands::Reply| -> Vec<String> {
        r.data["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = w
        .say(&w.caller("slack:UADMIN"), "runs list --status all")
        .await;
    assert_eq!(
        ids(&all),
        [&billing, &ops, &dm, &private, &public].map(|r| r.id.to_string())
    );
    // An every-read token with no channel grant: public runs only (its token channel grants nothing).
    let reader = w
        .say(&w.caller("http:reader"), "runs list --status all")
        .await;
    assert_eq!(ids(&reader), vec![public.id.to_string()]);
    // The operator: its channels and the public runs.
    let operator = w
        .say(&w.caller("access:operator"), "runs list --status all")
        .await;
    assert_eq!(
        ids(&operator),
        [&ops, &private, &public].map(|r| r.id.to_string())
    );
    // Paging: two at a time, following the cursor.
    let first = w
        .say(
            &w.caller("slack:UADMIN"),
            "runs list --status all --limit 2",
        )
        .await;
    let next = first.data["next"].as_str().unwrap().to_owned();
    assert!(first.text.contains(&format!("runs list --before {next}")));
    let second = w
        .say(
            &w.caller("slack:UADMIN"),
            &format!("runs list --status all --limit 2 --before {next}"),
        )
        .await;
    assert_eq!(ids(&second), [&dm, &private].map(|r| r.id.to_string()));
    assert!(
        first.text.contains("STATUS") && first.text.contains("queued"),
        "{}",
        first.text
    );
    // An agent holds what its principal holds, never more.
    refused(&w, &w.agent_for("slack:UPLAIN"), "runs list").await;
    assert_eq!(
        ids(&w
            .say(&w.agent_for("slack:UADMIN"), "runs list --status all")
            .await)
        .len(),
        5
    );
    // Refusal and bad input.
    refused(&w, &w.caller("slack:UPLAIN"), "runs list").await;
    for bad in [
        "runs list --limit 0",
        "runs list --status sideways",
        "runs list --before not-a-cursor",
    ] {
        assert_eq!(
            w.say(&w.caller("slack:UADMIN"), bad).await.kind,
            ReplyKind::Usage,
            "{bad}"
        );
    }
}

async fn runs_point_reads_and_stop(w: World) {
    let private = w.run("slack:G0OPS", "slack:UADMIN", V::Private, 10).await;
    let s = &w.services.store;
    s.append_event(
        &private.id,
        Timestamp::from_micros(NOW),
        "line",
        "compiling",
    )
    .await
    .unwrap();
    s.add_friction(Friction {
        run_id: private.id.clone(),
        at: Timestamp::from_micros(NOW),
        kind: "timeout".into(),
        detail: "tests took 600s".into(),
    })
    .await
    .unwrap();
    let op = w.caller("access:operator");
    let get = w.say(&op, &format!("runs get {}", private.id)).await;
    assert_eq!(get.kind, ReplyKind::Ok);
    assert!(
        get.text.contains("channel  slack:G0OPS (private)")
            && get.text.contains("request in slack:G0OPS"),
        "{}",
        get.text
    );
    assert!(
        w.say(&op, &format!("runs events {}", private.id))
            .await
            .text
            .contains("compiling")
    );
    assert!(
        w.say(&op, &format!("runs friction {}", private.id))
            .await
            .text
            .contains("timeout: tests took 600s")
    );
    // Stop: a live run of no process here is asked through the store (its owner stops it);
    // a finished one is a conflict; a denied one is 404.
    let stop = w.say(&op, &format!("runs stop {}", private.id)).await;
    assert_eq!(
        (stop.kind, stop.text.as_str()),
        (
            ReplyKind::Ok,
            format!(
                "stopping run {}: asked its process (no owner recorded), which stops it within 2 s",
                private.id
            )
            .as_str()
        )
    );
    let asked = s.get_run(&private.id).await.unwrap().unwrap();
    assert_eq!(asked.stop_requested_at, Some(Timestamp::from_micros(NOW)));
    assert!(asked.status.is_live(), "asked, not yet stopped");
    s.finish_run(
        &private.id,
        Finish {
            status: RunStatus::Completed,
            answer: Some("done".into()),
            error: None,
            at: Timestamp::from_micros(NOW),
        },
    )
    .await
    .unwrap();
    let stop = w.say(&op, &format!("runs stop {}", private.id)).await;
    assert_eq!(
        (stop.kind, stop.text.as_str()),
        (ReplyKind::Conflict, "that run already finished (completed)")
    );
    let reader = w.caller("http:reader");
    for verb in ["get", "events", "friction"] {
        assert_eq!(
            w.say(&reader, &format!("runs {verb} {}", private.id))
                .await
                .kind,
            ReplyKind::NotFound,
            "{verb}"
        );
    }
    // The writer holds runs:write but no channel: the private run is not found for it.
    assert_eq!(
        w.say(
            &w.caller("http:writer"),
            &format!("runs stop {}", private.id)
        )
        .await
        .kind,
        ReplyKind::NotFound
    );
    // The run's own user reads it (is_self) even with no channel grant.
    let own = w.run("slack:D9", "http:reader", V::Dm, 1).await;
    assert_eq!(
        w.say(&reader, &format!("runs get {}", own.id)).await.kind,
        ReplyKind::Ok
    );
    assert_eq!(w.say(&op, "runs get").await.kind, ReplyKind::Usage);
}

async fn friction_report_counts_the_visible_runs(w: World) {
    let s = &w.services.store;
    let public = w.run("slack:C1", "slack:UREPO", V::Public, 3600).await;
    let private = w.run("slack:G0OPS", "slack:UADMIN", V::Private, 3600).await;
    let billing = w
        .run("http:billing", "http:billing-bot", V::Machine, 3600)
        .await;
    let _old = w
        .run("slack:C1", "slack:UREPO", V::Public, 30 * 86_400)
        .await;
    for (run, kind) in [
        (&public, "tool error"),
        (&private, "timeout"),
        (&billing, "tool error"),
        (&billing, "retry"),
    ] {
        s.add_friction(Friction {
            run_id: run.id.clone(),
            at: Timestamp::from_micros(NOW - 1_000_000),
            kind: kind.into(),
            detail: "d".into(),
        })
        .await
        .unwrap();
    }
    let plain = w.say(&w.caller("slack:UPLAIN"), "friction report").await;
    assert_eq!(
        plain.data["runs_analysed"], 1,
        "a plain Slack user: the public run only: {}",
        plain.text
    );
    assert!(
        plain
            .text
            .starts_with("🔍 1 runs analysed over the last 7 days; 1 friction entries."),
        "{}",
        plain.text
    );
    let operator = w.say(&w.caller("access:operator"), "friction report").await;
    assert_eq!(
        operator.data["runs_analysed"], 2,
        "its channel and the public run"
    );
    let fleet = w
        .say(
            &w.caller("schedule:self-improvement"),
            "friction report --days 30",
        )
        .await;
    assert_eq!(
        fleet.data["runs_analysed"], 4,
        "the self-improvement schedule sees the fleet"
    );
    assert!(
        fleet.text.contains("Top friction: tool error ×2"),
        "{}",
        fleet.text
    );
    assert!(fleet.text.contains("http:billing ×2"), "{}", fleet.text);
    refused(&w, &w.caller("http:dispatch"), "friction report").await;
    assert_eq!(
        w.say(&w.caller("slack:UPLAIN"), "friction report --days 0")
            .await
            .kind,
        ReplyKind::Usage
    );
}

async fn friction_propose_records(w: World) {
    let r = w
        .say(
            &w.caller("http:writer"),
            "friction propose retry the flaky deploy step twice",
        )
        .await;
    assert_eq!(r.kind, ReplyKind::Ok);
    assert_eq!(r.data["text"], "retry the flaky deploy step twice");
    let stored = w
        .services
        .store
        .list_config(&authz_core::ConfigTier::Org, "friction.proposal.")
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].updated_by.as_str(), "http:writer");
    refused(&w, &w.caller("slack:UPLAIN"), "friction propose x").await;
    assert_eq!(
        w.say(&w.caller("http:writer"), "friction propose")
            .await
            .kind,
        ReplyKind::Usage
    );
}

async fn config_get_and_set_on_the_tiers(w: World) {
    let plain_here = w.in_channel("slack:UPLAIN", "slack:C1");
    // A person always owns their own scope; the channel tier needs config:write.
    assert_eq!(
        w.say(&plain_here, "config set agent reviewer --user")
            .await
            .kind,
        ReplyKind::Ok
    );
    let denied = w.say(&plain_here, "config set agent coding").await;
    assert_eq!(
        denied.text,
        "🚫 You can't change the config of slack:C1. Ask <@UADMIN>."
    );
    assert_eq!(w.audit.lines().last().unwrap().reason, "missing-grant");
    let config_writer = w.in_channel("slack:UCONFIG", "slack:C1");
    assert_eq!(
        w.say(&config_writer, "config set agent coding").await.kind,
        ReplyKind::Ok,
        "the origin channel is the default tier"
    );
    assert_eq!(
        w.say(&config_writer, "config set greeting \"hello there\" --org")
            .await
            .kind,
        ReplyKind::Ok
    );
    let mine = w.say(&plain_here, "config get agent").await;
    assert_eq!(mine.text, "agent = reviewer (from user slack:UPLAIN)");
    let channel = w
        .say(&w.in_channel("slack:UREPO", "slack:C1"), "config get agent")
        .await;
    assert_eq!(channel.text, "agent = coding (from channel slack:C1)");
    assert_eq!(
        w.say(&plain_here, "config get greeting").await.text,
        "greeting = hello there (from the org)"
    );
    assert_eq!(
        w.say(&plain_here, "config get missing --org").await.text,
        "`missing` is not set on the org"
    );
    refused(&w, &w.caller("http:reader"), "config set agent x --org").await;
    let nobody_in_cli = w.caller("slack:UCONFIG");
    assert!(
        w.say(&nobody_in_cli, "config set agent x")
            .await
            .text
            .contains("needs a tier"),
        "no origin: a tier must be named"
    );
    for bad in [
        "config get Bad-Key",
        "config get mcp.github",
        "config set agent x --org --user",
        "config set agent x --channel C1",
    ] {
        assert_eq!(
            w.say(&config_writer, bad).await.kind,
            ReplyKind::Usage,
            "{bad}"
        );
    }
}

async fn repos_and_their_restriction(w: World) {
    let repo_writer = w.caller("slack:UREPO");
    assert_eq!(
        w.say(
            &repo_writer,
            "repo add acme/web --url https://git.example/acme/web.git"
        )
        .await
        .kind,
        ReplyKind::Ok
    );
    assert_eq!(
        w.say(&repo_writer, "repo add Acme/Payments --path /srv/payments")
            .await
            .kind,
        ReplyKind::Ok
    );
    let listed = w.say(&w.caller("slack:UPLAIN"), "repo list").await;
    assert!(
        listed.text.contains("✓ acme/web") && listed.text.contains("acme/payments"),
        "{}",
        listed.text
    );
    refused(&w, &w.caller("slack:UPLAIN"), "repo add acme/x").await;
    assert_eq!(
        w.say(&repo_writer, "repo add not-a-slug").await.kind,
        ReplyKind::Usage
    );
    assert_eq!(
        w.say(&repo_writer, "repo add acme/x --path a --url b")
            .await
            .kind,
        ReplyKind::Usage
    );
    // repo test: admitted on the coding agent (restricted here: only the admin may run it),
    // which then runs in the repo's workspace, recorded in the channel asked from.
    let workspace = agents::testing::git_repository().unwrap();
    let add = format!("repo add acme/tools --path {}", workspace.path().display());
    assert_eq!(w.say(&repo_writer, &add).await.kind, ReplyKind::Ok);
    refused(&w, &w.caller("slack:UPLAIN"), "repo test acme/tools").await;
    let admin = w.in_channel("slack:UADMIN", "slack:C1");
    let started = w.say(&admin, "repo test acme/tools").await;
    assert_eq!(started.kind, ReplyKind::Ok, "{}", started.text);
    assert!(
        started.text.contains("with agent `coding` in slack:C1"),
        "{}",
        started.text
    );
    let id: authz_core::RunId = started.data["run_id"].as_str().unwrap().parse().unwrap();
    let run = wait_finished(&w, &id).await;
    assert_eq!(run.repo.unwrap().as_str(), "acme/tools");
    assert_eq!(run.status, RunStatus::Completed, "{:?}", run.error);
    let missing = w.say(&admin, "repo build acme/web").await;
    assert_eq!(
        missing.kind,
        ReplyKind::Usage,
        "git cannot reach the URL here: {}",
        missing.text
    );
    assert_eq!(
        w.say(&repo_writer, "repo remove acme/web").await.text,
        "removed repo acme/web"
    );
    assert_eq!(
        w.say(&repo_writer, "repo remove acme/web").await.text,
        "repo acme/web is not configured"
    );
}

/// The run's final record (the dispatcher finishes echo runs at once).
async fn wait_finished(w: &World, id: &authz_core::RunId) -> store::RunRecord {
    for _ in 0..200 {
        let run = w.services.store.get_run(id).await.unwrap().unwrap();
        if !run.status.is_live() {
            return run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("run {id} did not finish");
}

async fn memory_list_and_forget(w: World) {
    let s = &w.services.store;
    let add = |scope: authz_core::ScopeKey, text: &str| NewMemory {
        scope,
        text: text.into(),
        supersedes: None,
        source_run: None,
        created_at: Timestamp::from_micros(NOW),
    };
    let mine = s
        .add_memory(add(
            authz_core::ScopeKey::User("slack:UPLAIN".parse().unwrap()),
            "prefers terse answers",
        ))
        .await
        .unwrap();
    let org = s
        .add_memory(add(authz_core::ScopeKey::Org, "standup is at 10"))
        .await
        .unwrap();
    s.add_memory(add(
        authz_core::ScopeKey::Channel("slack:C1".parse().unwrap()),
        "deploys on friday",
    ))
    .await
    .unwrap();
    let plain = w.in_channel("slack:UPLAIN", "slack:C1");
    let listed = w.say(&plain, "memory list").await;
    assert_eq!(
        listed.data["records"].as_array().unwrap().len(),
        3,
        "{}",
        listed.text
    );
    let org_only = w.say(&plain, "memory list --scope org").await;
    assert_eq!(org_only.data["records"].as_array().unwrap().len(), 1);
    // A shared record needs repo:write: refused as not_found, identical to a missing id.
    let denied = w.say(&plain, &format!("memory forget {}", org.id)).await;
    assert_eq!(
        denied,
        w.say(&plain, "memory forget 00000000000000NOSUCHRECORD")
            .await
    );
    assert_eq!(denied.text, "memory record not found");
    assert_eq!(
        w.say(&plain, &format!("memory forget {}", mine.id))
            .await
            .kind,
        ReplyKind::Ok,
        "own user scope"
    );
    assert_eq!(
        w.say(
            &w.caller("slack:UREPO"),
            &format!("memory forget {}", org.id)
        )
        .await
        .kind,
        ReplyKind::Ok
    );
    assert_eq!(
        w.say(&plain, &format!("memory forget {}", mine.id))
            .await
            .text,
        "memory record not found",
        "already forgotten"
    );
    assert_eq!(
        w.say(&plain, "memory list --scope team").await.kind,
        ReplyKind::Usage
    );
    // A repo's scope is listed only for a repo the caller may use: a restricted one's only
    // to those it is granted to.
    let vault = "acme/vault".parse().unwrap();
    s.add_memory(add(
        authz_core::ScopeKey::Repo(vault),
        "the vault key rotates monthly",
    ))
    .await
    .unwrap();
    s.add_memory(add(
        authz_core::ScopeKey::Repo("acme/web".parse().unwrap()),
        "web tests need docker",
    ))
    .await
    .unwrap();
    refused(&w, &plain, "memory list --repo acme/vault --scope repo").await;
    let admin = w
        .say(
            &w.caller("slack:UADMIN"),
            "memory list --repo acme/vault --scope repo",
        )
        .await;
    assert_eq!(
        admin.data["records"][0]["text"], "the vault key rotates monthly",
        "{}",
        admin.text
    );
    let web = w
        .say(&plain, "memory list --repo acme/web --scope repo")
        .await;
    assert_eq!(
        web.data["records"][0]["text"], "web tests need docker",
        "{}",
        web.text
    );
    assert_eq!(
        w.say(&w.caller("http:dispatch"), "memory forget x")
            .await
            .kind,
        ReplyKind::NotFound
    );
}

async fn mcp_servers_on_channel_and_org(w: World) {
    let plain_here = w.in_channel("slack:UPLAIN", "slack:C1");
    refused(&w, &plain_here, "mcp add github https://mcp.example/gh").await;
    let cw = w.in_channel("slack:UCONFIG", "slack:C1");
    assert_eq!(
        w.say(&cw, "mcp add github https://mcp.example/gh")
            .await
            .kind,
        ReplyKind::Ok,
        "config:write holders manage a channel's servers"
    );
    refused(&w, &cw, "mcp add linear https://mcp.example/linear --org").await;
    let rw = w.caller("slack:UREPO");
    assert_eq!(
        w.say(&rw, "mcp add linear https://mcp.example/linear --org")
            .await
            .kind,
        ReplyKind::Ok,
        "repo:write holders manage the org's"
    );
    let token = w.caller("http:writer");
    assert_eq!(
        w.say(&token, "mcp add sentry https://mcp.example/sentry --org")
            .await
            .kind,
        ReplyKind::Ok,
        "a service with mcp:write"
    );
    let listed = w.say(&plain_here, "mcp list").await;
    assert_eq!(
        listed.data["servers"].as_array().unwrap().len(),
        3,
        "{}",
        listed.text
    );
    assert!(
        w.say(&w.caller("slack:UPLAIN"), "mcp list")
            .await
            .text
            .contains("linear"),
        "no origin: the org's only"
    );
    assert_eq!(w.say(&cw, "mcp remove github").await.kind, ReplyKind::Ok);
    for bad in [
        "mcp add Bad https://x",
        "mcp add x ftp://x",
        "mcp add x",
        "mcp remove x --org --channel slack:C1",
    ] {
        assert_eq!(w.say(&cw, bad).await.kind, ReplyKind::Usage, "{bad}");
    }
}

async fn schedules(w: World) {
    let listed = w.say(&w.caller("slack:UPLAIN"), "schedule list").await;
    assert!(
        listed.text.contains("self-improvement")
            && listed.text.contains("0 9 * * MON (UTC)")
            && listed.text.contains("never"),
        "{}",
        listed.text
    );
    // The next slot is computed in the schedule's zone: the Monday 09:00 after now.
    let next = &listed.data["schedules"][0]["next"];
    assert!(
        next["local"].as_str().unwrap().ends_with("09:00 UTC"),
        "{next}"
    );
    assert!(next["at"].as_i64().unwrap() > NOW);
    let name = "self-improvement".parse().unwrap();
    let slot = FiringSlot::Timer(Timestamp::from_micros(1));
    w.services
        .store
        .claim_firing(&name, &slot, Timestamp::from_micros(NOW - 120_000_000))
        .await
        .unwrap();
    w.services
        .store
        .record_firing(&name, &slot, "completed", None, None)
        .await
        .unwrap();
    assert!(
        w.say(&w.caller("slack:UPLAIN"), "schedule list")
            .await
            .text
            .contains("completed 2m ago")
    );
    refused(
        &w,
        &w.caller("slack:UPLAIN"),
        "schedule fire self-improvement",
    )
    .await;
    let fired = w
        .say(&w.caller("slack:UADMIN"), "schedule fire self-improvement")
        .await;
    assert_eq!(fired.kind, ReplyKind::Ok, "{}", fired.text);
    let run = fired.data["run_id"].as_str().unwrap().to_owned();
    assert_eq!(fired.data["status"], "completed");
    assert!(
        !fired.text.contains("runs analysed"),
        "the reply is the run id and status, never the firing's output: {}",
        fired.text
    );
    let listed = w.say(&w.caller("slack:UADMIN"), "schedule list").await;
    assert!(
        listed
            .text
            .contains(&format!("completed 0s ago, manual (run {run})")),
        "{}",
        listed.text
    );
    assert_eq!(
        w.say(&w.caller("slack:UADMIN"), "schedule fire nightly")
            .await
            .kind,
        ReplyKind::Usage
    );
}
