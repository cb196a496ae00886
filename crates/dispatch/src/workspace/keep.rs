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

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use agents::names::fold;
use agents::sandbox::{ConfiguredBind, Network, POLICY_DIR, Sandbox, SandboxLimits, SandboxSpec};
use authz_core::RunId;
use tokio::io::AsyncReadExt;

use super::WorkspaceError;
use super::base::Base;
use super::git::{Git, GitError};
use super::make::{RunDir, Start, branch};
use super::nofollow;

/// The most commits of a run that are kept (its first-parent chain).
const MAX_COMMITS: usize = 100;
/// The most names of changes not kept that a run's `branch` event lists.
const MAX_DROPPED_NAMES: usize = 50;
/// The most of a commit message kept.
const MAX_MESSAGE: usize = 64 * 1024;
/// How long reading the run's working tree (in its sandbox) may take.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(120);

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
    WorkspaceError::Keep(e.to_string())
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
        .map_err(|e| WorkspaceError::Keep(format!("{}: {e}", keep_dir.display())))?;
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

/// Writes the kept commits into the base repository and moves the run's branch to `tip`.
/// The pack is hashed and checked (`index-pack --strict`) into a quarantine of its own inside
/// the base's object directory (reading the base's objects as alternates), the base decides
/// there ([`gate`]), and only then is it moved in beside the base's packs: a refused run
/// leaves no object in the base, and a crash leaves only the quarantine directory, which no
/// git reads.
async fn admit(
    base: &Base,
    run: &RunId,
    mine: &Git,
    tip: &str,
    commits: &[String],
) -> Result<(), WorkspaceError> {
    let guard = Quarantine(
        base.objects
            .join(format!("{}{run}", super::QUARANTINE_PREFIX)),
    );
    let quarantine = &guard.0;
    let io = |e: std::io::Error| WorkspaceError::Keep(format!("{}: {e}", quarantine.display()));
    tokio::fs::create_dir_all(quarantine.join("pack"))
        .await
        .map_err(io)?;
    let held = base
        .git()
        .objects(quarantine)
        .alternates(&base.objects)
        .with_env("GIT_ALLOC_LIMIT", GIT_ALLOC_LIMIT.to_string());
    async {
        let input = format!("{tip}\n^{}\n", base.commit).into_bytes();
        let packed = mine
            .pipe(
                &["pack-objects", "--revs", "--stdout", "-q"],
                input,
                &held,
                &["index-pack", "--stdin", "--strict"],
            )
            .await
            .map_err(fail)?;
        let name = pack_name(&packed)?;
        gate(base, &held, quarantine, &name, commits).await?;
        // The index last: git takes a pack once its index is there.
        for ext in ["pack", "rev", "idx"] {
            let from = quarantine.join(format!("pack/pack-{name}.{ext}"));
            let to = base.objects.join(format!("pack/pack-{name}.{ext}"));
            match tokio::fs::rename(&from, &to).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && ext == "rev" => {}
                Err(e) => return Err(io(e)),
            }
        }
        base.git()
            .run([
                "update-ref",
                &format!("refs/heads/{}", branch(run)),
                tip,
                &base.commit,
            ])
            .await
            .map_err(fail)
            .map(drop)
    }
    .await
}

/// The quarantine directory, removed however admitting ends: done, refused, or dropped
/// half way (keeping's timeout cancels it), so no refused object stays in the base.
struct Quarantine(std::path::PathBuf);

impl Drop for Quarantine {
    fn drop(&mut self) {
        if let Err(e) = super::nofollow::remove_tree(&self.0) {
            tracing::warn!(error = %e, "[workspace] a quarantine could not be removed from the base's objects");
        }
    }
}

/// The name of the pack `index-pack` wrote (its last word on stdout).
fn pack_name(out: &[u8]) -> Result<String, WorkspaceError> {
    String::from_utf8_lossy(out)
        .split_whitespace()
        .last()
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned)
        .ok_or_else(|| WorkspaceError::Keep("index-pack named no pack".to_owned()))
}

