//! The statements both databases share, written once over the dialect: the run row, the list
//! reads (whole table, live runs, the walk and its boundary), friction and counts.

use std::sync::LazyLock;

use crate::merge::{Key, start_key};
use crate::plan::{Group, Plan};
use crate::types::{ListRuns, StatusFilter};

use super::dialect::{Bind, Dialect, Statement};

/// The run columns, in the order `rows::run` reads them.
pub const RUN_COLUMNS: &str = "id, surface, channel_id, thread_key, user_id, agent, repo, status, request, answer, error, created_at, finished_at, capability_token_hash, agent_token_hash, owner, channel_visibility, stop_requested_at, parent_run";

/// The run columns of `runs r`, built once (every list page names them).
static RUN_COLUMNS_OF_R: LazyLock<String> = LazyLock::new(|| qualified(RUN_COLUMNS, "r"));

/// A column list (`a, b`) qualified by a table alias (`r.a, r.b`).
pub fn qualified(columns: &str, alias: &str) -> String {
    columns
        .split(", ")
        .map(|c| format!("{alias}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn status_sql(filter: StatusFilter, alias: &str) -> String {
    match filter {
        StatusFilter::All => String::new(),
        StatusFilter::Live => format!(" AND {alias}.status IN ('queued', 'running')"),
        StatusFilter::Finished => format!(" AND {alias}.status NOT IN ('queued', 'running')"),
    }
}

/// How a list is read: not at all, in one statement, or by the walk and the branch merge.
pub enum ListRead {
    Nothing,
    One(Statement),
    Groups(Vec<Group>),
}

/// The read for a planned list. Live lists are one statement over the live runs' index
/// whatever the predicate; an unfiltered list is one statement over the page index;
/// everything else walks and merges branches.
pub fn list_read<D: Dialect>(plan: Plan, q: &ListRuns) -> ListRead {
    match plan {
        Plan::Nothing => ListRead::Nothing,
        Plan::Everything if q.status == StatusFilter::Live => ListRead::One(live::<D>(None, q)),
        Plan::Everything => ListRead::One(everything::<D>(q)),
        Plan::Groups(g) if q.status == StatusFilter::Live => ListRead::One(live::<D>(Some(&g), q)),
        Plan::Groups(g) => ListRead::Groups(g),
    }
}

/// The whole table, newest first from the page index, no filter.
fn everything<D: Dialect>(q: &ListRuns) -> Statement {
    let (at, id) = start_key(q.before.as_ref());
    Statement::new(format!(
        "SELECT {RUN_COLUMNS} FROM {} WHERE (x.created_at, x.id) < (?, ?){} ORDER BY x.created_at DESC, x.id DESC LIMIT ?",
        D::page_index(),
        status_sql(q.status, "x")
    ))
    .int(at)
    .text(id)
    .int(i64::from(q.limit) + 1)
}

/// A page of live runs. Live runs are few (bounded by the dispatcher's limits), so the list
/// reads the partial index of live runs newest-first and filters each row by the predicate's
/// groups (`None`: the whole table), instead of walking the page index past finished runs.
fn live<D: Dialect>(groups: Option<&[Group]>, q: &ListRuns) -> Statement {
    let (at, id) = start_key(q.before.as_ref());
    let (filter, filter_binds) = match groups {
        Some(g) => {
            let (f, b) = flat_where::<D>(g, "x");
            (format!(" AND {f}"), b)
        }
        None => (String::new(), Vec::new()),
    };
    Statement::new(format!(
        "SELECT {RUN_COLUMNS} FROM {} WHERE x.status IN ('queued', 'running') AND (x.created_at, x.id) < (?, ?){filter} ORDER BY x.created_at DESC, x.id DESC LIMIT ?",
        D::live_index()
    ))
    .int(at)
    .text(id)
    .binds(filter_binds)
    .int(i64::from(q.limit) + 1)
}

/// A flat `WHERE` for the predicate's groups (the walk, friction report, counts).
pub fn flat_where<D: Dialect>(groups: &[Group], alias: &str) -> (String, Vec<Bind>) {
    let mut ors = Vec::new();
    let mut binds = Vec::new();
    for g in groups {
        let mut ands = vec![D::in_list(&format!("{alias}.{}", g.drive.sql()))];
        binds.push(Bind::Texts(g.values.clone()));
        for a in &g.filters {
            ands.push(D::in_list(&format!("{alias}.{}", a.column.sql())));
            binds.push(Bind::Texts(a.values.clone()));
        }
        ors.push(format!("({})", ands.join(" AND ")));
    }
    (format!("({})", ors.join(" OR ")), binds)
}

/// The walk, in one statement: the newest `window` entries of the page index before `start`
/// (read from the index alone: it carries the filter columns), those that pass the
/// predicate's groups and the status, and their rows, newest first, at most `need`.
pub fn walk<D: Dialect>(
    groups: &[Group],
    status: StatusFilter,
    start: &Key,
    window: u32,
    need: u32,
) -> Statement {
    if D::WALK_TO_BOUNDARY {
        return walk_to_boundary::<D>(groups, status, start, window, need);
    }
    let (filter, filter_binds) = flat_where::<D>(groups, "w");
    let key = D::row_key();
    Statement::new(format!(
        "WITH w AS (SELECT x.{key} AS row_key, x.created_at, x.id, x.channel_id, x.channel_visibility, x.user_id, x.repo, x.status \
         FROM {} WHERE (x.created_at, x.id) < (?, ?) ORDER BY x.created_at DESC, x.id DESC LIMIT ?) \
         SELECT {} FROM w JOIN runs r ON r.{key} = w.row_key WHERE {filter}{} ORDER BY w.created_at DESC, w.id DESC LIMIT ?",
        D::page_index(),
        RUN_COLUMNS_OF_R.as_str(),
        status_sql(status, "w")
    ))
    .int(start.0)
    .text(start.1.clone())
    .int(i64::from(window))
    .binds(filter_binds)
    .int(i64::from(need))
}

/// The same walk, with the window bounded by its last key instead of a `LIMIT`ed read: the
/// page index between that key and `start`, filtered in index order and cut at `need`. The
/// bound is the `window`-th key before `start`, or the smallest key when fewer rows remain:
/// the subquery yields exactly one of the two, whatever order its arms run in. The rows
/// examined are the same; the database stops at the `need`-th match, with no table of the
/// window and no sort.
fn walk_to_boundary<D: Dialect>(
    groups: &[Group],
    status: StatusFilter,
    start: &Key,
    window: u32,
    need: u32,
) -> Statement {
    let (filter, filter_binds) = flat_where::<D>(groups, "x");
    let key = D::row_key();
    let last = format!(
        "SELECT b.created_at, b.id FROM {} WHERE (b.created_at, b.id) < (?, ?) \
         ORDER BY b.created_at DESC, b.id DESC LIMIT 1 OFFSET ?",
        D::page_index().replacen("runs x", "runs b", 1)
    );
    let skip = i64::from(window.saturating_sub(1));
    Statement::new(format!(
        "SELECT {} FROM {} JOIN runs r ON r.{key} = x.{key} \
         WHERE (x.created_at, x.id) < (?, ?) \
         AND (x.created_at, x.id) >= (SELECT * FROM ({last}) UNION ALL SELECT ?, '' WHERE NOT EXISTS ({last}) LIMIT 1) \
         AND {filter}{} ORDER BY x.created_at DESC, x.id DESC LIMIT ?",
        RUN_COLUMNS_OF_R.as_str(),
        D::page_index(),
        status_sql(status, "x")
    ))
    .int(start.0)
    .text(start.1.clone())
    .int(start.0)
    .text(start.1.clone())
    .int(skip)
    .int(i64::MIN)
    .int(start.0)
    .text(start.1.clone())
    .int(skip)
    .binds(filter_binds)
    .int(i64::from(need))
}

/// The key of the `window`-th row before `start`, from the page index alone.
pub fn boundary<D: Dialect>(start: &Key, window: u32) -> Statement {
    Statement::new(format!(
        "SELECT x.created_at, x.id FROM {} WHERE (x.created_at, x.id) < (?, ?) ORDER BY x.created_at DESC, x.id DESC LIMIT 1 OFFSET ?",
        D::page_index()
    ))
    .int(start.0)
    .text(start.1.clone())
    .int(i64::from(window.saturating_sub(1)))
}

/// Full rows by id (the page's rows, after the branch merge found their keys).
pub fn runs_by_ids<D: Dialect>(ids: Vec<String>) -> Statement {
    Statement::new(format!(
        "SELECT {} FROM runs r WHERE {}",
        RUN_COLUMNS_OF_R.as_str(),
        D::in_list("r.id")
    ))
    .texts(ids)
}

/// The filter a plan compiles to, or `None` when it admits nothing.
pub fn plan_filter<D: Dialect>(plan: Plan) -> Option<(String, Vec<Bind>)> {
    match plan {
        Plan::Nothing => None,
        Plan::Everything => Some(("1 = 1".to_owned(), vec![])),
        Plan::Groups(groups) => Some(flat_where::<D>(&groups, "r")),
    }
}

/// Friction since a time on the runs the filter admits, newest first.
pub fn friction_recent((filter, binds): (String, Vec<Bind>), since: i64, limit: i64) -> Statement {
    Statement::new(format!(
        "SELECT f.run_id, f.at, f.kind, f.detail, r.channel_id, r.agent FROM friction f JOIN runs r ON r.id = f.run_id \
         WHERE f.at >= ? AND {filter} ORDER BY f.at DESC, f.id DESC LIMIT ?"
    ))
    .int(since)
    .binds(binds)
    .int(limit)
}

/// How many runs since a time the filter admits.
pub fn count_since((filter, binds): (String, Vec<Bind>), since: i64) -> Statement {
    Statement::new(format!(
        "SELECT count(*) FROM runs r WHERE r.created_at >= ? AND {filter}"
    ))
    .int(since)
    .binds(binds)
}
