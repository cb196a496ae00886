//! `/api`: the registry's reads, with byte-identical not-founds, and its bad input.

use super::*;

/// Deliberate change (b) over `/api`: a private run is the same 404 as an unknown id for an
/// operator without all channels, on every point read; lists hold only what it may read.
#[tokio::test]
async fn api_reads_are_the_registrys_with_byte_identical_not_found() {
    let h = start(Options::default()).await;
    let public = h.stored_run(Place::Public, Some("ok")).await;
    let private = h.stored_run(Place::Private, Some("secret")).await;
    let own = h.stored_run(Place::AlicesOwn, Some("mine")).await;
    let machine = h.stored_run(Place::Machine, Some("ops")).await;
    let alice = token_for("alice");
    let fleet = token_for("fleet");
    let unknown = "01JZZZZZZZZZZZZZZZZZZZZZZZ";
    for command in ["runs.get", "runs.events", "runs.friction", "runs.diff"] {
        let denied = h
            .get(&format!("/api/{command}?id={}", private.id), Some(&alice))
            .await;
        let missing = h
            .get(&format!("/api/{command}?id={unknown}"), Some(&alice))
            .await;
        assert_eq!(denied.status, 404, "{command}");
        assert_eq!(
            denied, missing,
            "{command}: a denied read is an unknown id, byte for byte"
        );
        let fleet_reads = h
            .get(&format!("/api/{command}?id={}", private.id), Some(&fleet))
            .await;
        assert_eq!(fleet_reads.status, 200, "{command}");
    }
    // is-self: the run's own user reads it.
    let mine = h
        .get(&format!("/api/runs.get?id={}", own.id), Some(&alice))
        .await;
    assert_eq!(
        (mine.status, mine.json()["answer"].as_str()),
        (200, Some("mine"))
    );
    let ids = |a: &Answer| -> Vec<String> {
        a.json()["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let listed = ids(&h.get("/api/runs.list?status=all", Some(&alice)).await);
    assert!(listed.contains(&public.id.to_string()) && listed.contains(&own.id.to_string()));
    assert!(!listed.contains(&private.id.to_string()) && !listed.contains(&machine.id.to_string()));
    let all = ids(&h.get("/api/runs.list?status=all", Some(&fleet)).await);
    assert_eq!(all.len(), 4);
    // The same JSON as the CLI's --json: the registry's data.
    let caller = Caller::new(
        resolve_actor(ActorId::parse("access:fleet").unwrap(), &h.services.table()),
        Surface::Access,
    );
    let direct = h
        .registry
        .invoke(
            &caller,
            commands::RawInput::Json {
                id: "runs.get".into(),
                args: json!({"id": public.id.as_str()})
                    .as_object()
                    .cloned()
                    .unwrap(),
            },
            &h.services,
        )
        .await;
    assert_eq!(
        h.get(&format!("/api/runs.get?id={}", public.id), Some(&fleet))
            .await
            .json(),
        direct.data
    );
}

/// The bad-input table of `/api`.
#[tokio::test]
async fn api_bad_input_gets_a_clear_status_and_changes_nothing() {
    let h = start(Options::default()).await;
    let alice = token_for("alice");
    let same_origin = [
        ("sec-fetch-site", "same-origin"),
        ("content-type", "application/json"),
    ];
    let rows: Vec<(&str, &str, Option<&str>, u16, &str)> = vec![
        ("GET", "/api/nope.nothing", None, 404, "unknown"),
        (
            "GET",
            "/api/config.set?key=greeting&value=hi&org=true",
            None,
            405,
            "POST /api/config.set",
        ),
        ("GET", "/api/runs.list?status=sideways", None, 400, "usage"),
        ("GET", "/api/runs.list?bogus=1", None, 400, "bogus"),
        ("GET", "/api/runs.list?limit=1&limit=2", None, 400, "twice"),
        ("GET", "/api/runs.get", None, 400, "usage"),
        ("POST", "/api/runs.list", Some("[1,2]"), 400, "JSON object"),
        (
            "POST",
            "/api/runs.list",
            Some("{\"status\":"),
            400,
            "not valid JSON",
        ),
        (
            "POST",
            "/api/runs.list",
            Some("{\"limit\": true}"),
            400,
            "number",
        ),
        (
            "POST",
            "/api/config.set",
            Some("{\"key\":\"greeting\",\"value\":\"hi\",\"org\":true}"),
            403,
            "unauthorized",
        ),
        ("POST", "/api/nope.nothing", Some("{}"), 404, "unknown"),
    ];
    for (method, path, body, status, says) in rows {
        let a = match method {
            "GET" => h.get(path, Some(&alice)).await,
            _ => {
                h.post(path, Some(&alice), &same_origin, body.unwrap())
                    .await
            }
        };
        assert_eq!(a.status, status, "{method} {path}: {}", a.body);
        assert_eq!(a.content_type, "application/json", "{method} {path}");
        assert!(
            a.body.to_lowercase().contains(&says.to_lowercase()),
            "{method} {path}: {}",
            a.body
        );
    }
    // A cross-site post is refused before anything is read; a script's post (no Origin) works.
    let evil = h
        .post(
            "/api/runs.list",
            Some(&alice),
            &[
                ("origin", "https://evil.example"),
                ("content-type", "application/json"),
            ],
            "{}",
        )
        .await;
    assert_eq!(evil.status, 403);
    let script = h
        .post("/api/runs.list", Some(&alice), &[], "{\"status\": \"all\"}")
        .await;
    assert_eq!(script.status, 200, "{}", script.body);
    // The fleet operator may not set org config either (config:write is not granted); a
    // service token with nothing is 🚫 on reads too.
    let oversized = h
        .post("/api/runs.list", Some(&alice), &[], &"x".repeat(70 * 1024))
        .await;
    assert_eq!(oversized.status, 413);
}
