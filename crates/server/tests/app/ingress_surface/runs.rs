//! Runs from text: started in the token's channel, stopped, or a mistyped command or agent.

use super::*;

#[tokio::test]
async fn text_that_is_not_a_command_starts_a_run_in_the_tokens_channel() {
    let s = start(Some(token_map()), 64 * 1024).await;
    // No token channel: recorded in http:<subject>, machine; its own run is visible by is_self.
    let started = s.say(token("ci"), "summarise the deploy").await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.json()["run_id"].as_str().unwrap().to_owned();
    let run = s
        .store
        .get_run(&id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.channel_id.as_str(), "http:ci");
    assert_eq!(run.channel_visibility, ChannelVisibility::Machine);
    assert_eq!(run.user_id.as_str(), "http:ci");
    assert_eq!(run.surface, Surface::Http);
    // ?wait answers with the run's answer.
    let waited = s
        .post(
            "/ingress?wait=30",
            Some(token("ci")),
            &[("content-type", "text/plain")],
            "what is this?",
        )
        .await;
    assert_eq!(waited.status, 200, "{}", waited.body);
    assert!(
        waited.body.contains("request: what is this?"),
        "{}",
        waited.body
    );
    // The fleet sees it; the ops bot (http:ops only) does not; the reader neither.
    assert!(s.listed(token("fleet")).await.contains(&id));
    assert!(!s.listed(token("opsbot")).await.contains(&id));
    assert!(!s.listed(token("reader")).await.contains(&id));
    // A token channel: http:ops; the ops bot sees the runs it starts there.
    let ops = s.say(token("opsbot"), "@echo hello ops").await;
    assert_eq!(ops.status, 202, "{}", ops.body);
    let ops_id = ops.json()["run_id"].as_str().unwrap().to_owned();
    let ops_run = s
        .store
        .get_run(&ops_id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ops_run.channel_id.as_str(), "http:ops");
    assert!(s.listed(token("opsbot")).await.contains(&ops_id));
    // An agent the token may not run: 🚫 and an audit line, nothing recorded.
    let before = s.listed(token("fleet")).await.len();
    let denied = s
        .post("/ingress", Some(token("reader")), &[], "do something")
        .await;
    assert_eq!(denied.status, 403);
    assert_eq!(
        denied.body,
        "🚫 You don't have permission to run the `echo` agent.\n"
    );
    assert!(
        s.audit
            .lines()
            .iter()
            .any(|l| l.action == "agent:run:echo" && l.actor == "http:reader")
    );
    assert_eq!(s.listed(token("fleet")).await.len(), before);
}

#[tokio::test]
async fn runs_stop_over_the_ingress_stops_a_live_run() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let bot = token("opsbot");
    let started = s.say(bot, "@staller wait for me").await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.json()["run_id"].as_str().unwrap().to_owned();
    // The reader may not stop it (not_found, as if missing).
    assert_eq!(
        s.say(token("reader"), &format!("runs stop {id}"))
            .await
            .status,
        404
    );
    let asked = store::wall_clock().micros();
    let stop = s.say(bot, &format!("runs stop {id}")).await;
    assert_eq!(stop.status, 200, "{}", stop.body);
    let mut got = serde_json::Value::Null;
    for _ in 0..1500 {
        got = s
            .say(token("fleet"), &format!("runs get {id}"))
            .await
            .json();
        if got["status"] == "stopped" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(got["status"], "stopped", "{got}");
    // Timed by the run's own record: the stop takes effect at once, well inside 2 s.
    let took = got["finished_at"].as_i64().unwrap() - asked;
    assert!(took < 2_000_000, "stopped {took} µs after it was asked");
    let again = s.say(bot, &format!("runs stop {id}")).await;
    assert_eq!(again.status, 409, "{}", again.body);
}

/// Fault 2, on the ingress: text whose first word is a command group gets the registry's
/// reply, never an agent run.
#[tokio::test]
async fn mistyped_command_text_over_the_ingress_gets_the_registrys_reply() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let fleet = token("fleet");
    let proposed = s
        .post_typed(fleet, "text/plain", "friction propose don't retry")
        .await;
    assert_eq!(proposed.status, 200, "{}", proposed.body);
    for (text, status, want) in [
        (
            "friction propose \"don't retry",
            400,
            "the command text has an unclosed quote",
        ),
        (
            "runs list \u{7}",
            400,
            "command text contains control characters",
        ),
        (
            "runs lst",
            400,
            "unknown command `runs lst`; did you mean `runs list`?",
        ),
        ("runs", 400, "`runs` needs a command: runs list, runs get"),
    ] {
        let a = s.post_typed(fleet, "text/plain", text).await;
        assert_eq!(a.status, status, "{text:?}: {}", a.body);
        assert!(a.body.starts_with(want), "{text:?}: {}", a.body);
    }
    assert!(s.listed(fleet).await.is_empty(), "no agent run was started");
}

/// Fault 3, on the ingress: a caller with no grants learns no agent's name.
#[tokio::test]
async fn an_unknown_agent_names_no_agent_to_a_token_with_no_grants() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let a = s
        .post_typed(token("nobody"), "text/plain", "@nosuch hi")
        .await;
    assert_eq!(
        (a.status, a.body.as_str()),
        (400, "there is no agent `nosuch` you can run\n")
    );
    let ci = s.post_typed(token("ci"), "text/plain", "@nosuch hi").await;
    assert_eq!(ci.body, "there is no agent `nosuch`; you can run echo\n");
}
