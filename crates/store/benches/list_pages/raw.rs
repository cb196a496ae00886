//! The same pages read from SQLite directly: rusqlite over the same library build, file and
//! indexes, statements prepared once before timing, on the bench's own thread. It is the floor
//! the store's page is compared with (store ÷ raw), at its simplest:
//!
//! - all channels: one range of the page index, newest first;
//! - the walk: the page index newest first, filtered by the predicate's leaves (SQLite reads
//!   them from the index before touching the row);
//! - the merge: one range per leaf value on its own `(column, created_at DESC, id DESC)` index,
//!   stepped lazily and merged in a heap, then the page's rows by rowid.
//!
//! For a predicate with leaves both the walk and the merge are timed and the faster one is the
//! floor. Every read returns the same rows, all columns, as owned values.

use std::collections::{BinaryHeap, HashSet};

use authz_core::Predicate;
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, Statement};

/// The run columns the store's page reads, in its order.
const COLUMNS: &str = "id, surface, channel_id, thread_key, user_id, agent, repo, status, request, answer, error, created_at, finished_at, capability_token_hash, agent_token_hash, owner, channel_visibility, stop_requested_at, parent_run";

/// A run row: every column, owned.
pub type Row = Vec<Value>;

pub fn open(path: &std::path::Path) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("raw SQLite opens")
}

/// One index range: `column = value`, newest first.
struct Leaf {
    column: &'static str,
    index: &'static str,
    value: String,
}

/// A predicate's leaves, or `None` for the whole table. The bench's shapes are `All` or an
/// `Or` of channel, visibility and user leaves; anything else is not a shape this floor reads.
fn leaves(p: &Predicate) -> Option<Vec<Leaf>> {
    let leaf = |column, index, value: String| Leaf {
        column,
        index,
        value,
    };
    match p {
        Predicate::All => None,
        Predicate::ChannelsIn(v) => Some(
            v.iter()
                .map(|c| leaf("channel_id", "runs_channel_page", c.to_string()))
                .collect(),
        ),
        Predicate::VisibilityIn(v) => Some(
            v.iter()
                .map(|x| {
                    leaf(
                        "channel_visibility",
                        "runs_visibility_page",
                        x.as_str().into(),
                    )
                })
                .collect(),
        ),
        Predicate::UserIs(u) => Some(vec![leaf("user_id", "runs_user_page", u.to_string())]),
        Predicate::Or(ps) => Some(
            ps.iter()
                .flat_map(|p| leaves(p).expect("an Or of leaves"))
                .collect(),
        ),
        other => panic!("the raw floor reads All or an Or of leaves, not {other:?}"),
    }
}

/// A literal SQL string (the bench's own channel and user names; quotes doubled anyway).
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The statements of one shape's page, prepared once.
pub struct RawPage<'c> {
    limit: usize,
    /// All channels: the page index's range. With leaves: the walk.
    scan: Statement<'c>,
    /// One range per leaf, with the value it binds (empty for all channels).
    ranges: Vec<(Statement<'c>, String)>,
    by_rowid: Statement<'c>,
}

impl<'c> RawPage<'c> {
    pub fn prepare(conn: &'c Connection, p: &Predicate, limit: usize) -> Self {
        let leaves = leaves(p);
        let filter = leaves.as_ref().map_or(String::new(), |ls| {
            let ors: Vec<String> = ls
                .iter()
                .map(|l| format!("{} = {}", l.column, literal(&l.value)))
                .collect();
            format!("WHERE {}", ors.join(" OR "))
        });
        let scan = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM runs INDEXED BY runs_page {filter} ORDER BY created_at DESC, id DESC LIMIT {limit}"
            ))
            .expect("scan");
        let ranges = leaves
            .unwrap_or_default()
            .into_iter()
            .map(|l| {
                let st = conn
                    .prepare(&format!(
                        "SELECT created_at, id, rowid FROM runs INDEXED BY {} WHERE {} = ?1 ORDER BY created_at DESC, id DESC",
                        l.index, l.column
                    ))
                    .expect("range");
                (st, l.value)
            })
            .collect();
        let by_rowid = conn
            .prepare(&format!("SELECT {COLUMNS} FROM runs WHERE rowid = ?1"))
            .expect("by rowid");
        RawPage {
            limit,
            scan,
            ranges,
            by_rowid,
        }
    }

    /// Whether the shape has leaves to merge (all channels has none).
    pub fn merges(&self) -> bool {
        !self.ranges.is_empty()
    }

    /// The page index's range, or the walk.
    pub fn scan(&mut self) -> Vec<Row> {
        let mut rows = self.scan.query([]).expect("scan");
        let mut page = Vec::with_capacity(self.limit);
        while let Some(r) = rows.next().expect("step") {
            page.push(row(r));
        }
        page
    }

    /// The merge of the leaves' ranges, then the page's rows by rowid.
    pub fn merge(&mut self) -> Vec<Row> {
        let mut cursors: Vec<rusqlite::Rows<'_>> = self
            .ranges
            .iter_mut()
            .map(|(st, v)| st.query([v.as_str()]).expect("range"))
            .collect();
        // (created_at, id, rowid, cursor): the heap's top is the newest head.
        let mut heads: BinaryHeap<(i64, String, i64, usize)> = BinaryHeap::new();
        for (i, c) in cursors.iter_mut().enumerate() {
            if let Some(h) = head(c, i) {
                heads.push(h);
            }
        }
        let mut seen = HashSet::with_capacity(self.limit);
        let mut rowids = Vec::with_capacity(self.limit);
        while rowids.len() < self.limit {
            let Some((_, _, rowid, i)) = heads.pop() else {
                break;
            };
            if seen.insert(rowid) {
                rowids.push(rowid);
            }
            if let Some(h) = head(&mut cursors[i], i) {
                heads.push(h);
            }
        }
        drop(cursors);
        rowids
            .into_iter()
            .map(|id| {
                self.by_rowid
                    .query_row([id], |r| Ok(row(r)))
                    .expect("row by rowid")
            })
            .collect()
    }
}

fn head(rows: &mut rusqlite::Rows<'_>, i: usize) -> Option<(i64, String, i64, usize)> {
    let r = rows.next().expect("step")?;
    Some((
        r.get(0).expect("created_at"),
        r.get(1).expect("id"),
        r.get(2).expect("rowid"),
        i,
    ))
}

fn row(r: &rusqlite::Row<'_>) -> Row {
    (0..19).map(|i| r.get(i).expect("a column")).collect()
}

/// A row's run id, to check the floor returns the store's page.
pub fn id_of(r: &Row) -> &str {
    match r.first() {
        Some(Value::Text(s)) => s,
        other => panic!("a run id, not {other:?}"),
    }
}
