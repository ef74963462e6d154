//! Query language shared by every backend: filters, sort fields and
//! pagination, with agent-lightning's semantics. The in-memory backend
//! evaluates these directly; SQL backends translate them.

use std::cmp::Ordering;

use super::error::{StoreError, StoreResult, echo};
use super::model::{
    Attempt, ResourcesUpdate, Rollout, RolloutMode, RolloutStatus, Span, Timestamp, Worker,
    WorkerStatus,
};
use super::training::{NoRowsReason, RowsVerdict};

/// How a query's conditions combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterLogic {
    #[default]
    And,
    Or,
}

impl FilterLogic {
    /// Combines the conditions that were given (`None` = not given). An AND
    /// of nothing matches everything; an OR of nothing matches nothing, as
    /// upstream's filter pool does.
    pub fn combine(self, conditions: &[Option<bool>]) -> bool {
        let mut given = conditions.iter().flatten();
        match self {
            Self::And => given.all(|&c| c),
            Self::Or => given.any(|&c| c),
        }
    }
}

/// Sorting and the result window of a query.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Page {
    /// Field to sort by; `None` keeps the query's default order.
    pub sort_by: Option<String>,
    pub descending: bool,
    /// Maximum number of items; `None` for all (`Some(0)`: none, only the total).
    pub limit: Option<usize>,
    pub offset: usize,
}

/// One page of results.
#[derive(Debug, Clone, PartialEq)]
pub struct Paged<T> {
    pub items: Vec<T>,
    /// The limit applied (`None`: no limit).
    pub limit: Option<usize>,
    pub offset: usize,
    /// Matches before pagination.
    pub total: usize,
}

/// A value a query can sort on. Absent times sort after every present one;
/// absent numbers before every present one (the least, so that a descending
/// sort by reward starts with the best and ends with the unrewarded).
#[derive(Debug, Clone, PartialEq)]
pub enum SortKey<'a> {
    Text(&'a str),
    Int(i64),
    Time(Option<Timestamp>),
    Real(Option<f64>),
}

impl SortKey<'_> {
    fn compare(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Text(a), Self::Text(b)) => a.cmp(b),
            (Self::Int(a), Self::Int(b)) => a.cmp(b),
            (Self::Time(a), Self::Time(b)) => match (a, b) {
                (Some(a), Some(b)) => a.cmp(b),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            },
            (Self::Real(a), Self::Real(b)) => match (a, b) {
                (Some(a), Some(b)) => a.total_cmp(b),
                _ => a.is_some().cmp(&b.is_some()),
            },
            _ => Ordering::Equal,
        }
    }
}

/// An item type that queries can sort.
pub trait Sortable {
    /// The fields `sort_by` accepts.
    const SORT_FIELDS: &'static [&'static str];
    /// Returns the key of `field` (one of [`Self::SORT_FIELDS`]).
    fn sort_key(&self, field: &str) -> SortKey<'_>;
}

fn text(value: &Option<String>) -> SortKey<'_> {
    SortKey::Text(value.as_deref().unwrap_or(""))
}

impl<T> Paged<T> {
    /// Converts the items, keeping the page's bounds.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Paged<U> {
        Paged {
            items: self.items.into_iter().map(f).collect(),
            limit: self.limit,
            offset: self.offset,
            total: self.total,
        }
    }
}

impl Page {
    /// Checks `sort_by` against the item type's fields, with upstream's message.
    pub fn validate<T: Sortable>(&self) -> StoreResult<()> {
        match &self.sort_by {
            Some(field) if !T::SORT_FIELDS.contains(&field.as_str()) => {
                Err(StoreError::invalid(format!(
                    "Invalid sort_by: {}, allowed fields are: {}",
                    echo(field),
                    T::SORT_FIELDS.join(", ")
                )))
            }
            _ => Ok(()),
        }
    }

