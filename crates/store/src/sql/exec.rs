//! Running a statement on a pool, written once for every sqlx database: the dialects only say
//! how their binds become arguments, how placeholders are written, and read rows affected.

use sqlx::{Database, Decode, Executor, IntoArguments, Pool, Type};

use super::dialect::Statement;
use crate::error::Result;

/// Every row of a statement.
pub async fn fetch_all<DB>(
    pool: &Pool<DB>,
    sql: String,
    args: DB::Arguments,
) -> Result<Vec<DB::Row>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    Ok(sqlx::query_with(sqlx::AssertSqlSafe(sql), args)
        .fetch_all(pool)
        .await?)
}

/// The first row of a statement, if any.
pub async fn fetch_optional<DB>(
    pool: &Pool<DB>,
    sql: String,
    args: DB::Arguments,
) -> Result<Option<DB::Row>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    Ok(sqlx::query_with(sqlx::AssertSqlSafe(sql), args)
        .fetch_optional(pool)
        .await?)
}

/// What a statement that returns no rows did.
pub async fn execute<DB>(
    pool: &Pool<DB>,
    sql: String,
    args: DB::Arguments,
) -> Result<DB::QueryResult>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    Ok(sqlx::query_with(sqlx::AssertSqlSafe(sql), args)
        .execute(pool)
        .await?)
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
    let (sql, args) = prepare(then(n))?;
    sqlx::query_with(sqlx::AssertSqlSafe(sql), args)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Some(n))
}
