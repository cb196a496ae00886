//! A workspace per run.
//!
//! Every run whose agent works in a directory (a `command` agent, an `openai` agent with
//! tools) gets one made for it alone, `<data_dir>/runs/<run id>/work`, before its agent
//! starts, and removed when it ends (and, for a run a crash left behind, at the next start).
//! Without a repo it is an empty directory. In a repo it is made from the repo's base
//! ([`base`]): the policy is read from the base commit first, then the working tree and the
//! run's own repository are made without a denied file's bytes ([`make`]); when the run ends,
//! what it changed is kept as commits on `switchboard/<run id>` in the base repository
//! ([`keep`]), a branch made then and only when a commit was kept. No run writes the base's
//! checkout, refs or objects: only Switchboard makes that one branch there, after the run.
//! [`changes`] reads a run's kept changes back for `runs diff`.

mod base;
pub mod diff;
mod git;
mod given;
mod guarded;
mod keep;
mod make;
mod nofollow;
mod policy_place;
mod tree;

use std::path::Path;
use std::time::Duration;

use agents::Workspace;
use authz_core::{RepoSlug, RunId};
use store::Store;

pub use base::{Base, Fetching, MirrorLocks, resolve};
pub use keep::{Kept, keep};
pub use make::RunDir;
pub(crate) use make::runs_dir;

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("repo {0} is not configured; add it with `repo add {0} --path P` or `--url U`")]
    NotConfigured(RepoSlug),
    #[error("repo {slug}: its path {path} is not a directory here")]
    MissingPath { slug: RepoSlug, path: String },
    #[error(
        "repo {slug}: {path} is not the top of a git repository; a run works from a repository's committed HEAD, so point `repo add {slug} --path` at a checkout (or `git init` and commit there)"
    )]
    NotARepository { slug: RepoSlug, path: String },
    #[error(
        "repo {slug}: {path} is inside Switchboard's data directory, among runs' own workspaces or its mirrors; a repo's path must be a checkout of yours"
    )]
    InDataDir { slug: RepoSlug, path: String },
    #[error(
        "repo {0} has no commits; a run starts from the repository's HEAD commit, so commit first"
    )]
    NoCommits(RepoSlug),
    /// The source itself is not repeated: a clone URL may carry credentials.
    #[error("repo {0} has no usable source; set one with `repo add {0} --path P` or `--url U`")]
    BadSource(RepoSlug),
    #[error("repo {slug}: git clone failed ({detail})")]
    Clone { slug: RepoSlug, detail: String },
    #[error("repo {slug}: {detail}")]
    Git { slug: RepoSlug, detail: String },
    #[error("reading repo {0}'s config failed")]
    Store(RepoSlug),
    /// The project's policy file does not parse: `file:line:column: what was expected`.
    #[error("{0}")]
    Policy(String),
    #[error("the run's workspace could not be made: {0}")]
    Make(String),
    /// A reason Switchboard gives for keeping nothing (a bound, a refused change): safe to
    /// show whoever may read the run.
    #[error("the run's changes could not be kept: {0}")]
    Keep(String),
    /// A fault of the server while keeping (a file, git's own message): for the operator's
    /// log only.
    #[error("the run's changes could not be kept: {0}")]
    KeepFault(String),
}

impl WorkspaceError {
    /// What the run's caller and its readers are told: one sentence, never a path on the
    /// server or a program's own words (those are in [`Display`](std::fmt::Display), for the
    /// operator's log and the local command line).
    pub fn public(&self) -> String {
        const LOG: &str = "the operator's log has the details";
        match self {
            WorkspaceError::NotConfigured(_)
            | WorkspaceError::NoCommits(_)
            | WorkspaceError::BadSource(_)
            | WorkspaceError::Store(_)
            | WorkspaceError::Policy(_)
            | WorkspaceError::Keep(_) => self.to_string(),
            WorkspaceError::MissingPath { slug, .. } => format!(
                "repo {slug}: its configured path is not a directory on the server; set it again with `repo add {slug} --path P`"
            ),
            WorkspaceError::NotARepository { slug, .. } => format!(
                "repo {slug}: its configured path is not the top of a git repository; a run works from a repository's committed HEAD, so point `repo add {slug} --path` at a checkout"
            ),
            WorkspaceError::InDataDir { slug, .. } => format!(
                "repo {slug}: its configured path is inside Switchboard's data directory; a repo's path must be a checkout of yours"
            ),
            WorkspaceError::Clone { slug, .. } => {
                format!("repo {slug} could not be cloned; {LOG}")
            }
            WorkspaceError::Git { slug, .. } => {
                format!("repo {slug} could not be read with git; {LOG}")
            }
            WorkspaceError::Make(_) => format!("the run's workspace could not be made; {LOG}"),
            WorkspaceError::KeepFault(_) => {
                format!("the run's changes could not be kept; {LOG}")
            }
        }
    }
}

