//! The LightningStore operations, written once over any [`Store`] backend.
//!
//! Each public method is one transaction: it runs the on-demand watchdog scan
//! where upstream does (its "healthcheck" methods), checks everything, then
//! writes, commits, and finally publishes the committed changes on the
//! [`EventBus`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use super::error::{StoreError, StoreResult};
use super::events::{Change, Changes, Event, EventBus, EventPage};
use super::ids;
use super::lifecycle;
use super::model::{
    Attempt, AttemptStatus, Json, NewSpan, ResourcesUpdate, Rollout, RolloutConfig, RolloutMode,
    RolloutSpec, RolloutStatus, RolloutView, Span, Statistics, Timestamp, Worker, WorkerStatus,
};
use super::query::{
    AttemptSelector, Page, Paged, ResourcesFilter, RolloutFilter, SpanFilter, WorkerFilter,
};
use super::retention::{Eviction, RetentionPolicy};
use super::telemetry::{BackendPhase, NoObserver, Observer};
use crate::store::{Store, StoreTx};

/// Fields of a rollout to overwrite; `None` leaves a field unchanged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RolloutPatch {
    pub input: Option<Json>,
    pub mode: Option<Option<RolloutMode>>,
    pub resources_id: Option<Option<String>>,
    pub status: Option<RolloutStatus>,
    pub config: Option<RolloutConfig>,
    pub metadata: Option<Json>,
}

/// Fields of an attempt to overwrite; `None` leaves a field unchanged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttemptPatch {
    pub status: Option<AttemptStatus>,
    pub worker_id: Option<String>,
    pub last_heartbeat_time: Option<Timestamp>,
    pub metadata: Option<Json>,
}

/// Result of storing spans.
#[derive(Debug, Clone, PartialEq)]
pub struct AddedSpans {
    /// The stored spans in request order, with their sequence ids (shared
    /// with the store).
    pub spans: Vec<Arc<Span>>,
    /// Spans skipped because they were already stored.
    pub duplicates: usize,
    /// Why each skipped span with an unknown rollout or attempt was
    /// rejected (only [`Engine::ingest_spans`] skips them).
    pub rejected: Vec<StoreError>,
}

/// Tuning of the engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How often the watchdog timer scans for expired attempts.
    pub watchdog_interval: Duration,
    /// How many events a slow in-process waiter may fall behind.
    pub event_capacity: usize,
    /// Which spans of finished rollouts are deleted.
    pub span_retention: RetentionPolicy,
    /// How often the span retention runs (when it is enabled).
    pub retention_interval: Duration,
    /// Receives reports of the engine's work (for metrics).
    pub observer: Arc<dyn Observer>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            watchdog_interval: Duration::from_millis(50),
            event_capacity: 65_536,
            span_retention: RetentionPolicy::default(),
            retention_interval: Duration::from_secs(10),
            observer: Arc::new(NoObserver),
        }
    }
}

/// How often a follower looks for other servers' events without a hint.
const FOLLOW_POLL: Duration = Duration::from_secs(1);

/// Events a follower reads per query.
const FOLLOW_PAGE: usize = 1024;

/// Rollouts whose spans one retention transaction deletes at most, so that
/// a large backlog does not hold other writers up.
const RETENTION_PASS: usize = 64;

/// The store's operations with agent-lightning's semantics, over a backend.
pub struct Engine {
    store: Arc<dyn Store>,
    bus: EventBus,
    opened: Instant,
    config: EngineConfig,
    /// Turns true when the server starts shutting down: waits end early.
    closing: watch::Sender<bool>,
    observer: Arc<dyn Observer>,
}

type Tx<'a> = Box<dyn StoreTx + 'a>;

impl Engine {
    /// Returns an engine over `store`.
    pub fn new(store: Arc<dyn Store>, config: EngineConfig) -> Self {
        Self {
            bus: EventBus::new(config.event_capacity),
            store,
            opened: Instant::now(),
            observer: config.observer.clone(),
            config,
            closing: watch::Sender::new(false),
        }
    }

    /// Ends every wait in progress (and any later one) at once: waiting
    /// dequeues return empty and waits for rollouts return what finished.
    /// Called when the server starts draining.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Returns a receiver that turns true when [`Engine::close`] is called.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Returns the observer that receives the engine's reports.
    pub fn observer(&self) -> &dyn Observer {
        self.observer.as_ref()
    }

    /// Returns the bus on which committed changes are published.
    pub fn events(&self) -> &EventBus {
        &self.bus
    }

    /// Runs the watchdog timer until `shutdown` turns true: attempts expire
    /// within one interval of their deadline even without any traffic. The
    /// span retention runs on the same task, on its own interval.
    pub async fn run_watchdog(self: Arc<Self>) {
        let mut shutdown = self.closing();
        let mut ticker = tokio::time::interval(self.config.watchdog_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut retention = tokio::time::interval(self.config.retention_interval);
        retention.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let retain = self.config.span_retention.is_enabled();
        loop {
            let retention_due = tokio::select! {
                _ = ticker.tick() => false,
                _ = retention.tick(), if retain => true,
                _ = shutdown.wait_for(|stop| *stop) => return,
            };
            if retention_due {
                if let Err(error) = self.apply_retention().await {
                    tracing::warn!(%error, "span retention failed");
                }
                continue;
            }
            if let Err(error) = self.scan().await {
                tracing::warn!(%error, "watchdog scan failed");
            }
        }
    }

    /// Publishes on this server's bus the events other servers sharing the
    /// backend commit, in sequence order, until the engine closes: on each
    /// hint from the backend and at least every `FOLLOW_POLL` (hints can be
    /// lost). Events this server committed are published again, which every
    /// reader tolerates. Returns at once for a backend no other server writes.
    pub async fn run_follower(self: Arc<Self>) {
        use futures::StreamExt as _;
        let mut hints = match self.store.commit_hints().await {
            Ok(Some(hints)) => hints,
            Ok(None) => return,
            Err(error) => {
                tracing::error!(%error, "cannot follow other servers' events");
                return;
            }
        };
        let mut last = match self.events_after(0, 0).await {
            Ok(page) => page.latest,
            Err(error) => {
                tracing::error!(%error, "cannot follow other servers' events");
                return;
            }
        };
        let mut closing = self.closing();
        let mut poll = tokio::time::interval(FOLLOW_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = hints.next() => {}
                _ = poll.tick() => {}
                _ = closing.wait_for(|closed| *closed) => return,
            }
            loop {
                let page = match self.events_after(last, FOLLOW_PAGE).await {
                    Ok(page) => page,
                    Err(error) => {
                        tracing::warn!(%error, "following other servers' events failed");
                        break;
                    }
                };
                let Some(newest) = page.events.last().map(|event| event.seq) else {
                    break;
                };
                last = newest;
                let enqueued = page.events.iter().any(|event| event.change.enqueues());
                self.bus.publish(page.events, enqueued);
            }
        }
    }

