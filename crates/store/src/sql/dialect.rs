//! What really differs between SQLite and Postgres, behind one trait: placeholders, how a
//! bound list is read (`json_each` or `= ANY`), index pinning (`INDEXED BY`), the branch read
//! of a list (`json_each` + rowid or `unnest` + `LATERAL`), plan reading, and connecting,
//! migrating and executing. Everything else is written once, in `SqlStore`.

use async_trait::async_trait;
use sqlx::Pool;

use crate::StoreSpec;
use crate::error::Result;
use crate::merge::OpenBranch;
use crate::plan::Group;
use crate::types::{RunRecord, StatusFilter};

/// A bound value.
#[derive(Debug, Clone)]
pub enum Bind {
    Text(String),
    OptText(Option<String>),
    Int(i64),
    Texts(Vec<String>),
    Ints(Vec<i64>),
}

/// A statement written with `?` placeholders, and its binds in order.
#[derive(Debug, Clone)]
pub struct Statement {
    pub sql: String,
    pub binds: Vec<Bind>,
}

impl Statement {
    pub fn new(sql: impl Into<String>) -> Self {
        Statement {
            sql: sql.into(),
            binds: Vec::new(),
        }
    }

    pub fn text(mut self, v: impl Into<String>) -> Self {
        self.binds.push(Bind::Text(v.into()));
        self
    }

    pub fn opt_text(mut self, v: Option<impl Into<String>>) -> Self {
        self.binds.push(Bind::OptText(v.map(Into::into)));
        self
    }

    pub fn int(mut self, v: i64) -> Self {
        self.binds.push(Bind::Int(v));
        self
    }

    pub fn texts(mut self, v: Vec<String>) -> Self {
        self.binds.push(Bind::Texts(v));
        self
    }

    pub fn binds(mut self, b: impl IntoIterator<Item = Bind>) -> Self {
        self.binds.extend(b);
        self
    }
}

/// A result row, read by column position. Every SQL row type of sqlx that decodes text and
/// 64-bit integers is one.
pub trait RowAccess {
    fn text(&self, i: usize) -> Result<String>;
    fn opt_text(&self, i: usize) -> Result<Option<String>>;
    fn int(&self, i: usize) -> Result<i64>;
    fn opt_int(&self, i: usize) -> Result<Option<i64>>;
}

impl<R> RowAccess for R
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    fn text(&self, i: usize) -> Result<String> {
        Ok(self.try_get(i)?)
    }

    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        Ok(self.try_get(i)?)
    }

    fn int(&self, i: usize) -> Result<i64> {
        Ok(self.try_get(i)?)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        Ok(self.try_get(i)?)
    }
}

