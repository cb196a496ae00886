//! A repo's base: the commit every run in it starts from, and what the base says of runs.
//!
//! - A `--path` repo's base is its checked-out `HEAD` commit (uncommitted and untracked files
//!   are not part of it). A path that is not the top of a git repository is refused.
//! - A URL repo's base is the default branch of Switchboard's mirror of it
//!   (`<data_dir>/repos/<owner>/<name>.git`), fetched again before a run when its last fetch
//!   is older than `[repos] fetch_interval_seconds`.
//!
//! The project's policy (`.switchboard/agent-policy.toml`) is read here, from the base commit,
//! once, before the run's workspace exists: nothing any run writes is read as policy.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use authz_core::RepoSlug;
use broker::file::{PROJECT_POLICY_FILE, ProjectPolicy};
use store::Store;
use store::repos::{self, RepoSource};

use super::WorkspaceError;
use super::git::Git;
pub use super::tree::Entry;
use super::tree::parse_tree;

/// The most of a policy file read.
const MAX_POLICY_BYTES: usize = 1024 * 1024;

/// The ref a URL mirror keeps its fetched default branch at.
const MIRROR_BASE: &str = "refs/switchboard/base";
/// The file whose time says when a mirror was last fetched.
const FETCHED: &str = "switchboard-fetched";

/// The base a run's workspace is made from.
#[derive(Debug, Clone)]
pub struct Base {
    pub slug: RepoSlug,
    /// The repository holding the base (the user's `.git`, or the mirror).
    pub git_dir: PathBuf,
    /// Its object directory (a linked worktree's objects live in the common directory).
    pub objects: PathBuf,
    pub commit: String,
    /// The base commit's root tree.
    pub root_tree: String,
    /// `sha1` or `sha256`.
    pub object_format: String,
    /// Every entry of the base's tree, recursively, trees included.
    pub tree: Vec<Entry>,
    /// The project's policy, read from the base commit.
    pub policy: ProjectPolicy,
    /// The denied names that are files of the base (their bytes never leave the base).
    pub denied_entries: Vec<Entry>,
    /// The paths a run may read but never change: what git on a person's machine runs or
    /// reads as config from the tree, and the project's `protected` list ([`super::guarded`]).
    pub protected: Vec<String>,
}

impl Base {
    pub(super) fn git(&self) -> Git {
        Git::at(&self.git_dir)
    }

    /// Every name no kept change may touch, besides `.switchboard/`: the denied and the
    /// protected ones.
    pub(super) fn kept_out(&self) -> Vec<String> {
        let mut names = self.policy.deny_read.clone();
        names.extend(self.protected.iter().cloned());
        names
    }

    /// Whether `oid` has the shape of an object id of this repository's format.
    pub(super) fn is_object_id(&self, oid: &str) -> bool {
        oid.len() == self.commit.len() && oid.bytes().all(|b| b.is_ascii_hexdigit())
    }
}

/// Serialises fetches of one mirror in this process (another process's fetch is kept out by
/// git's own lock files).
#[derive(Default)]
pub struct MirrorLocks(Mutex<HashMap<RepoSlug, Arc<tokio::sync::Mutex<()>>>>);

impl MirrorLocks {
    fn of(&self, slug: &RepoSlug) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = match self.0.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.entry(slug.clone()).or_default().clone()
    }
}

/// How URL repos are kept.
#[derive(Debug, Clone, Copy)]
pub struct Fetching {
    pub interval: Duration,
}

/// The repo's source, or why it has none usable.
pub(crate) async fn source(
    store: &dyn Store,
    slug: &RepoSlug,
) -> Result<RepoSource, WorkspaceError> {
    let source = repos::source(store, slug)
        .await
        .map_err(|_| WorkspaceError::Store(slug.clone()))?
        .ok_or_else(|| WorkspaceError::NotConfigured(slug.clone()))?;
    match source {
        RepoSource::Unset | RepoSource::Unreadable => Err(WorkspaceError::BadSource(slug.clone())),
        usable => Ok(usable),
    }
}

