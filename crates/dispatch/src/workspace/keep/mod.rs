//! Keeping what a run changed, when it ends, as commits on `switchboard/<run id>` in the
//! repo's base repository (the user's checkout, or the mirror), on top of the base commit.
//!
//! What the run's readers see of keeping (the `branch` event, the reply, whether anything was
//! kept, a bound's refusal) depends only on what the run was given (its start's objects,
//! recorded before it started: [`given`](super::given)) and what it wrote, never on a lookup among the
//! base's objects. So keeping works in two places that never meet:
//!
//! - **The run's side** ([`plan`]): its object files are copied (regular files, through real
//!   directories only) into a repository of Switchboard's own and bounded by their headers;
//!   every object it wrote (every one whose name it was not given) is hashed again into a
//!   second repository (`keep.git`), which reads the run's start from the recorded structure
//!   and nothing else. Its branch's tip is read from its ref files (never through its config);
//!   what it left uncommitted is read by `git add -A` *inside a sandbox* (git run on the
//!   run's files may run what they name). There each commit's changes against the start are
//!   read and filtered: a change to a denied name or to `.switchboard/` is never kept (so the
//!   stub is never committed over the real file, and the branch merges cleanly), nor a
//!   submodule entry, a file that makes git run or fetch at checkout (`.gitattributes`,
//!   `.lfsconfig`, `.gitmodules`), or a symbolic link that leaves the project, reaches a
//!   protected name or goes through another link; and a kept change must name a blob the
//!   run has (one it wrote, or one it was given), else nothing is kept. A blob the run wrote
//!   is kept like any other file, whatever its bytes: a run keeps only blobs it holds.
//! - **The base's side** ([`admit`]): the kept blobs, hashed, go into a quarantine inside the
//!   base's objects (`index-pack --strict`); the kept trees and commits are built there on
//!   the base's own tree; each kept commit is checked again against the base's own objects;
//!   only then are the new objects moved in beside the base's, and the run's own branch moved
//!   from the base to the last kept commit. No other ref is written.

mod admit;
mod bounds;
mod changes;
mod plan;
mod snapshot;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use authz_core::RunId;

use super::WorkspaceError;
use super::base::Base;
use super::git::{Git, GitError};
use super::make::{RunDir, Start, branch};
use super::nofollow;

use super::given::{Given, Kind, Sized};
use admit::admit;
use bounds::{GIT_ALLOC_LIMIT, bounded, listed, within_bounds};
use plan::{Against, Planned, authored, changes_kept};
use snapshot::{copy_objects, snapshot};

/// The most commits of a run that are kept (its first-parent chain).
const MAX_COMMITS: usize = 100;

/// The most names of changes not kept that a run's `branch` event lists.
const MAX_DROPPED_NAMES: usize = 50;

/// What was kept of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub branch: String,
    /// The base commit the run started from (its own repository's start commit is another:
    /// it holds the stubs).
    pub start: String,
    /// The last kept commit, where the branch was made; `None` when nothing was kept (and no
    /// branch was made).
    pub tip: Option<String>,
    /// Commits on the branch beyond the base.
    pub commits: usize,
    /// Paths whose changes were not kept (denied names, `.switchboard/`, submodules): the
    /// first [`MAX_DROPPED_NAMES`] of them.
    pub dropped: BTreeSet<String>,
    /// How many changes were not kept, listed or not.
    pub dropped_count: usize,
    /// What the person should know (a branch that was gone, history that was rewritten).
    pub notes: Vec<String>,
}

fn fail(e: GitError) -> WorkspaceError {
    WorkspaceError::KeepFault(e.to_string())
}

