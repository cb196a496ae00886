//! The size bounds on a run's objects, read from their headers before any is read whole.

use crate::workspace::WorkspaceError;
use crate::workspace::base::Base;
use crate::workspace::git::Git;

use super::fail;

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
pub(super) async fn bounded(mine: &Git, base: &Base) -> Result<(), WorkspaceError> {
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
pub(super) struct SizedObject {
    oid: String,
    kind: String,
    size: u64,
}

/// The objects `cat-file --batch-check` listed; `<oid> missing` lines are left out.
pub(super) fn sized_objects(listing: &[u8]) -> Result<Vec<SizedObject>, WorkspaceError> {
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
pub(super) fn limit_of(kind: &str) -> u64 {
    if kind == "blob" {
        MAX_FILE_BYTES
    } else {
        MAX_STRUCTURE_BYTES
    }
}
