//! The `/runs` pages: headers, what a viewer reads, history, stop, capability links, schedules.

use super::*;

/// Deliberate change (b) over the pages, byte-identical 404s, escaping, and the headers.
/// Every `/api` answer, the refusals and the framework's own among them, carries the pages'
/// protective headers: nosniff, no referrer, a policy that runs and frames nothing.
#[tokio::test]
async fn api_answers_carry_the_pages_protective_headers() {
    let h = start(Options::default()).await;
    let alice = token_for("alice");
    let url = format!("{}/api/runs.list", h.http.base);
    let requests = [
        h.http
            .client
            .get(&url)
            .header("cf-access-jwt-assertion", &alice),
        h.http.client.get(&url),
        h.http
            .client
            .post(&url)
            .header("cf-access-jwt-assertion", &alice)
            .header("content-type", "application/json")
            .body("{not json"),
        h.http
            .client
            .delete(&url)
            .header("cf-access-jwt-assertion", &alice),
    ];
    let mut statuses = Vec::new();
    for req in requests {
        let r = req.send().await.unwrap();
        statuses.push(r.status().as_u16());
        let header = |n: &str| {
            r.headers()
                .get(n)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        };
        assert_eq!(
            header("x-content-type-options"),
            "nosniff",
            "{}",
            r.status()
        );
        assert_eq!(header("referrer-policy"), "no-referrer", "{}", r.status());
        let csp = header("content-security-policy");
        assert!(
            csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
            "{}: {csp}",
            r.status()
        );
    }
    assert_eq!(statuses[0], 200);
    assert!(statuses[1..].iter().all(|s| *s >= 400), "{statuses:?}");
}

#[tokio::test]
async fn pages_show_only_what_the_viewer_may_read_and_escape_agent_text() {
    let h = start(Options::default()).await;
    let xss = h
        .stored_run(Place::Public, Some("<script>alert('pwned')</script>"))
        .await;
    let private = h.stored_run(Place::Private, Some("secret")).await;
    let alice = token_for("alice");
    let page = h.get(&format!("/runs/{}", xss.id), Some(&alice)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body
            .contains("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;")
    );
    assert!(!page.body.contains("<script>alert"));
    let r = h
        .http
        .client
        .get(format!("{}/runs/{}", h.http.base, xss.id))
        .header("cf-access-jwt-assertion", &alice)
        .send()
        .await
        .unwrap();
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'none'"),
        "{csp}"
    );
    assert_eq!(r.headers()["referrer-policy"], "no-referrer");
    // The private run: the 404 page of an unknown id, status, headers and bytes; the text
    // routes answer text (the registry's not-found text); one audit line per denied request.
    for suffix in ["", "/events", "/friction", "/diff"] {
        let audited = h.audit.lines().len();
        let denied = h
            .get(&format!("/runs/{}{suffix}", private.id), Some(&alice))
            .await;
        assert_eq!(
            h.audit.lines().len(),
            audited + 1,
            "{suffix}: one decision, one line"
        );
        if !suffix.is_empty() {
            assert_eq!(
                (denied.content_type.as_str(), denied.body.as_str()),
                ("text/plain; charset=utf-8", "run not found\n"),
                "{suffix}"
            );
        }
        let missing = h
            .get(
                &format!("/runs/01JZZZZZZZZZZZZZZZZZZZZZZZ{suffix}"),
                Some(&alice),
            )
            .await;
        let malformed = h
            .get(&format!("/runs/nonsense{suffix}"), Some(&alice))
            .await;
        assert_eq!(denied.status, 404, "{suffix}");
        assert_eq!(denied, missing, "{suffix}");
        assert_eq!(denied, malformed, "{suffix}");
    }
    let history = h.get("/runs?all=1", Some(&alice)).await;
    assert!(history.body.contains(xss.id.as_str()));
    assert!(!history.body.contains(private.id.as_str()));
    let fleet = h
        .get(&format!("/runs/{}", private.id), Some(&token_for("fleet")))
        .await;
    assert_eq!(fleet.status, 200);
    // A viewer with no runs:read: an empty index and 404s.
    let svc = key().sign(&json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "", "common_name": "nobody", "exp": now() + 60}));
    let empty = h.get("/runs?all=1", Some(&svc)).await;
    assert_eq!(empty.status, 200);
    assert!(!empty.body.contains(xss.id.as_str()) && empty.body.contains("No runs."));
    assert_eq!(
        h.get(&format!("/runs/{}", xss.id), Some(&svc)).await,
        h.get("/runs/01JZZZZZZZZZZZZZZZZZZZZZZZ", Some(&alice))
            .await
    );
    // Unauthenticated pages are the one 401.
    assert_eq!(h.get("/runs", None).await.status, 401);
}

