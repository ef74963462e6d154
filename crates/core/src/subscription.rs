//! Ordered, gapless event subscriptions and completion watches. Live events
//! come from the [`super::events::EventBus`]; whatever the bus cannot vouch
//! for (a gap, a lagging receiver, a catch-up) is read from the store's
//! retained history, which is the source of truth.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;

use super::engine::Engine;
use super::error::{StoreError, StoreResult};
use super::events::{Change, ChangeKind, Event};
use super::ids::RolloutId;
use super::model::{AttemptStatus, RolloutStatus, RolloutView};

/// How many history events one catch-up read fetches.
const HISTORY_BATCH: usize = 1024;

/// Why a subscription ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscriptionError {
    /// The requested history is no longer retained.
    #[error(
        "after_seq {after} is older than the retained history (oldest retained event: {oldest}); re-read the state and subscribe without after_seq"
    )]
    HistoryGone { after: u64, oldest: u64 },
    /// The requested position is newer than the latest event.
    #[error("after_seq {after} is newer than the latest event ({latest})")]
    Ahead { after: u64, latest: u64 },
    /// The server is shutting down.
    #[error("{}", crate::error::SHUTTING_DOWN)]
    Closing,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Which events a subscriber wants.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventFilter {
    pub kinds: Option<HashSet<ChangeKind>>,
    pub rollout_ids: Option<HashSet<RolloutId>>,
    pub rollout_status_in: Option<Vec<RolloutStatus>>,
    pub attempt_status_in: Option<Vec<AttemptStatus>>,
}

impl EventFilter {
    /// Returns true when the change passes every given condition.
    pub fn matches(&self, change: &Change) -> bool {
        if let Some(kinds) = &self.kinds
            && !kinds.contains(&change.kind())
        {
            return false;
        }
        if let Some(ids) = &self.rollout_ids
            && !change.rollout_id().is_some_and(|id| ids.contains(id))
        {
            return false;
        }
        match change {
            Change::RolloutCreated { status, .. } | Change::RolloutChanged { status, .. } => self
                .rollout_status_in
                .as_ref()
                .is_none_or(|s| s.contains(status)),
            Change::AttemptChanged { status, .. } => self
                .attempt_status_in
                .as_ref()
                .is_none_or(|s| s.contains(status)),
            _ => true,
        }
    }
}

/// An ordered stream of every event after a position.
pub struct EventSubscription {
    engine: Arc<Engine>,
    live: broadcast::Receiver<Arc<Event>>,
    closing: watch::Receiver<bool>,
    /// Sequence number of the last event returned.
    last: u64,
    /// Events read from history, in order, not yet returned.
    backlog: VecDeque<Event>,
    /// True while history may hold events after the backlog.
    catching_up: bool,
    /// The latest sequence number when the subscription started.
    pub start_latest: u64,
    /// The oldest retained sequence number when the subscription started.
    pub start_oldest: u64,
}

impl EventSubscription {
    /// Returns the sequence number of the last event returned.
    pub fn last_seq(&self) -> u64 {
        self.last
    }

    /// Returns the next event in sequence order: a live one is the bus's
    /// own, shared with every subscriber that holds it.
    pub async fn next(&mut self) -> Result<Arc<Event>, SubscriptionError> {
        loop {
            if let Some(event) = self.backlog.pop_front() {
                if event.seq <= self.last {
                    continue;
                }
                debug_assert_eq!(event.seq, self.last + 1, "history is gapless");
                self.last = event.seq;
                return Ok(Arc::new(event));
            }
            if self.catching_up {
                self.read_history().await?;
                continue;
            }
            if *self.closing.borrow() {
                return Err(SubscriptionError::Closing);
            }
            let received = tokio::select! {
                received = self.live.recv() => received,
                _ = self.closing.changed() => return Err(SubscriptionError::Closing),
            };
            match received {
                Ok(event) if event.seq <= self.last => {}
                Ok(event) if event.seq == self.last + 1 => {
                    self.last = event.seq;
                    return Ok(event);
                }
                // A gap (concurrent commits published out of order) or a
                // lagging receiver: the history has what the bus skipped.
                Ok(_) | Err(RecvError::Lagged(_)) => self.catching_up = true,
                Err(RecvError::Closed) => return Err(SubscriptionError::Closing),
            }
        }
    }

    async fn read_history(&mut self) -> Result<(), SubscriptionError> {
        let page = self.engine.events_after(self.last, HISTORY_BATCH).await?;
        if page.oldest > self.last + 1 && page.latest > self.last {
            return Err(SubscriptionError::HistoryGone {
                after: self.last,
                oldest: page.oldest,
            });
        }
        self.catching_up = page.events.last().is_some_and(|e| e.seq < page.latest);
        self.backlog.extend(page.events);
        Ok(())
    }
}

