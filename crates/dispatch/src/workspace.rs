//! A repo's workspace: the local path its source names (`store::repos`, the key family's one
//! owner), or a `git clone` of its URL into the data directory (cloned once, into a temporary
//! name first, then renamed into place).

use std::path::{Path, PathBuf};
use std::time::Duration;

use authz_core::RepoSlug;
use store::Store;
use store::repos::{self, RepoSource};

/// How long a clone may take.
const CLONE_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("repo {0} is not configured; add it with `repo add {0} --path P` or `--url U`")]
    NotConfigured(RepoSlug),
    #[error("repo {slug}: its path {path} is not a directory here")]
    MissingPath { slug: RepoSlug, path: String },
    /// The source itself is not repeated: a clone URL may carry credentials.
    #[error("repo {0} has no usable source; set one with `repo add {0} --path P` or `--url U`")]
    BadSource(RepoSlug),
    #[error("repo {slug}: git clone failed ({detail})")]
    Clone { slug: RepoSlug, detail: String },
    #[error("reading repo {0}'s config failed")]
    Store(RepoSlug),
}

/// The directory a run in `slug` works in.
pub async fn workspace(
    store: &dyn Store,
    data_dir: &Path,
    slug: &RepoSlug,
) -> Result<PathBuf, WorkspaceError> {
    let source = repos::source(store, slug)
        .await
        .map_err(|_| WorkspaceError::Store(slug.clone()))?
        .ok_or_else(|| WorkspaceError::NotConfigured(slug.clone()))?;
    match source {
        RepoSource::Path(path) => {
            let p = PathBuf::from(&path);
            if p.is_dir() {
                Ok(p)
            } else {
                Err(WorkspaceError::MissingPath {
                    slug: slug.clone(),
                    path,
                })
            }
        }
        RepoSource::Url(url) => clone_once(data_dir, slug, &url).await,
        RepoSource::Unset | RepoSource::Unreadable => Err(WorkspaceError::BadSource(slug.clone())),
    }
}

async fn clone_once(
    data_dir: &Path,
    slug: &RepoSlug,
    url: &str,
) -> Result<PathBuf, WorkspaceError> {
    let target = data_dir
        .join("repos")
        .join(slug.as_str().to_ascii_lowercase());
    if target.join(".git").is_dir() {
        return Ok(target);
    }
    let fail = |detail: String| WorkspaceError::Clone {
        slug: slug.clone(),
        detail,
    };
    let parent = target.parent().unwrap_or(data_dir).to_path_buf();
    tokio::fs::create_dir_all(&parent)
        .await
        .map_err(|e| fail(format!("creating {}: {e}", parent.display())))?;
    let staging = parent.join(format!(
        ".clone-{}",
        crate::tokens::random_token().map_err(|e| fail(e.to_string()))?
    ));
    let run = tokio::process::Command::new("git")
        .args(["clone", "--quiet", "--depth", "1", "--", url])
        .arg(&staging)
        .env("GIT_TERMINAL_PROMPT", "0")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(CLONE_TIMEOUT, run)
        .await
        .map_err(|_| fail(format!("timed out after {}s", CLONE_TIMEOUT.as_secs())))?
        .map_err(|e| fail(format!("could not run git: {e}")))?;
    if !output.status.success() {
        let _ = tokio::fs::remove_dir_all(&staging).await;
        // git's stderr can echo the URL (with credentials); name the exit status only.
        return Err(fail(format!("git exited with {}", output.status)));
    }
    match tokio::fs::rename(&staging, &target).await {
        Ok(()) => Ok(target),
        // Another run cloned it first: use theirs.
        Err(_) if target.join(".git").is_dir() => {
            let _ = tokio::fs::remove_dir_all(&staging).await;
            Ok(target)
        }
        Err(e) => Err(fail(format!("moving the clone into place: {e}"))),
    }
}