    /// Applies the watchdog to every rollout whose deadline has passed.
    pub async fn scan(&self) -> StoreResult<()> {
        let (mut tx, mut changes) = self.begin().await?;
        watchdog(tx.as_mut(), Timestamp::now(), &mut changes).await?;
        self.commit(tx, changes).await
    }

    /// Deletes the spans the retention policy lets go, one bounded pass per
    /// transaction, and returns what was deleted.
    pub async fn apply_retention(&self) -> StoreResult<Eviction> {
        let policy = self.config.span_retention;
        let mut total = Eviction {
            done: true,
            ..Eviction::default()
        };
        if !policy.is_enabled() {
            return Ok(total);
        }
        loop {
            let (mut tx, changes) = self.begin().await?;
            let pass = tx
                .evict_spans(&policy, Timestamp::now(), RETENTION_PASS)
                .await?;
            self.commit(tx, changes).await?;
            total.add(pass);
            if pass.done {
                break;
            }
        }
        if total.rollouts > 0 {
            tracing::info!(
                rollouts = total.rollouts,
                spans = total.spans,
                bytes = total.bytes,
                "span retention deleted spans"
            );
        }
        Ok(total)
    }

    async fn begin(&self) -> StoreResult<(Tx<'_>, Changes)> {
        let tx = self.timed(BackendPhase::Begin, self.store.begin()).await?;
        Ok((tx, Changes::default()))
    }

