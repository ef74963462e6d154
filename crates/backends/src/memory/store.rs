//! The in-memory store: one state behind one lock, which every
//! transaction holds.

use async_trait::async_trait;
use tokio::sync::Mutex;

use super::state::{MemoryTx, State, Undo};
use lightning_store_core::error::StoreResult;
use lightning_store_core::storage::{DEFAULT_EVENT_RETENTION, Store, StoreTx};

/// The in-memory backend.
pub struct MemoryStore {
    state: Mutex<State>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// Returns an empty store retaining [`DEFAULT_EVENT_RETENTION`] events.
    pub fn new() -> Self {
        Self::with_event_retention(DEFAULT_EVENT_RETENTION)
    }

    /// Returns an empty store retaining the last `events` events.
    pub fn with_event_retention(events: usize) -> Self {
        Self {
            state: Mutex::new(State {
                event_retention: events.max(1),
                ..State::default()
            }),
        }
    }

    /// Returns the bytes of the spans it holds (as retention counts them).
    pub(crate) async fn span_bytes(&self) -> u64 {
        self.state.lock().await.span_bytes
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn exclusive(&self) -> bool {
        true
    }

    async fn begin(&self) -> StoreResult<Box<dyn StoreTx + '_>> {
        Ok(Box::new(MemoryTx {
            state: self.state.lock().await,
            undo: Undo::default(),
            evict: Vec::new(),
        }))
    }
}
