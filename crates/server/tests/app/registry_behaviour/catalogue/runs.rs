//! `runs list|get|events|friction|diff|stop`.

use super::*;

on_both!(
    runs_list_pages_what_each_caller_may_read,
    runs_point_reads_and_stop,
    runs_diff_answers_by_the_runs_state_and_refuses_bad_input,
);

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
    let s = &w.store;
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

/// `runs diff` before a run ends, after one that recorded nothing, for a run in no repo, and
/// its bad input (each refused with the usage, nothing read).
async fn runs_diff_answers_by_the_runs_state_and_refuses_bad_input(w: World) {
    let s = &w.store;
    let in_repo = |at: i64| {
        let mut n = store::NewRun::fixture(
            "slack:G0OPS".parse().unwrap(),
            "slack:UADMIN".parse().unwrap(),
            V::Private,
            Timestamp::from_micros(NOW - at * 1_000_000),
        );
        n.repo = Some("acme/web".parse().unwrap());
        n
    };
    let op = w.caller("access:operator");
    let live = s.create_run(in_repo(5)).await.unwrap();
    let said = w.say(&op, &format!("runs diff {}", live.id)).await;
    assert_eq!(
        (said.kind, said.text.as_str()),
        (
            ReplyKind::Conflict,
            "the run is still going; what it changed is kept, and shown here, when it ends"
        )
    );
    s.finish_run(
        &live.id,
        Finish {
            status: RunStatus::Failed,
            answer: None,
            error: Some("it failed before its workspace was made".into()),
            at: Timestamp::from_micros(NOW),
        },
    )
    .await
    .unwrap();
    let said = w.say(&op, &format!("runs diff {}", live.id)).await;
    assert_eq!(said.kind, ReplyKind::Conflict);
    assert!(
        said.text
            .contains(&format!("its events say why (`runs events {}`", live.id)),
        "{}",
        said.text
    );
    let plain = w.run("slack:G0OPS", "slack:UADMIN", V::Private, 3).await;
    let said = w.say(&op, &format!("runs diff {}", plain.id)).await;
    assert_eq!(said.kind, ReplyKind::Ok);
    assert!(said.text.contains("worked in no repo"), "{}", said.text);
    assert_eq!(said.data["files"], serde_json::json!([]));
    for bad in [
        format!("runs diff {} --limit 0", plain.id),
        format!("runs diff {} --limit 20001", plain.id),
        format!("runs diff {} --limit many", plain.id),
        format!("runs diff {} --limit", plain.id),
        format!("runs diff {} --bogus", plain.id),
        "runs diff".to_owned(),
    ] {
        let said = w.say(&op, &bad).await;
        assert_eq!(said.kind, ReplyKind::Usage, "{bad}: {said:?}");
        assert!(
            said.text.contains("usage: runs diff"),
            "{bad}: {}",
            said.text
        );
    }
    for missing in [
        "runs diff ../../etc/passwd",
        "runs diff 01JZZZZZZZZZZZZZZZZZZZZZZZ",
    ] {
        assert_eq!(
            w.say(&op, missing).await.kind,
            ReplyKind::NotFound,
            "{missing}"
        );
    }
}