    /// Opens a transaction that only reads events or counts
    /// ([`Store::begin_read`]), timed like [`Engine::begin`].
    async fn begin_read(&self) -> StoreResult<Tx<'_>> {
        self.timed(BackendPhase::Begin, self.store.begin_read())
            .await
    }

    /// Commits a transaction, timing the backend's commit.
    async fn finish(&self, tx: Tx<'_>) -> StoreResult<()> {
        self.timed(BackendPhase::Commit, tx.commit()).await
    }

    /// Runs a backend call and reports its duration and outcome.
    async fn timed<T>(
        &self,
        phase: BackendPhase,
        call: impl Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let started = Instant::now();
        let result = call.await;
        self.observer
            .backend_call(phase, started.elapsed(), result.is_ok());
        result
    }

    /// Opens a transaction and runs the on-demand watchdog scan in it, so
    /// that the operation sees every verdict due by now.
    ///
    /// Verdicts are committed on their own first, so they stand even when
    /// the operation that follows fails its checks.
    async fn begin_checked(&self, now: Timestamp) -> StoreResult<(Tx<'_>, Changes)> {
        let (mut tx, mut changes) = self.begin().await?;
        watchdog(tx.as_mut(), now, &mut changes).await?;
        if changes.changes.is_empty() {
            return Ok((tx, changes));
        }
        self.commit(tx, changes).await?;
        self.begin().await
    }

    /// Records the transaction's changes as events, commits, and publishes them.
    async fn commit(&self, mut tx: Tx<'_>, changes: Changes) -> StoreResult<()> {
        let now = Timestamp::now();
        let mut events: Vec<Event> = changes
            .changes
            .into_iter()
            .map(|change| Event {
                seq: 0,
                time: now,
                change,
            })
            .collect();
        if !events.is_empty() {
            tx.append_events(&mut events).await?;
        }
        self.finish(tx).await?;
        for status in changes.expired {
            self.observer.attempt_expired(status);
        }
        self.bus.publish(events, changes.enqueued);
        Ok(())
    }

    /// Returns up to `limit` retained events after `after`, with the bounds
    /// of the retained history.
    pub async fn events_after(&self, after: u64, limit: usize) -> StoreResult<EventPage> {
        let mut tx = self.begin_read().await?;
        let page = tx.events_after(after, limit).await?;
        self.finish(tx).await?;
        Ok(page)
    }

    /// Returns entity counts and uptime.
    pub async fn statistics(&self) -> StoreResult<Statistics> {
        let mut tx = self.begin_read().await?;
        let counts = tx.counts().await?;
        self.finish(tx).await?;
        Ok(Statistics {
            name: self.store.name().to_owned(),
            counts,
            uptime_seconds: self.opened.elapsed().as_secs_f64(),
        })
    }

    /// Creates a rollout with its first attempt, bypassing the queue.
    pub async fn start_rollout(
        &self,
        spec: RolloutSpec,
        worker_id: Option<String>,
    ) -> StoreResult<RolloutView> {
        let now = Timestamp::now();
        let (mut tx, mut changes) = self.begin_checked(now).await?;
        let latest = latest_resources_id(tx.as_mut(), &spec).await?;
        let mut rollout = new_rollout(spec, latest, now);
        let attempt = create_attempt(
            tx.as_mut(),
            &mut rollout,
            None,
            true,
            worker_id,
            now,
            &mut changes,
        )
        .await?;
        if let Some(worker_id) = &attempt.worker_id {
            sync_worker(tx.as_mut(), worker_id, &attempt, now, false, &mut changes).await?;
        }
        self.commit(tx, changes).await?;
        Ok(RolloutView {
            rollout,
            attempt: Some(attempt),
        })
    }

    /// Creates rollouts in status `queuing` at the queue's tail, in order.
    pub async fn enqueue_rollouts(&self, specs: Vec<RolloutSpec>) -> StoreResult<Vec<Rollout>> {
        let now = Timestamp::now();
        let (mut tx, mut changes) = self.begin_checked(now).await?;
        // The latest resources are resolved once for the whole batch.
        let latest = if specs.iter().any(|s| s.resources_id.is_none()) {
            tx.latest_resources().await?.map(|r| r.resources_id)
        } else {
            None
        };
        let mut created = Vec::with_capacity(specs.len());
        for spec in specs {
            let rollout = new_rollout(spec, latest.clone(), now);
            tx.put_rollout(&rollout).await?;
            tx.enqueue(&rollout.rollout_id, now).await?;
            changes.push(Change::RolloutCreated {
                rollout_id: rollout.rollout_id.clone(),
                status: rollout.status,
            });
            created.push(rollout);
        }
        changes.enqueued = !created.is_empty();
        self.commit(tx, changes).await?;
        Ok(created)
    }

    /// Claims up to `limit` rollouts from the queue's head; waits up to
    /// `wait` for the first one when the queue is empty.
    pub async fn dequeue(
        &self,
        limit: usize,
        worker_id: Option<String>,
        wait: Duration,
    ) -> StoreResult<Vec<RolloutView>> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut closing = self.closing();
        loop {
            // Register interest before looking, so an enqueue between the
            // look and the wait still wakes us.
            let signal = self.bus.queue_signal().notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            let claimed = self.dequeue_now(limit, worker_id.clone(), true).await?;
            if !claimed.is_empty() || tokio::time::Instant::now() >= deadline || *closing.borrow() {
                return Ok(claimed);
            }
            tokio::select! {
                _ = signal => {}
                _ = tokio::time::sleep_until(deadline) => {}
                _ = closing.changed() => {}
            }
        }
    }

    /// Claims up to `limit` rollouts for a worker session: like a dequeue,
    /// but finding the queue empty does not mark the worker idle (a session
    /// may still hold other attempts).
    pub async fn claim(&self, limit: usize, worker_id: &str) -> StoreResult<Vec<RolloutView>> {
        self.dequeue_now(limit, Some(worker_id.to_owned()), false)
            .await
    }

    async fn dequeue_now(
        &self,
        limit: usize,
        worker_id: Option<String>,
        idle_when_empty: bool,
    ) -> StoreResult<Vec<RolloutView>> {
        let now = Timestamp::now();
        let (mut tx, mut changes) = self.begin_checked(now).await?;
        let mut claimed = Vec::new();
        while claimed.len() < limit {
            let Some(rollout_id) = tx.pop_queue().await? else {
                break;
            };
            let Some(mut rollout) = tx.rollout(&rollout_id).await? else {
                tracing::warn!(rollout_id, "queued rollout does not exist, skipping");
                continue;
            };
            if !rollout.status.is_queuing() {
                tracing::debug!(rollout_id, status = %rollout.status, "queued rollout is no longer queuing, skipping");
                continue;
            }
            let attempt = create_attempt(
                tx.as_mut(),
                &mut rollout,
                None,
                false,
                worker_id.clone(),
                now,
                &mut changes,
            )
            .await?;
            claimed.push(RolloutView {
                rollout,
                attempt: Some(attempt),
            });
        }
        if let Some(worker_id) = &worker_id {
            match claimed.last().and_then(|view| view.attempt.as_ref()) {
                Some(attempt) => {
                    sync_worker(tx.as_mut(), worker_id, attempt, now, true, &mut changes).await?
                }
                None if !idle_when_empty => {}
                None => {
                    let mut worker = load_worker(tx.as_mut(), worker_id).await?;
                    lifecycle::mark_idle_after_empty_dequeue(&mut worker, now);
                    save_worker(tx.as_mut(), worker, &mut changes).await?;
                }
            }
        }
        self.commit(tx, changes).await?;
        Ok(claimed)
    }

    /// Creates a new attempt for a rollout whatever its status.
    pub async fn start_attempt(
        &self,
        rollout_id: &str,
        worker_id: Option<String>,
    ) -> StoreResult<RolloutView> {
        let now = Timestamp::now();
        let (mut tx, mut changes) = self.begin_checked(now).await?;
        let mut rollout = require_rollout(tx.as_mut(), rollout_id).await?;
        let latest = tx.latest_attempt(rollout_id).await?;
        let attempt = create_attempt(
            tx.as_mut(),
            &mut rollout,
            latest.as_ref(),
            false,
            worker_id,
            now,
            &mut changes,
        )
        .await?;
        if let Some(worker_id) = &attempt.worker_id {
            sync_worker(tx.as_mut(), worker_id, &attempt, now, false, &mut changes).await?;
        }
        self.commit(tx, changes).await?;
        Ok(RolloutView {
            rollout,
            attempt: Some(attempt),
        })
    }

    /// Stores spans atomically: if any span names an unknown rollout or
    /// attempt, nothing is stored. Missing sequence ids are allocated in
    /// request order before explicit ones raise the counters; each attempt
    /// that got a new span records a heartbeat.
    pub async fn add_spans(&self, new_spans: Vec<NewSpan>) -> StoreResult<AddedSpans> {
        self.store_spans(new_spans, true).await
    }

    /// Stores spans like [`Engine::add_spans`], but skips the spans whose
    /// rollout or attempt is unknown and reports them in
    /// [`AddedSpans::rejected`] (OTLP's partial success).
    pub async fn ingest_spans(&self, new_spans: Vec<NewSpan>) -> StoreResult<AddedSpans> {
        self.store_spans(new_spans, false).await
    }

    async fn store_spans(
        &self,
        mut new_spans: Vec<NewSpan>,
        strict: bool,
    ) -> StoreResult<AddedSpans> {
        let now = Timestamp::now();
        let (mut tx, mut changes) = self.begin().await?;

        // Check every (rollout, attempt) before the first write.
        let mut groups: Vec<(String, String)> = Vec::new();
        let mut rollouts: HashMap<String, Rollout> = HashMap::new();
        let mut attempts: HashMap<(String, String), Attempt> = HashMap::new();
        let mut unknown: HashMap<(String, String), StoreError> = HashMap::new();
        for new in &new_spans {
            let key = (new.span.rollout_id.clone(), new.span.attempt_id.clone());
            if attempts.contains_key(&key) || unknown.contains_key(&key) {
                continue;
            }
            let target = match rollouts.get(&key.0) {
                Some(_) => Ok(()),
                None => match tx.rollout(&key.0).await? {
                    Some(rollout) => {
                        rollouts.insert(key.0.clone(), rollout);
                        Ok(())
                    }
                    None => Err(StoreError::rollout_not_found(&key.0)),
                },
            };
            let attempt = match target {
                Ok(()) => tx
                    .attempt(&key.0, &key.1)
                    .await?
                    .ok_or_else(|| StoreError::attempt_not_found(&key.0, &key.1)),
                Err(error) => Err(error),
            };
            match attempt {
                Ok(attempt) => {
                    attempts.insert(key.clone(), attempt);
                    groups.push(key);
                }
                Err(error) if strict => return Err(error),
                Err(error) => {
                    unknown.insert(key, error);
                }
            }
        }
        let mut rejected = Vec::new();
        if !unknown.is_empty() {
            new_spans.retain(|new| {
                let key = (new.span.rollout_id.clone(), new.span.attempt_id.clone());
                match unknown.get(&key) {
                    Some(error) => {
                        rejected.push(error.clone());
                        false
                    }
                    None => true,
                }
            });
        }

        let received = new_spans.len();
        let mut missing: HashMap<&str, u64> = HashMap::new();
        for new in &new_spans {
            if new.sequence_id.is_none() {
                *missing.entry(new.span.rollout_id.as_str()).or_default() += 1;
            }
        }
        let mut next_id: HashMap<String, i64> = HashMap::new();
        for (rollout_id, count) in missing {
            let first = tx.allocate_sequence_ids(rollout_id, count).await?;
            next_id.insert(rollout_id.to_owned(), first);
        }
        let mut highest: HashMap<String, i64> = HashMap::new();
        // The spans move into shared ownership: the store keeps them and the
        // caller gets the same values back, without a copy.
        let mut spans = Vec::with_capacity(received);
        for NewSpan {
            sequence_id,
            mut span,
        } in new_spans
        {
            match sequence_id {
                Some(explicit) => {
                    span.sequence_id = explicit;
                    match highest.get_mut(&span.rollout_id) {
                        Some(entry) => *entry = (*entry).max(explicit),
                        None => {
                            highest.insert(span.rollout_id.clone(), explicit);
                        }
                    }
                }
                None => {
                    let next = next_id.get_mut(&span.rollout_id).expect("allocated above");
                    span.sequence_id = *next;
                    *next += 1;
                }
            }
            spans.push(Arc::new(span));
        }
        for (rollout_id, at_least) in highest {
            tx.raise_sequence_id(&rollout_id, at_least).await?;
        }

        let stored_flags = tx.insert_spans(&spans).await?;
        let mut stored = Vec::with_capacity(spans.len());
        let mut per_attempt: HashMap<(String, String), usize> = HashMap::new();
        let mut first_duplicate = None;
        for (span, was_stored) in spans.into_iter().zip(stored_flags) {
            if was_stored {
                *per_attempt
                    .entry((span.rollout_id.clone(), span.attempt_id.clone()))
                    .or_default() += 1;
                stored.push(span);
            } else if first_duplicate.is_none() {
                first_duplicate = Some(span);
            }
        }
        let duplicates = received - stored.len();
        // One line per request: an exporter retrying a batch repeats every span.
        if let Some(span) = first_duplicate {
            tracing::warn!(
                duplicates,
                rollout_id = span.rollout_id,
                attempt_id = span.attempt_id,
                span_id = span.span_id,
                "duplicated spans skipped (the first one named)"
            );
        }

        for key in groups {
            let Some(&count) = per_attempt.get(&key) else {
                continue;
            };
            let mut attempt = attempts.remove(&key).expect("loaded above");
            let rollout = rollouts.get_mut(&key.0).expect("loaded above");
            heartbeat(tx.as_mut(), rollout, &mut attempt, now, &mut changes).await?;
            changes.push(Change::SpansAdded {
                rollout_id: key.0,
                attempt_id: key.1,
                count: count as u64,
            });
        }
        self.commit(tx, changes).await?;
        self.observer
            .spans_written(stored.len(), duplicates, rejected.len());
        Ok(AddedSpans {
            spans: stored,
            duplicates,
            rejected,
        })
    }

    /// Allocates one sequence id per (rollout, attempt) pair: consecutive
    /// values per rollout in request order.
    pub async fn next_sequence_ids(&self, pairs: &[(String, String)]) -> StoreResult<Vec<i64>> {
        let (mut tx, changes) = self.begin().await?;
        let mut counts: Vec<(&str, u64)> = Vec::new();
        let mut checked: HashSet<(&str, &str)> = HashSet::new();
        for (rollout_id, attempt_id) in pairs {
            if checked.insert((rollout_id, attempt_id)) {
                require_rollout(tx.as_mut(), rollout_id).await?;
                if tx.attempt(rollout_id, attempt_id).await?.is_none() {
                    return Err(StoreError::attempt_not_found(rollout_id, attempt_id));
                }
            }
            match counts.iter_mut().find(|(id, _)| id == rollout_id) {
                Some((_, count)) => *count += 1,
                None => counts.push((rollout_id, 1)),
            }
        }
        let mut next: HashMap<&str, i64> = HashMap::new();
        for (rollout_id, count) in counts {
            next.insert(
                rollout_id,
                tx.allocate_sequence_ids(rollout_id, count).await?,
            );
        }
        let ids = pairs
            .iter()
            .map(|(rollout_id, _)| {
                let value = next.get_mut(rollout_id.as_str()).expect("allocated above");
                *value += 1;
                *value - 1
            })
            .collect();
        self.commit(tx, changes).await?;
        Ok(ids)
    }

    /// Lists rollouts with their latest attempts.
    pub async fn query_rollouts(
        &self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<Paged<RolloutView>> {
        page.validate::<RolloutView>()?;
        let (mut tx, changes) = self.begin_checked(Timestamp::now()).await?;
        let result = tx.query_rollouts(filter, page).await?;
        self.commit(tx, changes).await?;
        Ok(result)
    }

    /// Returns a rollout with its latest attempt.
    pub async fn get_rollout(&self, rollout_id: &str) -> StoreResult<RolloutView> {
        let (mut tx, changes) = self.begin_checked(Timestamp::now()).await?;
        let rollout = require_rollout(tx.as_mut(), rollout_id).await?;
        let attempt = tx.latest_attempt(rollout_id).await?;
        self.commit(tx, changes).await?;
        Ok(RolloutView { rollout, attempt })
    }

    /// Overwrites selected fields of a rollout (no transition rules, §4.5).
    pub async fn update_rollout(
        &self,
        rollout_id: &str,
        patch: RolloutPatch,
    ) -> StoreResult<Rollout> {
        let now = Timestamp::now();
        let (mut tx, mut changes) = self.begin_checked(now).await?;
        let mut rollout = tx.rollout(rollout_id).await?.ok_or_else(|| {
            StoreError::NotFound(format!(
                "Item does not exist with primary key(s): rollout_id='{rollout_id}'"
            ))
        })?;
        if let Some(input) = patch.input {
            rollout.input = input;
        }
        if let Some(mode) = patch.mode {
            rollout.mode = mode;
        }
        if let Some(resources_id) = patch.resources_id {
            rollout.resources_id = resources_id;
        }
        if let Some(config) = patch.config {
            rollout.config = config;
        }
        if let Some(metadata) = patch.metadata {
            rollout.metadata = metadata;
        }
        if let Some(status) = patch.status
            && lifecycle::set_rollout_status(&mut rollout, status, now)
            && tx.enqueue(rollout_id, now).await?
        {
            changes.enqueued = true;
        }
        let latest = tx.latest_attempt(rollout_id).await?;
        save_rollout(tx.as_mut(), &rollout, latest.as_ref()).await?;
        changes.push(Change::RolloutChanged {
            rollout_id: rollout.rollout_id.clone(),
            status: rollout.status,
        });
        self.commit(tx, changes).await?;
        Ok(rollout)
    }

    /// Lists a rollout's attempts.
    pub async fn query_attempts(
        &self,
        rollout_id: &str,
        page: &Page,
    ) -> StoreResult<Paged<Attempt>> {
        page.validate::<Attempt>()?;
        let (mut tx, changes) = self.begin_checked(Timestamp::now()).await?;
        require_rollout(tx.as_mut(), rollout_id).await?;
        let attempts = tx.attempts(rollout_id).await?;
        self.commit(tx, changes).await?;
        Ok(page.apply(attempts))
    }

    /// Returns a rollout's latest attempt, `None` when it has none.
    pub async fn latest_attempt(&self, rollout_id: &str) -> StoreResult<Option<Attempt>> {
        let (mut tx, changes) = self.begin_checked(Timestamp::now()).await?;
        require_rollout(tx.as_mut(), rollout_id).await?;
        let attempt = tx.latest_attempt(rollout_id).await?;
        self.commit(tx, changes).await?;
        Ok(attempt)
    }

    /// Overwrites selected fields of an attempt (`attempt_id` may be
    /// `latest`) and propagates its status to the rollout (§4.3).
    pub async fn update_attempt(
        &self,
        rollout_id: &str,
        attempt_id: &str,
        patch: AttemptPatch,
    ) -> StoreResult<Attempt> {
        let now = Timestamp::now();
        let (mut tx, mut changes) = self.begin_checked(now).await?;
        let mut rollout = require_rollout(tx.as_mut(), rollout_id).await?;
        let latest = tx.latest_attempt(rollout_id).await?.ok_or_else(|| {
            StoreError::FailedPrecondition(format!("No attempts found for rollout {rollout_id}"))
        })?;
        let mut attempt = if attempt_id == ids::LATEST || attempt_id == latest.attempt_id {
            latest.clone()
        } else {
            tx.attempt(rollout_id, attempt_id)
                .await?
                .ok_or_else(|| StoreError::attempt_not_found(rollout_id, attempt_id))?
        };
        let mut sync = false;
        if let Some(worker_id) = patch.worker_id {
            sync |= !worker_id.is_empty();
            attempt.worker_id = Some(worker_id);
        }
        if let Some(status) = patch.status {
            lifecycle::set_attempt_status(&mut attempt, status, now);
            sync |= attempt.worker_id.is_some();
        }
        if let Some(time) = patch.last_heartbeat_time {
            attempt.last_heartbeat_time = Some(time);
        }
        if let Some(metadata) = patch.metadata {
            attempt.metadata = metadata;
        }
        let is_latest = attempt.attempt_id == latest.attempt_id;
        write_attempt(
            tx.as_mut(),
            &mut rollout,
            &attempt,
            AttemptWrite {
                is_latest,
                sync_worker: sync,
            },
            now,
            &mut changes,
        )
        .await?;
        self.commit(tx, changes).await?;
        Ok(attempt)
    }

    /// Waits until every known rollout among `rollout_ids` is terminal or
    /// `timeout` passes (`None`: no limit); returns the terminal ones in
    /// request order. Unknown ids are omitted.
    pub async fn wait_for_rollouts(
        &self,
        rollout_ids: &[String],
        timeout: Option<Duration>,
    ) -> StoreResult<Vec<Rollout>> {
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut closing = self.closing();
        let mut events = self.bus.subscribe();
        let mut finished: HashMap<String, Rollout> = HashMap::new();
        let mut pending: HashSet<String> = HashSet::new();
        let mut reread = true;
        loop {
            if reread {
                reread = false;
                let (mut tx, changes) = self.begin_checked(Timestamp::now()).await?;
                pending.clear();
                for rollout_id in rollout_ids {
                    match tx.rollout(rollout_id).await? {
                        Some(r) if r.status.is_finished() => {
                            finished.insert(r.rollout_id.clone(), r);
                        }
                        Some(r) if !finished.contains_key(&r.rollout_id) => {
                            pending.insert(r.rollout_id);
                        }
                        _ => {}
                    }
                }
                self.commit(tx, changes).await?;
            }
            if pending.is_empty() || *closing.borrow() {
                break;
            }
            let deadline = deadline.unwrap_or_else(far_future);
            let event = tokio::select! {
                event = events.recv() => event,
                _ = tokio::time::sleep_until(deadline) => break,
                _ = closing.changed() => break,
            };
            match event {
                Ok(event) => {
                    if let Change::RolloutChanged { rollout_id, status } = &event.change
                        && status.is_finished()
                        && pending.remove(rollout_id)
                    {
                        let (mut tx, _) = self.begin().await?;
                        let rollout = tx.rollout(rollout_id).await?;
                        self.finish(tx).await?;
                        if let Some(rollout) = rollout {
                            finished.insert(rollout_id.clone(), rollout);
                        }
                    }
                }
                Err(RecvError::Lagged(_)) => reread = true,
                Err(RecvError::Closed) => break,
            }
        }
        Ok(rollout_ids
            .iter()
            .filter_map(|id| finished.get(id).cloned())
            .collect())
    }

    /// Lists the spans of a rollout.
    pub async fn query_spans(
        &self,
        mut filter: SpanFilter,
        page: &Page,
    ) -> StoreResult<Paged<Arc<Span>>> {
        page.validate::<Span>()?;
        let (mut tx, changes) = self.begin_checked(Timestamp::now()).await?;
        require_rollout(tx.as_mut(), &filter.rollout_id).await?;
        if tx.spans_evicted(&filter.rollout_id).await? {
            self.commit(tx, changes).await?;
            return Err(StoreError::FailedPrecondition(format!(
                "Spans for rollout {} have been evicted",
                filter.rollout_id
            )));
        }
        if filter.attempt == AttemptSelector::Latest {
            match tx.latest_attempt(&filter.rollout_id).await? {
                Some(latest) => filter.attempt = AttemptSelector::Id(latest.attempt_id),
                None => {
                    self.commit(tx, changes).await?;
                    return Ok(page.apply(Vec::new()));
                }
            }
        }
        let result = tx.query_spans(&filter, page).await?;
        self.commit(tx, changes).await?;
        Ok(result)
    }

    /// Stores a new resources snapshot (version 1) as the latest.
    pub async fn add_resources(&self, resources: Json) -> StoreResult<ResourcesUpdate> {
        let now = Timestamp::now();
        let update = ResourcesUpdate {
            resources_id: ids::new_resources_id(),
            create_time: now,
            update_time: now,
            version: 1,
            resources,
        };
        let (mut tx, mut changes) = self.begin().await?;
        tx.put_resources(&update).await?;
        changes.push(Change::ResourcesChanged {
            resources_id: update.resources_id.clone(),
            version: update.version,
        });
        self.commit(tx, changes).await?;
        Ok(update)
    }

    /// Replaces (or creates) a snapshot and makes it the latest.
    pub async fn update_resources(
        &self,
        resources_id: &str,
        resources: Json,
    ) -> StoreResult<ResourcesUpdate> {
        let now = Timestamp::now();
        let (mut tx, mut changes) = self.begin_checked(now).await?;
        let update = match tx.resources(resources_id).await? {
            Some(existing) => ResourcesUpdate {
                update_time: now,
                version: existing.version + 1,
                resources,
                ..existing
            },
            None => ResourcesUpdate {
                resources_id: resources_id.to_owned(),
                create_time: now,
                update_time: now,
                version: 1,
                resources,
            },
        };
        tx.put_resources(&update).await?;
        changes.push(Change::ResourcesChanged {
            resources_id: update.resources_id.clone(),
            version: update.version,
        });
        self.commit(tx, changes).await?;
        Ok(update)
    }

    /// Returns a resources snapshot.
    pub async fn get_resources(&self, resources_id: &str) -> StoreResult<ResourcesUpdate> {
        let (mut tx, _) = self.begin().await?;
        let resources = tx.resources(resources_id).await?;
        self.finish(tx).await?;
        resources.ok_or_else(|| StoreError::NotFound(format!("Resources {resources_id} not found")))
    }

    /// Returns the latest resources snapshot, `None` when there is none.
    pub async fn latest_resources(&self) -> StoreResult<Option<ResourcesUpdate>> {
        let (mut tx, _) = self.begin().await?;
        let latest = tx.latest_resources().await?;
        self.finish(tx).await?;
        Ok(latest)
    }

    /// Lists resources snapshots.
    pub async fn query_resources(
        &self,
        filter: &ResourcesFilter,
        page: &Page,
    ) -> StoreResult<Paged<ResourcesUpdate>> {
        page.validate::<ResourcesUpdate>()?;
        let (mut tx, _) = self.begin().await?;
        let result = tx.query_resources(filter, page).await?;
        self.finish(tx).await?;
        Ok(result)
    }

    /// Lists workers.
    pub async fn query_workers(
        &self,
        filter: &WorkerFilter,
        page: &Page,
    ) -> StoreResult<Paged<Worker>> {
        page.validate::<Worker>()?;
        let (mut tx, changes) = self.begin_checked(Timestamp::now()).await?;
        let result = tx.query_workers(filter, page).await?;
        self.commit(tx, changes).await?;
        Ok(result)
    }

    /// Returns a worker.
    pub async fn get_worker(&self, worker_id: &str) -> StoreResult<Worker> {
        let (mut tx, _) = self.begin().await?;
        let worker = tx.worker(worker_id).await?;
        self.finish(tx).await?;
        worker.ok_or_else(|| StoreError::NotFound(format!("Worker {worker_id} not found")))
    }

    /// Marks a worker `lost`: its session stream dropped.
    pub async fn mark_worker_lost(&self, worker_id: &str) -> StoreResult<()> {
        let (mut tx, mut changes) = self.begin().await?;
        let mut worker = load_worker(tx.as_mut(), worker_id).await?;
        worker.status = WorkerStatus::Lost;
        worker.last_idle_time = Some(Timestamp::now());
        save_worker(tx.as_mut(), worker, &mut changes).await?;
        self.commit(tx, changes).await
    }

    /// Marks an attempt `unresponsive` through the normal update path
    /// (propagation, retry, worker sync) if it is still `preparing` or
    /// `running`; returns whether it did.
    pub async fn expire_attempt(&self, rollout_id: &str, attempt_id: &str) -> StoreResult<bool> {
        let now = Timestamp::now();
        let (mut tx, mut changes) = self.begin_checked(now).await?;
        let Some(mut rollout) = tx.rollout(rollout_id).await? else {
            return Ok(false);
        };
        let Some(mut attempt) = tx.attempt(rollout_id, attempt_id).await? else {
            return Ok(false);
        };
        if !matches!(
            attempt.status,
            AttemptStatus::Preparing | AttemptStatus::Running
        ) {
            self.commit(tx, changes).await?;
            return Ok(false);
        }
        let is_latest = tx
            .latest_attempt(rollout_id)
            .await?
            .is_some_and(|latest| latest.attempt_id == attempt_id);
        lifecycle::set_attempt_status(&mut attempt, AttemptStatus::Unresponsive, now);
        changes.expired.push(AttemptStatus::Unresponsive);
        write_attempt(
            tx.as_mut(),
            &mut rollout,
            &attempt,
            AttemptWrite {
                is_latest,
                sync_worker: true,
            },
            now,
            &mut changes,
        )
        .await?;
        self.commit(tx, changes).await?;
        Ok(true)
    }

    /// Records a worker heartbeat, creating the worker when unknown; never
    /// changes its status or assignment.
    pub async fn update_worker(
        &self,
        worker_id: &str,
        heartbeat_stats: Option<Json>,
    ) -> StoreResult<Worker> {
        let (mut tx, mut changes) = self.begin().await?;
        let mut worker = load_worker(tx.as_mut(), worker_id).await?;
        worker.last_heartbeat_time = Some(Timestamp::now());
        if let Some(stats) = heartbeat_stats {
            worker.heartbeat_stats = stats;
        }
        save_worker(tx.as_mut(), worker.clone(), &mut changes).await?;
        self.commit(tx, changes).await?;
        Ok(worker)
    }
}

fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(86_400 * 365)
}

fn new_rollout(spec: RolloutSpec, latest_resources: Option<String>, now: Timestamp) -> Rollout {
    Rollout {
        rollout_id: ids::new_rollout_id(),
        input: spec.input,
        start_time: now,
        end_time: None,
        mode: spec.mode,
        resources_id: spec.resources_id.or(latest_resources),
        status: RolloutStatus::Queuing,
        config: spec.config,
        metadata: spec.metadata,
    }
}

async fn latest_resources_id(
    tx: &mut dyn StoreTx,
    spec: &RolloutSpec,
) -> StoreResult<Option<String>> {
    if spec.resources_id.is_some() {
        return Ok(None);
    }
    Ok(tx.latest_resources().await?.map(|r| r.resources_id))
}

async fn require_rollout(tx: &mut dyn StoreTx, rollout_id: &str) -> StoreResult<Rollout> {
    tx.rollout(rollout_id)
        .await?
        .ok_or_else(|| StoreError::rollout_not_found(rollout_id))
}

/// Writes a rollout and refreshes its watchdog deadline.
async fn save_rollout(
    tx: &mut dyn StoreTx,
    rollout: &Rollout,
    latest: Option<&Attempt>,
) -> StoreResult<()> {
    tx.put_rollout(rollout).await?;
    tx.set_watchdog_deadline(
        &rollout.rollout_id,
        lifecycle::watchdog_deadline(rollout, latest),
    )
    .await
}