    /// Sorts (stably, so ties keep the default order) and cuts the window.
    pub fn apply<T: Sortable>(&self, mut items: Vec<T>) -> Paged<T> {
        if let Some(field) = &self.sort_by {
            items.sort_by(|a, b| {
                let order = a.sort_key(field).compare(&b.sort_key(field));
                if self.descending {
                    order.reverse()
                } else {
                    order
                }
            });
        }
        let total = items.len();
        let items = items
            .into_iter()
            .skip(self.offset)
            .take(self.limit.unwrap_or(usize::MAX))
            .collect();
        Paged {
            items,
            limit: self.limit,
            offset: self.offset,
            total,
        }
    }
}

/// A rollout with its final reward ([`crate::training`]): what rollout
/// queries filter and sort.
#[derive(Debug, Clone, Copy)]
pub struct RewardedRollout<'a> {
    pub rollout: &'a Rollout,
    pub reward: Option<f64>,
}

impl Sortable for RewardedRollout<'_> {
    /// Upstream's fields, then the final reward (not upstream's).
    const SORT_FIELDS: &'static [&'static str] = &[
        "rollout_id",
        "start_time",
        "end_time",
        "mode",
        "resources_id",
        "status",
        "reward",
    ];
    fn sort_key(&self, field: &str) -> SortKey<'_> {
        let r = self.rollout;
        match field {
            "rollout_id" => SortKey::Text(&r.rollout_id),
            "start_time" => SortKey::Time(Some(r.start_time)),
            "end_time" => SortKey::Time(r.end_time),
            "mode" => SortKey::Text(r.mode.map_or("", |m| m.as_str())),
            "resources_id" => text(&r.resources_id),
            "reward" => SortKey::Real(self.reward),
            _ => SortKey::Text(r.status.as_str()),
        }
    }
}

impl<T: Sortable> Sortable for std::sync::Arc<T> {
    const SORT_FIELDS: &'static [&'static str] = T::SORT_FIELDS;
    fn sort_key(&self, field: &str) -> SortKey<'_> {
        T::sort_key(self, field)
    }
}

impl<T: Sortable> Sortable for &T {
    const SORT_FIELDS: &'static [&'static str] = T::SORT_FIELDS;
    fn sort_key(&self, field: &str) -> SortKey<'_> {
        (**self).sort_key(field)
    }
}

impl Sortable for Attempt {
    const SORT_FIELDS: &'static [&'static str] = &[
        "rollout_id",
        "attempt_id",
        "sequence_id",
        "start_time",
        "end_time",
        "status",
        "worker_id",
        "last_heartbeat_time",
    ];
    fn sort_key(&self, field: &str) -> SortKey<'_> {
        match field {
            "rollout_id" => SortKey::Text(&self.rollout_id),
            "attempt_id" => SortKey::Text(&self.attempt_id),
            "start_time" => SortKey::Time(Some(self.start_time)),
            "end_time" => SortKey::Time(self.end_time),
            "status" => SortKey::Text(self.status.as_str()),
            "worker_id" => text(&self.worker_id),
            "last_heartbeat_time" => SortKey::Time(self.last_heartbeat_time),
            _ => SortKey::Int(i64::from(self.sequence_id)),
        }
    }
}

impl Sortable for Span {
    const SORT_FIELDS: &'static [&'static str] = &[
        "rollout_id",
        "attempt_id",
        "sequence_id",
        "trace_id",
        "span_id",
        "parent_id",
        "name",
        "start_time",
        "end_time",
    ];
    fn sort_key(&self, field: &str) -> SortKey<'_> {
        match field {
            "rollout_id" => SortKey::Text(&self.rollout_id),
            "attempt_id" => SortKey::Text(&self.attempt_id),
            "trace_id" => SortKey::Text(&self.trace_id),
            "span_id" => SortKey::Text(&self.span_id),
            "parent_id" => text(&self.parent_id),
            "name" => SortKey::Text(&self.name),
            "start_time" => SortKey::Time(self.start_time),
            "end_time" => SortKey::Time(self.end_time),
            _ => SortKey::Int(self.sequence_id),
        }
    }
}

