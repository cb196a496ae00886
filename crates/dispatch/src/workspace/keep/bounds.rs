//! The size bounds on a run's objects, read from their headers before any is read whole.

use std::collections::HashMap;

use crate::workspace::WorkspaceError;
use crate::workspace::git::Git;

use super::fail;
use crate::workspace::given::{Given, Kind, SIZED, Sized, parse_listing};

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
/// larger than [`MAX_RUN_OBJECT_BYTES`], or whose repository holds one name in more than one
/// place (two packs, a pack and a loose file: which copy git reads then depends on the order
/// it looks, so a size read from one could be another's). Every object counts but one the
/// run was given, by its name, kind and exact size ([`Given`]): nothing the base holds and
/// the run was not given is ever looked up, so what the run wrote counts whatever it matches.
/// Sizes are read from the objects' headers (`cat-file --batch-check`), never by inflating
/// them. Returns the run's objects as listed.
pub(super) async fn bounded(
    gathered: &Git,
    given: &Given,
) -> Result<HashMap<String, Sized>, WorkspaceError> {
    let objects = listed(gathered).await?;
    let counted = gathered.text(["count-objects", "-v"]).await.map_err(fail)?;
    let entries: u64 = counted
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(": ")?;
            matches!(key, "count" | "in-pack").then(|| value.parse::<u64>().ok())?
        })
        .sum();
    if entries != objects.len() as u64 {
        return Err(WorkspaceError::Keep(
            "the run's repository holds an object in more than one place (a pack and a loose file, or two packs); nothing of the run was kept"
                .to_owned(),
        ));
    }
    within_bounds(&objects, given)?;
    Ok(objects)
}

/// Every object of the repository `git` reads, by name: its kind and size from its header.
pub(super) async fn listed(git: &Git) -> Result<HashMap<String, Sized>, WorkspaceError> {
    let listing = git
        .run(["cat-file", "--batch-all-objects", "--unordered", SIZED])
        .await
        .map_err(fail)?;
    parse_listing(&listing).ok_or_else(|| {
        WorkspaceError::Keep(
            "the run's objects could not be listed; nothing of the run was kept".to_owned(),
        )
    })
}

/// The bounds over `objects`, counting each but one the run was given exactly.
pub(super) fn within_bounds(
    objects: &HashMap<String, Sized>,
    given: &Given,
) -> Result<(), WorkspaceError> {
    let mut written: Vec<(&String, &Sized)> = objects
        .iter()
        .filter(|(oid, sized)| !given.holds(oid, **sized))
        .collect();
    // In name order, so which bound is named never depends on how the listing came out.
    written.sort_by(|a, b| a.0.cmp(b.0));
    let mut total: u64 = 0;
    for (oid, o) in written {
        if o.size > limit_of(o.kind) {
            return Err(WorkspaceError::Keep(format!(
                "the run wrote a {} of {} MiB ({oid}), more than the {} MiB kept of one; nothing of the run was kept",
                o.kind.as_str(),
                o.size >> 20,
                limit_of(o.kind) >> 20
            )));
        }
        total = total.saturating_add(o.size);
    }
    if total > MAX_RUN_OBJECT_BYTES {
        return Err(WorkspaceError::Keep(format!(
            "the run wrote more than the {} MiB of objects kept of one run; nothing of the run was kept",
            MAX_RUN_OBJECT_BYTES >> 20
        )));
    }
    Ok(())
}

/// The largest object of `kind` kept of a run.
pub(super) fn limit_of(kind: Kind) -> u64 {
    if kind == Kind::Blob {
        MAX_FILE_BYTES
    } else {
        MAX_STRUCTURE_BYTES
    }
}
