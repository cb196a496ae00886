//! `friction report|propose`.

use super::*;

on_both!(
    friction_report_counts_the_visible_runs,
    friction_propose_records,
);

async fn friction_report_counts_the_visible_runs(w: World) {
    let s = &w.store;
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
