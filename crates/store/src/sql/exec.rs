//! Running a statement, written once for every sqlx database: the dialects only say how their
//! binds become arguments and how placeholders are written.

use sqlx::query::Query;
use sqlx::{Database, Decode, Executor, IntoArguments, Pool, Type};

use super::dialect::Statement;
use crate::error::Result;

/// A prepared statement (its text and arguments) as a query any sqlx executor runs.
pub fn query<DB>((sql, args): (String, DB::Arguments)) -> Query<'static, DB, DB::Arguments>
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
{
    sqlx::query_with(sqlx::AssertSqlSafe(sql), args)
}

/// In one transaction: `bump` (one integer, or no row), then `then` built from it. `prepare`
/// turns a statement into its text and arguments for this database.
pub async fn bump_then<DB>(
    pool: &Pool<DB>,
    prepare: impl Fn(Statement) -> Result<(String, DB::Arguments)>,
    bump: Statement,
    then: Box<dyn FnOnce(i64) -> Statement + Send>,
) -> Result<Option<i64>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'r> i64: Decode<'r, DB> + Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    let mut tx = pool.begin().await?;
    let (sql, args) = prepare(bump)?;
    let n: Option<i64> = sqlx::query_scalar_with(sqlx::AssertSqlSafe(sql), args)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(n) = n else {
        return Ok(None);
    };
    query(prepare(then(n))?).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(Some(n))
}
