//! On SQLite, a served `/runs` feed follows runs another process writes to the same store: a
//! run `switchboard ask` starts shows as live, and its end as finished, within a second or
//! two; still filtered per viewer.

use std::process::{Command, Stdio};
use std::time::Duration;

use access_api::testing::{SigningKey, claims, key_set, read_until};

use crate::common;

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "aud-sqlite-feed";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_another_process_starts_reaches_the_served_feed() {
    let key = SigningKey::generate("feed-key");
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, key_set(&[&key]).to_string()).unwrap();
    let config = format!(
        "[agents]\ndefault = \"echo\"\n[agents.echo]\n[agents.slow]\nbehaviour = \"answer\"\ndelay_ms = 4000\n\
         [grants.\"access:fleet\"]\nactions = [\"runs:read\"]\nchannels = \"all\"\n\
         [access]\nissuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\njwks_file = {jwks:?}\n",
        jwks = jwks.display().to_string(),
    );
    let (server, _) = common::start_replica(dir.path(), &config, &[]);
    let client = reqwest::Client::new();
    let feed = |sub: &str| {
        client
            .get(format!("{}/runs/stream", server.base))
            .header(
                "cf-access-jwt-assertion",
                key.sign(&claims(ISSUER, AUDIENCE, sub)),
            )
            .send()
    };
    let mut fleet = feed("fleet").await.unwrap();
    let mut alice = feed("alice").await.unwrap();
    for feed in [&mut fleet, &mut alice] {
        let opened = read_until(feed, "event: sync", Duration::from_secs(30)).await;
        assert!(opened.contains("event: sync"), "never synced: {opened}");
    }

    // Another process on the same store: `switchboard ask`, as cli:local.
    let asked = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["ask", "--agent", "slow", "--json", "from the other process"])
        .current_dir(dir.path())
        .env_remove("SWITCHBOARD_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let live = read_until(&mut fleet, "event: upsert", Duration::from_secs(30)).await;
    assert!(
        live.contains("event: upsert") && live.contains("cli:local"),
        "{live}"
    );
    let ended = read_until(&mut fleet, "event: finished", Duration::from_secs(30)).await;
    assert!(ended.contains("event: finished"), "{ended}");
    let out = asked.wait_with_output().unwrap();
    assert!(out.status.success());
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = run["run_id"].as_str().unwrap();
    // Both were this run's.
    assert!(live.contains(id), "{live}");
    assert!(ended.contains(id), "{ended}");
    // Alice may read no channel: the same process's run never reached her feed.
    let alice_saw = read_until(&mut alice, id, Duration::from_millis(500)).await;
    assert!(!alice_saw.contains(id), "{alice_saw}");
    drop(server);
}
