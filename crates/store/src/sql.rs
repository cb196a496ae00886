//! SQL text shared by the two database back ends: the row shape, binds, JSON arrays.

use authz_core::{ChannelVisibility, RunId};

use crate::merge::{Key, OpenBranch, all_branches};
use crate::plan::{Group, Plan};
use crate::{ListRuns, start_key};

use crate::types::TokenHash;
use crate::{RunRecord, RunStatus, StatusFilter, StoreError, Timestamp};

/// The run columns, in the order `RawRun` reads them.
pub(crate) const RUN_COLUMNS: &str = "id, surface, channel_id, thread_key, user_id, agent, repo, status, request, answer, error, created_at, finished_at, capability_token_hash, agent_token_hash, owner, channel_visibility";

/// A run row as the database returns it; parsed into a `RunRecord` with every field checked.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RawRun {
    pub id: String,
    pub surface: String,
    pub channel_id: String,
    pub thread_key: Option<String>,
    pub user_id: String,
    pub agent: String,
    pub repo: Option<String>,
    pub status: String,
    pub request: String,
    pub answer: Option<String>,
    pub error: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub capability_token_hash: Option<String>,
    pub agent_token_hash: Option<String>,
    pub owner: Option<String>,
    pub channel_visibility: String,
}

impl RawRun {
    pub fn into_record(self) -> Result<RunRecord, StoreError> {
        let bad = |what, v: &str| StoreError::corrupt(what, v);
        Ok(RunRecord {
            id: RunId::parse(&self.id).map_err(|_| bad("run id", &self.id))?,
            channel_id: self
                .channel_id
                .parse()
                .map_err(|_| bad("channel id", &self.channel_id))?,
            user_id: self
                .user_id
                .parse()
                .map_err(|_| bad("user id", &self.user_id))?,
            repo: self
                .repo
                .as_deref()
                .map(|r| r.parse().map_err(|_| bad("repo", r)))
                .transpose()?,
            status: RunStatus::parse(&self.status)?,
            channel_visibility: ChannelVisibility::parse(&self.channel_visibility)
                .ok_or_else(|| bad("channel visibility", &self.channel_visibility))?,
            capability_token: self
                .capability_token_hash
                .as_deref()
                .map(TokenHash::from_hex)
                .transpose()?,
            agent_token: self
                .agent_token_hash
                .as_deref()
                .map(TokenHash::from_hex)
                .transpose()?,
            surface: self.surface,
            thread_key: self.thread_key,
            agent: self.agent,
            request: self.request,
            answer: self.answer,
            error: self.error,
            created_at: Timestamp::from_micros(self.created_at),
            finished_at: self.finished_at.map(Timestamp::from_micros),
            owner: self.owner,
        })
    }
}

/// A round's row: which branch it came from, and the row's page key.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct BranchKey {
    pub grp: i64,
    pub val: String,
    pub created_at: i64,
    pub id: String,
}

impl BranchKey {
    /// `(group, value, key)`, as the merge takes it.
    pub fn tagged(self) -> (usize, String, Key) {
        (
            usize::try_from(self.grp).unwrap_or(usize::MAX),
            self.val,
            (self.created_at, self.id),
        )
    }
}

/// A bound value.
#[derive(Debug, Clone)]
pub(crate) enum Bind {
    Text(String),
    Int(i64),
    Texts(Vec<String>),
    Ints(Vec<i64>),
}

pub(crate) fn status_sql(filter: StatusFilter, alias: &str) -> String {
    match filter {
        StatusFilter::All => String::new(),
        StatusFilter::Live => format!(" AND {alias}.status IN ('queued', 'running')"),
        StatusFilter::Finished => format!(" AND {alias}.status NOT IN ('queued', 'running')"),
    }
}

/// A statement and its binds, in placeholder order.
pub(crate) type Statement = (String, Vec<Bind>);