/// Writes a rollout whose status was `before` (`None`: a new rollout) and
/// records the change, if any.
async fn save_rollout_change(
    tx: &mut dyn StoreTx,
    rollout: &Rollout,
    latest: Option<&Attempt>,
    before: Option<RolloutStatus>,
    changes: &mut Changes,
) -> StoreResult<()> {
    save_rollout(tx, rollout, latest).await?;
    let rollout_id = rollout.rollout_id.clone();
    let status = rollout.status;
    match before {
        None => changes.push(Change::RolloutCreated { rollout_id, status }),
        Some(before) if before != status => {
            changes.push(Change::RolloutChanged { rollout_id, status })
        }
        Some(_) => {}
    }
    Ok(())
}

/// Creates the rollout's next attempt (`preparing`) and moves the rollout to
/// `preparing`. `latest` is the rollout's current latest attempt when the
/// caller knows it; `is_new` tells that the rollout itself is being created.
async fn create_attempt(
    tx: &mut dyn StoreTx,
    rollout: &mut Rollout,
    latest: Option<&Attempt>,
    is_new: bool,
    worker_id: Option<String>,
    now: Timestamp,
    changes: &mut Changes,
) -> StoreResult<Attempt> {
    let previous = match (is_new, latest) {
        (true, _) => 0,
        (false, Some(attempt)) => attempt.sequence_id,
        (false, None) => tx
            .latest_attempt(&rollout.rollout_id)
            .await?
            .map_or(0, |a| a.sequence_id),
    };
    let attempt = Attempt {
        rollout_id: rollout.rollout_id.clone(),
        attempt_id: ids::new_attempt_id(),
        sequence_id: previous + 1,
        start_time: now,
        end_time: None,
        status: AttemptStatus::Preparing,
        worker_id,
        last_heartbeat_time: None,
        metadata: Json::Null,
    };
    let before = (!is_new).then_some(rollout.status);
    let _ = lifecycle::set_rollout_status(rollout, RolloutStatus::Preparing, now);
    save_rollout_change(tx, rollout, Some(&attempt), before, changes).await?;
    tx.put_attempt(&attempt).await?;
    changes.push(Change::AttemptCreated {
        rollout_id: attempt.rollout_id.clone(),
        attempt_id: attempt.attempt_id.clone(),
        sequence_id: attempt.sequence_id,
        worker_id: attempt.worker_id.clone(),
    });
    Ok(attempt)
}

