//! The console's page reads ([`crate::pages`]): each page's data from one
//! transaction, every list bounded by a limit the caller gives, the rules a
//! page shows applied here; and the cancel a rollout's page offers, which
//! checks the cancel rule in the transaction that cancels.

use std::collections::BTreeMap;

use super::super::agl1::events::{self as agl1_events, EventQuery};
use super::super::agl1::{DEFAULT_ATTEMPT_ID, diagnosis};
use super::super::error::{StoreError, StoreResult};
use super::super::events::{Change, EventPage};
use super::super::ids::{ResourcesId, RolloutId};
use super::super::lifecycle;
use super::super::model::{
    RolloutStatus, RolloutView, SessionState, Timestamp, Worker, WorkerSession, WorkerStatus,
};
use super::super::overview::{self, MAX_FAILURES, QueuePlace, QueuedRollout};
use super::super::pages::{
    self, Agl1Part, Cancelled, ModelsPage, OverviewLimits, OverviewPage, ResourcesPage,
    RolloutDownload, RolloutLimits, RolloutPage, RolloutsPage, Waiting, WorkersPage,
};
use super::super::query::{
    AttemptSelector, Page, Paged, ResourcesFilter, RolloutFilter, SpanFilter, WorkerFilter,
};
use super::super::storage::{Access, StoreTx};
use super::super::waiting::{self, WaitingFacts};
use super::overview::latest_failures_in;
use super::runner::{Engine, Scan};
use super::tx::Tx;

/// The worker statuses, in the order the Overview lists them.
const WORKER_STATUSES: [WorkerStatus; 4] = [
    WorkerStatus::Busy,
    WorkerStatus::Idle,
    WorkerStatus::Unknown,
    WorkerStatus::Lost,
];

impl Engine {
    /// Returns what the Overview shows, read in one transaction: the
    /// store's counts, the last hour's activity, the latest events, the
    /// workers per status, the open sessions of the first workers and the
    /// latest failures, each within `limits`.
    pub async fn overview_page(&self, limits: OverviewLimits) -> StoreResult<OverviewPage> {
        if limits.failures > MAX_FAILURES {
            return Err(StoreError::invalid(format!(
                "failures must be at most {MAX_FAILURES}"
            )));
        }
        pages::check_limit("events", Some(limits.events))?;
        pages::check_limit("workers", Some(limits.workers))?;
        let ids_per_list = self.limits().max_ids_per_list.max(1);
        self.run(Scan::Read, |tx| {
            Box::pin(async move {
                let now = tx.now;
                let store = tx.store.as_mut();
                let counts = store.counts().await?;
                let oldest_queued = QueuedRollout::from_counts(&counts, now);
                let (from, until) = overview::minute_window(now);
                let minutes = overview::per_minute(from, &store.activity(from, until).await?);
                let recent_events = recent_events_in(store, limits.events).await?;
                let mut workers_by_status = BTreeMap::new();
                for status in WORKER_STATUSES {
                    let filter = WorkerFilter {
                        status_in: Some(vec![status]),
                        ..WorkerFilter::default()
                    };
                    let counted = store.query_workers(&filter, &limit(0)).await?;
                    workers_by_status.insert(status, counted.total as u64);
                }
                let workers = store
                    .query_workers(&WorkerFilter::default(), &limit(limits.workers))
                    .await?;
                let sessions = sessions_of(store, &workers.items, ids_per_list).await?;
                let failures = latest_failures_in(store, limits.failures).await?;
                Ok(OverviewPage {
                    oldest_queued,
                    minutes,
                    recent_events,
                    workers_total: workers.total as u64,
                    workers_by_status,
                    open_sessions: open(&sessions),
                    sessions_of: workers.items.len(),
                    failures,
                    counts,
                    now,
                })
            })
        })
        .await
    }