impl Sortable for Worker {
    const SORT_FIELDS: &'static [&'static str] = &[
        "worker_id",
        "status",
        "last_heartbeat_time",
        "last_dequeue_time",
        "last_busy_time",
        "last_idle_time",
        "current_rollout_id",
        "current_attempt_id",
    ];
    fn sort_key(&self, field: &str) -> SortKey<'_> {
        match field {
            "status" => SortKey::Text(self.status.as_str()),
            "last_heartbeat_time" => SortKey::Time(self.last_heartbeat_time),
            "last_dequeue_time" => SortKey::Time(self.last_dequeue_time),
            "last_busy_time" => SortKey::Time(self.last_busy_time),
            "last_idle_time" => SortKey::Time(self.last_idle_time),
            "current_rollout_id" => text(&self.current_rollout_id),
            "current_attempt_id" => text(&self.current_attempt_id),
            _ => SortKey::Text(&self.worker_id),
        }
    }
}

impl Sortable for ResourcesUpdate {
    const SORT_FIELDS: &'static [&'static str] =
        &["resources_id", "create_time", "update_time", "version"];
    fn sort_key(&self, field: &str) -> SortKey<'_> {
        match field {
            "create_time" => SortKey::Time(Some(self.create_time)),
            "update_time" => SortKey::Time(Some(self.update_time)),
            "version" => SortKey::Int(self.version),
            _ => SortKey::Text(&self.resources_id),
        }
    }
}

/// A window of time: `from` inclusive, `until` exclusive; an absent bound
/// is no bound. Half-open, so that adjacent windows share no instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeRange {
    pub from: Option<Timestamp>,
    pub until: Option<Timestamp>,
}

impl TimeRange {
    /// Returns true when the range has a bound.
    pub fn is_bounded(&self) -> bool {
        self.from.is_some() || self.until.is_some()
    }

    /// Returns true when `time` is in the range.
    pub fn contains(&self, time: Timestamp) -> bool {
        self.from.is_none_or(|from| from <= time) && self.until.is_none_or(|until| time < until)
    }
}

/// A range of final rewards, both ends inclusive; an absent end is no
/// bound. A rollout without a reward is outside every bounded range.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RewardRange {
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl RewardRange {
    /// Returns the range from `min` to `max`; refuses an end that is not a
    /// finite number, and `min` above `max`.
    pub fn new(min: Option<f64>, max: Option<f64>) -> StoreResult<Self> {
        for (name, end) in [("reward_min", min), ("reward_max", max)] {
            if end.is_some_and(|end| !end.is_finite()) {
                return Err(StoreError::invalid(format!(
                    "{name} must be a finite number"
                )));
            }
        }
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            return Err(StoreError::invalid(format!(
                "reward_min {min} is above reward_max {max}"
            )));
        }
        Ok(Self { min, max })
    }

    /// Returns true when the range has a bound.
    pub fn is_bounded(&self) -> bool {
        self.min.is_some() || self.max.is_some()
    }

    /// Returns true when `reward` is in the range.
    pub fn contains(&self, reward: Option<f64>) -> bool {
        if !self.is_bounded() {
            return true;
        }
        reward.is_some_and(|reward| {
            self.min.is_none_or(|min| min <= reward) && self.max.is_none_or(|max| reward <= max)
        })
    }
}

