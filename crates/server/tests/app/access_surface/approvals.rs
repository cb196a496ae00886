//! Tool calls waiting for a person, answered on the run's page: by whom, and across replicas.

use super::*;

/// The writer's model: it asks to write `<b>hi</b>` (9 bytes) in its workspace.
async fn writing_model() -> String {
    test_support::model::writing_model("<b>hi</b>").await
}

/// The run page at `path` once the writer's ask reached it (its form shown).
async fn asking_page(h: &Harness, path: &str) -> Answer {
    let mut page = h.get(path, None).await;
    for _ in 0..200 {
        if page.body.contains("Waiting for your answer") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        page = h.get(path, None).await;
    }
    assert!(
        page.body
            .contains("The agent asks to <code>fs.write</code>"),
        "{}",
        page.body
    );
    page
}

/// The form's action on a run page: `/runs/<id>/approvals/<approval>?token=…`.
fn approval_action(page: &str) -> Option<String> {
    let start = page.find("/approvals/")?;
    let from = page[..start].rfind("action=\"")? + "action=\"".len();
    let end = from + page[from..].find('"')?;
    Some(page[from..end].replace("&amp;", "&"))
}

/// A tool call waiting for a person under `serve` is answered on the run's page: only by its
/// principal (here, through the capability link of the person who asked), same-origin, once;
/// the agent reads the answer and the run finishes with it.
#[tokio::test]
async fn the_run_page_answers_a_tool_call_waiting_for_its_person() {
    for (answer, want) in [
        ("approve", "tool said: wrote 9 bytes to "),
        (
            "deny",
            "tool said: refused: fs.write needs a person's approval: refused",
        ),
    ] {
        let h = start(Options {
            model_url: writing_model().await,
            ..Options::default()
        })
        .await;
        let (run_id, link) = h
            .person_asks("slack:UWRITER", "slack:C1", "@writer take notes")
            .await;
        let id = run_id.to_string();
        let path = link.trim_start_matches(&h.http.base).to_owned();
        let page = asking_page(&h, &path).await;
        assert!(
            page.body.contains("&lt;b&gt;hi&lt;/b&gt;"),
            "the model's text is escaped"
        );
        let action = approval_action(&page.body).unwrap();
        // Another signed-in person who may read the run sees no form, and cannot answer.
        let fleet = token_for("fleet");
        let theirs = h.get(&format!("/runs/{id}"), Some(&fleet)).await;
        assert_eq!(theirs.status, 200);
        assert!(
            !theirs.body.contains("Waiting for your answer"),
            "{}",
            theirs.body
        );
        let by_token = action.split('?').next().unwrap();
        let same_origin = [("sec-fetch-site", "same-origin")];
        let refused = h
            .post(by_token, Some(&fleet), &same_origin, "answer=approve")
            .await;
        assert_eq!(refused.status, 403, "{}", refused.body);
        // Cross-site and malformed answers change nothing.
        let cross = h
            .post(
                &action,
                None,
                &[("sec-fetch-site", "cross-site")],
                "answer=approve",
            )
            .await;
        assert_eq!(cross.status, 403);
        let malformed = h.post(&action, None, &same_origin, "answer=maybe").await;
        assert_eq!(malformed.status, 400);
        // The principal's answer (through the capability link) counts, once.
        let body = format!("answer={answer}");
        let answered = h.post(&action, None, &same_origin, &body).await;
        assert_eq!(answered.status, 303, "{}", answered.body);
        // A second answer never counts: 409 while the run is live (answered already), 410 once
        // the answer let it finish (the link opens only a live run); which one is a race.
        let again = h.post(&action, None, &same_origin, &body).await;
        assert!(
            matches!(again.status, 409 | 410),
            "{}: {}",
            again.status,
            again.body
        );
        wait_status(&h, &run_id, RunStatus::Completed).await;
        let run = h.store.get_run(&run_id).await.unwrap().unwrap();
        assert!(
            run.answer.as_deref().unwrap_or_default().starts_with(want),
            "{:?}",
            run.answer
        );
        h.shutdown.cancel();
    }
}