/// The largest tree, commit or tag of a run's that git on the host parses: a tree of a
/// directory of 100,000 files is about 5 MiB, and a 1.9 MB loose object can inflate to a 2 GB
/// tree that git holds whole (7.8 GB of one `diff-tree`).
pub const MAX_STRUCTURE_BYTES: u64 = 16 << 20;
/// The largest file of a run's that is kept on its branch.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// The most git on the host allocates at once while it reads a run's objects: twice the
/// largest object kept. A delta whose base the run's pack index hides (300 MiB of zeros are
/// 300 KB in a pack) is refused there rather than inflated.
pub const GIT_ALLOC_LIMIT: u64 = 2 * MAX_FILE_BYTES;

/// The most bytes, inflated, of all the objects a run wrote together: a run of many objects
/// each under its bound (nine 60 MiB files of one letter are a few MB on disk) would
/// otherwise have git on the host inflate and hash gigabytes.
pub const MAX_RUN_OBJECT_BYTES: u64 = 512 << 20;

/// Refuses to keep anything of a run one of whose objects is larger than
/// [`MAX_STRUCTURE_BYTES`] or, for a file, [`MAX_FILE_BYTES`], or whose objects together are
/// larger than [`MAX_RUN_OBJECT_BYTES`]. An object counts as the base repository's own (and
/// towards neither bound) only if the base holds an object of that name and exactly that
/// size. Sizes are read from the objects' headers (`cat-file --batch-check`), never by
/// inflating them; a name alone proves nothing, since the run wrote its own object files.
async fn bounded(mine: &Git, base: &Base) -> Result<(), WorkspaceError> {
    let check = "--batch-check=%(objectname) %(objecttype) %(objectsize)";
    let listing = mine
        .run(["cat-file", "--batch-all-objects", "--unordered", check])
        .await
        .map_err(fail)?;
    let objects = sized_objects(&listing)?;
    // Within both bounds counting the base's own objects too: nothing to ask the base.
    let all = objects.iter().try_fold(0u64, |sum, o| {
        (o.size <= limit_of(&o.kind))
            .then(|| sum.saturating_add(o.size))
            .filter(|sum| *sum <= MAX_RUN_OBJECT_BYTES)
    });
    if all.is_some() {
        return Ok(());
    }
    let names: String = objects.iter().map(|o| format!("{}\n", o.oid)).collect();
    // The base answers `<oid> missing` for a name it lacks; its own objects are trusted.
    let in_base = base
        .git()
        .input(["cat-file", check], names.into_bytes())
        .await
        .map_err(fail)?;
    let of_base: std::collections::HashSet<SizedObject> =
        sized_objects(&in_base)?.into_iter().collect();
    let mut total: u64 = 0;
    for o in objects.iter().filter(|o| !of_base.contains(*o)) {
        if o.size > limit_of(&o.kind) {
            return Err(WorkspaceError::Keep(format!(
                "the run wrote a {} of {} MiB ({}), more than the {} MiB kept of one; nothing of the run was kept",
                o.kind,
                o.size >> 20,
                o.oid,
                limit_of(&o.kind) >> 20
            )));
        }
        total = total.saturating_add(o.size);
        if total > MAX_RUN_OBJECT_BYTES {
            return Err(WorkspaceError::Keep(format!(
                "the run wrote more than the {} MiB of objects kept of one run; nothing of the run was kept",
                MAX_RUN_OBJECT_BYTES >> 20
            )));
        }
    }
    Ok(())
}

/// One line of `cat-file --batch-check`: an object's name, kind and size.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SizedObject {
    oid: String,
    kind: String,
    size: u64,
}

