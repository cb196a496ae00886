//! Two `switchboard serve` processes on one Postgres with the Access surface on: a run live on
//! one replica shows on the other's `/runs` index and in its feed (Postgres `LISTEN/NOTIFY`),
//! and each replica still filters per viewer.

use crate::common;

use std::path::Path;
use std::time::Duration;

use access_api::testing::{SigningKey, claims, key_set, read_until};
use serde_json::{Value, json};

use crate::common::Replica;

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "aud-replicas";
const OPSBOT: &str = "opsbot-token-0123456789";

fn start(dir: &Path, config: &str) -> Replica {
    let tokens = json!({OPSBOT: {"subject": "opsbot", "channel": "http:ops"}}).to_string();
    let env = [("SWITCHBOARD_INGRESS_TOKENS", tokens.as_str())];
    let (replica, summary) = common::start_replica(dir, config, &env);
    assert!(summary.contains("Access JWTs from"), "{summary}");
    replica
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_one_replica_is_live_on_the_others_pages_and_feed() {
    let key = SigningKey::generate("replica-key");
    let store = common::postgres_store_section();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let replicas: Vec<Replica> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let jwks = dir.path().join("jwks.json");
            std::fs::write(&jwks, key_set(&[&key]).to_string()).unwrap();
            let config = format!(
                "[server]\nreplica_id = \"replica-{i}\"\n[agents]\ndefault = \"echo\"\n[agents.echo]\n[agents.staller]\nbehaviour = \"stall\"\n\
                 [grants.\"http:opsbot\"]\nactions = [\"runs:read\", \"runs:write\", \"agent:run:staller\"]\nchannels = [\"http:ops\"]\n\
                 [grants.\"access:fleet\"]\nactions = [\"runs:read\"]\nchannels = \"all\"\n\
                 [access]\nissuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\njwks_file = {jwks:?}\n{store}",
                jwks = jwks.display().to_string(),
            );
            start(dir.path(), &config)
        })
        .collect();
    let (a, b) = (&replicas[0], &replicas[1]);
    let client = reqwest::Client::new();
    let viewer = |sub: &str| key.sign(&claims(ISSUER, AUDIENCE, sub));
    let feed = |sub: &str| {
        client
            .get(format!("{}/runs/stream", a.base))
            .header("cf-access-jwt-assertion", viewer(sub))
            .send()
    };
    let mut fleet = feed("fleet").await.unwrap();
    let mut alice = feed("alice").await.unwrap();
    assert_eq!(fleet.status(), 200);
    for feed in [&mut fleet, &mut alice] {
        let opened = read_until(feed, "event: sync", Duration::from_secs(30)).await;
        assert!(
            opened.contains("event: sync"),
            "the feed never synced: {opened}"
        );
    }

    // A run starts on replica B.
    let started: Value = serde_json::from_str(
        &client
            .post(format!("{}/ingress", b.base))
            .header("authorization", format!("Bearer {OPSBOT}"))
            .header("accept", "application/json")
            .body("@staller wait for me")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let id = started["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();

    // Replica A's feed carries it to the fleet viewer, and never to alice (no channels).
    let seen = read_until(&mut fleet, &id, Duration::from_secs(10)).await;
    assert!(
        seen.contains("event: upsert") && seen.contains(&id),
        "{seen}"
    );
    // A's index (from the shared store) lists it as live for the fleet viewer only.
    let index = |sub: &str| {
        client
            .get(format!("{}/runs", a.base))
            .header("cf-access-jwt-assertion", viewer(sub))
            .send()
    };
    let page = index("fleet").await.unwrap().text().await.unwrap();
    assert!(page.contains(&id), "{page}");
    let page = index("alice").await.unwrap().text().await.unwrap();
    assert!(!page.contains(&id));

    // Stopped through replica B: A's feed sees it end.
    let stop = client
        .post(format!("{}/ingress", b.base))
        .header("authorization", format!("Bearer {OPSBOT}"))
        .body(format!("runs stop {id}"))
        .send()
        .await
        .unwrap();
    assert!(stop.status().is_success(), "{:?}", stop.text().await);
    let seen = read_until(&mut fleet, "event: finished", Duration::from_secs(10)).await;
    assert!(
        seen.contains("event: finished") && seen.contains(&id),
        "{seen}"
    );
    let alice_saw = read_until(&mut alice, &id, Duration::from_millis(500)).await;
    assert!(
        !alice_saw.contains(&id),
        "another replica's run reached a viewer who may not read it"
    );
}