/// Filters of `query_rollouts`.
///
/// Upstream's conditions (`status_in`, `rollout_id_in`,
/// `rollout_id_contains`) are pooled under `logic`, as upstream pools them;
/// an empty list is a condition nothing meets ("no status"), unlike an
/// absent one ("any"). The narrowing conditions after them are not
/// upstream's: each one always applies, AND-ed with the pool's verdict and
/// with each other, whatever `logic` says (as a span query's rollout and
/// attempt always apply), so that OR keeps upstream's meaning.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RolloutFilter {
    pub status_in: Option<Vec<RolloutStatus>>,
    pub rollout_id_in: Option<Vec<String>>,
    pub rollout_id_contains: Option<String>,
    pub logic: FilterLogic,
    /// Keeps rollouts whose mode is one of these (`None`: no mode); an
    /// empty list matches nothing.
    pub mode_in: Option<Vec<Option<RolloutMode>>>,
    /// Keeps rollouts whose `start_time` (creation) is in the range.
    pub start_time: TimeRange,
    /// Keeps rollouts with an attempt whose `worker_id` is this one.
    pub worker_id: Option<String>,
    /// Keeps rollouts whose `resources_id` is this one.
    pub resources_id: Option<String>,
    /// Keeps rollouts that ended (`end_time` set) in the range; a rollout
    /// that has not ended is outside every bounded range.
    pub end_time: TimeRange,
    /// Keeps rollouts whose id is after this one in byte order (a keyset
    /// page's position: with `sort_by` `rollout_id`, the next page).
    pub rollout_id_after: Option<String>,
    /// Keeps rollouts whose final reward is in the range.
    pub reward: RewardRange,
    /// Keeps rollouts whose first model call (through the 1.x gateway)
    /// this model version served.
    pub model_version: Option<i64>,
    /// Keeps 1.x rollouts that gave their trainer no training row.
    pub without_rows: Option<WithoutRowsFilter>,
}

/// Which judged 1.x rollouts without training rows a filter keeps
/// ([`crate::training::RowsVerdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WithoutRowsFilter {
    /// Every one.
    AnyReason,
    /// Those with this reason (among others, maybe).
    Reason(NoRowsReason),
}

impl WithoutRowsFilter {
    /// Returns whether a rollout with `verdict` (`None`: not judged) is kept.
    pub fn keeps(self, verdict: Option<RowsVerdict>) -> bool {
        verdict.is_some_and(|verdict| match self {
            Self::AnyReason => !verdict.reasons.is_empty(),
            Self::Reason(reason) => verdict.reasons.contains(reason),
        })
    }
}

impl RolloutFilter {
    /// Returns the logic upstream's conditions combine under. A filter
    /// without them is no filter at all (upstream then queries without
    /// one), so it matches every rollout even under OR.
    pub fn effective_logic(&self) -> FilterLogic {
        let given = self.status_in.is_some()
            || self.rollout_id_in.is_some()
            || self.rollout_id_contains.is_some();
        if given { self.logic } else { FilterLogic::And }
    }

    /// Returns true when the rollout matches; `facts` gives what the
    /// store knows of it beyond its fields, each asked only when a
    /// condition needs it.
    pub fn matches<'a>(&self, r: &Rollout, facts: &impl RolloutFacts<'a>) -> bool {
        let pooled = self.effective_logic().combine(&[
            self.status_in.as_ref().map(|s| s.contains(&r.status)),
            self.rollout_id_in
                .as_ref()
                .map(|ids| ids.contains(&r.rollout_id)),
            self.rollout_id_contains
                .as_ref()
                .map(|part| r.rollout_id.contains(part.as_str())),
        ]);
        pooled
            && self.mode_in.as_ref().is_none_or(|m| m.contains(&r.mode))
            && self.start_time.contains(r.start_time)
            && self
                .resources_id
                .as_ref()
                .is_none_or(|id| r.resources_id.as_ref() == Some(id))
            && (!self.end_time.is_bounded()
                || r.end_time.is_some_and(|end| self.end_time.contains(end)))
            && self
                .rollout_id_after
                .as_ref()
                .is_none_or(|after| r.rollout_id.as_str() > after.as_str())
            && self.worker_id.as_ref().is_none_or(|worker| {
                facts
                    .attempts()
                    .iter()
                    .any(|a| a.worker_id.as_ref() == Some(worker))
            })
            && (!self.reward.is_bounded() || self.reward.contains(facts.reward()))
            && self
                .model_version
                .is_none_or(|version| facts.model_version() == Some(version))
            && self
                .without_rows
                .is_none_or(|without| without.keeps(facts.verdict()))
    }
}

