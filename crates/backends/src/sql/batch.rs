//! The statements of a write set, assembled: on a shared database
//! (PostgreSQL) the pieces join one statement as the data-modifying `WITH`
//! clauses described in [`super::apply`]; elsewhere each piece is its own
//! statement, chunked under the parameter limit. The upserts name their
//! table and columns once ([`insert_into!`]): the number of values a row
//! gives is checked against the column list when the program is compiled.

use super::dialect::Dialect;
use super::query::Builder;
use super::statement::{Arg, Statement};

/// Statements being assembled for one write set: on a shared database the
/// pieces join one statement as `WITH` clauses, as long as its parameters
/// fit; elsewhere each piece is a statement.
pub(super) struct Batch<'a> {
    dialect: &'static Dialect,
    statements: Vec<Statement<'a>>,
    open: Option<Builder<'a>>,
    clauses: usize,
    /// On a shared database: queries of `(counter name, delta)` rows over
    /// the open statement's clauses, summed into the counters by its last
    /// clause (see [`Batch::count`]).
    deltas: Vec<String>,
    /// On a shared database: queries of `(minute, name, delta)` rows, summed
    /// into the activity counts by a clause of their own
    /// ([`Batch::count_minutes`]).
    minute_deltas: Vec<String>,
}

impl<'a> Batch<'a> {
    pub(super) fn new(dialect: &'static Dialect) -> Self {
        Self {
            dialect,
            statements: Vec::new(),
            open: None,
            clauses: 0,
            deltas: Vec::new(),
            minute_deltas: Vec::new(),
        }
    }

    /// Returns the dialect the statements are written in.
    pub(super) fn dialect(&self) -> &'static Dialect {
        self.dialect
    }

    /// Adds a piece binding `params` parameters, written by `build`; on a
    /// shared database, returns the name of its `WITH` clause.
    pub(super) fn add(
        &mut self,
        params: usize,
        build: impl FnOnce(&mut Builder<'a>),
    ) -> Option<String> {
        if !self.dialect.shared {
            let mut b = Builder::new(self.dialect);
            build(&mut b);
            self.statements.push(b.finish());
            return None;
        }
        let b = self.clause(params);
        build(b);
        b.push(")");
        Some(format!("w{}", self.clauses - 1))
    }

    /// On a shared database: adds the `(counter name, delta)` rows that
    /// `deltas` selects (from clauses of the open statement) to this
    /// connection's counter shards, in the open statement. All of a
    /// statement's deltas are summed by one clause: two clauses of one
    /// statement must not update the same counter row.
    pub(super) fn count(&mut self, deltas: String) {
        debug_assert!(self.dialect.shared && self.open.is_some());
        self.deltas.push(deltas);
    }

    /// On a shared database: adds the `(minute, name, delta)` rows that
    /// `deltas` selects to this connection's shards of the activity counts
    /// (`rollout_minutes`), in the open statement, as [`Batch::count`] does
    /// for the counters.
    fn count_minutes(&mut self, deltas: String) {
        debug_assert!(self.dialect.shared && self.open.is_some());
        self.minute_deltas.push(deltas);
    }

    /// Opens the next `WITH` clause of the open statement (closing it first
    /// when `params` more would not fit).
    fn clause(&mut self, params: usize) -> &mut Builder<'a> {
        if self
            .open
            .as_ref()
            .is_some_and(|b| b.params() + params > self.dialect.max_params)
        {
            self.close();
        }
        let name = format!("w{}", self.clauses);
        let first = self.clauses == 0;
        self.clauses += 1;
        let b = self.open.get_or_insert_with(|| Builder::new(self.dialect));
        b.push(if first { "WITH " } else { ", " })
            .push(&name)
            .push(" AS (");
        b
    }

    /// Ends the open statement.
    fn close(&mut self) {
        if let Some(mut b) = self.open.take() {
            if !self.deltas.is_empty() {
                b.push(", counted AS (INSERT INTO counters (name, shard, value) \
                     SELECT name, pg_backend_pid(), SUM(d) FROM (")
                    .push(&self.deltas.join(" UNION ALL "))
                    .push(
                        ") AS deltas (name, d) GROUP BY name HAVING SUM(d) <> 0 \
                         ON CONFLICT (name, shard) DO UPDATE SET value = counters.value + excluded.value)",
                    );
                self.deltas.clear();
            }
            if !self.minute_deltas.is_empty() {
                b.push(
                    ", minuted AS (INSERT INTO rollout_minutes (minute, name, shard, value) \
                     SELECT minute, name, pg_backend_pid(), SUM(d) FROM (",
                )
                .push(&self.minute_deltas.join(" UNION ALL "))
                .push(
                    ") AS deltas (minute, name, d) GROUP BY minute, name HAVING SUM(d) <> 0 \
                         ON CONFLICT (minute, name, shard) \
                         DO UPDATE SET value = rollout_minutes.value + excluded.value)",
                );
                self.minute_deltas.clear();
            }
            b.push(" SELECT 1");
            self.statements.push(b.finish());
            self.clauses = 0;
        }
    }

    pub(super) fn finish(mut self) -> Vec<Statement<'a>> {
        self.close();
        self.statements
    }
}

/// Appends ` VALUES (…), (…)` for `rows` of placeholders.
fn values<'a, const N: usize>(b: &mut Builder<'a>, rows: impl Iterator<Item = [Arg<'a>; N]>) {
    b.push(" VALUES ");
    for (i, row) in rows.enumerate() {
        let placeholders: Vec<String> = row.into_iter().map(|arg| b.arg(arg)).collect();
        if i > 0 {
            b.push(", ");
        }
        b.push("(").push(&placeholders.join(", ")).push(")");
    }
}