/// The objects `cat-file --batch-check` listed; `<oid> missing` lines are left out.
fn sized_objects(listing: &[u8]) -> Result<Vec<SizedObject>, WorkspaceError> {
    let unreadable = || {
        WorkspaceError::Keep(
            "the run's objects could not be listed; nothing of the run was kept".to_owned(),
        )
    };
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(listing).lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            [_, "missing"] => {}
            [oid, kind, size] => found.push(SizedObject {
                oid: (*oid).to_owned(),
                kind: (*kind).to_owned(),
                size: size.parse().map_err(|_| unreadable())?,
            }),
            _ => return Err(unreadable()),
        }
    }
    Ok(found)
}

/// The largest object of `kind` kept of a run.
fn limit_of(kind: &str) -> u64 {
    if kind == "blob" {
        MAX_FILE_BYTES
    } else {
        MAX_STRUCTURE_BYTES
    }
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

/// One change of a tree against the base's, from `diff-tree -r -z --raw`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Change {
    new_mode: String,
    new_oid: String,
    deleted: bool,
    path: String,
}

/// `:<old mode> <new mode> <old oid> <new oid> <status>\0<path>\0`…
fn parse_changes(raw: &[u8]) -> Option<Vec<Change>> {
    let mut fields = raw.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut out = Vec::new();
    while let Some(meta) = fields.next() {
        let meta = std::str::from_utf8(meta).ok()?.strip_prefix(':')?;
        let path = std::str::from_utf8(fields.next()?).ok()?;
        let parts: Vec<&str> = meta.split(' ').collect();
        let [_, new_mode, _, new_oid, status] = parts.as_slice() else {
            return None;
        };
        out.push(Change {
            new_mode: (*new_mode).to_owned(),
            new_oid: (*new_oid).to_owned(),
            deleted: status.starts_with('D'),
            path: path.to_owned(),
        });
    }
    Some(out)
}

/// Whether a change at `path` would touch a denied name or `.switchboard/`: the name itself,
/// anything below it, or a directory above it. Names are compared component by component
/// as a case-insensitive file system would see them (macOS and Windows checkouts of the
/// branch): letter case (full Unicode, `ſ` and `K` among it), canonical composition, the
/// characters HFS+ ignores and NTFS's trailing dots and spaces do not make a name new, and a
/// component shaped like an 8.3 short name (`PRODUC~1.TOM`) is taken as naming any protected
/// component at its place, since a Windows volume may have given it that alias. A written
/// path is also split at `\\` and each component cut at `:`, as Windows reads them.
fn protected(path: &str, deny_read: &[String]) -> bool {
    // Windows also splits on `\`, and opens `name:stream` (`name::$DATA` is the file itself).
    let written: Vec<String> = path
        .split(['/', '\\'])
        .map(|part| fold(part.split_once(':').map_or(part, |(name, _)| name)))
        .collect();
    let related = |name: &str| {
        let name: Vec<String> = name.split('/').map(fold).collect();
        written
            .iter()
            .zip(&name)
            .all(|(w, p)| w == p || short_name_shaped(w))
    };
    related(POLICY_DIR) || deny_read.iter().any(|d| related(d))
}

/// Whether `path` is a file that makes git on the user's machine run or reach what it names
/// when the branch is checked out: `.gitattributes` (a `filter=`, `diff=` or `merge=`
/// driver; `filter=lfs` runs git-lfs), `.lfsconfig` (where git-lfs fetches from, with the
/// user's credentials) and `.gitmodules` (URLs `submodule update` clones). A run's change to
/// one is never kept, in any directory.
fn runs_programs(path: &str) -> bool {
    let last = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let last = fold(last.split_once(':').map_or(last, |(name, _)| name));
    // An 8.3 short name (`GITATT~1`) may be the alias a Windows volume gave one of them.
    matches!(
        last.as_str(),
        ".gitattributes" | ".lfsconfig" | ".gitmodules"
    ) || short_name_shaped(&last)
}