/// What a store knows of a rollout beyond its fields, as a
/// [`RolloutFilter`] asks for it.
pub trait RolloutFacts<'a> {
    /// Its attempts.
    fn attempts(&self) -> &'a [Attempt];
    /// Its final reward.
    fn reward(&self) -> Option<f64>;
    /// The model version of its first model call.
    fn model_version(&self) -> Option<i64>;
    /// What it gave its trainer, if it was judged.
    fn verdict(&self) -> Option<RowsVerdict>;
}

/// Which attempt's spans a span query reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AttemptSelector {
    /// Spans of every attempt.
    #[default]
    All,
    /// Spans of the latest attempt (none when the rollout has no attempt).
    Latest,
    /// Spans of one attempt.
    Id(String),
}

/// An exact and a substring condition on one text field.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TextMatch {
    pub exact: Option<String>,
    pub contains: Option<String>,
}

impl TextMatch {
    fn conditions(&self, value: Option<&str>) -> [Option<bool>; 2] {
        [
            self.exact.as_ref().map(|e| value == Some(e.as_str())),
            self.contains
                .as_ref()
                .map(|c| value.is_some_and(|v| v.contains(c.as_str()))),
        ]
    }
}

/// Filters of `query_spans`. The rollout and attempt always apply; the text
/// conditions are pooled under `logic`. Unlike the other queries, upstream
/// always builds the pool here, so an OR without text conditions matches no
/// span.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SpanFilter {
    pub rollout_id: String,
    pub attempt: AttemptSelector,
    pub trace_id: TextMatch,
    pub span_id: TextMatch,
    pub parent_id: TextMatch,
    pub name: TextMatch,
    pub logic: FilterLogic,
}

impl SpanFilter {
    /// Returns true when the span passes the pooled text conditions (the
    /// caller has already selected the rollout and attempt).
    pub fn matches_text(&self, span: &Span) -> bool {
        let mut conditions = Vec::with_capacity(8);
        conditions.extend(self.trace_id.conditions(Some(&span.trace_id)));
        conditions.extend(self.span_id.conditions(Some(&span.span_id)));
        conditions.extend(self.parent_id.conditions(span.parent_id.as_deref()));
        conditions.extend(self.name.conditions(Some(&span.name)));
        self.logic.combine(&conditions)
    }
}

/// Filters of `query_workers`, pooled under `logic`; an empty status list
/// is a condition nothing meets.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkerFilter {
    pub status_in: Option<Vec<WorkerStatus>>,
    pub worker_id_contains: Option<String>,
    pub logic: FilterLogic,
}

impl WorkerFilter {
    /// Returns the logic the conditions combine under: without conditions,
    /// AND (no filter at all, as upstream), so OR matches every worker too.
    pub fn effective_logic(&self) -> FilterLogic {
        if self.status_in.is_some() || self.worker_id_contains.is_some() {
            self.logic
        } else {
            FilterLogic::And
        }
    }

    /// Returns true when the worker matches.
    pub fn matches(&self, worker: &Worker) -> bool {
        self.effective_logic().combine(&[
            self.status_in.as_ref().map(|s| s.contains(&worker.status)),
            self.worker_id_contains
                .as_ref()
                .map(|part| worker.worker_id.contains(part.as_str())),
        ])
    }
}

/// Filters of `query_resources`; always AND-ed, as upstream.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourcesFilter {
    pub resources_id: Option<String>,
    pub resources_id_contains: Option<String>,
}

