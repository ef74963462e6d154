//! The [`Engine`] and its transaction runner: one backend transaction per
//! operation (with the on-demand watchdog scan where upstream runs one), its
//! commit, and the publication of the committed events; the operation groups
//! add their methods beside it.

use super::tx::Tx;
use crate::agl1::cache::DetailCache;
use crate::agl1::versioned::VersionedRollouts;
use crate::clock::{Clock, SystemClock};
use crate::error::StoreResult;
use crate::events::{Event, EventBus, EventPage};
use crate::idempotency::DEFAULT_REQUEST_ID_TTL;
use crate::limits::RequestLimits;
use crate::model::{Statistics, Timestamp};
use crate::namespace::{NamespaceSettings, Quotas, Usage};
use crate::retention::{Eviction, RetentionPolicy};
use crate::storage::{Held, Store, StoreTx};
use crate::telemetry::{BackendPhase, NoObserver, Observer};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Tuning of the engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How often the watchdog timer scans for expired attempts.
    pub watchdog_interval: Duration,
    /// How many events a slow in-process waiter may fall behind.
    pub event_capacity: usize,
    /// Which spans of finished rollouts are deleted.
    pub span_retention: RetentionPolicy,
    /// How often the span retention runs (when it is enabled) and expired
    /// request ids are forgotten.
    pub retention_interval: Duration,
    /// How long a client's request id is remembered after its request.
    pub request_id_ttl: Duration,
    /// Receives reports of the engine's work (for metrics).
    pub observer: Arc<dyn Observer>,
    /// What one request may ask: ids per list, items per batch, message
    /// sizes, the longest wait.
    pub limits: RequestLimits,
    /// Where every rule reads the present ([`SystemClock`] but in tests).
    pub clock: Arc<dyn Clock>,
    /// What the namespace of this engine may hold.
    pub quotas: Quotas,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            watchdog_interval: Duration::from_millis(50),
            event_capacity: 65_536,
            span_retention: RetentionPolicy::default(),
            retention_interval: Duration::from_secs(10),
            request_id_ttl: DEFAULT_REQUEST_ID_TTL,
            observer: Arc::new(NoObserver),
            limits: RequestLimits::default(),
            clock: Arc::new(SystemClock),
            quotas: Quotas::default(),
        }
    }
}

/// How often a follower looks for other servers' events without a hint.
pub(super) const FOLLOW_POLL: Duration = Duration::from_secs(1);

/// Events a follower reads per query.
pub(super) const FOLLOW_PAGE: usize = 1024;

/// Rollouts whose spans one retention transaction deletes at most, so that
/// a large backlog does not hold other writers up.
pub(super) const RETENTION_PASS: usize = 64;

/// Due rollouts one watchdog transaction handles at most; a scan runs
/// transactions until none is left.
pub(super) const WATCHDOG_PASS: usize = 256;

/// Whether a transaction first applies the watchdog's due verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scan {
    /// Verdicts due by now are committed first, in transactions of their
    /// own, so they stand even when the operation fails its checks.
    Due,
    /// The operation runs as it is.
    Skip,
    /// A read-only operation: on a read transaction
    /// ([`Store::begin_read`], off the writer on SQLite) when no verdict is
    /// due (the common case), else as [`Scan::Due`]. It answers as a
    /// [`Scan::Due`] transaction would: a write is acknowledged only once
    /// committed and durable, so a read that starts after the
    /// acknowledgement sees it (read-your-writes), and a read returns only
    /// what is durable (the storage contract); the due check runs on the
    /// read's own snapshot, so a rollout whose deadline passed is never
    /// returned without its verdict: the verdicts are committed first, as
    /// for [`Scan::Due`].
    Read,
}

/// The body of a transaction: reads through the [`Tx`] and buffers writes
/// into it. Boxed so that one runner serves every operation.
pub(super) type TxBody<'t, T> = BoxFuture<'t, StoreResult<T>>;

/// The store's operations with agent-lightning's semantics, over a backend.
pub struct Engine {
    pub(super) store: Arc<dyn Store>,
    pub(super) bus: EventBus,
    pub(super) opened: Instant,
    pub(super) config: EngineConfig,
    /// Turns true when the server starts shutting down: waits end early.
    pub(super) closing: watch::Sender<bool>,
    pub(super) observer: Arc<dyn Observer>,
    /// 1.x rollout details for the trainer's poll, on a backend only this
    /// server writes (see [`DetailCache`]).
    pub(super) details: Option<DetailCache>,
    /// 1.x event appends waiting to run together ([`appends`]).
    pub(super) appends: super::append_queue::AppendQueue,
    /// The 1.x rollouts whose model version the store holds, on a backend
    /// only this server writes (see [`VersionedRollouts`]).
    pub(super) versioned: Option<VersionedRollouts>,
}