    /// Returns a page of rollouts with their latest attempts (`page` must
    /// have a limit).
    pub async fn rollouts_page(
        &self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<RolloutsPage> {
        pages::check_page("page", page)?;
        let answer = self.query_rewarded_rollouts(filter, page).await?;
        Ok(RolloutsPage {
            rollouts: answer.rollouts,
            rewards: answer.rewards,
            now: self.now(),
        })
    }

    /// Returns what a rollout's page shows, read in one transaction: the
    /// rollout, its attempts, its spans (or that the retention deleted
    /// them), its 1.x part, and why it waits when it does (`free_slots_here`:
    /// the free slots of the worker sessions this server holds, which only
    /// the caller knows), each list within `limits`. NOT_FOUND for an
    /// unknown rollout.
    pub async fn rollout_page(
        &self,
        rollout_id: &RolloutId,
        limits: RolloutLimits,
        free_slots_here: usize,
    ) -> StoreResult<RolloutPage> {
        for (name, value) in [
            ("attempts", limits.attempts),
            ("spans", limits.spans),
            ("events", limits.events),
            ("workers", limits.workers),
        ] {
            pages::check_limit(name, Some(value))?;
        }
        let ids_per_list = self.limits().max_ids_per_list.max(1);
        self.run(Scan::Read, |tx| {
            Box::pin(async move {
                let now = tx.now;
                let view = tx.require_rollout(rollout_id, Access::Read).await?;
                let store = tx.store.as_mut();
                let attempts = limit(limits.attempts).apply(store.attempts(rollout_id).await?);
                let spans_evicted = store.spans_evicted(rollout_id).await?;
                let spans = if spans_evicted {
                    limit(limits.spans).apply(Vec::new())
                } else {
                    let filter = SpanFilter {
                        rollout_id: rollout_id.as_str().to_owned(),
                        attempt: AttemptSelector::All,
                        ..SpanFilter::default()
                    };
                    store.query_spans(&filter, &limit(limits.spans)).await?
                };
                let agl1 = match store.agl1_rollout_detail(rollout_id).await? {
                    Some(detail) => Some(agl1_part(store, detail, limits.events).await?),
                    None => None,
                };
                let waiting = if view.rollout.status.is_queuing() {
                    let facts =
                        WaitFacts::read(store, rollout_id, limits.workers, ids_per_list).await?;
                    let reasons = waiting::why_waiting(&WaitingFacts {
                        rollout: &view,
                        agl1: agl1.is_some(),
                        place: facts.place.map(|p| (p.ahead, p.queued)),
                        open_sessions: facts.open_sessions,
                        free_slots_here,
                        last_dequeue: facts.last_dequeue,
                        pause: Some(&facts.pause),
                        now,
                    });
                    Some(Waiting {
                        place: facts.place,
                        reasons,
                    })
                } else {
                    None
                };
                Ok(RolloutPage {
                    cancellable: lifecycle::may_cancel(view.rollout.status),
                    view,
                    attempts,
                    spans,
                    spans_evicted,
                    agl1,
                    waiting,
                    now,
                })
            })
        })
        .await
    }

    /// Returns everything stored of a rollout for its download, read in one
    /// transaction: complete, not bounded. NOT_FOUND for an unknown rollout.
    pub async fn rollout_download(&self, rollout_id: &RolloutId) -> StoreResult<RolloutDownload> {
        self.run(Scan::Read, |tx| {
            Box::pin(async move { read_download(tx, rollout_id).await })
        })
        .await
    }

    /// Returns the downloads of the first rollouts of `rollout_ids`, in
    /// order, read in one transaction: it reads the next rollout until the
    /// spans read weigh `budget` bytes ([`Span::weight`]) or more, so it
    /// returns at least one. `None` stands for a rollout that is no longer
    /// stored. One transaction for many small rollouts saves their commits
    /// (on PostgreSQL, each read transaction's durability wait).
    pub async fn rollout_downloads(
        &self,
        rollout_ids: &[RolloutId],
        budget: usize,
    ) -> StoreResult<Vec<Option<RolloutDownload>>> {
        self.run(Scan::Read, |tx| {
            Box::pin(async move {
                let mut downloads = Vec::new();
                let mut weight = 0;
                for rollout_id in rollout_ids {
                    if weight >= budget && !downloads.is_empty() {
                        break;
                    }
                    match read_download(tx, rollout_id).await {
                        Ok(download) => {
                            weight += download.spans.iter().map(|s| s.weight()).sum::<usize>();
                            downloads.push(Some(download));
                        }
                        // Deleted since it was listed.
                        Err(StoreError::NotFound(_)) => downloads.push(None),
                        Err(error) => return Err(error),
                    }
                }
                Ok(downloads)
            })
        })
        .await
    }

    /// Returns a page of workers with their session records, read in one
    /// transaction (`page` must have a limit).
    pub async fn workers_page(
        &self,
        filter: &WorkerFilter,
        page: &Page,
    ) -> StoreResult<WorkersPage> {
        pages::check_page("page", page)?;
        page.validate::<Worker>()?;
        let ids_per_list = self.limits().max_ids_per_list.max(1);
        self.run(Scan::Read, |tx| {
            Box::pin(async move {
                let store = tx.store.as_mut();
                let workers = store.query_workers(filter, page).await?;
                let sessions = sessions_of(store, &workers.items, ids_per_list).await?;
                Ok(WorkersPage { workers, sessions })
            })
        })
        .await
    }

    /// Returns a page of resources snapshots, the snapshot `shown` (the
    /// latest when `None`) and the one `compared` with it, read in one
    /// transaction (`page` must have a limit). NOT_FOUND for an unknown
    /// snapshot asked for.
    pub async fn resources_page(
        &self,
        page: &Page,
        shown: Option<&ResourcesId>,
        compared: Option<&ResourcesId>,
    ) -> StoreResult<ResourcesPage> {
        pages::check_page("page", page)?;
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                let listed = tx
                    .store
                    .query_resources(&ResourcesFilter::default(), page)
                    .await?;
                let shown = match shown {
                    Some(id) => Some(require_resources(tx.store.as_mut(), id).await?),
                    None => tx.store.latest_resources().await?,
                };
                let compared = match compared {
                    Some(id) => Some(require_resources(tx.store.as_mut(), id).await?),
                    None => None,
                };
                Ok(ResourcesPage {
                    listed,
                    shown,
                    compared,
                })
            })
        })
        .await
    }

    /// Returns the registered model servers, the gateway's pause and its
    /// servers' presences, read in one transaction, each list at most
    /// `limit` long.
    pub async fn models_page(&self, limit: usize) -> StoreResult<ModelsPage> {
        pages::check_limit("limit", Some(limit))?;
        self.run(Scan::Read, |tx| {
            Box::pin(async move {
                let store = tx.store.as_mut();
                let mut servers = store.models(None).await?;
                let servers_total = servers.len();
                servers.truncate(limit);
                let mut replicas = store.replicas().await?;
                let replicas_total = replicas.len();
                replicas.truncate(limit);
                let pause = store.pause(Access::Read).await?;
                Ok(ModelsPage {
                    servers,
                    servers_total,
                    replicas,
                    replicas_total,
                    pause,
                })
            })
        })
        .await
    }

    /// Cancels a rollout unless it has finished
    /// ([`lifecycle::may_cancel`]), checked in the transaction that
    /// cancels: a cancelled rollout's attempt is told to stop and it is not
    /// retried. NOT_FOUND for an unknown rollout.
    pub async fn cancel_rollout(&self, rollout_id: &RolloutId) -> StoreResult<Cancelled> {
        self.run(Scan::Due, |tx| {
            Box::pin(async move {
                let RolloutView {
                    mut rollout,
                    attempt: latest,
                } = tx
                    .rollout(rollout_id, Access::Update)
                    .await?
                    .ok_or_else(|| StoreError::item_not_found("rollout_id", rollout_id))?;
                let before = rollout.status;
                if !lifecycle::may_cancel(before) {
                    return Ok(Cancelled::AlreadyFinished(before));
                }
                // Cancelled is not a queuing status: nothing to enqueue.
                let _ =
                    lifecycle::set_rollout_status(&mut rollout, RolloutStatus::Cancelled, tx.now);
                tx.leave_queue(&rollout, before);
                tx.save_rollout(&rollout, latest.as_ref());
                tx.note_completion(&rollout, Some(before));
                tx.record(Change::RolloutChanged {
                    rollout_id: rollout.rollout_id.clone(),
                    status: rollout.status,
                });
                Ok(Cancelled::Done(Box::new(rollout)))
            })
        })
        .await
    }
}