/// What differs between the two databases in the statements they share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// `column` is one of a bound list: `json_each` of a JSON array, or `= ANY` of an array.
    fn in_list(self, column: &str) -> String {
        match self {
            Dialect::Sqlite => format!("{column} IN (SELECT value FROM json_each(?))"),
            Dialect::Postgres => format!("{column} = ANY(?)"),
        }
    }

    /// The page index, read newest-first (pinned on SQLite, whose planner may prefer another).
    fn page_index(self) -> &'static str {
        match self {
            Dialect::Sqlite => "runs x INDEXED BY runs_page",
            Dialect::Postgres => "runs x",
        }
    }

    /// The partial index of live runs, in page order.
    fn live_index(self) -> &'static str {
        match self {
            Dialect::Sqlite => "runs x INDEXED BY runs_live_page",
            Dialect::Postgres => "runs x",
        }
    }

    /// The statement as the database takes it: `?` on SQLite, `$1, $2, …` on Postgres.
    pub(crate) fn finish(self, sql: String) -> String {
        match self {
            Dialect::Sqlite => sql,
            Dialect::Postgres => numbered(&sql),
        }
    }
}

/// Numbers `?` placeholders as `$1`, `$2`, … (the statements here contain no other `?`).
pub(crate) fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out
}

pub(crate) fn first_round(groups: &[Group], q: &ListRuns) -> Vec<OpenBranch> {
    all_branches(groups, &start_key(q.before.as_ref()))
}

/// The whole table, newest first from the page index, no filter.
pub(crate) fn everything_sql(d: Dialect, q: &ListRuns) -> Statement {
    let (at, id) = start_key(q.before.as_ref());
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM {} WHERE (x.created_at, x.id) < (?, ?){} ORDER BY x.created_at DESC, x.id DESC LIMIT ?",
        d.page_index(),
        status_sql(q.status, "x")
    );
    (
        d.finish(sql),
        vec![
            Bind::Int(at),
            Bind::Text(id),
            Bind::Int(i64::from(q.limit) + 1),
        ],
    )
}

/// How a list is read: not at all, in one statement, or by the walk and the branch merge.
pub(crate) enum ListRead {
    Nothing,
    One(Statement),
    Groups(Vec<Group>),
}

/// The read for a planned list, the same on both databases. Live lists are one statement over
/// the live runs' index whatever the predicate; an unfiltered list is one statement over the
/// page index; everything else walks and merges branches.
pub(crate) fn list_read(d: Dialect, plan: Plan, q: &ListRuns) -> ListRead {
    match plan {
        Plan::Nothing => ListRead::Nothing,
        Plan::Everything if q.status == StatusFilter::Live => ListRead::One(live_sql(d, None, q)),
        Plan::Everything => ListRead::One(everything_sql(d, q)),
        Plan::Groups(g) if q.status == StatusFilter::Live => {
            ListRead::One(live_sql(d, Some(&g), q))
        }
        Plan::Groups(g) => ListRead::Groups(g),
    }
}

/// A page of live runs. Live runs are few (bounded by the dispatcher's limits), so the list
/// reads the partial index of live runs newest-first and filters each row by the predicate's
/// groups (`None`: the whole table), instead of walking the page index past finished runs.
pub(crate) fn live_sql(d: Dialect, groups: Option<&[Group]>, q: &ListRuns) -> Statement {
    let (at, id) = start_key(q.before.as_ref());
    let (filter, filter_binds) = match groups {
        Some(g) => {
            let (f, b) = flat_where(d, g, "x");
            (format!(" AND {f}"), b)
        }
        None => (String::new(), Vec::new()),
    };
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM {} WHERE x.status IN ('queued', 'running') AND (x.created_at, x.id) < (?, ?){filter} ORDER BY x.created_at DESC, x.id DESC LIMIT ?",
        d.live_index()
    );
    let mut binds = vec![Bind::Int(at), Bind::Text(id)];
    binds.extend(filter_binds);
    binds.push(Bind::Int(i64::from(q.limit) + 1));
    (d.finish(sql), binds)
}