/// One SQL database, as the shared store needs it.
#[async_trait]
pub trait Dialect: Send + Sync + Sized + 'static {
    type Db: sqlx::Database;
    type Row: RowAccess + Send + Sync;
    /// `sqlite` or `postgres`.
    const BACKEND: &'static str;

    /// Live-run fan-out over this database, where it has one (Postgres).
    fn fanout(
        _pool: &sqlx::Pool<Self::Db>,
        _spec: &crate::StoreSpec,
    ) -> Option<std::sync::Arc<dyn crate::LiveFanout>> {
        None
    }

    /// The statement as the database takes it (`?` on SQLite, `$1, $2, …` on Postgres).
    fn placeholders(sql: String) -> String;
    /// `column` is one of a bound list.
    fn in_list(column: &str) -> String;
    /// The page index, read newest-first (pinned on SQLite, whose planner may prefer another).
    fn page_index() -> &'static str;
    /// The partial index of live runs, in page order.
    fn live_index() -> &'static str;
    /// Whether each scope's arm of a memory read carries its own `ORDER BY … LIMIT`. Postgres
    /// needs it, or it reads every row of each scope before the outer limit; SQLite merges
    /// plain arms in index order and stops at the outer limit, which a per-arm limit would
    /// defeat (each arm would be read to its limit and sorted).
    const MEMORY_ARM_LIMIT: bool;
    /// Whether the walk bounds its window by the window's last key (a subquery) rather than
    /// reading the window into a table of its own and sorting what passes. SQLite then reads
    /// the page index in order and stops at the page's last match; Postgres keeps the bounded
    /// read, which its planner already streams.
    const WALK_TO_BOUNDARY: bool;
    /// The column that finds a row of `runs` from an index entry fastest, within one statement
    /// (`rowid` on SQLite, `ctid` on Postgres).
    fn row_key() -> &'static str;
    /// One statement reading every open branch's next `per_branch` keys, tagged by group and
    /// value: `(grp, val, created_at, id)`.
    fn branches(
        groups: &[Group],
        open: &[OpenBranch],
        status: StatusFilter,
        per_branch: u32,
    ) -> Statement;
    /// The statement that shows how `sql` is planned, and the text of one of its rows.
    fn explain(sql: &str) -> String;
    fn plan_line(row: &Self::Row) -> String;

    /// A pool for the spec (its URL must be this database's; a Postgres `schema` becomes
    /// every connection's `search_path`, created if missing), proven to be this database
    /// before anything is written.
    async fn connect(spec: &StoreSpec) -> Result<Pool<Self::Db>>;
    /// Applies the embedded migrations (the first `only` of them when given).
    async fn migrate(pool: &Pool<Self::Db>, only: Option<usize>, spec: &StoreSpec) -> Result<()>;
    async fn fetch_all(pool: &Pool<Self::Db>, st: Statement) -> Result<Vec<Self::Row>>;
    async fn fetch_optional(pool: &Pool<Self::Db>, st: Statement) -> Result<Option<Self::Row>>;
    /// Runs read by a statement selecting `RUN_COLUMNS`, in any order (callers sort). How rows
    /// travel differs: SQLite's driver hands each row across a thread on its own, so SQLite
    /// returns the whole page as one JSON array; Postgres streams rows.
    async fn fetch_runs(pool: &Pool<Self::Db>, st: Statement) -> Result<Vec<RunRecord>>;
    /// Rows affected.
    async fn execute(pool: &Pool<Self::Db>, st: Statement) -> Result<u64>;
    /// In one transaction: `bump` (which returns one integer, or no row), then `then` built
    /// from that integer. `None` when `bump` matched no row (nothing is written).
    async fn bump_then(
        pool: &Pool<Self::Db>,
        bump: Statement,
        then: Box<dyn FnOnce(i64) -> Statement + Send>,
    ) -> Result<Option<i64>>;
}

/// Each group that has open branches: its index, the group, those branches, and its filters
/// as SQL (`AND x.<column> <in list>`), in group order — what both branch reads walk.
pub fn open_groups<'a, D: Dialect>(
    groups: &'a [Group],
    open: &'a [OpenBranch],
) -> impl Iterator<Item = (usize, &'a Group, Vec<&'a OpenBranch>, String)> {
    groups.iter().enumerate().filter_map(move |(g, group)| {
        let mine: Vec<&OpenBranch> = open.iter().filter(|b| b.group == g).collect();
        let filters: String = group
            .filters
            .iter()
            .map(|a| format!(" AND {}", D::in_list(&format!("x.{}", a.column.sql()))))
            .collect();
        (!mine.is_empty()).then_some((g, group, mine, filters))
    })
}

/// Numbers `?` placeholders as `$1`, `$2`, … (the statements here contain no other `?`).
pub fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON string literal.
pub fn json_string(s: &str) -> String {
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

pub fn json_array(values: &[String]) -> String {
    let items: Vec<String> = values.iter().map(|v| json_string(v)).collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_strings_escape_and_placeholders_number() {
        assert_eq!(super::json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert_eq!(
            super::json_array(&["x".into(), "y".into()]),
            "[\"x\",\"y\"]"
        );
        assert_eq!(super::numbered("a = ? AND b = ?"), "a = $1 AND b = $2");
    }
}
