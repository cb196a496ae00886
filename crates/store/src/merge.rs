//! A page of a list whose predicate compiled to branches.
//!
//! First a bounded walk, one statement: the page index newest-first over a window of a few
//! pages, filtered by the whole predicate from the index's own columns; when the predicate is
//! dense (public runs, busy channels) that fills the page at once. Every row in the window is
//! examined, so whatever the walk misses lies below the window's last key (asked for only
//! then), and the branches take over from there.
//!
//! Then the k-way merge of branch pages, in rounds.
//!
//! Each branch (one value of a group) is an index range read newest-first. A round asks every
//! still-open branch for its next `n` keys in one statement; the merge keeps the newest
//! `need` candidates. A branch stays open only while it may still hold a row newer than the
//! current `need`-th candidate: its last key was newer and it was not exhausted. `n` starts at
//! about four pages' worth of rows spread over the branches and grows four-fold, up to `need`.
//! So a round touches at most (open branches × n) index entries, and a page at most
//! (branches × need) — usually far fewer. Rounds carry keys only (`created_at`, `id`); the
//! page's full rows are fetched once, by id, at the end.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;

use crate::error::{Result, StoreError};
use crate::plan::Group;
use crate::types::{Cursor, Page, RunRecord, StatusFilter};

/// How many pages' worth of rows the walk examines before handing over to the branches.
pub const DEFAULT_WALK_PAGES: usize = 8;

/// A row's place in the page order: `(created_at, id)`, compared descending.
pub type Key = (i64, String);

/// One branch to read: a group and one of its values, continuing strictly before `after`.
#[derive(Debug, Clone)]
pub struct OpenBranch {
    pub group: usize,
    pub value: String,
    pub after: Key,
}

/// A back end's one-statement read of many branches.
#[async_trait]
pub(crate) trait FetchBranches: Sync {
    /// For each branch, the keys of its next `per_branch` rows (newest first), tagged
    /// `(group, value)`.
    async fn fetch(
        &self,
        groups: &[Group],
        open: &[OpenBranch],
        status: StatusFilter,
        per_branch: u32,
    ) -> Result<Vec<(usize, String, Key)>>;
}

/// A back end's reads for a branched list.
#[async_trait]
pub(crate) trait ListBackend: FetchBranches {
    /// The walk's window in pages; 0 goes straight to the branches.
    fn walk_pages(&self) -> usize;
    /// The key of the `window`-th row strictly before `start` (in page order, any status), or
    /// `None` when fewer rows remain.
    async fn boundary(&self, start: &Key, window: u32) -> Result<Option<Key>>;
    /// Of the `window` rows before `start` (in page order, any status), up to `need` newest
    /// that pass the groups and status.
    async fn walk(
        &self,
        groups: &[Group],
        status: StatusFilter,
        start: &Key,
        window: u32,
        need: u32,
    ) -> Result<Vec<RunRecord>>;
    async fn runs_by_ids(&self, ids: Vec<String>) -> Result<Vec<RunRecord>>;
}

/// Where a page starts: strictly before the cursor, or from the newest row.
pub(crate) fn start_key(before: Option<&Cursor>) -> Key {
    before.map_or((i64::MAX, String::new()), |c| {
        (c.created_at.micros(), c.id.to_string())
    })
}

/// Orders rows newest first and cuts the page, with the next cursor when more remain.
pub(crate) fn assemble_page(mut runs: Vec<RunRecord>, limit: usize) -> Page {
    runs.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    let next = if runs.len() > limit {
        runs.truncate(limit);
        runs.last().map(RunRecord::cursor)
    } else {
        None
    };
    Page { runs, next }
}

/// A page size the store serves: 1 to 1000.
pub(crate) fn check_limit(limit: u32) -> Result<usize> {
    if limit == 0 || limit > 1000 {
        return Err(StoreError::Invalid(format!(
            "page limit {limit}: use 1-1000"
        )));
    }
    Ok(limit as usize)
}

/// How many rows of the page index the walk examines for a page of `need` rows.
pub(crate) fn walk_window(need: usize, walk_pages: usize) -> u32 {
    u32::try_from(need.saturating_mul(walk_pages)).unwrap_or(u32::MAX)
}