/// A page window of the first `limit` items in the query's default order.
fn limit(limit: usize) -> Page {
    Page {
        limit: Some(limit),
        ..Page::default()
    }
}

/// Returns the latest `limit` retained events, oldest first, with the
/// bounds of the history.
async fn recent_events_in(store: &mut dyn StoreTx, limit: usize) -> StoreResult<EventPage> {
    let bounds = store.events_after(0, 0).await?;
    let after = bounds
        .latest
        .saturating_sub(limit as u64)
        .max(bounds.oldest.saturating_sub(1));
    store.events_after(after, limit).await
}

/// Returns the session records of `workers` that have one, reading at most
/// `ids_per_list` ids per query.
async fn sessions_of(
    store: &mut dyn StoreTx,
    workers: &[Worker],
    ids_per_list: usize,
) -> StoreResult<Vec<WorkerSession>> {
    let mut sessions = Vec::new();
    for chunk in workers.chunks(ids_per_list) {
        let ids: Vec<&str> = chunk.iter().map(|w| w.worker_id.as_str()).collect();
        sessions.extend(store.sessions(&ids, Access::Read).await?);
    }
    Ok(sessions)
}

/// Counts the open sessions among `sessions`.
fn open(sessions: &[WorkerSession]) -> usize {
    sessions
        .iter()
        .filter(|s| s.state == SessionState::Open)
        .count()
}

