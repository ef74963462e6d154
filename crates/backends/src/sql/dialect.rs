//! What differs between the SQL dialects the module writes.

/// What differs between the SQL dialects this module writes.
#[derive(Debug)]
pub struct Dialect {
    /// Returns a condition true when the text expression `haystack`
    /// contains the text expression `needle` (case-sensitively).
    pub contains: fn(haystack: &str, needle: &str) -> String,
    /// Returns a text expression that sorts by code point.
    pub binary_text: fn(expression: &str) -> String,
    /// The most parameters one statement may bind.
    pub max_params: usize,
    /// Several servers write the database at once (PostgreSQL): reads lock
    /// the rows they return (`FOR UPDATE`, `SKIP LOCKED` on the queue head
    /// and the due deadlines), a write set is sent as one statement of
    /// data-modifying `WITH` clauses, counters are sharded, and event
    /// numbers come from a counter row (see [`super::apply`]). Otherwise the
    /// database has one writer that serialises transactions (SQLite).
    pub shared: bool,
    /// Many small rows of one key read faster packed into one text row per
    /// key (SQLite: its grouping walks the primary key in order, and a
    /// result row costs its driver more than the text) than as they are
    /// (PostgreSQL: the grouping's sort and the text cost the server more
    /// than the rows cost the driver; docs/performance.md#measure-rows-as-they-are).
    pub packs_rows: bool,
    /// A statement whose one row holds a new session epoch, greater than
    /// every one before it.
    pub next_session_epoch: &'static str,
    /// A statement that locks the names in its one parameter (an array of
    /// texts) until the transaction ends ([`ImmediateWrites::lock_names`](lightning_store_core::storage::ImmediateWrites::lock_names)); `None`
    /// where one writer serialises every transaction.
    pub lock_names: Option<&'static str>,
    /// The rollouts table as `r`, walked in rollout id order on its unique
    /// index, for a keyset page in id order whatever else the page filters
    /// on (SQLite would otherwise take an index of a filtered column and
    /// sort every match, for each page).
    pub rollouts_by_id: &'static str,
    /// A statement returning the `(seq, time, change)` of the events after
    /// number `$1`, at most `$2` of them, in order.
    pub events_after: &'static str,
    /// A statement whose one row holds the numbers of the oldest and the
    /// latest event kept (NULLs when there is none).
    pub event_bounds: &'static str,
}

/// [`Dialect::events_after`] where `events` holds one row per event.
pub const EVENTS_AFTER: &str =
    "SELECT seq, time, change FROM events WHERE seq > $1 ORDER BY seq LIMIT $2";

/// [`Dialect::event_bounds`] where `events` holds one row per event.
pub const EVENT_BOUNDS: &str = "SELECT MIN(seq), MAX(seq) FROM events";
