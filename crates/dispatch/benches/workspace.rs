//! What a run's own workspace costs: a repository of 10,000 files (100 directories of 100,
//! about 1 KB each, one denied file), configured with `repo add --path`. Each round reads its
//! base (HEAD, the tree, the policy), makes the run's working tree and repository, keeps its
//! (empty) changes on its branch, and removes it; the first two are what a run waits for
//! before its agent starts. Prints the median and p90 of each step.
//!
//! Run with `scripts/bench.sh broker` (or `cargo bench -p dispatch --bench workspace`).
// A bench binary: a broken fixture stops it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::time::{Duration, Instant};

use authz_core::{ActorId, RepoSlug, RunId};
use dispatch::workspace::{Fetching, MirrorLocks, RunDir, keep, make, remove, resolve};

const ROUNDS: usize = 15;
const DIRS: usize = 100;
const FILES: usize = 100;

fn git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
            // No background gc after the big commit: it held gc's lock when ours ran.
            "-c",
            "gc.auto=0",
        ])
        .args(args)
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

/// The fixture repository, made once and kept in target/bench/.
fn repository() -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench/workspace-repo");
    if dir.join(".git").is_dir() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    for d in 0..DIRS {
        let sub = dir.join(format!("src/module{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..FILES {
            let body: String = (0..20)
                .map(|i| {
                    format!(
                        "pub fn f{i}() -> u64 {{ {} }}\n",
                        d * 1_000_000 + f * 100 + i
                    )
                })
                .collect();
            std::fs::write(sub.join(format!("file{f}.rs")), body).unwrap();
        }
    }
    std::fs::create_dir_all(dir.join(".switchboard")).unwrap();
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(
        dir.join(".switchboard/agent-policy.toml"),
        "deny_read = [\"config/production-secrets.toml\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("config/production-secrets.toml"),
        "token = \"x\"\n",
    )
    .unwrap();
    git(&dir, &["init", "-q"]);
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "10,000 files"]);
    git(&dir, &["gc", "-q"]);
    dir
}

fn quantiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() * 9 / 10]),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let repo = repository();
    let store = store::open("memory:").await.unwrap();
    let slug = RepoSlug::parse("acme/big").unwrap();
    store::repos::set(
        store.as_ref(),
        &slug,
        &store::repos::RepoSource::Path(repo.display().to_string()),
        &ActorId::cli_local(),
        store::wall_clock(),
    )
    .await
    .unwrap();
    println!(
        "a run's workspace in a repo of {} files, {ROUNDS} rounds each (median / p90, ms):",
        DIRS * FILES + 2
    );
    // The data directory on this machine's disk (one run's workspace removed before the next
    // is made, as runs come and go), then on a tmpfs.
    let disk = tempfile::tempdir_in(repo.join("..")).unwrap();
    series(store.as_ref(), &slug, disk.path(), "disk").await;
    if let Ok(shm) = tempfile::tempdir_in("/dev/shm") {
        series(store.as_ref(), &slug, shm.path(), "tmpfs").await;
    }
    // The fixture keeps no run branch from one bench run to the next.
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "git -C {} for-each-ref --format='delete %(refname)' refs/heads/switchboard/ | git -C {} update-ref --stdin",
            repo.display(),
            repo.display()
        ))
        .status();
}

async fn series(store: &dyn store::Store, slug: &RepoSlug, data: &Path, place: &str) {
    let locks = MirrorLocks::default();
    let fetching = Fetching {
        interval: Duration::from_secs(60),
    };
    let (mut based, mut made, mut kept, mut removed, mut start) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let run = RunId::parse(&store::new_id(store::wall_clock())).unwrap();
        let dir = RunDir::new(data, &run);
        let t = Instant::now();
        let base = resolve(store, data, &locks, fetching, slug).await.unwrap();
        let after_base = t.elapsed();
        let t2 = Instant::now();
        let workspace = make(Some(&base), &run, &dir).await.unwrap();
        let after_make = t2.elapsed();
        assert!(workspace.dir.join("src/module99/file99.rs").is_file());
        let t3 = Instant::now();
        keep(&base, &run, &dir).await.unwrap();
        kept.push(t3.elapsed());
        let t4 = Instant::now();
        remove(&dir).await;
        removed.push(t4.elapsed());
        based.push(after_base);
        made.push(after_make);
        start.push(after_base + after_make);
    }
    println!("  data directory on {place}:");
    for (what, samples) in [
        ("the base: HEAD, its tree, its policy", based),
        ("the working tree and the run's repository", made),
        ("before the agent starts (the two above)", start),
        ("keeping its changes on its branch (none)", kept),
        ("removing it", removed),
    ] {
        let (p50, p90) = quantiles(samples);
        println!("    {what:<44} {p50:>7.1} / {p90:>7.1}");
    }
}