impl Engine {
    /// Returns an engine over `store`.
    pub fn new(store: Arc<dyn Store>, config: EngineConfig) -> Self {
        let store_exclusive = store.exclusive();
        Self {
            bus: EventBus::new(config.event_capacity),
            store,
            opened: Instant::now(),
            observer: config.observer.clone(),
            config,
            closing: watch::Sender::new(false),
            details: store_exclusive.then(DetailCache::new),
            appends: super::append_queue::AppendQueue::default(),
            versioned: store_exclusive.then(VersionedRollouts::default),
        }
    }

    /// Returns an engine with this one's settings over the store of another
    /// namespace, with that namespace's quotas, its retention when it has
    /// its own, and its reports sent to `observer`.
    pub fn for_namespace(
        &self,
        store: Arc<dyn Store>,
        settings: &NamespaceSettings,
        observer: Arc<dyn Observer>,
    ) -> Self {
        let mut config = self.config.clone();
        config.quotas = settings.quotas;
        config.observer = observer;
        if let Some(retention) = settings.retention {
            config.span_retention = retention;
        }
        Self::new(store, config)
    }

    /// Ends every wait in progress (and any later one) at once: waiting
    /// dequeues return empty and waits for rollouts return what finished.
    /// Called when the server starts draining.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Cuts short the backend transactions running now
    /// ([`Store::interrupt`]): called when the drain deadline has passed.
    pub fn interrupt_store(&self) {
        self.store.interrupt();
    }

    /// Closes the backend once the server has drained: background work
    /// stops and connections close.
    pub async fn close_store(&self) {
        self.store.close().await;
    }

    /// Returns a receiver that turns true when [`Engine::close`] is called.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Returns the observer that receives the engine's reports.
    pub fn observer(&self) -> &dyn Observer {
        self.observer.as_ref()
    }

    /// Returns the request limits the engine and the adapters enforce.
    pub fn limits(&self) -> &RequestLimits {
        &self.config.limits
    }

    /// Returns the present by the engine's clock: the time every rule
    /// compares against and every written timestamp.
    pub fn now(&self) -> Timestamp {
        self.config.clock.now()
    }

    /// Returns how often the watchdog timer scans.
    pub fn watchdog_interval(&self) -> Duration {
        self.config.watchdog_interval
    }

    /// Returns the bus on which committed changes are published.
    pub fn events(&self) -> &EventBus {
        &self.bus
    }

    /// Runs the watchdog timer until `shutdown` turns true: attempts expire
    /// within one interval of their deadline even without any traffic. The
    /// span retention, the forgetting of expired request ids and old
    /// activity counts and the folding of the training summary's shards
    /// run on the same task, on their own interval.
    pub async fn run_watchdog(self: Arc<Self>) {
        let mut shutdown = self.closing();
        let mut ticker = tokio::time::interval(self.config.watchdog_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut retention = tokio::time::interval(self.config.retention_interval);
        retention.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let retention_due = tokio::select! {
                _ = ticker.tick() => false,
                _ = retention.tick() => true,
                _ = shutdown.wait_for(|stop| *stop) => return,
            };
            if retention_due {
                if let Err(error) = self.apply_retention().await {
                    tracing::warn!(%error, "span retention failed");
                }
                if let Err(error) = self.forget_expired_requests().await {
                    tracing::warn!(%error, "forgetting expired request ids failed");
                }
                if let Err(error) = self.forget_old_activity().await {
                    tracing::warn!(%error, "forgetting old activity counts failed");
                }
                if let Err(error) = self.fold_training_shards().await {
                    tracing::warn!(%error, "folding the training summary's shards failed");
                }
                continue;
            }
            if let Err(error) = self.scan().await {
                tracing::warn!(%error, "watchdog scan failed");
            }
        }
    }

    /// Prepares to publish on this server's bus the events other servers
    /// sharing the backend commit: subscribes to the backend's hints and
    /// notes the last event committed so far. Returns the follower to run,
    /// or `None` for a backend no other server writes. Called before the
    /// server serves, so that no waiter can miss an event committed between
    /// its registration and the follower's start.
    pub async fn start_follower(self: Arc<Self>) -> Option<impl Future<Output = ()> + Send> {
        let hints = match self.store.commit_hints().await {
            Ok(Some(hints)) => hints,
            Ok(None) => return None,
            Err(error) => {
                tracing::error!(%error, "cannot follow other servers' events");
                return None;
            }
        };
        let last = match self.events_after(0, 0).await {
            Ok(page) => page.latest,
            Err(error) => {
                tracing::error!(%error, "cannot follow other servers' events");
                return None;
            }
        };
        Some(self.follow(hints, last))
    }

