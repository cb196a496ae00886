//! Two `switchboard serve` processes on one Postgres, both with the Slack surface on against
//! a fake Slack Web API, receive the same signed events (as Slack's retries can reach any
//! replica): each event starts exactly one run.

use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::json;
use test_support::slack::{FakeSlack, callback, signed_headers};

use crate::common::Replica;

const SECRET: &str = "replica-test-signing-secret";

fn start(dir: &Path, config: &str) -> Replica {
    let env = [
        ("SLACK_BOT_TOKEN", "xoxb-replicas"),
        ("SLACK_SIGNING_SECRET", SECRET),
    ];
    let (replica, summary) = common::start_replica(dir, config, &env);
    assert!(
        summary.contains("events at POST /slack/events"),
        "{summary}"
    );
    replica
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_receiving_the_same_events_start_one_run_each() {
    let fake = FakeSlack::new();
    let api_url = fake.serve().await.unwrap();
    let store = common::postgres_store_section();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let replicas: Vec<Replica> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let config = format!(
                "[server]\nreplica_id = \"replica-{i}\"\n[agents]\ndefault = \"echo\"\nmax_per_actor = 100\nmax_concurrent = 100\n[agents.echo]\n[slack]\napi_url = \"{api_url}\"\n{store}"
            );
            start(dir.path(), &config)
        })
        .collect();
    let client = reqwest::Client::new();
    const EVENTS: usize = 20;
    let mut deliveries = Vec::new();
    for n in 0..EVENTS {
        let body = callback(
            &format!("EvReplica{n}"),
            json!({"type": "app_mention", "user": "U1", "channel": "C1",
                "ts": format!("1700000100.{n:06}"), "text": format!("<@UBOT> event {n}")}),
        );
        // Each event reaches both replicas at once, and one of them again as a retry.
        for (i, r) in replicas.iter().chain(replicas.first()).enumerate() {
            let mut req = client
                .post(format!("{}/slack/events", r.base))
                .body(body.clone());
            for (k, v) in signed_headers(SECRET, now(), &body) {
                req = req.header(k, v);
            }
            if i == 2 {
                req = req.header("x-slack-retry-num", "1");
            }
            deliveries.push(tokio::spawn(async move {
                req.send().await.unwrap().status().as_u16()
            }));
        }
    }
    for d in deliveries {
        assert_eq!(d.await.unwrap(), 200);
    }
    // Every event's run finishes and posts its outcome; then nothing more arrives.
    let updates = fake.settled("chat.update", EVENTS, 60).await;
    assert_eq!(updates.len(), EVENTS, "{updates:?}");
    let working = fake.calls_of("chat.postMessage");
    assert_eq!(working.len(), EVENTS);
    let threads: std::collections::BTreeSet<&str> = working
        .iter()
        .map(|c| c.param("thread_ts").unwrap())
        .collect();
    assert_eq!(
        threads.len(),
        EVENTS,
        "one working message per event's thread"
    );
    // Follow-ups without a mention, one per thread, each to one replica: about half reach the
    // replica that did not answer the thread, which takes it from the store's record.
    let mut followups = Vec::new();
    for n in 0..EVENTS {
        let body = callback(
            &format!("EvFollow{n}"),
            json!({"type": "message", "channel_type": "channel", "user": "U1", "channel": "C1",
                "ts": format!("1700000200.{n:06}"), "thread_ts": format!("1700000100.{n:06}"),
                "text": format!("follow-up {n}")}),
        );
        let mut req = client
            .post(format!("{}/slack/events", replicas[n % 2].base))
            .body(body.clone());
        for (k, v) in signed_headers(SECRET, now(), &body) {
            req = req.header(k, v);
        }
        followups.push(tokio::spawn(async move {
            req.send().await.unwrap().status().as_u16()
        }));
    }
    for f in followups {
        assert_eq!(f.await.unwrap(), 200);
    }
    let updates = fake.settled("chat.update", 2 * EVENTS, 60).await;
    assert_eq!(updates.len(), 2 * EVENTS, "every follow-up was taken, once");
    drop(replicas);
    // The store holds exactly one run per event (read with the CLI, as cli:local).
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .current_dir(dirs[0].path())
        .env_remove("SWITCHBOARD_CONFIG")
        .args([
            "runs", "list", "--status", "all", "--limit", "100", "--json",
        ])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let runs = listed["runs"].as_array().unwrap();
    assert_eq!(
        runs.len(),
        2 * EVENTS,
        "events and follow-ups, each one run"
    );
    let requests: std::collections::BTreeSet<&str> = runs
        .iter()
        .map(|r| r["request"].as_str().unwrap())
        .collect();
    assert_eq!(requests.len(), 2 * EVENTS);
}
