//! Translation of the [`lightning_store_core::query`] language to SQL: filters become
//! a `WHERE` condition, `sort_by` an `ORDER BY` key in front of the query's
//! default order (so ties keep it, as the reference's stable sort does), and
//! the page a `LIMIT`/`OFFSET`.

use super::dialect::Dialect;
use super::statement::{Arg, Statement};
use lightning_store_core::query::{FilterLogic, Page, TextMatch, TimeRange};

/// Builds a statement, numbering parameters in the order they are bound.
pub struct Builder<'a> {
    sql: String,
    args: Vec<Arg<'a>>,
    dialect: &'static Dialect,
}

impl<'a> Builder<'a> {
    /// Returns an empty statement for `dialect`.
    pub fn new(dialect: &'static Dialect) -> Self {
        Self {
            sql: String::with_capacity(256),
            args: Vec::new(),
            dialect,
        }
    }

    /// Appends SQL text.
    pub fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    /// Binds a parameter and returns its placeholder.
    pub fn arg(&mut self, value: impl Into<Arg<'a>>) -> String {
        self.args.push(value.into());
        format!("${}", self.args.len())
    }

    /// Returns the number of parameters bound so far.
    pub fn params(&self) -> usize {
        self.args.len()
    }

    /// Returns the statement.
    pub fn finish(self) -> Statement<'a> {
        Statement {
            sql: self.sql.into(),
            args: self.args,
        }
    }

    /// Returns a condition that combines `conditions` (`None`: not given)
    /// under `logic` with [`FilterLogic::combine`]'s semantics.
    pub fn combine(logic: FilterLogic, conditions: Vec<Option<String>>) -> String {
        let given: Vec<String> = conditions.into_iter().flatten().collect();
        match (logic, given.is_empty()) {
            (FilterLogic::And, true) => "1 = 1".to_owned(),
            (FilterLogic::Or, true) => "1 = 0".to_owned(),
            (FilterLogic::And, false) => format!("({})", given.join(" AND ")),
            (FilterLogic::Or, false) => format!("({})", given.join(" OR ")),
        }
    }

    /// Returns `column = value`.
    pub fn equals(&mut self, column: &str, value: &'a str) -> String {
        format!("{column} = {}", self.arg(value))
    }

    /// Returns the conditions that keep `column` in `range`: at or after
    /// its start, before its end (none for a side left open).
    pub fn within(&mut self, column: &str, range: TimeRange) -> impl Iterator<Item = String> {
        let from = range
            .from
            .map(|from| format!("{column} >= {}", self.arg(from)));
        let until = range
            .until
            .map(|until| format!("{column} < {}", self.arg(until)));
        from.into_iter().chain(until)
    }

    /// Returns a condition true when `column` contains `part`.
    pub fn contains(&mut self, column: &str, part: &'a str) -> String {
        let needle = self.arg(part);
        (self.dialect.contains)(column, &needle)
    }

    /// Returns `column IN (values)` (false for no values). On a shared
    /// database several values travel as one array parameter (`column =
    /// ANY($n)`), so that the text, and the plan the database caches for
    /// it, does not depend on how many there are; one value is `column =
    /// $n`, whose generic plan the database keeps (with an array it plans
    /// every call anew, estimating ten values).
    pub fn one_of(&mut self, column: &str, values: impl IntoIterator<Item = &'a str>) -> String {
        if self.dialect.shared {
            let mut values: Vec<&'a str> = values.into_iter().collect();
            return match values.len() {
                0 => "1 = 0".to_owned(),
                1 => self.equals(column, values.remove(0)),
                _ => {
                    let values = values.into_iter().map(|v| Some(v.into())).collect();
                    let array = self.arg(Arg::Texts(values));
                    format!("{column} = ANY(CAST({array} AS TEXT[]))")
                }
            };
        }
        let placeholders: Vec<String> = values.into_iter().map(|v| self.arg(v)).collect();
        if placeholders.is_empty() {
            "1 = 0".to_owned()
        } else {
            format!("{column} IN ({})", placeholders.join(", "))
        }
    }

    /// Returns the exact and substring conditions of a text match.
    pub fn text_match(&mut self, column: &str, text: &'a TextMatch) -> [Option<String>; 2] {
        [
            text.exact.as_deref().map(|e| self.equals(column, e)),
            text.contains.as_deref().map(|c| self.contains(column, c)),
        ]
    }

    /// Appends `ORDER BY` with the page's sort key (looked up in `fields`)
    /// before `default_order`, then the page's window.
    pub fn order_and_page(&mut self, page: &Page, fields: &[SortField], default_order: &str) {
        let order = self.order_by(page, fields, default_order);
        self.push(&order);
        self.page_window(page);
    }

    /// Returns ` ORDER BY` with the page's sort key (looked up in `fields`)
    /// before `default_order`.
    pub fn order_by(&self, page: &Page, fields: &[SortField], default_order: &str) -> String {
        match page
            .sort_by
            .as_deref()
            .and_then(|name| fields.iter().find(|f| f.name == name))
        {
            Some(field) => format!(
                " ORDER BY {}, {default_order}",
                self.sort_key(field, page.descending)
            ),
            None => format!(" ORDER BY {default_order}"),
        }
    }

    /// Appends the page's window (`LIMIT` and `OFFSET`).
    pub fn page_window(&mut self, page: &Page) {
        let limit = page
            .limit
            .map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX));
        let limit = self.arg(limit);
        let offset = self.arg(i64::try_from(page.offset).unwrap_or(i64::MAX));
        self.push(&format!(" LIMIT {limit} OFFSET {offset}"));
    }

    /// Returns the key of `field`. A column that is never NULL sorts as
    /// itself, so that an index on it can give the order.
    fn sort_key(&self, field: &SortField, descending: bool) -> String {
        let dir = if descending { " DESC" } else { "" };
        let column = field.column;
        match (field.kind, field.nullable) {
            (SortKind::Text, false) => format!("{}{dir}", (self.dialect.binary_text)(column)),
            // Absent text sorts as the empty string.
            (SortKind::Text, true) => format!(
                "{}{dir}",
                (self.dialect.binary_text)(&format!("COALESCE({column}, '')"))
            ),
            (SortKind::Int, _) | (SortKind::Time, false) => format!("{column}{dir}"),
            // Absent times sort after every present one (first when descending).
            (SortKind::Time, true) => format!("({column} IS NULL){dir}, {column}{dir}"),
            // Absent numbers sort before every present one (last when descending).
            (SortKind::Real, _) => format!("({column} IS NOT NULL){dir}, {column}{dir}"),
        }
    }
}