    /// Publishes the events after `last` in sequence order, until the
    /// engine closes: on each hint from the backend and at least every
    /// `FOLLOW_POLL` (hints can be lost). Events this server committed are
    /// published again, which every reader tolerates.
    pub(super) async fn follow(self: Arc<Self>, mut hints: BoxStream<'static, ()>, mut last: u64) {
        use futures::StreamExt as _;
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

    /// Applies the watchdog to every rollout whose deadline has passed,
    /// passing over those that concurrent transactions hold (the timer's
    /// scan: it must not queue behind other work; the holders are due again
    /// on the next scan, and an operation's own scan waits for them).
    pub async fn scan(&self) -> StoreResult<()> {
        self.scan_due(self.now(), Held::Skip).await
    }

    /// Applies the watchdog's verdicts due at `now`, one bounded pass per
    /// transaction, until no rollout is due; `held` says what a pass does
    /// with the due rollouts concurrent transactions hold.
    pub(super) async fn scan_due(&self, now: Timestamp, held: Held) -> StoreResult<()> {
        loop {
            let handled = self
                .run_tx(now, |tx| {
                    Box::pin(async move { super::tx::watchdog(tx, now, WATCHDOG_PASS, held).await })
                })
                .await?;
            if handled < WATCHDOG_PASS {
                return Ok(());
            }
        }
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
            let pass = self
                .run(Scan::Skip, |tx| {
                    Box::pin(async move {
                        let now = tx.now;
                        tx.store.evict_spans(&policy, now, RETENTION_PASS).await
                    })
                })
                .await?;
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

    /// Forgets the per-minute activity counts older than the store keeps,
    /// in one transaction.
    pub async fn forget_old_activity(&self) -> StoreResult<()> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                tx.forget_old_activity();
                Ok(())
            })
        })
        .await
    }

    /// Folds the training summary's shards where the backend keeps them
    /// (see [`crate::storage::WriteSet::fold_training_shards`]), in one
    /// transaction.
    pub async fn fold_training_shards(&self) -> StoreResult<()> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                tx.fold_training_shards();
                Ok(())
            })
        })
        .await
    }

    /// Forgets the client request ids that expired by now, in one transaction.
    pub async fn forget_expired_requests(&self) -> StoreResult<()> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                tx.forget_expired_requests();
                Ok(())
            })
        })
        .await
    }

    /// The transaction runner: opens a transaction, runs the due watchdog
    /// verdicts first when `scan` says so, runs `body` in it, and commits
    /// what it buffered. A body that fails drops the transaction: nothing of
    /// it stays. Read-only bodies commit too: a durable backend acknowledges
    /// only what is durable (see the storage contract).
    ///
    /// Its due scan waits for the due rollouts that concurrent transactions
    /// hold ([`Held::Wait`]), so that the operation answers with every
    /// verdict due by its `now`, as a backend that serialises every
    /// transaction gives; the holder may have applied the verdict meanwhile,
    /// and a waited-for rollout that is no longer due is left alone (one
    /// verdict, one event).
    pub(super) async fn run<'a, T>(
        &'a self,
        scan: Scan,
        body: impl for<'t> FnOnce(&'t mut Tx<'a>) -> TxBody<'t, T>,
    ) -> StoreResult<T> {
        let now = self.now();
        if scan == Scan::Read {
            // The due check is the read transaction's first statement, so
            // its snapshot is at least as new as the check (see
            // `DeadlineFloor`).
            let store = self
                .timed(BackendPhase::Begin, self.store.begin_read())
                .await?;
            let mut tx = Tx::new(store, now);
            if tx.store.due_rollouts(now, 1, Held::Wait).await?.is_empty() {
                return self.finish(tx, body).await;
            }
            tx.into_parts().0.rollback().await;
        }
        let mut tx = self.begin(now).await?;
        if scan != Scan::Skip {
            // Verdicts are committed on their own, so that they stand even
            // when the operation fails its checks; when none is due (the
            // common case) the operation goes on in the same transaction.
            let handled = super::tx::watchdog(&mut tx, now, WATCHDOG_PASS, Held::Wait).await?;
            if handled > 0 {
                self.commit(tx).await?;
                if handled == WATCHDOG_PASS {
                    self.scan_due(now, Held::Wait).await?;
                }
                tx = self.begin(now).await?;
            }
        }
        self.finish(tx, body).await
    }

    /// Runs `body` in `tx` and commits it; rolls it back when `body` fails.
    pub(super) async fn finish<'a, T>(
        &'a self,
        mut tx: Tx<'a>,
        body: impl for<'t> FnOnce(&'t mut Tx<'a>) -> TxBody<'t, T>,
    ) -> StoreResult<T> {
        match body(&mut tx).await {
            Ok(value) => {
                self.commit(tx).await?;
                Ok(value)
            }
            Err(error) => {
                tx.into_parts().0.rollback().await;
                Err(error)
            }
        }
    }

    /// Runs `body` in one transaction at `now` and commits it.
    pub(super) async fn run_tx<'a, T>(
        &'a self,
        now: Timestamp,
        body: impl for<'t> FnOnce(&'t mut Tx<'a>) -> TxBody<'t, T>,
    ) -> StoreResult<T> {
        let tx = self.begin(now).await?;
        self.finish(tx, body).await
    }

    /// Opens a transaction at `now`.
    pub(super) async fn begin(&self, now: Timestamp) -> StoreResult<Tx<'_>> {
        let store = self.timed(BackendPhase::Begin, self.store.begin()).await?;
        Ok(Tx::new(store, now))
    }

    /// Records the transaction's changes as events, applies its write set,
    /// commits, and publishes the events.
    pub(super) async fn commit(&self, mut tx: Tx<'_>) -> StoreResult<()> {
        tx.settle_training().await?;
        let (store, mut writes, changes) = tx.into_parts();
        let now = self.now();
        writes.events = changes
            .changes
            .into_iter()
            .map(|change| Event {
                seq: 0,
                time: now,
                change,
            })
            .collect();
        // A read's empty write set changes nothing: it leaves the cache be.
        // The pending write is dropped unconfirmed when this future is
        // cancelled or the commit fails: the backend may still commit it.
        let pending = match &self.details {
            Some(details) if !writes.is_empty() => {
                Some(details.begin_write(writes.touched_rollouts()))
            }
            _ => None,
        };
        // Taken before the backend's commit, which may consume the set.
        let versioned = match &self.versioned {
            Some(known) if !writes.model_versions.is_empty() || !writes.agl1.deleted.is_empty() => {
                Some((
                    known.generation(),
                    writes.model_versions.keys().cloned().collect::<Vec<_>>(),
                    writes.agl1.deleted.iter().cloned().collect::<Vec<_>>(),
                ))
            }
            _ => None,
        };
        let committed = self
            .timed(BackendPhase::Commit, store.commit(&mut writes))
            .await;
        if let (Some(pending), Ok(())) = (pending, &committed) {
            pending.committed();
        }
        if let (Some(known), Some((generation, stored, deleted))) = (&self.versioned, &versioned) {
            if !deleted.is_empty() {
                known.deleted(deleted);
            }
            if committed.is_ok() {
                known.stored(*generation, stored);
            }
        }
        committed?;
        for status in changes.expired {
            self.observer.attempt_expired(status);
        }
        self.bus.publish(writes.events, changes.enqueued);
        Ok(())
    }

    /// Runs a read-only backend transaction ([`Store::begin_read`]): events
    /// and counts, which need no serialisation with the writers.
    pub(super) async fn read<T>(
        &self,
        body: impl for<'t> FnOnce(&'t mut (dyn StoreTx + 't)) -> BoxFuture<'t, StoreResult<T>>,
    ) -> StoreResult<T> {
        let mut store = self
            .timed(BackendPhase::Begin, self.store.begin_read())
            .await?;
        let value = body(store.as_mut()).await?;
        let mut nothing = Default::default();
        self.timed(BackendPhase::Commit, store.commit(&mut nothing))
            .await?;
        Ok(value)
    }

    /// Runs a backend call and reports its duration and outcome.
    pub(super) async fn timed<T>(
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

    /// Returns up to `limit` retained events after `after`, with the bounds
    /// of the retained history.
    pub async fn events_after(&self, after: u64, limit: usize) -> StoreResult<EventPage> {
        self.read(|store| Box::pin(store.events_after(after, limit)))
            .await
    }

    /// Refuses (RESOURCE_EXHAUSTED) a write in `tx` that adds `usage` when
    /// it would take the namespace over a quota; reads the counts only
    /// when a quota limits what the write adds.
    pub(super) async fn check_quotas(&self, tx: &mut Tx<'_>, usage: Usage) -> StoreResult<()> {
        if !self.config.quotas.limits(usage) {
            return Ok(());
        }
        let counts = tx.store.counts().await?;
        self.config.quotas.check(&counts, usage)
    }

    /// Returns entity counts and uptime.
    pub async fn statistics(&self) -> StoreResult<Statistics> {
        let counts = self.read(|store| Box::pin(store.counts())).await?;
        Ok(Statistics {
            name: self.store.name().to_owned(),
            counts,
            uptime_seconds: self.opened.elapsed().as_secs_f64(),
        })
    }
}
