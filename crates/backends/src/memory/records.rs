//! The structures the in-memory state is made of, below [`super::state`]:
//! the spans of a rollout, queue entries, the ordered indexes of the read
//! model, agent-lightning 1.x's records and the training summary.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use hashbrown::hash_table::{Entry, HashTable};
use indexmap::IndexMap;

use lightning_store_core::agl1::{Agl1Fields, ModelServer, Pause, Replica, StoredEvent};
use lightning_store_core::model::{Rollout, RolloutStatus, Span, Timestamp};
use lightning_store_core::overview::Activity;
use lightning_store_core::retention;
use lightning_store_core::training::measure::MeasureCounts;
use lightning_store_core::training::usage::RolloutUsage;
use lightning_store_core::training::{
    MeasureKey, PeriodKey, RolloutReward, RowsVerdict, TrainingCounts, TrainingKey,
};

/// The spans of one rollout, shared with whoever received or read them.
#[derive(Default)]
pub(super) struct RolloutSpans {
    /// In arrival order.
    pub(super) spans: Vec<Arc<Span>>,
    /// Positions in `spans` keyed by (attempt id, span id), for duplicate
    /// detection without a copy of the ids.
    pub(super) index: HashTable<usize>,
    /// Sum of the spans' sizes.
    pub(super) bytes: u64,
}

impl RolloutSpans {
    /// Appends `span` unless a span with its (attempt id, span id) is
    /// stored; returns its accounted size when it was appended.
    pub(super) fn insert(&mut self, hasher: &RandomState, span: &Arc<Span>) -> Option<u64> {
        let key = |s: &Span| hasher.hash_one((&s.attempt_id, &s.span_id));
        let spans = &self.spans;
        let same = |&at: &usize| {
            spans[at].attempt_id == span.attempt_id && spans[at].span_id == span.span_id
        };
        match self.index.entry(key(span), same, |&at| key(&spans[at])) {
            Entry::Occupied(_) => None,
            Entry::Vacant(slot) => {
                slot.insert(self.spans.len());
                let size = retention::span_size(span);
                self.bytes += size;
                self.spans.push(span.clone());
                Some(size)
            }
        }
    }

    /// Removes the span appended last (undoing [`RolloutSpans::insert`]);
    /// returns its accounted size.
    pub(super) fn remove_last(&mut self, hasher: &RandomState) -> Option<u64> {
        let span = self.spans.pop()?;
        let at = self.spans.len();
        let hash = hasher.hash_one((&span.attempt_id, &span.span_id));
        if let Ok(entry) = self.index.find_entry(hash, |&pos| pos == at) {
            entry.remove();
        }
        let size = retention::span_size(&span);
        self.bytes -= size;
        Some(size)
    }
}

/// One entry of the queue.
#[derive(Debug, Clone)]
pub(super) struct QueueEntry {
    pub(super) rollout_id: String,
    /// When the rollout entered the queue.
    pub(super) since: Timestamp,
    pub(super) ticket: u64,
}

/// Rollouts that have an end time, by status, in (end time, rollout id)
/// order.
pub(super) type EndedIndex = BTreeMap<RolloutStatus, BTreeSet<(Timestamp, String)>>;

/// Activity counts by (minute, activity).
pub(super) type ActivityCounts = BTreeMap<(Timestamp, Activity), i64>;

/// A rollout's key in the index of ended rollouts: status, end time, id.
pub(super) type EndedKey = (RolloutStatus, Timestamp, String);

/// Returns the rollout's key in the index of ended rollouts, if it ended.
pub(super) fn ended_key(rollout: &Rollout) -> Option<EndedKey> {
    let end = rollout.end_time?;
    Some((rollout.status, end, rollout.rollout_id.clone()))
}

/// agent-lightning 1.x's records of the in-memory store.
#[derive(Default)]
pub(super) struct Agl1State {
    /// 1.x fields per rollout, in creation order.
    pub(super) fields: IndexMap<String, Agl1Fields>,
    /// Events per rollout in append order (positions increase).
    pub(super) events: HashMap<String, Vec<StoredEvent>>,
    pub(super) last_event_pos: i64,
    /// (rollout, attempt, key) to (digest, event position).
    pub(super) keys: HashMap<(String, String, String), (String, i64)>,
    /// Rollout ids in completion order.
    pub(super) completions: Vec<String>,
    /// Model servers by (model, endpoint), in registration order.
    pub(super) models: IndexMap<(String, String), ModelServer>,
    pub(super) pause: Pause,
    pub(super) replicas: IndexMap<String, Replica>,
}

/// The training summary of the in-memory store.
#[derive(Default)]
pub(super) struct TrainingState {
    /// Each rollout's final reward.
    pub(super) rewards: HashMap<String, RolloutReward>,
    /// The model version of each rollout's first model call.
    pub(super) model_versions: HashMap<String, i64>,
    /// What each judged 1.x rollout gave its trainer.
    pub(super) rows_verdicts: HashMap<String, RowsVerdict>,
    /// What each rollout's model calls used.
    pub(super) usage: HashMap<String, RolloutUsage>,
    /// The summary's rows.
    pub(super) rows: BTreeMap<TrainingKey, TrainingCounts>,
    /// The timeline's rows, in (resolution, time) order.
    pub(super) periods: BTreeMap<PeriodKey, TrainingCounts>,
    /// The measures' rows.
    pub(super) measures: BTreeMap<MeasureKey, MeasureCounts>,
}

impl TrainingState {
    /// Returns the rollout's final reward, if it has one.
    pub(super) fn reward_value(&self, rollout_id: &str) -> Option<f64> {
        self.rewards.get(rollout_id).map(|reward| reward.value)
    }

    /// Returns the model version of the rollout's first model call, if
    /// it made one through the gateway.
    pub(super) fn model_version(&self, rollout_id: &str) -> Option<i64> {
        self.model_versions.get(rollout_id).copied()
    }
}
