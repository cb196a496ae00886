//! Run reads: what each token's grants allow; a denied read is identical to a missing id.

use super::*;

/// A token's channel is where its runs are recorded, never a grant; reading runs needs the
/// channels axis (or is_self).
#[tokio::test]
async fn tokens_see_exactly_what_their_grants_allow() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let public = s
        .seed("slack:C1", "slack:U1", ChannelVisibility::Public)
        .await;
    let public2 = s
        .seed("slack:C2", "slack:U2", ChannelVisibility::Public)
        .await;
    let private = s
        .seed("slack:G1", "slack:U1", ChannelVisibility::Private)
        .await;
    let dm = s.seed("slack:D1", "slack:U1", ChannelVisibility::Dm).await;
    let ops = s
        .seed("http:ops", "http:someone", ChannelVisibility::Machine)
        .await;
    let ops2 = s
        .seed("http:ops", "http:other", ChannelVisibility::Machine)
        .await;
    let ci = s
        .seed("http:ci", "http:ci", ChannelVisibility::Machine)
        .await;
    let sched = s
        .seed(
            "schedule:nightly",
            "schedule:nightly",
            ChannelVisibility::Machine,
        )
        .await;
    let all = [&public, &public2, &private, &dm, &ops, &ops2, &ci, &sched];
    let ids = |runs: &[&RunRecord]| -> BTreeSet<String> {
        runs.iter().map(|r| r.id.to_string()).collect()
    };
    let set = |v: Vec<String>| -> BTreeSet<String> { v.into_iter().collect() };

    // runs:read, no channels, token channel http:ops: the public runs only.
    let reader = token("reader");
    assert_eq!(set(s.listed(reader).await), ids(&[&public, &public2]));
    let missing = s.say(reader, "runs get 01JZZZZZZZZZZZZZZZZZZZZZZZ").await;
    assert_eq!(missing.status, 404);
    for run in [&private, &dm, &ops, &ops2, &ci, &sched] {
        let a = s.say(reader, &format!("runs get {}", run.id)).await;
        assert_eq!(
            (a.status, &a.body),
            (404, &missing.body),
            "reader must not see {}",
            run.channel_id
        );
    }
    assert_eq!(
        s.say(reader, &format!("runs get {}", public.id))
            .await
            .status,
        200
    );

    // No grants entry at all: runs list is refused, every runs get is the missing-id 404.
    let nobody = token("nobody");
    let refused = s.say(nobody, "runs list --status all").await;
    assert_eq!(refused.status, 403);
    let refused_text = s.post_typed(nobody, "text/plain", "runs list").await;
    assert!(refused_text.body.starts_with("🚫"), "{}", refused_text.body);
    for run in all {
        let a = s.say(nobody, &format!("runs get {}", run.id)).await;
        assert_eq!(
            (a.status, &a.body),
            (404, &missing.body),
            "byte-identical to a missing id"
        );
        let t = s
            .post(
                "/ingress",
                Some(nobody),
                &[],
                &format!("runs get {}", run.id),
            )
            .await;
        let missing_text = s
            .post(
                "/ingress",
                Some(nobody),
                &[],
                "runs get 01JZZZZZZZZZZZZZZZZZZZZZZZ",
            )
            .await;
        assert_eq!((t.status, &t.body), (404, &missing_text.body));
    }

    // One machine channel: that channel and the public runs, nothing else.
    assert_eq!(
        set(s.listed(token("opsbot")).await),
        ids(&[&public, &public2, &ops, &ops2])
    );
    assert_eq!(
        s.say(token("opsbot"), &format!("runs get {}", ci.id))
            .await
            .status,
        404
    );

    // channels = "all": the fleet.
    assert_eq!(set(s.listed(token("fleet")).await), ids(&all));

    // Denials left audit lines, never a run id.
    let lines = s.audit.lines();
    assert!(
        lines
            .iter()
            .any(|l| l.actor == "http:nobody" && l.action == "runs:read")
    );
    for l in &lines {
        for run in all {
            assert!(!l.to_string().contains(run.id.as_str()));
        }
    }
}

/// Fault 7: a denied point read is the missing id's reply byte for byte — status, content
/// type and body — on every route (text and JSON replies) and every point read.
#[tokio::test]
async fn a_denied_point_read_is_byte_identical_to_a_missing_id_on_every_route() {
    let s = start(Some(token_map()), 64 * 1024).await;
    let private = s
        .seed("slack:G1", "slack:U1", ChannelVisibility::Private)
        .await;
    let missing = "01JZZZZZZZZZZZZZZZZZZZZZZZ";
    for accept in ["text/plain", "application/json", "*/*"] {
        for verb in ["get", "events", "friction", "diff", "stop"] {
            for who in ["reader", "nobody", "opsbot"] {
                let ask = |id: String| {
                    let s = &s;
                    async move {
                        s.post(
                            "/ingress",
                            Some(token(who)),
                            &[("content-type", "text/plain"), ("accept", accept)],
                            &format!("runs {verb} {id}"),
                        )
                        .await
                    }
                };
                let denied = ask(private.id.to_string()).await;
                let absent = ask(missing.to_owned()).await;
                assert_eq!(denied.status, 404, "{who} {verb} {accept}: {}", denied.body);
                assert_eq!(
                    (denied.status, &denied.content_type, &denied.body),
                    (absent.status, &absent.content_type, &absent.body),
                    "{who} runs {verb}, Accept {accept}"
                );
            }
        }
    }
}
