//! Writing the kept objects into the base repository: a quarantine, `index-pack --strict`, the
//! gate over each kept commit against the base's own objects, then the move.

use std::path::Path;

use authz_core::RunId;

use crate::workspace::WorkspaceError;
use crate::workspace::base::Base;
use crate::workspace::git::Git;
use crate::workspace::make::branch;

use super::bounds::GIT_ALLOC_LIMIT;
use super::changes::{
    Change, escaping_link, link_target, links_after, parse_changes, protected, runs_programs,
};
use super::fail;

/// Writes the kept commits into the base repository and moves the run's branch to `tip`.
/// The pack is hashed and checked (`index-pack --strict`) into a quarantine of its own inside
/// the base's object directory (reading the base's objects as alternates), the base decides
/// there ([`gate`]), and only then is it moved in beside the base's packs: a refused run
/// leaves no object in the base, and a crash leaves only the quarantine directory, which no
/// git reads.
pub(super) async fn admit(
    base: &Base,
    run: &RunId,
    mine: &Git,
    tip: &str,
    commits: &[String],
) -> Result<(), WorkspaceError> {
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

/// The base commit and the trees of the base the run's repository did not hold (the root and
/// those above a denied file), copied from the base into the keeping repository, so the kept
/// trees are built on the base's own: only trees and the commit, never a blob. An object file
/// of the run's named like one of them with other bytes (a forged tree) refuses the whole
/// run: `index-pack` compares the bytes of every name it already holds. (A forged copy of
/// any other tree changes nothing kept: a tree the run did not change keeps its id, which the
/// base's gate reads in the base's own objects.)
pub(super) async fn with_base_trees(base: &Base, mine: &Git) -> Result<(), WorkspaceError> {
    let naming = crate::workspace::make::naming_denied(base);
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
            tracing::warn!(error = %e, "index-pack refused the base's trees beside the run's");
            WorkspaceError::Keep(
                "the run's repository holds other bytes under a name of the base's; nothing of the run was kept"
                    .to_owned(),
            )
        })
}

/// The last word, in the base repository, whose objects a run never wrote: each kept commit,
/// against the base commit, changes no protected name and holds no submodule, and every blob
/// it adds or changes is one the run wrote (an object of `packed`, the pack `index-pack`
/// just hashed and wrote) or one the base itself shows outside the denied names. A denied
/// file's blob, or any other object of the base's history, can pass neither.
pub(super) async fn gate(
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
                .map_err(|e| WorkspaceError::KeepFault(format!("{}: {e}", index.display())))?,
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
pub(super) async fn present(git: &Git, changes: &[Change]) -> Result<(), WorkspaceError> {
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