impl ResourcesFilter {
    /// Returns true when the snapshot matches.
    pub fn matches(&self, update: &ResourcesUpdate) -> bool {
        FilterLogic::And.combine(&[
            self.resources_id
                .as_ref()
                .map(|id| &update.resources_id == id),
            self.resources_id_contains
                .as_ref()
                .map(|part| update.resources_id.contains(part.as_str())),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rollout's facts as plain values.
    struct Known<'a> {
        attempts: &'a [Attempt],
        reward: Option<f64>,
        model_version: Option<i64>,
        verdict: Option<RowsVerdict>,
    }

    impl<'a> RolloutFacts<'a> for Known<'a> {
        fn attempts(&self) -> &'a [Attempt] {
            self.attempts
        }
        fn reward(&self) -> Option<f64> {
            self.reward
        }
        fn model_version(&self) -> Option<i64> {
            self.model_version
        }
        fn verdict(&self) -> Option<RowsVerdict> {
            self.verdict
        }
    }

    fn known(attempts: &[Attempt], reward: Option<f64>, model_version: Option<i64>) -> Known<'_> {
        Known {
            attempts,
            reward,
            model_version,
            verdict: None,
        }
    }

    #[test]
    fn empty_or_matches_nothing_and_empty_and_everything() {
        assert!(FilterLogic::And.combine(&[None, None]));
        assert!(!FilterLogic::Or.combine(&[None, None]));
        assert!(FilterLogic::Or.combine(&[Some(false), Some(true)]));
        assert!(!FilterLogic::And.combine(&[Some(true), Some(false)]));
    }

    #[test]
    fn filters_without_conditions_match_everything_even_under_or() {
        let or = |f: RolloutFilter| RolloutFilter {
            logic: FilterLogic::Or,
            ..f
        };
        let rollout = Rollout {
            rollout_id: "ro-1".into(),
            input: crate::model::Json::Null,
            start_time: Timestamp(0),
            end_time: None,
            mode: None,
            resources_id: None,
            status: RolloutStatus::Queuing,
            config: Default::default(),
            metadata: crate::model::Json::Null,
        };
        assert!(or(RolloutFilter::default()).matches(&rollout, &known(&[], None, None)));
        // An explicitly empty list means "no status": nothing matches.
        let no_status = RolloutFilter {
            status_in: Some(Vec::new()),
            ..RolloutFilter::default()
        };
        assert!(!no_status.matches(&rollout, &known(&[], None, None)));
        assert!(!or(no_status).matches(&rollout, &known(&[], None, None)));
        let worker = Worker::new("w");
        let workers = WorkerFilter {
            logic: FilterLogic::Or,
            ..WorkerFilter::default()
        };
        assert!(workers.matches(&worker));
    }

    #[test]
    fn narrowing_conditions_apply_under_or_too() {
        let rollout = Rollout {
            rollout_id: "ro-1".into(),
            input: crate::model::Json::Null,
            start_time: Timestamp(100),
            end_time: None,
            mode: Some(RolloutMode::Train),
            resources_id: Some("rs-1".into()),
            status: RolloutStatus::Running,
            config: Default::default(),
            metadata: crate::model::Json::Null,
        };
        let attempt = Attempt {
            rollout_id: "ro-1".into(),
            attempt_id: "at-1".into(),
            sequence_id: 1,
            start_time: Timestamp(100),
            end_time: None,
            status: crate::model::AttemptStatus::Running,
            worker_id: Some("w-1".into()),
            last_heartbeat_time: None,
            metadata: crate::model::Json::Null,
        };
        let attempts = std::slice::from_ref(&attempt);
        // The pool (status OR id) matches by id; the mode still applies.
        let pooled = RolloutFilter {
            status_in: Some(vec![RolloutStatus::Failed]),
            rollout_id_contains: Some("ro-".into()),
            logic: FilterLogic::Or,
            mode_in: Some(vec![Some(RolloutMode::Train)]),
            ..RolloutFilter::default()
        };
        assert!(pooled.matches(&rollout, &known(attempts, None, None)));
        let other_mode = RolloutFilter {
            mode_in: Some(vec![None, Some(RolloutMode::Val)]),
            ..pooled.clone()
        };
        assert!(!other_mode.matches(&rollout, &known(attempts, None, None)));
        // Time ranges include `from` and exclude `until`.
        let range = |from: Option<i64>, until: Option<i64>| RolloutFilter {
            start_time: TimeRange {
                from: from.map(Timestamp),
                until: until.map(Timestamp),
            },
            ..RolloutFilter::default()
        };
        assert!(range(Some(100), Some(101)).matches(&rollout, &known(attempts, None, None)));
        assert!(!range(None, Some(100)).matches(&rollout, &known(attempts, None, None)));
        assert!(!range(Some(101), None).matches(&rollout, &known(attempts, None, None)));
        // An end window keeps ended rollouts alone.
        let ended = |from: Option<i64>, until: Option<i64>| RolloutFilter {
            end_time: TimeRange {
                from: from.map(Timestamp),
                until: until.map(Timestamp),
            },
            ..RolloutFilter::default()
        };
        assert!(ended(None, None).matches(&rollout, &known(attempts, None, None)));
        assert!(!ended(None, Some(i64::MAX)).matches(&rollout, &known(attempts, None, None)));
        let finished = Rollout {
            end_time: Some(Timestamp(200)),
            ..rollout.clone()
        };
        assert!(ended(Some(200), Some(201)).matches(&finished, &known(attempts, None, None)));
        assert!(!ended(None, Some(200)).matches(&finished, &known(attempts, None, None)));
        assert!(!ended(Some(201), None).matches(&finished, &known(attempts, None, None)));
        let by_worker = |worker: &str| RolloutFilter {
            worker_id: Some(worker.into()),
            resources_id: Some("rs-1".into()),
            ..RolloutFilter::default()
        };
        assert!(by_worker("w-1").matches(&rollout, &known(attempts, None, None)));
        assert!(!by_worker("w-2").matches(&rollout, &known(attempts, None, None)));
        assert!(!by_worker("w-1").matches(&rollout, &known(&[], None, None)));
        let rewarded = |min: Option<f64>, max: Option<f64>| RolloutFilter {
            reward: RewardRange::new(min, max).unwrap(),
            ..RolloutFilter::default()
        };
        assert!(
            rewarded(Some(0.5), Some(0.5)).matches(&rollout, &known(attempts, Some(0.5), None))
        );
        assert!(!rewarded(Some(0.6), None).matches(&rollout, &known(attempts, Some(0.5), None)));
        assert!(!rewarded(None, Some(0.4)).matches(&rollout, &known(attempts, Some(0.5), None)));
        assert!(!rewarded(None, Some(1.0)).matches(&rollout, &known(attempts, None, None)));
        assert!(rewarded(None, None).matches(&rollout, &known(attempts, None, None)));
        let served_by = |version: i64| RolloutFilter {
            model_version: Some(version),
            ..RolloutFilter::default()
        };
        assert!(served_by(3).matches(&rollout, &known(attempts, None, Some(3))));
        assert!(!served_by(3).matches(&rollout, &known(attempts, None, Some(2))));
        assert!(!served_by(3).matches(&rollout, &known(attempts, None, None)));
        let without = |filter: WithoutRowsFilter| RolloutFilter {
            without_rows: Some(filter),
            ..RolloutFilter::default()
        };
        let judged = |rows: i64, reasons: &[NoRowsReason]| {
            let mut verdict = RowsVerdict {
                rows,
                ..RowsVerdict::default()
            };
            reasons.iter().for_each(|&r| verdict.reasons.insert(r));
            Known {
                verdict: Some(verdict),
                ..known(attempts, None, None)
            }
        };
        let no_ids = judged(0, &[NoRowsReason::NoTokenIds, NoRowsReason::NoReward]);
        assert!(without(WithoutRowsFilter::AnyReason).matches(&rollout, &no_ids));
        let reason = |r| without(WithoutRowsFilter::Reason(r));
        assert!(reason(NoRowsReason::NoReward).matches(&rollout, &no_ids));
        assert!(!reason(NoRowsReason::FailedCalls).matches(&rollout, &no_ids));
        assert!(!without(WithoutRowsFilter::AnyReason).matches(&rollout, &judged(2, &[])));
        let unjudged = known(attempts, None, None);
        assert!(!without(WithoutRowsFilter::AnyReason).matches(&rollout, &unjudged));
    }

    #[test]
    fn a_reward_range_refuses_ends_that_are_not_numbers_or_reversed() {
        for (min, max) in [
            (Some(f64::NAN), None),
            (None, Some(f64::INFINITY)),
            (Some(1.0), Some(0.0)),
        ] {
            let err = RewardRange::new(min, max).unwrap_err();
            assert!(
                matches!(err, StoreError::InvalidArgument(_)),
                "{min:?}..{max:?}"
            );
        }
    }

    #[test]
    fn rollouts_sort_by_reward_with_the_unrewarded_least() {
        let rollout = |id: &str| Rollout {
            rollout_id: id.into(),
            input: crate::model::Json::Null,
            start_time: Timestamp(0),
            end_time: None,
            mode: None,
            resources_id: None,
            status: RolloutStatus::Succeeded,
            config: Default::default(),
            metadata: crate::model::Json::Null,
        };
        let rollouts = [rollout("a"), rollout("b"), rollout("c"), rollout("d")];
        let rewards = [Some(0.5), None, Some(-2.0), Some(1.0)];
        let items: Vec<RewardedRollout> = rollouts
            .iter()
            .zip(rewards)
            .map(|(rollout, reward)| RewardedRollout { rollout, reward })
            .collect();
        let page = Page {
            sort_by: Some("reward".into()),
            ..Page::default()
        };
        let ids = |p: Paged<RewardedRollout>| {
            p.items
                .into_iter()
                .map(|r| r.rollout.rollout_id.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(page.apply(items.clone())), ["b", "c", "a", "d"]);
        let best_first = Page {
            descending: true,
            ..page
        };
        assert_eq!(ids(best_first.apply(items)), ["d", "a", "c", "b"]);
    }

    #[test]
    fn a_zero_limit_returns_only_the_total() {
        let page = Page {
            limit: Some(0),
            ..Page::default()
        };
        let paged = page.apply(vec![Worker::new("a"), Worker::new("b")]);
        assert!(paged.items.is_empty());
        assert_eq!(paged.total, 2);
    }

    #[test]
    fn sorting_is_stable_and_puts_absent_times_last() {
        let worker = |id: &str, t: Option<i64>| Worker {
            last_heartbeat_time: t.map(Timestamp),
            ..Worker::new(id)
        };
        let items = vec![
            worker("a", None),
            worker("b", Some(2)),
            worker("c", Some(1)),
        ];
        let page = Page {
            sort_by: Some("last_heartbeat_time".into()),
            ..Page::default()
        };
        let ids = |p: Paged<Worker>| p.items.into_iter().map(|w| w.worker_id).collect::<Vec<_>>();
        assert_eq!(ids(page.apply(items.clone())), ["c", "b", "a"]);
        let desc = Page {
            descending: true,
            ..page.clone()
        };
        assert_eq!(ids(desc.apply(items.clone())), ["a", "b", "c"]);
        let window = Page {
            limit: Some(1),
            offset: 1,
            ..page
        };
        let paged = window.apply(items);
        assert_eq!(paged.total, 3);
        assert_eq!(ids(paged), ["b"]);
    }

    #[test]
    fn unknown_sort_field_is_rejected_with_the_allowed_list() {
        let page = Page {
            sort_by: Some("nope".into()),
            ..Page::default()
        };
        let err = page.validate::<Worker>().unwrap_err();
        assert!(
            matches!(&err, StoreError::InvalidArgument(m) if m.starts_with("Invalid sort_by: nope, allowed fields are: worker_id"))
        );
    }
}
