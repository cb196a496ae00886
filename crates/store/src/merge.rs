//! The k-way merge of branch pages, in rounds.
//!
//! Each branch (one value of a group) is an index range read newest-first. A round asks every
//! still-open branch for its next `n` rows in one statement; the merge keeps the newest
//! `limit + 1` candidates. A branch stays open only while it may still hold a row newer than
//! the current `limit + 1`-th candidate: its last row was newer and it was not exhausted. `n`
//! starts small (about two pages spread over the branches) and doubles, up to the page. So a
//! round touches at most (open branches × n) rows, and the whole page at most
//! (branches × page) — usually far fewer.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;

use crate::plan::Group;
use crate::{Cursor, Page, Result, RunRecord, StatusFilter};

/// One branch to read: a group and one of its values, continuing strictly before `after`.
#[derive(Debug, Clone)]
pub(crate) struct OpenBranch {
    pub group: usize,
    pub value: String,
    pub after_at: i64,
    pub after_id: String,
}

/// A back end's one-statement read of many branches.
#[async_trait]
pub(crate) trait FetchBranches: Sync {
    /// For each branch, its next `per_branch` rows (newest first), tagged `(group, value)`.
    async fn fetch(
        &self,
        groups: &[Group],
        open: &[OpenBranch],
        status: StatusFilter,
        per_branch: u32,
    ) -> Result<Vec<(usize, String, RunRecord)>>;
}

type Key = (i64, String);

fn key_of(r: &RunRecord) -> Key {
    (r.created_at.micros(), r.id.to_string())
}

pub(crate) async fn merged_page<F: FetchBranches + ?Sized>(
    fetcher: &F,
    groups: &[Group],
    status: StatusFilter,
    limit: usize,
    before: Option<&Cursor>,
) -> Result<Page> {
    let need = limit + 1;
    let start: Key = before.map_or((i64::MAX, String::new()), |c| {
        (c.created_at.micros(), c.id.to_string())
    });
    let mut branches: Vec<(OpenBranch, bool)> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, group)| {
            group.values.iter().map(move |v| OpenBranch {
                group: g,
                value: v.clone(),
                after_at: 0,
                after_id: String::new(),
            })
        })
        .map(|mut b| {
            b.after_at = start.0;
            b.after_id.clone_from(&start.1);
            (b, false)
        })
        .collect();
    // Newest first: the map's order is ascending, so keys are read from the back.
    let mut candidates: BTreeMap<Key, RunRecord> = BTreeMap::new();
    let mut per_branch = (2 * need).div_ceil(branches.len().max(1)).clamp(2, need);
    loop {
        let threshold = (candidates.len() >= need)
            .then(|| candidates.keys().rev().nth(need - 1).cloned())
            .flatten();
        let open: Vec<OpenBranch> = branches
            .iter()
            .filter(|(b, exhausted)| {
                !exhausted
                    && threshold
                        .as_ref()
                        .is_none_or(|t| (b.after_at, b.after_id.clone()) > *t)
            })
            .map(|(b, _)| b.clone())
            .collect();
        if open.is_empty() {
            break;
        }
        let rows = fetcher
            .fetch(groups, &open, status, per_branch as u32)
            .await?;
        let mut counts: HashMap<(usize, String), (usize, Key)> = HashMap::new();
        for (g, v, run) in rows {
            let key = key_of(&run);
            let entry = counts.entry((g, v)).or_insert((0, key.clone()));
            entry.0 += 1;
            entry.1 = entry.1.clone().min(key.clone());
            candidates.insert(key, run);
        }
        for (b, exhausted) in branches.iter_mut() {
            let was_open = open
                .iter()
                .any(|o| o.group == b.group && o.value == b.value);
            if !was_open {
                continue;
            }
            match counts.get(&(b.group, b.value.clone())) {
                Some((n, oldest)) => {
                    b.after_at = oldest.0;
                    b.after_id.clone_from(&oldest.1);
                    *exhausted = *n < per_branch;
                }
                None => *exhausted = true,
            }
        }
        while candidates.len() > need {
            candidates.pop_first();
        }
        per_branch = (per_branch * 2).min(need);
    }
    let mut runs: Vec<RunRecord> = candidates.into_values().rev().collect();
    let next = if runs.len() > limit {
        runs.truncate(limit);
        runs.last().map(RunRecord::cursor)
    } else {
        None
    };
    Ok(Page { runs, next })
}
