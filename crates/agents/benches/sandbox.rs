//! What bubblewrap costs a `shell` call: `/bin/sh -c true` spawned bare and under a prepared
//! sandbox (network unshared, one deny_read stub, the policy file read-only), interleaved in
//! one run so both see the same machine. Prints the median and p99 of each and their ratio.
//!
//! Run with `scripts/bench.sh broker` (or `cargo bench -p agents --bench sandbox`). Needs bwrap.
// A bench binary: a broken fixture stops it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::time::{Duration, Instant};

use agents::sandbox::{Network, Sandbox, SandboxLimits, SandboxSpec};

const ROUNDS: usize = 300;

fn quantiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let workspace = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join(".env"), "SECRET=1\n").unwrap();
    std::fs::create_dir_all(workspace.path().join(".switchboard")).unwrap();
    std::fs::write(
        workspace.path().join(".switchboard/agent-policy.toml"),
        "deny_read = [\".env\"]\n",
    )
    .unwrap();
    let sandbox = Sandbox::prepare(&SandboxSpec {
        workspace: workspace.path().to_owned(),
        workspace_read_only: false,
        repository: false,
        deny_read: vec![".env".into()],
        protected: Vec::new(),
        read_only: vec![],
        memory: None,
        configured: Vec::new(),
        private: Vec::new(),
        network: Network::Unshared,
        proxy_socket: None,
        files: Vec::new(),
        scratch: scratch.path().to_owned(),
        limits: SandboxLimits::default(),
    })
    .unwrap();
    let (mut bare, mut boxed) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let status = tokio::process::Command::new("/bin/sh")
            .args(["-c", "true"])
            .current_dir(workspace.path())
            .status()
            .await
            .unwrap();
        assert!(status.success());
        bare.push(start.elapsed());
        let start = Instant::now();
        let status = sandbox
            .command("/bin/sh", ["-c", "true"])
            .status()
            .await
            .unwrap();
        assert!(status.success());
        boxed.push(start.elapsed());
    }
    let (bare_p50, bare_p99) = quantiles(bare);
    let (boxed_p50, boxed_p99) = quantiles(boxed);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("== one shell call, {ROUNDS} rounds interleaved");
    println!(
        "bare spawn            median {:>7.2} ms   p99 {:>7.2} ms",
        ms(bare_p50),
        ms(bare_p99)
    );
    println!(
        "under bubblewrap      median {:>7.2} ms   p99 {:>7.2} ms",
        ms(boxed_p50),
        ms(boxed_p99)
    );
    println!(
        "bubblewrap adds       {:>7.2} ms at the median ({:.1}x a bare spawn)",
        ms(boxed_p50) - ms(bare_p50),
        boxed_p50.as_secs_f64() / bare_p50.as_secs_f64()
    );
}