/// The page: the walk, then the branches below its window when it came up short.
pub(crate) async fn page_of_groups<B: ListBackend + ?Sized>(
    backend: &B,
    groups: &[Group],
    status: StatusFilter,
    limit: usize,
    before: Option<&Cursor>,
) -> Result<Page> {
    let need = limit + 1;
    let start = start_key(before);
    let need32 = u32::try_from(need).unwrap_or(u32::MAX);
    let (mut runs, floor) = if backend.walk_pages() == 0 {
        (Vec::new(), Some(start))
    } else {
        // One statement fills a dense page; only a page the window left short asks where the
        // window ended, to continue the branches below it.
        let window = walk_window(need, backend.walk_pages());
        let runs = backend.walk(groups, status, &start, window, need32).await?;
        let floor = if runs.len() < need {
            backend.boundary(&start, window).await?
        } else {
            None
        };
        (runs, floor)
    };
    if let (true, Some(floor)) = (runs.len() < need, floor) {
        // Everything in [floor, start) was examined; continue strictly below the floor.
        let keys = merged_keys(backend, groups, status, need - runs.len(), floor).await?;
        if !keys.is_empty() {
            runs.extend(
                backend
                    .runs_by_ids(keys.into_iter().map(|(_, id)| id).collect())
                    .await?,
            );
        }
    }
    Ok(assemble_page(runs, limit))
}

/// Every branch of the groups, each starting strictly before `start`.
pub(crate) fn all_branches(groups: &[Group], start: &Key) -> Vec<OpenBranch> {
    groups
        .iter()
        .enumerate()
        .flat_map(|(group, g)| {
            g.values.iter().map(move |value| OpenBranch {
                group,
                value: value.clone(),
                after: start.clone(),
            })
        })
        .collect()
}

/// The keys of the newest `need` rows across the groups' branches, strictly before `start`,
/// newest first.
pub(crate) async fn merged_keys<F: FetchBranches + ?Sized>(
    fetcher: &F,
    groups: &[Group],
    status: StatusFilter,
    need: usize,
    start: Key,
) -> Result<Vec<Key>> {
    let mut branches: Vec<(OpenBranch, bool)> = all_branches(groups, &start)
        .into_iter()
        .map(|b| (b, false))
        .collect();
    // Ascending order: the newest keys are at the back.
    let mut candidates: BTreeSet<Key> = BTreeSet::new();
    let mut per_branch = (4 * need)
        .div_ceil(branches.len().max(1))
        .max(2)
        .min(need.max(1));
    loop {
        let threshold = if candidates.len() >= need {
            candidates.iter().rev().nth(need - 1).cloned()
        } else {
            None
        };
        let open: Vec<OpenBranch> = branches
            .iter()
            .filter(|(b, exhausted)| !exhausted && threshold.as_ref().is_none_or(|t| b.after > *t))
            .map(|(b, _)| b.clone())
            .collect();
        if open.is_empty() {
            break;
        }
        let rows = fetcher
            .fetch(
                groups,
                &open,
                status,
                u32::try_from(per_branch).unwrap_or(u32::MAX),
            )
            .await?;
        // Per branch: how many keys came back, and the oldest of them.
        let mut seen: HashMap<(usize, String), (usize, Key)> = HashMap::new();
        for (g, v, key) in rows {
            let entry = seen.entry((g, v)).or_insert((0, key.clone()));
            entry.0 += 1;
            if key < entry.1 {
                entry.1 = key.clone();
            }
            candidates.insert(key);
        }
        for (b, exhausted) in &mut branches {
            if !open
                .iter()
                .any(|o| o.group == b.group && o.value == b.value)
            {
                continue;
            }
            match seen.remove(&(b.group, b.value.clone())) {
                Some((n, oldest)) => {
                    b.after = oldest;
                    *exhausted = n < per_branch;
                }
                None => *exhausted = true,
            }
        }
        while candidates.len() > need {
            candidates.pop_first();
        }
        per_branch = (per_branch * 4).min(need);
    }
    Ok(candidates.into_iter().rev().collect())
}
