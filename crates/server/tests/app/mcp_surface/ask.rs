//! `ask`: its repo, its run, its wait, and how the wait ends (cancelled, left, with progress).

use super::*;

/// `ask` names the repo its run works in; a repo the caller may not use reads exactly as one
/// that is not configured.
#[tokio::test]
async fn ask_names_its_repo_and_an_unusable_one_reads_as_missing() {
    let s = start(Some(token_map()), "").await;
    let repo = tempfile::tempdir().unwrap();
    agents::testing::init_repository(repo.path()).unwrap();
    for slug in ["acme/web", "acme/secret"] {
        store::repos::set(
            s.store.as_ref(),
            &slug.parse().unwrap(),
            &store::repos::RepoSource::Path(repo.path().display().to_string()),
            &authz_core::ActorId::cli_local(),
            store::wall_clock(),
        )
        .await
        .unwrap();
    }
    let ops = s.client(OPSBOT).await;
    let started = call(
        &ops,
        "ask",
        json!({"request": "hello", "repo": "Acme/Web", "wait": true}),
    )
    .await;
    assert_eq!(started.is_error, Some(false), "{}", text(&started));
    let id = started.structured_content.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(s.run(&id).await.repo.unwrap().as_str(), "acme/web");
    let secret = call(
        &ops,
        "ask",
        json!({"request": "hello", "repo": "acme/secret"}),
    )
    .await;
    let ghost = call(
        &ops,
        "ask",
        json!({"request": "hello", "repo": "acme/ghost"}),
    )
    .await;
    assert_eq!(secret.is_error, Some(true));
    assert_eq!(
        text(&secret).replace("secret", "ghost"),
        text(&ghost),
        "a restricted repo reads as a missing one"
    );
    assert!(
        text(&ghost).contains("repo acme/ghost is not configured"),
        "{}",
        text(&ghost)
    );
}

#[tokio::test]
async fn ask_records_a_run_in_the_tokens_channel_and_can_wait_for_the_answer() {
    let s = start(Some(token_map()), "").await;
    let ops = s.client(OPSBOT).await;
    let started = call(&ops, "ask", json!({"request": "hello there"})).await;
    assert_eq!(started.is_error, Some(false), "{}", text(&started));
    let sc = started.structured_content.clone().unwrap();
    let id = sc["run_id"].as_str().unwrap().to_owned();
    assert!(text(&started).contains(&id));
    // The capability link goes to the one who asked, in the data and the text: a machine's
    // link (it watches and stops the run; it answers no ask).
    let link = sc["link"].as_str().unwrap_or_else(|| panic!("{sc}"));
    assert!(link.contains(&format!("/runs/{id}?token=sbm_")), "{link}");
    assert!(text(&started).contains(link));
    let run = s.run(&id).await;
    assert_eq!(run.channel_id.as_str(), "mcp:ops", "the token's channel");
    assert_eq!(run.user_id.as_str(), "mcp:opsbot");
    assert_eq!(run.surface.as_str(), "mcp");
    assert_eq!(run.parent_run, None);

    let waited = call(
        &ops,
        "ask",
        json!({"request": "say this back", "wait": true}),
    )
    .await;
    assert_eq!(waited.is_error, Some(false), "{}", text(&waited));
    let sc = waited.structured_content.clone().unwrap();
    assert_eq!(sc["status"], "completed");
    assert!(text(&waited).contains("say this back"), "{}", text(&waited));
    let done = s.run(sc["run_id"].as_str().unwrap()).await;
    assert_eq!(done.status, store::RunStatus::Completed);
}

/// Cancellation stops the wait, never the run: a client that goes away mid-`ask` leaves its
/// run going.
#[tokio::test]
async fn a_client_that_goes_away_stops_waiting_not_the_run() {
    let s = start(Some(token_map()), "").await;
    let body = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ask","arguments":{"request":"@staller wait for me", "wait": true}}}).to_string();
    let req = s
        .http
        .post(&s.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .header("authorization", format!("Bearer {OPSBOT}"))
        .body(body)
        .send();
    // The call starts its run and waits; once the run is live, the client gives up and goes
    // away.
    let sent = tokio::time::Instant::now();
    let call = tokio::spawn(req);
    let deadline = sent + Duration::from_secs(30);
    while s.runs(store::StatusFilter::Live).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ask never started its run"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The run is live; a second after the call it is still waiting for the answer, and
    // it started one run, no more.
    tokio::time::sleep_until(sent + Duration::from_secs(1)).await;
    assert!(!call.is_finished(), "the wait should still be going");
    call.abort();
    let runs = s.runs(store::StatusFilter::All).await;
    assert_eq!(runs.len(), 1, "the ask started one run");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let run = s.run(runs[0].id.as_str()).await;
    assert!(
        run.status.is_live(),
        "the run goes on after the client left: {:?}",
        run.status
    );
    assert!(s.services.runs.stop_here(&run.id));
}

/// A `notifications/cancelled` for a waiting `ask` (a POST of its own, to a stateless server)
/// stops that wait, only when it comes from the same caller; the run goes on.
#[tokio::test]
async fn a_cancellation_from_the_same_caller_stops_the_wait_not_the_run() {
    let s = start(Some(token_map()), "").await;
    let body = json!({"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"ask","arguments":{"request":"@staller hold on", "wait": true}}}).to_string();
    let url = s.url.clone();
    let waiting = tokio::spawn(async move {
        let r = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .header("authorization", format!("Bearer {OPSBOT}"))
            .body(body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    });
    let run = s.first_live_run().await;
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":21,"reason":"user"}}"#;
    let pv = ("mcp-protocol-version", "2025-06-18");
    // Another caller naming the same request id cancels nothing.
    let reader = format!("Bearer {READER}");
    let (status, _) = s
        .post(&[("authorization", reader.as_str()), pv], cancel)
        .await;
    assert_eq!(status, 202);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "another caller's cancellation stopped the wait"
    );
    // The caller itself: the wait ends at once with the run id; the run is still live.
    let ops = format!("Bearer {OPSBOT}");
    let (status, _) = s.post(&[("authorization", ops.as_str()), pv], cancel).await;
    assert_eq!(status, 202);
    let (status, text) = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the cancelled wait answers")
        .unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("still running") && text.contains(run.id.as_str()),
        "{text}"
    );
    assert!(
        s.run(run.id.as_str()).await.status.is_live(),
        "the run goes on"
    );
    assert!(s.services.runs.stop_here(&run.id));
}

/// While `ask` waits, a client that asked for progress gets progress notifications, then
/// the answer, on the same response stream.
#[tokio::test]
async fn ask_sends_progress_while_it_waits() {
    let s = start(Some(token_map()), "").await;
    let body = json!({"jsonrpc":"2.0","id":11,"method":"tools/call","params":{
        "name":"ask","arguments":{"request":"@slow take your time", "wait": true},
        "_meta": {"progressToken": "p-1"}}})
    .to_string();
    let bearer = format!("Bearer {OPSBOT}");
    let (status, text) = s
        .post(
            &[
                ("authorization", bearer.as_str()),
                ("mcp-protocol-version", "2025-06-18"),
            ],
            &body,
        )
        .await;
    assert_eq!(status, 200, "{text}");
    let progress = text
        .find("notifications/progress")
        .expect("a progress notification");
    let result = text.find("\"result\"").expect("the result");
    assert!(
        progress < result,
        "progress comes before the answer: {text}"
    );
    assert!(text.contains("\"progressToken\":\"p-1\""), "{text}");
    assert!(text.contains("take your time"), "{text}");
}
