//! How a request is read: the token map, the bearer, the body and its content type, forms.

use super::*;

#[tokio::test]
async fn without_a_token_map_the_route_is_503_and_says_so() {
    let s = start(None, 1024).await;
    let a = s
        .post("/ingress", Some("anything-at-all-123"), &[], "help")
        .await;
    assert_eq!(a.status, 503);
    assert!(a.body.contains("no token map is configured"), "{}", a.body);
}

#[tokio::test]
async fn bearer_body_and_content_type_faults_have_their_statuses() {
    let s = start(Some(token_map()), 1024).await;
    for t in [None, Some("not-a-known-token-123")] {
        let a = s
            .post("/ingress", t, &[("content-type", "text/plain")], "help")
            .await;
        assert_eq!(
            (a.status, a.body.as_str()),
            (401, ""),
            "no detail for {t:?}"
        );
    }
    let basic = s
        .post("/ingress", None, &[("authorization", "Basic abc")], "help")
        .await;
    assert_eq!(basic.status, 401);
    let ci = token("ci");
    let big = "x".repeat(2048);
    assert_eq!(s.post_typed(ci, "text/plain", &big).await.status, 413);
    let xml = s.post_typed(ci, "application/xml", "<help/>").await;
    assert_eq!(xml.status, 415);
    assert!(
        xml.body
            .contains("text/plain, as a form body (curl -d), or as application/json"),
        "{}",
        xml.body
    );
    let bad = s.post_typed(ci, "application/json", "{\"text\": ").await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.body
            .contains("not valid JSON (line 1 column 9): it ends too early"),
        "{}",
        bad.body
    );
    let no_text = s
        .post_typed(ci, "application/json", "{\"txt\": \"help\"}")
        .await;
    assert_eq!(no_text.status, 400);
    assert!(no_text.body.contains("needs a \"text\" field"));
    // JSON in, text out; text in, JSON out.
    let help = s
        .post_typed(
            token("fleet"),
            "application/json; charset=utf-8",
            "{\"text\": \"help\"}",
        )
        .await;
    assert_eq!(help.status, 200);
    assert!(help.content_type.starts_with("text/plain"));
    assert!(help.body.contains("runs list"), "{}", help.body);
    let help = s.say(token("fleet"), "help").await;
    assert_eq!(help.content_type, "application/json");
    help.json();
    let unknown = s.say(token("fleet"), "runs frobnicate").await;
    assert_eq!(unknown.status, 400);
}

/// Fault 1: `curl -d` sends a form content type with the text as written; the README's
/// examples use it. A body that is one encoded `text` field (an HTML form, `curl
/// --data-urlencode text=…`) is decoded.
#[tokio::test]
async fn a_form_body_is_the_command_text_as_curl_d_sends_it() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let form = "application/x-www-form-urlencoded";
    let started = s.post_typed(token("opsbot"), form, "hello").await;
    assert_eq!(started.status, 202, "{}", started.body);
    assert!(started.body.starts_with("started run "), "{}", started.body);
    let listed = s
        .post_typed(token("opsbot"), form, "runs list --status all")
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(listed.body.starts_with("ID "), "{}", listed.body);
    assert!(listed.body.contains("http:ops"), "{}", listed.body);
    let as_json = |body: &str| {
        let s = &s;
        let body = body.to_owned();
        async move {
            s.post(
                "/ingress",
                Some(token("opsbot")),
                &[("content-type", form), ("accept", "application/json")],
                &body,
            )
            .await
        }
    };
    let plain = as_json("runs list --status all").await;
    let encoded = as_json("text=runs+list+--status+all").await;
    assert_eq!(
        (plain.status, encoded.status),
        (200, 200),
        "{}",
        encoded.body
    );
    assert_eq!(
        plain.json()["runs"][0]["id"],
        encoded.json()["runs"][0]["id"]
    );
}
