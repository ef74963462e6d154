//! In-process change notifications: what waits (dequeue with a wait, wait
//! for rollouts) and, later, what streams subscribe to. Changes are
//! published only after their transaction committed.

use std::sync::Arc;

use tokio::sync::{Notify, broadcast};

use super::model::{Attempt, ResourcesUpdate, Rollout, Worker};

/// A committed change of the store's state.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreEvent {
    /// A rollout was created or changed; carries its new state.
    RolloutChanged(Rollout),
    /// An attempt was created or changed; carries its new state.
    AttemptChanged(Attempt),
    /// Spans were stored for an attempt.
    SpansAdded {
        rollout_id: String,
        attempt_id: String,
        count: usize,
    },
    /// A resources snapshot was added or updated (and is now the latest).
    ResourcesChanged(ResourcesUpdate),
    /// A worker was created or changed; carries its new state.
    WorkerChanged(Worker),
}

/// Changes collected while a transaction runs, published after it commits.
#[derive(Debug, Default)]
pub struct Changes {
    pub events: Vec<StoreEvent>,
    /// True when at least one rollout entered the queue.
    pub enqueued: bool,
}

impl Changes {
    /// Records an event.
    pub fn push(&mut self, event: StoreEvent) {
        self.events.push(event);
    }
}

/// Fans committed changes out to in-process waiters.
#[derive(Debug)]
pub struct EventBus {
    events: broadcast::Sender<Arc<StoreEvent>>,
    queue: Notify,
}

impl EventBus {
    /// Returns a bus whose subscribers may lag by up to `capacity` events
    /// before they are told to re-read the store.
    pub fn new(capacity: usize) -> Self {
        Self {
            events: broadcast::channel(capacity).0,
            queue: Notify::new(),
        }
    }

    /// Publishes the changes of a committed transaction.
    pub fn publish(&self, changes: Changes) {
        if changes.enqueued {
            self.queue.notify_waiters();
        }
        if self.events.receiver_count() > 0 {
            for event in changes.events {
                // An error only means every subscriber left meanwhile.
                let _ = self.events.send(Arc::new(event));
            }
        }
    }

    /// Returns a receiver of every change published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoreEvent>> {
        self.events.subscribe()
    }

    /// Returns the notifier that fires whenever rollouts enter the queue.
    pub fn queue_signal(&self) -> &Notify {
        &self.queue
    }
}
