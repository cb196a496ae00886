//! Faults across replicas, through the binary, on Postgres: one replica killed with SIGKILL
//! mid-run. Its live runs become `interrupted` once its lease lapses (their events kept), the
//! other replica keeps serving, and only the dead replica's runs are touched.
//! `scripts/replicas-check.sh` runs this with the other replica suites against a private
//! cluster of its own, and restarts that cluster under load.

use crate::common;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TOKEN: &str = "faults-token-0123456789";

fn config(i: usize, store: &str) -> String {
    format!(
        "[server]\nreplica_id = \"fault-{i}\"\nheartbeat_seconds = 1\nlease_seconds = 3\n\
         [agents]\ndefault = \"echo\"\n[agents.echo]\n[agents.staller]\nbehaviour = \"stall\"\n\
         [grants.\"http:opsbot\"]\nactions = [\"runs:read\", \"runs:write\", \"agent:run:staller\"]\nchannels = [\"http:ops\"]\n{store}"
    )
}

/// `text` posted to a replica's `/ingress` as the ops bot: the status and the JSON reply.
async fn ingress(client: &reqwest::Client, base: &str, text: &str) -> (u16, Value) {
    let response = client
        .post(format!("{base}/ingress"))
        .bearer_auth(TOKEN)
        .header("accept", "application/json")
        .body(text.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    let reply = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (status, reply)
}

async fn start_stalled(client: &reqwest::Client, base: &str) -> String {
    let (_, started) = ingress(client, base, "@staller wait for me").await;
    started["run_id"].as_str().unwrap().to_owned()
}

async fn status(client: &reqwest::Client, base: &str, run: &str) -> (String, Value) {
    let (_, reply) = ingress(client, base, &format!("runs get {run}")).await;
    let status = reply["status"].as_str().unwrap_or_default().to_owned();
    (status, reply)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_runs_are_interrupted_and_only_its() {
    let store = common::postgres_store_section();
    let tokens = json!({TOKEN: {"subject": "opsbot", "channel": "http:ops"}}).to_string();
    let env = [("SWITCHBOARD_INGRESS_TOKENS", tokens.as_str())];
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let (mut a, _) = common::start_replica(dirs[0].path(), &config(0, &store), &env);
    let (b, _) = common::start_replica(dirs[1].path(), &config(1, &store), &env);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let on_a = start_stalled(&client, &a.base).await;
    let on_b = start_stalled(&client, &b.base).await;
    // Recorded `queued` first; A marks it `running` as its agent starts, which B may be asked
    // about a moment before. B's own run is waited for likewise, so that "untouched" below
    // means still running.
    let until = Instant::now() + Duration::from_secs(30);
    for run in [&on_a, &on_b] {
        loop {
            let (first, reply) = status(&client, &b.base, run).await;
            if first == "running" {
                break;
            }
            assert!(
                first == "queued" && Instant::now() < until,
                "{run} should be running: {reply}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let reply = loop {
        let (now, reply) = status(&client, &b.base, &on_a).await;
        if now == "interrupted" {
            break reply;
        }
        assert!(
            Instant::now() < deadline,
            "the dead replica's run is still {now}: {reply}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let shown = reply.to_string();
    assert!(
        shown.contains("wait for me"),
        "its request is kept: {shown}"
    );
    // The living replica's own run is untouched, and it keeps serving.
    assert_eq!(status(&client, &b.base, &on_b).await.0, "running");
    let healthy = client
        .get(format!("{}/readyz", b.base))
        .send()
        .await
        .unwrap();
    assert_eq!(healthy.status(), 200);
    let (events, _) = ingress(&client, &b.base, &format!("runs events {on_a}")).await;
    assert_eq!(events, 200);
    drop(b);
}
