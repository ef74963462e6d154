//! Running the shared SQL on a SQLite connection: the dialect, statements
//! bound and run, rows copied out, transaction control and the mapping of
//! SQLite's failures; shared by the writer, its group commit and the
//! readers.

use std::borrow::Cow;

use rusqlite::types::Value;

use crate::sql::{self, Arg, Dialect, Statement};
use lightning_store_core::error::{StoreError, StoreResult};

pub(super) static SQLITE: Dialect = Dialect {
    contains: |haystack, needle| format!("instr({haystack}, {needle}) > 0"),
    binary_text: |expression| expression.to_owned(),
    max_params: 32_766,
    shared: false,
    packs_rows: true,
    next_session_epoch: "UPDATE counters SET value = value + 1 WHERE name = 'session_epoch' \
                         RETURNING value",
    lock_names: None,
    rollouts_by_id: "rollouts r INDEXED BY sqlite_autoindex_rollouts_1",
    events_after: sql::EVENTS_AFTER,
    event_bounds: sql::EVENT_BOUNDS,
};

/// Keeps a cached statement's plan whatever its parameters are bound to
/// (SQLite's query planner stability guarantee). Without it SQLite plans a
/// statement again on every run whose parameters may change the plan:
/// `LIMIT $n` alone does, and the queue's claim was prepared anew on every
/// dequeue (6% of the server's CPU in a profile of 16 clients). The plans
/// here depend on no bound value: no `LIKE`, and no `ANALYZE` statistics.
pub(super) fn plan_once(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

/// Maps a failure while serving to a store error.
pub(super) fn store_error(error: rusqlite::Error) -> StoreError {
    let unavailable = |what: &str| StoreError::Unavailable(format!("sqlite: {what}"));
    let code = match &error {
        rusqlite::Error::SqliteFailure(failure, _) => Some(failure.extended_code & 0xff),
        _ => None,
    };
    let mapped = match code {
        Some(13) => unavailable("the disk is full"),
        Some(10) => unavailable(&format!("disk i/o error ({error})")),
        Some(5 | 6) => unavailable("the database is busy"),
        Some(9) => StoreError::shutting_down(),
        Some(8) => unavailable("the database is read-only"),
        Some(11 | 26) => StoreError::Internal(format!("sqlite: the database is corrupt ({error})")),
        _ => StoreError::Internal(format!("sqlite: {error}")),
    };
    tracing::error!(error = %mapped, "sqlite statement failed");
    mapped
}

/// Rewrites the `$n` parameters of the shared SQL as SQLite's `?n`, whose
/// index is `n` itself: arguments bind by position, without the name lookup
/// SQLite answers with a linear scan (quadratic for a batch insert's
/// thousands of parameters).
fn numbered(sql: &str) -> Cow<'_, str> {
    if sql.contains('$') {
        Cow::Owned(sql.replace('$', "?"))
    } else {
        Cow::Borrowed(sql)
    }
}

/// One result row, its cells copied out of SQLite.
pub struct SqliteRow(Vec<Value>);

impl sql::Row for SqliteRow {
    fn opt_int(&self, index: usize) -> StoreResult<Option<i64>> {
        match self.0.get(index) {
            Some(Value::Null) => Ok(None),
            Some(Value::Integer(value)) => Ok(Some(*value)),
            other => Err(sql::codec::corrupt("integer", format_args!("{other:?}"))),
        }
    }

    fn opt_text(&self, index: usize) -> StoreResult<Option<String>> {
        match self.0.get(index) {
            Some(Value::Null) => Ok(None),
            Some(Value::Text(text)) => Ok(Some(text.clone())),
            other => Err(sql::codec::corrupt("text", format_args!("{other:?}"))),
        }
    }
}

/// Runs a transaction control statement from the connection's statement
/// cache: `execute_batch` parsed `BEGIN`, `SAVEPOINT`, `RELEASE` and
/// `COMMIT` anew each time (2% of a 1.x rollout GET's CPU on a reader,
/// docs/performance.md#reads-on-the-reader-connections-in-one-statement; a
/// lifecycle runs about ten of them on the writer).
pub(super) fn control(conn: &rusqlite::Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// Runs one statement on the connection and returns its rows.
pub(super) fn run(
    conn: &rusqlite::Connection,
    statement: &Statement<'_>,
) -> rusqlite::Result<Vec<SqliteRow>> {
    let mut prepared = conn.prepare_cached(&numbered(&statement.sql))?;
    for (at, arg) in statement.args.iter().enumerate() {
        match arg {
            Arg::NullInt | Arg::NullText => {
                prepared.raw_bind_parameter(at + 1, rusqlite::types::Null)?
            }
            Arg::Int(value) => prepared.raw_bind_parameter(at + 1, value)?,
            Arg::Text(text) => prepared.raw_bind_parameter(at + 1, text.as_ref())?,
            Arg::Ints(_) | Arg::Texts(_) => {
                return Err(rusqlite::Error::ToSqlConversionFailure(
                    "sqlite binds no arrays".into(),
                ));
            }
        }
    }
    let columns = prepared.column_count();
    let mut rows = prepared.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let cells = (0..columns)
            .map(|at| row.get::<_, Value>(at))
            .collect::<rusqlite::Result<_>>()?;
        out.push(SqliteRow(cells));
    }
    Ok(out)
}
