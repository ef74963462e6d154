//! Change events: every state change the store makes is recorded, in the
//! same transaction, as an [`Event`] with a store-wide, gapless, increasing
//! sequence number. Backends retain a bounded history of them (so a
//! subscriber can resume after a given number) and the [`EventBus`] pushes
//! them to in-process waiters once committed.

use std::sync::Arc;

use tokio::sync::{Notify, broadcast};

use super::model::{AttemptStatus, RolloutStatus, Timestamp, WorkerStatus};

/// What changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A rollout was created (enqueued or started).
    RolloutCreated {
        rollout_id: String,
        status: RolloutStatus,
    },
    /// A rollout's status changed, or it was updated by a client.
    RolloutChanged {
        rollout_id: String,
        status: RolloutStatus,
    },
    /// An attempt was created.
    AttemptCreated {
        rollout_id: String,
        attempt_id: String,
        sequence_id: u32,
        worker_id: Option<String>,
    },
    /// An attempt's status changed, or it was updated by a client.
    AttemptChanged {
        rollout_id: String,
        attempt_id: String,
        status: AttemptStatus,
    },
    /// Spans were stored for an attempt.
    SpansAdded {
        rollout_id: String,
        attempt_id: String,
        count: u64,
    },
    /// A resources snapshot was added or updated (it is now the latest).
    ResourcesChanged { resources_id: String, version: i64 },
    /// A worker was created or changed (status, assignment or heartbeat).
    WorkerChanged {
        worker_id: String,
        status: WorkerStatus,
    },
    /// A rollout was deleted, with its attempts, spans and 1.x events.
    RolloutDeleted { rollout_id: String },
    /// The LLM gateway was paused or resumed; `generation` counts pauses
    /// and resumes.
    GatewayChanged { paused: bool, generation: i64 },
    /// The gateway's model servers were registered or removed.
    ModelsChanged,
}

/// The kinds of [`Change`], for filtering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    RolloutCreated,
    RolloutChanged,
    AttemptCreated,
    AttemptChanged,
    SpansAdded,
    ResourcesChanged,
    WorkerChanged,
    RolloutDeleted,
    GatewayChanged,
    ModelsChanged,
}

impl Change {
    /// Returns whether the change may have put a rollout into the queue.
    pub fn enqueues(&self) -> bool {
        matches!(
            self,
            Self::RolloutCreated { status, .. } | Self::RolloutChanged { status, .. }
                if matches!(status, RolloutStatus::Queuing | RolloutStatus::Requeuing)
        )
    }

    /// Returns the kind of the change.
    pub fn kind(&self) -> ChangeKind {
        match self {
            Self::RolloutCreated { .. } => ChangeKind::RolloutCreated,
            Self::RolloutChanged { .. } => ChangeKind::RolloutChanged,
            Self::AttemptCreated { .. } => ChangeKind::AttemptCreated,
            Self::AttemptChanged { .. } => ChangeKind::AttemptChanged,
            Self::SpansAdded { .. } => ChangeKind::SpansAdded,
            Self::ResourcesChanged { .. } => ChangeKind::ResourcesChanged,
            Self::WorkerChanged { .. } => ChangeKind::WorkerChanged,
            Self::RolloutDeleted { .. } => ChangeKind::RolloutDeleted,
            Self::GatewayChanged { .. } => ChangeKind::GatewayChanged,
            Self::ModelsChanged => ChangeKind::ModelsChanged,
        }
    }

    /// Returns the rollout the change concerns, if any.
    pub fn rollout_id(&self) -> Option<&str> {
        match self {
            Self::RolloutCreated { rollout_id, .. }
            | Self::RolloutChanged { rollout_id, .. }
            | Self::AttemptCreated { rollout_id, .. }
            | Self::AttemptChanged { rollout_id, .. }
            | Self::SpansAdded { rollout_id, .. }
            | Self::RolloutDeleted { rollout_id } => Some(rollout_id),
            Self::ResourcesChanged { .. }
            | Self::WorkerChanged { .. }
            | Self::GatewayChanged { .. }
            | Self::ModelsChanged => None,
        }
    }
}

/// A committed change with its position in the store's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Store-wide sequence number: 1, 2, 3, ... in commit order, no gaps.
    pub seq: u64,
    /// When the change was made.
    pub time: Timestamp,
    pub change: Change,
}

/// A window of the retained event history.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventPage {
    /// Events after the requested number, in order.
    pub events: Vec<Event>,
    /// The oldest retained sequence number (`latest + 1` when none is retained).
    pub oldest: u64,
    /// The sequence number of the last committed event (0 before the first).
    pub latest: u64,
}

/// Changes collected while a transaction runs; the engine records them in
/// the transaction and publishes them after it commits.
#[derive(Debug, Default)]
pub struct Changes {
    pub changes: Vec<Change>,
    /// True when at least one rollout entered the queue.
    pub enqueued: bool,
    /// Statuses of the attempts that expired (watchdog verdicts and lost
    /// sessions), reported once the transaction commits.
    pub expired: Vec<AttemptStatus>,
}

impl Changes {
    /// Records a change.
    pub fn push(&mut self, change: Change) {
        self.changes.push(change);
    }
}

/// Fans committed events out to in-process waiters. It is a fast path, not
/// the source of truth: events from concurrent commits may arrive out of
/// order, a lagging receiver loses some, and with a backend several servers
/// share an event may arrive twice (committed here, then followed); readers
/// that need every event fill gaps from the store's history, and every
/// reader tolerates repeats.
#[derive(Debug)]
pub struct EventBus {
    events: broadcast::Sender<Arc<Event>>,
    queue: Notify,
    /// Rollouts whose 1.x events this server appended (see
    /// [`EventBus::publish_appended`]).
    appended: broadcast::Sender<Arc<str>>,
}

/// How many append hints a slow receiver may fall behind before it is told
/// it lagged.
const APPENDED_CAPACITY: usize = 1024;

impl EventBus {
    /// Returns a bus whose receivers may lag by up to `capacity` events.
    pub fn new(capacity: usize) -> Self {
        Self {
            events: broadcast::channel(capacity).0,
            queue: Notify::new(),
            appended: broadcast::channel(APPENDED_CAPACITY).0,
        }
    }

    /// Publishes the events of a committed transaction.
    pub fn publish(&self, events: Vec<Event>, enqueued: bool) {
        if enqueued {
            self.queue.notify_waiters();
        }
        if self.events.receiver_count() > 0 {
            for event in events {
                // An error only means every receiver left meanwhile.
                let _ = self.events.send(Arc::new(event));
            }
        }
    }

    /// Returns a receiver of every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// Tells in-process watchers (the console's live pages) that 1.x events
    /// of `rollout_id` were appended here. A hint, not an event of the
    /// history: appends are not change events (they would cost every model
    /// call an event row), so other servers never see it. Free while nobody
    /// listens.
    pub fn publish_appended(&self, rollout_id: &str) {
        if self.appended.receiver_count() > 0 {
            // An error only means every receiver left meanwhile.
            let _ = self.appended.send(Arc::from(rollout_id));
        }
    }

    /// Returns a receiver of the append hints published from now on.
    pub fn subscribe_appended(&self) -> broadcast::Receiver<Arc<str>> {
        self.appended.subscribe()
    }

    /// Returns the notifier that fires whenever rollouts enter the queue.
    pub fn queue_signal(&self) -> &Notify {
        &self.queue
    }
}
