//! The base's side of keeping: the kept blobs written into a quarantine inside the base's
//! objects (`index-pack --strict`), the kept trees and commits built there on the base's own
//! tree, the gate over each kept commit against the base's own objects, then the move. Only
//! objects Switchboard hashed or built reach the base; what the base holds is read here and
//! never answers a question about a name the run wrote.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

use authz_core::RunId;

use crate::workspace::WorkspaceError;
use crate::workspace::base::Base;
use crate::workspace::git::Git;
use crate::workspace::make::{RunDir, branch};

use super::bounds::GIT_ALLOC_LIMIT;
use super::changes::{
    Change, escaping_link, link_target, links_after, parse_changes, protected, runs_programs,
};
use super::fail;
use super::plan::Planned;
use crate::workspace::given::{Given, Kind};

/// Builds the kept commits in a quarantine inside the base's objects and, once the gate
/// passes them, moves them in and makes the run's branch at the last. Returns the kept
/// commits, oldest first: none kept makes no branch.
/// The quarantine reads the base's objects as alternates; a refused run leaves no object in
/// the base, and a crash leaves only the quarantine directory, which no git reads.
pub(super) async fn admit(
    base: &Base,
    run: &RunId,
    dir: &RunDir,
    mine: &Git,
    given: &Given,
    held: &HashMap<String, Kind>,
    planned: &[Planned],
) -> Result<Vec<String>, WorkspaceError> {
    let guard = Quarantine(
        base.objects
            .join(format!("{}{run}", crate::workspace::QUARANTINE_PREFIX)),
    );
    let quarantine = &guard.0;
    let io =
        |e: std::io::Error| WorkspaceError::KeepFault(format!("{}: {e}", quarantine.display()));
    tokio::fs::create_dir_all(quarantine.join("pack"))
        .await
        .map_err(io)?;
    let inside = base
        .git()
        .objects(quarantine)
        .alternates(&base.objects)
        .with_env("GIT_ALLOC_LIMIT", GIT_ALLOC_LIMIT.to_string());
    // The blobs the kept changes name that the run wrote (or was given and the base may not
    // have: the stub), hashed into the quarantine; a blob of the base's own tree is there.
    let sending: BTreeSet<&str> = planned
        .iter()
        .flat_map(|p| &p.changes)
        .filter(|c| !c.deleted)
        .map(|c| c.new_oid.as_str())
        .filter(|oid| held.contains_key(*oid) || given.stores(oid))
        .collect();
    let mut pack = None;
    let mut sent = HashSet::new();
    if !sending.is_empty() {
        let list: String = sending.iter().map(|oid| format!("{oid}\n")).collect();
        // Indexed without the base in view: git compares a name it already holds with the
        // bytes it is sent, and no such look at the base's objects is taken for the run's.
        let apart = base
            .git()
            .objects(quarantine)
            .with_env("GIT_ALLOC_LIMIT", GIT_ALLOC_LIMIT.to_string());
        let packed = mine
            .pipe(
                &["pack-objects", "--stdout", "-q"],
                list.into_bytes(),
                &apart,
                &["index-pack", "--stdin", "--strict"],
            )
            .await
            .map_err(fail)?;
        let name = pack_name(&packed)?;
        sent = pack_objects(&inside, quarantine, &name).await?;
        pack = Some(name);
    }
    let commits = build(base, run, &inside, &dir.root.join("keep.index"), planned).await?;
    let Some(tip) = commits.last() else {
        return Ok(commits);
    };
    gate(base, &inside, &sent, &commits).await?;
    // The pack first (its index last: git takes a pack once its index is there), then the
    // trees and commits built here.
    if let Some(name) = pack {
        for ext in ["pack", "rev", "idx"] {
            let from = quarantine.join(format!("pack/pack-{name}.{ext}"));
            let to = base.objects.join(format!("pack/pack-{name}.{ext}"));
            match tokio::fs::rename(&from, &to).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && ext == "rev" => {}
                Err(e) => return Err(io(e)),
            }
        }
    }
    move_loose(quarantine, &base.objects).map_err(io)?;
    // Made here, only now, and only where no ref of that name is (the all-zero old value):
    // Switchboard never moves a branch it did not make.
    let zero = "0".repeat(base.commit.len());
    base.git()
        .run([
            "update-ref",
            &format!("refs/heads/{}", branch(run)),
            tip,
            &zero,
        ])
        .await
        .map_err(fail)?;
    Ok(commits)
}

/// The kept commits, oldest first: each planned commit's changes applied to the base's tree,
/// committed on the one before (a commit whose tree is the one before's is not made).
async fn build(
    base: &Base,
    run: &RunId,
    inside: &Git,
    index: &Path,
    planned: &[Planned],
) -> Result<Vec<String>, WorkspaceError> {
    let mut commits = Vec::new();
    let mut parent = base.commit.clone();
    let mut last_tree = base.root_tree.clone();
    for plan in planned {
        let tree = kept_tree(inside, base, index, &plan.changes).await?;
        if tree == last_tree {
            continue;
        }
        parent = commit_tree(
            inside,
            run,
            &tree,
            &parent,
            plan.author.clone(),
            plan.message.clone(),
        )
        .await?;
        commits.push(parent.clone());
        last_tree = tree;
    }
    Ok(commits)
}

