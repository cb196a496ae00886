//! Policy reloads: `serve` reads its config file again on SIGHUP and whenever the file's bytes
//! change (polled every `[server] config_poll_ms`, which also sees a Kubernetes ConfigMap's
//! symlink swap), and installs `[grants]`, `[groups]`, `[restrict]` and `[agent_policy]`'s
//! rules only when the whole file passes everything `config check` checks. A file at fault is
//! refused with its faults on the log, and the running policy stays. Each installed policy is
//! an audit line with its hash, and the hash this replica runs is recorded in the store
//! (`status`) and shown on `/readyz`.
//!
//! What a reload reaches: a new request decides under the new policy at once; a live run's
//! tool calls and its agent token from their next call; an open live feed at its next
//! recheck; a request already being served keeps the grants its caller was resolved with.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use authz_core::AgentName;
use commands::LivePolicy;
use sha2::Digest;
use store::{ReplicaId, Store};
use tokio_util::sync::CancellationToken;

use crate::config::{LoadedConfig, RELOADED_SECTIONS, Source};
use crate::{App, config_check, policy_in_force};

/// What a reload needs of the running server.
#[derive(Clone)]
pub struct Reloader {
    policy: Arc<LivePolicy>,
    store: Arc<dyn Store>,
    replica: ReplicaId,
    source: Source,
    /// The other sections as the server started with them (a reload leaves them so).
    running_sections: BTreeMap<String, String>,
    /// The agents the server runs: a table is only ever built for these.
    running_agents: BTreeSet<AgentName>,
    /// The file's bytes as the server loaded them.
    loaded: [u8; 32],
}

impl Reloader {
    pub fn of(app: &App) -> Reloader {
        Reloader {
            policy: app.services.policy.clone(),
            store: app.store.clone(),
            replica: app.replica.clone(),
            source: app.config.source.clone(),
            running_sections: app.config.section_hashes.clone(),
            running_agents: app.config.agents.clone(),
            loaded: app.config.text_digest,
        }
    }
}

/// What one reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reloaded {
    /// A new policy is in force (its hash, and the one it replaced).
    Installed { hash: String, previous: String },
    /// The file says the policy already in force.
    Unchanged { hash: String },
    /// The file did not pass the check: nothing changed.
    Refused { faults: usize },
}

/// Checks `text` (the file's bytes, read once) as `config check` would, and installs its
/// policy when it passes.
pub async fn reload(r: &Reloader, text: String) -> Reloaded {
    let source = &r.source;
    let check = {
        let source = source.clone();
        tokio::task::spawn_blocking(move || {
            config_check::check_text(source, &text, |k| std::env::var(k).ok())
        })
        .await
    };
    let outcome = match check {
        Ok(outcome) => outcome,
        Err(_) => return refused(source, &["the check itself failed".to_owned()]),
    };
    let config = match (outcome.faults.is_empty(), outcome.config) {
        (true, Some(config)) => config,
        (_, _) => {
            let faults: Vec<String> = outcome.faults.iter().map(ToString::to_string).collect();
            return refused(source, &faults);
        }
    };
    install(r, &config).await
}

fn refused(source: &Source, faults: &[String]) -> Reloaded {
    for fault in faults {
        tracing::error!("[policy] reload refused: {fault}");
    }
    tracing::error!(
        file = %source,
        faults = faults.len(),
        "[policy] reload refused: the file has faults (above); the policy in force stays. Fix them, check with `switchboard config check`, and save again or send SIGHUP"
    );
    Reloaded::Refused {
        faults: faults.len(),
    }
}

async fn install(r: &Reloader, config: &LoadedConfig) -> Reloaded {
    if config.agents != r.running_agents {
        // The table names agents (the chat baseline, restrict.agents): built for agents this
        // process does not run, it would be about other agents than the ones it runs.
        return refused(
            &r.source,
            &["the file declares other agents ([agents.<name>]) than the server runs; agents change only with a restart, so restart the server to install this file".to_owned()],
        );
    }
    let previous = r.policy.now().hash.clone();
    warn_of_restart_only_changes(&r.running_sections, config);
    if config.policy_hash == previous {
        tracing::info!(hash = %previous, "[policy] reload: the file's policy is the one in force");
        return Reloaded::Unchanged { hash: previous };
    }
    let next = policy_in_force(config);
    let hash = next.hash.clone();
    r.policy.replace(next);
    tracing::info!(
        target: crate::telemetry::AUDIT_TARGET,
        "[policy] reloaded hash={hash} previous={previous} file={} replica={}",
        r.source,
        r.replica.as_str()
    );
    record(r.store.as_ref(), &r.replica, &hash).await;
    Reloaded::Installed { hash, previous }
}