/// How repos are kept (`[repos]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepoSettings {
    /// A URL repo is fetched again before a run when its last fetch is older than this.
    pub fetch_interval: Duration,
    /// A run's branch `switchboard/<run id>` is deleted once the run is older than this;
    /// `None` keeps them all.
    pub branch_retention: Option<Duration>,
}

impl Default for RepoSettings {
    fn default() -> Self {
        RepoSettings {
            fetch_interval: Duration::from_secs(60),
            branch_retention: Some(Duration::from_secs(30 * 24 * 3600)),
        }
    }
}

/// Makes `dir` (and what it lacks above it) readable by its owner alone, and keeps it so:
/// the data directory holds every run's working tree and the mirrors. A directory this process
/// may not change (another user's) is left as it is.
pub fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode();
    if mode & 0o077 != 0 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

/// Makes the workspace of a run in `base` (or of a run without a repo), in `dir`.
pub async fn make(
    base: Option<&Base>,
    run: &RunId,
    dir: &RunDir,
) -> Result<Workspace, WorkspaceError> {
    if let Some(data_dir) = dir.data_dir() {
        make_private_dir(data_dir)
            .map_err(|e| WorkspaceError::Make(format!("{}: {e}", data_dir.display())))?;
    }
    // No branch is made in the base now: keeping makes it when the run ends, and only when
    // it kept a commit.
    let made = match base {
        Some(base) => make::repo(base, run, dir).await,
        None => make::scratch(dir).await,
    };
    if made.is_err() {
        remove(dir).await;
    }
    made
}

/// Removes a run's directory; one already gone is not an error. Nothing a run did keeps its
/// files: directories made unreadable (`chmod 000`) are opened again, and a tree of any
/// depth is removed without recursion ([`nofollow::remove_tree`]).
pub async fn remove(dir: &RunDir) {
    let root = dir.root.clone();
    let removed = tokio::task::spawn_blocking(move || nofollow::remove_tree(&root)).await;
    if let Ok(Err(e)) = removed
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.root.display(), error = %e, "removing a run's workspace failed");
    }
}

/// Removes the workspaces of runs that have ended (a crash left them): run when a process that
/// can start runs starts. A directory whose run is live (another process's, sharing the data
/// directory), is not in this store, or cannot be looked up is left. Returns how many were
/// removed.
pub async fn sweep(store: &dyn Store, data_dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(runs_dir(data_dir)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(run) = name.to_str().and_then(|n| RunId::parse(n).ok()) else {
            continue;
        };
        match store.get_run(&run).await {
            Ok(Some(record)) if !record.status.is_live() => {}
            _ => continue,
        }
        remove(&RunDir::new(data_dir, &run)).await;
        removed += 1;
    }
    removed
}

/// The prefix of a quarantine's directory in a base's objects (`admit` in [`keep`]).
pub(crate) const QUARANTINE_PREFIX: &str = "switchboard-incoming-";
/// A quarantine older than this is one a crash left: keeping ends within five minutes.
const STALE_QUARANTINE: Duration = Duration::from_secs(15 * 60);

/// Removes the quarantines a crash left in the base's object directory (git never reads
/// them, but they hold a refused run's objects and its disk). Only a directory named
/// `switchboard-incoming-<run id>` and untouched for [`STALE_QUARANTINE`] is removed, so a
/// run another process is keeping right now keeps its own. Returns how many were removed.
pub async fn sweep_quarantines(base: &Base) -> usize {
    let objects = base.objects.clone();
    let sweep = move || {
        let Ok(entries) = std::fs::read_dir(&objects) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let ours = name
                .to_str()
                .and_then(|n| n.strip_prefix(QUARANTINE_PREFIX))
                .is_some_and(|id| RunId::parse(id).is_ok() && store::id_time(id).is_some());
            let stale = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|at| at.elapsed().is_ok_and(|age| age > STALE_QUARANTINE));
            if !(ours && stale) {
                continue;
            }
            match nofollow::remove_tree(&entry.path()) {
                Ok(()) => removed += 1,
                Err(e) => {
                    tracing::warn!(path = %entry.path().display(), error = %e, "[workspace] a left-over quarantine could not be removed")
                }
            }
        }
        removed
    };
    tokio::task::spawn_blocking(sweep).await.unwrap_or(0)
}

