//! The Slack directory as the dispatcher's stamp uses it: 10,000 stamps over 100 channels
//! (in rounds, 16 at a time, as concurrent runs would ask), against the fake Slack Web API on
//! loopback through slack-morphism's client. Counts the `conversations.info` calls (the goal:
//! at most one per channel, so ≤ 100) and times a stamp, first lookups and cached ones apart.
//!
//! Run with `scripts/bench.sh slack` (or `cargo bench -p slack --features testing --bench directory`).
// A bench binary: a broken fixture stops it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use authz_core::{ChannelDirectory, ChannelId};
use slack::{SlackApi, SlackChannelDirectory};
use test_support::slack::{Conversation, FakeSlack};

const STAMPS: usize = 10_000;
const CHANNELS: usize = 100;
const CONCURRENT: usize = 16;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{what:<44} p50 {:>8.1} µs   p99 {:>8.1} µs   max {:>8.1} µs   ({} samples)",
        percentile(&samples, 0.5).as_secs_f64() * 1e6,
        percentile(&samples, 0.99).as_secs_f64() * 1e6,
        samples.last().unwrap().as_secs_f64() * 1e6,
        samples.len()
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let fake = FakeSlack::new();
        for i in (0..CHANNELS).step_by(3) {
            fake.set_conversation(&format!("G{i}"), Conversation::Private);
        }
        let url = fake.serve().await.unwrap();
        let dir = Arc::new(SlackChannelDirectory::new(
            SlackApi::new(&url, "xoxb-bench").unwrap(),
            Duration::from_secs(600),
            slack::system_clock(),
        ));
        let channels: Vec<ChannelId> = (0..CHANNELS)
            .map(|i| {
                let prefix = if i % 3 == 0 { "G" } else { "C" };
                ChannelId::parse(&format!("slack:{prefix}{i}")).unwrap()
            })
            .collect();
        let mut first = Vec::new();
        let mut cached = Vec::new();
        let mut seen = [false; CHANNELS];
        let started = Instant::now();
        for round in 0..STAMPS / CONCURRENT {
            let tasks: Vec<_> = (0..CONCURRENT)
                .map(|k| {
                    // A spread that keeps coming back to every channel.
                    let i = (round * 7 + k * 13) % CHANNELS;
                    let (dir, channel) = (dir.clone(), channels[i].clone());
                    tokio::spawn(async move {
                        let t = Instant::now();
                        let v = dir.info(&channel).await;
                        (i, t.elapsed(), v)
                    })
                })
                .collect();
            for t in tasks {
                let (i, took, _) = t.await.unwrap();
                if seen[i] {
                    cached.push(took);
                } else {
                    first.push(took);
                }
            }
            for k in 0..CONCURRENT {
                seen[(round * 7 + k * 13) % CHANNELS] = true;
            }
        }
        let total = started.elapsed();
        let stamps = first.len() + cached.len();
        let calls = fake.calls_of("conversations.info").len();
        println!("== the Slack directory: {stamps} stamps over {CHANNELS} channels, {CONCURRENT} at a time");
        report("stamp, first lookup of a channel (API call)", first);
        report("stamp, cached", cached);
        println!(
            "conversations.info calls: {calls} (goal ≤ {CHANNELS}); {stamps} stamps in {:.1} ms",
            total.as_secs_f64() * 1e3
        );
        assert!(calls <= CHANNELS, "{calls} conversations.info calls for {CHANNELS} channels");
    });
}