/// Returns `text` as an SQL string literal, for statements that travel
/// without parameters. Only quotes are special in a standard string (the
/// PostgreSQL backend sets `standard_conforming_strings`); NUL cannot occur
/// in the JSON texts written this way.
pub fn text_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// How a sort field compares.
#[derive(Debug, Clone, Copy)]
pub enum SortKind {
    /// By code point; absent is the empty string.
    Text,
    Int,
    /// Absent after present.
    Time,
    /// A number held as an integer that orders as it does; absent before
    /// present.
    Real,
}

/// A field `sort_by` accepts and the column it sorts on.
#[derive(Debug, Clone, Copy)]
pub struct SortField {
    pub name: &'static str,
    pub column: &'static str,
    pub kind: SortKind,
    /// Whether the column can be NULL (the schema says).
    pub nullable: bool,
}

/// A field on a column that is never NULL.
const fn field(name: &'static str, column: &'static str, kind: SortKind) -> SortField {
    SortField {
        name,
        column,
        kind,
        nullable: false,
    }
}

/// A field on a column that can be NULL.
const fn nullable(name: &'static str, column: &'static str, kind: SortKind) -> SortField {
    SortField {
        name,
        column,
        kind,
        nullable: true,
    }
}

/// Sort fields of rollouts (see [`lightning_store_core::query::Sortable`] for `RewardedRollout`).
pub const ROLLOUT_SORT: &[SortField] = &[
    field("rollout_id", "r.rollout_id", SortKind::Text),
    field("start_time", "r.start_time", SortKind::Time),
    nullable("end_time", "r.end_time", SortKind::Time),
    nullable("mode", "r.mode", SortKind::Text),
    nullable("resources_id", "r.resources_id", SortKind::Text),
    field("status", "r.status", SortKind::Text),
    // The key that orders as the reward does (`training::reward_key`).
    nullable(
        "reward",
        "(SELECT rw.value FROM rollout_rewards rw WHERE rw.rollout_id = r.rollout_id)",
        SortKind::Real,
    ),
];

/// Sort fields of spans.
pub const SPAN_SORT: &[SortField] = &[
    field("rollout_id", "rollout_id", SortKind::Text),
    field("attempt_id", "attempt_id", SortKind::Text),
    field("sequence_id", "sequence_id", SortKind::Int),
    field("trace_id", "trace_id", SortKind::Text),
    field("span_id", "span_id", SortKind::Text),
    nullable("parent_id", "parent_id", SortKind::Text),
    field("name", "name", SortKind::Text),
    nullable("start_time", "start_time", SortKind::Time),
    nullable("end_time", "end_time", SortKind::Time),
];

/// Sort fields of workers.
pub const WORKER_SORT: &[SortField] = &[
    field("worker_id", "worker_id", SortKind::Text),
    field("status", "status", SortKind::Text),
    nullable("last_heartbeat_time", "last_heartbeat_time", SortKind::Time),
    nullable("last_dequeue_time", "last_dequeue_time", SortKind::Time),
    nullable("last_busy_time", "last_busy_time", SortKind::Time),
    nullable("last_idle_time", "last_idle_time", SortKind::Time),
    nullable("current_rollout_id", "current_rollout_id", SortKind::Text),
    nullable("current_attempt_id", "current_attempt_id", SortKind::Text),
];

/// Sort fields of resources snapshots.
pub const RESOURCES_SORT: &[SortField] = &[
    field("resources_id", "resources_id", SortKind::Text),
    field("create_time", "create_time", SortKind::Time),
    field("update_time", "update_time", SortKind::Time),
    field("version", "version", SortKind::Int),
];

#[cfg(test)]
mod tests {
    use super::*;
    use lightning_store_core::model::{ResourcesUpdate, Span, Worker};
    use lightning_store_core::query::{RewardedRollout, Sortable};

    fn names(fields: &[SortField]) -> Vec<&'static str> {
        fields.iter().map(|f| f.name).collect()
    }

    #[test]
    fn a_text_literal_doubles_its_quotes() {
        assert_eq!(text_literal(r#"{"id": "it's"}"#), r#"'{"id": "it''s"}'"#);
        assert_eq!(text_literal(r"back\slash"), r"'back\slash'");
    }

    #[test]
    fn every_sortable_field_has_a_column() {
        assert_eq!(names(ROLLOUT_SORT), RewardedRollout::SORT_FIELDS);
        assert_eq!(names(SPAN_SORT), Span::SORT_FIELDS);
        assert_eq!(names(WORKER_SORT), Worker::SORT_FIELDS);
        assert_eq!(names(RESOURCES_SORT), ResourcesUpdate::SORT_FIELDS);
    }
}