/// Deletes the base repository's run branches (`switchboard/<run id>`) of runs older than
/// `retention`. A branch whose name is not a run id is left alone.
pub async fn prune(base: &Base, retention: Duration, now: store::Timestamp) {
    let listed = base
        .git()
        .text([
            "for-each-ref",
            "--format=%(refname)",
            "refs/heads/switchboard/",
        ])
        .await;
    let Ok(listed) = listed else {
        return;
    };
    let oldest = now
        .micros()
        .saturating_sub(i64::try_from(retention.as_micros()).unwrap_or(i64::MAX));
    for name in listed.lines() {
        let Some(id) = name.strip_prefix("refs/heads/switchboard/") else {
            continue;
        };
        let old =
            RunId::parse(id).is_ok() && store::id_time(id).is_some_and(|at| at.micros() < oldest);
        if old && let Err(e) = base.git().run(["update-ref", "-d", name]).await {
            tracing::warn!(repo = %base.slug, error = %e, "deleting an old run branch failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use authz_core::ActorId;
    use store::Timestamp;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    #[tokio::test]
    async fn only_quarantines_a_crash_left_are_swept() {
        let repo = tempfile::tempdir().unwrap();
        git(repo.path(), &["init", "-q"]);
        git(
            repo.path(),
            &["commit", "-q", "--allow-empty", "-m", "init"],
        );
        let store = store::open("memory:").await.unwrap();
        let slug = RepoSlug::parse("acme/web").unwrap();
        store::repos::set(
            store.as_ref(),
            &slug,
            &store::repos::RepoSource::Path(repo.path().display().to_string()),
            &ActorId::cli_local(),
            store::wall_clock(),
        )
        .await
        .unwrap();
        let data = tempfile::tempdir().unwrap();
        let fetching = Fetching {
            interval: Duration::from_secs(60),
        };
        let base = resolve(
            store.as_ref(),
            data.path(),
            &MirrorLocks::default(),
            fetching,
            &slug,
        )
        .await
        .unwrap();
        let run = store::new_id(store::wall_clock());
        let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
        let make = |name: &str, old: bool| {
            let dir = base.objects.join(name);
            std::fs::create_dir_all(dir.join("pack")).unwrap();
            std::fs::write(dir.join("pack/x.pack"), b"refused").unwrap();
            if old {
                std::fs::File::open(&dir)
                    .unwrap()
                    .set_modified(hour_ago)
                    .unwrap();
            }
            dir
        };
        let crashed = make(&format!("{QUARANTINE_PREFIX}{run}"), true);
        let keeping = make(
            &format!("{QUARANTINE_PREFIX}{}", store::new_id(store::wall_clock())),
            false,
        );
        let foreign = make("switchboard-incoming-not-a-run", true);
        let other = make("incoming-1234", true);
        assert_eq!(sweep_quarantines(&base).await, 1);
        assert!(!crashed.exists());
        for left in [keeping, foreign, other] {
            assert!(left.join("pack/x.pack").exists(), "{}", left.display());
        }
        git(repo.path(), &["fsck", "--no-progress"]);
    }

    #[tokio::test]
    async fn run_branches_older_than_the_retention_are_deleted_and_no_other() {
        let repo = tempfile::tempdir().unwrap();
        git(repo.path(), &["init", "-q"]);
        git(
            repo.path(),
            &["commit", "-q", "--allow-empty", "-m", "init"],
        );
        let store = store::open("memory:").await.unwrap();
        let slug = RepoSlug::parse("acme/web").unwrap();
        store::repos::set(
            store.as_ref(),
            &slug,
            &store::repos::RepoSource::Path(repo.path().display().to_string()),
            &ActorId::cli_local(),
            store::wall_clock(),
        )
        .await
        .unwrap();
        let data = tempfile::tempdir().unwrap();
        let fetching = Fetching {
            interval: Duration::from_secs(60),
        };
        let base = resolve(
            store.as_ref(),
            data.path(),
            &MirrorLocks::default(),
            fetching,
            &slug,
        )
        .await
        .unwrap();
        let now = store::wall_clock();
        let day = 24 * 3600 * 1_000_000;
        let old = store::new_id(Timestamp::from_micros(now.micros() - 40 * day));
        let recent = store::new_id(Timestamp::from_micros(now.micros() - day));
        for name in [old.as_str(), recent.as_str(), "not-a-run"] {
            git(repo.path(), &["branch", &format!("switchboard/{name}")]);
        }
        git(repo.path(), &["branch", "main-work"]);
        prune(&base, Duration::from_secs(30 * 24 * 3600), now).await;
        let left = git(repo.path(), &["branch", "--format=%(refname:short)"]);
        let left: Vec<&str> = left.lines().collect();
        assert!(
            !left.contains(&format!("switchboard/{old}").as_str()),
            "{left:?}"
        );
        for kept in [
            format!("switchboard/{recent}"),
            "switchboard/not-a-run".into(),
            "main-work".into(),
        ] {
            assert!(left.contains(&kept.as_str()), "{kept} went: {left:?}");
        }
    }
}