/// The base's tree with `changes` applied.
async fn kept_tree(
    inside: &Git,
    base: &Base,
    index: &Path,
    changes: &[Change],
) -> Result<String, WorkspaceError> {
    if changes.is_empty() {
        return Ok(base.root_tree.clone());
    }
    let edit = inside.clone().index(index);
    edit.run(["read-tree", &base.root_tree])
        .await
        .map_err(fail)?;
    let zero = "0".repeat(base.commit.len());
    let mut info = Vec::new();
    // Deletions first, so a file can replace a directory and a directory a file.
    for change in changes.iter().filter(|c| c.deleted) {
        info.extend_from_slice(format!("0 {zero}\t{}\0", change.path).as_bytes());
    }
    for change in changes.iter().filter(|c| !c.deleted) {
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

/// The names of the objects in the quarantine's pack `name`.
async fn pack_objects(
    inside: &Git,
    quarantine: &Path,
    name: &str,
) -> Result<HashSet<String>, WorkspaceError> {
    let index = quarantine.join(format!("pack/pack-{name}.idx"));
    let listing = inside
        .input(
            ["show-index"],
            std::fs::read(&index)
                .map_err(|e| WorkspaceError::KeepFault(format!("{}: {e}", index.display())))?,
        )
        .await
        .map_err(fail)?;
    Ok(String::from_utf8_lossy(&listing)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .collect())
}

/// Moves the loose objects git wrote into the quarantine (`xx/yyyy…`) beside the base's
/// (one the base already has stays as it is).
fn move_loose(quarantine: &Path, objects: &Path) -> std::io::Result<()> {
    for dir in std::fs::read_dir(quarantine)? {
        let dir = dir?;
        let name = dir.file_name();
        let fan_out = name.len() == 2
            && name
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_hexdigit());
        if !fan_out || !dir.file_type()?.is_dir() {
            continue;
        }
        let to = objects.join(&name);
        std::fs::create_dir_all(&to)?;
        for object in std::fs::read_dir(dir.path())? {
            let object = object?;
            let target = to.join(object.file_name());
            if std::fs::symlink_metadata(&target).is_err() {
                std::fs::rename(object.path(), target)?;
            }
        }
    }
    Ok(())
}

/// The quarantine directory, removed however admitting ends: done, refused, or dropped
/// half way (keeping's timeout cancels it), so no refused object stays in the base.
pub(super) struct Quarantine(std::path::PathBuf);

impl Drop for Quarantine {
    fn drop(&mut self) {
        if let Err(e) = crate::workspace::nofollow::remove_tree(&self.0) {
            tracing::warn!(error = %e, "[workspace] a quarantine could not be removed from the base's objects");
        }
    }
}

/// The name of the pack `index-pack` wrote (its last word on stdout).
pub(super) fn pack_name(out: &[u8]) -> Result<String, WorkspaceError> {
    String::from_utf8_lossy(out)
        .split_whitespace()
        .last()
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned)
        .ok_or_else(|| WorkspaceError::KeepFault("index-pack named no pack".to_owned()))
}

/// The last word, in the base repository: each kept commit, against the base commit,
/// changes no protected name and holds no submodule, and every blob it adds or changes is one
/// Switchboard hashed into the quarantine (`sent`) or one the base itself shows outside the
/// denied names.
pub(super) async fn gate(
    base: &Base,
    held: &Git,
    sent: &HashSet<String>,
    commits: &[String],
) -> Result<(), WorkspaceError> {
    let kept_out = base.kept_out();
    let refuse = |path: &str, why: &str| {
        WorkspaceError::Keep(format!(
            "the run's change to {path} {why}; nothing of the run was kept"
        ))
    };
    let mut allowed: HashSet<&str> = sent.iter().map(String::as_str).collect();
    let denied: Vec<&str> = base
        .denied_entries
        .iter()
        .map(|e| e.path.as_str())
        .collect();
    allowed.extend(
        base.tree
            .iter()
            .filter(|e| e.kind == "blob" && !denied.contains(&e.path.as_str()))
            .map(|e| e.oid.as_str()),
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
            if protected(&change.path, &kept_out) {
                return Err(refuse(
                    &change.path,
                    "touches a denied or protected name, or .switchboard/",
                ));
            }
            if change.new_mode == "160000" {
                return Err(refuse(&change.path, "is a submodule"));
            }
            if runs_programs(&change.path) {
                return Err(refuse(&change.path, "names programs git runs at checkout"));
            }
            if let Some(target) = link_target(held, &change).await?
                && let Some(why) = escaping_link(&change.path, &target, &kept_out, &links)
            {
                return Err(refuse(&change.path, &format!("is a link that {why}")));
            }
            if !change.deleted && !allowed.contains(change.new_oid.as_str()) {
                return Err(refuse(
                    &change.path,
                    "names contents the run did not write and the base does not show",
                ));
            }
        }
    }
    Ok(())
}