/// A flat `WHERE` for the predicate's groups (the walk, friction report, counts).
pub(crate) fn flat_where(d: Dialect, groups: &[Group], alias: &str) -> (String, Vec<Bind>) {
    let mut ors = Vec::new();
    let mut binds = Vec::new();
    for g in groups {
        let mut ands = vec![d.in_list(&format!("{alias}.{}", g.drive.sql()))];
        binds.push(Bind::Texts(g.values.clone()));
        for a in &g.filters {
            ands.push(d.in_list(&format!("{alias}.{}", a.column.sql())));
            binds.push(Bind::Texts(a.values.clone()));
        }
        ors.push(format!("({})", ands.join(" AND ")));
    }
    (format!("({})", ors.join(" OR ")), binds)
}

/// The walk: the page index newest-first between `floor` and `start`, filtered by the
/// predicate's groups; `LIMIT`ed to the rows needed.
pub(crate) fn walk_sql(
    d: Dialect,
    groups: &[Group],
    status: StatusFilter,
    start: &Key,
    floor: Option<&Key>,
    need: u32,
) -> Statement {
    let (filter, filter_binds) = flat_where(d, groups, "x");
    let floor_sql = if floor.is_some() {
        " AND (x.created_at, x.id) >= (?, ?)"
    } else {
        ""
    };
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM {} WHERE (x.created_at, x.id) < (?, ?){floor_sql} AND {filter}{} ORDER BY x.created_at DESC, x.id DESC LIMIT ?",
        d.page_index(),
        status_sql(status, "x")
    );
    let mut binds = vec![Bind::Int(start.0), Bind::Text(start.1.clone())];
    if let Some(f) = floor {
        binds.extend([Bind::Int(f.0), Bind::Text(f.1.clone())]);
    }
    binds.extend(filter_binds);
    binds.push(Bind::Int(i64::from(need)));
    (d.finish(sql), binds)
}

/// The key of the `window`-th row before `start`, from the page index alone.
pub(crate) fn boundary_sql(d: Dialect) -> String {
    d.finish(format!(
        "SELECT x.created_at, x.id FROM {} WHERE (x.created_at, x.id) < (?, ?) ORDER BY x.created_at DESC, x.id DESC LIMIT 1 OFFSET ?",
        d.page_index()
    ))
}

/// Friction since a time on the runs the filter admits, newest first.
pub(crate) fn friction_recent_sql(
    d: Dialect,
    filter: (String, Vec<Bind>),
    since: i64,
    limit: i64,
) -> Statement {
    let sql = format!(
        "SELECT f.run_id, f.at, f.kind, f.detail, r.channel_id, r.agent FROM friction f JOIN runs r ON r.id = f.run_id \
         WHERE f.at >= ? AND {} ORDER BY f.at DESC, f.id DESC LIMIT ?",
        filter.0
    );
    let mut binds = vec![Bind::Int(since)];
    binds.extend(filter.1);
    binds.push(Bind::Int(limit));
    (d.finish(sql), binds)
}

/// How many runs since a time the filter admits.
pub(crate) fn count_since_sql(d: Dialect, filter: (String, Vec<Bind>), since: i64) -> Statement {
    let sql = format!(
        "SELECT count(*) AS n FROM runs r WHERE r.created_at >= ? AND {}",
        filter.0
    );
    let mut binds = vec![Bind::Int(since)];
    binds.extend(filter.1);
    (d.finish(sql), binds)
}

/// The filter a plan compiles to, or `None` when it admits nothing.
pub(crate) fn plan_filter(d: Dialect, plan: Plan) -> Option<(String, Vec<Bind>)> {
    match plan {
        Plan::Nothing => None,
        Plan::Everything => Some(("1 = 1".to_owned(), vec![])),
        Plan::Groups(groups) => Some(flat_where(d, &groups, "r")),
    }
}

/// Rows of the other tables, decoded the same way on both databases.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RawEvent {
    pub seq: i64,
    pub at: i64,
    pub kind: String,
    pub body: String,
}

#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RawFriction {
    pub at: i64,
    pub kind: String,
    pub detail: String,
}