/// How [`write_attempt`] treats the attempt it writes.
#[derive(Debug, Clone, Copy)]
struct AttemptWrite {
    /// The attempt is the rollout's latest: its status drives the rollout.
    is_latest: bool,
    /// The attempt's worker (if any) is synchronised with it (§7).
    sync_worker: bool,
}

/// Writes an attempt changed by a client, the watchdog or a session expiry:
/// when it is the latest, propagates its status to the rollout (§4.2), and
/// synchronises its worker when asked to.
async fn write_attempt(
    tx: &mut dyn StoreTx,
    rollout: &mut Rollout,
    attempt: &Attempt,
    how: AttemptWrite,
    now: Timestamp,
    changes: &mut Changes,
) -> StoreResult<()> {
    tx.put_attempt(attempt).await?;
    changes.push(Change::AttemptChanged {
        rollout_id: attempt.rollout_id.clone(),
        attempt_id: attempt.attempt_id.clone(),
        status: attempt.status,
    });
    if how.is_latest {
        let before = rollout.status;
        if let Some(status) = lifecycle::propagated_status(rollout, attempt)
            && lifecycle::set_rollout_status(rollout, status, now)
            && tx.enqueue(&rollout.rollout_id, now).await?
        {
            changes.enqueued = true;
        }
        save_rollout_change(tx, rollout, Some(attempt), Some(before), changes).await?;
    }
    if how.sync_worker
        && let Some(worker_id) = &attempt.worker_id
    {
        sync_worker(tx, worker_id, attempt, now, false, changes).await?;
    }
    Ok(())
}