/// The repository holding `slug`'s base as it is configured now (the checkout's git
/// directory, or the mirror), found without fetching or reading its tree: where a run's kept
/// commits are read back.
pub(crate) async fn repository(
    store: &dyn Store,
    data_dir: &Path,
    slug: &RepoSlug,
) -> Result<PathBuf, WorkspaceError> {
    match source(store, slug).await? {
        RepoSource::Path(path) => Ok(checkout(slug, Path::new(&path), data_dir).await?.0),
        RepoSource::Url(_) => Ok(mirror_dir(data_dir, slug)),
        RepoSource::Unset | RepoSource::Unreadable => Err(WorkspaceError::BadSource(slug.clone())),
    }
}

fn mirror_dir(data_dir: &Path, slug: &RepoSlug) -> PathBuf {
    data_dir
        .join("repos")
        .join(format!("{}.git", slug.as_str().to_ascii_lowercase()))
}

/// The base of `slug`, its tree listed and its policy read.
pub async fn resolve(
    store: &dyn Store,
    data_dir: &Path,
    locks: &MirrorLocks,
    fetching: Fetching,
    slug: &RepoSlug,
) -> Result<Base, WorkspaceError> {
    // A checkout's working tree: what its own config names inside it is protected.
    let mut worktree = None;
    let (git_dir, commit) = match source(store, slug).await? {
        RepoSource::Path(path) => {
            let found = checkout(slug, Path::new(&path), data_dir).await?;
            worktree = Some(std::fs::canonicalize(&path).unwrap_or_else(|_| PathBuf::from(&path)));
            found
        }
        RepoSource::Url(url) => mirror(data_dir, locks, fetching, slug, &url).await?,
        RepoSource::Unset | RepoSource::Unreadable => {
            return Err(WorkspaceError::BadSource(slug.clone()));
        }
    };
    let git = Git::at(&git_dir);
    let fail = |e: super::git::GitError| WorkspaceError::Git {
        slug: slug.clone(),
        detail: e.to_string(),
    };
    let facts = git
        .text([
            "rev-parse",
            "--show-object-format",
            "--path-format=absolute",
            "--git-path",
            "objects",
            &format!("{commit}^{{tree}}"),
        ])
        .await
        .map_err(fail)?;
    let mut lines = facts.lines();
    let (Some(object_format), Some(objects), Some(root_tree)) =
        (lines.next(), lines.next(), lines.next())
    else {
        return Err(WorkspaceError::Git {
            slug: slug.clone(),
            detail: format!("rev-parse answered {facts:?}"),
        });
    };
    let (object_format, objects, root_tree) = (
        object_format.to_owned(),
        PathBuf::from(objects),
        root_tree.to_owned(),
    );
    let listing = git
        .run(["ls-tree", "-r", "-t", "-z", "--full-tree", &commit])
        .await
        .map_err(fail)?;
    let tree = parse_tree(&listing).ok_or_else(|| WorkspaceError::Git {
        slug: slug.clone(),
        detail: "the base's tree listing did not read".to_owned(),
    })?;
    let short: String = commit.chars().take(12).collect();
    let policy = read_policy(&git, slug, &short, &tree).await?;
    let denied_entries = denied_entries(slug, &policy, &tree)?;
    let protected =
        super::guarded::guarded(&git, worktree.as_deref(), &policy.protected, &tree).await;
    Ok(Base {
        slug: slug.clone(),
        git_dir,
        objects,
        commit,
        root_tree,
        object_format,
        tree,
        policy,
        denied_entries,
        protected,
    })
}

