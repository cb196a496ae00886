//! Slack buttons: a tool call waiting for its person answered by a click, and bad clicks.

use super::*;

/// The writer: an openai agent on `model`, which may write in its run's workspace once the
/// person it acts for approves (`fs.write` asks by default), and which U1 may run. Goes
/// after `[slack]`'s keys.
fn writer(model: &str) -> String {
    format!(
        "\n[agents.writer]\nbackend = \"openai\"\nbase_url = \"{model}\"\nmodel = \"scripted\"\n\n[[agent_grants]]\nid = \"writer-notes\"\nagent = \"writer\"\ntool = \"write_file\"\npaths = [\"{{workspace}}\"]\nmode = \"auto\"\n\n[grants.\"slack:U1\"]\nactions = [\"runs:read\", \"agent:run:writer\"]\n"
    )
}

/// The message with Approve / Deny buttons posted into `thread`: its `ts` and the buttons'
/// value.
async fn offered(h: &Harness, channel: &str, thread: &str) -> (String, String) {
    for _ in 0..500 {
        let offer = h.fake.calls_of("chat.postMessage").into_iter().find(|c| {
            c.param("channel") == Some(channel)
                && c.param("thread_ts") == Some(thread)
                && c.param("blocks").is_some()
        });
        if let Some(offer) = offer {
            let blocks: Value = serde_json::from_str(offer.param("blocks").unwrap()).unwrap();
            let body = blocks[0]["text"]["text"].as_str().unwrap();
            assert!(body.contains("`fs.write` with `write_file`"), "{body}");
            assert!(
                !body.contains("<!channel>"),
                "no agent text in the mrkdwn: {body}"
            );
            assert!(
                slack::approvals::shown_arguments(&blocks).contains("<!channel>"),
                "the call is shown whole, as literal text: {blocks}"
            );
            assert!(body.contains("Only <@U1> can answer."), "{body}");
            let buttons = &blocks.as_array().unwrap().last().unwrap()["elements"];
            assert_eq!(buttons[0]["action_id"], slack::approvals::APPROVE);
            assert_eq!(buttons[1]["action_id"], slack::approvals::DENY);
            return (
                offer.param("posted_ts").unwrap().to_owned(),
                buttons[0]["value"].as_str().unwrap().to_owned(),
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "no approval was offered in thread {thread}: {:?}",
        h.fake.calls()
    );
}

/// The `chat.update` texts of message `ts`.
fn updates_of(h: &Harness, ts: &str) -> Vec<String> {
    h.fake
        .calls_of("chat.update")
        .into_iter()
        .filter(|c| c.param("ts") == Some(ts))
        .map(|c| c.param("text").unwrap_or_default().to_owned())
        .collect()
}

/// A tool call waiting for the person who asked in Slack is offered in the run's thread with
/// Approve / Deny buttons. A click counts only from that person: another's is told so and
/// changes nothing; theirs reaches the agent, the buttons go, and a second click finds
/// nothing waiting.
#[tokio::test]
async fn a_tool_call_waiting_for_its_person_is_answered_with_slack_buttons() {
    for (button, answered, want) in [
        (
            slack::approvals::APPROVE,
            "Approved by <@U1>.",
            "tool said: wrote 10 bytes to ",
        ),
        (
            slack::approvals::DENY,
            "Denied by <@U1>.",
            "tool said: refused: fs.write needs a person's approval: refused",
        ),
    ] {
        let model = test_support::model::writing_model("<!channel>").await;
        let h = start_with(FakeSlack::new(), &SLACK_ENV, &writer(&model)).await;
        let thread = "1700000100.000001";
        assert_eq!(
            h.event("EvWrite", mention("U1", "C1", thread, "@writer take notes"))
                .await,
            200
        );
        let (ts, value) = offered(&h, "C1", thread).await;

        // Someone else's click does not count; they alone are told so.
        assert_eq!(
            h.interact(&click("U2", button, &value, "C1", &ts, thread))
                .await,
            200
        );
        let told = h.fake.wait_for("chat.postEphemeral", 2, 10).await;
        let told = told
            .iter()
            .find(|c| c.param("user") == Some("U2"))
            .unwrap_or_else(|| panic!("U2 was not told: {told:?}"));
        assert!(
            told.param("text").unwrap().contains("did not count"),
            "{told:?}"
        );
        assert_eq!(told.param("thread_ts"), Some(thread));
        assert!(updates_of(&h, &ts).is_empty(), "the buttons stay");
        assert!(h.runs().await.iter().all(|r| r.status.is_live()));

        // Theirs does.
        assert_eq!(
            h.interact(&click("U1", button, &value, "C1", &ts, thread))
                .await,
            200
        );
        let run = h.finished_runs(1).await.remove(0);
        assert_eq!(run.status, RunStatus::Completed);
        let answer = run.answer.unwrap_or_default();
        assert!(answer.starts_with(want), "{answer}");
        let mut updates = Vec::new();
        for _ in 0..200 {
            updates = updates_of(&h, &ts);
            if !updates.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(updates[0].ends_with(answered), "{updates:?}");
        let cleared = h
            .fake
            .calls_of("chat.update")
            .into_iter()
            .find(|c| c.param("ts") == Some(ts.as_str()))
            .unwrap();
        assert_eq!(cleared.param("blocks"), Some("[]"), "the buttons go");
        // The run's events say who was asked and what they answered.
        let events = h.store.events(&run.id).await.unwrap();
        let approvals: Vec<&str> = events
            .iter()
            .filter(|e| e.kind == "approval")
            .map(|e| e.body.as_str())
            .collect();
        assert_eq!(approvals.len(), 2, "{approvals:?}");

        // A second click finds nothing waiting, and says so on the message.
        assert_eq!(
            h.interact(&click("U1", button, &value, "C1", &ts, thread))
                .await,
            200
        );
        for _ in 0..200 {
            if updates_of(&h, &ts).len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            updates_of(&h, &ts)[1].contains("no longer waits"),
            "{:?}",
            updates_of(&h, &ts)
        );
    }
}

/// `/slack/interactions` refuses what is not a signed click on our buttons, and takes no
/// answer from it.
#[tokio::test]
async fn bad_interactions_get_their_status_and_answer_nothing() {
    let h = start().await;
    let good = |body: &[u8]| signed_headers(SECRET, now(), body).to_vec();
    let ours = interaction_form(&click(
        "U1",
        slack::approvals::APPROVE,
        "01JNOSUCHRUN/abc",
        "C1",
        "1.2",
        "1.1",
    ));
    let theirs = interaction_form(&click("U1", "their_button", "x", "C1", "1.2", "1.1"));
    let bad_value = interaction_form(&click(
        "U1",
        slack::approvals::APPROVE,
        "no-slash",
        "C1",
        "1.2",
        "1.1",
    ));
    let huge = vec![b'a'; slack::MAX_BODY_BYTES + 1];
    let stale = signed_headers(SECRET, now() - 600, &ours).to_vec();
    type Headers = Vec<(String, String)>;
    let cases: Vec<(&str, Vec<u8>, Headers, u16)> = vec![
        ("no signature", ours.clone(), vec![], 401),
        ("a stale signature", ours.clone(), stale, 401),
        (
            "signed for another body",
            ours.clone(),
            good(b"payload=%7B%7D"),
            401,
        ),
        ("a huge body", huge.clone(), good(&huge), 413),
        ("not a form", b"{}".to_vec(), good(b"{}"), 400),
        (
            "a payload that is not JSON",
            b"payload=nope".to_vec(),
            good(b"payload=nope"),
            400,
        ),
        (
            "a value that names no run",
            bad_value.clone(),
            good(&bad_value),
            400,
        ),
        ("another app's button", theirs.clone(), good(&theirs), 200),
        ("a click on nothing waiting", ours.clone(), good(&ours), 200),
    ];
    for (what, body, headers, want) in cases {
        assert_eq!(h.interact_raw(body, &headers).await, want, "{what}");
    }
    // Only the click on nothing waiting reached the Web API: its message says so.
    let updates = h.fake.settled("chat.update", 1, 10).await;
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert!(
        updates[0]
            .param("text")
            .unwrap()
            .contains("no longer waits")
    );
    assert!(h.runs().await.is_empty());
}