/// Keeps the run's changes on its branch.
pub async fn keep(base: &Base, run: &RunId, dir: &RunDir) -> Result<Kept, WorkspaceError> {
    let work = dir.work();
    let start = Start::read(dir, base)?;
    let given = Given::load(&dir.given_listing(), &dir.given_git()).await?;
    let gather = dir.gather();
    Git::init(&gather, &base.object_format, true)
        .await
        .map_err(fail)?;
    copy_objects(&work, ".git/objects", &gather.join("objects")).await?;
    without_lookup_aids(&gather.join("objects/pack"))?;
    // The run's pack index may hide objects (a delta's base that no listing counts), so git
    // on the host is never let allocate more for one object than a kept one can need, and
    // never streams one past that bound either.
    let gathered = Git::at(&gather)
        .with_env("GIT_ALLOC_LIMIT", GIT_ALLOC_LIMIT.to_string())
        .with_config(WHOLE_IN_MEMORY);
    // Before any git on the host parses what the run wrote: no object past what it can hold.
    bounded(&gathered, &given).await?;
    let branch = branch(run);
    let mut kept = Kept {
        branch: branch.clone(),
        start: base.commit.clone(),
        tip: None,
        commits: 0,
        dropped: BTreeSet::new(),
        dropped_count: 0,
        notes: Vec::new(),
    };
    let tip = read_ref(&work, &format!("refs/heads/{branch}"), base)
        .filter(|tip| tip == &start.commit || base.is_object_id(tip));
    // What it left uncommitted, as git would commit it (its .gitignore holds), read in a
    // sandbox; its objects and tree id come out and are checked like any change. Read before
    // Switchboard writes any object here, so the sandbox is given only the run's own files.
    let from = tip.as_deref().unwrap_or(&start.commit);
    let uncommitted = snapshot(base, dir, from).await?;
    let objects = bounded(&gathered, &given).await?;
    let hashed = hashed(base, &gathered, &given, &objects, &dir.keep()).await?;
    // Sizes as the bytes are, now each object is named by them.
    within_bounds(&hashed, &given)?;
    let held: HashMap<String, Kind> = hashed.into_iter().map(|(oid, o)| (oid, o.kind)).collect();
    let mine = Git::at(dir.keep())
        .alternates(&given.store)
        .with_env("GIT_ALLOC_LIMIT", GIT_ALLOC_LIMIT.to_string());
    tokio::fs::write(dir.keep().join("shallow"), format!("{}\n", start.commit))
        .await
        .map_err(|e| WorkspaceError::KeepFault(format!("{}: {e}", dir.keep().display())))?;
    let commits = run_commits(&mine, &start, tip.as_deref(), &held, &mut kept).await?;
    let stub = mine
        .input(
            ["hash-object", "--stdin"],
            agents::sandbox::STUB_TEXT.as_bytes().to_vec(),
        )
        .await
        .map(|out| String::from_utf8_lossy(&out).trim().to_owned())
        .map_err(fail)?;
    let against = Against {
        start: &start,
        given: &given,
        held: &held,
        stub,
    };
    let mut planned = Vec::new();
    for commit in &commits {
        let candidate = mine
            .text(["rev-parse", &format!("{commit}^{{tree}}")])
            .await
            .map_err(fail)?;
        let changes = changes_kept(&mine, base, &against, &candidate, &mut kept).await?;
        let (author, message) = authored(&mine, commit).await?;
        planned.push(Planned {
            changes,
            author: Some(author),
            message,
        });
    }
    let changes = changes_kept(&mine, base, &against, &uncommitted, &mut kept).await?;
    planned.push(Planned {
        changes,
        author: None,
        message: format!("Uncommitted changes at the end of run {run}\n").into_bytes(),
    });
    let commits = admit(base, run, dir, &mine, &given, &held, &planned).await?;
    kept.commits = commits.len();
    kept.tip = commits.last().cloned();
    Ok(kept)
}

/// Config for git reading a run's objects: no object is streamed (so none passes
/// `GIT_ALLOC_LIMIT` unread), whatever its size.
const WHOLE_IN_MEMORY: &str = "core.bigFileThreshold=1024g";

/// Removes what would steer git's lookups in the run's packs (a multi-pack index, bitmaps):
/// an object is found in the one place its pack's own index names.
fn without_lookup_aids(pack_dir: &Path) -> Result<(), WorkspaceError> {
    let Ok(entries) = std::fs::read_dir(pack_dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("multi-pack-index") || name.ends_with(".bitmap") {
            std::fs::remove_file(entry.path()).map_err(|e| {
                WorkspaceError::KeepFault(format!("{}: {e}", entry.path().display()))
            })?;
        }
    }
    Ok(())
}