/// Appends ` SELECT * FROM unnest($1, $2, …)` for `rows`, one array
/// parameter per column (typed by the column's values, whose NULLs carry
/// their type): the text does not depend on the number of rows, and
/// `unnest` yields them in order.
fn unnested<'a, const N: usize>(b: &mut Builder<'a>, rows: impl Iterator<Item = [Arg<'a>; N]>) {
    let mut columns: Vec<Arg<'a>> = Vec::new();
    for row in rows {
        if columns.is_empty() {
            columns = row
                .iter()
                .map(|arg| match arg {
                    Arg::Int(_) | Arg::NullInt => Arg::Ints(Vec::new()),
                    _ => Arg::Texts(Vec::new()),
                })
                .collect();
        }
        for (column, arg) in columns.iter_mut().zip(row) {
            match (column, arg) {
                (Arg::Ints(values), Arg::Int(value)) => values.push(Some(value)),
                (Arg::Ints(values), Arg::NullInt) => values.push(None),
                (Arg::Texts(values), Arg::Text(text)) => values.push(Some(text)),
                (Arg::Texts(values), Arg::NullText) => values.push(None),
                (column, arg) => unreachable!("column {column:?} given {arg:?}"),
            }
        }
    }
    let arrays: Vec<String> = columns
        .into_iter()
        .map(|column| {
            let array_type = match column {
                Arg::Ints(_) => "BIGINT[]",
                _ => "TEXT[]",
            };
            format!("CAST({} AS {array_type})", b.arg(column))
        })
        .collect();
    b.push(" SELECT * FROM unnest(")
        .push(&arrays.join(", "))
        .push(")");
}

/// The table and the columns an upsert writes; `N`, the number of
/// columns, is counted from the list when the program is compiled
/// ([`insert_into!`]), and each row must give exactly `N` values.
#[derive(Debug, Clone, Copy)]
pub(super) struct InsertInto<const N: usize> {
    table: &'static str,
    columns: &'static str,
}

impl<const N: usize> InsertInto<N> {
    /// Returns the target `table (columns)`, refusing (when the program is
    /// compiled, in [`insert_into!`]) an `N` that does not count them.
    pub(super) const fn new(table: &'static str, columns: &'static str) -> Self {
        assert!(column_count(columns) == N, "N must count the columns");
        Self { table, columns }
    }

    /// Returns `INSERT INTO table (columns)`.
    fn head(&self) -> String {
        format!("INSERT INTO {} ({})", self.table, self.columns)
    }
}

/// Returns the number of columns of a comma-separated column list.
pub(super) const fn column_count(columns: &str) -> usize {
    let bytes = columns.as_bytes();
    let mut count = 1;
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b',' {
            count += 1;
        }
        at += 1;
    }
    count
}

/// `insert_into!(table, columns)`: the [`InsertInto`] of `table` and the
/// column list `columns` (a string literal or `concat!`), its column count
/// derived from the list.
macro_rules! insert_into {
    ($table:literal, $columns:expr) => {{
        const TARGET: $crate::sql::batch::InsertInto<
            { $crate::sql::batch::column_count($columns) },
        > = $crate::sql::batch::InsertInto::new($table, $columns);
        TARGET
    }};
}
pub(super) use insert_into;

/// Adds one upsert per chunk of `rows` into `target`, each row's values
/// in the order of its columns.
pub(super) fn upsert<'a, T: 'a, const N: usize>(
    batch: &mut Batch<'a>,
    rows: &'a [T],
    target: InsertInto<N>,
    tail: &str,
    row: impl Fn(&'a T) -> [Arg<'a>; N],
) {
    upsert_counted(batch, rows, target, tail, row, None);
}

/// What an upsert changes in the counters, on a shared database: the
/// upsert ends with `returning`, and `deltas` turns the name of its clause
/// into a query of `(counter name, delta)` rows (see [`Batch::count`]).
pub(super) struct Counted<'f> {
    pub(super) returning: &'static str,
    pub(super) deltas: &'f dyn Fn(&str) -> String,
    /// Likewise for the activity counts ([`Batch::count_minutes`]).
    pub(super) minutes: Option<&'f dyn Fn(&str) -> String>,
}

/// [`upsert`], counted on a shared database (elsewhere the schema's
/// triggers count).
pub(super) fn upsert_counted<'a, T: 'a, const N: usize>(
    batch: &mut Batch<'a>,
    rows: &'a [T],
    target: InsertInto<N>,
    tail: &str,
    row: impl Fn(&'a T) -> [Arg<'a>; N],
    counted: Option<Counted<'_>>,
) {
    let shared = batch.dialect.shared;
    let counted = counted.filter(|_| shared);
    // A shared database takes every row in one clause, several rows as
    // arrays (one row stays `VALUES`: the database plans the join of the
    // counted clause knowing it is one row); elsewhere the rows are
    // chunked under the parameter limit.
    let chunk = if shared {
        rows.len().max(1)
    } else {
        (batch.dialect.max_params / N).max(1)
    };
    for part in rows.chunks(chunk) {
        let params = if shared { N } else { part.len() * N };
        let clause = batch.add(params, |b| {
            b.push(&target.head());
            if shared && part.len() > 1 {
                unnested(b, part.iter().map(&row));
            } else {
                values(b, part.iter().map(&row));
            }
            b.push(tail);
            if let Some(counted) = &counted {
                b.push(counted.returning);
            }
        });
        if let (Some(counted), Some(clause)) = (&counted, clause) {
            batch.count((counted.deltas)(&clause));
            if let Some(minutes) = counted.minutes {
                batch.count_minutes(minutes(&clause));
            }
        }
    }
}