/// Applies a heartbeat (spans arrived) to an attempt and its rollout (§4.4).
async fn heartbeat(
    tx: &mut dyn StoreTx,
    rollout: &mut Rollout,
    attempt: &mut Attempt,
    now: Timestamp,
    changes: &mut Changes,
) -> StoreResult<()> {
    let attempt_before = attempt.status;
    lifecycle::record_heartbeat(attempt, now);
    tx.put_attempt(attempt).await?;
    if attempt.status != attempt_before {
        changes.push(Change::AttemptChanged {
            rollout_id: attempt.rollout_id.clone(),
            attempt_id: attempt.attempt_id.clone(),
            status: attempt.status,
        });
    }
    let is_latest = tx
        .latest_attempt(&rollout.rollout_id)
        .await?
        .is_some_and(|latest| latest.attempt_id == attempt.attempt_id);
    if !is_latest {
        return Ok(());
    }
    let before = rollout.status;
    if lifecycle::heartbeat_promotes(rollout.status) {
        let _ = lifecycle::set_rollout_status(rollout, RolloutStatus::Running, now);
    }
    save_rollout_change(tx, rollout, Some(attempt), Some(before), changes).await
}

/// Applies the watchdog's verdicts to every due rollout (§8); each verdict
/// takes the normal attempt-update path (propagation, worker sync).
async fn watchdog(tx: &mut dyn StoreTx, now: Timestamp, changes: &mut Changes) -> StoreResult<()> {
    for rollout_id in tx.due_rollouts(now).await? {
        let Some(mut rollout) = tx.rollout(&rollout_id).await? else {
            tx.set_watchdog_deadline(&rollout_id, None).await?;
            continue;
        };
        let latest = tx.latest_attempt(&rollout_id).await?;
        let verdict = latest
            .as_ref()
            .filter(|_| rollout.status.is_running())
            .and_then(|attempt| lifecycle::watchdog_verdict(&rollout.config, attempt, now));
        let (Some(status), Some(mut attempt)) = (verdict, latest.clone()) else {
            let deadline = lifecycle::watchdog_deadline(&rollout, latest.as_ref());
            tx.set_watchdog_deadline(&rollout_id, deadline).await?;
            continue;
        };
        tracing::info!(rollout_id, attempt_id = attempt.attempt_id, %status, "watchdog verdict");
        lifecycle::set_attempt_status(&mut attempt, status, now);
        changes.expired.push(status);
        let how = AttemptWrite {
            is_latest: true,
            sync_worker: true,
        };
        write_attempt(tx, &mut rollout, &attempt, how, now, changes).await?;
    }
    Ok(())
}

async fn load_worker(tx: &mut dyn StoreTx, worker_id: &str) -> StoreResult<Worker> {
    Ok(tx
        .worker(worker_id)
        .await?
        .unwrap_or_else(|| Worker::new(worker_id)))
}

async fn save_worker(
    tx: &mut dyn StoreTx,
    worker: Worker,
    changes: &mut Changes,
) -> StoreResult<()> {
    tx.put_worker(&worker).await?;
    changes.push(Change::WorkerChanged {
        worker_id: worker.worker_id,
        status: worker.status,
    });
    Ok(())
}

/// Synchronises a worker (created if unknown) with an attempt (§7).
async fn sync_worker(
    tx: &mut dyn StoreTx,
    worker_id: &str,
    attempt: &Attempt,
    now: Timestamp,
    dequeued: bool,
    changes: &mut Changes,
) -> StoreResult<()> {
    let mut worker = load_worker(tx, worker_id).await?;
    lifecycle::sync_worker(&mut worker, attempt, now);
    if dequeued {
        worker.last_dequeue_time = Some(now);
    }
    save_worker(tx, worker, changes).await
}