/// Every object the run wrote (each one in its repository whose name it was not given),
/// hashed again into `keep_dir`, each inflated and compressed again (never a pack's bytes
/// copied as they are): there each object is named by its bytes, whatever name the run
/// gave its file. Returns their names, kinds and sizes.
async fn hashed(
    base: &Base,
    gathered: &Git,
    given: &Given,
    objects: &HashMap<String, Sized>,
    keep_dir: &Path,
) -> Result<HashMap<String, Sized>, WorkspaceError> {
    Git::init(keep_dir, &base.object_format, true)
        .await
        .map_err(fail)?;
    let keeping = Git::at(keep_dir)
        .with_env("GIT_ALLOC_LIMIT", GIT_ALLOC_LIMIT.to_string())
        .with_config(WHOLE_IN_MEMORY);
    let mut written: Vec<&String> = objects.keys().filter(|oid| !given.names(oid)).collect();
    written.sort();
    if !written.is_empty() {
        let list: String = written.iter().map(|oid| format!("{oid}\n")).collect();
        gathered
            .pipe(
                &["pack-objects", "--stdout", "-q", "--no-reuse-object"],
                list.into_bytes(),
                &keeping,
                &["index-pack", "--stdin"],
            )
            .await
            .map_err(fail)?;
    }
    listed(&keeping).await
}

/// The run's commits to keep, oldest first: its branch's first-parent chain from its start
/// to `tip`, when `tip` is a commit it wrote that descends from the start. Otherwise none,
/// with a note saying why.
async fn run_commits(
    mine: &Git,
    start: &Start,
    tip: Option<&str>,
    held: &HashMap<String, Kind>,
    kept: &mut Kept,
) -> Result<Vec<String>, WorkspaceError> {
    let branch = kept.branch.clone();
    let Some(tip) = tip else {
        kept.notes.push(format!(
            "the run's branch {branch} was gone from its repository; only its working tree was kept"
        ));
        return Ok(Vec::new());
    };
    if tip == start.commit {
        return Ok(Vec::new());
    }
    let descends = held.get(tip) == Some(&Kind::Commit)
        && mine
            .holds(["merge-base", "--is-ancestor", &start.commit, tip])
            .await
            .map_err(fail)?;
    if !descends {
        kept.notes.push(format!(
            "the run's branch {branch} did not descend from its base; its commits were not kept, only its working tree"
        ));
        return Ok(Vec::new());
    }
    first_parents(mine, &start.commit, tip, kept).await
}

/// The run's commits from the base to `tip`, oldest first, following first parents.
async fn first_parents(
    git: &Git,
    base: &str,
    tip: &str,
    kept: &mut Kept,
) -> Result<Vec<String>, WorkspaceError> {
    let listed = git
        .text(["rev-list", "--first-parent", &format!("{base}..{tip}")])
        .await
        .map_err(fail)?;
    let mut commits: Vec<String> = listed.lines().map(str::to_owned).collect();
    if commits.len() > MAX_COMMITS {
        kept.notes.push(format!(
            "the run made {} commits; its last {MAX_COMMITS} were kept one by one, the rest only as their result",
            commits.len()
        ));
        commits.truncate(MAX_COMMITS);
    }
    commits.reverse();
    Ok(commits)
}

/// The value of `name` in the run's repository (`work/.git`), read from its ref files: a
/// loose ref (a regular file holding an object id), else `packed-refs`. A symbolic ref is
/// not followed, and neither is a link on the way (it could lead to another repository's
/// refs).
fn read_ref(work: &Path, name: &str, base: &Base) -> Option<String> {
    let git_dir = Path::new(".git");
    if let Some(text) = nofollow::read_regular(work, &git_dir.join(name), 256) {
        let oid = text.trim();
        return base.is_object_id(oid).then(|| oid.to_ascii_lowercase());
    }
    let packed = nofollow::read_regular(work, &git_dir.join("packed-refs"), 64 * 1024 * 1024)?;
    packed.lines().find_map(|line| {
        let (oid, refname) = line.split_once(' ')?;
        (refname == name && base.is_object_id(oid)).then(|| oid.to_ascii_lowercase())
    })
}