/// The paths that are symbolic links once `changes` apply to the base (the base's links not
/// changed into something else, and every link the changes make), folded as a
/// case-insensitive file system sees them: `UP/..` follows the link `up` there.
fn links_after(base: &Base, changes: &[Change]) -> std::collections::HashSet<String> {
    let changed: std::collections::HashSet<&str> =
        changes.iter().map(|c| c.path.as_str()).collect();
    base.tree
        .iter()
        .filter(|e| e.is_symlink() && !changed.contains(e.path.as_str()))
        .map(|e| agents::names::fold_path(&e.path))
        .chain(
            changes
                .iter()
                .filter(|c| !c.deleted && c.new_mode == "120000")
                .map(|c| agents::names::fold_path(&c.path)),
        )
        .collect()
}

/// The ids of denied files' blobs that the base shows at no name it does not deny: the only
/// ids a kept change may never name (an empty `.env` shares its id with every empty file).
fn denied_only_blobs(base: &Base) -> std::collections::HashSet<&str> {
    let denied: std::collections::HashSet<&str> = base
        .denied_entries
        .iter()
        .map(|e| e.path.as_str())
        .collect();
    let shown: std::collections::HashSet<&str> = base
        .tree
        .iter()
        .filter(|e| e.kind == "blob" && !denied.contains(e.path.as_str()))
        .map(|e| e.oid.as_str())
        .collect();
    base.denied_entries
        .iter()
        .map(|e| e.oid.as_str())
        .filter(|oid| !shown.contains(oid))
        .collect()
}

/// The longest symbolic link target kept (Linux's PATH_MAX).
const MAX_LINK_TARGET: usize = 4096;

/// The target of a change that makes `path` a symbolic link, read from the run's blob (at
/// most [`MAX_LINK_TARGET`] bytes; a longer or unreadable one is a target that is refused).
async fn link_target(git: &Git, change: &Change) -> Result<Option<String>, WorkspaceError> {
    if change.deleted || change.new_mode != "120000" {
        return Ok(None);
    }
    let size = git
        .text(["cat-file", "-s", &change.new_oid])
        .await
        .ok()
        .and_then(|s| s.parse::<usize>().ok());
    if size.is_none_or(|size| size > MAX_LINK_TARGET) {
        // Not a link anyone can follow: refused as one that escapes.
        return Ok(Some("/".to_owned()));
    }
    let bytes = git
        .run(["cat-file", "blob", &change.new_oid])
        .await
        .map_err(fail)?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// Why a symbolic link at `path` to `target` is not kept, if it is not: an absolute target
/// (or a Windows one), one that leaves the repository, or one that reaches a protected name
/// or `.git`, read lexically from the link's directory. A checkout of the branch would
/// otherwise hand whoever follows the link (an editor, a build, a web server serving the
/// tree) a file the run was told to keep out of, or one outside the project.
fn escaping_link(
    path: &str,
    target: &str,
    deny_read: &[String],
    links: &std::collections::HashSet<String>,
) -> Option<&'static str> {
    if target.is_empty()
        || target.starts_with(['/', '\\', '~'])
        || target.contains('\0')
        || target.as_bytes().get(1) == Some(&b':')
    {
        return Some("points outside the repository");
    }
    let mut at: Vec<&str> = path.split('/').collect();
    at.pop();
    for part in target.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                if at.pop().is_none() {
                    return Some("points outside the repository");
                }
            }
            part => {
                at.push(part);
                // A link on the way (or at the end) is followed in a checkout, where `..`
                // after it climbs from its target: read lexically, a chain would hide that.
                if links.contains(&agents::names::fold_path(&at.join("/"))) {
                    return Some("goes through another link");
                }
            }
        }
    }
    if at.is_empty() {
        // The repository's root holds `.switchboard/` and every denied name.
        return Some("reaches a protected name");
    }
    let resolved = at.join("/");
    let reaches_git = at.iter().any(|p| fold(p) == ".git");
    (reaches_git || protected(&resolved, deny_read) || runs_programs(&resolved))
        .then_some("reaches a protected name")
}

