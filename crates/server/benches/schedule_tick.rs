//! One timer tick with 1,000 declared schedules, on the SQLite store a `serve` would use:
//! - the steady tick (nothing due: every schedule's next slot is known, so a tick compares
//!   instants and reads nothing);
//! - the first tick of a process (every schedule's latest timer slot, read in one query);
//! - a due tick (about 7 schedules a minute: each slot claimed, its command run and recorded).
//!
//! Run with `scripts/bench.sh schedule` (or `cargo bench -p server --bench schedule_tick`).
// A bench binary: a broken fixture stops it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::fmt::Write;
use std::time::{Duration, Instant};

use commands::Timestamp;
use schedule::Scheduler;
use server::config::{Source, parse};
use server::{App, Secrets};

const SCHEDULES: usize = 1000;
const ITERATIONS: usize = 2000;
const MINUTE: i64 = 60_000_000;
/// Monday 2026-11-30 00:00 UTC.
const T0: i64 = 1_795_996_800_000_000;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{what:<58} p50 {:>9.1} µs   p99 {:>9.1} µs   ({} samples)",
        percentile(&samples, 0.5).as_secs_f64() * 1e6,
        percentile(&samples, 0.99).as_secs_f64() * 1e6,
        samples.len()
    );
}

/// 1,000 schedules: hourly at minutes spread over the hour, weekly, daily in four zones; one
/// (`due-every-minute`) fires each minute, so a due tick has exactly one firing.
fn config(dir: &std::path::Path) -> String {
    let mut text = format!(
        "[server]\ndata_dir = \"{}\"\n[store]\nurl = \"sqlite://{}\"\n[agents]\ndefault = \"echo\"\n[agents.echo]\n",
        dir.join("data").display(),
        dir.join("sb.db").display()
    );
    let zones = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"];
    for i in 0..SCHEDULES - 1 {
        let cron = match i % 3 {
            0 => format!("{} * * * *", 1 + i % 58),
            1 => format!("{} {} * * MON", i % 60, i % 24),
            _ => format!("{} {} * * *", i % 60, 1 + i % 22),
        };
        write!(
            text,
            "[[schedules]]\nname = \"s{i:04}\"\ncron = \"{cron}\"\ntime_zone = \"{}\"\ncommand = \"help\"\n",
            zones[i % 4]
        )
        .unwrap();
        write!(
            text,
            "[grants.\"schedule:s{i:04}\"]\nactions = [\"help:read\"]\n"
        )
        .unwrap();
    }
    text.push_str("[[schedules]]\nname = \"due-every-minute\"\ncron = \"* * * * *\"\ncommand = \"help\"\n[grants.\"schedule:due-every-minute\"]\nactions = [\"help:read\"]\n");
    text
}

async fn build(dir: &std::path::Path) -> App {
    let c = parse(Source::File("bench.toml".into()), &config(dir)).unwrap();
    let secrets = Secrets::from_lookup(&c, |_| None).unwrap();
    App::build(c, secrets, store::ReplicaId::parse("bench").unwrap())
        .await
        .unwrap()
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let app = build(dir.path()).await;
        let s: &Scheduler = &app.scheduler;
        assert_eq!(s.len(), SCHEDULES + 1, "the built-in one too");
        // The first tick of fresh processes over the same store: every schedule's last slot
        // is read once. (The first process of all also claims nothing: it starts from now.)
        let mut first = Vec::new();
        for _ in 0..20 {
            let fresh = build(dir.path()).await;
            let t = Instant::now();
            let fired = fresh
                .scheduler
                .tick(
                    Timestamp::from_micros(T0 + 30_000_000),
                    &fresh.registry,
                    &fresh.services,
                )
                .await;
            first.push(t.elapsed());
            assert!(fired.is_empty());
        }
        s.tick(
            Timestamp::from_micros(T0 + 30_000_000),
            &app.registry,
            &app.services,
        )
        .await;
        // The steady tick: inside the minute, nothing is due.
        let mut steady = Vec::with_capacity(ITERATIONS);
        for i in 0..ITERATIONS {
            let at = Timestamp::from_micros(T0 + 30_000_000 + i as i64);
            let t = Instant::now();
            let fired = s.tick(at, &app.registry, &app.services).await;
            steady.push(t.elapsed());
            assert!(fired.is_empty());
        }
        // A due tick: each minute, `due-every-minute` (and whatever else falls due) fires.
        let mut due = Vec::new();
        let mut firings = 0;
        for m in 1..=200 {
            let at = Timestamp::from_micros(T0 + m * MINUTE);
            let t = Instant::now();
            let fired = s.tick(at, &app.registry, &app.services).await;
            due.push(t.elapsed());
            firings += fired.len();
            assert!(!fired.is_empty());
        }
        println!(
            "== schedule tick, {} declared schedules, SQLite",
            SCHEDULES + 1
        );
        report("steady tick (nothing due)", steady);
        report(
            "first tick of a process (every last slot, one query)",
            first,
        );
        report(
            &format!("due tick (over 200 minutes: {firings} firings, each a recorded run)"),
            due,
        );
    });
}
