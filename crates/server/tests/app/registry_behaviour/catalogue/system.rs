//! `help`, `status` and `schedule list|fire`.

use super::*;

on_both!(help_and_status, schedules);

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
    // No server holds the store: status says so, whoever's process asks.
    assert!(status.text.contains("no server"), "{}", status.text);
    assert_eq!(status.data["servers"], serde_json::json!([]));
    // A server that announced itself an hour ago and renews its lease: named, with its uptime.
    let at = |secs: u64| {
        store::Timestamp::from_micros(NOW).saturating_sub(std::time::Duration::from_secs(secs))
    };
    let srv = store::ReplicaId::parse("srv-1").unwrap();
    w.store
        .announce_server(&srv, "9.9.9", at(3600), at(2))
        .await
        .unwrap();
    let status = w.say(&w.caller("http:reader"), "status").await;
    assert!(
        status
            .text
            .contains("server srv-1 (switchboard 9.9.9), up for 1h"),
        "{}",
        status.text
    );
    assert_eq!(status.data["servers"][0]["replica"], "srv-1");
    assert_eq!(
        w.say(&w.caller("http:reader"), "status now").await.kind,
        ReplyKind::Usage
    );
    refused(&w, &w.caller("http:writer"), "status").await;
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
    w.store
        .claim_firing(&name, &slot, Timestamp::from_micros(NOW - 120_000_000))
        .await
        .unwrap();
    w.store
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