#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RawFrictionOfRun {
    pub run_id: String,
    pub at: i64,
    pub kind: String,
    pub detail: String,
    pub channel_id: String,
    pub agent: String,
}

impl RawFrictionOfRun {
    pub fn into_record(self) -> Result<crate::FrictionOfRun, StoreError> {
        Ok(crate::FrictionOfRun {
            friction: crate::Friction {
                run_id: RunId::parse(&self.run_id)
                    .map_err(|_| StoreError::corrupt("run id", &self.run_id))?,
                at: Timestamp::from_micros(self.at),
                kind: self.kind,
                detail: self.detail,
            },
            channel_id: self
                .channel_id
                .parse()
                .map_err(|_| StoreError::corrupt("channel id", &self.channel_id))?,
            agent: self.agent,
        })
    }
}

fn memory_id(s: String) -> Result<RunId, StoreError> {
    RunId::parse(&s).map_err(|_| StoreError::corrupt("memory id", &s))
}

#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RawMemory {
    pub id: String,
    pub scope_kind: String,
    pub scope_key: String,
    pub text: String,
    pub supersedes: Option<String>,
    pub source_run: Option<String>,
    pub created_at: i64,
    pub forgotten_at: Option<i64>,
}

impl RawMemory {
    pub fn into_record(self) -> Result<crate::MemoryRecord, StoreError> {
        Ok(crate::MemoryRecord {
            id: memory_id(self.id)?,
            scope: crate::types::scope_from_parts(&self.scope_kind, &self.scope_key)?,
            text: self.text,
            supersedes: self.supersedes.map(memory_id).transpose()?,
            source_run: self.source_run.map(memory_id).transpose()?,
            created_at: Timestamp::from_micros(self.created_at),
            forgotten_at: self.forgotten_at.map(Timestamp::from_micros),
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RawConfig {
    pub tier: String,
    pub tier_id: String,
    pub key: String,
    pub value: String,
    pub updated_by: String,
    pub updated_at: i64,
}

impl RawConfig {
    pub fn into_record(self) -> Result<crate::ConfigValue, StoreError> {
        Ok(crate::ConfigValue {
            tier: crate::types::tier_from_parts(&self.tier, &self.tier_id)?,
            updated_by: self
                .updated_by
                .parse()
                .map_err(|_| StoreError::corrupt("actor id", &self.updated_by))?,
            key: self.key,
            value: self.value,
            updated_at: Timestamp::from_micros(self.updated_at),
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RawFiring {
    pub slot: i64,
    pub fired_at: i64,
    pub status: String,
    pub run_id: Option<String>,
    pub detail: Option<String>,
}

impl RawFiring {
    pub fn into_record(self, name: &authz_core::ScheduleName) -> Result<crate::Firing, StoreError> {
        Ok(crate::Firing {
            name: name.clone(),
            slot: Timestamp::from_micros(self.slot),
            fired_at: Timestamp::from_micros(self.fired_at),
            status: self.status,
            run_id: self
                .run_id
                .map(|s| RunId::parse(&s).map_err(|_| StoreError::corrupt("run id", &s)))
                .transpose()?,
            detail: self.detail,
        })
    }
}

/// After an update that matched no live run: why. Missing, already running (for a start: fine),
/// or already finished.
pub(crate) fn not_live(
    id: &RunId,
    existing: Option<&RunRecord>,
    running_is_ok: bool,
) -> Result<(), StoreError> {
    match existing {
        None => Err(StoreError::NoSuchRun(id.clone())),
        Some(r) if running_is_ok && r.status == RunStatus::Running => Ok(()),
        Some(r) => Err(StoreError::AlreadyFinished {
            id: id.clone(),
            status: r.status,
        }),
    }
}

/// A JSON string literal.
pub(crate) fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub(crate) fn json_array(values: &[String]) -> String {
    let items: Vec<String> = values.iter().map(|v| json_string(v)).collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_strings_escape() {
        assert_eq!(super::json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert_eq!(
            super::json_array(&["x".into(), "y".into()]),
            "[\"x\",\"y\"]"
        );
    }
}
