//! The cache of 1.x rollout details ([`DetailCache`]) that answers the
//! trainer's poll (`GET /api/rollouts/{id}`, once a second for every
//! pending rollout) without a read of the store, on a backend that only
//! this server writes (memory, SQLite; never PostgreSQL, where other
//! replicas commit unseen).
//!
//! # Why a cached detail is never stale
//! Every write of the store goes through the engine's commit, which calls
//! [`DetailCache::invalidate`] with the rollouts the write set touches once
//! the backend's commit returned (whatever its outcome: it may have
//! committed) and before the write is acknowledged: their details are
//! dropped and the generation is bumped. A
//! reader takes a [`Ticket`] (the generation) *before* its read transaction
//! starts and fills the cache only if the generation is still the same
//! ([`DetailCache::fill`], under the same lock as the invalidation). So for
//! any commit that touched the rollout, either its invalidation came before
//! the ticket (then the commit was visible before the read began, and the
//! read saw it), or between the ticket and the fill (the generation moved:
//! nothing is filled), or after the fill (it drops the entry). A GET that
//! follows an acknowledged write therefore reads the store or an entry
//! filled after that write.
//!
//! A commit in flight ([`DetailCache::begin_write`]) keeps its rollouts out
//! of the cache until it returns, and one whose outcome stays unknown (its
//! caller went away while the backend committed, or the commit failed, so
//! it may still become visible later, e.g. with SQLite's next group) marks
//! them *doubtful*: they are read from the store from then on. Doubtful
//! rollouts are bounded too: past [`MAX_ENTRIES`] of them the cache turns
//! itself off.
//!
//! A detail is served from the cache only up to the rollout's watchdog
//! deadline: from then on the read path runs, which commits the watchdog's
//! verdict first (as every read does).
//!
//! Bounded: at most [`MAX_ENTRIES`] entries and [`MAX_BYTES`] of payload
//! text; a detail larger than [`MAX_ENTRY_BYTES`] is not cached; a fill
//! that would pass a bound empties the cache first (a bound, not an LRU:
//! refilling costs one read per rollout).

use std::sync::Arc;

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};

use super::records::Agl1RolloutDetail;
use crate::model::Timestamp;

/// Details kept at most.
pub const MAX_ENTRIES: usize = 16_384;

/// Payload text kept at most, over every entry (bytes).
pub const MAX_BYTES: usize = 32 << 20;

/// The largest detail kept (payload text, bytes).
pub const MAX_ENTRY_BYTES: usize = 64 << 10;

/// Cached 1.x rollout details, invalidated by the commits that touch
/// their rollouts (see the module docs).
#[derive(Debug, Default)]
pub struct DetailCache {
    state: Mutex<CacheState>,
}

#[derive(Debug, Default)]
struct CacheState {
    /// Bumped by every invalidation.
    generation: u64,
    /// Details by rollout id.
    entries: HashMap<String, Arc<Agl1RolloutDetail>>,
    /// Payload text of every entry, in bytes.
    bytes: usize,
    /// Commits in flight, per rollout they touch: those rollouts are
    /// neither served nor filled meanwhile.
    writing: HashMap<String, usize>,
    /// Rollouts a commit of unknown outcome touched: always read from the
    /// store.
    doubtful: HashSet<String>,
    /// True once `doubtful` outgrew its bound: nothing is cached any more.
    off: bool,
}

impl CacheState {
    /// True when `rollout_id` may be served from or kept in the cache.
    fn cacheable(&self, rollout_id: &str) -> bool {
        !self.off && !self.writing.contains_key(rollout_id) && !self.doubtful.contains(rollout_id)
    }

    /// Drops the details of `touched` and moves the generation on.
    fn invalidate(&mut self, touched: &[String]) {
        self.generation += 1;
        for rollout_id in touched {
            if let Some(old) = self.entries.remove(rollout_id) {
                self.bytes -= payload_bytes(&old);
            }
        }
    }
}

/// The cache's generation before a read (see [`DetailCache::fill`]).
#[derive(Debug, Clone, Copy)]
pub struct Ticket(u64);

impl DetailCache {
    /// Returns an empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns the cached detail of `rollout_id`, unless its watchdog
    /// deadline is before `now`.
    pub fn get(&self, rollout_id: &str, now: Timestamp) -> Option<Arc<Agl1RolloutDetail>> {
        let state = self.state.lock();
        if !state.cacheable(rollout_id) {
            return None;
        }
        let detail = state.entries.get(rollout_id)?;
        detail
            .deadline
            .is_none_or(|deadline| now <= deadline)
            .then(|| detail.clone())
    }

