//! What of a run's trees may be kept, read in a repository that holds only what the run
//! wrote (each object hashed again) and what it was given: a name the run refers to that is
//! neither is missing there, whatever the base holds.

use std::collections::HashMap;

use crate::workspace::WorkspaceError;
use crate::workspace::base::Base;
use crate::workspace::git::Git;
use crate::workspace::make::Start;

use super::changes::{
    Change, escaping_link, link_target, links_after, parse_changes, protected, runs_programs,
};
use super::{Kept, MAX_DROPPED_NAMES, fail};
use crate::workspace::given::{Given, Kind};

/// The most of a commit message kept.
const MAX_MESSAGE: usize = 64 * 1024;

/// One commit to make on the run's branch: the changes against the base, and who wrote it.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    pub(super) changes: Vec<Change>,
    /// The run's own commit's author (name, email, date); none for what it left uncommitted.
    pub(super) author: Option<[String; 3]>,
    pub(super) message: Vec<u8>,
}

/// What a run's trees are read against: where it started, what it was given, what it wrote.
pub(super) struct Against<'a> {
    pub(super) start: &'a Start,
    pub(super) given: &'a Given,
    /// The run's own objects, hashed again: name and kind.
    pub(super) held: &'a HashMap<String, Kind>,
    /// The stub's blob: at a denied name the base does not have, it is Switchboard's own
    /// file, not a change of the run's.
    pub(super) stub: String,
}

impl Against<'_> {
    /// Whether the run has the blob `oid`: one it wrote, or one it was given.
    fn has_blob(&self, oid: &str) -> bool {
        self.held.get(oid) == Some(&Kind::Blob) || self.given.has_blob(oid)
    }
}

/// The changes of `candidate` (one of the run's trees) against its start that may be kept.
/// A kept change names a blob the run has; one that names any other refuses the run.
pub(super) async fn changes_kept(
    mine: &Git,
    base: &Base,
    against: &Against<'_>,
    candidate: &str,
    kept: &mut Kept,
) -> Result<Vec<Change>, WorkspaceError> {
    if candidate == against.start.tree {
        return Ok(Vec::new());
    }
    let raw = mine
        .run([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            &against.start.tree,
            candidate,
        ])
        .await
        .map_err(fail)?;
    let changes = parse_changes(&raw)
        .ok_or_else(|| WorkspaceError::Keep("the run's changes did not read".to_owned()))?;
    let kept_out = base.kept_out();
    let not_kept = |kept: &mut Kept, path: String| {
        kept.dropped_count += 1;
        if kept.dropped.len() < MAX_DROPPED_NAMES {
            kept.dropped.insert(path);
        }
    };
    let mut candidates = Vec::new();
    let mut dropped: Vec<String> = Vec::new();
    for change in changes {
        let own_stub = !change.deleted
            && change.new_oid == against.stub
            && base.policy.deny_read.contains(&change.path);
        if own_stub {
            continue;
        }
        if protected(&change.path, &kept_out)
            || change.new_mode == "160000"
            || runs_programs(&change.path)
        {
            dropped.push(change.path.clone());
            not_kept(kept, change.path);
        } else {
            candidates.push(change);
        }
    }
    // A file written where a dropped path is below it (a directory replaced by a file) or
    // above it (a file replaced by a directory) would remove that path when applied: it is
    // not kept either, so what is kept is exactly what the base's gate reads back.
    let (candidates, collides): (Vec<Change>, Vec<Change>) =
        candidates.into_iter().partition(|c| {
            c.deleted
                || !dropped.iter().any(|d| {
                    d.strip_prefix(c.path.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
                        || c.path
                            .strip_prefix(d.as_str())
                            .is_some_and(|rest| rest.starts_with('/'))
                })
        });
    for change in collides {
        not_kept(kept, change.path);
    }
    for change in &candidates {
        if !change.deleted && !against.has_blob(&change.new_oid) {
            return Err(WorkspaceError::Keep(format!(
                "the run's change to {} refers to an object it does not have; nothing of the run was kept",
                change.path
            )));
        }
    }
    // The links of the tree as it will be kept: the base's that stay, and the kept ones.
    let links = links_after(base, &candidates);
    let mut keep = Vec::new();
    for change in candidates {
        // A blob the run was given but that the recorded structure does not hold (a file's
        // bytes, now a link's target) is the base's own, read there: its name is not one
        // the run wrote.
        let reader = if against.given.has_blob(&change.new_oid)
            && !against.given.stores(&change.new_oid)
            && !against.held.contains_key(&change.new_oid)
        {
            base.git()
        } else {
            mine.clone()
        };
        let escapes = match link_target(&reader, &change).await? {
            Some(target) => escaping_link(&change.path, &target, &kept_out, &links).is_some(),
            None => false,
        };
        if escapes {
            not_kept(kept, change.path);
        } else {
            keep.push(change);
        }
    }
    Ok(keep)
}

/// A commit's author line (name, email, date) and message, as the run wrote them, cleaned of
/// control characters and bounded.
pub(super) async fn authored(
    git: &Git,
    commit: &str,
) -> Result<([String; 3], Vec<u8>), WorkspaceError> {
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
