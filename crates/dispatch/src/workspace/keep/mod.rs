//! Keeping what a run changed, when it ends, as commits on `switchboard/<run id>` in the
//! repo's base repository (the user's checkout, or the mirror), on top of the base commit.
//!
//! The run's repository and working tree were the run's to write, so nothing of them is
//! trusted: its objects are copied (regular files, through real directories only) into a
//! repository of Switchboard's own, its branch's tip is read from its ref files (never through
//! its config), and each commit is rebuilt as the base plus the changes it may keep. What it
//! left uncommitted is read by `git add -A` *inside a sandbox* (the working tree read-only, no
//! network): git run on the run's files may run what they name (a nested repository's filter,
//! its `status`), so it never runs on them outside one; only the objects it wrote (copied the
//! same way) and the tree's id come out. A change to a denied name or to `.switchboard/` is never
//! kept (so the stub is never committed over the real file, and the branch merges cleanly), a
//! submodule entry is not kept, nor a file that makes git run or fetch at checkout
//! (`.gitattributes`, `.lfsconfig`, `.gitmodules`), nor a symbolic link that leaves the
//! project, reaches a protected name or goes through another link, and a kept change must
//! refer to an object the run itself
//! has: an entry naming a blob it only knew by its hash is refused, never resolved from the
//! base's objects. What it left uncommitted is kept as one last commit. Only then are the new
//! objects written into the base repository (checked by git's `index-pack --strict`, which
//! hashes every object it is given), and each kept commit checked there again against the
//! base's own objects: a change to a protected name, or a blob that is neither the run's own
//! (in the pack just written) nor one the base shows outside the denied names, refuses the
//! whole branch. The copy's objects are only a working space: a run can forge what its own
//! object files say, never what the base repository holds. Only then is the run's own branch
//! moved, from the base to the last kept commit; no other ref is written.

mod admit;
mod bounds;
mod changes;
mod snapshot;

use std::collections::BTreeSet;
use std::path::Path;

use authz_core::RunId;

use super::WorkspaceError;
use super::base::Base;
use super::git::{Git, GitError};
use super::make::{RunDir, Start, branch};
use super::nofollow;

use admit::{admit, present, with_base_trees};
use bounds::{GIT_ALLOC_LIMIT, bounded};
use changes::{
    denied_only_blobs, escaping_link, link_target, links_after, parse_changes, protected,
    runs_programs,
};
use snapshot::{copy_objects, snapshot};

/// The most commits of a run that are kept (its first-parent chain).
const MAX_COMMITS: usize = 100;

/// The most names of changes not kept that a run's `branch` event lists.
const MAX_DROPPED_NAMES: usize = 50;

/// The most of a commit message kept.
const MAX_MESSAGE: usize = 64 * 1024;