/// A run a machine asked for (an ingress token) has nobody to ask: its agent's ask is
/// refused at once, not after the approval timeout, and the run goes on with the refusal.
#[tokio::test]
async fn a_machines_run_has_nobody_to_ask_and_its_link_answers_nothing() {
    let h = start(Options {
        model_url: writing_model().await,
        ..Options::default()
    })
    .await;
    let begun = std::time::Instant::now();
    let waited = h.ingress("/ingress?wait=30", "@writer take notes").await;
    assert_eq!(waited["status"], "completed", "{waited}");
    assert!(
        waited["answer"]
            .as_str()
            .unwrap()
            .starts_with("tool said: refused: fs.write needs a person's approval: nobody to ask"),
        "{waited}"
    );
    assert!(begun.elapsed() < Duration::from_secs(20), "the ask waited");

    // A link made for a machine opens the run and stops it, and answers no ask, even one a
    // person's run has waiting; the same link made for a person answers it.
    for (token, counts) in [
        ("sbm_machine-link-0123456789", false),
        ("sbp_person-link-0123456789", true),
    ] {
        let run = h.stored_run_opened_by(Place::Public, token).await;
        let ask = store::ApprovalRecord {
            id: format!("ask-{}", &token[..3]),
            run_id: run.id.clone(),
            principal: Some(ActorId::parse("slack:U1").unwrap()),
            action: "fs.write".into(),
            tool: "write_file".into(),
            arguments: "{}".into(),
            state: store::ApprovalState::Open,
            asked_at: store::wall_clock(),
        };
        h.store.open_approval(&ask).await.unwrap();
        let page = h
            .get(&format!("/runs/{}?token={token}", run.id), None)
            .await;
        assert_eq!(page.status, 200, "{}", page.body);
        assert_eq!(
            page.body.contains("Waiting for your answer"),
            counts,
            "{}",
            page.body
        );
        let answered = h
            .post(
                &format!("/runs/{}/approvals/{}?token={token}", run.id, ask.id),
                None,
                &[("sec-fetch-site", "same-origin")],
                "answer=approve",
            )
            .await;
        let want = if counts { 303 } else { 403 };
        assert_eq!(answered.status, want, "{token}: {}", answered.body);
        let state = h.store.approval_state(&ask.id).await.unwrap();
        let want = if counts {
            store::ApprovalState::Approved
        } else {
            store::ApprovalState::Open
        };
        assert_eq!(state, Some(want), "{token}");
    }
}

/// A refusal's log line names no run: a machine's link answering, and a viewer who is not the
/// run's principal answering, are each one warning with a reason token and no run id.
#[tokio::test]
async fn a_refused_answers_log_line_names_no_run() {
    let buf = test_support::log::CapturedLog::default();
    // A current-thread runtime: the server's tasks log on this thread.
    let _guard = buf.install();
    let h = start(Options::default()).await;
    let mut ids = Vec::new();
    for (token, answerer) in [
        ("sbm_machine-link-0123456789", None),
        ("sbp_person-link-0123456789", Some(token_for("bob"))),
    ] {
        let run = h.stored_run_opened_by(Place::Public, token).await;
        let ask = store::ApprovalRecord {
            id: format!("ask-{}", &token[..3]),
            run_id: run.id.clone(),
            principal: Some(ActorId::parse("access:alice").unwrap()),
            action: "fs.write".into(),
            tool: "write_file".into(),
            arguments: "{}".into(),
            state: store::ApprovalState::Open,
            asked_at: store::wall_clock(),
        };
        h.store.open_approval(&ask).await.unwrap();
        let path = match &answerer {
            None => format!("/runs/{}/approvals/{}?token={token}", run.id, ask.id),
            Some(_) => format!("/runs/{}/approvals/{}", run.id, ask.id),
        };
        let answered = h
            .post(
                &path,
                answerer.as_deref(),
                &[("sec-fetch-site", "same-origin")],
                "answer=approve",
            )
            .await;
        assert_eq!(answered.status, 403, "{path}: {}", answered.body);
        ids.push(run.id.to_string());
    }
    let out = buf.text();
    for reason in ["machine-link", "not-the-principal"] {
        let line = out
            .lines()
            .find(|l| l.contains(reason))
            .unwrap_or_else(|| panic!("no {reason} line in {out}"));
        for id in &ids {
            assert!(!line.contains(id.as_str()), "{line}");
        }
    }
}

/// Two replicas on one Postgres database: the run asks on the replica it is live on, and its
/// page, served by the other replica, shows the ask and takes the answer, which reaches the
/// agent. (Behind a load balancer, either replica may get the page and the answer.)
#[tokio::test]
async fn a_tool_call_is_answered_through_another_replica_on_postgres() {
    let store = test_support::postgres::store_section("approvals");
    let model_url = writing_model().await;
    let running = start(Options {
        model_url: model_url.clone(),
        store: Some(store.clone()),
        replica: "replica-a",
        ..Options::default()
    })
    .await;
    let answering = start(Options {
        model_url,
        store: Some(store),
        replica: "replica-b",
        ..Options::default()
    })
    .await;
    let (run_id, link) = running
        .person_asks("slack:UWRITER", "slack:C1", "@writer take notes")
        .await;
    let id = run_id.to_string();
    // The same capability link, on the other replica.
    let path = link.trim_start_matches(&running.http.base).to_owned();
    let page = asking_page(&answering, &path).await;
    let action = approval_action(&page.body).unwrap();
    let answered = answering
        .post(
            &action,
            None,
            &[("sec-fetch-site", "same-origin")],
            "answer=approve",
        )
        .await;
    assert_eq!(answered.status, 303, "{}", answered.body);
    assert_eq!(run_id.to_string(), id);
    wait_status(&running, &run_id, RunStatus::Completed).await;
    let run = running.store.get_run(&run_id).await.unwrap().unwrap();
    assert!(
        run.answer
            .as_deref()
            .unwrap_or_default()
            .starts_with("tool said: wrote 9 bytes to "),
        "{:?}",
        run.answer
    );
    running.shutdown.cancel();
    answering.shutdown.cancel();
}