/// Reads everything stored of a rollout for its download in `tx`.
async fn read_download(tx: &mut Tx<'_>, rollout_id: &RolloutId) -> StoreResult<RolloutDownload> {
    let view = tx.require_rollout(rollout_id, Access::Read).await?;
    let store = tx.store.as_mut();
    let attempts = store.attempts(rollout_id).await?;
    let spans_evicted = store.spans_evicted(rollout_id).await?;
    let spans = if spans_evicted {
        Vec::new()
    } else {
        let filter = SpanFilter {
            rollout_id: rollout_id.as_str().to_owned(),
            attempt: AttemptSelector::All,
            ..SpanFilter::default()
        };
        store.query_spans(&filter, &Page::default()).await?.items
    };
    let (agl1_events, agl1_error_message) = match store.agl1_rollout_detail(rollout_id).await? {
        Some(detail) => (
            Some(event_attempt_events(store, &detail).await?),
            detail.error_message,
        ),
        None => (None, None),
    };
    Ok(RolloutDownload {
        view,
        attempts,
        spans,
        spans_evicted,
        agl1_events,
        agl1_error_message,
    })
}

/// Returns the events of a 1.x rollout's event attempt (`last_attempt_id`,
/// `"0"` by default) as the API presents them by default.
async fn event_attempt_events(
    store: &mut dyn StoreTx,
    detail: &super::super::agl1::Agl1RolloutDetail,
) -> StoreResult<Vec<super::super::agl1::Agl1Event>> {
    let attempt_id = detail
        .last_attempt_id
        .as_deref()
        .unwrap_or(DEFAULT_ATTEMPT_ID);
    let events = store
        .agl1_events(&detail.rollout_id, attempt_id, None)
        .await?;
    agl1_events::present(
        events.into_iter().map(|e| e.event).collect(),
        &EventQuery::default(),
    )
}

/// Returns a 1.x rollout's part of its page: its first `limit` events, and
/// the diagnosis of all of them.
async fn agl1_part(
    store: &mut dyn StoreTx,
    detail: super::super::agl1::Agl1RolloutDetail,
    limit: usize,
) -> StoreResult<Agl1Part> {
    let mut events = event_attempt_events(store, &detail).await?;
    let diagnosis = diagnosis::diagnose(detail.state(), detail.error_message.as_deref(), &events)?;
    let events_total = events.len();
    events.truncate(limit);
    Ok(Agl1Part {
        detail,
        events,
        events_total,
        diagnosis,
    })
}

/// Returns a resources snapshot; NOT_FOUND when there is none.
async fn require_resources(
    store: &mut dyn StoreTx,
    resources_id: &ResourcesId,
) -> StoreResult<super::super::model::ResourcesUpdate> {
    store
        .resources(resources_id)
        .await?
        .ok_or_else(|| StoreError::resources_not_found(resources_id))
}

/// What the store knows around a waiting rollout.
struct WaitFacts {
    place: Option<QueuePlace>,
    /// Open sessions of the workers read.
    open_sessions: usize,
    /// The latest dequeue of the workers read.
    last_dequeue: Option<Timestamp>,
    pause: super::super::agl1::Pause,
}

impl WaitFacts {
    /// Reads the facts: the rollout's place in the queue, the `workers`
    /// that asked for work last and their sessions, and the gateway's
    /// pause. Workers that never asked for work sort first: with more of
    /// them than `workers`, the latest dequeue is not seen (the reasons
    /// then say no worker asked for work).
    async fn read(
        store: &mut dyn StoreTx,
        rollout_id: &str,
        workers: usize,
        ids_per_list: usize,
    ) -> StoreResult<Self> {
        let place = match store.queue_place(rollout_id).await? {
            Some((ahead, since)) => {
                let queued = store.counts().await?.queued;
                Some(QueuePlace::new(ahead, queued, since))
            }
            None => None,
        };
        let page = Page {
            sort_by: Some("last_dequeue_time".to_owned()),
            descending: true,
            limit: Some(workers),
            offset: 0,
        };
        let workers: Paged<Worker> = store.query_workers(&WorkerFilter::default(), &page).await?;
        let last_dequeue = workers
            .items
            .iter()
            .filter_map(|w| w.last_dequeue_time)
            .max();
        let sessions = sessions_of(store, &workers.items, ids_per_list).await?;
        Ok(Self {
            place,
            open_sessions: open(&sessions),
            last_dequeue,
            pause: store.pause(Access::Read).await?,
        })
    }
}