/// History pages follow the store's cursor.
#[tokio::test]
async fn history_pages_link_to_older_runs() {
    let h = start(Options::default()).await;
    let mut ids = Vec::new();
    for _ in 0..55 {
        ids.push(h.stored_run(Place::Public, Some("ok")).await.id);
    }
    let alice = token_for("alice");
    let first = h.get("/runs?all=1", Some(&alice)).await;
    let href = first
        .body
        .split("id=\"older\" href=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .replace("&amp;", "&");
    let second = h.get(&href, Some(&alice)).await;
    let shown = |body: &str| ids.iter().filter(|id| body.contains(id.as_str())).count();
    assert_eq!((shown(&first.body), shown(&second.body)), (50, 5));
    assert!(!second.body.contains("id=\"older\""));
}

/// Stop from the page: same-origin only, 303 back to the run, 409 once finished.
#[tokio::test]
async fn stop_is_a_same_origin_post_and_409_for_a_finished_run() {
    let h = start(Options::default()).await;
    let fleet = token_for("fleet");
    let id = h.live_run("slack:U1", "slack:C1").await;
    let page = h.get(&format!("/runs/{id}"), Some(&fleet)).await;
    assert!(page.body.contains("id=\"stop\""), "{}", page.body);
    let path = format!("/runs/{id}/stop");
    let evil = h
        .post(
            &path,
            Some(&fleet),
            &[("origin", "https://evil.example"), ("host", "x")],
            "",
        )
        .await;
    assert_eq!(evil.status, 403);
    let stopped = h
        .post(
            &path,
            Some(&fleet),
            &[("sec-fetch-site", "same-origin")],
            "",
        )
        .await;
    assert_eq!(stopped.status, 303, "{}", stopped.body);
    wait_status(&h, &id, RunStatus::Stopped).await;
    let again = h
        .post(
            &path,
            Some(&fleet),
            &[("sec-fetch-site", "same-origin")],
            "",
        )
        .await;
    assert_eq!(again.status, 409, "{}", again.body);
    // alice may not read the private run: its stop is the unknown-id 404, and it runs on.
    let private = h.live_run("slack:U2", "slack:G1").await;
    let refused = h
        .post(
            &format!("/runs/{private}/stop"),
            Some(&token_for("alice")),
            &[],
            "",
        )
        .await;
    assert_eq!(
        refused,
        h.get(
            "/runs/01JZZZZZZZZZZZZZZZZZZZZZZZ",
            Some(&token_for("alice"))
        )
        .await
    );
    let still = h.store.get_run(&private).await.unwrap().unwrap();
    assert!(still.status.is_live() && still.stop_requested_at.is_none());
}

/// The capability link: returned only to the starter, opens its own run while live, then a
/// page saying it ended; any other run's id is the unknown-id 404.
#[tokio::test]
async fn capability_links_open_their_own_live_run_only() {
    let h = start(Options::default()).await;
    let started = h.ingress("/ingress", "@staller wait for me").await;
    let link = started["link"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    let id = started["run_id"].as_str().unwrap().to_owned();
    assert!(
        link.starts_with(&format!("{}/runs/{id}?token=", h.http.base)),
        "{link}"
    );
    let token = link.split("token=").nth(1).unwrap().to_owned();
    let run = h
        .store
        .get_run(&RunId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(run.capability_token.as_ref().unwrap().matches(&token));
    let path = link.trim_start_matches(&h.http.base).to_owned();
    let page = h.get(&path, None).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("id=\"stop\"")
            && page.body.contains(&format!("/runs/{id}/stream?token="))
    );
    let r = h.http.client.get(&link).send().await.unwrap();
    assert_eq!(r.headers()["referrer-policy"], "no-referrer");
    // `?wait=` that ends with the run still live keeps the link for its starter.
    let waited = h.ingress("/ingress?wait=1", "@staller wait again").await;
    // Live: running, or still queued on a slow machine.
    assert!(
        matches!(waited["status"].as_str(), Some("running" | "queued")),
        "{waited}"
    );
    let waited_id = waited["run_id"].as_str().unwrap();
    assert!(
        waited["link"]
            .as_str()
            .is_some_and(|l| l.contains(waited_id)),
        "{waited}"
    );
    let other = h.stored_run_opened_by(Place::Public, "other-token").await;
    let unknown = h
        .get(
            "/runs/01JZZZZZZZZZZZZZZZZZZZZZZZ",
            Some(&token_for("alice")),
        )
        .await;
    assert_eq!(
        h.get(&format!("/runs/{}?token={token}", other.id), None)
            .await,
        unknown
    );
    assert_eq!(
        h.get(&format!("/runs/{id}?token=wrong"), None).await,
        unknown
    );
    assert_eq!(
        h.get(&format!("/runs/{id}/events?token={token}"), None)
            .await
            .status,
        200
    );
    // Stop through the link, then it opens nothing but the ended page.
    let stop = h
        .post(
            &format!("/runs/{id}/stop?token={token}"),
            None,
            &[("sec-fetch-site", "same-origin")],
            "",
        )
        .await;
    assert_eq!(stop.status, 303);
    wait_status(&h, &RunId::parse(&id).unwrap(), RunStatus::Stopped).await;
    let ended = h.get(&path, None).await;
    assert_eq!(ended.status, 410);
    assert!(ended.body.contains("This run has ended"));
    assert_eq!(
        h.get(&format!("/runs/{id}/events?token={token}"), None)
            .await
            .status,
        410
    );
    // A stop or an answer through the link of an ended run: 410 too, as docs/access.md says.
    for action in ["stop", "approvals/0000000000000000"] {
        let late = h
            .post(
                &format!("/runs/{id}/{action}?token={token}"),
                None,
                &[
                    ("sec-fetch-site", "same-origin"),
                    ("content-type", "application/x-www-form-urlencoded"),
                ],
                "answer=approve",
            )
            .await;
        assert_eq!(late.status, 410, "{action}: {}", late.body);
    }
}

/// Schedules are listed; a firing's run is linked only for a viewer who may read it.
#[tokio::test]
async fn scheduled_links_a_firing_only_for_a_reader() {
    let h = start(Options::default()).await;
    let cli = Caller::new(
        resolve_actor(ActorId::parse("cli:local").unwrap(), &h.services.table()),
        Surface::Cli,
    );
    let fired = h
        .registry
        .handle(&cli, "schedule fire self-improvement", &h.services)
        .await;
    assert_eq!(
        fired.reply.kind,
        commands::ReplyKind::Ok,
        "{:?}",
        fired.reply
    );
    let run = fired.reply.data["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", fired.reply.data))
        .to_owned();
    let fleet = h.get("/runs/scheduled", Some(&token_for("fleet"))).await;
    assert!(fleet.body.contains("self-improvement"));
    assert!(
        fleet.body.contains(&format!("href=\"/runs/{run}\"")),
        "{}",
        fleet.body
    );
    let alice = h.get("/runs/scheduled", Some(&token_for("alice"))).await;
    assert!(alice.body.contains("self-improvement"));
    assert!(!alice.body.contains(&run), "{}", alice.body);
}