/// Records the hash this replica runs in the store, for `status`; a failure is logged only
/// (`/readyz` still shows the hash in force).
pub async fn record(store: &dyn Store, replica: &ReplicaId, hash: &str) {
    if let Err(e) = store.record_policy(replica, hash).await {
        tracing::warn!(error = %e.token(), "[policy] recording the policy's hash in the store failed");
    }
}

/// A reload installs the policy sections only: a change elsewhere waits for a restart, and
/// the log says so once per reload.
fn warn_of_restart_only_changes(running: &BTreeMap<String, String>, next: &LoadedConfig) {
    let changed = changed_sections(running, &next.section_hashes);
    if !changed.is_empty() {
        tracing::warn!(
            "[policy] the file also changes {}, which a reload does not install ({} only): they take effect when the server restarts",
            changed.join(", "),
            reloaded_sections()
        );
    }
}

/// The top-level sections whose values differ between two files, as `[name]`.
fn changed_sections(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    a.keys()
        .chain(b.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("[{k}]"))
        .collect()
}

/// The file's text and the hash of its bytes, read once; `None` when it cannot be read (in
/// the middle of a swap, say: the next look reads it again).
fn read(path: &PathBuf) -> Option<(String, [u8; 32])> {
    let text = std::fs::read_to_string(path).ok()?;
    let digest = sha2::Sha256::digest(text.as_bytes()).into();
    Some((text, digest))
}

/// Reloads on SIGHUP and, every `poll` (none: SIGHUP only), when the file's bytes changed and
/// then stayed the same for one more look (a file being written in place is read once it holds
/// still; a writer that pauses longer than two looks mid-file can still be caught, so deploys
/// write by rename, as a ConfigMap does), until `stop`. The embedded default has no file: nothing to reload, and SIGHUP
/// says so. The watch starts from the bytes the server loaded, so a change saved while it
/// started is seen.
pub fn spawn(
    r: Reloader,
    poll: Option<Duration>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "[policy] SIGHUP cannot be caught here; reload by saving the file");
            None
        }
    };
    tokio::spawn(async move {
        let path = match &r.source {
            Source::File(path) => Some(path.clone()),
            Source::EmbeddedDefault => None,
        };
        let mut seen = r.loaded;
        // A change seen once, waiting for a second look to find the same bytes.
        let mut settling: Option<[u8; 32]> = None;
        let mut tick = poll.map(|p| {
            let mut t = tokio::time::interval_at(tokio::time::Instant::now() + p, p);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        loop {
            let hup = async {
                match hangup.as_mut() {
                    Some(s) => s.recv().await.is_some(),
                    None => std::future::pending().await,
                }
            };
            let polled = async {
                match tick.as_mut() {
                    Some(t) => t.tick().await,
                    None => std::future::pending().await,
                }
            };
            let forced = tokio::select! {
                () = stop.cancelled() => return,
                _ = hup => true,
                _ = polled => false,
            };
            let Some(path) = &path else {
                if forced {
                    tracing::warn!(
                        "[policy] SIGHUP: the server runs the embedded default config, so there is no file to reload; start it with --config FILE"
                    );
                }
                continue;
            };
            let Some((text, digest)) = read(path) else {
                if forced {
                    tracing::error!(file = %r.source, "[policy] SIGHUP: the config file cannot be read; the policy in force stays");
                }
                continue;
            };
            if !forced {
                if digest == seen {
                    settling = None;
                    continue;
                }
                if settling != Some(digest) {
                    settling = Some(digest);
                    continue;
                }
            }
            settling = None;
            seen = digest;
            reload(&r, text).await;
        }
    })
}

/// Installs this process's SIGHUP handler (tokio keeps it for the process's life), so a
/// SIGHUP from now on never ends the process as the default action would: `serve` calls it
/// before anything else. One that comes before the reloader listens is not lost work: the
/// reloader compares the file with the bytes the server loaded when it starts.
pub fn take_over_hangups() {
    use tokio::signal::unix::{SignalKind, signal};
    if let Err(e) = signal(SignalKind::hangup()) {
        tracing::warn!(error = %e, "[policy] SIGHUP cannot be caught here; reload by saving the file");
    }
}

/// The sections a reload installs, for messages.
pub fn reloaded_sections() -> String {
    RELOADED_SECTIONS.map(|s| format!("[{s}]")).join(", ")
}
