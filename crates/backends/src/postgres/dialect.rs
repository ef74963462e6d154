//! What is PostgreSQL's own in the SQL the backends share: its dialect,
//! and how its failures map to store errors.

use crate::sql::Dialect;
use lightning_store_core::error::StoreError;

pub(super) static POSTGRES: Dialect = Dialect {
    contains: |haystack, needle| format!("strpos({haystack}, {needle}) > 0"),
    binary_text: |expression| format!("({expression}) COLLATE \"C\""),
    max_params: 65_535,
    shared: true,
    packs_rows: false,
    // A sequence: no row lock, so opens on several servers never queue.
    next_session_epoch: "SELECT nextval('session_epochs')",
    // Transaction-scoped advisory locks on the names' 64-bit hashes, taken
    // in hash order so that two transactions locking several names cannot
    // deadlock; a collision only serialises more.
    lock_names: Some(
        "SELECT count(pg_advisory_xact_lock(k)) FROM (SELECT DISTINCT \
         hashtextextended(n, 0) AS k FROM unnest(CAST($1 AS TEXT[])) AS n ORDER BY k) AS keys",
    ),
    rollouts_by_id: "rollouts r",
    events_after: EVENTS_AFTER,
    event_bounds: "SELECT (SELECT seq - n + 1 FROM events ORDER BY seq LIMIT 1), \
                   (SELECT MAX(seq) FROM events)",
};

/// The events after number `$1`, at most `$2`, in order. A row of `events`
/// is one event or a block of `n` events numbered up to its `seq`, stored
/// in `event_rows` (migration 0010): the first `$2` rows past `$1` hold at
/// least `$2` events past it, each block's read from its key in order.
const EVENTS_AFTER: &str = "SELECT e.seq - e.n + x.k, x.time, x.change \
     FROM (SELECT seq, n, block, time, change FROM events WHERE seq > $1 \
           ORDER BY seq LIMIT $2) AS e \
     CROSS JOIN LATERAL (\
         SELECT CAST(1 AS BIGINT) AS k, e.time AS time, e.change AS change WHERE e.block IS NULL \
         UNION ALL \
         (SELECT r.k, r.time, r.change FROM event_rows AS r \
          WHERE r.block = e.block AND r.k > $1 - (e.seq - e.n) ORDER BY r.k LIMIT $2)) AS x \
     ORDER BY e.seq, x.k LIMIT $2";

/// Maps a failure while serving to a store error.
pub(super) fn store_error(error: sqlx::Error) -> StoreError {
    let unavailable = |what: String| StoreError::Unavailable(format!("postgres: {what}"));
    let mapped = match &error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => unavailable(error.to_string()),
        sqlx::Error::Database(db) => match db.code().as_deref() {
            // Connection exceptions, insufficient resources, operator
            // intervention (shutdown, statement timeout), serialization
            // failures, deadlocks.
            Some(code)
                if code.starts_with("08")
                    || code.starts_with("53")
                    || code.starts_with("57")
                    || code == "40001"
                    || code == "40P01" =>
            {
                unavailable(error.to_string())
            }
            // Undefined table, function or schema: the schema of the
            // namespace this store serves was dropped by its purge (on this
            // server or another), everything else of it is there.
            Some("42P01" | "42883" | "3F000") => {
                StoreError::NotFound(format!("the namespace was deleted (postgres: {error})"))
            }
            _ => StoreError::Internal(format!("postgres: {error}")),
        },
        _ => StoreError::Internal(format!("postgres: {error}")),
    };
    tracing::error!(error = %mapped, "postgres statement failed");
    mapped
}