/// A local checkout: its git directory and its `HEAD` commit. Never one inside the data
/// directory's `runs/` or `repos/`: those are runs' own workspaces and Switchboard's mirrors,
/// and a repository a run wrote is no base.
async fn checkout(
    slug: &RepoSlug,
    path: &Path,
    data_dir: &Path,
) -> Result<(PathBuf, String), WorkspaceError> {
    let not_repo = || WorkspaceError::NotARepository {
        slug: slug.clone(),
        path: path.display().to_string(),
    };
    if !path.is_dir() {
        return Err(WorkspaceError::MissingPath {
            slug: slug.clone(),
            path: path.display().to_string(),
        });
    }
    let ours = |real: &Path| {
        ["runs", "repos"].iter().any(|own| {
            data_dir
                .join(own)
                .canonicalize()
                .is_ok_and(|own| real.starts_with(own))
        })
    };
    if let Ok(real) = path.canonicalize()
        && ours(&real)
    {
        return Err(WorkspaceError::InDataDir {
            slug: slug.clone(),
            path: path.display().to_string(),
        });
    }
    // Found from the path alone: a `.git` directory or file at its top, or the path itself
    // when it is a bare repository. Never a repository above it.
    let git_dir = if path.join(".git").exists() {
        path.join(".git")
    } else {
        path.to_owned()
    };
    let git = Git::at(&git_dir);
    let dir = git
        .text(["rev-parse", "--absolute-git-dir"])
        .await
        .map_err(|_| not_repo())?;
    let git = Git::at(&dir);
    let commit = git
        .text(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .await
        .map_err(|_| WorkspaceError::NoCommits(slug.clone()))?;
    if commit.is_empty() {
        return Err(WorkspaceError::NoCommits(slug.clone()));
    }
    Ok((PathBuf::from(dir), commit))
}

/// A URL repo's mirror, cloned at its first run and fetched again when its last fetch is
/// older than the interval; its base commit.
async fn mirror(
    data_dir: &Path,
    locks: &MirrorLocks,
    fetching: Fetching,
    slug: &RepoSlug,
    url: &str,
) -> Result<(PathBuf, String), WorkspaceError> {
    let dir = mirror_dir(data_dir, slug);
    let lock = locks.of(slug);
    let _held = lock.lock().await;
    let fail = |detail: String| WorkspaceError::Clone {
        slug: slug.clone(),
        detail,
    };
    if !dir.join(FETCHED).is_file() {
        clone(data_dir, &dir, slug, url).await?;
    } else if fetched_before(&dir, fetching.interval) {
        let fetched = Git::at(&dir)
            .operator()
            .network([
                "fetch",
                "--quiet",
                "--no-tags",
                "--depth",
                "1",
                "origin",
                &format!("+HEAD:{MIRROR_BASE}"),
            ])
            .await;
        match fetched {
            Ok(()) => mark_fetched(&dir).map_err(&fail)?,
            // The base fetched last time stands; the run says so in its events.
            Err(e) => {
                tracing::warn!(repo = %slug, error = %e, "fetching a repo failed; its runs start from the last fetch")
            }
        }
    }
    let commit = Git::at(&dir)
        .text([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{MIRROR_BASE}^{{commit}}"),
        ])
        .await
        .map_err(|e| fail(e.to_string()))?;
    Ok((dir, commit))
}

/// Clones into a staging name, then renames into place (a clone cut short leaves nothing).
async fn clone(
    data_dir: &Path,
    dir: &Path,
    slug: &RepoSlug,
    url: &str,
) -> Result<(), WorkspaceError> {
    let fail = |detail: String| WorkspaceError::Clone {
        slug: slug.clone(),
        detail,
    };
    super::make_private_dir(data_dir)
        .map_err(|e| fail(format!("creating {}: {e}", data_dir.display())))?;
    let parent = dir.parent().unwrap_or(data_dir).to_path_buf();
    tokio::fs::create_dir_all(&parent)
        .await
        .map_err(|e| fail(format!("creating {}: {e}", parent.display())))?;
    let staging = parent.join(format!(
        ".clone-{}",
        crate::tokens::random_token().map_err(|e| fail(e.to_string()))?
    ));
    let cloned = Git::outside()
        .operator()
        .network([
            OsArg::from("clone"),
            "--quiet".into(),
            "--bare".into(),
            "--no-tags".into(),
            "--depth".into(),
            "1".into(),
            "--template=".into(),
            "--".into(),
            url.into(),
            staging.clone().into_os_string(),
        ])
        .await;
    let marked = match cloned {
        Ok(()) => {
            let git = Git::at(&staging);
            let head = git
                .text(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
                .await
                .map_err(|e| fail(e.to_string()))?;
            git.run(["update-ref", MIRROR_BASE, &head])
                .await
                .map_err(|e| fail(e.to_string()))?;
            mark_fetched(&staging).map_err(&fail)
        }
        Err(e) => Err(fail(e.detail)),
    };
    if let Err(e) = marked {
        let _ = tokio::fs::remove_dir_all(&staging).await;
        return Err(e);
    }
    if let Some(old) = dir.exists().then(|| dir.with_extension("git.old")) {
        // A mirror from before without its fetch mark: replaced.
        let _ = tokio::fs::rename(dir, &old).await;
        let _ = tokio::fs::remove_dir_all(&old).await;
    }
    match tokio::fs::rename(&staging, dir).await {
        Ok(()) => Ok(()),
        // Another process cloned it first: theirs stands.
        Err(_) if dir.join(FETCHED).is_file() => {
            let _ = tokio::fs::remove_dir_all(&staging).await;
            Ok(())
        }
        Err(e) => Err(fail(format!("moving the clone into place: {e}"))),
    }
}

type OsArg = std::ffi::OsString;

fn mark_fetched(dir: &Path) -> Result<(), String> {
    std::fs::write(dir.join(FETCHED), b"")
        .map_err(|e| format!("marking {} fetched: {e}", dir.display()))
}

/// Whether the mirror's last fetch is older than `interval` (an unreadable time counts).
fn fetched_before(dir: &Path, interval: Duration) -> bool {
    std::fs::metadata(dir.join(FETCHED))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_none_or(|age| age >= interval)
}

/// The policy file of the base commit, parsed whole: none is the empty policy. A policy a
/// case-insensitive checkout would read that is not the exact file (another spelling, a
/// `.switchboard` that is a link, a submodule or a file), a file too large or not UTF-8 is a
/// fault, like one that does not parse: the run is refused, never started without a policy.
async fn read_policy(
    git: &Git,
    slug: &RepoSlug,
    short: &str,
    tree: &[Entry],
) -> Result<ProjectPolicy, WorkspaceError> {
    let entry = super::policy_place::policy_entry(tree).map_err(|misplaced| {
        WorkspaceError::Policy(format!(
            "{slug}@{short}:{}: {}",
            misplaced.path, misplaced.why
        ))
    })?;
    let Some(entry) = entry else {
        return Ok(ProjectPolicy::default());
    };
    let file = format!("{slug}@{short}:{PROJECT_POLICY_FILE}");
    let fault = |message: &str| WorkspaceError::Policy(format!("{file}:0:0: {message}"));
    let bytes = git
        .run(["cat-file", "blob", &entry.oid])
        .await
        .map_err(|e| WorkspaceError::Git {
            slug: slug.clone(),
            detail: format!("{file} cannot be read: {e}"),
        })?;
    if bytes.len() > MAX_POLICY_BYTES {
        return Err(fault("is larger than 1 MiB"));
    }
    let text = String::from_utf8(bytes).map_err(|_| fault("is not UTF-8"))?;
    let dirs: BTreeSet<&str> = tree
        .iter()
        .filter(|e| e.kind == "tree")
        .map(|e| e.path.as_str())
        .collect();
    let is_dir = |name: &str| dirs.contains(name);
    broker::file::parse_project(&text, Path::new(&file), &is_dir)
        .map_err(|e| WorkspaceError::Policy(e.to_string()))
}

/// The base's entries at denied names. A denied name under a directory that is a symbolic
/// link in the base is refused: its bytes would be in the tree under the link's target.
fn denied_entries(
    slug: &RepoSlug,
    policy: &ProjectPolicy,
    tree: &[Entry],
) -> Result<Vec<Entry>, WorkspaceError> {
    let by_path: HashMap<&str, &Entry> = tree.iter().map(|e| (e.path.as_str(), e)).collect();
    // Each file's name as a case-insensitive file system sees it, folded once.
    let by_folded: HashMap<String, &Entry> = if policy.deny_read.is_empty() {
        HashMap::new()
    } else {
        tree.iter()
            .filter(|e| e.kind != "tree")
            .map(|e| (agents::names::fold_path(&e.path), e))
            .collect()
    };
    let mut out = Vec::new();
    for name in &policy.deny_read {
        let mut prefix = String::new();
        for segment in name.split('/') {
            if !prefix.is_empty() {
                if by_path.get(prefix.as_str()).is_some_and(|e| e.is_symlink()) {
                    return Err(WorkspaceError::Policy(format!(
                        "{slug}:{PROJECT_POLICY_FILE}: deny_read {name:?}: {prefix} is a symbolic link in the repository, so the name would reach another file; name the file at its real path"
                    )));
                }
                prefix.push('/');
            }
            prefix.push_str(segment);
        }
        // A file the repository spells otherwise (case, Unicode form, a trailing dot) is the
        // denied file on a case-insensitive checkout, and the stub would not cover it here:
        // the policy is refused rather than read as protecting nothing.
        if let Some(other) = by_folded
            .get(&agents::names::fold_path(name))
            .filter(|e| e.path != *name)
        {
            return Err(WorkspaceError::Policy(format!(
                "{slug}:{PROJECT_POLICY_FILE}: deny_read {name:?} is spelled otherwise in the repository ({:?}); write the name exactly as the repository spells it",
                other.path
            )));
        }
        let found = by_path.get(name.as_str());
        if found.is_none() {
            tracing::warn!(repo = %slug, deny_read = %name, "[workspace] a deny_read name matches no file of the base; it covers a file made later under exactly that name");
        }
        if let Some(entry) = found {
            if entry.is_symlink() {
                return Err(WorkspaceError::Policy(format!(
                    "{slug}:{PROJECT_POLICY_FILE}: deny_read {name:?} is a symbolic link in the repository; name the file it points to"
                )));
            }
            out.push((*entry).clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denied_name_under_a_linked_directory_is_refused() {
        let slug = RepoSlug::parse("acme/web").unwrap();
        let entry = |mode: &str, kind: &str, path: &str| Entry {
            mode: mode.into(),
            kind: kind.into(),
            oid: "00".into(),
            path: path.into(),
        };
        let tree = vec![
            entry("120000", "blob", "config"),
            entry("040000", "tree", "real"),
            entry("100644", "blob", "real/secret.toml"),
            entry("100644", "blob", ".env"),
            entry("120000", "blob", "pointer"),
        ];
        let policy = |names: &[&str]| ProjectPolicy {
            deny_read: names.iter().map(|n| n.to_string()).collect(),
            ..ProjectPolicy::default()
        };
        assert!(denied_entries(&slug, &policy(&["config/secret.toml"]), &tree).is_err());
        assert!(denied_entries(&slug, &policy(&["pointer"]), &tree).is_err());
        // Another spelling of a file the base has protects nothing here: refused.
        for other in [
            "REAL/secret.toml",
            "real/Secret.toml",
            ".ENV",
            "real/secret.toml.",
        ] {
            let refused = denied_entries(&slug, &policy(&[other]), &tree).unwrap_err();
            assert!(
                refused.to_string().contains("spelled otherwise"),
                "{refused}"
            );
        }
        let found = denied_entries(
            &slug,
            &policy(&["real/secret.toml", ".env", "absent"]),
            &tree,
        )
        .unwrap();
        let paths: Vec<&str> = found.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["real/secret.toml", ".env"]);
    }
}