/// What was kept of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub branch: String,
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
    let keep_dir = dir.keep();
    let start = Start::read(dir, base)?;
    Git::init(&keep_dir, &base.object_format, true)
        .await
        .map_err(fail)?;
    copy_objects(&work, ".git/objects", &keep_dir.join("objects")).await?;
    tokio::fs::write(keep_dir.join("shallow"), format!("{}\n", base.commit))
        .await
        .map_err(|e| WorkspaceError::KeepFault(format!("{}: {e}", keep_dir.display())))?;
    // The run's pack index may hide objects (a delta's base that no listing counts), so git
    // on the host is never let allocate more for one object than a kept one can need.
    let mine = Git::at(&keep_dir).with_env("GIT_ALLOC_LIMIT", GIT_ALLOC_LIMIT.to_string());
    // Before any git on the host parses what the run wrote: no object past what it can hold.
    bounded(&mine, base).await?;
    let branch = branch(run);
    let mut kept = Kept {
        branch: branch.clone(),
        commits: 0,
        dropped: BTreeSet::new(),
        dropped_count: 0,
        notes: Vec::new(),
    };
    let tip = read_ref(&work, &format!("refs/heads/{branch}"), base)
        .filter(|tip| tip == &start.commit || base.is_object_id(tip));
    let commits = match &tip {
        None => {
            kept.notes
                .push(format!("the run's branch {branch} was gone from its repository; only its working tree was kept"));
            Vec::new()
        }
        Some(tip) if tip == &start.commit => Vec::new(),
        Some(tip) => {
            let descends = mine
                .holds(["merge-base", "--is-ancestor", &start.commit, tip])
                .await
                .map_err(fail)?;
            if descends {
                first_parents(&mine, &start.commit, tip, &mut kept).await?
            } else {
                kept.notes.push(format!(
                    "the run's branch {branch} did not descend from its base; its commits were not kept, only its working tree"
                ));
                Vec::new()
            }
        }
    };
    // What it left uncommitted, as git would commit it (its .gitignore holds), read in a
    // sandbox; its objects and tree id come out and are checked like any change. Read before
    // Switchboard writes any object here, so the sandbox is given only the run's own files.
    let from = tip.as_deref().unwrap_or(&start.commit);
    let uncommitted = snapshot(base, dir, from).await?;
    bounded(&mine, base).await?;
    if start.commit != base.commit {
        with_base_trees(base, &mine).await?;
    }
    let index = dir.root.join("keep.index");
    let against = Against {
        start: &start,
        denied_only: denied_only_blobs(base),
    };
    let mut kept_commits: Vec<String> = Vec::new();
    let mut parent = base.commit.clone();
    let mut last_tree = base.root_tree.clone();
    for commit in &commits {
        let candidate = mine
            .text(["rev-parse", &format!("{commit}^{{tree}}")])
            .await
            .map_err(fail)?;
        let tree = kept_tree(&mine, base, &against, &candidate, &index, &mut kept).await?;
        if tree == last_tree {
            continue;
        }
        let (author, message) = authored(&mine, commit).await?;
        parent = commit_tree(&mine, run, &tree, &parent, Some(author), message).await?;
        kept_commits.push(parent.clone());
        last_tree = tree;
        kept.commits += 1;
    }
    let tree = kept_tree(&mine, base, &against, &uncommitted, &index, &mut kept).await?;
    if tree != last_tree {
        let message = format!("Uncommitted changes at the end of run {run}\n").into_bytes();
        parent = commit_tree(&mine, run, &tree, &parent, None, message).await?;
        kept_commits.push(parent.clone());
        kept.commits += 1;
    }
    if parent != base.commit {
        admit(base, run, &mine, &parent, &kept_commits).await?;
    }
    Ok(kept)
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

/// What a run's trees are compared against: where it started, and the blob ids no kept
/// change may name ([`denied_only_blobs`]), worked out once for all its commits.
struct Against<'a> {
    start: &'a Start,
    denied_only: std::collections::HashSet<&'a str>,
}