    /// Returns the ticket a read takes before its transaction starts.
    pub fn ticket(&self) -> Ticket {
        Ticket(self.state.lock().generation)
    }

    /// Keeps a detail read after `ticket` was taken, unless a commit was
    /// invalidated since.
    pub fn fill(&self, ticket: Ticket, detail: &Arc<Agl1RolloutDetail>) {
        let size = payload_bytes(detail);
        if size > MAX_ENTRY_BYTES {
            return;
        }
        let mut state = self.state.lock();
        if state.generation != ticket.0 || !state.cacheable(&detail.rollout_id) {
            return;
        }
        if let Some(old) = state.entries.remove(&detail.rollout_id) {
            state.bytes -= payload_bytes(&old);
        }
        if state.entries.len() >= MAX_ENTRIES || state.bytes + size > MAX_BYTES {
            state.entries.clear();
            state.bytes = 0;
        }
        state.bytes += size;
        state
            .entries
            .insert(detail.rollout_id.clone(), detail.clone());
    }

    /// Notes a commit of a write set that touched these rollouts
    /// ([`WriteSet::touched_rollouts`](crate::storage::WriteSet::touched_rollouts)), before the backend commits it: their details are dropped
    /// and kept out until the returned write is dropped; dropping it
    /// without [`PendingWrite::committed`] marks them doubtful (see the
    /// module docs).
    pub fn begin_write(&self, touched: Vec<String>) -> PendingWrite<'_> {
        let mut state = self.state.lock();
        state.invalidate(&touched);
        for rollout_id in &touched {
            *state.writing.entry(rollout_id.clone()).or_default() += 1;
        }
        PendingWrite {
            cache: self,
            touched,
            committed: false,
        }
    }

    /// Returns how many details are cached.
    pub fn len(&self) -> usize {
        self.state.lock().entries.len()
    }

    /// Returns true when no detail is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A commit in flight, from [`DetailCache::begin_write`].
#[derive(Debug)]
pub struct PendingWrite<'a> {
    cache: &'a DetailCache,
    touched: Vec<String>,
    committed: bool,
}

impl PendingWrite<'_> {
    /// Notes that the backend committed the write: the details of its
    /// rollouts read before now are dropped, and they may be cached again.
    pub fn committed(mut self) {
        self.committed = true;
    }
}

impl Drop for PendingWrite<'_> {
    fn drop(&mut self) {
        let mut state = self.cache.state.lock();
        state.invalidate(&self.touched);
        for rollout_id in &self.touched {
            if let Some(count) = state.writing.get_mut(rollout_id) {
                *count -= 1;
                if *count == 0 {
                    state.writing.remove(rollout_id);
                }
            }
            if !self.committed {
                state.doubtful.insert(rollout_id.clone());
            }
        }
        if state.doubtful.len() > MAX_ENTRIES {
            state.off = true;
            state.doubtful.clear();
            state.entries.clear();
            state.bytes = 0;
        }
    }
}

