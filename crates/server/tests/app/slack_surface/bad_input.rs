//! Bad signatures and bad input on `/slack/events`: their statuses, and nothing written.

use super::*;

#[tokio::test]
async fn bad_signatures_are_401_and_write_nothing() {
    let h = start().await;
    let body = callback("EvSig", mention("U1", "C1", "1.1", "hello"));
    let stale = signed_headers(SECRET, now() - 6 * 60, &body);
    let wrong = signed_headers("not-the-secret", now(), &body);
    // A replay: a body signed earlier, sent under a new timestamp with its old signature.
    let earlier = signed_headers(SECRET, now() - 60, &body);
    let replayed = [
        ("x-slack-request-timestamp".to_owned(), now().to_string()),
        earlier[1].clone(),
    ];
    for headers in [&stale[..], &wrong[..], &replayed[..]] {
        let (status, text) = h.post_raw(body.clone(), headers).await;
        assert_eq!(status, 401, "{headers:?}");
        assert_eq!(text, "");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(h.runs().await.is_empty());
    assert!(h.fake.calls_of("chat.postMessage").is_empty());
    // No event id was spent: the good delivery of the same id still starts its run.
    assert_eq!(h.post(body).await.0, 200);
    h.finished_runs(1).await;
}

#[tokio::test]
async fn bad_input_gets_its_status_and_no_panic() {
    let h = start().await;
    let good = |body: &[u8]| signed_headers(SECRET, now(), body).to_vec();
    let huge = vec![b' '; slack::MAX_BODY_BYTES + 1];
    let control = callback(
        "EvCtl",
        mention("U1", "C1", "12.1", "runs list\u{7}\u{1b}[2J"),
    );
    let unknown = callback("EvUnknown", json!({"type": "reaction_added", "user": "U1"}));
    let long_id = callback(&"E".repeat(100_000), mention("U1", "C1", "12.3", "hi"));
    let odd_id = callback("Ev'; DROP", mention("U1", "C1", "12.4", "hi"));
    let wrapped = callback("EvWrapped", mention("U1", "C1", "12.5", "hi"));
    type Headers = Vec<(String, String)>;
    let cases: Vec<(&str, Vec<u8>, Headers, u16)> = vec![
        (
            "malformed JSON, signed",
            b"{\"type\": \"event_callback\",".to_vec(),
            good(b"{\"type\": \"event_callback\","),
            400,
        ),
        (
            "not an object, signed",
            b"[1,2]".to_vec(),
            good(b"[1,2]"),
            400,
        ),
        (
            "a callback without an id",
            br#"{"type":"event_callback","event":{}}"#.to_vec(),
            good(br#"{"type":"event_callback","event":{}}"#),
            400,
        ),
        (
            "an unknown event type",
            unknown.clone(),
            good(&unknown),
            200,
        ),
        (
            "an unknown envelope type",
            br#"{"type":"app_rate_limited"}"#.to_vec(),
            good(br#"{"type":"app_rate_limited"}"#),
            200,
        ),
        ("a huge body", huge.clone(), good(&huge), 413),
        (
            "no signature header",
            unknown.clone(),
            vec![good(&unknown)[0].clone()],
            401,
        ),
        (
            "no timestamp header",
            unknown.clone(),
            vec![good(&unknown)[1].clone()],
            401,
        ),
        ("no headers", unknown.clone(), vec![], 401),
        (
            "a timestamp that is not a number",
            unknown.clone(),
            vec![
                ("x-slack-request-timestamp".into(), "soon".into()),
                good(&unknown)[1].clone(),
            ],
            401,
        ),
        (
            "control characters in text",
            control.clone(),
            good(&control),
            200,
        ),
        (
            "an event id of 100 kB (bad input, not a store outage)",
            long_id.clone(),
            good(&long_id),
            400,
        ),
        (
            "an event id that is not letters and digits",
            odd_id.clone(),
            good(&odd_id),
            400,
        ),
        (
            "a timestamp 2^63 seconds ago, correctly signed (it wrapped into the window)",
            wrapped.clone(),
            signed_headers(SECRET, now() + i64::MIN, &wrapped).to_vec(),
            401,
        ),
    ];
    for (what, body, headers, want) in cases {
        let (status, _) = h.post_raw(body, &headers).await;
        assert_eq!(status, want, "{what}");
    }
    // The control characters were refused by the registry, to the caller alone; nothing ran.
    let posts = h.fake.settled("chat.postEphemeral", 1, 10).await;
    assert_eq!(posts.len(), 1);
    assert!(
        posts[0].param("text").unwrap().contains("control"),
        "{posts:?}"
    );
    assert!(h.runs().await.is_empty());
    // The server still answers.
    assert_eq!(
        h.event("EvAfter", mention("U1", "C1", "12.2", "hi")).await,
        200
    );
    h.finished_runs(1).await;
}