/// The tree kept for `candidate`: the base's, with `candidate`'s changes against the run's
/// start that may be kept.
async fn kept_tree(
    git: &Git,
    base: &Base,
    against: &Against<'_>,
    candidate: &str,
    index: &Path,
    kept: &mut Kept,
) -> Result<String, WorkspaceError> {
    let start = against.start;
    if candidate == start.tree {
        return Ok(base.root_tree.clone());
    }
    let raw = git
        .run([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            &start.tree,
            candidate,
        ])
        .await
        .map_err(fail)?;
    let changes = parse_changes(&raw)
        .ok_or_else(|| WorkspaceError::Keep("the run's changes did not read".to_owned()))?;
    let links = links_after(base, &changes);
    let mut keep = Vec::new();
    for change in changes {
        let unsafe_link = match link_target(git, &change).await? {
            Some(target) => {
                escaping_link(&change.path, &target, &base.policy.deny_read, &links).is_some()
            }
            None => false,
        };
        if protected(&change.path, &base.policy.deny_read)
            || change.new_mode == "160000"
            || runs_programs(&change.path)
            || unsafe_link
        {
            kept.dropped_count += 1;
            if kept.dropped.len() < MAX_DROPPED_NAMES {
                kept.dropped.insert(change.path);
            }
        } else {
            keep.push(change);
        }
    }
    // Whatever else holds, a denied file's blob never reaches the branch under any name
    // (unless the base shows the same bytes at a name it does not deny: an empty file).
    if let Some(leak) = keep
        .iter()
        .find(|c| against.denied_only.contains(c.new_oid.as_str()))
    {
        return Err(WorkspaceError::Keep(format!(
            "the run's change to {} names a denied file's contents; nothing of the run was kept",
            leak.path
        )));
    }
    if keep.is_empty() {
        return Ok(base.root_tree.clone());
    }
    present(git, &keep).await?;
    let edit = git.clone().index(index);
    edit.run(["read-tree", &base.root_tree])
        .await
        .map_err(fail)?;
    let zero = "0".repeat(base.commit.len());
    let mut info = Vec::new();
    // Deletions first, so a file can replace a directory and a directory a file.
    for change in keep.iter().filter(|c| c.deleted) {
        info.extend_from_slice(format!("0 {zero}\t{}\0", change.path).as_bytes());
    }
    for change in keep.iter().filter(|c| !c.deleted) {
        info.extend_from_slice(
            format!("{} {}\t{}\0", change.new_mode, change.new_oid, change.path).as_bytes(),
        );
    }
    edit.input(["update-index", "-z", "--index-info"], info)
        .await
        .map_err(fail)?;
    edit.text(["write-tree", "--missing-ok"])
        .await
        .map_err(fail)
}

/// A commit's author line (name, email, date) and message, as the run wrote them, cleaned of
/// control characters and bounded.
async fn authored(git: &Git, commit: &str) -> Result<([String; 3], Vec<u8>), WorkspaceError> {
    let raw = git
        .run(["log", "-1", "--format=%an%x00%ae%x00%aI%x00%B", commit])
        .await
        .map_err(fail)?;
    let text = String::from_utf8_lossy(&raw);
    let mut parts = text.splitn(4, '\0');
    let mut field = || {
        parts
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_control() && !matches!(c, '<' | '>'))
            .take(200)
            .collect::<String>()
    };
    let author = [field(), field(), field()];
    let message: String = text
        .splitn(4, '\0')
        .nth(3)
        .unwrap_or_default()
        .chars()
        .filter(|c| *c == '\n' || !c.is_control())
        .take(MAX_MESSAGE)
        .collect();
    Ok((author, message.into_bytes()))
}

/// A commit of `tree` on `parent`, committed by the run; authored as the run's own commit was
/// (when it made one).
async fn commit_tree(
    git: &Git,
    run: &RunId,
    tree: &str,
    parent: &str,
    author: Option<[String; 3]>,
    message: Vec<u8>,
) -> Result<String, WorkspaceError> {
    let name = format!("Switchboard run {run}");
    let email = format!("run-{run}@switchboard.invalid");
    let [a_name, a_email, a_date] =
        author.unwrap_or_else(|| [name.clone(), email.clone(), String::new()]);
    let mut commit = git
        .clone()
        .with_env("GIT_COMMITTER_NAME", name)
        .with_env("GIT_COMMITTER_EMAIL", email)
        .with_env("GIT_AUTHOR_NAME", a_name)
        .with_env("GIT_AUTHOR_EMAIL", a_email);
    if !a_date.is_empty() {
        commit = commit.with_env("GIT_AUTHOR_DATE", a_date);
    }
    let message = if message.iter().all(u8::is_ascii_whitespace) {
        format!("Changes of run {run}\n").into_bytes()
    } else {
        message
    };
    commit
        .input(["commit-tree", tree, "-p", parent], message)
        .await
        .map(|out| String::from_utf8_lossy(&out).trim().to_owned())
        .map_err(fail)
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