impl Engine {
    /// Subscribes to the events after `after` (`None`: from now on).
    pub async fn subscribe(
        self: &Arc<Self>,
        after: Option<u64>,
    ) -> Result<EventSubscription, SubscriptionError> {
        // Listen before reading the history, so nothing falls in between.
        let live = self.events().subscribe();
        let page = self.events_after(0, 0).await?;
        let last = after.unwrap_or(page.latest);
        if last > page.latest {
            return Err(SubscriptionError::Ahead {
                after: last,
                latest: page.latest,
            });
        }
        if last + 1 < page.oldest && last < page.latest {
            return Err(SubscriptionError::HistoryGone {
                after: last,
                oldest: page.oldest,
            });
        }
        Ok(EventSubscription {
            engine: self.clone(),
            live,
            closing: self.closing(),
            last,
            backlog: VecDeque::new(),
            catching_up: last < page.latest,
            start_latest: page.latest,
            start_oldest: page.oldest,
        })
    }

    /// Watches rollouts until each known one is terminal: returns a receiver
    /// of the terminal rollouts (already terminal ones first, then in
    /// completion order) that closes after the last one. Unknown ids are
    /// omitted.
    pub async fn watch_completions(
        self: &Arc<Self>,
        rollout_ids: Vec<RolloutId>,
    ) -> StoreResult<CompletionWatch> {
        let live = self.events().subscribe();
        let mut found = self.get_rollouts(&rollout_ids).await?;
        let mut pending = HashSet::new();
        let mut ready = VecDeque::new();
        // In request order, each id once; unknown ids are omitted.
        for rollout_id in rollout_ids {
            match found.remove(rollout_id.as_str()) {
                Some(view) if view.rollout.status.is_finished() => ready.push_back(view),
                Some(_) => {
                    pending.insert(rollout_id);
                }
                None => {}
            }
        }
        Ok(CompletionWatch {
            engine: self.clone(),
            live,
            closing: self.closing(),
            pending,
            ready,
        })
    }
}

/// Terminal rollouts as they finish; see [`Engine::watch_completions`].
pub struct CompletionWatch {
    engine: Arc<Engine>,
    live: broadcast::Receiver<Arc<Event>>,
    closing: watch::Receiver<bool>,
    pending: HashSet<RolloutId>,
    ready: VecDeque<RolloutView>,
}

impl CompletionWatch {
    /// Reads a watched rollout again; `None` once it was deleted.
    async fn reread(
        &self,
        rollout_id: &RolloutId,
    ) -> Result<Option<RolloutView>, SubscriptionError> {
        match self.engine.get_rollout(rollout_id).await {
            Ok(view) => Ok(Some(view)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Returns the next terminal rollout, or `None` when every watched
    /// rollout was returned.
    pub async fn next(&mut self) -> Result<Option<RolloutView>, SubscriptionError> {
        loop {
            if let Some(view) = self.ready.pop_front() {
                return Ok(Some(view));
            }
            if self.pending.is_empty() {
                return Ok(None);
            }
            if *self.closing.borrow() {
                return Err(SubscriptionError::Closing);
            }
            let received = tokio::select! {
                received = self.live.recv() => received,
                _ = self.closing.changed() => return Err(SubscriptionError::Closing),
            };
            match received {
                Ok(event) => match &event.change {
                    Change::RolloutChanged { rollout_id, status } if status.is_finished() => {
                        // Deleted meanwhile: omitted, as unknown ids are.
                        if let Some(rollout_id) = self.pending.take(rollout_id.as_str())
                            && let Some(view) = self.reread(&rollout_id).await?
                        {
                            self.ready.push_back(view);
                        }
                    }
                    Change::RolloutDeleted { rollout_id } => {
                        self.pending.remove(rollout_id.as_str());
                    }
                    _ => {}
                },
                Err(RecvError::Lagged(_)) => {
                    // Some completions were skipped: re-read what is still
                    // pending, in one transaction.
                    let pending: Vec<RolloutId> = self.pending.iter().cloned().collect();
                    let mut found = self.engine.get_rollouts(&pending).await?;
                    for rollout_id in pending {
                        match found.remove(rollout_id.as_str()) {
                            Some(view) if view.rollout.status.is_finished() => {
                                self.pending.remove(&rollout_id);
                                self.ready.push_back(view);
                            }
                            Some(_) => {}
                            None => {
                                self.pending.remove(&rollout_id);
                            }
                        }
                    }
                }
                Err(RecvError::Closed) => return Err(SubscriptionError::Closing),
            }
        }
    }
}