/// Whether a folded component has the shape of a DOS 8.3 short name: up to six characters,
/// `~`, up to six digits, and an extension of up to three characters.
fn short_name_shaped(part: &str) -> bool {
    let Some((stem, rest)) = part.split_once('~') else {
        return false;
    };
    let (digits, extension) = rest.split_once('.').unwrap_or((rest, ""));
    (1..=6).contains(&stem.chars().count())
        && (1..=6).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && extension.chars().count() <= 3
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

/// The base commit and the trees of the base the run's repository did not hold (the root and
/// those above a denied file), copied from the base into the keeping repository, so the kept
/// trees are built on the base's own: only trees and the commit, never a blob. An object file
/// of the run's named like one of them with other bytes (a forged tree) refuses the whole
/// run: `index-pack` compares the bytes of every name it already holds. (A forged copy of
/// any other tree changes nothing kept: a tree the run did not change keeps its id, which the
/// base's gate reads in the base's own objects.)
async fn with_base_trees(base: &Base, mine: &Git) -> Result<(), WorkspaceError> {
    let naming = super::make::naming_denied(base);
    let mut list = format!("{}\n{}\n", base.commit, base.root_tree);
    for entry in base
        .tree
        .iter()
        .filter(|e| e.kind == "tree" && naming.contains(e.path.as_str()))
    {
        list.push_str(&entry.oid);
        list.push('\n');
    }
    base.git()
        .pipe(
            &["pack-objects", "--stdout", "-q"],
            list.into_bytes(),
            mine,
            &["index-pack", "--stdin"],
        )
        .await
        .map(drop)
        .map_err(|e| {
            WorkspaceError::Keep(format!(
                "the run's repository holds other bytes under a name of the base's ({e}); nothing of the run was kept"
            ))
        })
}

/// The last word, in the base repository, whose objects a run never wrote: each kept commit,
/// against the base commit, changes no protected name and holds no submodule, and every blob
/// it adds or changes is one the run wrote (an object of `packed`, the pack `index-pack`
/// just hashed and wrote) or one the base itself shows outside the denied names. A denied
/// file's blob, or any other object of the base's history, can pass neither.
async fn gate(
    base: &Base,
    held: &Git,
    quarantine: &Path,
    name: &str,
    commits: &[String],
) -> Result<(), WorkspaceError> {
    let refuse = |path: &str, why: &str| {
        WorkspaceError::Keep(format!(
            "the run's change to {path} {why}; nothing of the run was kept"
        ))
    };
    let index = quarantine.join(format!("pack/pack-{name}.idx"));
    let listing = held
        .input(
            ["show-index"],
            std::fs::read(&index)
                .map_err(|e| WorkspaceError::Keep(format!("{}: {e}", index.display())))?,
        )
        .await
        .map_err(fail)?;
    let mut allowed: std::collections::HashSet<String> = String::from_utf8_lossy(&listing)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .collect();
    let denied: Vec<&str> = base
        .denied_entries
        .iter()
        .map(|e| e.path.as_str())
        .collect();
    allowed.extend(
        base.tree
            .iter()
            .filter(|e| e.kind == "blob" && !denied.contains(&e.path.as_str()))
            .map(|e| e.oid.clone()),
    );
    for commit in commits {
        let raw = held
            .run([
                "diff-tree",
                "-r",
                "-z",
                "--no-renames",
                &base.commit,
                commit,
            ])
            .await
            .map_err(fail)?;
        let changes = parse_changes(&raw).ok_or_else(|| {
            WorkspaceError::Keep("a kept commit's changes did not read".to_owned())
        })?;
        let links = links_after(base, &changes);
        for change in changes {
            if protected(&change.path, &base.policy.deny_read) {
                return Err(refuse(
                    &change.path,
                    "touches a denied name or .switchboard/",
                ));
            }
            if change.new_mode == "160000" {
                return Err(refuse(&change.path, "is a submodule"));
            }
            if runs_programs(&change.path) {
                return Err(refuse(&change.path, "names programs git runs at checkout"));
            }
            if let Some(target) = link_target(held, &change).await?
                && let Some(why) =
                    escaping_link(&change.path, &target, &base.policy.deny_read, &links)
            {
                return Err(refuse(&change.path, &format!("is a link that {why}")));
            }
            if !change.deleted && !allowed.contains(&change.new_oid) {
                return Err(refuse(
                    &change.path,
                    "names contents the run did not write and the base does not show",
                ));
            }
        }
    }
    Ok(())
}

/// Every kept change's blob is in the run's own objects: a change that names a blob only by
/// its hash (a denied file's, say) is refused, never looked up in the base.
async fn present(git: &Git, changes: &[Change]) -> Result<(), WorkspaceError> {
    let wanted: Vec<&Change> = changes.iter().filter(|c| !c.deleted).collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let input: String = wanted.iter().map(|c| format!("{}\n", c.new_oid)).collect();
    let out = git
        .input(["cat-file", "--batch-check"], input.into_bytes())
        .await
        .map_err(fail)?;
    let out = String::from_utf8_lossy(&out);
    let answers: Vec<&str> = out.lines().collect();
    if answers.len() != wanted.len() {
        return Err(WorkspaceError::Keep(
            "the run's objects could not be checked".to_owned(),
        ));
    }
    for (change, answer) in wanted.iter().zip(answers) {
        if !answer.ends_with(|c: char| c.is_ascii_digit()) || !answer.contains(" blob ") {
            return Err(WorkspaceError::Keep(format!(
                "the run's change to {} refers to an object it does not have; nothing of the run was kept",
                change.path
            )));
        }
    }
    Ok(())
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

/// The tree of the run's working tree as `git add -A` sees it, on top of `start`: git runs in
/// a sandbox with the working tree read-only, the network unshared, and a scratch repository
/// of its own (its config Switchboard's and read-only, the kept objects linked in) as the
/// only thing it writes. The objects it wrote are then copied into the
/// keeping repository; its answer is one object id, checked for shape.
async fn snapshot(base: &Base, dir: &RunDir, start: &str) -> Result<String, WorkspaceError> {
    let keep_dir = dir.keep();
    let scratch = dir.root.join("snapshot.git");
    let io = |e: std::io::Error| WorkspaceError::Keep(format!("{}: {e}", scratch.display()));
    Git::init(&scratch, &base.object_format, true)
        .await
        .map_err(fail)?;
    let format_line = if base.object_format == "sha1" {
        String::new()
    } else {
        format!("[extensions]\n\tobjectFormat = {}\n", base.object_format)
    };
    let version = if format_line.is_empty() { 0 } else { 1 };
    std::fs::write(
        scratch.join("config"),
        format!(
            "[core]\n\trepositoryformatversion = {version}\n\tbare = false\n\thooksPath = /dev/null\n\tfsmonitor = false\n{format_line}"
        ),
    )
    .map_err(io)?;
    // The objects kept so far, linked in rather than named as an alternate: git freshens an
    // object it finds instead of writing it (it touches the file), and a file it cannot touch
    // (a read-only alternate) makes it write the object again, once per racily clean file.
    // Called before Switchboard writes any object there, the links are the run's own files;
    // nothing else of keep.git is in the sandbox.
    copy_objects(&keep_dir, "objects", &scratch.join("objects")).await?;
    let sandboxed = |e: agents::sandbox::SandboxError| {
        WorkspaceError::Keep(format!(
            "the run's working tree could not be read in a sandbox: {e}"
        ))
    };
    // Where the sandbox keeps its stub file (it covers no name here).
    let stub_dir = dir.root.join("snapshot-stub");
    std::fs::create_dir_all(&stub_dir).map_err(io)?;
    let sandbox = Sandbox::prepare(&SandboxSpec {
        workspace: dir.work(),
        workspace_read_only: true,
        repository: false,
        deny_read: Vec::new(),
        read_only: vec![scratch.join("config")],
        configured: vec![ConfiguredBind {
            path: scratch.clone(),
            writable: true,
        }],
        private: Vec::new(),
        network: Network::Unshared,
        scratch: stub_dir,
        limits: SandboxLimits::default(),
    })
    .map_err(sandboxed)?;
    // The run's own index spares hashing every file again (it runs only in here, and what it
    // claims is checked outside like any change); one that does not read is replaced by the
    // tree the run started from.
    // Linked, never copied (a sparse index of a terabyte costs nothing); git in the sandbox
    // writes a new index file beside it rather than into it.
    // `.git` itself is checked too: `symlink_metadata` follows every component but the last.
    let copied = std::fs::symlink_metadata(dir.work().join(".git")).is_ok_and(|m| m.is_dir())
        && std::fs::symlink_metadata(dir.work().join(".git/index")).is_ok_and(|m| m.is_file())
        && std::fs::hard_link(dir.work().join(".git/index"), scratch.join("index")).is_ok();
    if !copied {
        let _ = std::fs::remove_file(scratch.join("index"));
    }
    let script = "set -e; if ! { test -f \"$GIT_INDEX_FILE\" && git add -A 2>/dev/null; }; then \
                  rm -f \"$GIT_INDEX_FILE\"; git read-tree \"$1\"; git add -A; fi; \
                  git write-tree --missing-ok";
    let mut command = sandbox.command("/bin/sh", ["-c", script, "snapshot", start]);
    command
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/tmp")
        .env("GIT_DIR", &scratch)
        .env("GIT_COMMON_DIR", &scratch)
        .env("GIT_WORK_TREE", dir.work())
        .env("GIT_INDEX_FILE", scratch.join("index"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ALLOC_LIMIT", GIT_ALLOC_LIMIT.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| WorkspaceError::Keep(format!("could not start the snapshot: {e}")))?;
    let mut out = Vec::new();
    let mut err = Vec::new();
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    // Both at once, each kept up to its cap and the rest drained, so a flood on one (a
    // warning per file on stderr) never stalls the program.
    let reading = async {
        tokio::join!(
            read_capped(stdout.as_mut(), &mut out),
            read_capped(stderr.as_mut(), &mut err)
        );
        child.wait().await
    };
    let status = tokio::time::timeout(SNAPSHOT_TIMEOUT, reading)
        .await
        .map_err(|_| WorkspaceError::Keep("reading the run's working tree timed out".to_owned()))?
        .map_err(|e| WorkspaceError::Keep(format!("the snapshot: {e}")))?;
    if !status.success() {
        let said = String::from_utf8_lossy(&err);
        let first = said.lines().next().unwrap_or("no message");
        return Err(WorkspaceError::Keep(format!(
            "reading the run's working tree failed: {}",
            first.chars().take(300).collect::<String>()
        )));
    }
    let tree = String::from_utf8_lossy(&out)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned();
    if !base.is_object_id(&tree) {
        return Err(WorkspaceError::Keep(
            "reading the run's working tree gave no tree".to_owned(),
        ));
    }
    copy_objects(&scratch, "objects", &keep_dir.join("objects")).await?;
    Ok(tree)
}

/// Reads `pipe` into `kept` up to 4 KiB, then drains the rest.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(pipe: Option<&mut R>, kept: &mut Vec<u8>) {
    if let Some(pipe) = pipe {
        let mut capped = pipe.take(4096);
        let _ = capped.read_to_end(kept).await;
        let _ = tokio::io::copy(capped.into_inner(), &mut tokio::io::sink()).await;
    }
}

/// Links the object files under `root`/`objects` (loose objects and packs; regular files
/// only, never a link, never `info/`, so no alternates) into `to`, never through a link on
/// the way. Nothing there is nothing to copy.
async fn copy_objects(root: &Path, objects: &str, to: &Path) -> Result<(), WorkspaceError> {
    let (root, objects, to) = (root.to_owned(), objects.to_owned(), to.to_owned());
    let copied = tokio::task::spawn_blocking(move || {
        let from = match nofollow::open_dir(&root, Path::new(&objects)) {
            Ok(fd) => fd,
            Err(nix::errno::Errno::ENOENT) => return Ok(()),
            // A link in its place is never followed: it could lead to any repository's
            // objects.
            Err(_) => {
                return Err(WorkspaceError::Keep(format!(
                    "{} is not a directory of the run's own; nothing of its repository was kept",
                    root.join(&objects).display()
                )));
            }
        };
        nofollow::link_files(&from, &to, true)
            .map_err(|e| WorkspaceError::Keep(format!("{}: {e}", to.display())))
    })
    .await;
    copied.map_err(|e| WorkspaceError::Keep(format!("copying the run's objects: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_parse_and_bad_listings_do_not() {
        let raw = b":100644 100644 aa bb M\x00src/a.rs\x00:100644 000000 cc 00 D\x00gone\x00";
        let changes = parse_changes(raw).unwrap();
        assert_eq!(changes.len(), 2);
        assert_eq!(changes[0].path, "src/a.rs");
        assert!(!changes[0].deleted);
        assert!(changes[1].deleted);
        assert!(parse_changes(b":100644 aa M\x00x\x00").is_none());
        assert!(parse_changes(b":100644 100644 aa bb M\x00").is_none());
        assert!(parse_changes(b"100644 100644 aa bb M\x00x\x00").is_none());
        assert_eq!(parse_changes(b"").unwrap(), vec![]);
    }

    #[test]
    fn denied_names_and_the_policy_directory_are_protected_at_every_depth() {
        let deny = vec!["config/secret.toml".to_owned(), ".env".to_owned()];
        for path in [
            "config/secret.toml",
            "config/secret.toml/inner",
            "config",
            ".env",
            ".switchboard",
            ".switchboard/agent-policy.toml",
            ".switchboard/new",
            ".Switchboard/agent-policy.toml",
            ".SWITCHBOARD",
            ".switch\u{200c}board/agent-policy.toml",
            ".switchboard./agent-policy.toml",
            "Config/Secret.TOML",
            ".ENV",
            ".env ",
            ".\u{17f}witchboard/agent-policy.toml",
            "conf\u{131}g/secret.toml",
            "conf\u{130}g/SECRET.toml",
            "config/secret.to\u{301}ml",
            ".ENV\u{feff}",
            "SWITCH~1/agent-policy.toml",
            "CONFIG/SECRE~1.TOM",
            "CONFIG~2/secret.toml",
            "env~1",
            "config\\secret.toml",
            "config/secret.toml::$DATA",
            "config/secret.toml:hidden",
            ".switchboard:x/agent-policy.toml",
        ] {
            assert!(protected(path, &deny), "{path}");
        }
        for path in [
            "config/other.toml",
            "configs",
            ".envrc",
            "src/.switchboard-notes",
            "src/SWITCH~1/agent-policy.toml",
            "config/a~b",
            "backup~1234567",
            "config/secret~1.toml.old",
            "config/secret.toml.old:x",
        ] {
            assert!(!protected(path, &deny), "{path}");
        }
        // `ẞ`, `ß` and `ss` are one name to a case-insensitive file system.
        let deny = vec!["docs/stra\u{df}e.md".to_owned()];
        for path in [
            "docs/STRA\u{1e9e}E.md",
            "docs/strasse.md",
            "docs/STRASSE.MD",
        ] {
            assert!(protected(path, &deny), "{path}");
        }
    }
}