/// The size an entry counts for: its payload texts and names.
fn payload_bytes(detail: &Agl1RolloutDetail) -> usize {
    detail.input.as_str().len()
        + detail.metadata.as_str().len()
        + detail.config.as_str().len()
        + detail.rollout_id.len()
        + detail.attempts.iter().map(String::len).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agl1::{Agl1Event, Agl1Fields, JsonText};
    use crate::model::{Attempt, AttemptStatus, Json, Rollout, RolloutConfig, RolloutStatus};
    use crate::storage::WriteSet;
    use crate::storage::agl1::EventWrite;

    fn rollout(rollout_id: &str) -> Rollout {
        Rollout {
            rollout_id: rollout_id.into(),
            input: Json::Null,
            start_time: Timestamp(0),
            end_time: None,
            mode: None,
            resources_id: None,
            status: RolloutStatus::Queuing,
            config: RolloutConfig::default(),
            metadata: Json::Null,
        }
    }

    fn fields() -> Agl1Fields {
        Agl1Fields {
            config: Json::Null,
            k8s_job_name: None,
            last_attempt_id: None,
            error_message: None,
            version: 1,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        }
    }

    fn detail(rollout_id: &str, deadline: Option<Timestamp>) -> Arc<Agl1RolloutDetail> {
        let detail = Agl1RolloutDetail::of(&rollout(rollout_id), &fields(), deadline, Vec::new());
        Arc::new(detail)
    }

    #[test]
    fn a_fill_after_an_invalidation_since_the_ticket_is_dropped() {
        let cache = DetailCache::new();
        let ticket = cache.ticket();
        cache.begin_write(Vec::new()).committed();
        cache.fill(ticket, &detail("r", None));
        assert!(cache.get("r", Timestamp(0)).is_none());
        cache.fill(cache.ticket(), &detail("r", None));
        assert!(cache.get("r", Timestamp(0)).is_some());
    }

    #[test]
    fn every_part_of_a_write_set_that_names_a_rollout_invalidates_it() {
        let touch: [fn(&mut WriteSet); 5] = [
            |w| w.put_rollout(&rollout("r"), None),
            |w| {
                w.agl1.deleted.insert("r".into());
            },
            |w| {
                w.agl1.fields.insert("r".into(), fields());
            },
            |w| {
                let event = Agl1Event {
                    event_type: "reward".into(),
                    rollout_id: "r".into(),
                    attempt_id: "0".into(),
                    timestamp: Timestamp(0),
                    data: "{}".into(),
                };
                w.agl1.events.push(EventWrite { event, key: None });
            },
            |w| {
                w.put_attempt(&Attempt {
                    rollout_id: "r".into(),
                    attempt_id: "a".into(),
                    sequence_id: 1,
                    start_time: Timestamp(0),
                    end_time: None,
                    status: AttemptStatus::Running,
                    worker_id: None,
                    last_heartbeat_time: None,
                    metadata: Json::Null,
                })
            },
        ];
        let cache = DetailCache::new();
        for (index, touch) in touch.iter().enumerate() {
            for rollout_id in ["r", "other"] {
                cache.fill(cache.ticket(), &detail(rollout_id, None));
            }
            let mut writes = WriteSet::default();
            touch(&mut writes);
            cache.begin_write(writes.touched_rollouts()).committed();
            assert!(cache.get("r", Timestamp(0)).is_none(), "part {index}");
            assert!(cache.get("other", Timestamp(0)).is_some(), "part {index}");
        }
    }

    #[test]
    fn a_detail_is_served_up_to_its_deadline_and_the_cache_stays_bounded() {
        let cache = DetailCache::new();
        cache.fill(cache.ticket(), &detail("r", Some(Timestamp(10))));
        assert!(cache.get("r", Timestamp(10)).is_some());
        assert!(cache.get("r", Timestamp(11)).is_none());

        let mut big = (*detail("big", None)).clone();
        big.input = JsonText::parse(format!("\"{}\"", "x".repeat(MAX_ENTRY_BYTES))).unwrap();
        cache.fill(cache.ticket(), &Arc::new(big));
        assert!(cache.get("big", Timestamp(0)).is_none());

        for n in 0..MAX_ENTRIES + 10 {
            cache.fill(cache.ticket(), &detail(&format!("r{n}"), None));
            assert!(cache.len() <= MAX_ENTRIES);
        }
        let last = format!("r{}", MAX_ENTRIES + 9);
        assert!(cache.get(&last, Timestamp(0)).is_some());
    }

    #[test]
    fn a_rollout_stays_out_while_a_commit_touching_it_is_in_flight() {
        let cache = DetailCache::new();
        cache.fill(cache.ticket(), &detail("r", None));
        let pending = cache.begin_write(vec!["r".into()]);
        assert!(cache.get("r", Timestamp(0)).is_none());
        cache.fill(cache.ticket(), &detail("r", None));
        assert!(cache.get("r", Timestamp(0)).is_none());
        cache.fill(cache.ticket(), &detail("other", None));
        assert!(cache.get("other", Timestamp(0)).is_some());
        pending.committed();
        cache.fill(cache.ticket(), &detail("r", None));
        assert!(cache.get("r", Timestamp(0)).is_some());
    }

    #[test]
    fn a_commit_of_unknown_outcome_leaves_its_rollouts_to_the_store() {
        let cache = DetailCache::new();
        drop(cache.begin_write(vec!["r".into()]));
        cache.fill(cache.ticket(), &detail("r", None));
        assert!(cache.get("r", Timestamp(0)).is_none());
        cache.begin_write(vec!["r".into()]).committed();
        cache.fill(cache.ticket(), &detail("r", None));
        assert!(cache.get("r", Timestamp(0)).is_none(), "doubtful for good");
        cache.fill(cache.ticket(), &detail("other", None));
        assert!(cache.get("other", Timestamp(0)).is_some());

        for n in 0..MAX_ENTRIES {
            drop(cache.begin_write(vec![format!("d{n}")]));
        }
        assert!(
            cache.is_empty(),
            "too many doubtful rollouts turn the cache off"
        );
        cache.fill(cache.ticket(), &detail("other", None));
        assert!(cache.get("other", Timestamp(0)).is_none());
    }
}
